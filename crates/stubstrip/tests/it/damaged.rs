//! A file whose section header table is cut short: no loader reads section headers, so
//! it loads, but it is most likely a broken install. `check` and `fix` say that they saw it (a
//! warning line naming the file, and `damaged` in the JSON report) without failing on it, `fix`
//! leaves it byte-identical even where it has a stub entry to replace (elfpatch refuses to edit
//! it, an error naming the file), and `audit` reports it as finding SS013.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

/// Writes `lib` again without its last `cut` bytes (inside its section header table, which gcc
/// puts last) and returns its new bytes.
fn cut_short(lib: &Path, cut: usize) -> Vec<u8> {
    let bytes = fs::read(lib).unwrap();
    let e = elfpatch::Elf::parse(&bytes).unwrap();
    assert!(e.section_headers_end_file(), "the table is not last");
    let short = bytes[..bytes.len() - cut].to_vec();
    fs::write(lib, &short).unwrap();
    short
}

struct Out {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    stubbed: PathBuf,
    clean: PathBuf,
}

/// An output with two libraries cut short: one whose RUNPATH holds a stub directory, one
/// without a run path.
fn output() -> Option<Out> {
    if !can_build() {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let stub = stub_dir(tmp.path()).display().to_string();
    let out = tmp.path().join("out");
    let stubbed = lib_with_path(
        &out.join("lib/libstubbed.so"),
        &format!("{stub}:/opt/keep"),
        false,
    );
    let clean = shared(
        &out.join("lib"),
        "libclean.so",
        "libclean.so",
        "int clean_fn(void) { return 2; }\n",
        &[],
    );
    cut_short(&stubbed, 100);
    cut_short(&clean, 1);
    Some(Out {
        _tmp: tmp,
        out,
        stubbed,
        clean,
    })
}

fn said_for(stderr: &str, file: &Path) -> bool {
    stderr.lines().any(|l| {
        l.starts_with(&format!("stubstrip: {}: warning: ", file.display()))
            && l.contains("section header table out of bounds")
    })
}

#[test]
fn check_says_it_saw_a_file_cut_short_and_still_reads_its_run_path() {
    let Some(o) = output() else { return };
    let r = stubstrip_run(&["check"], &[&o.out]);
    // The stub entry is found all the same (the run path is read through the program headers).
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("libstubbed.so: RUNPATH entry"),
        "{}",
        r.stdout
    );
    assert!(said_for(&r.stderr, &o.stubbed), "{}", r.stderr);
    assert!(said_for(&r.stderr, &o.clean), "{}", r.stderr);
    let r = stubstrip_run(&["check", "--json"], &[&o.out]);
    let v = json(&r);
    let damaged = v["damaged"].as_array().unwrap();
    assert_eq!(damaged.len(), 2, "{v:#}");
    assert!(damaged
        .iter()
        .all(|d| d["error"].as_str().unwrap().contains("out of bounds")));
}

#[test]
fn fix_leaves_a_file_cut_short_byte_identical_and_says_why() {
    let Some(o) = output() else { return };
    let (stubbed, clean) = (fs::read(&o.stubbed).unwrap(), fs::read(&o.clean).unwrap());
    let r = stubstrip_run(&["fix"], &[&o.out]);
    // The stubbed one is refused by elfpatch: an error naming it, status 3.
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.lines().any(|l| l.starts_with("stubstrip: ")
            && !l.contains("warning:")
            && l.contains(&o.stubbed.display().to_string())
            && l.contains("section header table out of bounds")),
        "{}",
        r.stderr
    );
    // The clean one needs nothing: said, not failed on.
    assert!(said_for(&r.stderr, &o.clean), "{}", r.stderr);
    assert_eq!(fs::read(&o.stubbed).unwrap(), stubbed);
    assert_eq!(fs::read(&o.clean).unwrap(), clean);
    // Without the file fix cannot edit, the run succeeds and says what it saw.
    fs::remove_file(&o.stubbed).unwrap();
    let r = stubstrip_run(&["fix"], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(said_for(&r.stderr, &o.clean), "{}", r.stderr);
}

#[test]
fn audit_reports_a_file_cut_short_as_a_finding() {
    let Some(o) = output() else { return };
    let (v, _) = json_output(stubstrip().args(["audit", "--json"]).arg(&o.out));
    let codes = finding_codes(&v);
    // The stub entry is an error of its own (SS001), found all the same.
    assert!(codes.contains(&"SS001".to_string()), "{v:#}");
    assert_eq!(codes.iter().filter(|c| *c == "SS013").count(), 2, "{v:#}");
    let found = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "SS013" && f["file"].as_str().unwrap().ends_with("libclean.so"))
        .unwrap();
    assert_eq!(found["severity"], "warning");
    assert!(found["message"]
        .as_str()
        .unwrap()
        .contains("section header table out of bounds"));
    // A warning: it fails an audit that denies warnings, not one that denies errors only.
    fs::remove_file(&o.stubbed).unwrap();
    let audit = |deny: &str| {
        json_output(
            stubstrip()
                .args(["audit", "--json", "--deny", deny])
                .arg(&o.out),
        )
    };
    let (v, code) = audit("error");
    assert_eq!(
        (code, finding_codes(&v)),
        (0, vec!["SS013".to_string()]),
        "{v:#}"
    );
    assert_eq!(audit("warning").1, 1);
}
