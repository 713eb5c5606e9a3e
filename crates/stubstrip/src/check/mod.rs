//! `stubstrip check`: change nothing; list every stub entry left in the run paths of the ELF
//! files under the given paths, and fail if there is one.
//!
//! [`stub_entries`] and [`report`] decide and word (pure); [`run`] reads the files and prints.

pub mod report;
pub mod run;

use std::path::PathBuf;

use crate::elf_file::{FileError, Note, RunpathTag};
use crate::rule::StubMatcher;
use crate::stubs::note_entry_text;
use crate::walk::Exclude;

/// One file's result (`Ok(None)` for a file that is not ELF).
pub type CheckOutcome = Result<Option<Checked>, FileError>;

/// What `check` found in one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Its stub entries, each with its tag.
    pub entries: Vec<(RunpathTag, String)>,
    /// The damage elfpatch found reading it ([`crate::elf_file::damage`]): said, not failed on
    /// (the run paths were read all the same).
    pub damage: Vec<String>,
    /// Its layout problems ([`elfpatch::layout::layout_problems`]): a file the loader refuses,
    /// reported as an error of the file.
    pub layout: Vec<String>,
}

/// What `check` does, decided from the arguments.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Files or directories.
    pub paths: Vec<PathBuf>,
    /// What to leave out.
    pub exclude: Exclude,
    /// Which run path entries are stubs.
    pub stubs: StubMatcher,
    /// One line per clean ELF file.
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

/// The stub hints of a file's resolution-cache note, as findings: each says the entry, the hint
/// and the note's file offset.
pub fn note_stub_entries(note: &Note, stubs: &StubMatcher) -> Vec<(RunpathTag, String)> {
    stubs
        .note_stub_hints(&note.cache)
        .into_iter()
        .map(|(needed, hint)| {
            let text = note_entry_text(needed, std::slice::from_ref(hint));
            let at = format!("{text} (note at offset {:#x})", note.offset);
            (RunpathTag::Note, at)
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
