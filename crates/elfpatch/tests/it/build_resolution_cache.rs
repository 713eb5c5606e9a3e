//! `elfpatch --build-resolution-cache` against patchelf 0.19.3 on the same inputs: the same
//! note (header and descriptor, byte for byte), the same warnings, the same refusals; and the
//! programs still run.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{elfpatch, patchelf_0193, run_ok, run_program, toolchains, Fixture, LIB_SRC};
use elfpatch::{note, Elf};

/// The note's bytes (header, owner, descriptor) where `note::find` locates it.
fn note_bytes(p: &Path) -> Option<Vec<u8>> {
    let bytes = fs::read(p).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let n = note::find(bytes.as_slice(), &elf).unwrap()?;
    Some(bytes[n.offset as usize..][..n.size as usize].to_vec())
}

fn stderr_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// One input: a program linked against `libdep.so` and `libdep2.so`, with a run path.
struct Case {
    name: &'static str,
    /// The run path, `{D}` standing for the fixture's directory; `None`: none.
    run_path: Option<&'static str>,
    /// Set it as DT_RPATH rather than DT_RUNPATH.
    rpath: bool,
    /// Directories to create under the fixture's directory (`x/glibc-hwcaps` makes `x` an
    /// hwcaps directory), and plain files.
    dirs: &'static [&'static str],
    files: &'static [&'static str],
    /// Which directories get copies of which libraries.
    copies: &'static [(&'static str, &'static str)],
}

const CASES: &[Case] = &[
    Case {
        name: "found",
        run_path: Some("{D}/a"),
        rpath: false,
        dirs: &[],
        files: &[],
        copies: &[],
    },
    Case {
        name: "several-needed-several-dirs",
        run_path: Some("{D}/b:{D}/a"),
        rpath: false,
        dirs: &["b"],
        files: &[],
        copies: &[("b", "libdep2.so")],
    },
    Case {
        name: "origin",
        run_path: Some("$ORIGIN/a:{D}/a"),
        rpath: false,
        dirs: &[],
        files: &[],
        copies: &[],
    },
    Case {
        name: "hwcaps",
        run_path: Some("{D}/hw:{D}/a"),
        rpath: false,
        dirs: &["hw/glibc-hwcaps"],
        files: &[],
        copies: &[("hw", "libdep.so")],
    },
    Case {
        name: "absent-dir",
        run_path: Some("/run/opengl-driver/lib-absent-here:{D}/a"),
        rpath: false,
        dirs: &[],
        files: &[],
        copies: &[],
    },
    Case {
        name: "empty-and-relative-entries",
        run_path: Some(":rel/dir:{D}/a:"),
        rpath: false,
        dirs: &[],
        files: &[],
        copies: &[],
    },
    Case {
        name: "plain-file-entry",
        run_path: Some("{D}/not-a-dir:{D}/a/"),
        rpath: false,
        dirs: &[],
        files: &["not-a-dir"],
        copies: &[],
    },
    Case {
        name: "rpath-only",
        run_path: Some("{D}/a"),
        rpath: true,
        dirs: &[],
        files: &[],
        copies: &[],
    },
    Case {
        name: "no-run-path",
        run_path: None,
        rpath: false,
        dirs: &[],
        files: &[],
        copies: &[],
    },
    Case {
        name: "nothing-resolved",
        run_path: Some("{D}/empty"),
        rpath: false,
        dirs: &["empty"],
        files: &[],
        copies: &[],
    },
];

/// The fixture for a case: the program (linked against lib `a/`), its directory.
fn build_case(tc: &common::Toolchain, case: &Case) -> (Fixture, PathBuf) {
    let fx = Fixture::new(tc);
    let a = fx.path("a");
    fx.shared_lib(&a, "libdep.so", "libdep.so", LIB_SRC, "x");
    fx.shared_lib(
        &a,
        "libdep2.so",
        "libdep2.so",
        "int dep2(void) { return 2; }",
        "y",
    );
    let exe = fx.program("main", &a, &["-Wl,--no-as-needed", "-ldep2"]);
    let d = fx.dir.path().display().to_string();
    for dir in case.dirs {
        fs::create_dir_all(fx.path(dir)).unwrap();
    }
    for file in case.files {
        fs::write(fx.path(file), "").unwrap();
    }
    for (dir, lib) in case.copies {
        fs::copy(a.join(lib), fx.path(dir).join(lib)).unwrap();
    }
    let mut cmd = Command::new("patchelf");
    match case.run_path {
        Some(rp) => {
            if case.rpath {
                cmd.arg("--force-rpath");
            }
            cmd.args(["--set-rpath", &rp.replace("{D}", &d)]);
        }
        None => {
            cmd.arg("--remove-rpath");
        }
    }
    run_ok(cmd.arg(&exe));
    (fx, exe)
}

