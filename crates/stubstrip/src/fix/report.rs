//! What `fix` says: the summary line, the per-file lines, the JSON report (pure: built from the
//! outcomes, written by [`super::run`]).

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::plan::RunpathChange;
use super::FixOutcome;
use crate::printout::{json_text, walk_error_entries, ErrorEntry, Printout};
use crate::rule::StubRule;
use crate::walk::WalkError;

/// One file's changes, for the JSON report.
#[derive(Serialize)]
struct FileChange<'a> {
    path: String,
    entries: &'a [RunpathChange],
}

/// The report of `stubstrip fix`.
#[derive(Serialize)]
pub struct FixReport<'a> {
    command: &'static str,
    driver_link: String,
    compat: Option<String>,
    files_scanned: usize,
    elf_files: usize,
    rewritten: usize,
    stub_entries_replaced: usize,
    removed_dirs: Vec<String>,
    changes: Vec<FileChange<'a>>,
    errors: Vec<ErrorEntry>,
}

impl<'a> FixReport<'a> {
    /// Summarizes per-file outcomes.
    pub fn new(rule: &StubRule, results: &'a [(PathBuf, FixOutcome)], walk: &[WalkError]) -> Self {
        let mut r = FixReport {
            command: "fix",
            driver_link: String::from_utf8_lossy(&rule.driver_link).into_owned(),
            compat: rule
                .compat
                .as_ref()
                .map(|c| String::from_utf8_lossy(c).into_owned()),
            files_scanned: results.len(),
            elf_files: 0,
            rewritten: 0,
            stub_entries_replaced: 0,
            removed_dirs: Vec::new(),
            changes: Vec::new(),
            errors: walk_error_entries(walk, WalkError::to_string),
        };
        for (path, outcome) in results {
            match outcome {
                FixOutcome::NotElf => {}
                FixOutcome::Clean => r.elf_files += 1,
                FixOutcome::Changed(entries) => {
                    r.elf_files += 1;
                    r.rewritten += 1;
                    for e in entries {
                        r.stub_entries_replaced += e.removed.len();
                        for d in &e.removed {
                            if !r.removed_dirs.contains(d) {
                                r.removed_dirs.push(d.clone());
                            }
                        }
                    }
                    r.changes.push(FileChange {
                        path: path.display().to_string(),
                        entries,
                    });
                }
                FixOutcome::Failed(error) => {
                    if error.is_elf() {
                        r.elf_files += 1;
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

    /// Whether some file could not be processed.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Each stub directory removed, once, in the order first met.
    pub fn removed_dirs(&self) -> &[String] {
        &self.removed_dirs
    }

    /// The report's text: errors, with `verbose` each change, and the summary on stderr; with
    /// `json` the report, else with `print_removed` each removed directory, on stdout.
    pub fn render(&self, verbose: bool, json: bool, print_removed: bool) -> Printout {
        let mut p = Printout::default();
        let err = &mut p.stderr;
        for e in &self.errors {
            let _ = writeln!(err, "stubstrip: error: {}", e.error);
        }
        if verbose {
            for c in &self.changes {
                for e in c.entries {
                    let _ = writeln!(
                        err,
                        "stubstrip: {}: {} {} -> {}",
                        c.path,
                        e.tag.name(),
                        e.old,
                        e.new
                    );
                }
            }
        }
        let _ = writeln!(
            err,
            "stubstrip: {} of {} ELF files rewritten, {} stub entries replaced{}",
            self.rewritten,
            self.elf_files,
            self.stub_entries_replaced,
            match self.errors.len() {
                0 => String::new(),
                1 => ", 1 file could not be processed".to_string(),
                n => format!(", {n} files could not be processed"),
            }
        );
        if json {
            p.stdout = json_text(self);
        } else if print_removed {
            for d in &self.removed_dirs {
                let _ = writeln!(p.stdout, "{d}");
            }
        }
        p
    }
}
