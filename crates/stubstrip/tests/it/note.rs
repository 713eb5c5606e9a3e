//! The resolution-cache note (`.note.nixos.ldcache`, patchelf 0.19's `--build-resolution-cache`)
//! is part of the run path for `fix`, `fixup` and `check`: a note that pins `libcuda.so.1` in a
//! stub directory is rewritten to search the driver link, and `check` fails on it. On programs
//! built with gcc and noted by patchelf 0.19.3 itself.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use elfpatch::note::{self, Hint, ResolutionCache};
use elfpatch::{Edit, Elf, Options};
use testkit::patchelf_0193;

/// A program `out/bin/main` that calls `cuInit` from `libcuda.so.1` and a function of
/// `out/lib/libother.so`, linked against the stub, with RUNPATH `OUT/lib:STUB`; a stub
/// directory (inside a `-stubs` store output) holding the stub `libcuda.so.1` (whose `cuInit`
/// says STUB), and a driver directory holding the driver's (which says DRIVER).
struct Noted {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    exe: PathBuf,
    stub: String,
    driver: String,
    libdir: String,
}

const CUDA: &str = "#include <stdio.h>\nint cuInit(int f) { puts(WHO); return f; }\n";

/// The fixture, its program noted by patchelf 0.19.3 (`--build-resolution-cache`).
fn noted() -> Noted {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let stub = stub_dir(&root);
    shared(
        &stub,
        "libcuda.so.1",
        "libcuda.so.1",
        CUDA,
        &["-DWHO=\"STUB\""],
    );
    let driver = root.join("run/opengl-driver/lib");
    shared(
        &driver,
        "libcuda.so.1",
        "libcuda.so.1",
        CUDA,
        &["-DWHO=\"DRIVER\""],
    );
    let out = root.join("out");
    let libdir = out.join("lib");
    shared(
        &libdir,
        "libother.so",
        "libother.so",
        "int other(void) { return 0; }\n",
        &[],
    );
    let exe = out.join("bin/main");
    fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let rpath = format!("{}:{}", libdir.display(), stub.display());
    program(
        &exe,
        "int cuInit(int); int other(void);\nint main(void) { return cuInit(0) + other(); }\n",
        &[
            &format!("-L{}", stub.display()),
            &format!("-L{}", libdir.display()),
            "-l:libcuda.so.1",
            "-lother",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{rpath}"),
        ],
    );
    run_ok(
        Command::new("patchelf")
            .arg("--build-resolution-cache")
            .arg(&exe),
    );
    Noted {
        _tmp: tmp,
        out,
        exe,
        stub: stub.display().to_string(),
        driver: driver.display().to_string(),
        libdir: libdir.display().to_string(),
    }
}

/// The note of `p`, parsed, and its file offset.
fn note_of(p: &Path) -> Option<(u64, ResolutionCache)> {
    let bytes = fs::read(p).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let n = note::find(bytes.as_slice(), &elf).unwrap()?;
    Some((n.offset, n.cache().unwrap()))
}

fn hints(cache: &ResolutionCache, needed: &str) -> Vec<Hint> {
    cache.get(needed.as_bytes()).unwrap().hints.clone()
}

fn exact(dir: &str, lib: &str) -> Hint {
    Hint::Exact(format!("{dir}/{lib}").into_bytes())
}

fn search(dir: &str) -> Hint {
    Hint::Search(dir.as_bytes().to_vec())
}

/// The store object name of the stub output: it must not be anywhere in the file.
fn stub_output_name() -> String {
    format!("{HASH}-cuda_cudart-12.8.90-stubs")
}

fn mentions(p: &Path, s: &str) -> bool {
    fs::read(p)
        .unwrap()
        .windows(s.len())
        .any(|w| w == s.as_bytes())
}

