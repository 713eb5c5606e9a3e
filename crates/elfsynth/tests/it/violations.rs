//! `check_layout` notices broken files, and the oracle never panics on
//! malformed input.

use crate::common;

use common::*;
use elfsynth::oracle::{self, check_layout};
use elfsynth::strategy::arb_spec;
use elfsynth::{Class, Endian, Spec};
use proptest::prelude::*;

/// Little helper to patch fields of a built file.
struct Patch {
    bytes: Vec<u8>,
    big: bool,
    is64: bool,
}

impl Patch {
    fn new(spec: &Spec) -> Patch {
        Patch {
            bytes: build_and_check(spec),
            big: spec.endian == Endian::Big,
            is64: spec.class == Class::Elf64,
        }
    }
    fn put(&mut self, off: u64, size: usize, v: u64) {
        let b = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        let b = if self.big { &b[8 - size..] } else { &b[..size] };
        self.bytes[off as usize..off as usize + size].copy_from_slice(b);
    }
    fn word(&mut self, off: u64, v: u64) {
        self.put(off, if self.is64 { 8 } else { 4 }, v)
    }
    fn phdr(&self, i: usize) -> u64 {
        let h = oracle::read(&self.bytes).unwrap().header;
        h.e_phoff + i as u64 * u64::from(h.e_phentsize)
    }
    /// Offset of p_flags / p_offset / p_vaddr in a program header.
    fn p_flags(&self, i: usize) -> u64 {
        self.phdr(i) + if self.is64 { 4 } else { 24 }
    }
    fn p_offset(&self, i: usize) -> u64 {
        self.phdr(i) + if self.is64 { 8 } else { 4 }
    }
    fn load_index(&self, n: usize) -> usize {
        let elf = oracle::read(&self.bytes).unwrap();
        elf.program_headers
            .iter()
            .enumerate()
            .filter(|(_, p)| p.p_type == PT_LOAD)
            .nth(n)
            .unwrap()
            .0
    }
    /// File offset of the d_val of the first dynamic entry with `tag`.
    fn dyn_val(&self, tag: u64) -> u64 {
        let elf = oracle::read(&self.bytes).unwrap();
        let pd = elf
            .program_headers
            .iter()
            .find(|p| p.p_type == PT_DYNAMIC)
            .unwrap();
        let i = elf.dynamic.iter().position(|e| e.tag == tag).unwrap() as u64;
        let ws = if self.is64 { 8 } else { 4 };
        pd.p_offset + i * 2 * ws + ws
    }
    fn expect(&self, needle: &str) {
        let v = check_layout(&self.bytes);
        assert!(
            v.iter().any(|m| m.contains(needle)),
            "expected a violation containing {needle:?}, got {v:#?}"
        );
    }
}

fn specs() -> Vec<Spec> {
    vec![
        Spec::default(),
        Spec {
            class: Class::Elf32,
            endian: Endian::Big,
            machine: elfsynth::Machine::Ppc64,
            with_section_headers: false,
            hash: elfsynth::HashStyle::Both,
            ..Spec::default()
        },
    ]
}

#[test]
fn dynamic_in_read_only_segment() {
    for s in specs() {
        let mut p = Patch::new(&s);
        let rw = p.load_index(2);
        let off = p.p_flags(rw);
        p.put(off, 4, 4);
        p.expect("PT_DYNAMIC (phdr");
        p.expect("read-only PT_LOAD");
    }
}

#[test]
fn incongruent_offset() {
    for s in specs() {
        let mut p = Patch::new(&s);
        let rw = p.load_index(2);
        let off = p.p_offset(rw);
        let elf = oracle::read(&p.bytes).unwrap();
        p.word(off, elf.program_headers[rw].p_offset + 8);
        p.expect("not congruent to p_vaddr");
        p.expect("is not inside a PT_LOAD");
    }
}

#[test]
fn unsorted_loads() {
    for s in specs() {
        let mut p = Patch::new(&s);
        let (a, b) = (p.phdr(p.load_index(0)), p.phdr(p.load_index(1)));
        let size = if p.is64 { 56 } else { 32 };
        let ea: Vec<u8> = p.bytes[a as usize..a as usize + size].to_vec();
        let eb: Vec<u8> = p.bytes[b as usize..b as usize + size].to_vec();
        p.bytes[a as usize..a as usize + size].copy_from_slice(&eb);
        p.bytes[b as usize..b as usize + size].copy_from_slice(&ea);
        p.expect("not sorted by p_vaddr");
    }
}

