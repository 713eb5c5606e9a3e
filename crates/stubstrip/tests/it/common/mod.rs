//! Helpers for tests that build real programs with gcc and compare with the real loader.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The binary under test.
pub fn stubstrip() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stubstrip"));
    c.env_remove("LD_LIBRARY_PATH").env_remove("LD_PRELOAD");
    c
}

/// A Nix store hash (valid base-32 characters).
pub const HASH: &str = "0123456789abcdfghijklmnpqrsvwxyz";

/// The host's loader.
pub const LDSO: &str = "/lib64/ld-linux-x86-64.so.2";

#[allow(unused_imports)] // each test binary uses its own subset
pub use testkit::{have, m32_works, run_ok, skip};

/// Whether the tests that need gcc and an x86-64 glibc host can run here.
pub fn can_build() -> bool {
    let ok = cfg!(target_arch = "x86_64") && Path::new(LDSO).exists() && have("gcc");
    if !ok {
        skip(&format!("needs gcc and {LDSO}"));
    }
    ok
}

/// Writes `src` to a C file in `dir` and returns its path.
pub fn source(dir: &Path, name: &str, src: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, src).unwrap();
    p
}

/// Builds a shared library `dir/file` with this SONAME from C source, plus extra gcc arguments.
pub fn shared(dir: &Path, file: &str, soname: &str, src: &str, extra: &[&str]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let c = source(dir, &format!("{file}.c"), src);
    let out = dir.join(file);
    let mut cmd = Command::new("gcc");
    cmd.args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&c)
        .arg(format!("-Wl,-soname,{soname}"))
        .args(extra);
    run_ok(&mut cmd);
    fs::remove_file(c).unwrap();
    out
}

/// Builds an executable from C source with extra gcc arguments.
pub fn program(path: &Path, src: &str, extra: &[&str]) -> PathBuf {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = path.with_extension("c");
    fs::write(&c, src).unwrap();
    let mut cmd = Command::new("gcc");
    cmd.arg("-o").arg(path).arg(&c).args(extra);
    run_ok(&mut cmd);
    fs::remove_file(c).unwrap();
    path.to_path_buf()
}

/// What the host loader says about itself (`ld.so --list-diagnostics`).
pub struct Diagnostics {
    /// `dl_platform`.
    pub platform: String,
    /// `dl_dst_lib`.
    pub lib: String,
    /// `path.system_dirs[...]`.
    pub system_dirs: Vec<String>,
}

/// The host loader's diagnostics (glibc 2.33 and later).
pub fn diagnostics() -> Option<Diagnostics> {
    let out = Command::new(LDSO).arg("--list-diagnostics").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(|v| v.trim_matches('"').to_string())
    };
    Some(Diagnostics {
        platform: value("dl_platform")?,
        lib: value("dl_dst_lib")?,
        system_dirs: text
            .lines()
            .filter(|l| l.starts_with("path.system_dirs["))
            .filter_map(|l| {
                l.split_once('=')
                    .map(|(_, v)| v.trim_matches('"').to_string())
            })
            .collect(),
    })
}

/// What the real loader did, from `LD_DEBUG=libs`.
#[derive(Debug, Default)]
pub struct LoaderTrace {
    /// For each searched name, the file it opened (the last `trying file=` of its search), or
    /// `None` when the search found nothing.
    pub opened: HashMap<String, Option<String>>,
    /// Search order: names in the order the loader searched them.
    pub order: Vec<String>,
    /// `calling init:` paths.
    pub inits: Vec<String>,
    /// The program's exit status and stdout.
    pub success: bool,
    /// The program's standard output.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
}

