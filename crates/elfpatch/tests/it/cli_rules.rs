//! The command line's one rule for what a file can answer, its exit statuses and its messages:
//! print options on static programs, relocatable objects, libraries and files
//! cut short give patchelf 0.19.3's stdout and success or failure, with patchelf's status 1 where
//! the file lacks what was asked; a print never succeeds where the matching edit refuses; a
//! section header table cut short is refused byte-identical; `-V`, the version under patchelf's
//! name, messages under the name the program was run as, a closed stdout, options that exclude
//! each other, and warnings only where the user must act.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::elfpatch;
use testkit::{have, patchelf_0193, run_ok, skip};

const PRINTS: [&str; 6] = [
    "--print-interpreter",
    "--print-os-abi",
    "--print-soname",
    "--print-rpath",
    "--print-needed",
    "--print-execstack",
];

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A program, a static program, a library, a relocatable object, built by gcc in `dir`.
struct Kinds {
    _dir: tempfile::TempDir,
    program: PathBuf,
    static_program: PathBuf,
    library: PathBuf,
    object: PathBuf,
}

fn kinds() -> Option<Kinds> {
    if !cfg!(target_arch = "x86_64") || !have("gcc") {
        skip("needs gcc on x86_64");
        return None;
    }
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("main.c");
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"RAN\");return 0;}\n",
    )
    .unwrap();
    let lib_c = d.path().join("lib.c");
    fs::write(&lib_c, "int f(void){return 1;}\n").unwrap();
    let p = |n: &str| d.path().join(n);
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(p("prog"))
            .arg(&c)
            .arg("-Wl,-rpath,/opt/x"),
    );
    let static_ok = Command::new("gcc")
        .args(["-static", "-o"])
        .arg(p("static"))
        .arg(&c)
        .status()
        .is_ok_and(|s| s.success());
    if !static_ok {
        skip("gcc -static does not link (no libc.a)");
        return None;
    }
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libk.so.1", "-o"])
            .arg(p("libk.so"))
            .arg(&lib_c),
    );
    run_ok(
        Command::new("gcc")
            .args(["-c", "-o"])
            .arg(p("obj.o"))
            .arg(&c),
    );
    Some(Kinds {
        program: p("prog"),
        static_program: p("static"),
        library: p("libk.so"),
        object: p("obj.o"),
        _dir: d,
    })
}

/// stdout and exit status.
type Answer = (Vec<u8>, Option<i32>);

/// What a print option gives: stdout and status.
fn print(prog: &mut Command, opt: &str, file: &Path) -> (Vec<u8>, Option<i32>, String) {
    let o = run(prog.arg(opt).arg(file));
    (o.stdout, o.status.code(), text(&o.stderr))
}

#[test]
fn print_options_answer_as_patchelf_on_each_kind_of_file() {
    let Some(k) = kinds() else { return };
    // (file, option, stdout, status): patchelf 0.19.3's answers, written out so that the test
    // stands without patchelf, and compared with it below when it is here.
    let ok = |s: &str| (s.as_bytes().to_vec(), Some(0));
    let lacks = (Vec::new(), Some(1));
    let expected: Vec<(&Path, &str, Answer)> = vec![
        (&k.static_program, "--print-interpreter", lacks.clone()),
        // glibc's static programs carry GNU IFUNCs: EI_OSABI is Linux.
        (&k.static_program, "--print-os-abi", ok("Linux\n")),
        (&k.static_program, "--print-soname", ok("")),
        (&k.static_program, "--print-rpath", lacks.clone()),
        (&k.static_program, "--print-needed", lacks.clone()),
        (&k.static_program, "--print-execstack", ok("execstack: -\n")),
        (&k.library, "--print-interpreter", lacks.clone()),
        (&k.library, "--print-os-abi", ok("System V\n")),
        (&k.library, "--print-soname", ok("libk.so.1\n")),
        (&k.library, "--print-rpath", ok("\n")),
        (&k.library, "--print-execstack", ok("execstack: -\n")),
        (&k.program, "--print-rpath", ok("/opt/x\n")),
        (&k.program, "--print-soname", ok("")),
    ];
    for (file, opt, (out, code)) in &expected {
        let (o, c, err) = print(&mut elfpatch(), opt, file);
        assert_eq!((&o, &c), (out, code), "{opt} {}: {err}", file.display());
        if *code == Some(1) {
            assert!(
                err.starts_with(&format!("elfpatch: {}: ", file.display())),
                "{err}"
            );
        }
    }
    // A relocatable object: every option fails, as patchelf's "wrong ELF type".
    for opt in PRINTS {
        let (o, c, err) = print(&mut elfpatch(), opt, &k.object);
        assert_eq!((o.as_slice(), c), (&b""[..], Some(1)), "{opt}: {err}");
        assert!(err.contains("wrong ELF type"), "{err}");
    }
    if !patchelf_0193() {
        return;
    }
    for file in [&k.program, &k.static_program, &k.library, &k.object] {
        for opt in PRINTS {
            let (po, pc, perr) = print(&mut Command::new("patchelf"), opt, file);
            let (eo, ec, eerr) = print(&mut elfpatch(), opt, file);
            assert_eq!(po, eo, "{opt} {}: stdout", file.display());
            assert_eq!(
                pc == Some(0),
                ec == Some(0),
                "{opt} {}: {perr} / {eerr}",
                file.display()
            );
            if pc != Some(0) {
                assert_eq!(ec, Some(1), "{opt} {}: {perr} / {eerr}", file.display());
            }
        }
    }
}

