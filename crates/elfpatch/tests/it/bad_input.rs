//! Bad input: every malformed file gets a typed error that names it, and stays byte-identical.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use elfpatch::{edit_in_place, Edit, Elf, ErrorKind, Options, Warning};

/// A real, small, dynamically linked executable built here, and its bytes.
fn sample() -> (tempfile::TempDir, Vec<u8>) {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("m.c");
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"x\");return 0;}\n",
    )
    .unwrap();
    let out = d.path().join("m");
    common::run_ok(
        std::process::Command::new("gcc")
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .arg("-Wl,-rpath,/opt/some/dir"),
    );
    let bytes = fs::read(&out).unwrap();
    (d, bytes)
}

/// Writes `bytes`, tries a growing edit, and returns the error kind; asserts the file is unchanged.
fn edit_fails(dir: &Path, name: &str, bytes: &[u8]) -> ErrorKind {
    edit_error(dir, name, bytes).kind()
}

/// [`edit_fails`], returning the error itself.
fn edit_error(dir: &Path, name: &str, bytes: &[u8]) -> elfpatch::Error {
    let p: PathBuf = dir.join(name);
    fs::write(&p, bytes).unwrap();
    let edits = [
        Edit::SetRunpath(
            b"/a/directory/that/is/much/longer/than/the/old/one/to/force/growth".to_vec(),
        ),
        Edit::AddNeeded(b"libm.so.6".to_vec()),
    ];
    let err = edit_in_place(&p, &edits, &Options::default())
        .expect_err(&format!("{name}: edit should fail"));
    assert!(
        err.to_string().contains(p.to_str().unwrap()),
        "{name}: message does not name the file: {err}"
    );
    assert_eq!(
        err.to_string().lines().count(),
        1,
        "{name}: message is not one line: {err}"
    );
    assert_eq!(err.path(), Some(p.as_path()), "{name}: {err}");
    assert_eq!(
        fs::read(&p).unwrap(),
        bytes,
        "{name}: file changed after a failed edit"
    );
    err
}

fn rd(b: &[u8], off: usize, n: usize) -> u64 {
    (0..n)
        .rev()
        .fold(0u64, |a, i| (a << 8) | u64::from(b[off + i]))
}

fn wr(b: &mut [u8], off: usize, n: usize, v: u64) {
    for i in 0..n {
        b[off + i] = (v >> (8 * i)) as u8;
    }
}

/// Every cut that takes away something the loader reads is an error. A cut inside the section
/// header table (at the end of the file, after every segment) takes away nothing the loader
/// reads: the program still runs and reads as a file without section headers, with a warning in
/// patchelf's words; but an edit would have to drop the table, so it is refused (a file cut short
/// is a broken install the user must hear of), byte-identical, as patchelf refuses it.
#[test]
fn truncation_at_every_header_boundary_is_an_error() {
    let (d, bytes) = sample();
    let phoff = rd(&bytes, 0x20, 8) as usize;
    let phnum = rd(&bytes, 0x38, 2) as usize;
    let shoff = rd(&bytes, 0x28, 8) as usize;
    let shnum = rd(&bytes, 0x3c, 2) as usize;
    let elf = Elf::parse(&bytes).unwrap();
    let dynamic = elf.dynamic.as_ref().unwrap();
    let strtab = elf.strtab.as_ref().unwrap();
    let mut cuts = vec![0, 1, 3, 4, 15, 16, 40, 63];
    cuts.extend((0..=phnum).map(|i| phoff + i * 56 - usize::from(i > 0)));
    cuts.extend((0..shnum).map(|i| shoff + i * 64 + 1));
    cuts.extend([
        dynamic.offset as usize + 8,
        strtab.offset as usize + 3,
        bytes.len() - 1,
    ]);
    let segments_end = elf.phdrs.iter().map(|p| p.offset_end()).max().unwrap() as usize;
    assert!(
        shoff >= segments_end,
        "section headers before the segments' end"
    );
    for cut in cuts {
        if cut > shoff {
            let p = d.path().join(format!("cut-{cut}"));
            fs::write(&p, &bytes[..cut]).unwrap();
            fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            let (ok, out) = common::run_program(&p);
            assert!(
                ok && out.contains('x'),
                "cut at {cut}: the loader fails: {out}"
            );
            let cut_elf = Elf::parse(&bytes[..cut]).unwrap();
            assert_eq!(cut_elf.needed(), elf.needed(), "cut at {cut}");
            assert!(
                cut_elf
                    .warnings
                    .iter()
                    .any(|w| w.problem == "section header table out of bounds"
                        && w.kind == elfpatch::WarningKind::Damage),
                "cut at {cut}: {:?}",
                cut_elf.warnings
            );
            let err = edit_error(d.path(), &format!("cut-{cut}"), &bytes[..cut]);
            assert_eq!(err.kind(), ErrorKind::Malformed, "cut at {cut}: {err}");
            assert_eq!(err.offset(), Some(shoff as u64), "cut at {cut}: {err}");
            let text = err.to_string();
            assert!(
                text.contains("section header table out of bounds")
                    && text.contains(&format!("offset {shoff:#x}"))
                    && text.contains(&format!("({cut:#x} bytes)")),
                "cut at {cut}: {text}"
            );
            continue;
        }
        let kind = edit_fails(d.path(), &format!("cut-{cut}"), &bytes[..cut]);
        assert!(
            matches!(kind, ErrorKind::NotElf | ErrorKind::Malformed),
            "cut at {cut}: {kind:?}"
        );
    }
}

