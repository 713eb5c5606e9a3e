//! The library calls of `integrations/maturin/elfpatch.patch`, maturin's wheel repair done
//! in-process, in the order maturin's Linux repair makes them (`ElfRepairer::patch_repair`): the
//! grafted library gets a SONAME of its own and `DT_RPATH=$ORIGIN`, the extension needs it by
//! that name and finds it through `DT_RPATH=$ORIGIN/../pkg.libs`, and a program using the
//! extension still runs once the build directory is gone. CI builds this side of the
//! integration; the maturin build itself is recorded in integrations/maturin/README.md.

use crate::common;

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::Command;

use elfpatch::{edit_in_place, Edit, ElfFile, ErrorKind, Options, Outcome, Result};

/// The patch's functions, on the same calls (maturin's names; errors as elfpatch returns them).
mod maturin {
    use super::*;

    fn bytes(s: &impl AsRef<OsStr>) -> Vec<u8> {
        s.as_ref().as_encoded_bytes().to_vec()
    }

    fn edit(file: &Path, edits: &[Edit]) -> Result<Outcome> {
        edit_in_place(file, edits, &Options::default())
    }

    pub fn replace_needed(file: &Path, pairs: &[(&str, &str)]) -> Result<Outcome> {
        let edits: Vec<_> = pairs
            .iter()
            .map(|(old, new)| Edit::ReplaceNeeded {
                old: bytes(old),
                new: bytes(new),
            })
            .collect();
        edit(file, &edits)
    }

    pub fn set_soname(file: &Path, soname: &str) -> Result<Outcome> {
        edit(file, &[Edit::SetSoname(bytes(&soname))])
    }

    pub fn set_rpath(file: &Path, rpath: &str) -> Result<Outcome> {
        let edits = [
            Edit::RemoveRunpath,
            Edit::RemoveRpath,
            Edit::SetRpath(bytes(&rpath)),
        ];
        edit(file, &edits)
    }

    pub fn get_rpath(file: &Path) -> Result<Vec<String>> {
        let file = ElfFile::open(file)?;
        let elf = file.elf();
        let rpath = elf.runpath().or(elf.rpath());
        Ok(rpath
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .into_iter()
            .collect())
    }
}

fn gcc(dir: &Path, args: &[&str]) {
    common::run_ok(Command::new("gcc").current_dir(dir).args(args));
}

#[test]
fn maturins_repair_calls_graft_a_library_that_still_loads() {
    if !common::have("gcc") {
        common::skip("no gcc: maturin's repair calls are not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (build, pkg, libs) = (root.join("build"), root.join("pkg"), root.join("pkg.libs"));
    for d in [&build, &pkg, &libs] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(build.join("dep.c"), "int dep(void) { return 42; }\n").unwrap();
    fs::write(
        build.join("ext.c"),
        "int dep(void);\nint ext(void) { return dep() + 1; }\n",
    )
    .unwrap();
    fs::write(
        build.join("main.c"),
        "#include <stdio.h>\nint ext(void);\nint main(void) { printf(\"ext=%d\\n\", ext()); return 0; }\n",
    )
    .unwrap();
    // The system library as the distribution links it (a RUNPATH of its own build), the
    // extension as cargo links it (no run path), a program that uses the extension.
    let build_dir = build.display().to_string();
    gcc(
        &build,
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libdep.so.1",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{build_dir}"),
            "-o",
            "libdep.so.1",
            "dep.c",
        ],
    );
    gcc(
        &build,
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,ext.so",
            "-o",
            "ext.so",
            "ext.c",
            "-L.",
            "-l:libdep.so.1",
        ],
    );
    gcc(
        &pkg,
        &[
            "-o",
            "../main",
            &format!("{build_dir}/main.c"),
            &format!("{build_dir}/ext.so"),
            "-Wl,-rpath,$ORIGIN/pkg",
            &format!("-Wl,-rpath-link,{build_dir}"),
        ],
    );
    let (ext, lib) = (pkg.join("ext.so"), libs.join("libdep-1a2b3c4d.so.1"));
    fs::copy(build.join("ext.so"), &ext).unwrap();
    fs::copy(build.join("libdep.so.1"), &lib).unwrap();

    // patch_repair: the grafted library, then the extension.
    assert!(maturin::set_soname(&lib, "libdep-1a2b3c4d.so.1")
        .unwrap()
        .changed());
    assert_eq!(maturin::get_rpath(&lib).unwrap(), [build_dir.as_str()]);
    assert!(maturin::set_rpath(&lib, "$ORIGIN").unwrap().changed());
    let pairs = [
        ("libdep.so.1", "libdep-1a2b3c4d.so.1"),
        // Not needed by the extension: nothing to rename, no error (as patchelf).
        ("libother.so.3", "libother-99.so.3"),
    ];
    assert!(maturin::replace_needed(&ext, &pairs).unwrap().changed());
    let mut rpaths = maturin::get_rpath(&ext).unwrap();
    assert!(rpaths.is_empty(), "{rpaths:?}");
    rpaths.push("$ORIGIN/../pkg.libs".into());
    assert!(maturin::set_rpath(&ext, &rpaths.join(":"))
        .unwrap()
        .changed());

    let (lib_file, ext_file) = (ElfFile::open(&lib).unwrap(), ElfFile::open(&ext).unwrap());
    let (l, e) = (lib_file.elf(), ext_file.elf());
    assert_eq!(l.soname(), Some(&b"libdep-1a2b3c4d.so.1"[..]));
    // --force-rpath: DT_RPATH, and the library's own DT_RUNPATH is gone.
    assert_eq!((l.rpath(), l.runpath()), (Some(&b"$ORIGIN"[..]), None));
    assert_eq!(e.needed(), [&b"libdep-1a2b3c4d.so.1"[..]]);
    assert_eq!(
        (e.rpath(), e.runpath()),
        (Some(&b"$ORIGIN/../pkg.libs"[..]), None)
    );
    common::assert_no_new_complaints(&build.join("libdep.so.1"), &lib);
    common::assert_no_new_complaints(&build.join("ext.so"), &ext);

    // The build directory gone, the program loads the extension and the grafted copy.
    fs::remove_dir_all(&build).unwrap();
    let (ok, out) = common::run_program(&root.join("main"));
    assert!(ok && out.contains("ext=43"), "{out}");

    // A second repair changes nothing.
    assert!(!maturin::set_rpath(&ext, "$ORIGIN/../pkg.libs")
        .unwrap()
        .changed());
    assert!(!maturin::set_soname(&lib, "libdep-1a2b3c4d.so.1")
        .unwrap()
        .changed());

    // What maturin's error message gets: the path and the reason, typed for a caller that acts.
    let err = maturin::set_soname(&pkg, "x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidRequest);
    assert_eq!(err.path(), Some(pkg.as_path()));
    let text = root.join("README");
    fs::write(&text, "not ELF").unwrap();
    let err = maturin::get_rpath(&text).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotElf);
    assert!(err.to_string().starts_with(&text.display().to_string()));
}
