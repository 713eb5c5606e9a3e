//! Every subcommand over one tree: the same files seen, ELF files, loadable objects and skipped
//! files by reason, from the same walk; separate debug-info files (made by objcopy, as Nix's
//! `separateDebugInfo` makes them), relocatable objects and core files skipped the same way by
//! all of them, `fixup` (the hook) included; `--exclude` leaving the same files out of all.

use crate::common;

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use common::*;
use serde_json::{json as j, Value};

/// A package's outputs as a build leaves them: a library and a program with a stub entry, the
/// library's separate debug-info file, a relocatable object, a core file, a text file.
struct Tree {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    driver: PathBuf,
    debug: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let stub = stub_dir(&root).display().to_string();
    let out = root.join("out");
    let lib = lib_with_path(&out.join("lib/libcudafake.so"), &stub, false);
    program(
        &out.join("bin/prog"),
        "int main(void) { return 0; }\n",
        &[&format!("-Wl,-rpath,{stub}")],
    );
    let debug = out.join("lib/debug/.build-id/ab/cdef.debug");
    fs::create_dir_all(debug.parent().unwrap()).unwrap();
    run_ok(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&lib)
            .arg(&debug),
    );
    let c = out.join("share/obj.c");
    fs::create_dir_all(c.parent().unwrap()).unwrap();
    fs::write(&c, "int f(void) { return 2; }\n").unwrap();
    run_ok(
        Command::new("gcc")
            .arg("-c")
            .arg("-o")
            .arg(out.join("share/obj.o"))
            .arg(&c),
    );
    // A core file: the library's bytes with e_type ET_CORE (classification reads the header;
    // a real core dump needs core_pattern, which a shared machine's tests must not change).
    let mut core = fs::read(&lib).unwrap();
    core[16..18].copy_from_slice(&4u16.to_le_bytes());
    fs::write(out.join("core"), core).unwrap();
    let driver = root.join("run/opengl-driver/lib");
    fs::create_dir_all(&driver).unwrap();
    Tree {
        _tmp: tmp,
        out,
        driver,
        debug,
    }
}

/// The count line of a run's report (stdout for fix, check and audit).
fn count_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("stubstrip: ") && l.contains(" loadable object"))
        .unwrap_or_else(|| panic!("no count line in:\n{text}"))
}