#[test]
fn prints_and_edits_follow_one_rule() {
    let Some(k) = kinds() else { return };
    // Each print with the edit of the same thing: both fail on the same files, with status 1.
    let pairs: [(&str, &[&str]); 4] = [
        ("--print-rpath", &["--set-rpath", "/y"]),
        ("--print-needed", &["--add-needed", "libm.so.6"]),
        ("--print-interpreter", &["--set-interpreter", "/lib/ld.so"]),
        ("--print-os-abi", &["--set-os-abi", "linux"]),
    ];
    for file in [&k.static_program, &k.library, &k.object, &k.program] {
        for (print_opt, edit) in pairs {
            let copy = common::copy(file, &file.with_extension("edit"));
            let before = fs::read(&copy).unwrap();
            let p = run(elfpatch().arg(print_opt).arg(file));
            let e = run(elfpatch().args(edit).arg(&copy));
            assert_eq!(
                p.status.code(),
                e.status.code(),
                "{print_opt} / {edit:?} on {}: {} / {}",
                file.display(),
                text(&p.stderr),
                text(&e.stderr)
            );
            if !e.status.success() {
                assert_eq!(fs::read(&copy).unwrap(), before, "{edit:?} wrote");
            }
        }
    }
}

#[test]
fn a_section_header_table_cut_short_is_refused_for_every_option_byte_identical() {
    let Some(k) = kinds() else { return };
    let whole = fs::read(&k.library).unwrap();
    let cut = k.library.with_extension("cut");
    fs::write(&cut, &whole[..whole.len() - 100]).unwrap();
    let before = fs::read(&cut).unwrap();
    let mut args: Vec<Vec<&str>> = PRINTS.iter().map(|p| vec![*p]).collect();
    args.extend([
        vec!["--set-rpath", "/opt/x"],
        vec!["--add-needed", "libm.so.6"],
        vec!["--shrink-rpath"],
    ]);
    for a in &args {
        let o = run(elfpatch().args(a).arg(&cut));
        assert_eq!(o.status.code(), Some(4), "{a:?}: {o:?}");
        let err = text(&o.stderr);
        assert!(
            err.starts_with(&format!(
                "elfpatch: {}: section header table out of bounds: ",
                cut.display()
            )) && err.contains("offset 0x")
                && err.lines().count() == 1,
            "{a:?}: {err}"
        );
        assert!(o.stdout.is_empty());
        assert_eq!(fs::read(&cut).unwrap(), before, "{a:?} changed the file");
    }
    if patchelf_0193() {
        let o = run(Command::new("patchelf")
            .args(["--set-rpath", "/opt/x"])
            .arg(&cut));
        assert!(
            !o.status.success() && text(&o.stderr).contains("section header table out of bounds")
        );
    }
}

#[test]
fn a_static_program_and_an_object_are_said_for_what_they_are() {
    let Some(k) = kinds() else { return };
    let err = text(&run(elfpatch().arg("--print-rpath").arg(&k.static_program)).stderr);
    assert!(
        err.contains("no dynamic section") && err.contains("statically linked"),
        "{err}"
    );
    let err = text(&run(elfpatch().arg("--print-interpreter").arg(&k.library)).stderr);
    assert!(err.contains("no PT_INTERP"), "{err}");
    let err = text(&run(elfpatch().args(["--set-rpath", "/x"]).arg(&k.object)).stderr);
    assert!(
        err.contains("wrong ELF type: a relocatable object"),
        "{err}"
    );
    // Not an ELF file: its first bytes as hexadecimal numbers, and status 3.
    let not_elf = k.object.with_extension("txt");
    fs::write(&not_elf, "hello").unwrap();
    let o = run(elfpatch().arg("--print-rpath").arg(&not_elf));
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("0x68 0x65 0x6c 0x6c"), "{o:?}");
    // A file that is not there: an I/O error, status 3 (no longer 1, patchelf's "lacks it").
    let o = run(elfpatch()
        .arg("--print-rpath")
        .arg(k.object.with_extension("absent")));
    assert_eq!(o.status.code(), Some(3), "{o:?}");
}

