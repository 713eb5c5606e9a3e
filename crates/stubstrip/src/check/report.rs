//! What `check` says: the findings, the summary line, the JSON report (pure: built from the
//! per-file results, written by [`super::run`]).

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::CheckOutcome;
use crate::elf_file::RunpathTag;
use crate::printout::{json_text, walk_error_entries, ErrorEntry, Printout};
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
    /// ELF files among the errors (they count in `elf_files` but were not read).
    #[serde(skip)]
    unread_elf_files: usize,
    /// ELF files without a stub entry, for `-v`.
    #[serde(skip)]
    clean: Vec<String>,
}

impl CheckReport {
    /// Summarizes per-file results.
    pub fn new(results: &[(PathBuf, CheckOutcome)], walk: &[WalkError]) -> Self {
        let mut r = CheckReport {
            command: "check",
            files_scanned: results.len(),
            elf_files: 0,
            files_with_stubs: 0,
            findings: Vec::new(),
            errors: walk_error_entries(walk, WalkError::to_string),
            unread_elf_files: 0,
            clean: Vec::new(),
        };
        for (path, res) in results {
            match res {
                Ok(None) => {}
                Ok(Some(found)) => {
                    r.elf_files += 1;
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
                    if error.is_elf() {
                        r.elf_files += 1;
                        r.unread_elf_files += 1;
                    }
                    r.errors.push(ErrorEntry {
                        path: path.display().to_string(),
                        error: error.to_string(),
                    });
                }
            }
        }
        r
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

    /// The summary line. It says "passed" only when every file was read: a file that could
    /// not be read may hold a stub entry.
    pub fn summary(&self) -> String {
        let unread = match self.errors.len() {
            0 => String::new(),
            1 => "; 1 file could not be read (named above)".to_string(),
            n => format!("; {n} files could not be read (named above)"),
        };
        let read = self.elf_files - self.unread_elf_files;
        if !self.findings.is_empty() {
            format!(
                "stubstrip: check failed: {} stub entries in {} of {read} ELF files read{unread}",
                self.findings.len(),
                self.files_with_stubs,
            )
        } else if !self.errors.is_empty() {
            format!(
                "stubstrip: check incomplete: no stub entries in the {read} ELF files read{unread}"
            )
        } else {
            format!(
                "stubstrip: check passed: no stub entries in {} ELF files",
                self.elf_files
            )
        }
    }

    /// The report's text: errors, findings (and with `verbose` each clean ELF file) and the
    /// summary on stderr; with `json` the report on stdout.
    pub fn render(&self, verbose: bool, json: bool) -> Printout {
        let mut p = Printout::default();
        let err = &mut p.stderr;
        for e in &self.errors {
            let _ = writeln!(err, "stubstrip: error: {}", e.error);
        }
        if verbose {
            for c in &self.clean {
                let _ = writeln!(err, "stubstrip: {c}: no stub entries");
            }
        }
        for f in &self.findings {
            let _ = writeln!(err, "{}: {} entry {}", f.path, f.tag.name(), f.entry);
        }
        let _ = writeln!(err, "{}", self.summary());
        if json {
            p.stdout = json_text(self);
        }
        p
    }
}
