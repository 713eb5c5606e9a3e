//! Built files satisfy the layout invariants and read back as specified.

use crate::common;

use common::*;
use elfsynth::oracle;
use elfsynth::strategy::arb_spec;
use elfsynth::{Class, FileType, Spec};
use proptest::prelude::*;

#[test]
fn default_spec_is_a_typical_x86_64_pie() {
    let s = Spec::default();
    let bytes = build_and_check(&s);
    let elf = oracle::read(&bytes).unwrap();
    assert_eq!(elf.header.e_machine, 62);
    assert_eq!(elf.header.e_type, 3);
    assert_eq!(
        elf.interpreter.as_deref(),
        Some("/lib64/ld-linux-x86-64.so.2")
    );
    assert_eq!(elf.needed, ["libm.so.6", "libc.so.6"]);
    assert_eq!(elf.runpath.as_deref(), Some("$ORIGIN/../lib"));
}

#[test]
fn fixed_matrix() {
    let m = matrix();
    assert_eq!(m.len(), 8 * 2 * 2 * 2 * 3);
    for s in &m {
        build_and_check(s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_specs_round_trip(spec in arb_spec()) {
        build_and_check(&spec);
    }
}

/// `.dynstr` offset range `[start, start + len)` of the string a tag points at.
fn string_range(bytes: &[u8], tag: u64) -> (u64, u64) {
    let elf = oracle::read(bytes).unwrap();
    let e = elf.dyn_entry(tag).unwrap();
    (e.value, e.value + e.string.as_ref().unwrap().len() as u64)
}

#[test]
fn tail_merging_really_happens() {
    let spec = Spec {
        runpath: Some("/opt/x/libdep.so".into()),
        needed: vec!["libdep.so".into(), "libc.so.6".into()],
        verneed: vec![("libc.so.6".into(), vec!["GLIBC_2.2.5".into()])],
        dynsyms: vec!["foo".into(), "bar".into(), "foobar".into(), "xfoo".into()],
        undefined_dynsyms: 2,
        tail_merge: true,
        ..Spec::default()
    };
    let bytes = build_and_check(&spec);
    let elf = oracle::read(&bytes).unwrap();
    let (rp_start, rp_end) = string_range(&bytes, DT_RUNPATH);
    let needed = elf.dynamic.iter().find(|e| e.tag == DT_NEEDED).unwrap();
    assert_eq!(needed.string.as_deref(), Some("libdep.so"));
    // The NEEDED string lives inside the RUNPATH string's bytes.
    assert!(
        needed.value > rp_start && needed.value < rp_end,
        "{needed:?} not in {rp_start:#x}..{rp_end:#x}"
    );
    assert_eq!(needed.value, rp_start + "/opt/x/".len() as u64);

    // Symbol names share bytes too: "foo" inside "xfoo", "bar" inside "foobar".
    let layout = elfsynth::layout(&spec).unwrap();
    let off = |s: &str| {
        let pos = layout
            .dynstr
            .windows(s.len() + 2)
            .position(|w| w[0] == 0 && &w[1..=s.len()] == s.as_bytes() && w[s.len() + 1] == 0);
        pos.map(|p| p + 1)
    };
    assert!(off("bar").is_none(), "bar has its own copy");
    assert!(off("foo").is_none(), "foo has its own copy");
    assert!(off("foobar").is_some() && off("xfoo").is_some());
    assert!(off("libdep.so").is_none());

    // Without tail merging every string has its own copy.
    let plain = Spec {
        tail_merge: false,
        ..spec
    };
    let bytes = build_and_check(&plain);
    let elf = oracle::read(&bytes).unwrap();
    let (rp_start, rp_end) = string_range(&bytes, DT_RUNPATH);
    let needed = elf.dynamic.iter().find(|e| e.tag == DT_NEEDED).unwrap();
    assert!(needed.value < rp_start || needed.value >= rp_end);
}

#[test]
fn verneed_file_names_share_needed_offsets() {
    let bytes = build_and_check(&Spec::default());
    let elf = oracle::read(&bytes).unwrap();
    let layout = elfsynth::layout(&Spec::default()).unwrap();
    // Every NEEDED string appears exactly once in .dynstr.
    for n in &elf.needed {
        let pat: Vec<u8> = [&[0u8][..], n.as_bytes(), &[0]].concat();
        let count = layout
            .dynstr
            .windows(pat.len())
            .filter(|w| *w == &pat[..])
            .count();
        assert_eq!(count, 1, "{n}");
    }
}

#[test]
fn shared_rpath_runpath_points_at_one_offset() {
    let spec = Spec {
        rpath: Some("/ignored".into()),
        runpath: Some("/opt/lib".into()),
        shared_rpath_runpath: true,
        ..Spec::default()
    };
    let bytes = build_and_check(&spec);
    assert_eq!(
        string_range(&bytes, DT_RPATH),
        string_range(&bytes, DT_RUNPATH)
    );
    let elf = oracle::read(&bytes).unwrap();
    assert_eq!(elf.rpath.as_deref(), Some("/opt/lib"));
    assert!(!elfsynth::layout(&spec)
        .unwrap()
        .dynstr
        .windows(8)
        .any(|w| w == b"/ignored"));
}

#[test]
fn mips_rld_map_rel_is_relative_to_its_slot() {
    for class in Class::ALL {
        let spec = Spec {
            machine: elfsynth::Machine::Mips,
            class,
            endian: elfsynth::Endian::Big,
            e_type: FileType::Exec,
            base: 0x40_0000,
            page_size: 0x10000,
            ..Spec::default()
        };
        let bytes = build_and_check(&spec);
        let layout = elfsynth::layout(&spec).unwrap();
        let dynamic = layout.section(".dynamic").unwrap();
        let rld = layout.section(".rld_map").unwrap();
        let idx = layout
            .dynamic
            .iter()
            .position(|e| e.0 == DT_MIPS_RLD_MAP_REL)
            .unwrap() as u64;
        let ent = 2 * class.word_size();
        assert_eq!(
            dynamic.addr + idx * ent + layout.dynamic[idx as usize].1,
            rld.addr
        );
        let rw = layout
            .segments
            .iter()
            .filter(|s| s.p_type == PT_LOAD)
            .nth(2)
            .unwrap();
        assert!(rld.addr >= rw.vaddr && rld.addr + class.word_size() <= rw.vaddr + rw.memsz);
        assert!(oracle::check_layout(&bytes).is_empty());
    }
}

#[test]
fn s390x_64_uses_8_byte_hash_entries() {
    let spec = Spec {
        machine: elfsynth::Machine::S390x,
        endian: elfsynth::Endian::Big,
        hash: elfsynth::HashStyle::Sysv,
        with_section_headers: false,
        ..Spec::default()
    };
    build_and_check(&spec);
    let layout = elfsynth::layout(&spec).unwrap();
    let hash = layout.section(".hash").unwrap();
    assert_eq!(hash.entsize, 8);
    // nbucket + nchain + buckets + chains, 8 bytes each.
    assert_eq!(hash.size % 8, 0);
}

#[test]
fn invalid_specs_are_refused() {
    let bad = [
        Spec {
            needed: vec!["a\0b".into()],
            ..Spec::default()
        },
        Spec {
            page_size: 0x3000,
            ..Spec::default()
        },
        Spec {
            page_size: 0x800,
            ..Spec::default()
        },
        Spec {
            base: 0x1234,
            ..Spec::default()
        },
        Spec {
            undefined_dynsyms: 99,
            ..Spec::default()
        },
        Spec {
            verneed: vec![("libc.so.6".into(), vec![])],
            ..Spec::default()
        },
        Spec {
            class: Class::Elf32,
            text_size: 5 << 30,
            ..Spec::default()
        },
    ];
    for s in &bad {
        assert!(s.validate().is_err(), "{s:?}");
        let mut cur = std::io::Cursor::new(Vec::new());
        let e = elfsynth::build_to(s, &mut cur).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
}

#[test]
fn dynsym_count_without_section_headers() {
    // Counting .dynsym without section headers: through DT_HASH's nchain,
    // or by walking DT_GNU_HASH (including the corner cases of no defined
    // symbols and no symbols at all).
    let cases: [(Vec<&str>, usize); 4] = [
        (vec!["a", "b", "c", "d", "e"], 2),
        (vec!["a", "b"], 2),
        (vec![], 0),
        (vec!["only"], 0),
    ];
    for hash in [
        elfsynth::HashStyle::Sysv,
        elfsynth::HashStyle::Gnu,
        elfsynth::HashStyle::Both,
    ] {
        for (syms, undef) in &cases {
            let spec = Spec {
                dynsyms: syms.iter().map(|s| s.to_string()).collect(),
                undefined_dynsyms: *undef,
                verneed: vec![],
                with_section_headers: false,
                hash,
                ..Spec::default()
            };
            let bytes = build_and_check(&spec);
            let elf = oracle::read(&bytes).unwrap();
            assert_eq!(elf.dynsyms.len(), syms.len(), "{hash:?} {syms:?}");
        }
    }
}
