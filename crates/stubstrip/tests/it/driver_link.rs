//! `stubstrip driver-link` run as a program against a temporary root (`--root`): the links it
//! makes, a second run that changes nothing, `--remove`, and every refusal leaving the tree
//! exactly as it was. The layouts themselves are unit-tested over model file systems
//! (`src/driver_link`); here the libraries are real ELF files (gcc), two of them.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::*;

/// The host's driver files of one version, as an installer lays them out in `dir` of `root`.
fn install(libs: &Path, root: &Path, dir: &str, version: &str) {
    let d = root.join(dir.trim_start_matches('/'));
    fs::create_dir_all(&d).unwrap();
    for (file, soname) in [
        ("libcuda", "libcuda.so.1"),
        ("libnvidia-ml", "libnvidia-ml.so.1"),
    ] {
        fs::copy(libs.join(soname), d.join(format!("{file}.so.{version}"))).unwrap();
        let _ = symlink(format!("{file}.so.{version}"), d.join(soname));
    }
}

/// The kernel module's version file of `root`.
fn kernel(root: &Path, version: &str) {
    let p = root.join("proc/driver/nvidia");
    fs::create_dir_all(&p).unwrap();
    fs::write(
        p.join("version"),
        format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Thu Feb 22 2024\n"),
    )
    .unwrap();
}

