//! `stubstrip explain`: where each library of a program comes from, as glibc's loader would find
//! it, without running the program; loud about CUDA stubs.
//!
//! The `ldso-model` crate reads the loader's settings and decides; [`report`] words the result
//! and [`lookup`] each lookup in it (both pure); [`run`] reads the program and prints.

pub mod lookup;
pub mod report;
pub mod run;

use std::path::PathBuf;

use ldso_model::fsview::Bytes;
use ldso_model::settings::SettingsOverrides;

use crate::rule::StubMatcher;

/// What to explain, and how.
#[derive(Clone, Debug, Default)]
pub struct ExplainConfig {
    /// The program or library.
    pub file: PathBuf,
    /// Only these library names (each also looked up as if the program `dlopen`ed it).
    pub libnames: Vec<Bytes>,
    /// Also the loader's settings and every lookup (the tree).
    pub verbose: bool,
    /// Also where each `dlopen` is known from.
    pub why: bool,
    /// JSON on stdout instead of the text.
    pub json: bool,
    /// Resolve as if this directory were `/`.
    pub root: Option<PathBuf>,
    /// Loader settings given on the command line.
    pub overrides: SettingsOverrides,
    /// Which directories hold stubs.
    pub stubs: StubMatcher,
    /// Answer "will it load where the driver is provided?" rather than "will it load here?":
    /// a driver library missing here but searched for in the driver link counts as found
    /// ([`report::ExplainReport::assume_driver`]).
    pub assume_driver: bool,
}
