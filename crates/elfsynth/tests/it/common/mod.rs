//! Shared helpers for the elfsynth integration tests.
#![allow(dead_code)]

use std::io::Cursor;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use elfsynth::oracle::{self, Elf};
use elfsynth::{AfterPhdrs, Class, Endian, FileType, Machine, Spec};

pub const PT_NULL: u32 = 0;
pub const PT_LOAD: u32 = 1;
pub const PT_DYNAMIC: u32 = 2;
pub const PT_PHDR: u32 = 6;
pub const DT_NEEDED: u64 = 1;
pub const DT_DEBUG: u64 = 21;
pub const DT_RPATH: u64 = 15;
pub const DT_RUNPATH: u64 = 29;
pub const DT_MIPS_RLD_MAP_REL: u64 = 0x7000_0035;

/// e_machine numbers, written out independently of `Machine::e_machine`.
pub fn expected_e_machine(m: Machine) -> u16 {
    match m {
        Machine::X86_64 => 62,
        Machine::I386 => 3,
        Machine::AArch64 => 183,
        Machine::Arm => 40,
        Machine::Ppc64 => 21,
        Machine::S390x => 22,
        Machine::RiscV => 243,
        Machine::Mips => 8,
    }
}

/// Builds `spec`, checks layout invariants and that the oracle reads back
/// exactly what the spec asked for. Returns the bytes.
pub fn build_and_check(spec: &Spec) -> Vec<u8> {
    let bytes = elfsynth::build(spec);
    let layout = elfsynth::layout(spec).expect("layout");
    assert_eq!(bytes.len() as u64, layout.file_size);

    // Deterministic, and build_to gives the same bytes.
    assert_eq!(bytes, elfsynth::build(spec), "build is not deterministic");
    let mut cur = Cursor::new(Vec::new());
    elfsynth::build_to(spec, &mut cur).expect("build_to");
    assert!(cur.into_inner() == bytes, "build_to differs from build");

    let violations = oracle::check_layout(&bytes);
    assert!(
        violations.is_empty(),
        "layout violations for {spec:#?}:\n{violations:#?}"
    );
    let elf = oracle::read(&bytes).unwrap_or_else(|e| panic!("oracle failed: {e} for {spec:#?}"));
    check_model(spec, &elf);

    // The oracle agrees with the builder's own account of the layout.
    let phdrs: Vec<_> = elf
        .program_headers
        .iter()
        .map(|p| {
            (
                p.p_type, p.p_flags, p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz, p.p_align,
            )
        })
        .collect();
    let segs: Vec<_> = layout
        .segments
        .iter()
        .map(|s| {
            (
                s.p_type, s.p_flags, s.offset, s.vaddr, s.filesz, s.memsz, s.align,
            )
        })
        .collect();
    assert_eq!(phdrs, segs);
    if spec.with_section_headers {
        let got: Vec<_> = elf
            .sections
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.sh_type,
                    s.flags,
                    s.addr,
                    s.offset,
                    s.size,
                    s.link,
                    s.info,
                    s.addralign,
                    s.entsize,
                )
            })
            .collect();
        let want: Vec<_> = layout
            .sections
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.sh_type,
                    s.flags,
                    s.addr,
                    s.offset,
                    s.size,
                    s.link,
                    s.info,
                    s.addralign,
                    s.entsize,
                )
            })
            .collect();
        assert_eq!(got, want);
    }
    bytes
}