/// Every path under `root` with what it is: a link's target, a file's bytes, or a directory.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if m.file_type().is_symlink() {
                out.insert(rel, format!("-> {}", fs::read_link(&p).unwrap().display()));
            } else if m.is_dir() {
                out.insert(rel, "dir".into());
                walk(root, &p, out);
            } else {
                out.insert(rel, format!("{} bytes", fs::read(&p).unwrap().len()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// `stubstrip driver-link --root ROOT ARGS...`: status, stdout, stderr.
fn driver_link(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = stubstrip()
        .arg("driver-link")
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The two libraries (libcuda.so.1, libnvidia-ml.so.1), built once per run.
fn libs(dir: &Path) -> PathBuf {
    let d = dir.join("built");
    for so in ["libcuda.so.1", "libnvidia-ml.so.1"] {
        shared(
            &d,
            so,
            so,
            "int cuInit(int f) { return f; }\n",
            &["-nostdlib"],
        );
    }
    d
}

#[test]
fn links_the_running_driver_again_and_again_and_removes_only_its_own() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let libs = libs(t.path());
    let root = t.path().join("root");
    install(&libs, &root, "/usr/local/nvidia/lib64", "580.159.04");
    kernel(&root, "580.159.04");
    let before = snapshot(&root);

    let (code, out, err) = driver_link(&root, &["--dry-run"]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(
        out.contains(
            "  would make    libcuda.so -> /usr/local/nvidia/lib64/libcuda.so.580.159.04\n"
        ),
        "{out}"
    );
    assert_eq!(snapshot(&root), before, "--dry-run changes nothing");

    let (code, out, err) = driver_link(&root, &[]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(out.starts_with(
        "driver 580.159.04 (the kernel module's, /proc/driver/nvidia/version) at /usr/local/nvidia/lib64\n\
         /run/opengl-driver/lib: created\n"
    ), "{out}");
    let link = root.join("run/opengl-driver/lib");
    for (name, file) in [
        ("libcuda.so", "libcuda.so.580.159.04"),
        ("libcuda.so.1", "libcuda.so.580.159.04"),
        ("libnvidia-ml.so.1", "libnvidia-ml.so.580.159.04"),
    ] {
        assert_eq!(
            fs::read_link(link.join(name)).unwrap(),
            Path::new("/usr/local/nvidia/lib64").join(file)
        );
    }
    assert_eq!(fs::read_dir(&link).unwrap().count(), 3);
    let made = snapshot(&root);

    let (code, out, _) = driver_link(&root, &[]);
    assert_eq!(code, 0);
    assert!(
        out.ends_with("/run/opengl-driver/lib: up to date: 3 links to driver 580.159.04\n"),
        "{out}"
    );
    assert_eq!(snapshot(&root), made, "a second run changes nothing");

    // A foreign file: refused, nothing changed; --remove leaves it and the directory.
    fs::write(link.join("libcuda.so.1.bak"), b"mine").unwrap();
    let with_foreign = snapshot(&root);
    let (code, out, err) = driver_link(&root, &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        err,
        "stubstrip: driver-link: refused: /run/opengl-driver/lib holds files this command did \
         not make: libcuda.so.1.bak (a file); move them away (or choose another --driver-link), \
         then run this again; nothing was changed\n"
    );
    assert_eq!(snapshot(&root), with_foreign);
    let (code, out, _) = driver_link(&root, &["--remove"]);
    assert_eq!(code, 0);
    assert!(
        out.ends_with("kept, with what this command did not make: libcuda.so.1.bak\n"),
        "{out}"
    );
    fs::remove_file(link.join("libcuda.so.1.bak")).unwrap();
    fs::remove_dir(&link).unwrap();
    fs::remove_dir(link.parent().unwrap()).unwrap();
    fs::remove_dir(root.join("run")).unwrap();
    assert_eq!(snapshot(&root), before, "--remove takes away only its own");
}

#[test]
fn refusals_leave_the_tree_as_it_was() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let libs = libs(t.path());
    let refused = |name: &str, setup: &dyn Fn(&Path), want: &str| {
        let root = t.path().join(name);
        setup(&root);
        let before = snapshot(&root);
        for args in [&[][..], &["--persist"][..]] {
            let (code, out, err) = driver_link(&root, args);
            assert_eq!(code, 1, "{name}: {out}{err}");
            assert!(
                err.contains(want) && err.ends_with("; nothing was changed\n"),
                "{name}: {err}"
            );
            assert_eq!(snapshot(&root), before, "{name}");
        }
    };
    refused(
        "mismatch",
        &|r| {
            install(&libs, r, "/usr/lib/x86_64-linux-gnu", "550.67");
            kernel(r, "550.54.14");
        },
        "driver/library version mismatch: the kernel module is 550.54.14",
    );
    refused(
        "two-versions",
        &|r| {
            install(&libs, r, "/usr/lib/x86_64-linux-gnu", "550.54.14");
            install(&libs, r, "/usr/lib64", "535.183.01");
        },
        "two driver versions are installed (535.183.01 at /usr/lib64/libcuda.so.535.183.01, \
         550.54.14 at /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14)",
    );
    refused(
        "no-driver",
        &|r| fs::create_dir_all(r.join("usr/lib")).unwrap(),
        "no NVIDIA driver found",
    );
    refused(
        "foreign",
        &|r| {
            install(&libs, r, "/usr/lib64", "535.183.01");
            kernel(r, "535.183.01");
            fs::create_dir_all(r.join("run/opengl-driver/lib/vdpau")).unwrap();
        },
        "/run/opengl-driver/lib holds files this command did not make: vdpau (a directory)",
    );
    refused(
        "nixos",
        &|r| {
            install(&libs, r, "/usr/lib64", "535.183.01");
            fs::create_dir_all(r.join("etc")).unwrap();
            fs::write(r.join("etc/NIXOS"), b"").unwrap();
        },
        "this is NixOS",
    );
}

#[test]
fn persist_writes_the_tmpfiles_entry_and_remove_deletes_it() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let libs = libs(t.path());
    let root = t.path().join("root");
    install(&libs, &root, "/usr/lib/x86_64-linux-gnu", "550.54.14");
    kernel(&root, "550.54.14");
    let (code, out, _) = driver_link(&root, &["--persist"]);
    assert_eq!(code, 0);
    assert!(out.contains("systemd does not run this machine"), "{out}");
    assert!(!root.join("etc/tmpfiles.d").exists());
    fs::create_dir_all(root.join("run/systemd/system")).unwrap();
    let (code, out, _) = driver_link(&root, &["--persist"]);
    assert_eq!(code, 0, "{out}");
    let conf = root.join("etc/tmpfiles.d/stubstrip-driver-link.conf");
    let text = fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains("\nL+ /run/opengl-driver/lib/libcuda.so.1 - - - - /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14\n"),
        "{text}"
    );
    let (code, out, _) = driver_link(&root, &["--remove"]);
    assert_eq!(code, 0);
    assert!(
        out.ends_with("/etc/tmpfiles.d/stubstrip-driver-link.conf: removed\n"),
        "{out}"
    );
    assert!(!conf.exists() && !root.join("run/opengl-driver").exists());
}

#[test]
fn a_driver_link_that_is_not_an_absolute_directory_is_a_usage_error() {
    let out = stubstrip()
        .args(["driver-link", "--dry-run", "--driver-link", "run/lib"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "stubstrip: --driver-link run/lib is not absolute (it must start with /) (see stubstrip \
         driver-link --help)\n"
    );
}

#[test]
fn explain_names_the_missing_driver_link_and_the_driver_that_makes_it() {
    if !can_build() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let libs = libs(t.path());
    let root = t.path().join("root");
    install(&libs, &root, "/usr/local/nvidia/lib64", "580.159.04");
    kernel(&root, "580.159.04");
    let app = program(
        &root.join("opt/bin/app"),
        "int cuInit(int); int main(void) { return cuInit(0); }\n",
        &[
            libs.join("libcuda.so.1").to_str().unwrap(),
            "-Wl,--enable-new-dtags,-rpath,/run/opengl-driver/lib",
        ],
    );
    let explain = || {
        let out = stubstrip()
            .arg("explain")
            .arg("--root")
            .arg(&root)
            .arg(&app)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = explain();
    assert!(
        before.contains(
            "libcuda.so.1 for app => NOT FOUND: the driver link is missing on this machine; `stubstrip driver-link` creates it from driver 580.159.04 found at \
             /usr/local/nvidia/lib64\n"
        ),
        "{before}"
    );
    assert_eq!(driver_link(&root, &[]).0, 0);
    let after = explain();
    assert!(
        after.contains(
            "libcuda.so.1 for app => /run/opengl-driver/lib/libcuda.so.1: found in its RUNPATH \
             (the driver link)\n"
        ),
        "{after}"
    );
}
