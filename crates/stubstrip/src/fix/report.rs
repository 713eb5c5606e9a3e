//! What `fix` says: the summary line, the per-file lines, the JSON report (pure: built from the
//! outcomes, written by [`super::run`]).

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::plan::RunpathChange;
use super::FixOutcome;
use crate::census::Census;
use crate::printout::{count, json_text, walk_error_entries, ErrorEntry, Printout};
use crate::rule::StubRule;
use crate::scan::Scan;
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
    /// Files read whose section headers are damaged (elfpatch's words), in the JSON report only
    /// when there are some: said on stderr; a file
    /// whose edit was refused for it is among `errors`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    damaged: Vec<ErrorEntry>,
    census: Census,
    /// Diagnostics about the named paths ([`Scan::notes`]).
    #[serde(skip)]
    notes: String,
    /// Whether the count goes at the end of the summary line rather than on a line of its own
    /// (`fixup`: the hook's build log gets one line from a run with nothing to say).
    #[serde(skip)]
    count_inline: bool,
}

impl<'a> FixReport<'a> {
    /// Summarizes the outcomes of the loadable objects of `scan`.
    pub fn new(rule: &StubRule, results: &'a [(PathBuf, FixOutcome)], scan: &Scan) -> Self {
        let mut r = FixReport {
            command: "fix",
            driver_link: String::from_utf8_lossy(&rule.driver_link).into_owned(),
            compat: rule
                .compat
                .as_ref()
                .map(|c| String::from_utf8_lossy(c).into_owned()),
            files_scanned: scan.census.files_seen,
            elf_files: scan.census.elf_files,
            rewritten: 0,
            stub_entries_replaced: 0,
            removed_dirs: Vec::new(),
            changes: Vec::new(),
            errors: walk_error_entries(&scan.errors, WalkError::to_string),
            damaged: Vec::new(),
            census: scan.census,
            notes: scan.notes(),
            count_inline: false,
        };
        for (path, outcome) in results {
            if let FixOutcome::Clean(damage) | FixOutcome::Changed(_, damage) = outcome {
                r.damaged.extend(damage.iter().map(|d| ErrorEntry {
                    path: path.display().to_string(),
                    error: d.clone(),
                }));
            }
            match outcome {
                FixOutcome::NotElf | FixOutcome::Clean(_) => {}
                FixOutcome::Changed(entries, _) => {
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
                    r.errors.push(ErrorEntry {
                        path: path.display().to_string(),
                        error: error.to_string(),
                    });
                }
            }
        }
        r
    }

    /// The count goes at the end of the summary line, in parentheses.
    pub fn count_inline(mut self) -> Self {
        self.count_inline = true;
        self
    }

    /// Whether some file could not be processed.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Each stub directory removed, once, in the order first met.
    pub fn removed_dirs(&self) -> &[String] {
        &self.removed_dirs
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        let failed = match self.errors.len() {
            0 => String::new(),
            n => format!(
                ", {} could not be processed (named on stderr)",
                count(n, "file", "files")
            ),
        };
        match self.census.nothing_to_do() {
            Some(nothing) if self.errors.is_empty() => {
                format!("{}: nothing rewritten: {nothing}", crate::prog::name())
            }
            _ => format!(
                "{}: {} of {} rewritten, {} replaced{failed}",
                crate::prog::name(),
                self.rewritten,
                count(self.census.loadable_objects, "ELF file", "ELF files"),
                count(self.stub_entries_replaced, "stub entry", "stub entries"),
            ),
        }
    }

    /// The report's text: errors on stderr; with `verbose` each change, the count and the
    /// summary for people; with `json` the report, else with `print_removed` each removed
    /// directory, as data.
    pub fn render(&self, verbose: bool, json: bool, print_removed: bool) -> Printout {
        let mut p = Printout::with_problems(&self.notes, &self.errors, &self.damaged);
        let out = &mut p.report;
        if verbose {
            for c in &self.changes {
                for e in c.entries {
                    // A line about one file starts with the file, as check's and audit's
                    // findings do (printout.rs: the one prefix rule).
                    let _ = writeln!(out, "{}: {} {} -> {}", c.path, e.tag.name(), e.old, e.new);
                }
            }
        }
        if self.count_inline {
            let _ = writeln!(out, "{} ({})", self.summary(), self.census.counts());
        } else {
            let _ = writeln!(out, "{}", self.census.line());
            let _ = writeln!(out, "{}", self.summary());
        }
        if json {
            p.data = Some(json_text(self));
        } else if print_removed {
            let mut data = String::new();
            for d in &self.removed_dirs {
                let _ = writeln!(data, "{d}");
            }
            p.data = Some(data);
        }
        p
    }
}
