//! The core contract of `stubstrip fix` and `stubstrip check`, on ELF files built with gcc and
//! read back with readelf: exit statuses, the `--json` schema, `--print-removed`, which files are
//! written and which are left alone.

use crate::common;

use std::fs;
use std::os::unix::fs::{symlink, FileTypeExt};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use common::*;

const DRIVER: &str = "/run/opengl-driver/lib";

/// The count line for [`tree`]'s output.
const TREE_COUNT: &str = "stubstrip: 4 files, 3 ELF files, 3 loadable objects\n";

/// An output tree: `lib/liba.so` (RUNPATH `STUB:/opt/keep`), `lib/libb.so` (RPATH
/// `/opt/x:STUB`), `lib/libclean.so` (no run path), `share/doc.txt` (not ELF).
struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    out: PathBuf,
    stub: String,
    a: PathBuf,
    b: PathBuf,
    clean: PathBuf,
    text: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let stub = stub_dir(&root).display().to_string();
    let out = root.join("out");
    let a = lib_with_path(
        &out.join("lib/liba.so"),
        &format!("{stub}:/opt/keep"),
        false,
    );
    let b = lib_with_path(&out.join("lib/libb.so"), &format!("/opt/x:{stub}"), true);
    let clean = shared(
        &out.join("lib"),
        "libclean.so",
        "libclean.so",
        "int c(void) { return 0; }\n",
        &[],
    );
    let text = out.join("share/doc.txt");
    fs::create_dir_all(text.parent().unwrap()).unwrap();
    fs::write(&text, "\x7fEL is not enough\n").unwrap();
    Tree {
        _tmp: tmp,
        root,
        out,
        stub,
        a,
        b,
        clean,
        text,
    }
}

