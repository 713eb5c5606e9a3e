//! `stubstrip fixup`: everything the setup hook does after the other fixup hooks, in one process.
//! The hook passes the derivation's settings and applies what this prints; the policy is here.
//!
//! In order: fix the files (as `fix`), read them again from disk and fail if a stub entry is
//! left or a file could not be read (as `check`; a file that cannot be parsed as ELF and holds no
//! string that could be a stub entry is left as it is, with a warning), audit them if asked (as
//! `audit`), and decide
//! the check-time fallback: the removed stub directories go on `LD_LIBRARY_PATH` for the checks
//! after fixup (installCheck, pythonImportsCheck), so that a library needing `libcuda.so.1` still
//! loads in a sandbox without a driver — unless it is turned off, or the driver link (or the
//! compat directory) provides `libcuda.so.1` here, where the stub would shadow the driver.
//!
//! Then, for the packages that depend on this one ([`check_libs`]), it leaves in each output
//! holding a fixed file the stub libraries those files need, with the check hook that will put
//! them on their checks' `LD_LIBRARY_PATH`.
//!
//! Human lines go to stderr. On success stdout carries instructions for the hook, one per line
//! ([`policy::HookInstruction::render`]); on failure it is empty and the notes go to stderr
//! instead.
//!
//! [`policy`] and [`check_libs`]'s plan decide (pure, over [`facts::FileFacts`]); [`run`] runs
//! the fix, the check and the audit, writes the check libraries and prints the reply.

pub mod check_libs;
pub mod facts;
pub mod policy;
pub mod run;

use std::path::PathBuf;

use crate::audit::Severity;
use crate::rule::StubRule;
use crate::walk::Exclude;

/// What `fixup` does, decided from the arguments.
#[derive(Clone, Debug)]
pub struct FixupConfig {
    /// The derivation's outputs (files or directories).
    pub paths: Vec<PathBuf>,
    /// What to leave out.
    pub exclude: Exclude,
    /// Stub matcher, driver link and compat directory.
    pub rule: StubRule,
    /// One line per changed run path on stderr.
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
