//! `stubstrip check`: change nothing; list every stub entry left in the run paths of the ELF
//! files under the given paths, and fail if there is one.
//!
//! [`stub_entries`] and [`report`] decide and word (pure); [`run`] reads the files and prints.

pub mod report;
pub mod run;

use std::path::PathBuf;

use crate::elf_file::{FileError, Note, RunpathTag};
use crate::fix::plan::note_entry_text;
use crate::rule::StubMatcher;
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

/// The first string in `bytes` that could be read as a stub run path entry, if any: what a
/// file that cannot be parsed as ELF must be free of before it may be left as it is.
///
/// A run path entry ends at `:` or NUL, and `DT_RUNPATH` may point into the middle of a string,
/// so every `:`/NUL-delimited part counts, and so do its tails. The built-in rules need the
/// bytes `stubs` in the entry, so a part holding them counts as a stub entry whatever comes
/// before (an over-approximation: a file that merely mentions them is not tolerated); a
/// `--stub-pattern` glob is tried on the part and on each tail that starts at `/` or after a
/// byte that is not printable.
pub fn stub_string(bytes: &[u8], stubs: &StubMatcher) -> Option<String> {
    let named = |part: &[u8]| {
        if part.windows(5).any(|w| w == b"stubs") {
            return true;
        }
        (0..part.len())
            .filter(|&i| i == 0 || part[i] == b'/' || !part[i - 1].is_ascii_graphic())
            .any(|i| stubs.patterns.iter().any(|g| g.matches(&part[i..])))
    };
    bytes
        .split(|&b| b == 0 || b == b':')
        .find(|part| !part.is_empty() && named(part))
        .map(|part| {
            let shown = &part[..part.len().min(200)];
            String::from_utf8_lossy(shown).into_owned()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Glob;

    #[test]
    fn stub_strings_are_found_wherever_a_run_path_could_start() {
        let plain = StubMatcher::default();
        let none = b"\x7fELF\x02\x01/usr/lib:/opt/cuda/lib64\0libm.so.6\0";
        assert_eq!(stub_string(none, &plain), None);
        let runpath = b"junk\x00/a:/nix/store/x/lib/stubs:/b\x00";
        assert_eq!(
            stub_string(runpath, &plain).as_deref(),
            Some("/nix/store/x/lib/stubs")
        );
        // A string whose tail is a relative stub entry, as a shared string tail would be.
        assert_eq!(
            stub_string(b"\x00libstubs\x00", &plain).as_deref(),
            Some("libstubs")
        );
        let vendor = StubMatcher {
            patterns: vec![Glob::new("/opt/vendor-cuda/lib")],
        };
        assert_eq!(stub_string(b"\x00/opt/vendor-cuda/lib\x00", &plain), None);
        assert_eq!(
            stub_string(b"\x00\x03\x01/opt/vendor-cuda/lib:/x\x00", &vendor).as_deref(),
            Some("\u{3}\u{1}/opt/vendor-cuda/lib")
        );
        assert_eq!(
            stub_string(b"\x00prefix/opt/vendor-cuda/lib\x00", &vendor).as_deref(),
            Some("prefix/opt/vendor-cuda/lib")
        );
        assert_eq!(stub_string(b"", &vendor), None);
    }

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
