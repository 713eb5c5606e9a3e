//! The I/O of `fix`: list the files, read and edit each one (in parallel), print the report.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::plan::plan;
use super::report::FixReport;
use super::{FixConfig, FixOutcome};
use crate::elf_file;
use crate::exit::Exit;
use crate::rule::StubRule;
use crate::scan;

/// Applies the rule to one file, writing only when something changes.
pub fn fix_file(path: &Path, rule: &StubRule) -> FixOutcome {
    let (elf, note) = match elf_file::open_noted(path) {
        Ok(Some(x)) => x,
        Ok(None) => return FixOutcome::NotElf,
        Err(e) => return FixOutcome::Failed(e),
    };
    let p = plan(
        &elf_file::run_paths(&elf),
        note.as_ref().map(|n| &n.cache),
        rule,
    );
    let damage = elf_file::damage(&elf);
    drop(elf);
    if p.edits.is_empty() {
        return FixOutcome::Clean(damage);
    }
    match elf_file::edit(path, &p.edits) {
        Ok(()) => FixOutcome::Changed(p.changes, damage),
        Err(e) => FixOutcome::Failed(e),
    }
}

/// Fixes each file; the outcomes in the order of `files`.
pub fn fix_files(rule: &StubRule, files: &[PathBuf]) -> Vec<(PathBuf, FixOutcome)> {
    files
        .par_iter()
        .map(|p| (p.clone(), fix_file(p, rule)))
        .collect()
}

/// Runs `fix`; returns the exit status.
pub fn run(c: &FixConfig) -> Exit {
    let scan = scan::scan(&c.paths, &c.exclude);
    let results = fix_files(&c.rule, &scan.objects());
    let r = FixReport::new(&c.rule, &results, &scan);
    // Each file that failed is named on stderr and left unchanged.
    let code = if r.failed() { Exit::Failed } else { Exit::Done };
    r.render(c.verbose, c.json, c.print_removed).emit(code)
}
