//! `stubstrip explain` against the real loader: programs built with gcc whose libraries sit in
//! RPATH, RUNPATH, LD_LIBRARY_PATH, the cache and the default directories, run with
//! `LD_DEBUG=libs`; every library the loader searched must resolve to the file it opened.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const LIB: &str = "int lib_fn(void) { return 1; }\n";

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A real file in the first default directory whose name is no cache key (the full version of
/// zlib's file name): the loader finds it only by searching the default directories.
fn default_dir_only_library(d: &Diagnostics) -> Option<String> {
    let dir = d.system_dirs.first()?;
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("libz.so.1."))
        .collect();
    names.sort();
    names.into_iter().next()
}

#[test]
fn explain_agrees_with_ld_so_on_rpath_ld_library_path_cache_and_default_dirs() {
    if !can_build() {
        return;
    }
    let Some(diag) = diagnostics() else {
        skip("ld.so --list-diagnostics unavailable");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    // RPATH of the program, inherited by libr (which has none) for libr2.
    shared(&t.join("rp"), "libr2.so.1", "libr2.so.1", LIB, &[]);
    shared(
        &t.join("rp"),
        "libr.so.1",
        "libr.so.1",
        "int lib_fn(void);\nint r_fn(void) { return lib_fn(); }\n",
        &["-Wl,--no-as-needed", &format!("{}/rp/libr2.so.1", p(t))],
    );
    // The same name on LD_LIBRARY_PATH loses against RPATH; libl is only there.
    shared(
        &t.join("llp"),
        "libr.so.1",
        "libr.so.1",
        "int r_fn(void) { return 0; }\n",
        &[],
    );
    shared(&t.join("llp"), "libl.so.1", "libl.so.1", LIB, &[]);
    // A name only the default directories have.
    let zlib = default_dir_only_library(&diag);
    let mut args: Vec<String> = vec![
        "-Wl,--no-as-needed".into(),
        "-Wl,--disable-new-dtags".into(),
        format!("-Wl,-rpath,{}/rp", p(t)),
        format!("{}/rp/libr.so.1", p(t)),
        format!("{}/llp/libl.so.1", p(t)),
        "-lm".into(),
    ];
    if let Some(z) = &zlib {
        shared(&t.join("linkonly"), z, z, "", &[]);
        args.push(format!("{}/linkonly/{z}", p(t)));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exe = program(
        &t.join("bin/with-rpath"),
        "#include <math.h>\n#include <stdio.h>\nint r_fn(void);\nint main(int c, char **v) { printf(\"%d %f\\n\", r_fn(), sqrt((double)c)); return 0; }\n",
        &args,
    );
    let llp = format!("{}/llp", p(t));
    let (v, trace) = assert_agrees(&exe, Some(&llp), &[]);
    assert!(trace.success, "{}", trace.stderr);
    assert_eq!(loaded(&v, "libr.so.1")["found_via"], "RPATH");
    assert_eq!(loaded(&v, "libr2.so.1")["found_via"], "RPATH");
    assert_eq!(
        loaded(&v, "libr2.so.1")["search_list_of"],
        p(&exe),
        "RPATH of the program"
    );
    assert_eq!(loaded(&v, "libl.so.1")["found_via"], "LD_LIBRARY_PATH");
    assert_eq!(loaded(&v, "libm.so.6")["found_via"], "ld.so.cache");
    assert_eq!(loaded(&v, "libc.so.6")["found_via"], "ld.so.cache");
    if let Some(z) = &zlib {
        assert_eq!(loaded(&v, z)["found_via"], "default directories");
        assert_eq!(
            loaded(&v, z)["path"].as_str().unwrap(),
            format!("{}{z}", diag.system_dirs[0])
        );
    }
    // The settings explain read out of ld.so are the ones it reports about itself.
    assert_eq!(
        v["settings"]["default_dirs"],
        serde_json::json!(diag.system_dirs)
    );
    assert_eq!(v["settings"]["lib"], diag.lib);
    assert_eq!(v["settings"]["platform"], diag.platform);
}

#[test]
fn explain_agrees_with_ld_so_on_runpath_origin_lib_platform_and_wrong_class() {
    if !can_build() {
        return;
    }
    let Some(diag) = diagnostics() else {
        skip("ld.so --list-diagnostics unavailable");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    // libu is found through the program's RUNPATH; libu2 only through libu's own RUNPATH.
    shared(&t.join("ru2"), "libu2.so.1", "libu2.so.1", LIB, &[]);
    shared(
        &t.join("ru"),
        "libu.so.1",
        "libu.so.1",
        "int lib_fn(void);\nint u_fn(void) { return lib_fn(); }\n",
        &[
            "-Wl,--no-as-needed",
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN/../ru2",
            &format!("{}/ru2/libu2.so.1", p(t)),
        ],
    );
    // The RUNPATH copy of libl loses against LD_LIBRARY_PATH.
    shared(
        &t.join("ru"),
        "libl.so.1",
        "libl.so.1",
        "int l_fn(void) { return 0; }\n",
        &[],
    );
    shared(
        &t.join("llp"),
        "libl.so.1",
        "libl.so.1",
        "int l_fn(void) { return 0; }\n",
        &[],
    );
    // $PLATFORM and $LIB directories named the way this loader expands them.
    shared(
        &t.join("plat").join(&diag.platform),
        "libp.so.1",
        "libp.so.1",
        "int p_fn(void){return 0;}\n",
        &[],
    );
    shared(
        &t.join("libdir").join(&diag.lib),
        "libq.so.1",
        "libq.so.1",
        "int q_fn(void){return 0;}\n",
        &[],
    );
    // A 32-bit libw first in RUNPATH, the 64-bit one after it.
    let m32 = m32_works();
    if m32 {
        shared(
            &t.join("w32"),
            "libw.so.1",
            "libw.so.1",
            "int w_fn(void){return 0;}\n",
            &["-m32"],
        );
    }
    shared(
        &t.join("w64"),
        "libw.so.1",
        "libw.so.1",
        "int w_fn(void){return 0;}\n",
        &[],
    );
    let runpath = format!(
        "$ORIGIN/../ru:${{ORIGIN}}/../w32:$ORIGIN/../w64:{t}/plat/$PLATFORM:{t}/libdir/$LIB",
        t = p(t)
    );
    let exe = program(
        &t.join("bin/with-runpath"),
        "int u_fn(void); int l_fn(void); int p_fn(void); int q_fn(void); int w_fn(void);\n\
         int main(void) { return u_fn() - 1 + l_fn() + p_fn() + q_fn() + w_fn(); }\n",
        &[
            "-Wl,--no-as-needed",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{runpath}"),
            &format!("{}/ru/libu.so.1", p(t)),
            &format!("{}/llp/libl.so.1", p(t)),
            &format!("{}/plat/{}/libp.so.1", p(t), diag.platform),
            &format!("{}/libdir/{}/libq.so.1", p(t), diag.lib),
            &format!("{}/w64/libw.so.1", p(t)),
        ],
    );
    let llp = format!("{}/llp", p(t));
    let (v, trace) = assert_agrees(&exe, Some(&llp), &[]);
    assert!(trace.success, "{}", trace.stderr);
    assert_eq!(loaded(&v, "libu.so.1")["found_via"], "RUNPATH");
    assert_eq!(
        loaded(&v, "libu2.so.1")["search_list_of"],
        format!("{}/bin/../ru/libu.so.1", p(t))
    );
    assert_eq!(loaded(&v, "libl.so.1")["found_via"], "LD_LIBRARY_PATH");
    assert_eq!(loaded(&v, "libp.so.1")["found_via"], "RUNPATH");
    assert_eq!(loaded(&v, "libq.so.1")["found_via"], "RUNPATH");
    let w = loaded(&v, "libw.so.1");
    assert_eq!(
        w["path"].as_str().unwrap(),
        format!("{}/bin/../w64/libw.so.1", p(t))
    );
    if m32 {
        let passed = w["passed_over"].as_array().unwrap();
        assert!(
            passed
                .iter()
                .any(|x| x["reason"] == "wrong ELF class (ELFCLASS32)"
                    && x["path"].as_str().unwrap().ends_with("/w32/libw.so.1")),
            "{w:#}"
        );
    }
}

#[test]
fn explain_agrees_with_ld_so_on_paths_in_needed_and_nodeflib() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    // No SONAME: the program records the path it was linked with.
    let c = source(t, "abs.c", "int abs_fn(void) { return 0; }\n");
    fs::create_dir_all(t.join("abs")).unwrap();
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(t.join("abs/libabs.so"))
            .arg(c),
    );
    let exe = program(
        &t.join("bin/direct"),
        "int abs_fn(void); int main(void) { return abs_fn(); }\n",
        &[&format!("{}/abs/libabs.so", p(t))],
    );
    let (v, trace) = assert_agrees(&exe, None, &[]);
    assert!(trace.success);
    let l = loaded(&v, &format!("{}/abs/libabs.so", p(t)));
    assert_eq!(l["found_via"], "direct");
    assert!(trace.inits.contains(&format!("{}/abs/libabs.so", p(t))));

    // DF_1_NODEFLIB (ld sets it on shared libraries only): libnd's libz.so.1 is in the cache,
    // but inside a default directory, so neither the entry nor the default directories apply.
    let Some(diag) = diagnostics() else {
        return;
    };
    let zlib = format!("{}libz.so.1", diag.system_dirs[0]);
    if !Path::new(&zlib).exists() {
        skip(&format!("the DF_1_NODEFLIB case needs {zlib}"));
        return;
    }
    shared(
        &t.join("nd"),
        "libnd.so",
        "libnd.so",
        "int nd_fn(void) { return 0; }\n",
        &["-Wl,-z,nodefaultlib", "-Wl,--no-as-needed", &zlib],
    );
    let exe = program(
        &t.join("bin/nodeflib"),
        "int nd_fn(void); int main(void) { return nd_fn(); }\n",
        &[
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}/nd", p(t)),
            &format!("{}/nd/libnd.so", p(t)),
        ],
    );
    let (v, trace) = assert_agrees(&exe, None, &[]);
    assert!(!trace.success);
    assert!(
        trace
            .stderr
            .contains("libz.so.1: cannot open shared object file"),
        "{}",
        trace.stderr
    );
    let l = loaded(&v, "libz.so.1");
    assert_eq!(l["result"], "not_found");
    assert!(l["notes"][0].as_str().unwrap().contains("DF_1_NODEFLIB"));
    assert!(l["passed_over"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["reason"].as_str().unwrap().contains("DF_1_NODEFLIB")));
}