/// A section header table whose entry size is not the class's cannot be read, and is no reason
/// to refuse the file (no loader reads it): the edit goes through, and when it appends data it
/// removes the table (e_shoff 0), which [`elfpatch::dropped`] says, never silently.
#[test]
fn a_table_of_the_wrong_entry_size_is_dropped_by_a_growing_edit_and_said() {
    let (d, mut bytes) = sample();
    wr(&mut bytes, 0x3a, 2, 48);
    let p = d.path().join("shentsize");
    fs::write(&p, &bytes).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    assert!(elf.section_headers_unusable() && elf.check_section_table().is_ok());
    let tables = elfpatch::Tables::read(bytes.as_slice(), &elf).unwrap();
    let grow = [Edit::SetRunpath(vec![b'/'; 600])];
    let plan = elfpatch::plan(&elf, &tables, &grow, &Options::default()).unwrap();
    let said = elfpatch::dropped(&elf, &plan);
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].problem, "section header table dropped");
    let outcome = edit_in_place(&p, &grow, &Options::default()).unwrap();
    assert_eq!(elfpatch::dropped(&elf, &outcome.plan), said);
    assert_eq!(
        Elf::parse(&fs::read(&p).unwrap()).unwrap().header.e_shoff,
        0
    );
    // An edit in place keeps the table where it was, and says nothing.
    let shrink = [Edit::SetRunpath(b"/x".to_vec())];
    let plan = elfpatch::plan(&elf, &tables, &shrink, &Options::default()).unwrap();
    assert!(elfpatch::dropped(&elf, &plan).is_empty());
}

#[test]
fn garbage_program_headers_are_errors() {
    let (d, bytes) = sample();
    let phoff = rd(&bytes, 0x20, 8) as usize;
    let load = (0..rd(&bytes, 0x38, 2) as usize)
        .map(|i| phoff + i * 56)
        .find(|&at| rd(&bytes, at, 4) == 1)
        .unwrap();
    // A segment past the end of the file.
    let mut b = bytes.clone();
    wr(&mut b, load + 32, 8, 1 << 40);
    assert_eq!(
        edit_fails(d.path(), "huge-filesz", &b),
        ErrorKind::Malformed
    );
    // p_filesz > p_memsz.
    let mut b = bytes.clone();
    let memsz = rd(&b, load + 40, 8);
    wr(&mut b, load + 40, 8, memsz / 2);
    assert_eq!(
        edit_fails(d.path(), "filesz-gt-memsz", &b),
        ErrorKind::Malformed
    );
    // A wrong entry size.
    let mut b = bytes.clone();
    wr(&mut b, 0x36, 2, 40);
    assert_eq!(edit_fails(d.path(), "phentsize", &b), ErrorKind::Malformed);
    // The table itself past the end of the file.
    let mut b = bytes.clone();
    wr(&mut b, 0x20, 8, bytes.len() as u64 - 8);
    assert_eq!(edit_fails(d.path(), "phoff", &b), ErrorKind::Malformed);
    // An unknown class byte.
    let mut b = bytes.clone();
    b[4] = 7;
    assert_eq!(edit_fails(d.path(), "class", &b), ErrorKind::NotElf);
}

