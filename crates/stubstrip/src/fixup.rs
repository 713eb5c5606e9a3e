//! `stubstrip fixup`: everything the setup hook does after the other fixup hooks, in one process.
//! The hook passes the derivation's settings and applies what this prints; the policy is here.
//!
//! In order: fix the files (as `fix`), read them again from disk and fail if a stub entry is
//! left or a file could not be read (as `check`), audit them if asked (as `audit`), and decide
//! the check-time fallback: the removed stub directories go on `LD_LIBRARY_PATH` for the checks
//! after fixup (installCheck, pythonImportsCheck), so that a library needing `libcuda.so.1` still
//! loads in a sandbox without a driver — unless it is turned off, or the driver link (or the
//! compat directory) provides `libcuda.so.1` here, where the stub would shadow the driver.
//!
//! Then, for the packages that depend on this one ([`crate::checklibs`]), it leaves in each output
//! holding a fixed file the stub libraries those files need, with the check hook that will put
//! them on their checks' `LD_LIBRARY_PATH`.
//!
//! Human lines go to stderr. On success stdout carries instructions for the hook, one per line
//! ([`Instruction::render`]); on failure it is empty and the notes go to stderr instead.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::audit::Severity;
use crate::audit_run;
use crate::checklibs::{self, Fixed};
use crate::classify::Rule;
use crate::fix::Outcome;
use crate::report::{CheckReport, FixReport};
use crate::walk;

/// Exit status: a stub entry is left after the fix.
pub const EXIT_STUBS_LEFT: u8 = 1;
/// Exit status: the check after the fix could not read some file (which may hold a stub entry).
pub const EXIT_UNCHECKED: u8 = 3;
/// Exit status: the audit found problems at or above the requested level.
pub const EXIT_AUDIT_DENIED: u8 = 4;
/// Exit status: the instructions could not be written to stdout.
pub const EXIT_STDOUT: u8 = 5;
/// Exit status: the check libraries for the consumers could not be written.
pub const EXIT_CHECK_LIBS: u8 = 6;

/// The variable the check-time fallback extends.
const FALLBACK_VAR: &str = "LD_LIBRARY_PATH";

/// What `fixup` does, decided from the arguments.
#[derive(Clone, Debug)]
pub struct Config {
    /// The derivation's outputs (files or directories).
    pub paths: Vec<PathBuf>,
    /// Stub matcher, driver link and compat directory.
    pub rule: Rule,
    /// One line per changed file on stderr.
    pub verbose: bool,
    /// Audit after the check, failing at or above this severity.
    pub audit: Option<Severity>,
    /// Whether the check-time fallback may be applied (`dontStubstripCheckFallback` unset).
    pub check_fallback: bool,
    /// The `LD_LIBRARY_PATH` the fallback appends to.
    pub ld_library_path: Vec<u8>,
    /// Check libraries for the consumers: `None` when turned off
    /// (`dontStubstripPropagateCheckFallback`) or when no output was named.
    pub check_libs: Option<CheckLibsConfig>,
}

/// Where and how to leave check libraries for the packages that depend on this one.
#[derive(Clone, Debug)]
pub struct CheckLibsConfig {
    /// The derivation's outputs (`--output`): a fixed file's libraries go to the one it is in.
    pub outputs: Vec<PathBuf>,
    /// The `stubstripCheckHook` store path to add to `propagated-build-inputs`.
    pub check_hook: Option<String>,
    /// The Nix store directory.
    pub store_dir: PathBuf,
}

/// The audit level `stubstripAudit` asks for: `info`, `warning` or `error`; any other non-empty
/// value means `error` (in the stdenv a set variable is on: `1`, `true`); empty means no audit.
pub fn audit_level(value: &str) -> Option<Severity> {
    match value {
        "" => None,
        "info" => Some(Severity::Info),
        "warning" => Some(Severity::Warning),
        _ => Some(Severity::Error),
    }
}

/// What the fallback's decision needs to know about this machine.
pub trait Host {
    /// Whether `path` exists, following symlinks (bash's `-e`).
    fn exists(&self, path: &Path) -> bool;
    /// Whether `path` is a directory, following symlinks (bash's `-d`).
    fn is_dir(&self, path: &Path) -> bool;
}

/// The real filesystem.
pub struct HostFs;

impl Host for HostFs {
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
}

/// The decision about the check-time fallback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Nothing to do and nothing to say: no stub directory was removed, the fallback is turned
    /// off, or every removed directory is already on `LD_LIBRARY_PATH` (or cannot go there).
    None,
    /// This directory provides `libcuda.so.1` here (a GPU-enabled sandbox, a compat package):
    /// the stub would shadow it, so `LD_LIBRARY_PATH` stays as it is.
    DriverPresent(String),
    /// `LD_LIBRARY_PATH` becomes `value`, with `added` appended.
    Append {
        /// The directories appended, in order.
        added: Vec<String>,
        /// The new value.
        value: Vec<u8>,
    },
}