/// Compares the oracle's model with the spec.
pub fn check_model(spec: &Spec, elf: &Elf) {
    let h = &elf.header;
    assert_eq!(h.class, if spec.class == Class::Elf64 { 2 } else { 1 });
    assert_eq!(h.data, if spec.endian == Endian::Big { 2 } else { 1 });
    assert_eq!(h.e_type, if spec.e_type == FileType::Exec { 2 } else { 3 });
    assert_eq!(h.e_machine, expected_e_machine(spec.machine));
    assert_eq!(h.e_flags, spec.machine.e_flags(spec.class, spec.endian));
    assert_eq!(h.e_version, 1);

    assert_eq!(elf.interpreter, spec.interp);
    assert_eq!(elf.needed, spec.needed);
    assert_eq!(elf.soname, spec.soname);
    assert_eq!(elf.rpath.as_deref(), spec.effective_rpath());
    assert_eq!(elf.runpath, spec.runpath);
    assert_eq!(elf.verneed, spec.verneed);
    assert_eq!(elf.verdef, spec.verdef);

    // Dynamic symbols: undefined ones first in spec order, then the defined
    // ones (possibly reordered by GNU hash bucket).
    let nundef = spec.undefined_dynsyms;
    let names = elf.dynsym_names();
    assert_eq!(names.len(), spec.dynsyms.len());
    assert_eq!(
        names[..nundef],
        spec.dynsyms[..nundef]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()[..]
    );
    let mut a: Vec<&str> = names[nundef..].to_vec();
    let mut b: Vec<&str> = spec.dynsyms[nundef..].iter().map(String::as_str).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(names, spec.dynsym_names_in_order().unwrap());
    for (i, s) in elf.dynsyms.iter().enumerate() {
        assert_eq!(s.shndx == 0, i < nundef, "symbol {i} definedness");
        let versioned = !spec.verneed.is_empty() || !spec.verdef.is_empty();
        assert_eq!(s.version.is_some(), versioned);
        // Version indices: 1 = global; verdefs are 1..=n; verneeds follow.
        let ndef = spec.verdef.len() as u16;
        let naux: usize = spec.verneed.iter().map(|v| v.1.len()).sum();
        if let Some(v) = s.version {
            if i < nundef && naux > 0 {
                assert!(
                    v > ndef.max(1) && v <= ndef.max(1) + naux as u16,
                    "undefined sym {i} version {v}"
                );
            } else if i >= nundef && ndef > 1 {
                assert!((2..=ndef).contains(&v), "defined sym {i} version {v}");
            } else {
                assert_eq!(v, 1);
            }
        }
    }

    // .dynamic shape.
    let spare = elf.dynamic_slots - elf.dynamic.len() - 1;
    assert_eq!(spare, spec.spare_dynamic_slots);
    assert_eq!(elf.dyn_entry(DT_DEBUG).is_some(), spec.is_executable());
    assert_eq!(
        elf.dyn_entry(DT_MIPS_RLD_MAP_REL).is_some(),
        spec.has_rld_map()
    );

    // Program headers.
    let ph = &elf.program_headers;
    assert_eq!(
        ph.iter().filter(|p| p.p_type == PT_NULL).count(),
        spec.pt_null_slots
    );
    assert_eq!(ph.first().map(|p| p.p_type == PT_PHDR), Some(spec.pt_phdr));
    let loads: Vec<_> = ph.iter().filter(|p| p.p_type == PT_LOAD).collect();
    assert_eq!(loads.len(), 3);
    assert!(loads.iter().all(|p| p.p_align == spec.page_size));
    assert_eq!(loads[0].p_vaddr, spec.base);
    assert_eq!(loads[0].p_offset, 0);
    assert_eq!(
        loads[0].p_flags & 1 != 0,
        spec.first_after_phdrs == AfterPhdrs::Text
    );
    let rw = loads[2];
    assert!(rw.p_memsz - rw.p_filesz >= spec.bss_size);
    assert_eq!(rw.p_flags, 6);

    // What follows the program header table, and the slack before it.
    let layout = elfsynth::layout(spec).unwrap();
    let ph_end = h.e_phoff + u64::from(h.e_phnum) * u64::from(h.e_phentsize);
    let first = layout
        .sections
        .iter()
        .skip(1)
        .min_by_key(|s| s.offset)
        .unwrap();
    let want_first = match spec.first_after_phdrs {
        AfterPhdrs::Interp if spec.interp.is_some() => ".interp",
        AfterPhdrs::Interp => ".note.gnu.build-id",
        AfterPhdrs::Text => ".init",
        AfterPhdrs::Dynsym => ".dynsym",
    };
    assert_eq!(first.name, want_first);
    assert!(first.offset >= ph_end + spec.phdr_slack as u64);
    assert!(first.offset < ph_end + spec.phdr_slack as u64 + 16);
    assert_eq!(layout.section(".text").unwrap().size, spec.text_size);

    // Section headers.
    if spec.with_section_headers {
        assert!(h.e_shnum > 0 && h.e_shoff > 0 && h.e_shstrndx > 0);
        assert_eq!(elf.sections[usize::from(h.e_shstrndx)].name, ".shstrtab");
        for name in [
            ".dynsym", ".dynstr", ".dynamic", ".text", ".init", ".fini", ".data", ".comment",
        ] {
            assert!(elf.section(name).is_some(), "missing {name}");
        }
        assert_eq!(elf.section(".hash").is_some(), spec.hash.sysv());
        assert_eq!(elf.section(".gnu.hash").is_some(), spec.hash.gnu());
        assert_eq!(
            elf.section(".gnu.version_r").is_some(),
            !spec.verneed.is_empty()
        );
        assert_eq!(
            elf.section(".gnu.version_d").is_some(),
            !spec.verdef.is_empty()
        );
        assert_eq!(elf.section(".bss").is_some(), spec.bss_size > 0);
        assert_eq!(elf.section(".rld_map").is_some(), spec.has_rld_map());
    } else {
        assert_eq!((h.e_shoff, h.e_shnum, h.e_shstrndx), (0, 0, 0));
        assert!(elf.sections.is_empty());
        // Nothing non-alloc: the file ends with the RW segment's data.
        assert_eq!(rw.p_offset + rw.p_filesz, layout.file_size);
    }
    if spec.with_section_headers && spec.symtab {
        let dynamic = ph.iter().find(|p| p.p_type == PT_DYNAMIC).unwrap();
        let d = elf
            .symtab
            .iter()
            .find(|s| s.name == "_DYNAMIC")
            .expect("_DYNAMIC");
        assert_eq!(d.value, dynamic.p_vaddr);
        let section_syms = elf.symtab.iter().filter(|s| s.info & 0xf == 3).count();
        let alloc = elf.sections.iter().filter(|s| s.flags & 2 != 0).count();
        assert_eq!(section_syms, alloc);
        for s in &spec.dynsyms {
            assert!(
                elf.symtab.iter().any(|t| &t.name == s),
                "{s:?} not in .symtab"
            );
        }
    } else {
        assert!(elf.symtab.is_empty());
    }
}