/// Copies of `exe` noted by patchelf (`theirs`) and by elfpatch (`ours`), and both outputs.
fn both(fx: &Fixture, exe: &Path) -> (PathBuf, PathBuf, Output, Output) {
    let theirs = common::copy(exe, &fx.path("theirs"));
    let ours = common::copy(exe, &fx.path("ours"));
    let run =
        |mut cmd: Command, f: &Path| cmd.arg("--build-resolution-cache").arg(f).output().unwrap();
    let p = run(Command::new("patchelf"), &theirs);
    let e = run(elfpatch(), &ours);
    (theirs, ours, p, e)
}

#[test]
fn the_note_is_patchelfs_byte_for_byte() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains() {
        for case in CASES {
            let (fx, exe) = build_case(&tc, case);
            let (theirs, ours, p, e) = both(&fx, &exe);
            let what = format!("{} {}", tc.name, case.name);
            assert!(p.status.success(), "{what}: patchelf {p:?}");
            assert!(e.status.success(), "{what}: elfpatch {e:?}");
            assert_eq!(stderr_lines(&e), stderr_lines(&p), "{what}: warnings");
            let (n_theirs, n_ours) = (note_bytes(&theirs), note_bytes(&ours));
            assert_eq!(n_ours, n_theirs, "{what}: note");
            if n_ours.is_none() {
                assert_eq!(fs::read(&ours).unwrap(), fs::read(&exe).unwrap(), "{what}");
                continue;
            }
            // A second run is a no-op, as patchelf's.
            let before = fs::read(&ours).unwrap();
            run_ok(elfpatch().arg("--build-resolution-cache").arg(&ours));
            assert_eq!(fs::read(&ours).unwrap(), before, "{what}: not idempotent");
            let (ok, out) = run_program(&ours);
            assert!(ok && out.contains("DEP:x"), "{what}: {out}");
            let notes = run_ok(Command::new("readelf").arg("-nW").arg(&ours));
            assert!(
                String::from_utf8_lossy(&notes.stdout).contains("NixOS"),
                "{what}"
            );
            let lint: Vec<String> = common::elflint(&ours)
                .into_iter()
                .filter(|l| !l.contains("with owner name 'NixOS'"))
                .collect();
            let lint_before: Vec<String> = common::elflint(&exe);
            let mask = |v: &[String]| -> Vec<String> {
                v.iter()
                    .map(|l| l.chars().filter(|c| !c.is_ascii_hexdigit()).collect())
                    .collect()
            };
            let old = mask(&lint_before);
            let new: Vec<String> = mask(&lint)
                .into_iter()
                .filter(|l| !old.contains(l))
                .collect();
            assert!(new.is_empty(), "{what}: eu-elflint {new:?}");
        }
    }
}

/// The first case, noted by patchelf.
fn noted_by_patchelf() -> (Fixture, PathBuf) {
    let (fx, exe) = build_case(&toolchains()[0], &CASES[0]);
    run_ok(
        Command::new("patchelf")
            .arg("--build-resolution-cache")
            .arg(&exe),
    );
    (fx, exe)
}

