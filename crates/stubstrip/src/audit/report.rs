//! What `audit` says: each finding with its fix, the summary line, the JSON report (pure: built
//! from the per-file outcomes, written by [`super::run`]).

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::rules::AuditFinding;
use super::{AuditOutcome, Severity};
use crate::printout::{json_text, walk_error_entries, ErrorEntry, Printout};
use crate::walk::WalkError;

/// One finding with the file it is about.
#[derive(Serialize)]
struct FileFinding<'a> {
    file: String,
    #[serde(flatten)]
    finding: &'a AuditFinding,
}

/// How many findings of each severity.
#[derive(Serialize, Default)]
struct SeverityCounts {
    error: usize,
    warning: usize,
    info: usize,
}

/// The report of `stubstrip audit`.
#[derive(Serialize)]
pub struct AuditReport<'a> {
    command: &'static str,
    deny: &'static str,
    files_scanned: usize,
    elf_files: usize,
    files_with_findings: usize,
    counts: SeverityCounts,
    denied: bool,
    findings: Vec<FileFinding<'a>>,
    errors: Vec<ErrorEntry>,
}

impl<'a> AuditReport<'a> {
    /// Summarizes per-file outcomes; findings at or above `deny` make the report fail.
    pub fn new(
        results: &'a [(PathBuf, AuditOutcome)],
        walk: &[WalkError],
        deny: Option<Severity>,
    ) -> Self {
        let mut report = AuditReport {
            command: "audit",
            deny: deny.map(Severity::name).unwrap_or("never"),
            files_scanned: results.len(),
            elf_files: 0,
            files_with_findings: 0,
            counts: SeverityCounts::default(),
            denied: false,
            findings: Vec::new(),
            errors: walk_error_entries(walk, |w| w.error.to_string()),
        };
        for (path, o) in results {
            match o {
                AuditOutcome::NotAudited => {}
                AuditOutcome::Failed(e) => report.errors.push(ErrorEntry {
                    path: path.display().to_string(),
                    error: e.to_string(),
                }),
                AuditOutcome::Audited(found) => {
                    report.elf_files += 1;
                    if !found.is_empty() {
                        report.files_with_findings += 1;
                    }
                    for f in found {
                        match f.severity {
                            Severity::Error => report.counts.error += 1,
                            Severity::Warning => report.counts.warning += 1,
                            Severity::Info => report.counts.info += 1,
                        }
                        if deny.is_some_and(|d| f.severity >= d) {
                            report.denied = true;
                        }
                        report.findings.push(FileFinding {
                            file: path.display().to_string(),
                            finding: f,
                        });
                    }
                }
            }
        }
        report
    }

    /// Whether a finding is at or above the `--deny` level.
    pub fn denied(&self) -> bool {
        self.denied
    }

    /// Whether some file could not be read.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The report's text: errors, findings (unless `json`) and the summary on stderr; with
    /// `json` the report on stdout.
    pub fn render(&self, json: bool) -> Printout {
        let mut p = Printout::default();
        let err = &mut p.stderr;
        for e in &self.errors {
            let _ = writeln!(err, "stubstrip: error: {}: {}", e.path, e.error);
        }
        if !json {
            for f in &self.findings {
                let x = f.finding;
                let _ = writeln!(
                    err,
                    "{}: {}[{}]: {}\n    fix: {}",
                    f.file,
                    x.severity.name(),
                    x.code,
                    x.message,
                    x.fix
                );
            }
        }
        let _ = writeln!(
            err,
            "stubstrip: audit: {} errors, {} warnings, {} info in {} of {} ELF files{}{}",
            self.counts.error,
            self.counts.warning,
            self.counts.info,
            self.files_with_findings,
            self.elf_files,
            if self.errors.is_empty() {
                String::new()
            } else {
                format!(", {} files could not be read", self.errors.len())
            },
            if self.denied {
                format!(" (failing: findings at or above --deny {})", self.deny)
            } else {
                String::new()
            }
        );
        if json {
            p.stdout = json_text(self);
        }
        p
    }
}
