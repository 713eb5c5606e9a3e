//! The command-line convention stubstrip shares with elfpatch, run on the binary:
//! `-V`; the packagers' `--generate-man` and `--generate-completion SHELL`, checked by `man`
//! and each shell; usage errors (status 2, one line) that list the choices of an enumerated
//! value; messages that start with the name the program was run as; and a stdout closed by its
//! reader, which ends every command quietly with the status it would have had.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// The write end of a pipe whose reader is gone: `true`'s stdin, after `true` exited. A
/// program writing to it gets EPIPE on its first write, every time (`cmd | head -0` races).
fn closed_pipe() -> Stdio {
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
    let w = reader.stdin.take().unwrap();
    assert!(reader.wait().unwrap().success());
    Stdio::from(w)
}

/// A command to run, and what must live as long as it runs (its tree).
type Made = (Command, Option<Tree>);

/// What a run gave with stdout read, and with stdout a closed pipe (each on what `make` makes
/// fresh: fix and fixup change their tree), the tree's directory written `T` in stderr.
fn both(make: &dyn Fn() -> Made) -> (Run, Run) {
    let run = |closed: bool| {
        let (mut c, tree) = make();
        if closed {
            c.stdout(closed_pipe());
        }
        let mut r = run_limited(&mut c, !closed);
        if let Some(t) = tree {
            r.stderr = r.stderr.replace(t._tmp.path().to_str().unwrap(), "T");
        }
        r
    };
    (run(false), run(true))
}

/// A fresh output: `out/lib/libcudafake.so` with the stub directory in RUNPATH (what the
/// commands have something to say about), the driver link next to it.
struct Tree {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    lib: PathBuf,
    driver: String,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let stub = stub_dir(tmp.path()).display().to_string();
    let out = tmp.path().join("out");
    let lib = lib_with_path(
        &out.join("lib/libcudafake.so"),
        &format!("{stub}:/opt/keep"),
        false,
    );
    let driver = tmp.path().join("run/opengl-driver/lib");
    fs::create_dir_all(&driver).unwrap();
    Tree {
        _tmp: tmp,
        out,
        lib,
        driver: driver.display().to_string(),
    }
}

/// Every command that writes on stdout, with stdout closed before it writes: the same status
/// and the same stderr as with stdout read (so no panic, no "Broken pipe" message), and it had
/// something to write (else the closed pipe would prove nothing).
#[test]
fn a_closed_stdout_ends_every_command_quietly_with_its_own_status() {
    let plain: &[&[&str]] = &[
        &["--help"],
        &["fix", "--help"],
        &["-V"],
        &["--version"],
        &["--generate-man"],
        &["--generate-completion", "bash"],
        &["--generate-completion", "zsh"],
        &["--generate-completion", "fish"],
        &["audit", "--codes"],
    ];
    let mut cases: Vec<(String, Box<dyn Fn() -> Made>)> = Vec::new();
    for args in plain {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        cases.push((
            args.join(" "),
            Box::new(move || {
                let mut c = stubstrip();
                c.args(&args);
                (c, None)
            }),
        ));
    }
    if can_build() {
        let on_tree: &[&[&str]] = &[
            &["check"],
            &["check", "-v"],
            &["check", "--json"],
            &["fix", "-v"],
            &["fix", "--print-removed"],
            &["fix", "--json"],
            &["audit"],
            &["audit", "--json"],
            &["fixup", "--ld-library-path", ""],
            &["explain", "--ld-library-path", ""],
            &["explain", "-v", "--why", "--ld-library-path", ""],
            &["explain", "--json", "--ld-library-path", ""],
        ];
        for args in on_tree {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            cases.push((
                args.join(" "),
                Box::new(move || {
                    let t = tree();
                    let mut c = stubstrip();
                    c.args(&args);
                    if args[0] == "fix" || args[0] == "fixup" {
                        c.args(["--driver-link", &t.driver]);
                    }
                    c.arg(if args[0] == "explain" { &t.lib } else { &t.out });
                    (c, Some(t))
                }),
            ));
        }
    }
    for (name, make) in &cases {
        let (open, closed) = both(make.as_ref());
        assert!(!open.stdout.is_empty(), "{name}: nothing on stdout");
        assert_eq!(closed.code, open.code, "{name}: {}", closed.stderr);
        assert_eq!(closed.stderr, open.stderr, "{name}");
        assert!(!closed.stderr.contains("panicked"), "{name}");
    }
}

#[test]
fn dash_capital_v_and_version_print_the_version() {
    for flag in ["-V", "--version"] {
        let r = stubstrip_run(&[flag], &[]);
        assert_eq!(r.code, 0, "{flag}");
        assert_eq!(
            r.stdout,
            format!("stubstrip {}\n", env!("CARGO_PKG_VERSION")),
            "{flag}"
        );
        assert_eq!(r.stderr, "", "{flag}");
    }
}