/// elfpatch installed under another name, in `dir`.
fn named(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_elfpatch"), &p).unwrap();
    p
}

#[test]
fn under_patchelfs_name_the_version_is_patchelfs_and_every_message_says_patchelf() {
    let d = tempfile::tempdir().unwrap();
    let pe = named(d.path(), "patchelf");
    for flag in ["--version", "-V"] {
        let o = run(Command::new(&pe).arg(flag));
        assert!(o.status.success());
        assert_eq!(o.stdout, b"patchelf 0.19.3\n", "{flag}");
    }
    let own = run(elfpatch().arg("-V"));
    assert!(text(&own.stdout).starts_with("elfpatch "), "{own:?}");
    // maturin's parse: what follows "patchelf" is a semantic version, nothing after it.
    let v = text(&run(Command::new(&pe).arg("--version")).stdout);
    let rest = v.trim().strip_prefix("patchelf").unwrap().trim();
    let parts: Vec<&str> = rest.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| p.parse::<u64>().is_ok()),
        "{v}"
    );
    // Which program answered: --help and --debug say it.
    let help = run(Command::new(&pe).arg("--help"));
    assert!(text(&help.stdout).starts_with("usage: patchelf [OPTIONS] FILE...\n"));
    assert!(text(&help.stdout).contains("This is elfpatch "));
    let o = run(Command::new(&pe).args(["--debug", "--version"]));
    assert_eq!(o.stdout, b"patchelf 0.19.3\n");
    assert!(text(&o.stderr).starts_with("patchelf: elfpatch "), "{o:?}");
    // Messages: PROG: [FILE: ]what, PROG the name it was run as.
    let absent = d.path().join("absent");
    let o = run(Command::new(&pe).arg("--print-rpath").arg(&absent));
    assert!(
        text(&o.stderr).starts_with(&format!("patchelf: {}: ", absent.display())),
        "{o:?}"
    );
    let o = run(Command::new(&pe).arg("--no-such-option"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).starts_with("patchelf: unknown option --no-such-option"),
        "{o:?}"
    );
    assert!(text(&o.stderr).contains("see patchelf --help"), "{o:?}");
    let o = run(&mut Command::new(&pe));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).starts_with("usage: patchelf "), "{o:?}");
    let other = named(d.path(), "my-editor");
    let o = run(Command::new(&other).arg("--print-rpath").arg(&absent));
    assert!(text(&o.stderr).starts_with("my-editor: "), "{o:?}");
}

#[test]
fn a_closed_stdout_ends_quietly_never_with_a_panic() {
    if !have("sh") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_elfpatch");
    // The reader closes the pipe before elfpatch writes: every write then fails with EPIPE.
    for args in [
        "--generate-man",
        "--generate-completion bash",
        "--help",
        "--print-needed /bin/sh /bin/sh /bin/sh",
    ] {
        for _ in 0..10 {
            let script = format!("exec 3>&1; {bin} {args} 2>&3 | (exec 0<&-; true); echo \"status=${{PIPESTATUS[0]}}\"");
            let o = run(Command::new("bash").args(["-c", &script]));
            let out = text(&o.stdout);
            assert!(!out.contains("panicked"), "{args}: {out}");
            assert!(out.ends_with("status=0\n"), "{args}: {out}");
        }
    }
    // stderr closed too (both go to the pipe): the failure's own status, never a panic's 101.
    for _ in 0..10 {
        let script = format!(
            "{bin} --print-rpath /nonexistent/x 2>&1 | (exec 0<&-; true); echo \"status=${{PIPESTATUS[0]}}\""
        );
        let o = run(Command::new("bash").args(["-c", &script]));
        assert_eq!(text(&o.stdout), "status=3\n", "{o:?}");
    }
    // Any other write error is said, with status 3.
    if Path::new("/dev/full").exists() {
        let o = run(Command::new(bin)
            .arg("--help")
            .stdout(fs::File::create("/dev/full").unwrap()));
        assert_eq!(o.status.code(), Some(3), "{o:?}");
        assert!(text(&o.stderr).contains("cannot write to stdout"), "{o:?}");
    }
}

