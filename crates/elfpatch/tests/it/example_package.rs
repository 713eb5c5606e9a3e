//! The packaging example (`examples/package.rs`), run on real files the way auditwheel bundles a
//! wheel's libraries: the library gets a SONAME of its own and a RUNPATH, the program needs it
//! by that name and finds it next to itself, and both still load.

use crate::common;

// The example's own code, run here in the test process (it is a module of this test, not a
// crate of its own).
#[path = "../../examples/package.rs"]
mod package;

use std::fs;
use std::path::Path;
use std::process::Command;

use elfpatch::Elf;

fn elf(path: &Path) -> Elf {
    Elf::parse(&fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_packaging_example_bundles_a_library_that_the_program_still_loads() {
    if !common::have("gcc") {
        common::skip("no gcc: the packaging example is not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    let (bin, lib) = (dir.path().join("app/bin"), dir.path().join("app/lib"));
    for d in [&build, &bin, &lib] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(build.join("foo.c"), "int foo(void) { return 42; }\n").unwrap();
    fs::write(
        build.join("main.c"),
        "#include <stdio.h>\nint foo(void);\nint main(void) { printf(\"foo=%d\\n\", foo()); return 0; }\n",
    )
    .unwrap();
    common::run_ok(
        Command::new("gcc")
            .current_dir(&build)
            .args([
                "-shared",
                "-fPIC",
                "-Wl,-soname,libfoo.so.1",
                "-o",
                "libfoo.so.1",
            ])
            .arg("foo.c"),
    );
    common::run_ok(
        Command::new("gcc")
            .current_dir(&build)
            .args(["-o", "main", "main.c", "-L.", "-l:libfoo.so.1"])
            .arg(format!("-Wl,-rpath,{}", build.display())),
    );
    // Bundled: the library under a name of its own, the program next to a script.
    let (main, foo) = (bin.join("main"), lib.join("libfoo-1a2b3c4d.so.1"));
    fs::copy(build.join("main"), &main).unwrap();
    fs::copy(build.join("libfoo.so.1"), &foo).unwrap();
    let script = bin.join("run.sh");
    fs::write(&script, "#!/bin/sh\nexec \"$(dirname \"$0\")/main\"\n").unwrap();

    let args = |list: &[&str], files: &[&Path]| {
        let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        v.extend(files.iter().map(|f| f.display().to_string()));
        package::Request::parse(v).unwrap()
    };
    let library = args(
        &["--soname", "libfoo-1a2b3c4d.so.1", "--runpath", "$ORIGIN"],
        &[&foo],
    );
    let program = args(
        &[
            "--runpath",
            "$ORIGIN/../lib",
            "--replace-needed",
            "libfoo.so.1=libfoo-1a2b3c4d.so.1",
        ],
        &[&main, &script],
    );
    let reports = package::run(&library);
    assert!(
        reports[0].as_ref().unwrap().contains(": edited"),
        "{reports:?}"
    );
    let reports = package::run(&program);
    assert!(
        reports[0].as_ref().unwrap().contains(": edited"),
        "{reports:?}"
    );
    assert_eq!(
        reports[1],
        Ok(format!("{}: skipped (not ELF)", script.display()))
    );

    let (foo_elf, main_elf) = (elf(&foo), elf(&main));
    assert_eq!(foo_elf.soname(), Some(&b"libfoo-1a2b3c4d.so.1"[..]));
    assert_eq!(foo_elf.runpath(), Some(&b"$ORIGIN"[..]));
    assert_eq!(main_elf.runpath(), Some(&b"$ORIGIN/../lib"[..]));
    assert!(main_elf.needed().contains(&&b"libfoo-1a2b3c4d.so.1"[..]));
    assert!(!main_elf.needed().contains(&&b"libfoo.so.1"[..]));
    // The old build directory is gone: the program finds the library through $ORIGIN alone.
    fs::remove_dir_all(&build).unwrap();
    let (ok, out) = common::run_program(&main);
    assert!(ok && out.contains("foo=42"), "{out}");

    // Packaging twice changes nothing; a file that is not there is one error naming it.
    let again = package::run(&program);
    assert_eq!(again[0], Ok(format!("{}: unchanged", main.display())));
    let missing = dir.path().join("app/bin/missing");
    let reports = package::run(&args(&["--runpath", "$ORIGIN"], &[&missing]));
    let error = reports[0].as_ref().unwrap_err();
    assert!(
        error.starts_with(&format!("{}: ", missing.display())),
        "{error}"
    );
}