#[test]
fn overlapping_loads() {
    for s in specs() {
        let mut p = Patch::new(&s);
        let first = p.load_index(0);
        let elf = oracle::read(&p.bytes).unwrap();
        let ph = elf.program_headers[first];
        let sizes = if p.is64 { (32, 40) } else { (16, 20) };
        p.word(p.phdr(first) + sizes.0, ph.p_filesz + 0x1000 * 64);
        p.word(p.phdr(first) + sizes.1, ph.p_memsz + 0x1000 * 64);
        p.expect("overlap in memory");
    }
}

#[test]
fn truncated_file() {
    for s in specs() {
        let mut p = Patch::new(&s);
        p.bytes.pop();
        assert!(!check_layout(&p.bytes).is_empty());
    }
    let mut p = Patch::new(&specs()[1]);
    p.bytes.pop();
    p.expect("outside the");
}

fn clobber_foobar(spec: &Spec) -> Patch {
    let mut p = Patch::new(spec);
    let layout = elfsynth::layout(spec).unwrap();
    let dynstr = layout.section(".dynstr").unwrap();
    let pos = layout
        .dynstr
        .windows(7)
        .position(|w| w == b"foobar\0")
        .unwrap() as u64;
    // Someone rewrites "foobar" in place as "fooBAR": "bar" is renamed too.
    let at = (dynstr.offset + pos + 3) as usize;
    p.bytes[at..at + 3].copy_from_slice(b"BAR");
    let elf = oracle::read(&p.bytes).unwrap();
    assert_eq!(
        elf.dynsym_names().iter().filter(|n| **n == "BAR").count(),
        1
    );
    p
}

#[test]
fn clobbered_shared_tail_is_detected() {
    // Enough symbols for a 17-bucket .hash, so the renamed symbols land in
    // other buckets (a rename within the same bucket is undetectable).
    let mut dynsyms: Vec<String> = (0..20).map(|i| format!("pad{i}")).collect();
    dynsyms.extend(["foobar".to_string(), "bar".into()]);
    for hash in [elfsynth::HashStyle::Sysv, elfsynth::HashStyle::Gnu] {
        let spec = Spec {
            dynsyms: dynsyms.clone(),
            undefined_dynsyms: 0,
            tail_merge: true,
            hash,
            ..Spec::default()
        };
        let p = clobber_foobar(&spec);
        let v = check_layout(&p.bytes);
        let table = if hash == elfsynth::HashStyle::Sysv {
            "DT_HASH"
        } else {
            "DT_GNU_HASH"
        };
        assert!(
            v.iter().any(|m| m.contains("\"BAR\"") && m.contains(table)),
            "{hash:?}: {v:#?}"
        );
    }
}

#[test]
fn string_table_too_short() {
    for s in specs() {
        let mut p = Patch::new(&s);
        let off = p.dyn_val(10); // DT_STRSZ
        p.word(off, 3);
        p.expect("string");
    }
}

#[test]
fn stale_pointer() {
    for s in specs() {
        let mut p = Patch::new(&s);
        let off = p.dyn_val(12); // DT_INIT
        p.word(off, 0x7fff_0000);
        p.expect("is not inside a PT_LOAD");
    }
    let mut p = Patch::new(&Spec::default());
    let off = p.dyn_val(6); // DT_SYMTAB
    let elf = oracle::read(&p.bytes).unwrap();
    let v = elf.dyn_entry(6).unwrap().value;
    p.word(off, v + 24);
    p.expect("differs from section '.dynsym'");
}

#[test]
fn phdr_after_load() {
    let mut p = Patch::new(&Spec::default());
    let (a, b) = (p.phdr(0), p.phdr(p.load_index(0)));
    let ea: Vec<u8> = p.bytes[a as usize..a as usize + 56].to_vec();
    let eb: Vec<u8> = p.bytes[b as usize..b as usize + 56].to_vec();
    p.bytes[a as usize..a as usize + 56].copy_from_slice(&eb);
    p.bytes[b as usize..b as usize + 56].copy_from_slice(&ea);
    p.expect("PT_PHDR (phdr");
    p.expect("does not precede every PT_LOAD");
}

