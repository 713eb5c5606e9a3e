//! The contract of `stubstrip fixup`, what the setup hook runs: fix, check from disk, audit,
//! and the check-time fallback, replied on stdout as `log` and `export NAME=VALUE` lines. On ELF
//! files built with gcc, read back with readelf.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// An output with one library whose RUNPATH is `STUB:/opt/keep`, and a driver link directory
/// that exists but holds no driver (a build sandbox).
struct Out {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    out: PathBuf,
    stub: String,
    lib: PathBuf,
    driver: String,
}

fn output() -> Out {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let stub = stub_dir(&root).display().to_string();
    let out = root.join("out");
    let lib = lib_with_path(
        &out.join("lib/libcudafake.so"),
        &format!("{stub}:/opt/keep"),
        false,
    );
    let driver = root.join("run/opengl-driver/lib");
    fs::create_dir_all(&driver).unwrap();
    Out {
        _tmp: tmp,
        root,
        out,
        stub,
        lib,
        driver: driver.display().to_string(),
    }
}

/// `stubstrip fixup --default-driver-link DRIVER --ld-library-path LLP ARGS... -- PATHS...`, as
/// the hook calls it.
fn fixup(o: &Out, llp: &str, args: &[&str], paths: &[&Path]) -> Run {
    run_limited(&mut fixup_cmd(o, llp, args, paths), true)
}

fn fixup_cmd(o: &Out, llp: &str, args: &[&str], paths: &[&Path]) -> Command {
    let mut c = stubstrip();
    c.args([
        "fixup",
        "--default-driver-link",
        &o.driver,
        "--ld-library-path",
        llp,
    ])
    .args(args)
    .arg("--")
    .args(paths);
    c
}

fn runpath(p: &Path) -> String {
    readelf_paths(p).0.unwrap_or_default()
}

/// Puts a (fake) `libcuda.so.1` into `dir`.
fn provide_libcuda(dir: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(Path::new(dir).join("libcuda.so.1"), b"").unwrap();
}

#[test]
fn fixes_checks_and_replies_with_the_fallback() {
    if !can_build() {
        return;
    }
    let o = output();
    let r = fixup(&o, "", &[], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.driver));
    assert_eq!(
        r.stdout,
        format!(
            "export LD_LIBRARY_PATH={s}\nlog appended to LD_LIBRARY_PATH for the checks after fixup: {s}\n",
            s = o.stub
        )
    );
    // stderr: the count and the fix's summary only (the check that passed says nothing).
    assert_eq!(
        r.stderr,
        "stubstrip: 1 of 1 ELF file rewritten, 1 stub entry replaced \
         (1 file, 1 ELF file, 1 loadable object)\n"
    );
    // Again: nothing removed, nothing to reply, nothing written.
    let stamp = write_stamp(&o.lib);
    let r = fixup(&o, &o.stub, &[], &[&o.out]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert_eq!(write_stamp(&o.lib), stamp);
}

#[test]
fn the_fallback_appends_to_the_given_ld_library_path_once() {
    if !can_build() {
        return;
    }
    let o = output();
    let llp = "/opt/a b:/opt/$(x):/opt/*";
    let r = fixup(&o, llp, &[], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .starts_with(&format!("export LD_LIBRARY_PATH={llp}:{}\n", o.stub)),
        "{}",
        r.stdout
    );
    // Already there: no export, no log.
    let o = output();
    let llp = format!("/x:{}", o.stub);
    let r = fixup(&o, &llp, &[], &[&o.out]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.driver));
}

#[test]
fn without_ld_library_path_the_environment_s_is_used() {
    if !can_build() {
        return;
    }
    let o = output();
    let mut c = stubstrip();
    c.args(["fixup", "--default-driver-link", &o.driver, "--"])
        .arg(&o.out)
        .env("LD_LIBRARY_PATH", "/from/env");
    let r = run_limited(&mut c, true);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .starts_with(&format!("export LD_LIBRARY_PATH=/from/env:{}\n", o.stub)),
        "{}",
        r.stdout
    );
}