/// Number of proptest cases: `default`, or `ELFSYNTH_CASES` when set.
pub fn cases(default: u32) -> u32 {
    std::env::var("ELFSYNTH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh path in the temp directory (removed by `TempFile`'s drop).
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(tag: &str) -> TempFile {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("elfsynth-{}-{n}-{tag}", std::process::id()));
        TempFile(p)
    }
    pub fn with_bytes(tag: &str, bytes: &[u8]) -> TempFile {
        let t = TempFile::new(tag);
        std::fs::write(&t.0, bytes).unwrap();
        t
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[allow(unused_imports)] // each test binary uses its own subset
pub use testkit::{have, skip};

/// Runs a tool on bytes written to a temp file; (status ok, stdout, stderr).
pub fn run_tool(tool: &str, args: &[&str], bytes: &[u8]) -> (bool, String, String) {
    let f = TempFile::with_bytes(tool, bytes);
    let out = Command::new(tool)
        .args(args)
        .arg(&f.0)
        .output()
        .unwrap_or_else(|e| panic!("running {tool}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every spec of the fixed matrix: each machine × class × byte order ×
/// with/without section headers × {ET_EXEC, PIE, shared library}, with the
/// other knobs varied deterministically so that each of them is exercised.
pub fn matrix() -> Vec<Spec> {
    let mut v = Vec::new();
    let mut n = 0usize;
    for machine in Machine::ALL {
        for class in Class::ALL {
            for endian in Endian::ALL {
                for shdrs in [true, false] {
                    for kind in 0..3 {
                        n += 1;
                        let mut s = Spec {
                            class,
                            endian,
                            machine,
                            with_section_headers: shdrs,
                            ..Spec::default()
                        };
                        match kind {
                            0 => {
                                s.e_type = FileType::Exec;
                                s.base = if class == Class::Elf64 {
                                    0x40_0000
                                } else {
                                    0x1000_0000
                                };
                            }
                            1 => {}
                            _ => {
                                s.interp = None;
                                s.soname = Some("libsynth.so.1".into());
                                s.pt_phdr = false;
                                s.verdef = vec![
                                    "libsynth.so.1".into(),
                                    "SYNTH_1.0".into(),
                                    "SYNTH_2.0".into(),
                                ];
                                s.dynsyms.extend([
                                    "synth_a".to_string(),
                                    "synth_b".into(),
                                    "b".into(),
                                ]);
                                s.rpath = Some("/usr/lib/synth".into());
                            }
                        }
                        s.page_size = [0x1000, 0x4000, 0x10000, 0x2000, 0x8000][n % 5];
                        s.hash = [
                            elfsynth::HashStyle::Gnu,
                            elfsynth::HashStyle::Sysv,
                            elfsynth::HashStyle::Both,
                        ][n % 3];
                        s.first_after_phdrs =
                            [AfterPhdrs::Interp, AfterPhdrs::Text, AfterPhdrs::Dynsym][(n / 3) % 3];
                        s.spare_dynamic_slots = n % 4;
                        s.phdr_slack = (n * 37) % 200;
                        s.pt_null_slots = n % 3;
                        s.tail_merge = n % 2 == 0;
                        s.symtab = n % 7 != 0;
                        s.bss_size = (n as u64 * 13) % 50;
                        s.text_size = 1 + (n as u64 * 29) % 300;
                        if n % 4 == 1 {
                            s.runpath = Some("/opt/x/libm.so.6".into());
                        }
                        v.push(s);
                    }
                }
            }
        }
    }
    v
}