#[test]
fn a_note_that_says_something_else_is_refused_as_patchelf_refuses_it() {
    if !patchelf_0193() {
        return;
    }
    let (fx, exe) = noted_by_patchelf();
    // The library moves away: the note no longer says what a new one would.
    fs::rename(fx.path("a/libdep2.so"), fx.path("libdep2.so")).unwrap();
    let (theirs, ours, p, e) = both(&fx, &exe);
    assert!(!p.status.success() && !e.status.success());
    assert!(String::from_utf8_lossy(&p.stderr).contains("already present"));
    assert!(String::from_utf8_lossy(&e.stderr).contains("already present"));
    for f in [&ours, &theirs] {
        assert_eq!(fs::read(f).unwrap(), fs::read(&exe).unwrap());
    }
    // With --force-rpath: refused, by both.
    for (mut cmd, f) in [(Command::new("patchelf"), &theirs), (elfpatch(), &ours)] {
        let out = cmd
            .args(["--force-rpath", "--build-resolution-cache"])
            .arg(f)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{out:?}");
    }
}

#[test]
fn an_edit_then_the_note_in_one_command_notes_the_edited_file() {
    if !patchelf_0193() {
        return;
    }
    let (fx, exe) = noted_by_patchelf();
    let b = fx.path("b");
    fs::create_dir_all(&b).unwrap();
    fs::copy(fx.path("a/libdep.so"), b.join("libdep.so")).unwrap();
    let rp = format!("{}:{}", b.display(), fx.path("a").display());
    let theirs = common::copy(&exe, &fx.path("theirs"));
    let ours = common::copy(&exe, &fx.path("ours"));
    for (cmd, f) in [(Command::new("patchelf"), &theirs), (elfpatch(), &ours)] {
        let mut cmd = cmd;
        run_ok(
            cmd.args(["--set-rpath", &rp, "--build-resolution-cache"])
                .arg(f),
        );
    }
    assert_eq!(note_bytes(&ours), note_bytes(&theirs));
    let (ok, out) = run_program(&ours);
    assert!(ok, "{out}");
}

/// Moves the section header table (at the end of the file) so that it ends on a 4 KiB page
/// boundary, zeros before it: the precondition of patchelf's `build-resolution-cache-no-pie`.
fn pad_section_headers_to_page(p: &Path) {
    let mut bytes = fs::read(p).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let h = &elf.header;
    let size = u64::from(h.e_shnum) * u64::from(h.e_shentsize);
    assert_eq!(h.e_shoff + size, bytes.len() as u64, "table not at the end");
    let new_shoff = (h.e_shoff + size).next_multiple_of(4096) - size;
    let table = bytes.split_off(h.e_shoff as usize);
    bytes.resize(new_shoff as usize, 0);
    bytes.extend_from_slice(&table);
    let at = if elf.format.word_size() == 8 {
        0x28
    } else {
        0x20
    };
    let word = elf.format.put_word(new_shoff);
    bytes[at..at + word.len()].copy_from_slice(&word);
    fs::write(p, bytes).unwrap();
}

/// patchelf's `build-resolution-cache-no-pie` sets the run path with the tool under test, pads
/// the section header table (which must still end the file: `section_headers_last.rs` checks
/// elfpatch keeps it there) to a page boundary, then builds the note. Here on a non-PIE program
/// linked with its run path: with the section header table ending on a page boundary, the
/// note's header is intact and the same as patchelf's, and the program runs.
#[test]
fn a_non_pie_program_whose_section_headers_end_on_a_page_boundary() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains()
        .iter()
        .filter(|t| t.exe_flags.contains(&"-no-pie"))
    {
        let fx = Fixture::new(tc);
        let a = fx.path("a");
        fx.shared_lib(&a, "libdep.so", "libdep.so", LIB_SRC, "x");
        let rpath = format!("-Wl,-rpath,{}", a.display());
        let exe = fx.program("main", &a, &[&rpath]);
        pad_section_headers_to_page(&exe);
        let (theirs, ours, p, e) = both(&fx, &exe);
        assert!(p.status.success() && e.status.success(), "{p:?} {e:?}");
        assert!(note_bytes(&ours).is_some());
        assert_eq!(note_bytes(&ours), note_bytes(&theirs), "{}", tc.name);
        let notes = Command::new("readelf")
            .arg("-n")
            .arg(&ours)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&notes.stdout).into_owned()
            + &String::from_utf8_lossy(&notes.stderr);
        assert!(
            text.contains("NixOS") && !text.contains("invalid namesz"),
            "{text}"
        );
        let (ok, out) = run_program(&ours);
        assert!(ok && out.contains("DEP:x"), "{}: {out}", tc.name);
    }
}