#[test]
fn no_fallback_when_turned_off_or_a_driver_is_here() {
    if !can_build() {
        return;
    }
    let o = output();
    let r = fixup(&o, "", &["--no-check-fallback"], &[&o.out]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.driver));

    let o = output();
    provide_libcuda(&o.driver);
    let r = fixup(&o, "", &[], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!(
            "log {} provides libcuda.so.1 here: LD_LIBRARY_PATH left as it is\n",
            o.driver
        )
    );

    // A compat directory with libcuda.so.1 (and no driver): it answers, before the driver link.
    let o = output();
    let compat = o.root.join("cuda_compat/compat").display().to_string();
    provide_libcuda(&compat);
    let r = fixup(&o, "", &["--compat", &compat], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!("log {compat} provides libcuda.so.1 here: LD_LIBRARY_PATH left as it is\n")
    );
    assert_eq!(runpath(&o.lib), format!("{compat}:{}:/opt/keep", o.driver));
}

#[test]
fn a_driver_link_flag_replaces_the_default() {
    if !can_build() {
        return;
    }
    let o = output();
    let custom = o.root.join("custom/lib").display().to_string();
    let r = fixup(&o, "", &[&format!("--driver-link={custom}")], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(runpath(&o.lib), format!("{custom}:/opt/keep"));
}

#[test]
fn fix_flags_are_accepted_and_json_is_refused() {
    if !can_build() {
        return;
    }
    let o = output();
    let before = fs::read(&o.lib).unwrap();
    let r = fixup(&o, "", &["--json"], &[&o.out]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--json cannot be used by the hook"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
    assert_eq!(
        fs::read(&o.lib).unwrap(),
        before,
        "written despite the refusal"
    );

    // A stub-shaped driver link: refused before anything is written.
    let r = fixup(&o, "", &["--driver-link", &o.stub], &[&o.out]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "the driver link {} itself matches the stub rule",
            o.stub
        )),
        "{}",
        r.stderr
    );
    assert_eq!(fs::read(&o.lib).unwrap(), before);

    // The flags of `fix` that stubstripFlags may hold: -v shows the change, --print-removed
    // changes nothing (stdout stays the reply), --jobs is taken.
    let r = fixup(&o, "", &["-v", "--print-removed", "--jobs", "1"], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "stubstrip: {}: RUNPATH {}:/opt/keep -> {}:/opt/keep\n",
            o.lib.display(),
            o.stub,
            o.driver
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.starts_with("export LD_LIBRARY_PATH="),
        "{}",
        r.stdout
    );
    assert_eq!(stubstrip_run(&["fixup"], &[]).code, 2, "no PATH");
}

/// Starts `out/bin/daemon`, a running program with RUNPATH `runpath`: it cannot be opened for
/// writing while it runs (ETXTBSY), not even by root.
fn busy_daemon(o: &Out, runpath: &str) -> (PathBuf, std::process::Child) {
    let exe = program(
        &o.out.join("bin/daemon"),
        "#include <unistd.h>\nint main(void) { sleep(60); return 0; }\n",
        &[&format!("-Wl,-rpath,{runpath}"), "-Wl,--enable-new-dtags"],
    );
    let child = Command::new(&exe).stdout(Stdio::null()).spawn().unwrap();
    (exe, child)
}

#[test]
fn a_stub_entry_left_after_the_fix_exits_1_naming_it() {
    if !can_build() {
        return;
    }
    let o = output();
    let (exe, mut daemon) = busy_daemon(&o, &o.stub);
    let r = fixup(&o, "", &[], &[&o.out]);
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "", "a failed run replies nothing");
    let note = r
        .stderr
        .find("stubstrip: warning: the fix could not rewrite some files (each named above)")
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let header = r
        .stderr
        .find("stubstrip: stub paths still present in RUNPATH or the resolution-cache note after the fix:")
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let finding = r
        .stderr
        .find(&format!("{}: RUNPATH entry {}\n", exe.display(), o.stub))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(note < header && header < finding, "{}", r.stderr);
    // The count is said once, by the fix.
    assert_eq!(
        r.stderr.matches("2 loadable objects").count(),
        1,
        "{}",
        r.stderr
    );
    // The other file was fixed all the same.
    assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.driver));
    assert_eq!(runpath(&exe), o.stub);
}