/// Runs `exe` under `LD_DEBUG=libs` with `LD_LIBRARY_PATH` set to `llp` (unset when `None`).
pub fn trace(exe: &Path, llp: Option<&str>) -> LoaderTrace {
    let mut cmd = Command::new(exe);
    cmd.env("LD_DEBUG", "libs").env_remove("LD_PRELOAD");
    match llp {
        Some(p) => cmd.env("LD_LIBRARY_PATH", p),
        None => cmd.env_remove("LD_LIBRARY_PATH"),
    };
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut t = LoaderTrace {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        ..LoaderTrace::default()
    };
    let mut current: Option<(String, Option<String>)> = None;
    for line in stderr.lines() {
        // "     1234:\tfind library=libc.so.6 [0]; searching"
        let Some((_, msg)) = line.split_once(":\t") else {
            continue;
        };
        let msg = msg.trim_start();
        if let Some(rest) = msg.strip_prefix("find library=") {
            let name = rest.split(" [").next().unwrap().to_string();
            t.order.push(name.clone());
            current = Some((name, None));
        } else if let Some(p) = msg.strip_prefix("trying file=") {
            if let Some((_, last)) = current.as_mut() {
                *last = Some(p.to_string());
            }
        } else if msg.is_empty() {
            if let Some((name, last)) = current.take() {
                t.opened.insert(name, last);
            }
        } else if let Some(p) = msg.strip_prefix("calling init: ") {
            t.inits.push(p.to_string());
        }
    }
    if let Some((name, _)) = current.take() {
        // The search that failed: the loader stopped before finishing the block.
        t.opened.insert(name, None);
    }
    t.stderr = stderr;
    t
}

/// `stubstrip explain --json` with `--ld-library-path` set like [`trace`] sets the variable.
pub fn explain(exe: &Path, llp: Option<&str>, extra: &[&str]) -> (Value, i32) {
    let mut c = stubstrip();
    c.arg("explain")
        .arg("--json")
        .arg(exe)
        .arg("--ld-library-path")
        .arg(llp.unwrap_or(""))
        .args(extra);
    let out = c.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "explain output is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

/// The explain lookups as a list of JSON objects.
pub fn lookups(v: &Value) -> Vec<&Value> {
    v["lookups"].as_array().unwrap().iter().collect()
}

/// The lookup that loaded (or first found) `name`.
pub fn loaded<'a>(v: &'a Value, name: &str) -> &'a Value {
    lookups(v)
        .into_iter()
        .find(|l| {
            (l["name"] == name || l["expanded"] == name)
                && (l["result"] == "loaded" || l["result"] == "not_found" || l["result"] == "error")
        })
        .unwrap_or_else(|| panic!("no lookup for {name} in {v:#}"))
}

/// Asserts that `explain` resolved every name the loader searched to the file the loader
/// opened, and that every library the loader initialised is one `explain` loaded.
pub fn assert_agrees(exe: &Path, llp: Option<&str>, extra: &[&str]) -> (Value, LoaderTrace) {
    let t = trace(exe, llp);
    let (v, _) = explain(exe, llp, extra);
    assert!(!t.opened.is_empty(), "no LD_DEBUG output: {}", t.stderr);
    // When the program did not start, the last search is the one that failed.
    let failed = (!t.success).then(|| t.order.last().cloned()).flatten();
    for (name, opened) in &t.opened {
        let l = loaded(&v, name);
        match opened {
            Some(p) if failed.as_ref() != Some(name) => assert_eq!(
                l["path"].as_str(),
                Some(p.as_str()),
                "{name}: ld.so opened {p}, explain says {l:#}"
            ),
            _ => assert_eq!(l["result"], "not_found", "{name}: {l:#}"),
        }
    }
    let explained: Vec<&str> = lookups(&v)
        .into_iter()
        .filter(|l| l["result"] == "loaded")
        .filter_map(|l| l["path"].as_str())
        .collect();
    for init in &t.inits {
        assert!(
            explained.contains(&init.as_str()) || v["interpreter"] == init.as_str(),
            "ld.so initialised {init}; explain: {v:#}"
        );
    }
    // The loader searched the same names, in the same (breadth-first) order.
    let searched: Vec<String> = lookups(&v)
        .into_iter()
        .filter(|l| l["result"] != "already_loaded" || l["reused_by"] == "same file")
        .filter(|l| l["found_via"] != "direct" && !l["dlopen"].as_bool().unwrap())
        .map(|l| {
            l["expanded"]
                .as_str()
                .or(l["name"].as_str())
                .unwrap()
                .to_string()
        })
        .collect();
    if t.success {
        assert_eq!(searched, t.order, "searched names or their order differ");
    } else {
        // The loader stops at the first failure; explain goes on.
        assert_eq!(
            searched[..t.order.len()],
            t.order[..],
            "searched names or their order differ"
        );
    }
    (v, t)
}

