//! `stubstrip audit`: run path and dependency problems of every ELF file under the given paths,
//! each with a stable code, a severity and a one-line fix.
//!
//! [`rules`] decides, from one file's dynamic information and a view of the filesystem (with
//! [`model_rules`] for the resolution-cache note and `dlopen`s), and
//! [`report`] words the findings (both pure); [`run`] finds and reads the files, reads each
//! architecture's loader settings once, and prints.

pub mod damage;
pub mod model_rules;
pub mod report;
pub mod rules;
pub mod run;

use std::path::PathBuf;

use ldso_model::settings::SettingsOverrides;
use thiserror::Error;

pub use rules::Severity;

use crate::elf_input::InputError;
use crate::rule::StubMatcher;
use crate::walk::Exclude;

/// What to audit, and how.
#[derive(Clone, Debug)]
pub struct AuditConfig {
    /// Files or directories.
    pub paths: Vec<PathBuf>,
    /// What to leave out.
    pub exclude: Exclude,
    /// Fail on findings at or above this severity (`None`: never).
    pub deny: Option<Severity>,
    /// The option that set [`Self::deny`], as the report names it: `--deny` for `audit`,
    /// `--audit` for `fixup`.
    pub deny_option: &'static str,
    /// JSON on stdout.
    pub json: bool,
    /// Build or temporary directories, besides `/build`, `$NIX_BUILD_TOP` and `$TMPDIR`.
    pub build_dirs: Vec<PathBuf>,
    /// Which directories hold stubs.
    pub stubs: StubMatcher,
    /// Check run paths as if this directory were `/` (the files must lie inside it).
    pub root: Option<PathBuf>,
    /// How to model the loader (which glibc, whether to follow `dlopen`s); only those two
    /// fields are used.
    pub model: SettingsOverrides,
}

/// Why one file could not be audited (the report names the file).
#[derive(Debug, Error)]
pub enum AuditFileError {
    /// It could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// It lies outside `--root`.
    #[error("outside --root")]
    OutsideRoot,
}

/// Every finding for one file: [`rules::audit`]'s (its run path and libraries), then
/// [`model_rules`]' (its resolution-cache note and what it `dlopen`s).
pub fn audit(
    f: &rules::AuditSubject,
    cx: &rules::AuditContext,
    fs: &dyn ldso_model::fsview::FsView,
) -> Vec<rules::AuditFinding> {
    let mut out = rules::audit(f, cx, fs);
    out.extend(model_rules::note_findings(f, cx));
    out.extend(model_rules::dlopen_findings(f, cx, fs));
    out
}

/// What happened to one file.
#[derive(Debug)]
pub enum AuditOutcome {
    /// Not a dynamically linked program or library (static, or not ELF after all): nothing to
    /// audit.
    NotAudited,
    /// Its findings (none: clean).
    Audited(Vec<rules::AuditFinding>),
    /// It could not be read.
    Failed(AuditFileError),
}