/// The count `fixup` gives at the end of its one summary line, as a count line.
fn fixup_count_line(stderr: &str) -> String {
    let l = count_line(stderr);
    let counts = l
        .rsplit_once(" (")
        .and_then(|(_, c)| c.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no count in: {l}"));
    format!("stubstrip: {counts}")
}

fn fixup(t: &Tree, extra: &[&str]) -> Run {
    let driver = t.driver.display().to_string();
    let mut c = stubstrip();
    c.args([
        "fixup",
        "--default-driver-link",
        &driver,
        "--ld-library-path",
        "",
    ])
    .args(extra)
    .arg("--")
    .arg(&t.out)
    // The tree and its driver link lie in the test's temporary directory, which in a Nix build's
    // checkPhase is inside the build directory: the audit would rightly call them leaks (SS003).
    .env_remove("TMPDIR")
    .env_remove("NIX_BUILD_TOP");
    run_limited(&mut c, true)
}

#[test]
fn every_subcommand_counts_the_same_tree_the_same_way() {
    if !can_build() || !have("objcopy") {
        return;
    }
    let t = tree();
    let driver = t.driver.display().to_string();
    let expected = j!({
        "files_seen": 6, "elf_files": 5, "loadable_objects": 2,
        "skipped": {"separate_debug_files": 1, "relocatable_objects": 1, "core_files": 1},
        "excluded": 0, "unreadable": 0,
    });
    let line = "stubstrip: 6 files, 5 ELF files, 2 loadable objects; skipped 1 separate \
                debug-info file, 1 relocatable object, 1 core file";
    // Read-only first, then the fix, then fixup over the fixed tree.
    let mut censuses: Vec<(String, Value)> = Vec::new();
    for args in [
        vec!["check", "--json"],
        vec!["audit", "--json", "--deny", "never"],
        vec!["fix", "--json", "--driver-link", &driver],
    ] {
        let r = stubstrip_run(&args, &[&t.out]);
        assert!(r.stderr.contains(line), "{args:?}: {}", r.stderr);
        // Every file was read: no error in the report (nor its line on stderr).
        assert_eq!(json(&r)["errors"], j!([]), "{args:?}: {}", r.stderr);
        censuses.push((args[0].to_string(), json(&r)["census"].clone()));
    }
    for (sub, c) in &censuses {
        assert_eq!(c, &expected, "{sub}");
    }
    for args in [vec!["check"], vec!["audit", "--deny", "never"]] {
        let r = stubstrip_run(&args, &[&t.out]);
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        assert_eq!(count_line(&r.stdout), line, "{args:?}");
        assert_eq!(r.stderr, "", "{args:?}: nothing went wrong");
    }
    let r = stubstrip_run(&["fix", "--driver-link", &driver], &[&t.out]);
    assert_eq!(count_line(&r.stdout), line);
    assert!(
        r.stdout
            .ends_with("stubstrip: 0 of 2 ELF files rewritten, 0 stub entries replaced\n"),
        "{}",
        r.stdout
    );
    // The hook's run: the same count on stderr, the debug file skipped rather than warned about.
    let r = fixup(&t, &["--audit", "error"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(fixup_count_line(&r.stderr), line);
    assert_eq!(
        r.stderr.matches(" loadable objects").count(),
        1,
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("warning:"), "{}", r.stderr);
    assert!(!r.stdout.contains("warning:"), "{}", r.stdout);
}

#[test]
fn exclude_leaves_the_same_files_out_of_every_subcommand() {
    if !can_build() || !have("objcopy") {
        return;
    }
    let t = tree();
    let excluded = ["--exclude", "lib/debug", "--exclude", "*.o"];
    let line =
        "stubstrip: 4 files, 3 ELF files, 2 loadable objects; skipped 1 core file; 2 excluded";
    for sub in ["check", "audit", "fix"] {
        let mut args = vec![sub];
        args.extend(excluded);
        let r = stubstrip_run(&args, &[&t.out]);
        assert_eq!(count_line(&r.stdout), line, "{sub}");
    }
    let r = fixup(&t, &excluded);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(fixup_count_line(&r.stderr), line);
    // A file named on the command line is never excluded.
    let r = stubstrip_run(&["check", "--exclude", "*.debug"], &[&t.debug]);
    assert_eq!(
        count_line(&r.stdout),
        "stubstrip: 1 file, 1 ELF file, 0 loadable objects; skipped 1 separate debug-info file"
    );
    assert!(
        r.stdout.ends_with(
            "stubstrip: check: nothing checked: no loadable ELF object under the named paths\n"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn explain_names_what_it_cannot_explain_without_placeholders() {
    if !can_build() || !have("objcopy") {
        return;
    }
    let t = tree();
    let r = stubstrip_run(&["explain"], &[&t.debug]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "stubstrip: {}: separate debug-info file: not a loadable object\n",
            t.debug.display()
        )
    );
    // A file cut inside its program headers: the message names it once, with no placeholder.
    let cut = t.out.join("trunc100");
    let bytes = fs::read(t.out.join("bin/prog")).unwrap();
    fs::write(&cut, &bytes[..100]).unwrap();
    for args in [vec!["explain"], vec!["audit"]] {
        let r = stubstrip_run(&args, &[&cut]);
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("<input>"), "{args:?}: {}", r.stderr);
        assert_eq!(
            r.stderr.matches(&*cut.display().to_string()).count(),
            1,
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stderr.contains(": truncated: "), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn named_symlinks_are_followed_by_audit_and_explain() {
    if !can_build() {
        return;
    }
    let t = tree();
    let link = t.out.join("prog-link");
    std::os::unix::fs::symlink("bin/prog", &link).unwrap();
    let r = stubstrip_run(&["audit", "--json", "--deny", "never"], &[&link]);
    let v = json(&r);
    assert_eq!(v["census"]["loadable_objects"], 1, "{v:#}");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "SS001"),
        "the stub entry behind the link: {v:#}"
    );
    let r = stubstrip_run(&["explain", "-v"], &[&link]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    assert!(r.stdout.contains("libc.so.6"), "{}", r.stdout);
}

#[test]
fn a_file_that_cannot_be_read_is_seen_counted_and_never_passes() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("secret");
    fs::write(&f, b"\x7fELF").unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads anything: run as nobody then.
    let is_root = fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let mut c = if is_root {
        if !have("setpriv") {
            return;
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_stubstrip"));
        c
    } else {
        stubstrip()
    };
    c.args(["check", "--json"]).arg(d.path());
    let r = run_limited(&mut c, true);
    // Under a private directory (a Nix build's TMPDIR is mode 700) nobody cannot even list the
    // test's directory: nothing to test there.
    if is_root && json(&r)["census"]["files_seen"] == 0 && r.stderr.contains("Permission denied") {
        skip("nobody cannot reach the test's directory (a private parent directory, as in a Nix build)");
        return;
    }
    assert_eq!(r.code, 3, "{}", r.stderr);
    let v = json(&r);
    assert_eq!(v["census"]["files_seen"], 1, "{v:#}");
    assert_eq!(v["census"]["unreadable"], 1, "{v:#}");
    assert!(
        r.stderr.contains("check incomplete") && !r.stderr.contains("passed"),
        "{}",
        r.stderr
    );
}