#[test]
fn overlapping_or_unsorted_segments_are_refused() {
    let (d, bytes) = sample();
    let phoff = rd(&bytes, 0x20, 8) as usize;
    let loads: Vec<usize> = (0..rd(&bytes, 0x38, 2) as usize)
        .map(|i| phoff + i * 56)
        .filter(|&at| rd(&bytes, at, 4) == 1)
        .collect();
    let mut b = bytes.clone();
    // Make the second PT_LOAD start inside the first one's memory.
    let first_vaddr = rd(&b, loads[0] + 16, 8);
    wr(&mut b, loads[1] + 16, 8, first_vaddr + 0x10);
    assert_eq!(edit_fails(d.path(), "overlap", &b), ErrorKind::Refused);
    let mut b = bytes.clone();
    let (a, c) = (rd(&b, loads[1] + 16, 8), rd(&b, loads[2] + 16, 8));
    wr(&mut b, loads[1] + 16, 8, c + 0x100000);
    wr(&mut b, loads[2] + 16, 8, a);
    assert!(matches!(
        edit_fails(d.path(), "unsorted", &b),
        ErrorKind::Refused | ErrorKind::Malformed
    ));
}

#[test]
fn string_offsets_outside_the_table_are_errors() {
    let (d, bytes) = sample();
    let elf = Elf::parse(&bytes).unwrap();
    let dynamic = elf.dynamic.as_ref().unwrap();
    let strsz = elf.strtab.as_ref().unwrap().size;
    let idx = dynamic
        .entries()
        .iter()
        .position(|e| e.tag == u64::from(object::elf::DT_RUNPATH))
        .expect("RUNPATH");
    let at = dynamic.offset as usize + idx * 16 + 8;
    let mut b = bytes.clone();
    wr(&mut b, at, 8, strsz + 100);
    assert_eq!(
        edit_fails(d.path(), "runpath-offset", &b),
        ErrorKind::Malformed
    );
    // DT_STRSZ pointing past the segment.
    let sz = dynamic
        .entries()
        .iter()
        .position(|e| e.tag == u64::from(object::elf::DT_STRSZ))
        .unwrap();
    let mut b = bytes.clone();
    wr(&mut b, dynamic.offset as usize + sz * 16 + 8, 8, 1 << 30);
    assert_eq!(edit_fails(d.path(), "strsz", &b), ErrorKind::Malformed);
    // A dynamic section with no terminator.
    let mut b = bytes.clone();
    let cap = dynamic.capacity();
    for i in 0..cap {
        let o = dynamic.offset as usize + i * 16;
        if rd(&b, o, 8) == 0 {
            wr(&mut b, o, 8, 0x15); // DT_DEBUG
        }
    }
    assert_eq!(edit_fails(d.path(), "no-null", &b), ErrorKind::Malformed);
}

#[test]
fn not_elf_and_empty_files_are_named_errors() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(edit_fails(d.path(), "empty", b""), ErrorKind::NotElf);
    assert_eq!(
        edit_fails(d.path(), "script", b"#!/bin/sh\necho hi\n"),
        ErrorKind::NotElf
    );
    let out = common::elfpatch()
        .arg("--print-rpath")
        .arg(d.path().join("script"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "not-ELF exit status");
    let out = common::elfpatch()
        .arg("--print-rpath")
        .arg(d.path().join("missing"))
        .output()
        .unwrap();
    // An I/O error is a file that could not be read (3), not patchelf's "lacks it" (1).
    assert_eq!(out.status.code(), Some(3), "I/O exit status");
    let out = common::elfpatch()
        .arg("--bogus")
        .arg(d.path().join("script"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "usage exit status");
}

#[test]
fn read_only_files_are_reported_before_anything_happens() {
    use std::os::unix::fs::PermissionsExt;
    let (d, bytes) = sample();
    let p = d.path().join("ro");
    fs::write(&p, &bytes).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o555)).unwrap();
    let r = edit_in_place(&p, &[Edit::SetRunpath(b"/x".to_vec())], &Options::default());
    // root may write anyway; otherwise the error is an I/O error naming the file.
    if let Err(e) = r {
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.to_string().contains("ro"));
        assert_eq!(fs::read(&p).unwrap(), bytes);
    }
}

