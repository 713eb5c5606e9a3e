//! What `check` says: the findings, the summary line, the JSON report (pure: built from the
//! per-file results, written by [`super::run`]).

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::CheckOutcome;
use crate::census::Census;
use crate::elf_file::RunpathTag;
use crate::printout::{count, json_text, walk_error_entries, ErrorEntry, Printout};
use crate::scan::Scan;
use crate::walk::WalkError;

/// One stub entry left in a file.
#[derive(Serialize)]
struct StubEntry {
    path: String,
    tag: RunpathTag,
    entry: String,
}

/// The report of `stubstrip check`.
#[derive(Serialize)]
pub struct CheckReport {
    command: &'static str,
    files_scanned: usize,
    elf_files: usize,
    files_with_stubs: usize,
    findings: Vec<StubEntry>,
    errors: Vec<ErrorEntry>,
    /// Files read whose section headers are damaged (elfpatch's words), in the JSON report only
    /// when there are some: said on stderr, not
    /// failed on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    damaged: Vec<ErrorEntry>,
    census: Census,
    /// Diagnostics about the named paths ([`Scan::notes`]).
    #[serde(skip)]
    notes: String,
    /// Loadable objects read.
    #[serde(skip)]
    read: usize,
    /// ELF files without a stub entry, for `-v`.
    #[serde(skip)]
    clean: Vec<String>,
    /// Whether the text repeats the count (`fixup` has said it with the fix's report).
    #[serde(skip)]
    say_count: bool,
}

impl CheckReport {
    /// Summarizes the results of the loadable objects of `scan`.
    pub fn new(results: &[(PathBuf, CheckOutcome)], scan: &Scan) -> Self {
        let mut r = CheckReport {
            command: "check",
            files_scanned: scan.census.files_seen,
            elf_files: scan.census.elf_files,
            files_with_stubs: 0,
            findings: Vec::new(),
            errors: walk_error_entries(&scan.errors, WalkError::to_string),
            damaged: Vec::new(),
            census: scan.census,
            notes: scan.notes(),
            read: 0,
            clean: Vec::new(),
            say_count: true,
        };
        for (path, res) in results {
            match res {
                Ok(None) => {}
                Ok(Some(checked)) => {
                    r.read += 1;
                    r.damaged.extend(checked.damage.iter().map(|d| ErrorEntry {
                        path: path.display().to_string(),
                        error: d.clone(),
                    }));
                    r.errors.extend(checked.layout.iter().map(|l| ErrorEntry {
                        path: path.display().to_string(),
                        error: format!("{}: the layout is inconsistent: {l}", path.display()),
                    }));
                    let found = &checked.entries;
                    if found.is_empty() {
                        r.clean.push(path.display().to_string());
                    } else {
                        r.files_with_stubs += 1;
                    }
                    r.findings
                        .extend(found.iter().map(|(tag, entry)| StubEntry {
                            path: path.display().to_string(),
                            tag: *tag,
                            entry: entry.clone(),
                        }));
                }
                Err(error) => {
                    r.errors.push(ErrorEntry {
                        path: path.display().to_string(),
                        error: error.to_string(),
                    });
                }
            }
        }
        r
    }

    /// The text leaves out the count line and the notes on the named paths (for a report that
    /// follows one that gave them).
    pub fn without_count(mut self) -> Self {
        self.say_count = false;
        self.notes.clear();
        self
    }

    /// Number of stub entries found.
    pub fn stub_entries(&self) -> usize {
        self.findings.len()
    }

    /// Whether some file could not be read.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Whether every file was read and none holds a stub entry.
    pub fn passed(&self) -> bool {
        self.findings.is_empty() && self.errors.is_empty()
    }

    /// The summary line. It says "passed" only when every file was read and there was
    /// something to read: a file that could not be read may hold a stub entry.
    pub fn summary(&self) -> String {
        let unread = match self.errors.len() {
            0 => String::new(),
            n => format!(
                "; {} could not be read (named on stderr)",
                count(n, "file", "files")
            ),
        };
        let read = count(self.read, "ELF file read", "ELF files read");
        if !self.findings.is_empty() {
            format!(
                "{}: check failed: {} in {} of {read}{unread}",
                crate::prog::name(),
                count(self.findings.len(), "stub entry", "stub entries"),
                self.files_with_stubs,
            )
        } else if !self.errors.is_empty() {
            format!(
                "{}: check incomplete: no stub entries in the {read}{unread}",
                crate::prog::name()
            )
        } else if let Some(nothing) = self.census.nothing_to_do() {
            format!("{}: check: nothing checked: {nothing}", crate::prog::name())
        } else {
            format!(
                "{}: check passed: no stub entries in {read}",
                crate::prog::name()
            )
        }
    }

    /// The report's text: errors on stderr; findings (and with `verbose` each clean ELF file),
    /// the count and the summary for people; with `json` the report as data.
    pub fn render(&self, verbose: bool, json: bool) -> Printout {
        let mut p = Printout::with_problems(&self.notes, &self.errors, &self.damaged);
        let out = &mut p.report;
        if verbose {
            for c in &self.clean {
                let _ = writeln!(out, "{c}: no stub entries");
            }
        }
        for f in &self.findings {
            let _ = writeln!(out, "{}: {} entry {}", f.path, f.tag.name(), f.entry);
        }
        if self.say_count {
            let _ = writeln!(out, "{}", self.census.line());
        }
        let _ = writeln!(out, "{}", self.summary());
        if json {
            p.data = Some(json_text(self));
        }
        p
    }
}