#[test]
fn options_of_which_patchelf_does_only_one_are_refused_and_modifiers_without_effect_said() {
    let Some(k) = kinds() else { return };
    let before = fs::read(&k.program).unwrap();
    for args in [
        &["--shrink-rpath", "--set-rpath", "/x"][..],
        &["--remove-rpath", "--add-rpath", "/x"],
        &["--set-rpath", "/x", "--add-rpath", "/y"],
        &["--print-execstack", "--clear-execstack"],
        &["--clear-execstack", "--set-execstack"],
    ] {
        let o = run(elfpatch().args(args).arg(&k.program));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(text(&o.stderr).contains("cannot be combined"), "{o:?}");
    }
    assert_eq!(fs::read(&k.program).unwrap(), before);
    let o = run(elfpatch()
        .args(["--force-rpath", "--print-rpath"])
        .arg(&k.program));
    assert!(o.status.success());
    assert!(
        text(&o.stderr).contains("--force-rpath has no effect"),
        "{o:?}"
    );
    // A request that changes nothing is said, the run succeeds as patchelf's does.
    let copy = common::copy(&k.program, &k.program.with_extension("c2"));
    let o = run(elfpatch()
        .args(["--remove-needed", "libnothere.so.1"])
        .arg(&copy));
    assert!(o.status.success(), "{o:?}");
    assert!(
        text(&o.stderr).contains("libnothere.so.1 is not needed: nothing to remove"),
        "{o:?}"
    );
    let o = run(elfpatch()
        .args(["--replace-needed", "libnothere.so.1", "libx.so"])
        .arg(&copy));
    assert!(text(&o.stderr).contains("nothing to replace"), "{o:?}");
}

#[test]
fn facts_no_loader_cares_about_are_shown_only_with_debug() {
    let Some(k) = kinds() else { return };
    // Misalign one section's file offset (its header only): the loader never reads it.
    let mut b = fs::read(&k.library).unwrap();
    let e = elfpatch::Elf::parse(&b).unwrap();
    let s = e
        .sections
        .iter()
        .find(|s| s.shdr.sh_addralign >= 8 && s.shdr.has_file_bytes() && s.name == b".eh_frame")
        .expect("an aligned .eh_frame");
    let at = e.header.e_shoff as usize + s.index * 64 + 24;
    let off = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) + 1;
    b[at..at + 8].copy_from_slice(&off.to_le_bytes());
    let f = k.library.with_extension("misaligned");
    fs::write(&f, &b).unwrap();
    let o = run(elfpatch()
        .arg("--print-soname")
        .arg(&f)
        .env_remove("PATCHELF_DEBUG"));
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
    let o = run(elfpatch().args(["--debug", "--print-soname"]).arg(&f));
    assert!(text(&o.stderr).contains("not naturally aligned"), "{o:?}");
    // patchelf's switch for its debug output, which its own tests set.
    let o = run(elfpatch()
        .arg("--print-soname")
        .arg(&f)
        .env("PATCHELF_DEBUG", "1"));
    assert!(text(&o.stderr).contains("not naturally aligned"), "{o:?}");
    // Damage is said on every run: a name offset out of bounds.
    let mut b = fs::read(&k.library).unwrap();
    let at = e.header.e_shoff as usize + 64;
    b[at..at + 4].copy_from_slice(&0xffff_fff0_u32.to_le_bytes());
    fs::write(&f, &b).unwrap();
    let o = run(elfpatch().arg("--print-soname").arg(&f));
    assert!(o.status.success(), "{o:?}");
    assert!(
        text(&o.stderr).starts_with(&format!(
            "elfpatch: {}: warning: section header 1: section name offset out of bounds",
            f.display()
        )),
        "{o:?}"
    );
}

/// `--debug` says what an edit did in words, not as Rust's `Debug` of the plan: the
/// layout, the writes and the length, each edit kind in its own words.
#[test]
fn debug_says_what_an_edit_did_in_words() {
    let Some(k) = kinds() else { return };
    let f = k.program.with_extension("debugged");
    fs::copy(&k.program, &f).unwrap();
    let said = |rpath: &str| {
        let o = run(elfpatch()
            .args(["--debug", "--set-rpath", rpath])
            .arg(&f)
            .env_remove("PATCHELF_DEBUG"));
        assert!(o.status.success(), "{o:?}");
        let err = text(&o.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("elfpatch: {}: ", f.display())))
            .unwrap_or_else(|| panic!("no line about the file: {err}"))
            .to_string();
        assert!(
            !line.contains(['{', '}']) && !line.contains("false"),
            "{line}"
        );
        line
    };
    // Shorter than /opt/x's room: in place, the length unchanged.
    let line = said("/a");
    assert!(line.contains(": edited in place: 1 write, "), "{line}");
    assert!(line.ends_with(" bytes, unchanged"), "{line}");
    // Much longer: the string table grown where it is, or a segment appended (the length grows).
    let long = format!("/{}", "x".repeat(600));
    let line = said(&long);
    assert!(
        line.contains(": grew the string table where it is (moved: ")
            || (line.contains(": appended ") && line.contains(" -> ")),
        "{line}"
    );
    assert!(
        line.contains(" writes, ") && line.ends_with(" bytes") || line.ends_with("unchanged"),
        "{line}"
    );
    // The same again: nothing to change.
    let line = said(&long);
    assert!(
        line.ends_with(": nothing to change: the file already is as asked"),
        "{line}"
    );
}