/// Decides the check-time fallback.
///
/// `removed` are the stub directories the fix removed; `driver_dirs` the directories where the
/// driver's `libcuda.so.1` would be found at run time (the compat directory, then the driver
/// link). A removed directory is appended when it is absolute, exists, is not on
/// `ld_library_path` yet, and can be written there (no `:` and no newline in it).
pub fn fallback(
    removed: &[String],
    enabled: bool,
    driver_dirs: &[&[u8]],
    ld_library_path: &[u8],
    host: &dyn Host,
) -> Fallback {
    if !enabled || removed.is_empty() {
        return Fallback::None;
    }
    for dir in driver_dirs {
        let dir = String::from_utf8_lossy(dir);
        if host.exists(&Path::new(dir.as_ref()).join("libcuda.so.1")) {
            return Fallback::DriverPresent(dir.into_owned());
        }
    }
    if ld_library_path.contains(&b'\n') {
        // It could not be handed back on one line; leaving it alone is the honest choice.
        return Fallback::None;
    }
    let mut value = ld_library_path.to_vec();
    let mut added = Vec::new();
    for dir in removed {
        let usable = dir.starts_with('/')
            && !dir.contains([':', '\n'])
            && host.is_dir(Path::new(dir))
            && !value.split(|&c| c == b':').any(|e| e == dir.as_bytes());
        if !usable {
            continue;
        }
        if !value.is_empty() {
            value.push(b':');
        }
        value.extend_from_slice(dir.as_bytes());
        added.push(dir.clone());
    }
    if added.is_empty() {
        Fallback::None
    } else {
        Fallback::Append { added, value }
    }
}

/// One line of `fixup`'s stdout, for the hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// `log MESSAGE`: a line for the build log (the hook logs it with nixLog).
    Log(String),
    /// `export NAME=VALUE`: the hook runs `export -- "NAME=VALUE"` (no eval).
    Export {
        /// A shell variable name.
        name: &'static str,
        /// The value; never holds a newline ([`fallback`] sees to it).
        value: Vec<u8>,
    },
}

impl Instruction {
    /// The instruction as bytes for stdout: one line each (a message with newlines becomes
    /// several `log` lines).
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Instruction::Log(m) => {
                for line in m.lines() {
                    out.extend_from_slice(b"log ");
                    out.extend_from_slice(line.as_bytes());
                    out.push(b'\n');
                }
            }
            Instruction::Export { name, value } => {
                debug_assert!(!value.contains(&b'\n'));
                out.extend_from_slice(b"export ");
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
                out.extend_from_slice(value);
                out.push(b'\n');
            }
        }
        out
    }
}

/// The instructions for a fallback decision.
pub fn fallback_instructions(f: &Fallback) -> Vec<Instruction> {
    match f {
        Fallback::None => Vec::new(),
        Fallback::DriverPresent(dir) => vec![Instruction::Log(format!(
            "{dir} provides libcuda.so.1 here: {FALLBACK_VAR} left as it is"
        ))],
        Fallback::Append { added, value } => vec![
            Instruction::Export {
                name: FALLBACK_VAR,
                value: value.clone(),
            },
            Instruction::Log(format!(
                "appended to {FALLBACK_VAR} for the checks after fixup: {}",
                added.join(" ")
            )),
        ],
    }
}

/// Notes that go to the build log: as `log` instructions on success, on stderr on failure
/// (stdout is then empty: the hook applies nothing from a failed run).
struct Notes(Vec<Instruction>);

impl Notes {
    fn log(&mut self, m: impl Into<String>) {
        self.0.push(Instruction::Log(m.into()));
    }

    /// Prints the notes on stderr, then `message`; returns `code`.
    fn fail(self, code: u8, message: &str) -> u8 {
        let mut err = std::io::stderr().lock();
        for i in &self.0 {
            if let Instruction::Log(m) = i {
                let _ = writeln!(err, "stubstrip: fixup: {m}");
            }
        }
        let _ = writeln!(err, "stubstrip: fixup: {message}");
        code
    }
}