#[test]
fn stub_patterns_reach_the_check() {
    if !can_build() {
        return;
    }
    let o = output();
    let vendor = o.root.join("opt/vendor-cuda/lib");
    fs::create_dir_all(&vendor).unwrap();
    let vendor = vendor.display().to_string();
    let (exe, mut daemon) = busy_daemon(&o, &vendor);
    let without = fixup(&o, "", &[], &[&o.out]);
    let with = fixup(&o, "", &["--stub-pattern", "*/vendor-cuda/lib"], &[&o.out]);
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(
        without.code, 0,
        "not a stub without the pattern: {}",
        without.stderr
    );
    assert_eq!(with.code, 1, "{}", with.stderr);
    assert!(
        with.stderr
            .contains(&format!("{}: RUNPATH entry {vendor}\n", exe.display())),
        "{}",
        with.stderr
    );
}

/// A file with the ELF magic that cannot be parsed, and holds no string a reader could take for
/// a stub entry, is left as it is with a warning, as nixpkgs' own hook skips what patchelf cannot
/// read: the build goes on.
#[test]
fn an_unparsable_file_without_stub_strings_is_left_alone() {
    if !can_build() {
        return;
    }
    let o = output();
    let bytes = fs::read(&o.lib).unwrap();
    let cut = o.out.join("lib/libcut.so");
    fs::write(&cut, &bytes[..200]).unwrap();
    let r = fixup(&o, "", &[], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains(&format!("log warning: {}: truncated", cut.display()))
            && r.stdout.contains(
                "not read as ELF, but no string in it names a stub directory: left as it is\n"
            ),
        "{}",
        r.stdout
    );
    assert_eq!(fs::read(&cut).unwrap(), &bytes[..200]);
    assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.driver));
}

/// One that cannot be parsed but still holds the stub directory fails the check with exit 3:
/// a loader may read what elfpatch cannot, so nobody can say that no stub entry is left.
#[test]
fn an_unparsable_file_holding_a_stub_path_fails_the_check_with_exit_3() {
    if !can_build() {
        return;
    }
    let o = output();
    let mut bytes = fs::read(&o.lib).unwrap();
    // e_phentsize of a 64-bit file, made wrong: elfpatch refuses to read the program headers.
    bytes[54] = 0x30;
    let bad = o.out.join("lib/libbad.so");
    fs::write(&bad, &bytes).unwrap();
    let r = fixup(&o, "", &[], &[&o.out]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert!(!r.stderr.contains("passed"), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "stubstrip: the check after the fix could not read every file, so it cannot say that no stub entry is left:"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("stubstrip: {}: ", bad.display())),
        "{}",
        r.stderr
    );
    assert_eq!(fs::read(&bad).unwrap(), bytes);
    assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.driver));
}

/// A program whose RUNPATH holds two directories that both provide its NEEDED library (an
/// ambiguity, audit's SS002 warning) and a stub directory.
fn ambiguous(o: &Out) -> PathBuf {
    let a = shared(
        &o.out.join("a"),
        "libdup.so.1",
        "libdup.so.1",
        "int lib_fn(void) { return 1; }\n",
        &[],
    );
    shared(
        &o.out.join("b"),
        "libdup.so.1",
        "libdup.so.1",
        "int lib_fn(void) { return 2; }\n",
        &[],
    );
    program(
        &o.out.join("bin/two"),
        "int lib_fn(void);\nint main(void) { return lib_fn() - 1; }\n",
        &[
            "-Wl,--enable-new-dtags",
            // $ORIGIN-relative, so that the only finding is the ambiguity (SS002) even when the
            // fixtures lie inside a build directory, as in a Nix build's checkPhase, where an
            // absolute entry there is an SS003 error.
            &format!("-Wl,-rpath,$ORIGIN/../a:$ORIGIN/../b:{}", o.stub),
            a.to_str().unwrap(),
        ],
    )
}