/// `Library runpath` and `Library rpath` of `file`, as `readelf -d` prints them.
pub fn readelf_paths(file: &Path) -> (Option<String>, Option<String>) {
    let out = run_ok(Command::new("readelf").arg("-d").arg(file));
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let rest = l.split_once(&format!("Library {key}: ["))?.1;
            Some(rest.strip_suffix(']')?.to_string())
        })
    };
    (value("runpath"), value("rpath"))
}

/// A CUDA stub directory as nixpkgs lays it out, under `root`: an existing directory inside a
/// store output whose name ends in `-stubs`.
pub fn stub_dir(root: &Path) -> PathBuf {
    let d = root.join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib"));
    fs::create_dir_all(&d).unwrap();
    d
}

/// The toolkit's stub of the driver, kept the nixpkgs way under `root`: `libcuda.so` (SONAME
/// `libcuda.so.1`, its `cuInit` returning 34, as the stub's does), with a `libcuda.so.1` symlink
/// to it, in the store output `…-cuda_cudart-12.8.90-stubs/lib`; returns that directory.
pub fn cuda_stub(root: &Path) -> PathBuf {
    let stubs = root.join(format!("nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib"));
    shared(
        &stubs,
        "libcuda.so",
        "libcuda.so.1",
        "int cuInit(unsigned f) { (void)f; return 34; }\n",
        &[],
    );
    std::os::unix::fs::symlink("libcuda.so", stubs.join("libcuda.so.1")).unwrap();
    stubs
}

/// A shared library whose `DT_RUNPATH` (or, with `rpath`, `DT_RPATH`) is `path`.
pub fn lib_with_path(file: &Path, path: &str, rpath: bool) -> PathBuf {
    let name = file.file_name().unwrap().to_str().unwrap();
    let dtags = if rpath {
        "-Wl,--disable-new-dtags"
    } else {
        "-Wl,--enable-new-dtags"
    };
    shared(
        file.parent().unwrap(),
        name,
        name,
        "int lib_fn(void) { return 1; }\n",
        &[dtags, &format!("-Wl,-rpath,{path}")],
    )
}

/// The metadata that shows whether a file was written: inode, mtime and ctime (a write or a
/// rename changes ctime even when it restores the mtime).
pub fn write_stamp(file: &Path) -> (u64, i64, i64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(file).unwrap();
    (
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
}

/// What one run of the binary gave.
pub struct Run {
    /// The exit status (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `cmd` (stdin from /dev/null; stdout piped unless already set) and fails the test if it
/// takes more than 60 s: a FIFO opened for reading, say, would block it for ever.
pub fn run_limited(cmd: &mut Command, piped_stdout: bool) -> Run {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    if piped_stdout {
        cmd.stdout(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut r) = r {
                r.read_to_end(&mut s).unwrap();
            }
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{cmd:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// `stubstrip ARGS... PATHS...`, as [`run_limited`] runs it.
pub fn stubstrip_run(args: &[&str], paths: &[&Path]) -> Run {
    run_limited(stubstrip().args(args).args(paths), true)
}

/// The run's stdout as JSON.
pub fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr))
}

/// The keys of a JSON object, sorted.
pub fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

/// Runs `c` and parses its stdout as JSON; also the exit status.
pub fn json_output(c: &mut Command) -> (Value, i32) {
    let out = c.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

/// The codes of an `audit --json` report's findings, in order.
pub fn finding_codes(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}