/// Runs `fixup`; returns the exit status.
pub fn run(c: &Config) -> u8 {
    let mut notes = Notes(Vec::new());
    let (files, walk_errors) = walk::regular_files(&c.paths);

    let fixed = crate::fix_files(&c.rule, &files);
    let fix_report = FixReport::new(&c.rule, &fixed, &walk_errors);
    fix_report.print(c.verbose, false, false);
    if fix_report.failed() {
        notes.log(
            "warning: stubstrip could not rewrite some files (named above); checking them for stub entries",
        );
    }

    // The check reads every file again from disk: it proves the result, not the plan.
    let checked = crate::check_files(&c.rule, &files);
    let check = CheckReport::new(&checked, &walk_errors);
    if check.stub_entries() > 0 {
        let msg = "stub paths still present in RUNPATH after the fix:";
        let code = notes.fail(EXIT_STUBS_LEFT, msg);
        check.print(false, false);
        return code;
    }
    if !check.passed() {
        let msg = "the check after the fix could not read every file, so it cannot say that no stub entry is left:";
        let code = notes.fail(EXIT_UNCHECKED, msg);
        check.print(false, false);
        return code;
    }

    if let Some(level) = c.audit {
        let audit = audit_run::Config {
            paths: c.paths.clone(),
            deny: Some(level),
            json: false,
            build_dirs: Vec::new(),
            stubs: c.rule.stubs.clone(),
            root: None,
        };
        let level = level.name();
        match audit_run::run(&audit) {
            0 => notes.log(format!("audit: no finding at or above '{level}'")),
            audit_run::EXIT_DENIED => {
                return notes.fail(
                    EXIT_AUDIT_DENIED,
                    &format!(
                        "stubstrip audit found problems at or above '{level}' (stubstripAudit)"
                    ),
                );
            }
            _ => notes.log("warning: stubstrip audit could not read some files (named above)"),
        }
    }

    let mut driver_dirs: Vec<&[u8]> = Vec::new();
    driver_dirs.extend(c.rule.compat.as_deref());
    driver_dirs.push(&c.rule.driver_link);
    let decision = fallback(
        fix_report.removed_dirs(),
        c.check_fallback,
        &driver_dirs,
        &c.ld_library_path,
        &HostFs,
    );
    notes.0.extend(fallback_instructions(&decision));

    if let Some(cl) = &c.check_libs {
        let driver_dirs: Vec<String> = driver_dirs
            .iter()
            .map(|d| String::from_utf8_lossy(d).into_owned())
            .collect();
        match check_libs(&fixed, cl, &driver_dirs) {
            Ok(lines) => lines.into_iter().for_each(|l| notes.log(l)),
            Err(e) => {
                return notes.fail(
                    EXIT_CHECK_LIBS,
                    &format!("cannot leave the check libraries for the consumers: {e}"),
                );
            }
        }
    }

    let reply: Vec<u8> = notes.0.iter().flat_map(Instruction::render).collect();
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(&reply).and_then(|()| out.flush()) {
        // A partial reply must not look like a complete one.
        return notes.fail(
            EXIT_STDOUT,
            &format!("cannot write the instructions to stdout: {e}"),
        );
    }
    0
}

/// What [`checklibs::plan`] needs of each changed file: its `DT_NEEDED` (read again after the
/// fix), the stub directories removed and the run path entries left.
fn fixed_files(fixed: &[(PathBuf, Outcome)]) -> Vec<Fixed> {
    fixed
        .iter()
        .filter_map(|(path, outcome)| {
            let Outcome::Changed(changes) = outcome else {
                return None;
            };
            // A file the fix rewrote and that cannot be read now has nothing to offer here;
            // the check before this already read it.
            let needed = crate::fix::needed(path).ok().flatten()?;
            Some(Fixed {
                path: path.clone(),
                needed,
                removed: changes.iter().flat_map(|c| c.removed.clone()).collect(),
                entries: changes
                    .iter()
                    .flat_map(|c| c.new.split(':').map(str::to_owned).collect::<Vec<_>>())
                    .filter(|e| !e.is_empty())
                    .collect(),
            })
        })
        .collect()
}

