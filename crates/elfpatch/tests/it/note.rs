//! The resolution-cache note (`elfpatch::note`) on real programs noted by patchelf 0.19.3.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{
    elflint, patchelf_0193, readelf_warnings, run_ok, run_program, strip_section_headers,
    toolchains, Fixture, LIB_SRC,
};
use elfpatch::note::{self, Hint, LocatedNote};
use elfpatch::{edit_in_place, Edit, Elf, Options};

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

/// A program of `tc` linked against `libdep.so` in `lib/`, run path `$ORIGIN/nowhere:<lib>`,
/// noted by patchelf 0.19.3. Returns the fixture, the program and the library directory.
fn noted_program(tc: &common::Toolchain) -> (Fixture, std::path::PathBuf, std::path::PathBuf) {
    let fx = Fixture::new(tc);
    let libdir = fx.path("lib");
    fx.shared_lib(&libdir, "libdep.so", "libdep.so", LIB_SRC, "x");
    let exe = fx.program("main", &libdir, &[]);
    let rp = format!("$ORIGIN/nowhere:{}", libdir.display());
    patchelf(&["--set-rpath", &rp], &exe);
    patchelf(&["--build-resolution-cache"], &exe);
    (fx, exe, libdir)
}

fn located(p: &Path) -> Option<LocatedNote> {
    let bytes = fs::read(p).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    note::find(bytes.as_slice(), &elf).unwrap()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// eu-elflint's complaints with numbers masked (an edit that moves things renumbers them),
/// less the one every note of this type draws (eu-elflint does not know the type): patchelf's
/// own output draws it too.
fn lint(p: &Path) -> Vec<String> {
    elflint(p)
        .into_iter()
        .filter(|l| !l.contains("with owner name 'NixOS'"))
        .map(|l| {
            l.split(' ')
                .map(|w| match w.strip_prefix("0x") {
                    Some(_) => "0x#".to_string(),
                    None => w
                        .chars()
                        .map(|c| if c.is_ascii_digit() { '#' } else { c })
                        .collect(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// What the edited program must still be: running, no new readelf warning or eu-elflint
/// complaint (the note type's aside), and `readelf -n` shows the note when there is one.
fn check_sound(before: &Path, after: &Path, note_expected: bool) {
    let (ok, out) = run_program(after);
    assert!(ok && out.contains("DEP:x"), "{}: {out}", after.display());
    assert_eq!(
        readelf_warnings(after),
        readelf_warnings(before),
        "{}",
        after.display()
    );
    let old = lint(before);
    let new: Vec<String> = lint(after)
        .into_iter()
        .filter(|l| !old.contains(l))
        .collect();
    assert!(new.is_empty(), "{}: {new:?}", after.display());
    let notes = run_ok(Command::new("readelf").arg("-nW").arg(after));
    let shown = String::from_utf8_lossy(&notes.stdout).contains("NixOS");
    assert_eq!(shown, note_expected, "{}", after.display());
}

fn descriptor(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut d = Vec::new();
    for (name, list) in entries {
        d.extend_from_slice(name);
        d.push(0);
        d.extend_from_slice(list);
        d.push(0);
    }
    d.push(0);
    d
}

#[test]
fn a_shorter_descriptor_is_written_in_place_and_the_old_bytes_are_gone() {
    if !patchelf_0193() {
        return;
    }
    // Without section headers too: the note is found, and shrinks, through its PT_NOTE.
    for (tc, stripped) in toolchains()
        .into_iter()
        .flat_map(|t| [(t.clone(), false), (t, true)])
    {
        let (fx, exe, libdir) = noted_program(&tc);
        if stripped {
            strip_section_headers(&exe);
        }
        let before = common::copy(&exe, &fx.path("before"));
        let old = located(&exe).unwrap();
        let len = fs::metadata(&exe).unwrap().len();
        let desc = descriptor(&[(b"libdep.so", b"?/run/x")]);
        let out = edit_in_place(
            &exe,
            &[Edit::SetResolutionCache(desc.clone())],
            &Options::default(),
        )
        .unwrap();
        assert!(out.changed());
        assert_eq!(
            fs::metadata(&exe).unwrap().len(),
            len,
            "{}: in place",
            tc.name
        );
        let new = located(&exe).unwrap();
        assert_eq!(
            (new.offset, new.desc.clone()),
            (old.offset, desc),
            "{}",
            tc.name
        );
        assert_eq!(new.size, note::note_size(new.desc.len() as u64));
        let bytes = fs::read(&exe).unwrap();
        assert!(
            !contains(
                &bytes,
                &[b"=", libdir.as_os_str().as_encoded_bytes()].concat()
            ),
            "{}",
            tc.name
        );
        // The PT_NOTE and the section shrank with the note.
        let elf = Elf::parse(&bytes).unwrap();
        assert_eq!(elf.phdrs[new.segments[0]].p_filesz, new.size);
        match new.section {
            Some(i) => assert_eq!(elf.sections[i].shdr.sh_size, new.size),
            None => assert!(stripped, "{}: the section went", tc.name),
        }
        check_sound(&before, &exe, true);
        // Idempotent: the same descriptor again changes nothing.
        let again = edit_in_place(
            &exe,
            &[Edit::SetResolutionCache(new.desc)],
            &Options::default(),
        )
        .unwrap();
        assert!(!again.changed(), "{}", tc.name);
    }
}

#[test]
fn a_longer_descriptor_moves_into_the_appended_segment_with_its_headers() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains() {
        let (fx, exe, libdir) = noted_program(&tc);
        let before = common::copy(&exe, &fx.path("before"));
        let old = located(&exe).unwrap();
        let long = format!(
            "?/run/opengl-driver/lib:?{}",
            "/a-long-directory".repeat(20)
        );
        let desc = descriptor(&[(b"libc.so.6", b"?/x"), (b"libdep.so", long.as_bytes())]);
        edit_in_place(
            &exe,
            &[Edit::SetResolutionCache(desc.clone())],
            &Options::default(),
        )
        .unwrap();
        let new = located(&exe).unwrap();
        assert_ne!(new.offset, old.offset, "{}", tc.name);
        assert_eq!(new.desc, desc);
        let bytes = fs::read(&exe).unwrap();
        assert!(
            !contains(
                &bytes,
                &[b"=", libdir.as_os_str().as_encoded_bytes()].concat()
            ),
            "{}",
            tc.name
        );
        assert!(bytes[old.offset as usize..][..old.size as usize]
            .iter()
            .all(|&b| b == 0));
        let elf = Elf::parse(&bytes).unwrap();
        let sec = &elf.sections[new.section.unwrap()];
        assert_eq!(
            (sec.shdr.sh_offset, sec.shdr.sh_size),
            (new.offset, new.size)
        );
        // The section's address is where the PT_NOTE's is: the loader and tools agree.
        assert_eq!(sec.shdr.sh_addr, elf.phdrs[new.segments[0]].p_vaddr);
        check_sound(&before, &exe, true);
    }
}

#[test]
fn removing_the_note_zeroes_it_and_its_headers() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains() {
        let (fx, exe, libdir) = noted_program(&tc);
        let before = common::copy(&exe, &fx.path("before"));
        edit_in_place(&exe, &[Edit::RemoveResolutionCache], &Options::default()).unwrap();
        assert_eq!(located(&exe), None, "{}", tc.name);
        let bytes = fs::read(&exe).unwrap();
        assert!(
            !contains(
                &bytes,
                &[b"=", libdir.as_os_str().as_encoded_bytes()].concat()
            ),
            "{}",
            tc.name
        );
        let sections = run_ok(Command::new("readelf").arg("-SW").arg(&exe));
        assert!(!String::from_utf8_lossy(&sections.stdout).contains("ldcache"));
        // The run path still names the library directory: only the note went.
        let rp = run_ok(Command::new("readelf").arg("-dW").arg(&exe));
        assert!(String::from_utf8_lossy(&rp.stdout).contains("nowhere"));
        check_sound(&before, &exe, false);
    }
}

#[test]
fn an_edit_of_the_run_path_or_needed_drops_the_note_and_others_keep_it() {
    if !patchelf_0193() {
        return;
    }
    let tc = &toolchains()[0];
    let cases: Vec<(Vec<Edit>, bool)> = vec![
        (vec![Edit::SetRunpath(b"/elsewhere".to_vec())], false),
        (vec![Edit::RemoveRunpath], false),
        (vec![Edit::AddNeeded(b"libextra.so".to_vec())], false),
        (vec![Edit::RemoveNeeded(b"libdep.so".to_vec())], false),
        (
            vec![Edit::ReplaceNeeded {
                old: b"libdep.so".to_vec(),
                new: b"libdep2.so".to_vec(),
            }],
            false,
        ),
        (vec![Edit::SetSoname(b"libmain.so".to_vec())], true),
        (vec![Edit::RemoveNeeded(b"libabsent.so".to_vec())], true),
        (vec![Edit::RunpathToRpath], true),
    ];
    for (edits, kept) in cases {
        let (_fx, exe, _) = noted_program(tc);
        let old = located(&exe).unwrap();
        edit_in_place(&exe, &edits, &Options::default()).unwrap();
        let after = located(&exe);
        assert_eq!(after.is_some(), kept, "{edits:?}");
        if kept {
            assert_eq!(after.unwrap().desc, old.desc, "{edits:?}");
        }
    }
}

#[test]
fn a_note_is_added_to_a_file_without_one_with_and_without_section_headers() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains() {
        for stripped in [false, true] {
            let fx = Fixture::new(&tc);
            let libdir = fx.path("lib");
            fx.shared_lib(&libdir, "libdep.so", "libdep.so", LIB_SRC, "x");
            let exe = fx.program("main", &libdir, &[]);
            patchelf(&["--set-rpath", &libdir.display().to_string()], &exe);
            if stripped {
                strip_section_headers(&exe);
            }
            let before = common::copy(&exe, &fx.path("before"));
            let exact = [libdir.as_os_str().as_encoded_bytes(), b"/libdep.so"].concat();
            let list = [b"=".as_slice(), &exact].concat();
            let desc = descriptor(&[(b"libdep.so", &list)]);
            edit_in_place(
                &exe,
                &[Edit::SetResolutionCache(desc.clone())],
                &Options::default(),
            )
            .unwrap();
            let new = located(&exe).unwrap_or_else(|| panic!("{} {stripped}: no note", tc.name));
            assert_eq!(new.desc, desc);
            assert_eq!(new.segments.len(), 1);
            let bytes = fs::read(&exe).unwrap();
            let elf = Elf::parse(&bytes).unwrap();
            let p = elf.phdrs[new.segments[0]];
            assert!(elf
                .loads()
                .any(|l| l.contains_offset(p.p_offset, p.p_filesz)
                    && l.p_vaddr - l.p_offset == p.p_vaddr - p.p_offset));
            if stripped {
                assert_eq!(new.section, None);
            } else {
                let sec = &elf.sections[new.section.expect("a section")];
                assert_eq!(sec.name, note::SECTION_NAME, "{}", tc.name);
                assert!(sec.shdr.is_alloc());
                let dump = run_ok(
                    Command::new("readelf")
                        .args(["-p", ".note.nixos.ldcache"])
                        .arg(&exe),
                );
                assert!(String::from_utf8_lossy(&dump.stdout).contains("libdep.so"));
            }
            check_sound(&before, &exe, true);
        }
    }
}