fn build_cuda_app(t: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let stubs = cuda_stub(t);
    // A driver that works, elsewhere.
    let driver = t.join("run/opengl-driver/lib");
    shared(
        &driver,
        "libcuda.so.1",
        "libcuda.so.1",
        "int cuInit(unsigned f) { (void)f; return 0; }\n",
        &[],
    );
    let runtime = t.join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-lib/lib"));
    shared(
        &runtime,
        "libcudart.so.12",
        "libcudart.so.12",
        "int cuInit(unsigned); int cudaInit(void) { return cuInit(0); }\n",
        &[
            "-Wl,--no-as-needed",
            &format!("{}/libcuda.so", stubs.display()),
        ],
    );
    // Linked like autoPatchelfHook leaves it: the runtime, then the stubs; no driver link.
    let exe = program(
        &t.join("app/bin/app"),
        "#include <stdio.h>\nint cudaInit(void);\nint main(void) { printf(\"cuInit=%d\\n\", cudaInit()); return 0; }\n",
        &[
            "-Wl,--no-as-needed",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}:{}", runtime.display(), stubs.display()),
            &format!("{}/libcudart.so.12", runtime.display()),
            &format!("{}/libcuda.so", stubs.display()),
        ],
    );
    (exe, stubs, driver)
}

#[test]
fn explain_marks_the_stub_and_agrees_with_ld_so_before_and_after_fix() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    let (exe, stubs, driver) = build_cuda_app(t);

    let (v, trace) = assert_agrees(&exe, None, &[]);
    assert_eq!(trace.stdout.trim(), "cuInit=34", "the stub answers");
    let l = loaded(&v, "libcuda.so.1");
    assert_eq!(
        l["path"].as_str().unwrap(),
        format!("{}/libcuda.so.1", stubs.display())
    );
    assert_eq!(l["stub"]["driver_library"], true, "{l:#}");
    assert_eq!(
        l["stub"]["directory"].as_str().unwrap(),
        stubs.to_str().unwrap()
    );
    assert_eq!(v["summary"]["stubs"], 1);
    let (_, code) = explain(&exe, None, &[]);
    assert_eq!(code, 1, "a stub makes explain fail");
    // The answer comes first: the second line, after the file's.
    let text = explain_text(&exe, &[]);
    let want = format!(
        "libcuda.so.1 for app => {}/libcuda.so.1: found in its RUNPATH; STUB: CUDA calls fail with \
         CUDA_ERROR_STUB_LIBRARY (34)",
        stubs.display()
    );
    assert_eq!(text.lines().nth(1), Some(want.as_str()), "{text}");
    assert!(!text.contains("!!! STUB !!!"), "{text}");
    // The tree comes with -v, after the answer.
    let text = explain_text(&exe, &["-v"]);
    assert_eq!(text.lines().nth(1), Some(want.as_str()), "{text}");
    assert!(text.contains("!!! STUB !!!"), "{text}");

    // Only libcuda, also as if the program dlopen()ed it (libcudart does, in real life).
    let (only, _) = explain(&exe, None, &["libcuda.so.1"]);
    let names: Vec<(&str, &str)> = lookups(&only)
        .iter()
        .map(|l| (l["name"].as_str().unwrap(), l["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("libcuda.so.1", "loaded"),
            ("libcuda.so.1", "already_loaded"),
            ("libcuda.so.1", "already_loaded")
        ]
    );

    run_ok(
        stubstrip()
            .args(["fix", "--driver-link"])
            .arg(&driver)
            .arg(&exe)
            .arg(t.join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-lib"))),
    );
    let (v, trace) = assert_agrees(&exe, None, &[]);
    assert_eq!(trace.stdout.trim(), "cuInit=0", "the driver answers");
    let l = loaded(&v, "libcuda.so.1");
    assert_eq!(
        l["path"].as_str().unwrap(),
        format!("{}/libcuda.so.1", driver.display())
    );
    assert!(l["stub"].is_null());
    assert_eq!(v["summary"]["stubs"], 0);
    let (_, code) = explain(&exe, None, &[]);
    assert_eq!(code, 0);
    let text = explain_text(&exe, &[]);
    let want = format!(
        "libcuda.so.1 for app => {}/libcuda.so.1: found in its RUNPATH",
        driver.display()
    );
    assert_eq!(text.lines().nth(1), Some(want.as_str()), "{text}");
}

/// `stubstrip explain` as people run it (the text), with `LD_LIBRARY_PATH` unset.
fn explain_text(exe: &Path, extra: &[&str]) -> String {
    explain_status(exe, extra).0
}

/// `--root` on an aarch64 sysroot, checked against the aarch64 loader under qemu when there is
/// one. qemu's `-L` looks in the prefix first and then on the host, so the loader reports paths
/// of the program's own directory with the root in front.
#[test]
fn explain_with_root_resolves_a_foreign_architecture() {
    let sysroot = Path::new("/usr/aarch64-linux-gnu/lib");
    let cc = "aarch64-linux-gnu-gcc";
    if !sysroot.join("libc.so.6").exists()
        || Command::new(cc)
            .arg("--version")
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
    {
        skip(&format!("needs {cc} and an aarch64 sysroot"));
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    fs::create_dir_all(root.join("lib")).unwrap();
    for f in ["libc.so.6", "ld-linux-aarch64.so.1"] {
        fs::copy(sysroot.join(f), root.join("lib").join(f)).unwrap();
    }
    let libdir = root.join("opt/app/lib");
    fs::create_dir_all(&libdir).unwrap();
    let c = source(&libdir, "h.c", "int h_fn(void) { return 0; }\n");
    run_ok(
        Command::new(cc)
            .args(["-shared", "-fPIC", "-Wl,-soname,libh.so.1", "-o"])
            .arg(libdir.join("libh.so.1"))
            .arg(&c),
    );
    let exe = root.join("opt/app/bin/app");
    fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let c = source(
        t.path(),
        "app.c",
        "int h_fn(void); int main(void) { return h_fn(); }\n",
    );
    run_ok(
        Command::new(cc)
            .arg("-o")
            .arg(&exe)
            .arg(&c)
            .args(["-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib"])
            .arg(libdir.join("libh.so.1")),
    );
    let out = stubstrip()
        .args(["explain", "--json", "--root"])
        .arg(&root)
        .arg(&exe)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["architecture"], "aarch64");
    assert_eq!(v["file"], "/opt/app/bin/app");
    assert_eq!(
        loaded(&v, "libh.so.1")["path"],
        "/opt/app/bin/../lib/libh.so.1"
    );
    assert_eq!(loaded(&v, "libc.so.6")["path"], "/lib/libc.so.6");
    assert_eq!(loaded(&v, "libc.so.6")["found_via"], "default directories");
    assert_eq!(
        v["settings"]["default_dirs"],
        serde_json::json!([
            "/lib/aarch64-linux-gnu/",
            "/usr/lib/aarch64-linux-gnu/",
            "/lib/",
            "/usr/lib/"
        ])
    );
    assert_eq!(out.status.code(), Some(0));

    // -E: the guest's environment only (qemu itself is a dynamically linked host program).
    let Ok(q) = Command::new("qemu-aarch64")
        .args(["-E", "LD_DEBUG=libs", "-L"])
        .arg(&root)
        .arg(&exe)
        .env_remove("LD_DEBUG")
        .output()
    else {
        eprintln!("no qemu-aarch64: checked against expectations only");
        return;
    };
    let trace = String::from_utf8_lossy(&q.stderr);
    for (name, ours) in [
        ("libh.so.1", "/opt/app/bin/../lib/libh.so.1"),
        ("libc.so.6", "/lib/libc.so.6"),
    ] {
        let block = trace
            .split(&format!("find library={name} [0]; searching"))
            .nth(1)
            .unwrap();
        let opened = block
            .lines()
            .take_while(|l| !l.trim_end().ends_with(':'))
            .filter_map(|l| l.split_once("trying file=").map(|(_, p)| p.to_string()))
            .last()
            .unwrap();
        let rooted = format!("{}{ours}", root.display());
        assert!(
            opened == ours || opened == rooted,
            "{name}: qemu's loader opened {opened}, explain says {ours}"
        );
    }
}

/// A 32-bit program on this 64-bit machine: its own interpreter, default directories and the
/// cache entries for i386 (flags `libc6`) among the x86-64 and x32 ones.
#[test]
fn explain_agrees_with_ld_so_for_32_bit_programs() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    if !m32_works() {
        skip("no 32-bit gcc");
        return;
    }
    let lib = shared(
        &t.path().join("lib32"),
        "libs32.so.1",
        "libs32.so.1",
        LIB,
        &["-m32"],
    );
    let exe = program(
        &t.path().join("bin/app32"),
        "#include <math.h>\nint lib_fn(void);\nint main(int c, char **v) { return (int)sqrt(c) - lib_fn(); }\n",
        &["-m32", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib32", lib.to_str().unwrap(), "-lm"],
    );
    if !Command::new(&exe)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
    {
        skip("32-bit programs do not run here");
        return;
    }
    let (v, trace) = assert_agrees(&exe, None, &[]);
    assert!(trace.success);
    assert_eq!(v["architecture"], "i386");
    assert_eq!(loaded(&v, "libm.so.6")["found_via"], "ld.so.cache");
    assert_eq!(loaded(&v, "libs32.so.1")["found_via"], "RUNPATH");
}

/// `explain`'s text and exit status, with `LD_LIBRARY_PATH` unset; `extra` after FILE (options
/// or LIBNAMEs).
fn explain_status(exe: &Path, extra: &[&str]) -> (String, i32) {
    let out = stubstrip()
        .args(["explain", "--ld-library-path", ""])
        .arg(exe)
        .args(extra)
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        out.status.code().unwrap(),
    )
}

