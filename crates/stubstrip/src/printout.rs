//! What every subcommand's report shares: where its text goes, counted nouns, and the JSON
//! shape of a file it could not process.
//!
//! Unix conventions: findings and summaries (the report) go to stdout, so that `stubstrip check
//! out | grep` works; diagnostics (files that could not be read) go to stderr. When stdout
//! carries data instead (`--json`, `--print-removed`, `fixup`'s instructions for the hook), the
//! report goes to stderr with the diagnostics.
//!
//! One prefix rule for the lines people read. A line about one file starts with that file
//! (`FILE: RUNPATH entry DIR`, `FILE: RUNPATH OLD -> NEW`, `FILE: no stub entries`,
//! `FILE: error[SS001]: ...`, explain's `FILE: x86_64, ...`), as grep and compilers write theirs;
//! a line about the whole run starts with the program's name (`stubstrip: 1 file, ...`,
//! `stubstrip: check passed: ...`). Every line on stderr starts with the program's name
//! ([`named`]), the file after it where there is one (`stubstrip: FILE: what`).

use std::io::Write;

use serde::Serialize;

use crate::exit::Exit;
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
    /// A printout whose diagnostics are `notes`, then one line per file that could not be
    /// processed (`PROG: message`) and one per damaged file that was still read (`PROG: PATH:
    /// warning: message`): what `check` and `fix` say before their reports.
    pub fn with_problems(notes: &str, errors: &[ErrorEntry], damaged: &[ErrorEntry]) -> Printout {
        use std::fmt::Write as _;
        let mut p = Printout {
            diagnostics: notes.to_owned(),
            ..Printout::default()
        };
        let prog = crate::prog::name();
        for e in errors {
            let _ = writeln!(p.diagnostics, "{prog}: {}", e.error);
        }
        for d in damaged {
            let _ = writeln!(p.diagnostics, "{prog}: {}: warning: {}", d.path, d.error);
        }
        p
    }

    /// Writes the diagnostics on stderr, then the report on stdout, or with data the report on
    /// stderr and the data on stdout; returns the exit status: `code`, the run's, unless stdout
    /// could not be written ([`finish`]).
    pub fn emit(&self, code: Exit) -> Exit {
        let written = match &self.data {
            Some(data) => {
                self.to_stderr();
                write_stdout(data.as_bytes())
            }
            None => {
                let _ = std::io::stderr()
                    .lock()
                    .write_all(self.diagnostics.as_bytes());
                write_stdout(self.report.as_bytes())
            }
        };
        finish(code, written)
    }

    /// Writes the diagnostics and the report on stderr, and no data: for `fixup`, whose stdout
    /// carries the hook's instructions. On stderr every line starts with the program's name,
    /// the report's findings (`FILE: RUNPATH entry DIR`) too.
    pub fn to_stderr(&self) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(self.diagnostics.as_bytes());
        let _ = err.write_all(named(&self.report, crate::prog::name()).as_bytes());
    }
}

/// `text` with `prog: ` in front of each line that does not start with it already.
pub fn named(text: &str, prog: &str) -> String {
    let prefix = format!("{prog}: ");
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if !line.starts_with(&prefix) {
            out.push_str(&prefix);
        }
        out.push_str(line);
    }
    out
}

/// Writes `bytes` on stdout and flushes.
pub fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush())
}

/// The exit status of a run whose status is `code` and whose output went to stdout with the
/// result `written`. A closed pipe (`stubstrip check out | head -1`) is the reader's choice: the
/// run ends quietly with its own status, since the work is done and the status says how it
/// went. Any other write error loses output the caller asked for: it is named on stderr, and
/// the status is [`Exit::Failed`].
pub fn finish(code: Exit, written: std::io::Result<()>) -> Exit {
    match written {
        Ok(()) => code,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}: cannot write to stdout: {}",
                crate::prog::name(),
                elfpatch::error::os_words(&e)
            );
            Exit::Failed
        }
    }
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
    fn on_stderr_every_line_carries_the_name() {
        assert_eq!(
            named(
                "a/b: RUNPATH entry /s\nfoo: check failed\n    fix: run it\n",
                "foo"
            ),
            "foo: a/b: RUNPATH entry /s\nfoo: check failed\nfoo:     fix: run it\n"
        );
        assert_eq!(named("", "foo"), "");
    }

    #[test]
    fn a_closed_pipe_keeps_the_status_and_other_write_errors_are_3() {
        use std::io::{Error, ErrorKind};
        assert_eq!(finish(Exit::Found, Ok(())), Exit::Found);
        assert_eq!(
            finish(Exit::Found, Err(Error::from(ErrorKind::BrokenPipe))),
            Exit::Found
        );
        assert_eq!(
            finish(Exit::Done, Err(Error::from(ErrorKind::BrokenPipe))),
            Exit::Done
        );
        assert_eq!(
            finish(Exit::Done, Err(Error::from(ErrorKind::StorageFull))),
            Exit::Failed
        );
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(count(0, "ELF file", "ELF files"), "0 ELF files");
        assert_eq!(count(1, "stub entry", "stub entries"), "1 stub entry");
        assert_eq!(count(2, "stub entry", "stub entries"), "2 stub entries");
    }
}