/// The real driver link for the audit tests: the fixtures' own one lies in the test's temporary
/// directory, which in a Nix build's checkPhase is inside `$NIX_BUILD_TOP` (an SS003 error).
const DRIVER: [&str; 2] = ["--driver-link", "/run/opengl-driver/lib"];

#[test]
fn the_audit_level_decides_what_fails() {
    if !can_build() {
        return;
    }
    let o = output();
    ambiguous(&o);
    // Only the three levels: anything else (the hook maps stubstripAudit's other values to
    // error) is a usage error that lists them, before anything is fixed.
    for level in ["", "1", "warn"] {
        let r = fixup(&o, "", &["--audit", level, DRIVER[0], DRIVER[1]], &[&o.out]);
        assert_eq!(r.code, 2, "{level}: {}", r.stderr);
        assert!(
            r.stderr.contains("possible values: info, warning, error"),
            "{level}: {}",
            r.stderr
        );
        assert_eq!(runpath(&o.lib), format!("{}:/opt/keep", o.stub), "{level}");
    }
    // Off unless asked.
    let r = fixup(&o, "", &DRIVER, &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("SS002") && !r.stdout.contains("audit"));
    // At "error" the warning passes, with a log line.
    let r = fixup(
        &o,
        "",
        &["--audit", "error", DRIVER[0], DRIVER[1]],
        &[&o.out],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("log audit: no finding at or above 'error'\n"),
        "{}",
        r.stdout
    );
    // At "warning" it fails the run, after the fix, and replies nothing.
    let r = fixup(
        &o,
        "",
        &["--audit", "warning", DRIVER[0], DRIVER[1]],
        &[&o.out],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("SS002"), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "stubstrip: the audit found problems at or above 'warning' (--audit, stubstripAudit)"
        ),
        "{}",
        r.stderr
    );
    // The audit's summary names the option that set the level: --audit here, not audit's --deny.
    assert!(
        r.stderr
            .contains("(failing: findings at or above --audit warning)")
            && !r.stderr.contains("--deny"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_reply_that_cannot_be_written_is_a_failure() {
    if !can_build() {
        return;
    }
    if !Path::new("/dev/full").exists() {
        skip("needs /dev/full");
        return;
    }
    let o = output();
    let mut c = fixup_cmd(&o, "", &[], &[&o.out]);
    c.stdout(
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    let r = run_limited(&mut c, false);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot write the instructions to stdout"),
        "{}",
        r.stderr
    );
}

/// A CUDA-like package for the consumer tests: `stubs` holds a stub `libcuda.so` (SONAME
/// `libcuda.so.1`, exporting `cuInit` and `cuDriverGetVersion`, each answering 34) with the
/// `libcuda.so.1` link nixpkgs adds, and `lib` a `libcudart.so.12`; `b` is an output whose
/// library was linked against the stub (and, with `cudart`, against libcudart too) with
/// `-z now`, as nixpkgs' bindnow hardening links, RUNPATH `STUBS[:LIB]:/opt/keep`.
struct Consumed {
    o: Out,
    store: PathBuf,
    stubs: PathBuf,
    libdir: PathBuf,
    b: PathBuf,
    blib: PathBuf,
}

const STUB_SRC: &str =
    "int cuInit(unsigned f) { (void)f; return 34; }\nint cuDriverGetVersion(int *v) { (void)v; return 34; }\n";

fn consumed(cudart: bool, pkg: &str) -> Consumed {
    let o = output();
    let store = o.root.join("nix/store");
    let pkgdir = store.join(format!("{HASH}-{pkg}"));
    let stubs = pkgdir.join("lib/stubs");
    let libdir = pkgdir.join("lib");
    shared(&stubs, "libcuda.so", "libcuda.so.1", STUB_SRC, &[]);
    std::os::unix::fs::symlink("libcuda.so", stubs.join("libcuda.so.1")).unwrap();
    shared(
        &libdir,
        "libcudart.so.12",
        "libcudart.so.12",
        "int cudart_fn(void) { return 0; }\n",
        &[],
    );
    let b = store.join("cccccccccccccccccccccccccccccccc-b");
    let mut runpath = stubs.display().to_string();
    let mut extra = vec![
        format!("-L{}", stubs.display()),
        "-lcuda".to_string(),
        "-Wl,-z,now".to_string(),
        "-Wl,--enable-new-dtags".to_string(),
    ];
    if cudart {
        runpath = format!("{runpath}:{}", libdir.display());
        extra.extend([
            format!("-L{}", libdir.display()),
            "-l:libcudart.so.12".to_string(),
        ]);
    }
    extra.push(format!("-Wl,-rpath,{runpath}:/opt/keep"));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let blib = shared(
        &b.join("lib"),
        "libb.so",
        "libb.so",
        "int cuInit(unsigned);\nint cuDriverGetVersion(int *);\nint b_init(void) { int v; return cuInit(0) + cuDriverGetVersion(&v); }\n",
        &extra,
    );
    Consumed {
        o,
        store,
        stubs,
        libdir,
        b,
        blib,
    }
}

/// `fixup` over B with its output named, the check hook and the store directory given.
fn fixup_b(c: &Consumed, extra: &[&str]) -> Run {
    let store = c.store.display().to_string();
    let b = c.b.display().to_string();
    let mut args = vec![
        "--output",
        &b,
        "--propagate-check-hook",
        "/nix/store/hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh-stubstripCheckHook",
        "--store-dir",
        &store,
    ];
    args.extend_from_slice(extra);
    fixup(&c.o, "", &args, &[&c.b])
}

/// Whether `lib` loads with every symbol bound (RTLD_NOW, LD_BIND_NOW) with `llp` as
/// LD_LIBRARY_PATH, and what `b_init` answers; the loader's error otherwise.
fn load(c: &Consumed, llp: Option<&Path>) -> Result<i32, String> {
    let exe = c.o.root.join("dlopen-b");
    if !exe.exists() {
        program(
            &exe,
            "#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char **v) { (void)c; void *h = dlopen(v[1], RTLD_NOW); if (!h) { puts(dlerror()); return 100; } int (*f)(void) = (int (*)(void))dlsym(h, \"b_init\"); return f(); }\n",
            &["-ldl"],
        );
    }
    let mut cmd = Command::new(&exe);
    cmd.arg(&c.blib).env_clear().env("LD_BIND_NOW", "1");
    if let Some(p) = llp {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    let out = cmd.output().unwrap();
    match out.status.code() {
        Some(100) | None => Err(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(n) => Ok(n),
    }
}

#[test]
fn check_libraries_for_consumers_are_a_copy_when_the_stub_is_not_referenced() {
    if !can_build() {
        return;
    }
    let c = consumed(false, "cuda_cudart-12.9.79");
    // Before: the stub in RUNPATH answers.
    assert_eq!(load(&c, None), Ok(68));
    let r = fixup_b(&c, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let support = c.b.join("nix-support");
    let lib = support.join("stubstrip-check-libs/libcuda.so.1");
    let meta = fs::symlink_metadata(&lib).unwrap();
    assert!(meta.is_file(), "not a copy: {meta:?}");
    assert_eq!(
        fs::read(&lib).unwrap(),
        fs::read(c.stubs.join("libcuda.so")).unwrap()
    );
    assert_eq!(
        fs::read_to_string(support.join("stubstrip-driver-dirs")).unwrap(),
        format!("{}\n", c.o.driver)
    );
    assert_eq!(
        fs::read_to_string(support.join("propagated-build-inputs")).unwrap(),
        "/nix/store/hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh-stubstripCheckHook "
    );
    assert!(
        r.stdout.contains(&format!(
            "log consumers' checks: {}: libcuda.so.1 (a copy of {}), propagating stubstripCheckHook\n",
            support.join("stubstrip-check-libs").display(),
            c.stubs.join("libcuda.so").display()
        )),
        "{}",
        r.stdout
    );
    // After: B's library no longer finds libcuda.so.1 (no driver here)...
    let err = load(&c, None).unwrap_err();
    assert!(
        err.contains("libcuda.so.1: cannot open shared object file"),
        "{err}"
    );
    // ... and does, every symbol bound, with the check libraries on LD_LIBRARY_PATH.
    assert_eq!(
        load(&c, Some(&support.join("stubstrip-check-libs"))),
        Ok(68)
    );
    // Again: nothing written.
    let stamps = [
        write_stamp(&lib),
        write_stamp(&support.join("propagated-build-inputs")),
        write_stamp(&support.join("stubstrip-driver-dirs")),
    ];
    let r = fixup_b(&c, &[]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert_eq!(
        stamps,
        [
            write_stamp(&lib),
            write_stamp(&support.join("propagated-build-inputs")),
            write_stamp(&support.join("stubstrip-driver-dirs")),
        ]
    );
}

#[test]
fn check_libraries_for_consumers_are_a_link_when_the_output_references_the_stub() {
    if !can_build() {
        return;
    }
    let c = consumed(true, "cuda_cudart-12.9.79");
    // A propagated-build-inputs written before (stdenv's, from propagatedBuildInputs) is kept.
    let support = c.b.join("nix-support");
    fs::create_dir_all(&support).unwrap();
    fs::write(support.join("propagated-build-inputs"), "/nix/store/x-dep").unwrap();
    // A driver at the driver link while B builds does not matter: consumers may build elsewhere.
    provide_libcuda(&c.o.driver);
    let r = fixup_b(&c, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        runpath(&c.blib),
        format!("{}:{}:/opt/keep", c.o.driver, c.libdir.display())
    );
    let lib = support.join("stubstrip-check-libs/libcuda.so.1");
    assert_eq!(fs::read_link(&lib).unwrap(), c.stubs.join("libcuda.so"));
    assert_eq!(
        fs::read_to_string(support.join("propagated-build-inputs")).unwrap(),
        "/nix/store/x-dep /nix/store/hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh-stubstripCheckHook "
    );
    assert!(r.stdout.contains(&format!(
        "libcuda.so.1 -> {}",
        c.stubs.join("libcuda.so").display()
    )));
    assert!(r
        .stdout
        .contains("provides libcuda.so.1 here: LD_LIBRARY_PATH left as it is"));
}

#[test]
fn nothing_is_left_for_consumers_when_turned_off_or_no_output_is_named() {
    if !can_build() {
        return;
    }
    let c = consumed(false, "cuda_cudart-12.9.79");
    let r = fixup_b(&c, &["--no-propagate-check-fallback"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!c.b.join("nix-support").exists());
    assert!(!r.stdout.contains("consumers"), "{}", r.stdout);

    let c = consumed(false, "cuda_cudart-12.9.79");
    let r = fixup(&c.o, "", &[], &[&c.b]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!c.b.join("nix-support").exists());

    // A library that needs nothing from the stub directory: nothing either.
    let o = output();
    let r = fixup(&o, "", &["--output", o.out.to_str().unwrap()], &[&o.out]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!o.out.join("nix-support").exists());
}

#[test]
fn check_libraries_that_cannot_be_written_exit_3_and_a_bad_hook_path_exits_2() {
    if !can_build() {
        return;
    }
    let c = consumed(false, "cuda_cudart-12.9.79");
    fs::write(c.b.join("nix-support"), b"a file in the way").unwrap();
    let r = fixup_b(&c, &[]);
    assert_eq!((r.code, r.stdout.as_str()), (3, ""), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "cannot leave the check libraries for the consumers: {}",
            c.b.join("nix-support/stubstrip-check-libs").display()
        )),
        "{}",
        r.stderr
    );
    let r = fixup(&c.o, "", &["--propagate-check-hook", "/a b"], &[&c.b]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--propagate-check-hook must be one path"));
}