/// The two questions `explain` answers: "will it load here?" (the default) fails for
/// a correctly fixed program on a machine without the driver link; "will it load where the
/// driver is provided?" (`--assume-driver`, a GPU-less builder's gate) passes it, and still fails
/// a program whose search path has no driver link. A dlopen() asked for on the command line that
/// finds nothing fails, and is not called one the program copes with.
#[test]
fn explain_answers_here_by_default_and_where_the_driver_is_with_assume_driver() {
    if !can_build() {
        return;
    }
    let link = "/run/opengl-driver/lib";
    if Path::new(link).join("libcuda.so.1").exists() {
        skip(&format!(
            "{link}/libcuda.so.1 exists here: the driver is found"
        ));
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    let (exe, stubs, _) = build_cuda_app(t);
    run_ok(
        stubstrip()
            .arg("fix")
            .arg(&exe)
            .arg(t.join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-lib"))),
    );

    let (text, code) = explain_status(&exe, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("libcuda.so.1 for app and libcudart.so.12 => NOT FOUND"),
        "{text}"
    );

    let (text, code) = explain_status(&exe, &["--assume-driver"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        text.lines().nth(1),
        Some(
            "libcuda.so.1 for app and libcudart.so.12 => /run/opengl-driver/lib/libcuda.so.1: not \
             on this machine; counted as found in the driver link /run/opengl-driver/lib, which \
             provides it where the driver is installed (--assume-driver)"
        ),
        "{text}"
    );
    let (v, code) = explain(&exe, Some(""), &["--assume-driver"]);
    assert_eq!(code, 0);
    assert_eq!(v["summary"]["not_found"], 0, "{v:#}");
    assert_eq!(v["summary"]["assumed_from_driver"], 2, "{v:#}");

    // No driver link on its search path: no machine's driver would be found by it.
    let elsewhere = program(
        &t.join("other/bin/other"),
        "int cuInit(unsigned); int main(void) { return cuInit(0); }\n",
        &[
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,/opt/nowhere",
            &format!("{}/libcuda.so", stubs.display()),
        ],
    );
    let (text, code) = explain_status(&elsewhere, &["--assume-driver"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("libcuda.so.1 for other => NOT FOUND"),
        "{text}"
    );

    let (text, code) = explain_status(&exe, &["libnothere.so.1"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("libnothere.so.1 for app (dlopen, as asked) => NOT FOUND"),
        "{text}"
    );
    assert!(!text.contains("copes"), "{text}");
}
