//! `stubstrip audit` on real binaries built with gcc: each finding produced on purpose, and
//! absent from the same binary built without the problem.

use crate::common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;

const LIB: &str = "int lib_fn(void) { return 1; }\n";
const MAIN: &str = "int lib_fn(void);\nint main(void) { return lib_fn() - 1; }\n";

/// `stubstrip audit --json` on `paths`, with no build directory but the ones given.
fn audit(paths: &[&Path], extra: &[&str], env: &[(&str, &str)]) -> (Value, i32) {
    let mut c = stubstrip();
    c.arg("audit")
        .arg("--json")
        .args(extra)
        .args(paths)
        .env_remove("TMPDIR")
        .env_remove("NIX_BUILD_TOP");
    for (k, v) in env {
        c.env(k, v);
    }
    json_output(&mut c)
}

fn codes(v: &Value) -> Vec<String> {
    finding_codes(v)
}

/// A program needing `lib_fn` from `lib`, with this run path (`--enable-new-dtags` unless
/// `rpath`).
fn app(path: &Path, lib: &Path, runpath: &str, rpath: bool) -> std::path::PathBuf {
    let dtags = if rpath {
        "-Wl,--disable-new-dtags"
    } else {
        "-Wl,--enable-new-dtags"
    };
    program(
        path,
        MAIN,
        &[
            dtags,
            &format!("-Wl,-rpath,{runpath}"),
            lib.to_str().unwrap(),
        ],
    )
}

#[test]
fn a_clean_output_has_no_findings() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let lib = shared(&out.join("lib"), "libgood.so.1", "libgood.so.1", LIB, &[]);
    app(&out.join("bin/clean"), &lib, "$ORIGIN/../lib", false);
    let (v, code) = audit(&[&out], &[], &[]);
    assert_eq!(codes(&v), Vec::<String>::new(), "{v:#}");
    assert_eq!(v["elf_files"], 2);
    assert_eq!(code, 0);
}

#[test]
fn stub_entries_are_errors_until_fixed() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let stubs = t
        .path()
        .join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib"));
    let lib = shared(
        &stubs,
        "libcuda.so.1",
        "libcuda.so.1",
        "int lib_fn(void) { return 34; }\n",
        &[],
    );
    let exe = app(
        &t.path().join("out/bin/app"),
        &lib,
        stubs.to_str().unwrap(),
        false,
    );
    let (v, code) = audit(&[&exe], &[], &[]);
    assert_eq!(codes(&v), vec!["SS001"]);
    let f = &v["findings"][0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["tag"], "RUNPATH");
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("libcuda.so.1 is loaded from it"));
    assert_eq!(code, 1, "errors fail by default");
    assert_eq!(audit(&[&exe], &["--deny", "never"], &[]).1, 0);

    run_ok(stubstrip().arg("fix").arg(&exe));
    // Now the driver link, which exists only at run time: neither a missing directory nor a
    // missing libcuda.so.1 is reported.
    let (v, code) = audit(&[&exe], &["--deny", "info"], &[]);
    assert_eq!(codes(&v), Vec::<String>::new(), "{v:#}");
    assert_eq!(code, 0);
}

#[test]
fn a_library_in_two_runpath_directories_is_ambiguous() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let a = shared(&t.path().join("a"), "libdup.so.1", "libdup.so.1", LIB, &[]);
    shared(
        &t.path().join("b"),
        "libdup.so.1",
        "libdup.so.1",
        "int lib_fn(void) { return 2; }\n",
        &[],
    );
    let dirs = format!("{0}/a:{0}/b", t.path().display());
    let exe = app(&t.path().join("bin/two"), &a, &dirs, false);
    let (v, code) = audit(&[&exe], &[], &[]);
    assert_eq!(codes(&v), vec!["SS002"]);
    let f = &v["findings"][0];
    assert_eq!(f["library"], "libdup.so.1");
    assert_eq!(
        f["directories"],
        serde_json::json!([
            format!("{}/a", t.path().display()),
            format!("{}/b", t.path().display())
        ])
    );
    assert_eq!(code, 0, "a warning");
    assert_eq!(audit(&[&exe], &["--deny", "warning"], &[]).1, 1);
    let exe = app(
        &t.path().join("bin/one"),
        &a,
        &format!("{}/a", t.path().display()),
        false,
    );
    assert_eq!(codes(&audit(&[&exe], &[], &[]).0), Vec::<String>::new());
}

