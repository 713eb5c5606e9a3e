//! What every subcommand's report shares: the text it says, and the JSON shape of a file it
//! could not process.

use std::io::Write;

use serde::Serialize;

use crate::walk::WalkError;

/// What a report says: lines for people on stderr, data (JSON, removed directories) on stdout.
/// Built by the pure report code, written by [`Printout::emit`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Printout {
    /// The text for stderr.
    pub stderr: String,
    /// The text for stdout.
    pub stdout: String,
}

impl Printout {
    /// Writes stderr's text, then stdout's. Write errors are ignored: a closed pipe must not turn
    /// a finished run into a failure (the exit status already says how the run went).
    pub fn emit(&self) {
        let _ = std::io::stderr().lock().write_all(self.stderr.as_bytes());
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(self.stdout.as_bytes());
        let _ = out.flush();
    }
}

/// A file that could not be processed, as the JSON reports list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorEntry {
    /// The path.
    pub path: String,
    /// The one-line message.
    pub error: String,
}

/// The JSON entries of paths that could not be listed; `message` gives each one's text.
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