/// What the program prints, run with a clean loader environment.
fn run_exe(p: &Path) -> String {
    let out = Command::new(p)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn patchelf_pins_the_stub_and_fix_makes_the_note_search_the_driver_link() {
    if !can_build() || !patchelf_0193() {
        return;
    }
    let n = noted();
    let (_, before) = note_of(&n.exe).expect("patchelf wrote a note");
    assert_eq!(
        hints(&before, "libcuda.so.1"),
        vec![exact(&n.stub, "libcuda.so.1")]
    );
    let r = stubstrip_run(&["fix", "-v", "--driver-link", &n.driver], &[&n.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Reports go to stdout, diagnostics to stderr.
    assert!(
        r.stdout.contains(&format!(
            "NOTE libcuda.so.1 ={}/libcuda.so.1 -> libcuda.so.1 ?{}",
            n.stub, n.driver
        )),
        "{}",
        r.stderr
    );
    let (_, after) = note_of(&n.exe).expect("the note stays");
    // The stub entry says what the fixed run path means; the other entries stay, in order.
    assert_eq!(hints(&after, "libcuda.so.1"), vec![search(&n.driver)]);
    assert_eq!(
        hints(&after, "libother.so"),
        vec![exact(&n.libdir, "libother.so")]
    );
    let names = |c: &ResolutionCache| -> Vec<Vec<u8>> {
        c.entries.iter().map(|e| e.needed.clone()).collect()
    };
    assert_eq!(names(&after), names(&before));
    assert_eq!(
        readelf_paths(&n.exe).0,
        Some(format!("{}:{}", n.libdir, n.driver))
    );
    assert!(
        !mentions(&n.exe, &stub_output_name()),
        "a stub path is left"
    );
    assert_eq!(run_exe(&n.exe), "DRIVER");
    let r = stubstrip_run(&["check"], &[&n.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Idempotent: nothing more to do, nothing written.
    let stamp = write_stamp(&n.exe);
    let r = stubstrip_run(&["fix", "--driver-link", &n.driver], &[&n.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("stubstrip: 0 of 2 ELF files rewritten"),
        "{}",
        r.stdout
    );
    assert_eq!(write_stamp(&n.exe), stamp);
}

#[test]
fn with_compat_the_note_searches_compat_then_the_driver_link() {
    if !can_build() || !patchelf_0193() {
        return;
    }
    let n = noted();
    let compat = "/nix/store/cccccccccccccccccccccccccccccccc-cuda_compat/compat";
    let r = stubstrip_run(
        &["fix", "--driver-link", &n.driver, "--compat", compat],
        &[&n.out],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (_, after) = note_of(&n.exe).unwrap();
    assert_eq!(
        hints(&after, "libcuda.so.1"),
        vec![search(compat), search(&n.driver)]
    );
    assert!(!mentions(&n.exe, &stub_output_name()));
}

/// The program, its RUNPATH already fixed while its note still pins the stub: what an older
/// `fix` left, or a note written after the fix from a copy.
fn note_pins_stub_runpath_clean() -> Noted {
    let n = noted();
    let (_, cache) = note_of(&n.exe).unwrap();
    let edits = [
        Edit::SetRunpath(format!("{}:{}", n.libdir, n.driver).into_bytes()),
        Edit::SetResolutionCache(cache.to_descriptor()),
    ];
    elfpatch::edit_in_place(&n.exe, &edits, &Options::default()).unwrap();
    n
}

#[test]
fn check_fails_on_a_stub_in_the_note_and_says_where() {
    if !can_build() || !patchelf_0193() {
        return;
    }
    let n = note_pins_stub_runpath_clean();
    let (offset, _) = note_of(&n.exe).unwrap();
    let r = stubstrip_run(&["check"], &[&n.out]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let line = format!(
        "{}: NOTE entry libcuda.so.1 ={}/libcuda.so.1 (note at offset {offset:#x})\n",
        n.exe.display(),
        n.stub
    );
    assert!(r.stdout.contains(&line), "{}", r.stdout);
    assert!(
        r.stdout.contains("check failed: 1 stub entry in 1 of 2"),
        "{}",
        r.stdout
    );
    let v = json(&stubstrip_run(&["check", "--json"], &[&n.out]));
    assert_eq!(v["findings"][0]["tag"], "NOTE");
    // The same as a stub in RUNPATH: fix rewrites the note alone, and names the stub
    // directory it removed (what the hook's check-time fallback offers).
    let r = stubstrip_run(
        &["fix", "--print-removed", "--driver-link", &n.driver],
        &[&n.out],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, format!("{}\n", n.stub));
    // With --print-removed, stdout is that data alone and the summary goes to stderr.
    assert!(
        r.stderr
            .contains("stubstrip: 1 of 2 ELF files rewritten, 1 stub entry replaced"),
        "{}",
        r.stderr
    );
    assert_eq!(stubstrip_run(&["check"], &[&n.out]).code, 0);
    assert!(!mentions(&n.exe, &stub_output_name()));
    assert_eq!(run_exe(&n.exe), "DRIVER");
}

#[test]
fn a_note_naming_no_stub_is_left_alone_and_kept_when_the_run_path_changes() {
    if !can_build() || !patchelf_0193() {
        return;
    }
    let n = noted();
    // The stub directory is gone from the note's view (absent, say): patchelf notes a `?` hint
    // for it, which names the stub; so build a note that names none, from a run path without it.
    let exe2 = n.out.join("bin/main2");
    fs::copy(&n.exe, &exe2).unwrap();
    run_ok(
        Command::new("patchelf")
            .args(["--set-rpath", &n.libdir])
            .arg(&exe2),
    );
    run_ok(
        Command::new("patchelf")
            .arg("--build-resolution-cache")
            .arg(&exe2),
    );
    let (_, clean_note) = note_of(&exe2).unwrap();
    // Now a run path with the stub again, the note kept as it was.
    let edits = [
        Edit::SetRunpath(format!("{}:{}", n.libdir, n.stub).into_bytes()),
        Edit::SetResolutionCache(clean_note.to_descriptor()),
    ];
    elfpatch::edit_in_place(&exe2, &edits, &Options::default()).unwrap();
    fs::remove_file(&n.exe).unwrap();
    let r = stubstrip_run(&["fix", "--driver-link", &n.driver], &[&n.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        note_of(&exe2).unwrap().1,
        clean_note,
        "the note stays as it was"
    );
    // A file with only a clean note is not written.
    let stamp = write_stamp(&exe2);
    let r = stubstrip_run(&["fix", "--driver-link", &n.driver], &[&n.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(write_stamp(&exe2), stamp);
}

#[test]
fn a_malformed_note_is_reported_with_file_and_offset_and_the_file_is_untouched() {
    if !can_build() || !patchelf_0193() {
        return;
    }
    let n = noted();
    let bytes = fs::read(&n.exe).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let found = note::find(bytes.as_slice(), &elf).unwrap().unwrap();
    // The `=` of the first hint becomes `!`: not a hint.
    let desc = &found.desc;
    let at = desc.iter().position(|&b| b == b'=').unwrap();
    let mut broken = bytes.clone();
    broken[found.desc_offset as usize + at] = b'!';
    fs::write(&n.exe, &broken).unwrap();
    let offset = found.desc_offset + at as u64;
    for cmd in [&["fix", "--driver-link", &n.driver][..], &["check"][..]] {
        let r = stubstrip_run(cmd, &[&n.out]);
        assert_eq!(r.code, 3, "{cmd:?}: {}", r.stderr);
        let says = format!(
            "{}: inconsistent headers at offset {offset:#x}",
            n.exe.display()
        );
        assert!(r.stderr.contains(&says), "{cmd:?}: {}", r.stderr);
        assert_eq!(
            fs::read(&n.exe).unwrap(),
            broken,
            "{cmd:?}: the file changed"
        );
    }
}

#[test]
fn fixup_rewrites_the_note_and_its_check_sees_it() {
    if !can_build() || !patchelf_0193() {
        return;
    }
    let n = note_pins_stub_runpath_clean();
    let r = run_limited(
        stubstrip()
            .args([
                "fixup",
                "--default-driver-link",
                &n.driver,
                "--ld-library-path",
                "",
            ])
            .arg("--")
            .arg(&n.out),
        true,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (_, after) = note_of(&n.exe).unwrap();
    assert_eq!(hints(&after, "libcuda.so.1"), vec![search(&n.driver)]);
    assert!(!mentions(&n.exe, &stub_output_name()));
    assert_eq!(stubstrip_run(&["check"], &[&n.out]).code, 0);
    assert_eq!(run_exe(&n.exe), "DRIVER");
}