#[test]
fn build_directory_entries_are_errors() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let top = t.path().join("build-top");
    let lib = shared(&top.join("source/lib"), "libb.so.1", "libb.so.1", LIB, &[]);
    let exe = app(
        &t.path().join("out/bin/app"),
        &lib,
        &format!("{}/source/lib", top.display()),
        false,
    );
    assert_eq!(codes(&audit(&[&exe], &[], &[]).0), Vec::<String>::new());
    let (v, code) = audit(&[&exe], &["--build-dir", top.to_str().unwrap()], &[]);
    assert_eq!(codes(&v), vec!["SS003"]);
    assert_eq!(code, 1);
    let (v, _) = audit(&[&exe], &[], &[("NIX_BUILD_TOP", top.to_str().unwrap())]);
    assert_eq!(codes(&v), vec!["SS003"]);
    let (v, _) = audit(&[&exe], &[], &[("TMPDIR", t.path().to_str().unwrap())]);
    assert_eq!(codes(&v), vec!["SS003"]);
}

#[test]
fn missing_and_relative_entries() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let lib = shared(&t.path().join("lib"), "libm1.so.1", "libm1.so.1", LIB, &[]);
    let good = format!("{}/lib", t.path().display());
    let exe = app(
        &t.path().join("bin/missing"),
        &lib,
        &format!("{good}:{}/nonexistent", t.path().display()),
        false,
    );
    let (v, code) = audit(&[&exe], &[], &[]);
    assert_eq!(codes(&v), vec!["SS004"]);
    assert_eq!(code, 0);
    assert_eq!(audit(&[&exe], &["--deny", "warning"], &[]).1, 1);

    let exe = app(
        &t.path().join("bin/relative"),
        &lib,
        &format!("{good}:lib"),
        false,
    );
    let (v, code) = audit(&[&exe], &[], &[]);
    assert_eq!(codes(&v), vec!["SS005"]);
    assert_eq!(code, 1);
}

#[test]
fn needed_libraries_found_nowhere() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let lib = shared(
        &t.path().join("lib"),
        "libgone.so.1",
        "libgone.so.1",
        LIB,
        &[],
    );
    let exe = app(
        &t.path().join("bin/app"),
        &lib,
        &format!("{}/lib", t.path().display()),
        false,
    );
    assert_eq!(codes(&audit(&[&exe], &[], &[]).0), Vec::<String>::new());
    fs::remove_file(&lib).unwrap();
    let (v, _) = audit(&[&exe], &[], &[]);
    assert_eq!(codes(&v), vec!["SS006"]);
    assert_eq!(v["findings"][0]["library"], "libgone.so.1");
}

#[test]
fn rpath_without_runpath_is_reported() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let lib = shared(&t.path().join("lib"), "libr.so.1", "libr.so.1", LIB, &[]);
    let dir = format!("{}/lib", t.path().display());
    let exe = app(&t.path().join("bin/rpath"), &lib, &dir, true);
    let (v, code) = audit(&[&exe], &[], &[]);
    assert_eq!(codes(&v), vec!["SS007"]);
    assert_eq!(code, 0);
    let exe = app(&t.path().join("bin/runpath"), &lib, &dir, false);
    assert_eq!(codes(&audit(&[&exe], &[], &[]).0), Vec::<String>::new());
}

#[test]
fn unreadable_files_exit_3() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let bad = t.path().join("libbad.so");
    fs::write(&bad, b"\x7fELF\x02\x01\x01garbage").unwrap();
    fs::write(t.path().join("README"), b"not ELF at all").unwrap();
    let (v, code) = audit(&[t.path()], &[], &[]);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(code, 3);
}

#[test]
fn the_codes_table_lists_every_code_once() {
    let out = run_ok(stubstrip().args(["audit", "--codes"]));
    let text = String::from_utf8(out.stdout).unwrap();
    for n in 1..=15 {
        assert_eq!(text.matches(&format!("| SS{n:03} |")).count(), 1, "{text}");
    }
    let doc = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/EXPLAIN.md")).unwrap();
    assert!(
        doc.contains(text.trim()),
        "EXPLAIN.md's table is out of date:\n{text}"
    );
}