#[test]
fn bad_sh_link() {
    let mut p = Patch::new(&Spec::default());
    let elf = oracle::read(&p.bytes).unwrap();
    let i = elf
        .sections
        .iter()
        .position(|s| s.name == ".dynsym")
        .unwrap() as u64;
    p.put(elf.header.e_shoff + i * 64 + 40, 4, 999);
    p.expect("sh_link 999 is not a valid section index");
}

#[test]
fn mips_rld_map_rel_moved() {
    for class in Class::ALL {
        let spec = Spec {
            machine: elfsynth::Machine::Mips,
            class,
            endian: Endian::Big,
            ..Spec::default()
        };
        let mut p = Patch::new(&spec);
        let off = p.dyn_val(DT_MIPS_RLD_MAP_REL);
        let elf = oracle::read(&p.bytes).unwrap();
        let v = elf.dyn_entry(DT_MIPS_RLD_MAP_REL).unwrap().value;
        p.word(off, v + 8);
        p.expect("differs from .rld_map");
        p.word(off, v.wrapping_add(0x100_0000));
        p.expect("is not inside a writable PT_LOAD");
    }
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for bytes in [
        &b""[..],
        b"\x7fELF",
        b"\x7fELF\x02\x01\x01",
        &[0u8; 64][..],
        b"\x7fELF\x03\x01",
    ] {
        assert!(oracle::read(bytes).is_err());
        assert!(!check_layout(bytes).is_empty());
    }
}

fn arb_mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        arb_spec(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..12),
        prop::option::weighted(0.2, any::<prop::sample::Index>()),
    )
        .prop_map(|(spec, muts, cut)| {
            let mut b = elfsynth::build(&spec);
            let layout = elfsynth::layout(&spec).unwrap();
            let dynamic = layout.section(".dynamic").unwrap().clone();
            let hot = layout.sections[1].offset as usize; // headers end here
            for (idx, val, region) in muts {
                let pos = match region {
                    0 => idx.index(b.len()),
                    1 => idx.index(hot.max(1)),
                    2 => dynamic.offset as usize + idx.index(dynamic.size as usize),
                    _ => {
                        // Byte-level damage to a length/offset field: set a
                        // high byte so values become huge.
                        idx.index(hot.max(1))
                    }
                };
                b[pos] = if region == 3 { 0xff } else { val };
            }
            if let Some(c) = cut {
                let n = c.index(b.len());
                b.truncate(n);
            }
            b
        })
}

/// 512 cases by default; set `ELFSYNTH_FUZZ_CASES` for a longer run.
#[test]
fn oracle_never_panics() {
    let cases = std::env::var("ELFSYNTH_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    runner
        .run(&arb_mutated(), |bytes| {
            let _ = oracle::read(&bytes);
            let _ = check_layout(&bytes);
            Ok(())
        })
        .unwrap();
}

/// The rest of a segment's last page is mapped from the file (both loaders map whole pages), so
/// tables there are inside the segment; once `p_memsz > p_filesz` loaders zero that rest, and
/// the same tables are outside every segment.
#[test]
fn tables_in_a_page_tail_are_mapped_until_the_segment_zeroes_it() {
    for s in specs() {
        let spec = Spec {
            tail_bytes: 0x1000,
            ..s
        };
        // build_and_check: no violation, and the oracle reads every table back.
        let mut p = Patch::new(&spec);
        let elf = oracle::read(&p.bytes).unwrap();
        let first = p.load_index(0);
        let ph = elf.program_headers[first];
        let layout = elfsynth::layout(&spec).unwrap();
        let dynstr = layout.section(".dynstr").unwrap();
        assert!(
            dynstr.offset + dynstr.size > ph.p_filesz,
            ".dynstr is not in the tail"
        );
        let memsz_at = p.phdr(first) + if p.is64 { 40 } else { 20 };
        p.word(memsz_at, ph.p_filesz + 1);
        let v = check_layout(&p.bytes);
        assert!(
            v.iter().any(|m| m.contains("not inside a PT_LOAD")
                || m.contains("inside 0 PT_LOADs")
                || m.contains("not mapped from the file")),
            "zeroed tail still counted as mapped: {v:#?}"
        );
    }
}
