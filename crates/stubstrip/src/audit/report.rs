//! What `audit` says: each finding with its fix, the summary line, the JSON report (pure: built
//! from the per-file outcomes, written by [`super::run`]).

use std::fmt::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::rules::AuditFinding;
use super::{AuditOutcome, Severity};
use crate::census::Census;
use crate::printout::{count, json_text, walk_error_entries, ErrorEntry, Printout};
use crate::scan::Scan;

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
    census: Census,
    /// Diagnostics about the named paths ([`Scan::notes`]).
    #[serde(skip)]
    notes: String,
    /// The option that set `deny` (`--deny`, or `--audit` in `fixup`).
    #[serde(skip)]
    deny_option: &'static str,
}

impl<'a> AuditReport<'a> {
    /// Summarizes the outcomes of the loadable objects of `scan`; findings at or above `deny`
    /// make the report fail.
    pub fn new(
        results: &'a [(PathBuf, AuditOutcome)],
        scan: &Scan,
        deny: Option<Severity>,
    ) -> Self {
        let mut report = AuditReport {
            command: "audit",
            deny: deny.map(Severity::name).unwrap_or("never"),
            deny_option: "--deny",
            files_scanned: scan.census.files_seen,
            elf_files: scan.census.elf_files,
            files_with_findings: 0,
            counts: SeverityCounts::default(),
            denied: false,
            findings: Vec::new(),
            errors: walk_error_entries(&scan.errors, |w| elfpatch::error::os_words(&w.error)),
            census: scan.census,
            notes: scan.notes(),
        };
        for (path, o) in results {
            match o {
                AuditOutcome::NotAudited => {}
                AuditOutcome::Failed(e) => report.errors.push(ErrorEntry {
                    path: path.display().to_string(),
                    error: e.to_string(),
                }),
                AuditOutcome::Audited(found) => {
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

    /// The report with `option` named as the one that set the failing level.
    pub fn deny_option(mut self, option: &'static str) -> Self {
        self.deny_option = option;
        self
    }

    /// Whether a finding is at or above the `--deny` level.
    pub fn denied(&self) -> bool {
        self.denied
    }

    /// Whether some file could not be read.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The summary line.
    pub fn summary(&self) -> String {
        if let (Some(nothing), true) = (self.census.nothing_to_do(), self.errors.is_empty()) {
            return format!("{}: audit: nothing audited: {nothing}", crate::prog::name());
        }
        let c = &self.counts;
        format!(
            "{}: audit: {}, {}, {} in {} of {}{}{}",
            crate::prog::name(),
            count(c.error, "error", "errors"),
            count(c.warning, "warning", "warnings"),
            count(c.info, "info", "info"),
            self.files_with_findings,
            count(self.census.loadable_objects, "ELF file", "ELF files"),
            match self.errors.len() {
                0 => String::new(),
                n => format!(
                    ", {} could not be read (named on stderr)",
                    count(n, "file", "files")
                ),
            },
            if self.denied {
                format!(
                    " (failing: findings at or above {} {})",
                    self.deny_option, self.deny
                )
            } else {
                String::new()
            }
        )
    }

    /// The report's text: errors on stderr; findings, the count (with `say_count`) and the
    /// summary for people; with `json` the report as data.
    pub fn render(&self, json: bool, say_count: bool) -> Printout {
        let mut p = Printout::default();
        if say_count {
            p.diagnostics.push_str(&self.notes);
        }
        for e in &self.errors {
            let _ = writeln!(
                p.diagnostics,
                "{}: {}: {}",
                crate::prog::name(),
                e.path,
                e.error
            );
        }
        let out = &mut p.report;
        if !json {
            for f in &self.findings {
                let x = f.finding;
                let _ = writeln!(
                    out,
                    "{}: {}[{}]: {}\n    fix: {}",
                    f.file,
                    x.severity.name(),
                    x.code,
                    x.message,
                    x.fix
                );
            }
        }
        if say_count {
            let _ = writeln!(out, "{}", self.census.line());
        }
        let _ = writeln!(out, "{}", self.summary());
        if json {
            p.data = Some(json_text(self));
        }
        p
    }
}