/// The page renders with `man -l` without a warning (groff's, through man-db, as the manpages
/// suite checks it for CI), and holds every subcommand, the synopses with their values, and
/// the exit statuses.
#[test]
fn the_man_page_renders_without_warnings() {
    let r = stubstrip_run(&["--generate-man"], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert!(r.stdout.starts_with(".TH STUBSTRIP 1 "), "{}", r.stdout);
    for want in [
        ".SH SYNOPSIS",
        ".SH \"EXIT STATUS\"",
        ".SS \"stubstrip explain\"",
        "\\fB\\-\\-jobs\\fR\\ \\fIN\\fR",
        "\\fB\\-\\-generate\\-completion\\fR\\ \\fISHELL\\fR",
    ] {
        assert!(r.stdout.contains(want), "{want}");
    }
    if !have("man") {
        skip("needs man (man-db)");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let page = t.path().join("stubstrip.1");
    fs::write(&page, &r.stdout).unwrap();
    let out = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "man's warnings");
    assert!(out.status.success());
    for want in [
        "stubstrip explain [-v] [--why]",
        "EXIT STATUS",
        "usage error (bad command line)",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
}

/// Each completion script parses in its shell.
#[test]
fn the_completions_parse_in_their_shells() {
    let t = tempfile::tempdir().unwrap();
    for (shell, check) in [
        ("bash", &["-n"][..]),
        ("zsh", &["-n"][..]),
        ("fish", &["--no-execute"][..]),
    ] {
        let r = stubstrip_run(&["--generate-completion", shell], &[]);
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{shell}");
        assert!(r.stdout.contains("generate-man"), "{shell}");
        if !have(shell) {
            skip(&format!("needs {shell}"));
            continue;
        }
        let script = t.path().join(format!("stubstrip.{shell}"));
        fs::write(&script, &r.stdout).unwrap();
        let out = Command::new(shell)
            .args(check)
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// An unknown value of an enumerated option is a usage error, one line listing the choices,
/// before anything is read or written.
#[test]
fn an_unknown_enumerated_value_is_a_usage_error_listing_the_choices() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().to_str().unwrap();
    for (args, choices) in [
        (
            vec!["fixup", "--audit", "bogus", d],
            "possible values: info, warning, error",
        ),
        (
            vec!["fixup", "--audit", "", d],
            "possible values: info, warning, error",
        ),
        (
            vec!["audit", "--deny", "warn", d],
            "possible values: info, warning, error, never",
        ),
        (
            vec!["explain", "--glibc", "nix", d],
            "possible values: patched, upstream",
        ),
        (
            vec!["--generate-completion", "powershell"],
            "possible values: bash, zsh, fish",
        ),
    ] {
        let r = stubstrip_run(&args, &[]);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "", "{args:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with("stubstrip: ") && r.stderr.contains(choices),
            "{args:?}: {}",
            r.stderr
        );
    }
}

/// Run under another name (a symlink `foo`), every line on stderr starts with `foo: `: clap's
/// errors, the usage errors stubstrip finds itself, the files it cannot read, and a report that
/// goes to stderr.
#[test]
fn messages_carry_the_name_the_program_was_run_as() {
    let t = tempfile::tempdir().unwrap();
    let foo = t.path().join("foo");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_stubstrip"), &foo).unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new(&foo);
        c.args(args);
        run_limited(&mut c, true)
    };
    let missing = t.path().join("missing");
    let missing = missing.to_str().unwrap();
    let unreadable = format!("foo: {missing}: ");
    let cases: [(Vec<&str>, i32, &str); 7] = [
        (
            vec!["fix", "--jobs", "0", "d"],
            2,
            "foo: invalid value '0' for '--jobs <N>': must be at least 1 (the number of worker \
             threads) (see foo fix --help)",
        ),
        (
            vec!["fix", "--driver-link", "run/x", "d"],
            2,
            "foo: the driver link run/x is not absolute",
        ),
        (
            vec![],
            2,
            "foo: no command given: fix, check, fixup, explain, audit or driver-link (see foo --help)",
        ),
        (vec!["bogus"], 2, "foo: unrecognized subcommand 'bogus'"),
        (vec!["check", missing], 3, &unreadable),
        (vec!["explain", missing], 3, &unreadable),
        (vec!["fix", "--json", missing], 3, &unreadable),
    ];
    for (args, code, want) in cases {
        let r = run(&args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
        for line in r.stderr.lines() {
            assert!(line.starts_with("foo: "), "{args:?}: {line}");
        }
    }
    if can_build() {
        let t = tree();
        let r = run(&[
            "fix",
            "--json",
            "-v",
            "--driver-link",
            &t.driver,
            t.out.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stderr.contains("foo: 1 of 1 ELF file rewritten"),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr.lines().all(|l| l.starts_with("foo: ")),
            "{}",
            r.stderr
        );
    }
}

/// A stdout that fails otherwise than by a closed pipe (a full disk) loses what the caller
/// asked for: named on stderr, status 3.
#[test]
fn a_stdout_that_cannot_be_written_is_status_3() {
    if !Path::new("/dev/full").exists() {
        skip("needs /dev/full");
        return;
    }
    for args in [
        &["--generate-man"][..],
        &["audit", "--codes"][..],
        &["-V"][..],
        &["explain", "--help"][..],
    ] {
        let mut c = stubstrip();
        c.args(args).stdout(
            fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        );
        let r = run_limited(&mut c, false);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.starts_with("stubstrip: cannot write to stdout: "),
            "{args:?}: {}",
            r.stderr
        );
    }
}