#[test]
fn an_error_says_its_kind_file_and_offset_and_keeps_its_cause() {
    let (d, bytes) = sample();
    // In memory: no file until the caller names one; the offset of what is cut off.
    let cut = &bytes[..100];
    let err = Elf::parse(cut).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Malformed, "{err}");
    assert_eq!(err.path(), None);
    let offset = err.offset().expect("a truncated structure has an offset");
    assert!(err.to_string().contains(&format!("{offset:#x}")), "{err}");
    let named = err.with_path(Path::new("/some/lib.so"));
    assert_eq!(named.path(), Some(Path::new("/some/lib.so")));
    assert!(named.to_string().starts_with("/some/lib.so: "), "{named}");
    // An operating-system failure keeps the io::Error as its source.
    let missing = d.path().join("missing");
    let err = edit_in_place(&missing, &[Edit::RemoveRpath], &Options::default()).unwrap_err();
    assert_eq!(
        (err.kind(), err.path(), err.offset()),
        (ErrorKind::Io, Some(missing.as_path()), None)
    );
    let source = std::error::Error::source(&err).expect("the io::Error");
    let io = source
        .downcast_ref::<std::io::Error>()
        .expect("an io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
}

/// The byte offset of field `field` of section header `index` in a 64-bit file.
fn shdr_field(b: &[u8], index: usize, field: usize) -> usize {
    rd(b, 40, 8) as usize + index * 64 + field
}

/// The index of the section named `name`.
fn section_index(b: &[u8], name: &[u8]) -> usize {
    let elf = Elf::parse(b).unwrap();
    elf.section_by_name(name).unwrap().index
}

/// Damage in the section headers, which no loader reads, is said in patchelf's words (it refuses
/// such files) and edited around: the edit succeeds and the program runs. Facts no loader cares
/// about (an unnamed section, content not aligned as its header says) are warnings of their own
/// kind, which elfpatch's CLI shows only with --debug.
#[test]
fn section_header_damage_is_warned_about_and_edited_around() {
    let (d, bytes) = sample();
    let shstrndx = rd(&bytes, 62, 2) as usize;
    let names_off = rd(&bytes, shdr_field(&bytes, shstrndx, 24), 8) as usize;
    let names_len = rd(&bytes, shdr_field(&bytes, shstrndx, 32), 8) as usize;
    let dynamic = section_index(&bytes, b".dynamic");
    let dynamic_off = rd(&bytes, shdr_field(&bytes, dynamic, 24), 8);
    let cases: [(&str, usize, usize, u64, &str); 7] = [
        (
            "shstrndx",
            62,
            2,
            0xffff,
            "string table index out of bounds",
        ),
        (
            "names-zero",
            shdr_field(&bytes, shstrndx, 32),
            8,
            0,
            "string table size is zero",
        ),
        (
            "names-unterminated",
            names_off + names_len - 1,
            1,
            u64::from(b'A'),
            "string table is not zero terminated",
        ),
        (
            "name-offset",
            shdr_field(&bytes, 1, 0),
            4,
            0x7fff_ffff,
            "section name offset out of bounds",
        ),
        ("shentsize", 58, 2, 48, "section headers have wrong size"),
        (
            "unnamed",
            shdr_field(&bytes, 1, 0),
            4,
            0,
            "refers to an unnamed section",
        ),
        (
            "unaligned",
            shdr_field(&bytes, dynamic, 24),
            8,
            dynamic_off + 1,
            "section content is not naturally aligned",
        ),
    ];
    let clean = Elf::parse(&bytes).unwrap();
    assert_eq!(clean.warnings, Vec::<Warning>::new(), "the sample itself");
    for (name, at, width, value, phrase) in cases {
        let mut b = bytes.clone();
        wr(&mut b, at, width, value);
        let warnings = Elf::parse(&b).unwrap().warnings;
        let said = warnings
            .iter()
            .find(|w| w.problem.contains(phrase))
            .unwrap_or_else(|| panic!("{name}: no warning saying {phrase:?}: {warnings:?}"));
        // What the loader does not care about and nothing is lost for is a fact for --debug and
        // `stubstrip audit`; the rest is damage, said on every run.
        let harmless = matches!(name, "unnamed" | "unaligned");
        assert_eq!(
            said.kind,
            if harmless {
                elfpatch::WarningKind::Harmless
            } else {
                elfpatch::WarningKind::Damage
            },
            "{name}"
        );
        for w in &warnings {
            assert_eq!(w.to_string().lines().count(), 1, "{name}: {w}");
        }
        let p = d.path().join(name);
        fs::write(&p, &b).unwrap();
        fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let edit = Edit::SetRunpath(
            b"/a/directory/that/is/much/longer/than/the/old/one/to/force/growth".to_vec(),
        );
        edit_in_place(&p, &[edit], &Options::default())
            .unwrap_or_else(|e| panic!("{name}: not edited: {e}"));
        let (ok, out) = common::run_program(&p);
        assert!(
            ok && out.contains('x'),
            "{name}: edited program does not run: {out}"
        );
    }
}