/// Plans and writes the check libraries; the lines for the build log.
fn check_libs(
    fixed: &[(PathBuf, Outcome)],
    cl: &CheckLibsConfig,
    driver_dirs: &[String],
) -> Result<Vec<String>, checklibs::WriteError> {
    if driver_dirs.iter().any(|d| d.contains('\n')) {
        return Ok(vec![
            "consumers' checks: a driver directory holds a newline; no check libraries left".into(),
        ]);
    }
    let settings = checklibs::Settings {
        outputs: &cl.outputs,
        driver_dirs,
        store_dir: &cl.store_dir,
    };
    let plans = checklibs::plan(&fixed_files(fixed), &settings, &checklibs::HostFs);
    checklibs::write(&plans, driver_dirs, cl.check_hook.as_deref(), &cl.store_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A host where exactly these paths exist (directories end in `/`).
    struct Fake(HashSet<&'static str>);

    impl Host for Fake {
        fn exists(&self, p: &Path) -> bool {
            let p = p.to_str().unwrap();
            self.0.contains(p) || self.0.contains(format!("{p}/").as_str())
        }
        fn is_dir(&self, p: &Path) -> bool {
            self.0
                .contains(format!("{}/", p.to_str().unwrap()).as_str())
        }
    }

    const STUBS: &str = "/nix/store/h-cuda/lib/stubs";
    const DRIVER: &[u8] = b"/run/opengl-driver/lib";

    fn removed(dirs: &[&str]) -> Vec<String> {
        dirs.iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn removed_stub_directories_are_appended_once() {
        let host = Fake(["/nix/store/h-cuda/lib/stubs/", "/other/"].into());
        let got = fallback(
            &removed(&[STUBS, "/other"]),
            true,
            &[DRIVER],
            b"/a:/other",
            &host,
        );
        assert_eq!(
            got,
            Fallback::Append {
                added: removed(&[STUBS]),
                value: format!("/a:/other:{STUBS}").into_bytes()
            }
        );
        let empty = fallback(&removed(&[STUBS]), true, &[DRIVER], b"", &host);
        assert_eq!(
            empty,
            Fallback::Append {
                added: removed(&[STUBS]),
                value: STUBS.as_bytes().to_vec()
            }
        );
    }

    #[test]
    fn nothing_is_appended_when_off_or_nothing_was_removed() {
        let host = Fake([STUBS].into());
        assert_eq!(
            fallback(&removed(&[STUBS]), false, &[DRIVER], b"", &host),
            Fallback::None
        );
        assert_eq!(fallback(&[], true, &[DRIVER], b"", &host), Fallback::None);
    }

    #[test]
    fn relative_missing_or_unwritable_directories_are_not_appended() {
        let host = Fake(["stubs/", "/a:b/stubs/", "/x\ny/stubs/"].into());
        let dirs = removed(&["stubs", "/missing/stubs", "/a:b/stubs", "/x\ny/stubs"]);
        assert_eq!(fallback(&dirs, true, &[DRIVER], b"", &host), Fallback::None);
        // An LD_LIBRARY_PATH holding a newline cannot be handed back on one line.
        let host = Fake(["/nix/store/h-cuda/lib/stubs/"].into());
        assert_eq!(
            fallback(&removed(&[STUBS]), true, &[DRIVER], b"/a\n/b", &host),
            Fallback::None
        );
    }

    #[test]
    fn a_driver_or_compat_libcuda_here_keeps_the_stub_off_the_path() {
        let compat: &[u8] = b"/nix/store/c-cuda_compat/compat";
        let host = Fake(
            [
                "/nix/store/h-cuda/lib/stubs/",
                "/nix/store/c-cuda_compat/compat/libcuda.so.1",
                "/run/opengl-driver/lib/libcuda.so.1",
            ]
            .into(),
        );
        assert_eq!(
            fallback(&removed(&[STUBS]), true, &[compat, DRIVER], b"", &host),
            Fallback::DriverPresent("/nix/store/c-cuda_compat/compat".into())
        );
        assert_eq!(
            fallback(&removed(&[STUBS]), true, &[DRIVER], b"", &host),
            Fallback::DriverPresent("/run/opengl-driver/lib".into())
        );
    }

    #[test]
    fn audit_levels_follow_the_stdenv_convention() {
        assert_eq!(audit_level(""), None);
        assert_eq!(audit_level("info"), Some(Severity::Info));
        assert_eq!(audit_level("warning"), Some(Severity::Warning));
        assert_eq!(audit_level("error"), Some(Severity::Error));
        assert_eq!(audit_level("1"), Some(Severity::Error));
        assert_eq!(audit_level("true"), Some(Severity::Error));
    }

    #[test]
    fn instructions_are_one_line_each() {
        assert_eq!(
            Instruction::Log("a\nb".into()).render(),
            b"log a\nlog b\n".to_vec()
        );
        let export = Instruction::Export {
            name: "LD_LIBRARY_PATH",
            value: b"/a b:/c'd".to_vec(),
        };
        assert_eq!(
            export.render(),
            b"export LD_LIBRARY_PATH=/a b:/c'd\n".to_vec()
        );
        let f = Fallback::Append {
            added: removed(&["/x", "/y"]),
            value: b"/x:/y".to_vec(),
        };
        let lines: Vec<u8> = fallback_instructions(&f)
            .iter()
            .flat_map(Instruction::render)
            .collect();
        assert_eq!(
            String::from_utf8(lines).unwrap(),
            "export LD_LIBRARY_PATH=/x:/y\nlog appended to LD_LIBRARY_PATH for the checks after fixup: /x /y\n"
        );
    }
}
