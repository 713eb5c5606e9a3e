//! The I/O of `check`: list the files, read each one (in parallel), print the report.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::report::CheckReport;
use super::{note_stub_entries, stub_entries, CheckConfig, CheckOutcome, Checked};
use crate::elf_file;
use crate::exit::Exit;
use crate::rule::StubMatcher;
use crate::scan;

/// The stub entries left in one file.
pub fn check_file(path: &Path, stubs: &StubMatcher) -> CheckOutcome {
    Ok(elf_file::open_noted(path)?.map(|(elf, note)| {
        let mut entries = stub_entries(&elf_file::run_paths(&elf), stubs);
        entries.extend(note.iter().flat_map(|n| note_stub_entries(n, stubs)));
        Checked {
            entries,
            damage: elf_file::damage(&elf),
            layout: elfpatch::layout::layout_problems(&elf)
                .into_iter()
                .map(|p| p.message)
                .collect(),
        }
    }))
}

/// Checks each file; the results in the order of `files`.
pub fn check_files(stubs: &StubMatcher, files: &[PathBuf]) -> Vec<(PathBuf, CheckOutcome)> {
    files
        .par_iter()
        .map(|p| (p.clone(), check_file(p, stubs)))
        .collect()
}

/// Runs `check`; returns the exit status.
pub fn run(c: &CheckConfig) -> Exit {
    let scan = scan::scan(&c.paths, &c.exclude);
    let results = check_files(&c.stubs, &scan.objects());
    let r = CheckReport::new(&results, &scan);
    let code = if r.stub_entries() > 0 {
        Exit::Found
    } else if r.failed() {
        Exit::Failed
    } else {
        Exit::Done
    };
    r.render(c.verbose, c.json).emit(code)
}
