//! What every subcommand's report shares: where its text goes, counted nouns, and the JSON
//! shape of a file it could not process.
//!
//! Unix conventions: findings and summaries (the report) go to stdout, so that `stubstrip check
//! out | grep` works; diagnostics (files that could not be read) go to stderr. When stdout
//! carries data instead (`--json`, `--print-removed`, `fixup`'s instructions for the hook), the
//! report goes to stderr with the diagnostics.

use std::io::Write;

use serde::Serialize;

use crate::walk::WalkError;

/// What a report says. Built by the pure report code, written by [`Printout::emit`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Printout {
    /// Diagnostics: always stderr.
    pub diagnostics: String,
    /// The report for people: findings and the summary.
    pub report: String,
    /// Data for programs (JSON, removed directories): when present, stdout is theirs.
    pub data: Option<String>,
}

impl Printout {
    /// Writes the diagnostics on stderr, then the report on stdout, or with data the report on
    /// stderr and the data on stdout. Write errors are ignored: a closed pipe must not turn a
    /// finished run into a failure (the exit status already says how the run went).
    pub fn emit(&self) {
        match &self.data {
            Some(data) => {
                self.to_stderr();
                write_stdout(data);
            }
            None => {
                let _ = std::io::stderr()
                    .lock()
                    .write_all(self.diagnostics.as_bytes());
                write_stdout(&self.report);
            }
        }
    }

    /// Writes the diagnostics and the report on stderr, and no data: for `fixup`, whose stdout
    /// carries the hook's instructions.
    pub fn to_stderr(&self) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(self.diagnostics.as_bytes());
        let _ = err.write_all(self.report.as_bytes());
    }
}

fn write_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// `n` and the noun that goes with it: `1 stub entry`, `2 stub entries`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A file that could not be processed, as the JSON reports list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorEntry {
    /// The path.
    pub path: String,
    /// The one-line message.
    pub error: String,
}

/// The JSON entries of paths that could not be listed or read; `message` gives each one's text.
pub fn walk_error_entries(
    walk: &[WalkError],
    message: impl Fn(&WalkError) -> String,
) -> Vec<ErrorEntry> {
    walk.iter()
        .map(|w| ErrorEntry {
            path: w.path.display().to_string(),
            error: message(w),
        })
        .collect()
}

/// `value` as pretty JSON and a newline, as every `--json` prints it.
pub fn json_text(value: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular() {
        assert_eq!(count(0, "ELF file", "ELF files"), "0 ELF files");
        assert_eq!(count(1, "stub entry", "stub entries"), "1 stub entry");
        assert_eq!(count(2, "stub entry", "stub entries"), "2 stub entries");
    }
}