/// Damage an edit cannot work around is refused in a message that holds patchelf's words for it,
/// and the file stays as it was.
#[test]
fn damage_an_edit_cannot_work_around_is_refused_in_patchelfs_words() {
    let (d, bytes) = sample();
    let elf = Elf::parse(&bytes).unwrap();
    let shstrndx = rd(&bytes, 62, 2) as usize;
    let dynamic = section_index(&bytes, b".dynamic");
    let strtab = elf.strtab.as_ref().unwrap();
    let verneed = elf
        .section_by_name(b".gnu.version_r")
        .unwrap()
        .shdr
        .sh_offset as usize;
    let gnu_hash = elf.section_by_name(b".gnu.hash").unwrap().shdr.sh_offset as usize;
    let cases: [(&str, usize, usize, u64, &str); 6] = [
        (
            "names-past-end",
            shdr_field(&bytes, shstrndx, 32),
            8,
            0x7fff_ffff_ffff_ffff,
            "data region extends past file end",
        ),
        (
            "dynamic-past-end",
            shdr_field(&bytes, dynamic, 24),
            8,
            0x7fff_ffff_ffff_ffff,
            "data offset extends past file end",
        ),
        (
            "dynstr-unterminated",
            (strtab.offset as usize) + strtab.size as usize - 1,
            1,
            u64::from(b'A'),
            "string table is not NUL-terminated",
        ),
        (
            "verneed-file",
            verneed + 4,
            4,
            0x7fff_ffff,
            "string table index out of bounds",
        ),
        (
            "gnu-hash-maskwords",
            gnu_hash + 8,
            4,
            0x7fff_ffff,
            "hash table header out of range",
        ),
        (
            "phdr-offset",
            32,
            8,
            0xffff_ff30,
            "program header table out of bounds",
        ),
    ];
    for (name, at, width, value, phrase) in cases {
        let mut b = bytes.clone();
        wr(&mut b, at, width, value);
        let err = edit_error(d.path(), name, &b);
        assert!(
            err.to_string().contains(phrase),
            "{name}: {err} lacks {phrase:?}"
        );
    }
}

/// A GNU hash table without buckets (what `strip --remove-section=.gnu.hash` can leave behind, as
/// patchelf's `no-gnu-hash` test does) stops only the edits that search or rebuild it: the
/// interpreter and the run path are edited, renaming a symbol is refused in patchelf's words,
/// and the refused file stays as it was.
#[test]
fn a_gnu_hash_table_without_buckets_takes_other_edits() {
    let (d, bytes) = sample();
    let elf = Elf::parse(&bytes).unwrap();
    let gnu_hash = elf.section_by_name(b".gnu.hash").unwrap().shdr.sh_offset as usize;
    let mut b = bytes.clone();
    wr(&mut b, gnu_hash, 4, 0);
    let p = d.path().join("no-buckets");
    fs::write(&p, &b).unwrap();
    let rename = [Edit::RenameDynamicSymbols(vec![(
        b"puts".to_vec(),
        b"puts2".to_vec(),
    )])];
    let err = edit_in_place(&p, &rename, &Options::default()).expect_err("rename should fail");
    assert!(
        err.to_string().contains("hash table header out of range"),
        "{err}"
    );
    assert_eq!(
        fs::read(&p).unwrap(),
        b,
        "file changed after a refused rename"
    );
    let edits = [
        Edit::SetInterpreter(b"/lib64/ld-linux-x86-64.so.2.but-longer/../x".to_vec()),
        Edit::SetRunpath(
            b"/a/directory/that/is/much/longer/than/the/old/one/to/force/growth".to_vec(),
        ),
    ];
    edit_in_place(&p, &edits, &Options::default())
        .unwrap_or_else(|e| panic!("edits that need no hash lookup refused: {e}"));
    let edited = Elf::parse(&fs::read(&p).unwrap()).unwrap();
    assert_eq!(
        edited.interpreter(),
        Some(b"/lib64/ld-linux-x86-64.so.2.but-longer/../x".as_slice())
    );
    assert_eq!(
        edited.runpath(),
        Some(b"/a/directory/that/is/much/longer/than/the/old/one/to/force/growth".as_slice())
    );
}
