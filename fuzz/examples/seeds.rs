//! Writes the seed corpora of both fuzz targets (run by `make_corpus.sh`).
//!
//! `cargo run --release --example seeds -- OUT_DIR [ELF_FILE...]` writes `OUT_DIR/parse/` (the
//! files themselves) and `OUT_DIR/plan_apply/` (each file joined with a few edit scripts, see
//! `elfpatch-check`), for every ELF file named, a copy of it without section headers, and `elfsynth`
//! files of every machine, both classes and both byte orders.

use std::fs;
use std::path::{Path, PathBuf};

use elfpatch::{Class, Edit, Elf, Endian};
use elfpatch_fuzz::check::{encode, generated_path, join};
use elfsynth::{AfterPhdrs, FileType, HashStyle, Machine, Spec};

/// The file with its section header table removed (as `sstrip` does): `e_shoff`, `e_shnum`,
/// `e_shstrndx` zeroed, everything after the last segment's bytes dropped.
fn without_section_headers(bytes: &[u8]) -> Option<Vec<u8>> {
    let e = Elf::parse(bytes).ok()?;
    if e.sections.is_empty() {
        return None;
    }
    let mut b = bytes.to_vec();
    let put = |b: &mut Vec<u8>, at: usize, size: usize, v: u64| {
        for i in 0..size {
            let shift = match e.endian() {
                Endian::Little => 8 * i,
                Endian::Big => 8 * (size - 1 - i),
            };
            b[at + i] = (v >> shift) as u8;
        }
    };
    let (shoff, wsize, shnum, shstrndx) = match e.class() {
        Class::Elf64 => (0x28, 8, 0x3c, 0x3e),
        Class::Elf32 => (0x20, 4, 0x30, 0x32),
    };
    put(&mut b, shoff, wsize, 0);
    put(&mut b, shnum, 2, 0);
    put(&mut b, shstrndx, 2, 0);
    let table_end = e.header.e_phoff + (e.phdrs.len() * e.format.phdr_size()) as u64;
    let end = e
        .phdrs
        .iter()
        .map(|p| p.p_offset + p.p_filesz)
        .max()
        .unwrap_or(0)
        .max(table_end);
    b.truncate(end as usize);
    Some(b)
}

fn scripts(e: &Elf) -> Vec<(&'static str, Vec<u8>)> {
    let long = |n| generated_path(n, 0);
    let first_needed = e.needed().first().map(|n| n.to_vec());
    let mut v = vec![
        (
            "runpath300",
            encode(0, &[vec![Edit::SetRunpath(long(300))]]),
        ),
        (
            "runpath-short",
            encode(0, &[vec![Edit::SetRunpath(b"a".to_vec())]]),
        ),
        (
            "needed",
            encode(0x08, &[vec![Edit::AddNeeded(b"libextra.so".to_vec())]]),
        ),
        (
            "several-twice",
            encode(
                0,
                &[
                    vec![
                        Edit::SetRunpath(long(300)),
                        Edit::AddNeeded(b"libextra.so".to_vec()),
                        Edit::SetSoname(long(200)),
                        Edit::SetInterpreter(long(150)),
                    ],
                    vec![
                        Edit::SetRunpath(long(700)),
                        Edit::AddNeeded(b"libm.so.6".to_vec()),
                    ],
                ],
            ),
        ),
        (
            "convert",
            encode(
                0x83,
                &[
                    vec![
                        Edit::RunpathToRpath,
                        Edit::SetSoname(b"libfoo.so.1".to_vec()),
                    ],
                    vec![Edit::RpathToRunpath, Edit::RemoveRpath],
                ],
            ),
        ),
    ];
    if let Some(n) = first_needed {
        v.push((
            "replace-remove",
            encode(
                0,
                &[
                    vec![Edit::ReplaceNeeded {
                        old: n.clone(),
                        new: b"libfoo-with-a-rather-long-name.so.1".to_vec(),
                    }],
                    vec![Edit::RemoveNeeded(
                        b"libfoo-with-a-rather-long-name.so.1".to_vec(),
                    )],
                ],
            ),
        ));
    }
    v
}

