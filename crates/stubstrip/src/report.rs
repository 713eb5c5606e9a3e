//! What to say: the summary line, the per-file lines, the JSON report.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use crate::classify::Rule;
use crate::fix::{EntryChange, Outcome, Tag};
use crate::walk::WalkError;

/// One file's changes, for the JSON report.
#[derive(Serialize)]
struct FileChange<'a> {
    path: String,
    entries: &'a [EntryChange],
}

/// A file that could not be processed.
#[derive(Serialize)]
struct FileError {
    path: String,
    /// The one-line message, which names the path.
    error: String,
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
    errors: Vec<FileError>,
}

fn errors_of(walk: &[WalkError]) -> Vec<FileError> {
    walk.iter()
        .map(|w| FileError {
            path: w.path.display().to_string(),
            error: w.to_string(),
        })
        .collect()
}

impl<'a> FixReport<'a> {
    /// Summarizes per-file outcomes.
    pub fn new(rule: &Rule, results: &'a [(PathBuf, Outcome)], walk: &[WalkError]) -> Self {
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
            errors: errors_of(walk),
        };
        for (path, outcome) in results {
            match outcome {
                Outcome::NotElf => {}
                Outcome::Clean => r.elf_files += 1,
                Outcome::Changed(entries) => {
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
                Outcome::Failed(error) => {
                    if error.is_elf() {
                        r.elf_files += 1;
                    }
                    r.errors.push(FileError {
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

    /// Prints the report: human lines on stderr, data on stdout.
    pub fn print(&self, verbose: bool, json: bool, print_removed: bool) {
        let mut err = std::io::stderr().lock();
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
        let mut out = std::io::stdout().lock();
        if json {
            let _ = serde_json::to_writer_pretty(&mut out, self);
            let _ = writeln!(out);
        } else if print_removed {
            for d in &self.removed_dirs {
                let _ = writeln!(out, "{d}");
            }
        }
    }
}

/// One stub entry left in a file.
#[derive(Serialize)]
struct Finding {
    path: String,
    tag: Tag,
    entry: String,
}

/// The report of `stubstrip check`.
#[derive(Serialize)]
pub struct CheckReport {
    command: &'static str,
    files_scanned: usize,
    elf_files: usize,
    files_with_stubs: usize,
    findings: Vec<Finding>,
    errors: Vec<FileError>,
    /// ELF files among the errors (they count in `elf_files` but were not read).
    #[serde(skip)]
    unread_elf_files: usize,
    /// ELF files without a stub entry, for `-v`.
    #[serde(skip)]
    clean: Vec<String>,
}

/// Per-file result of `check`: `Ok(None)` for non-ELF files.
pub type CheckResult = Result<Option<Vec<(Tag, String)>>, crate::fix::FileError>;

impl CheckReport {
    /// Summarizes per-file results.
    pub fn new(results: &[(PathBuf, CheckResult)], walk: &[WalkError]) -> Self {
        let mut r = CheckReport {
            command: "check",
            files_scanned: results.len(),
            elf_files: 0,
            files_with_stubs: 0,
            findings: Vec::new(),
            errors: errors_of(walk),
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
                    r.findings.extend(found.iter().map(|(tag, entry)| Finding {
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
                    r.errors.push(FileError {
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

    /// Prints errors, findings (and with `verbose` each clean ELF file) and the summary on
    /// stderr, the JSON report on stdout.
    pub fn print(&self, verbose: bool, json: bool) {
        let mut err = std::io::stderr().lock();
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
            let mut out = std::io::stdout().lock();
            let _ = serde_json::to_writer_pretty(&mut out, self);
            let _ = writeln!(out);
        }
    }
}
