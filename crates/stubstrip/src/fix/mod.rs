//! `stubstrip fix`: replace the stub entries in the run paths of every ELF file under the given
//! paths with the driver link.
//!
//! [`plan`] decides what one file's run paths become and [`report`] words the outcomes (both
//! pure); [`run`] walks the paths, reads and edits the files, and prints.

pub mod plan;
pub mod report;
pub mod run;

use std::path::PathBuf;

use crate::elf_file::FileError;
use crate::rule::StubRule;
use crate::walk::Exclude;
use plan::RunpathChange;

/// What happened to one file.
#[derive(Debug)]
pub enum FixOutcome {
    /// Not an ELF file (or too short to tell).
    NotElf,
    /// An ELF file without a dynamic section, or with a run path that needs nothing; the damage
    /// elfpatch found reading it ([`crate::elf_file::damage`]), said in the report.
    Clean(Vec<String>),
    /// The run paths that changed, and the damage elfpatch found reading the file.
    Changed(Vec<RunpathChange>, Vec<String>),
    /// The file could not be read or edited; it was left as it was.
    Failed(FileError),
}

/// What `fix` does, decided from the arguments.
#[derive(Clone, Debug)]
pub struct FixConfig {
    /// Files or directories.
    pub paths: Vec<PathBuf>,
    /// What to leave out.
    pub exclude: Exclude,
    /// Stub matcher, driver link and compat directory.
    pub rule: StubRule,
    /// One line per changed run path.
    pub verbose: bool,
    /// The JSON report on stdout.
    pub json: bool,
    /// Each removed stub directory on stdout.
    pub print_removed: bool,
}
