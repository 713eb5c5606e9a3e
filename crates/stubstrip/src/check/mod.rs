//! `stubstrip check`: change nothing; list every stub entry left in the run paths of the ELF
//! files under the given paths, and fail if there is one.
//!
//! [`stub_entries`] and [`report`] decide and word (pure); [`run`] reads the files and prints.

pub mod report;
pub mod run;

use std::path::PathBuf;

use crate::elf_file::{FileError, RunpathTag};
use crate::rule::StubMatcher;

/// Exit status: a stub entry was found.
pub const EXIT_STUBS_FOUND: u8 = 1;
/// Exit status: some file could not be read (named on stderr).
pub const EXIT_FILE_ERRORS: u8 = 3;

/// One file's result: its stub entries (`Ok(None)` for a file that is not ELF).
pub type CheckOutcome = Result<Option<Vec<(RunpathTag, String)>>, FileError>;

/// What `check` does, decided from the arguments.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Files or directories.
    pub paths: Vec<PathBuf>,
    /// Which run path entries are stubs.
    pub stubs: StubMatcher,
    /// One line per clean ELF file on stderr.
    pub verbose: bool,
    /// The JSON report on stdout.
    pub json: bool,
}

/// The stub entries of a file's run paths (`DT_RUNPATH` first), each with its tag.
pub fn stub_entries(
    run_paths: &[(RunpathTag, &[u8])],
    stubs: &StubMatcher,
) -> Vec<(RunpathTag, String)> {
    run_paths
        .iter()
        .flat_map(|&(tag, value)| {
            stubs
                .stub_entries(value)
                .into_iter()
                .map(move |e| (tag, String::from_utf8_lossy(e).into_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stub_entry_of_every_run_path_in_order() {
        let found = stub_entries(
            &[
                (RunpathTag::Runpath, b"/x/stubs:/a:/y/stubs"),
                (RunpathTag::Rpath, b"/z/stubs"),
            ],
            &StubMatcher::default(),
        );
        assert_eq!(
            found,
            vec![
                (RunpathTag::Runpath, "/x/stubs".to_string()),
                (RunpathTag::Runpath, "/y/stubs".to_string()),
                (RunpathTag::Rpath, "/z/stubs".to_string()),
            ]
        );
        assert!(stub_entries(&[(RunpathTag::Runpath, b"/a")], &StubMatcher::default()).is_empty());
    }
}