fn synth_specs() -> Vec<(String, Spec)> {
    let mut out = Vec::new();
    let combos = [
        (
            Machine::X86_64,
            elfsynth::Class::Elf64,
            elfsynth::Endian::Little,
        ),
        (
            Machine::I386,
            elfsynth::Class::Elf32,
            elfsynth::Endian::Little,
        ),
        (
            Machine::AArch64,
            elfsynth::Class::Elf64,
            elfsynth::Endian::Little,
        ),
        (
            Machine::Arm,
            elfsynth::Class::Elf32,
            elfsynth::Endian::Little,
        ),
        (
            Machine::Ppc64,
            elfsynth::Class::Elf64,
            elfsynth::Endian::Big,
        ),
        (
            Machine::S390x,
            elfsynth::Class::Elf64,
            elfsynth::Endian::Big,
        ),
        (
            Machine::RiscV,
            elfsynth::Class::Elf64,
            elfsynth::Endian::Little,
        ),
        (Machine::Mips, elfsynth::Class::Elf32, elfsynth::Endian::Big),
    ];
    for (i, (machine, class, endian)) in combos.into_iter().enumerate() {
        let exec = i % 2 == 0;
        let base = Spec {
            class,
            endian,
            machine,
            page_size: 0x1000,
            e_type: if exec { FileType::Exec } else { FileType::Dyn },
            base: if exec { 0x40_0000 } else { 0 },
            text_size: 0x40,
            ..Spec::default()
        };
        let name = format!("synth-{machine:?}-{class:?}-{endian:?}").to_lowercase();
        // The machines whose loaders use 64 KiB pages get one such file (they are big: 64 KiB
        // gaps between segments slow the fuzzer down, so the other variants use 4 KiB).
        let big_pages = matches!(machine, Machine::AArch64 | Machine::Ppc64);
        out.push((
            name.clone(),
            Spec {
                page_size: if big_pages { 0x10000 } else { 0x1000 },
                ..base.clone()
            },
        ));
        out.push((
            format!("{name}-bare-tail"),
            Spec {
                with_section_headers: false,
                tail_merge: true,
                runpath: Some("/opt/x/libdep.so".into()),
                needed: vec!["libdep.so".into(), "libc.so.6".into()],
                verneed: vec![("libc.so.6".into(), vec!["GLIBC_2.2.5".into()])],
                ..base.clone()
            },
        ));
        out.push((
            format!("{name}-lib-text"),
            Spec {
                e_type: FileType::Dyn,
                base: 0,
                interp: None,
                soname: Some("libsynth.so.1".into()),
                rpath: Some("/usr/lib".into()),
                runpath: None,
                first_after_phdrs: AfterPhdrs::Text,
                hash: HashStyle::Both,
                verdef: vec!["libsynth.so.1".into(), "SYNTH_1.0".into()],
                pt_phdr: false,
                ..base.clone()
            },
        ));
        // The first segment stops short of its last tables, which stay in the rest of its last
        // page: mapped by the loader (patchelf 0.17.2 leaves non-PIE programs so).
        out.push((
            format!("{name}-page-tail"),
            Spec {
                tail_bytes: 0x1000,
                ..base.clone()
            },
        ));
        out.push((
            format!("{name}-slack-null"),
            Spec {
                phdr_slack: 64,
                pt_null_slots: 1,
                spare_dynamic_slots: 2,
                first_after_phdrs: AfterPhdrs::Dynsym,
                hash: HashStyle::Sysv,
                symtab: false,
                ..base
            },
        ));
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = PathBuf::from(args.first().expect("usage: seeds OUT_DIR [ELF_FILE...]"));
    let (parse_dir, plan_dir) = (out.join("parse"), out.join("plan_apply"));
    fs::create_dir_all(&parse_dir).unwrap();
    fs::create_dir_all(&plan_dir).unwrap();
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    for a in &args[1..] {
        let p = Path::new(a);
        let bytes = fs::read(p).unwrap_or_else(|e| panic!("{a}: {e}"));
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(bare) = without_section_headers(&bytes) {
            inputs.push((format!("{name}-noshdr"), bare));
        }
        inputs.push((name, bytes));
    }
    for (name, spec) in synth_specs() {
        inputs.push((name, elfsynth::build(&spec)));
    }
    let (mut n_parse, mut n_plan) = (0, 0);
    for (name, bytes) in &inputs {
        fs::write(parse_dir.join(name), bytes).unwrap();
        n_parse += 1;
        let Ok(e) = Elf::parse(bytes) else {
            eprintln!("seeds: {name}: elfpatch cannot parse it, parse seed only");
            continue;
        };
        for (sname, script) in scripts(&e) {
            fs::write(
                plan_dir.join(format!("{name}.{sname}")),
                join(bytes, &script),
            )
            .unwrap();
            n_plan += 1;
        }
    }
    println!(
        "seeds: {n_parse} parse seeds in {}, {n_plan} plan_apply seeds in {}",
        parse_dir.display(),
        plan_dir.display()
    );
}