#[test]
fn fix_replaces_stub_entries_in_place_and_check_then_passes() {
    if !can_build() {
        return;
    }
    let t = tree();
    let (a0, b0) = (write_stamp(&t.a), write_stamp(&t.b));
    let r = stubstrip_run(&["fix"], &[&t.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!("{TREE_COUNT}stubstrip: 2 of 3 ELF files rewritten, 2 stub entries replaced\n")
    );
    assert_eq!(r.stderr, "");
    assert_eq!(
        readelf_paths(&t.a),
        (Some(format!("{DRIVER}:/opt/keep")), None)
    );
    assert_eq!(
        readelf_paths(&t.b),
        (None, Some(format!("/opt/x:{DRIVER}")))
    );
    // Edited in place: same inode (hard links see the edit).
    assert_eq!(write_stamp(&t.a).0, a0.0);
    assert_eq!(write_stamp(&t.b).0, b0.0);

    let r = stubstrip_run(&["check"], &[&t.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!("{TREE_COUNT}stubstrip: check passed: no stub entries in 3 ELF files read\n")
    );
    // -v: one line per ELF file checked.
    let r = stubstrip_run(&["check", "-v"], &[&t.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: String = [&t.a, &t.b, &t.clean]
        .iter()
        .map(|p| format!("{}: no stub entries\n", p.display()))
        .collect();
    assert_eq!(
        r.stdout,
        format!(
            "{lines}{TREE_COUNT}stubstrip: check passed: no stub entries in 3 ELF files read\n"
        )
    );
}

#[test]
fn files_that_need_no_change_are_not_written() {
    if !can_build() {
        return;
    }
    let t = tree();
    let untouched = [&t.clean, &t.text];
    let before: Vec<_> = untouched.iter().map(|p| write_stamp(p)).collect();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(stubstrip_run(&["fix"], &[&t.out]).code, 0);
    let after: Vec<_> = untouched.iter().map(|p| write_stamp(p)).collect();
    assert_eq!(before, after, "a file needing no change was written");

    // A second run finds nothing to do and writes nothing at all.
    let all = [&t.a, &t.b, &t.clean, &t.text];
    let before: Vec<_> = all.iter().map(|p| write_stamp(p)).collect();
    std::thread::sleep(Duration::from_millis(20));
    let r = stubstrip_run(&["fix"], &[&t.out]);
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout,
        format!("{TREE_COUNT}stubstrip: 0 of 3 ELF files rewritten, 0 stub entries replaced\n")
    );
    let after: Vec<_> = all.iter().map(|p| write_stamp(p)).collect();
    assert_eq!(before, after, "the second run wrote a file");
}

#[test]
fn check_exits_1_naming_every_stub_entry_and_writes_nothing() {
    if !can_build() {
        return;
    }
    let t = tree();
    let before: Vec<_> = [&t.a, &t.b].iter().map(|p| write_stamp(p)).collect();
    let r = stubstrip_run(&["check"], &[&t.out]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr, "");
    assert_eq!(
        r.stdout,
        format!(
            "{}: RUNPATH entry {s}\n{}: RPATH entry {s}\n{TREE_COUNT}\
             stubstrip: check failed: 2 stub entries in 2 of 3 ELF files read\n",
            t.a.display(),
            t.b.display(),
            s = t.stub
        )
    );
    let after: Vec<_> = [&t.a, &t.b].iter().map(|p| write_stamp(p)).collect();
    assert_eq!(before, after);
    // A pattern names more stub directories: /opt/keep is one now.
    let r = stubstrip_run(&["check", "--stub-pattern", "/opt/k*"], &[&t.a]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("RUNPATH entry /opt/keep\n"),
        "{}",
        r.stdout
    );
    // One stub entry is one.
    let r = stubstrip_run(&["check"], &[&t.a]);
    assert!(
        r.stdout
            .ends_with("stubstrip: check failed: 1 stub entry in 1 of 1 ELF file read\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn fix_json_schema() {
    if !can_build() {
        return;
    }
    let t = tree();
    let compat = t.root.join("compat").display().to_string();
    let r = stubstrip_run(&["fix", "--json", "--compat", &compat], &[&t.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r);
    assert_eq!(
        keys(&v),
        [
            "census",
            "changes",
            "command",
            "compat",
            "driver_link",
            "elf_files",
            "errors",
            "files_scanned",
            "removed_dirs",
            "rewritten",
            "stub_entries_replaced"
        ]
    );
    assert_eq!(v["command"], "fix");
    assert_eq!(v["driver_link"], DRIVER);
    assert_eq!(v["compat"], compat.as_str());
    assert_eq!(v["files_scanned"], 4);
    assert_eq!(v["elf_files"], 3);
    assert_eq!(v["rewritten"], 2);
    assert_eq!(v["stub_entries_replaced"], 2);
    assert_eq!(v["removed_dirs"], serde_json::json!([t.stub]));
    assert_eq!(v["errors"], serde_json::json!([]));
    let changes = v["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2);
    for c in changes {
        assert_eq!(keys(c), ["entries", "path"]);
        for e in c["entries"].as_array().unwrap() {
            assert_eq!(keys(e), ["new", "old", "removed", "tag"]);
        }
    }
    assert_eq!(
        changes[0],
        serde_json::json!({
            "path": t.a.display().to_string(),
            "entries": [{
                "tag": "RUNPATH",
                "old": format!("{}:/opt/keep", t.stub),
                "new": format!("{compat}:{DRIVER}:/opt/keep"),
                "removed": [t.stub],
            }]
        })
    );
    assert_eq!(changes[1]["entries"][0]["tag"], "RPATH");
    assert_eq!(
        readelf_paths(&t.a).0,
        Some(format!("{compat}:{DRIVER}:/opt/keep"))
    );
    // The report for people goes to stderr: stdout is the JSON's.
    assert!(
        r.stderr.contains("2 of 3 ELF files rewritten"),
        "{}",
        r.stderr
    );
}

#[test]
fn check_json_schema() {
    if !can_build() {
        return;
    }
    let t = tree();
    let r = stubstrip_run(&["check", "--json"], &[&t.out]);
    assert_eq!(r.code, 1);
    let v = json(&r);
    assert_eq!(
        keys(&v),
        [
            "census",
            "command",
            "elf_files",
            "errors",
            "files_scanned",
            "files_with_stubs",
            "findings"
        ]
    );
    assert_eq!(v["command"], "check");
    assert_eq!(v["files_scanned"], 4);
    assert_eq!(v["elf_files"], 3);
    assert_eq!(v["files_with_stubs"], 2);
    assert_eq!(v["errors"], serde_json::json!([]));
    assert_eq!(
        v["findings"],
        serde_json::json!([
            {"path": t.a.display().to_string(), "tag": "RUNPATH", "entry": t.stub},
            {"path": t.b.display().to_string(), "tag": "RPATH", "entry": t.stub},
        ])
    );
}

#[test]
fn print_removed_lists_each_removed_directory_once_in_file_order() {
    if !can_build() {
        return;
    }
    let t = tree();
    let other = t.root.join("cuda/lib64/stubs");
    fs::create_dir_all(&other).unwrap();
    let other = other.display().to_string();
    // libc.so sorts after liba.so and libb.so: its second directory is new, its first is not.
    lib_with_path(
        &t.out.join("lib/libc.so"),
        &format!("{other}:{}", t.stub),
        false,
    );
    let r = stubstrip_run(&["fix", "--print-removed"], &[&t.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, format!("{}\n{other}\n", t.stub));
    assert!(r
        .stderr
        .contains("3 of 4 ELF files rewritten, 4 stub entries replaced"));
    // Nothing removed, nothing printed.
    let r = stubstrip_run(&["fix", "--print-removed"], &[&t.out]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    // It and --json both want stdout.
    let r = stubstrip_run(&["fix", "--print-removed", "--json"], &[&t.out]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// The census every report carries, as `--json` gives it.
fn census_of(v: &serde_json::Value) -> serde_json::Value {
    v["census"].clone()
}

#[test]
fn the_census_is_in_every_json_report() {
    if !can_build() {
        return;
    }
    let t = tree();
    let expected = serde_json::json!({
        "files_seen": 4, "elf_files": 3, "loadable_objects": 3,
        "skipped": {"separate_debug_files": 0, "relocatable_objects": 0, "core_files": 0},
        "excluded": 0, "unreadable": 0,
    });
    for sub in ["check", "audit", "fix"] {
        let v = json(&stubstrip_run(&[sub, "--json"], &[&t.out]));
        assert_eq!(census_of(&v), expected, "{sub}");
    }
}

#[test]
fn usage_errors_exit_2_and_write_nothing() {
    if !can_build() {
        return;
    }
    let t = tree();
    let before = fs::read(&t.a).unwrap();
    for args in [
        vec!["fix", "--driver-link", &t.stub],
        vec!["fix", "--driver-link", "/a:/b"],
        vec!["fix", "--compat", DRIVER],
        vec!["fix", "--driver-link", "relative/dir"],
        vec!["fix", "--driver-link", "/run/opengl-driver/lib/"],
        vec!["fix", "--compat", "/x/../compat"],
        vec!["fix", "--jobs", "0"],
        vec!["check", "--jobs", "0"],
        vec!["check", "--jobs", "many"],
        vec!["fix", "--no-such-flag"],
        vec!["check", "--no-such-flag"],
    ] {
        let r = stubstrip_run(&args, &[&t.out]);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.is_empty());
        assert_eq!(r.stdout, "", "{args:?}");
    }
    // Each bad value gets a message that says what is wrong with it.
    let said = |args: &[&str]| stubstrip_run(args, &[&t.out]).stderr;
    assert_eq!(
        said(&["fix", "--driver-link", "relative/dir"]),
        "stubstrip: the driver link relative/dir is not absolute (it must start with /) \
         (see stubstrip fix --help)\n"
    );
    assert_eq!(
        said(&["fix", "--compat", "/x/../compat"]),
        "stubstrip: the compat directory /x/../compat is not normalised: a .. component after \
         /x; write /compat (see stubstrip fix --help)\n"
    );
    // Each offending component is named, not only the first kind found.
    assert_eq!(
        said(&["fix", "--driver-link", "/run//x/../lib"]),
        "stubstrip: the driver link /run//x/../lib is not normalised: an empty component (//) \
         after /run, a .. component after /run//x; write /run/lib (see stubstrip fix --help)\n"
    );
    // clap's own errors take the same shape: one line, the program's name first.
    assert_eq!(
        said(&["fix", "--jobs", "0"]),
        "stubstrip: invalid value '0' for '--jobs <N>': must be at least 1 (the number of \
         worker threads) (see stubstrip fix --help)\n"
    );
    for sub in ["fix", "check"] {
        assert_eq!(stubstrip_run(&[sub], &[]).code, 2, "{sub} without PATH");
    }
    assert_eq!(fs::read(&t.a).unwrap(), before);
}

#[test]
fn a_missing_path_is_named_and_exits_3() {
    let missing = Path::new("/nonexistent/stubstrip-test");
    // One wording in every subcommand: the system's, without Rust's "(os error 2)".
    for sub in ["fix", "check", "explain", "audit"] {
        let r = stubstrip_run(&[sub], &[missing]);
        assert_eq!(r.code, 3, "{sub}: {}", r.stderr);
        assert!(
            r.stderr.starts_with(&format!(
                "stubstrip: {}: no such file or directory",
                missing.display()
            )),
            "{sub}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("os error"), "{sub}: {}", r.stderr);
        assert!(!r.stderr.contains("passed"), "{sub}: {}", r.stderr);
    }
}

/// Copies of a gcc-built ELF file cut short, as a failed download or disk would leave them.
fn truncated(t: &Tree) -> Vec<PathBuf> {
    let bytes = fs::read(&t.clean).unwrap();
    [100usize, 2000]
        .iter()
        .map(|&n| {
            let p = t.out.join(format!("lib/libcut{n}.so"));
            fs::write(&p, &bytes[..n]).unwrap();
            p
        })
        .collect()
}

#[test]
fn files_that_fail_stay_byte_identical_and_the_rest_is_fixed() {
    if !can_build() {
        return;
    }
    let t = tree();
    let cut = truncated(&t);
    // A running program cannot be opened for writing (ETXTBSY), not even by root.
    let busy = program(
        &t.out.join("bin/daemon"),
        "#include <unistd.h>\nint main(void) { sleep(60); return 0; }\n",
        &[&format!("-Wl,-rpath,{}", t.stub)],
    );
    let mut daemon: Child = std::process::Command::new(&busy).spawn().unwrap();
    let before: Vec<Vec<u8>> = cut
        .iter()
        .chain([&busy])
        .map(|p| fs::read(p).unwrap())
        .collect();
    let stamps: Vec<_> = cut.iter().chain([&busy]).map(|p| write_stamp(p)).collect();
    let r = stubstrip_run(&["fix", "--json"], &[&t.out]);
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(r.code, 3, "{}", r.stderr);
    let after: Vec<Vec<u8>> = cut
        .iter()
        .chain([&busy])
        .map(|p| fs::read(p).unwrap())
        .collect();
    assert!(before == after, "a file that failed was changed");
    let stamps_after: Vec<_> = cut.iter().chain([&busy]).map(|p| write_stamp(p)).collect();
    assert_eq!(stamps, stamps_after);
    // The others were fixed all the same.
    assert_eq!(readelf_paths(&t.a).0, Some(format!("{DRIVER}:/opt/keep")));
    let v = json(&r);
    let failed: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    let mut expected: Vec<String> = cut
        .iter()
        .chain([&busy])
        .map(|p| p.display().to_string())
        .collect();
    expected.sort();
    assert_eq!(failed, expected);
    for e in v["errors"].as_array().unwrap() {
        assert_eq!(keys(e), ["error", "path"]);
        let (path, error) = (e["path"].as_str().unwrap(), e["error"].as_str().unwrap());
        assert!(error.starts_with(&format!("{path}: ")), "{error}");
        assert!(
            r.stderr.contains(&format!("stubstrip: {error}\n")),
            "{}",
            r.stderr
        );
    }
    assert_eq!(v["rewritten"], 2);
    assert_eq!(v["elf_files"], 6);
    assert!(
        r.stderr
            .ends_with("stubstrip: 2 of 6 ELF files rewritten, 2 stub entries replaced, 3 files could not be processed (named on stderr)\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn check_never_says_passed_about_files_it_could_not_read() {
    if !can_build() {
        return;
    }
    let t = tree();
    assert_eq!(stubstrip_run(&["fix"], &[&t.out]).code, 0);
    let cut = truncated(&t);
    let r = stubstrip_run(&["check"], &[&t.out]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(!r.stdout.contains("passed"), "{}", r.stdout);
    // The first cut ends inside the program header table; the second inside a segment, which
    // the reader reports as a segment past the end of the file.
    for (p, what) in cut.iter().zip(["truncated", "inconsistent headers"]) {
        assert!(
            r.stderr
                .contains(&format!("stubstrip: {}: {what}", p.display())),
            "{}",
            r.stderr
        );
    }
    assert!(
        r.stdout.ends_with(
            "stubstrip: check incomplete: no stub entries in the 3 ELF files read; \
             2 files could not be read (named on stderr)\n"
        ),
        "{}",
        r.stdout
    );
    let v = json(&stubstrip_run(&["check", "--json"], &[&t.out]));
    assert_eq!(v["elf_files"], 5);
    assert_eq!(v["errors"].as_array().unwrap().len(), 2);

    // A stub entry as well: exit 1 wins, and the summary still counts the unread files.
    lib_with_path(&t.out.join("lib/libstub.so"), &t.stub, false);
    let r = stubstrip_run(&["check"], &[&t.out]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout.ends_with(
            "stubstrip: check failed: 1 stub entry in 1 of 4 ELF files read; \
             2 files could not be read (named on stderr)\n"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn symlinks_inside_a_tree_are_not_followed_named_ones_are() {
    if !can_build() {
        return;
    }
    let t = tree();
    // An ELF file with a stub entry outside the tree, reached by a link to it and by a link to
    // its directory.
    let outside = lib_with_path(&t.root.join("elsewhere/libout.so"), &t.stub, false);
    symlink(&outside, t.out.join("lib/libout.so")).unwrap();
    symlink(outside.parent().unwrap(), t.out.join("linked-dir")).unwrap();
    let bytes = fs::read(&outside).unwrap();
    let stamp = write_stamp(&outside);
    // check does not look behind them: the tree is clean once fixed.
    let r = stubstrip_run(&["fix"], &[&t.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("2 of 3 ELF files rewritten"),
        "{}",
        r.stdout
    );
    assert_eq!(fs::read(&outside).unwrap(), bytes);
    assert_eq!(write_stamp(&outside), stamp);
    assert!(fs::symlink_metadata(t.out.join("lib/libout.so"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(stubstrip_run(&["check"], &[&t.out]).code, 0);
    // Named, a symlink is followed (find -H), to a file or to a directory: check finds the
    // stub entry behind it, and fix edits the file it points at, leaving the link a link.
    for named in [t.out.join("lib/libout.so"), t.out.join("linked-dir")] {
        let r = stubstrip_run(&["check"], &[&named]);
        assert_eq!(r.code, 1, "{}: {}", named.display(), r.stdout);
        assert!(!r.stdout.contains("passed"), "{}", r.stdout);
        assert!(
            r.stdout.contains("1 stub entry in 1 of 1 ELF file read"),
            "{}",
            r.stdout
        );
    }
    let r = stubstrip_run(&["fix"], &[&t.out.join("lib/libout.so")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .ends_with("1 of 1 ELF file rewritten, 1 stub entry replaced\n"),
        "{}",
        r.stdout
    );
    assert_eq!(readelf_paths(&outside).0, Some(DRIVER.to_string()));
    assert!(fs::symlink_metadata(t.out.join("lib/libout.so"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        stubstrip_run(&["check"], &[&t.out.join("linked-dir")]).code,
        0
    );
}

#[test]
fn paths_without_an_elf_file_never_pass() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("README"), "text\n").unwrap();
    let for_each = |sub: &str, nothing: &str| {
        let r = stubstrip_run(&[sub], &[d.path()]);
        assert_eq!(r.code, 0, "{sub}: {}", r.stderr);
        assert_eq!(
            r.stdout,
            format!(
                "stubstrip: 1 file, 0 ELF files, 0 loadable objects\n\
                 stubstrip: {nothing}: no ELF file under the named paths\n"
            ),
            "{sub}"
        );
    };
    for_each("check", "check: nothing checked");
    for_each("fix", "nothing rewritten");
    for_each("audit", "audit: nothing audited");
}

#[test]
fn fifos_and_sockets_are_skipped_even_when_named() {
    if !can_build() {
        return;
    }
    let t = tree();
    let fifo = t.out.join("share/fifo");
    run_ok(std::process::Command::new("mkfifo").arg(&fifo));
    let _socket = std::os::unix::net::UnixListener::bind(t.out.join("share/socket")).unwrap();
    // A named symlink to the FIFO is followed to it, and the FIFO is not read.
    let link = t.root.join("link-to-fifo");
    symlink(&fifo, &link).unwrap();
    for sub in ["fix", "check"] {
        let r = stubstrip_run(&[sub, "--json"], &[&t.out, &fifo, &link]);
        assert_eq!(r.code, 0, "{sub}: {}", r.stderr);
        let v = json(&r);
        // Only the four regular files were looked at; nothing blocked on the FIFO.
        assert_eq!(v["files_scanned"], 4, "{sub}: {v:#}");
        assert_eq!(v["errors"], serde_json::json!([]), "{sub}");
        // Named, each is said to be skipped.
        for named in [&fifo, &link] {
            let note = format!(
                "stubstrip: {}: not a regular file or directory; skipped\n",
                named.display()
            );
            assert!(r.stderr.contains(&note), "{sub}: {}", r.stderr);
        }
    }
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}
