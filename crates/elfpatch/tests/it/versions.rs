//! Removing the one library a program has version requirements on (the differential against
//! patchelf found it on /usr/bin/kill): the version need records go with the DT_NEEDED entry, and
//! so must DT_VERSYM, which glibc otherwise reads through a null array of versions (SIGSEGV); the
//! `.gnu.version` section header becomes an `SHT_NULL` entry. patchelf 0.19.3 keeps the records
//! of the removed library, and ld.so stops on an assertion.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::elfpatch;
use elfpatch::Elf;
use object::elf::{DT_VERNEED, DT_VERSYM, SHT_GNU_VERSYM};
use testkit::{have, patchelf_0193, run_ok, skip};

/// Debian's glibc, by its path: loaded so, no object answers to the name `libc.so.6` that the
/// version records of a removed DT_NEEDED name (ld.so's `find_needed` matches names).
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// Runs `prog` with glibc preloaded (its DT_NEEDED on it is gone): (status, stdout, stderr).
fn run_preloaded(prog: &Path) -> (Option<i32>, String, String) {
    let o = Command::new(prog).env("LD_PRELOAD", LIBC).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn removing_the_only_versioned_library_drops_versym_and_the_program_runs() {
    if !cfg!(target_arch = "x86_64") || !have("gcc") || !Path::new(LIBC).exists() {
        skip("needs gcc on x86_64 and Debian's multiarch glibc");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("p.c");
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"VERSIONS\");return 0;}\n",
    )
    .unwrap();
    let prog = d.path().join("prog");
    run_ok(Command::new("gcc").arg("-o").arg(&prog).arg(&c));
    let before = Elf::parse(&fs::read(&prog).unwrap()).unwrap();
    assert_eq!(before.needed(), [b"libc.so.6"]);
    assert!(before.dynamic.as_ref().unwrap().get(DT_VERSYM).is_some());
    let ours = d.path().join("ours");
    run_ok(
        elfpatch()
            .args(["--remove-needed", "libc.so.6", "--output"])
            .arg(&ours)
            .arg(&prog),
    );
    let after = Elf::parse(&fs::read(&ours).unwrap()).unwrap();
    let dynamic = after.dynamic.as_ref().unwrap();
    assert!(after.needed().is_empty());
    assert_eq!(dynamic.get(DT_VERNEED), None);
    assert_eq!(
        dynamic.get(DT_VERSYM),
        None,
        "DT_VERSYM without version records"
    );
    assert!(
        !after
            .sections
            .iter()
            .any(|s| s.shdr.sh_type == SHT_GNU_VERSYM),
        "a .gnu.version section without version records"
    );
    assert_eq!(
        run_preloaded(&ours),
        (Some(0), "VERSIONS\n".into(), String::new())
    );
    if have("eu-elflint") {
        let o = Command::new("eu-elflint")
            .arg("--gnu-ld")
            .arg(&ours)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }
    if patchelf_0193() {
        let theirs = d.path().join("theirs");
        run_ok(
            Command::new("patchelf")
                .args(["--remove-needed", "libc.so.6", "--output"])
                .arg(&theirs)
                .arg(&prog),
        );
        // patchelf keeps libc.so.6's version records: ld.so stops on an assertion.
        let (code, _, err) = run_preloaded(&theirs);
        assert_ne!(code, Some(0));
        assert!(err.contains("Assertion"), "patchelf's result: {err}");
    }
}
