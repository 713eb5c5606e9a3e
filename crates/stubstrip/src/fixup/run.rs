//! The I/O of `fixup`: fix, check from disk, audit, write the check libraries, print the reply.

use std::io::{self, Write};
use std::path::PathBuf;

use super::check_libs::{self, CheckLibsInput, FixedFile};
use super::facts::Disk;
use super::policy::{fallback, fallback_instructions, HookInstruction};
use super::{CheckLibsConfig, FixupConfig};
use crate::audit::{self, AuditConfig};
use crate::check::report::CheckReport;
use crate::check::run::check_files;
use crate::check::CheckOutcome;
use crate::elf_file::{self, FileError};
use crate::exit::Exit;
use crate::fix::report::FixReport;
use crate::fix::run::fix_files;
use crate::fix::FixOutcome;
use crate::printout::write_stdout;
use crate::prog;
use crate::rule::StubMatcher;
use crate::scan;
use crate::stubs::stub_string;
use elfpatch::ErrorKind;

/// Notes that go to the build log: as `log` instructions on success, on stderr on failure
/// (stdout is then empty: the hook applies nothing from a failed run).
struct HookNotes(Vec<HookInstruction>);

impl HookNotes {
    fn log(&mut self, m: impl Into<String>) {
        self.0.push(HookInstruction::Log(m.into()));
    }

    /// Prints the notes on stderr, then `message`; returns `code`.
    fn fail(self, code: Exit, message: &str) -> Exit {
        let mut err = std::io::stderr().lock();
        for i in &self.0 {
            if let HookInstruction::Log(m) = i {
                let _ = writeln!(err, "{}: {m}", prog::name());
            }
        }
        let _ = writeln!(err, "{}: {message}", prog::name());
        code
    }
}

/// Runs `fixup`; returns the exit status: [`Exit::Found`] for a stub entry left or an audit
/// finding, [`Exit::Failed`] for what could not be read or written (the message on stderr says
/// which).
pub fn run(c: &FixupConfig) -> Exit {
    let mut notes = HookNotes(Vec::new());
    // One walk for the fix, the check and the audit: they see the same files.
    let scan = scan::scan(&c.paths, &c.exclude);
    let files = scan.objects();

    let fixed = fix_files(&c.rule, &files);
    let fix_report = FixReport::new(&c.rule, &fixed, &scan).count_inline();
    // Stdout is the hook's: every line for people goes to stderr.
    fix_report.render(c.verbose, false, false).to_stderr();
    if fix_report.failed() {
        notes.log(
            "warning: the fix could not rewrite some files (each named above); \
             checking them for stub entries",
        );
    }

    // The check reads every file again from disk: it proves the result, not the plan.
    let checked = check_files(&c.rule.stubs, &files);
    let (checked, left_alone) = tolerate_unparsable(checked, &c.rule.stubs);
    for why in &left_alone {
        notes.log(format!(
            "warning: {why}; not read as ELF, but no string in it names a stub directory: left as it is"
        ));
    }
    let check = CheckReport::new(&checked, &scan).without_count();
    if check.stub_entries() > 0 {
        let msg = "stub paths still present in RUNPATH or the resolution-cache note after the fix:";
        let code = notes.fail(Exit::Found, msg);
        check.render(false, false).to_stderr();
        return code;
    }
    if !check.passed() {
        let msg = "the check after the fix could not read every file, so it cannot say that no stub entry is left:";
        // A file the check could not read may hold a stub entry.
        let code = notes.fail(Exit::Failed, msg);
        check.render(false, false).to_stderr();
        return code;
    }

    if let Some(level) = c.audit {
        let audit = AuditConfig {
            paths: c.paths.clone(),
            exclude: c.exclude.clone(),
            deny: Some(level),
            deny_option: "--audit",
            json: false,
            build_dirs: Vec::new(),
            stubs: c.rule.stubs.clone(),
            root: None,
            model: Default::default(),
        };
        let level = level.name();
        let (said, code) = audit::run::run_on(&audit, &scan, false);
        said.to_stderr();
        match code {
            Exit::Done => notes.log(format!("audit: no finding at or above '{level}'")),
            Exit::Found => {
                return notes.fail(
                    Exit::Found,
                    &format!(
                        "the audit found problems at or above '{level}' (--audit, stubstripAudit)"
                    ),
                );
            }
            _ => notes.log("warning: the audit could not read some files (each named above)"),
        }
    }

    let mut driver_dirs: Vec<&[u8]> = Vec::new();
    driver_dirs.extend(c.rule.compat.as_deref());
    driver_dirs.push(&c.rule.driver_link);
    let decision = fallback(
        fix_report.removed_dirs(),
        c.check_fallback,
        &driver_dirs,
        &c.ld_library_path,
        &Disk,
    );
    notes.0.extend(fallback_instructions(&decision));

    if let Some(cl) = &c.check_libs {
        let driver_dirs: Vec<String> = driver_dirs
            .iter()
            .map(|d| String::from_utf8_lossy(d).into_owned())
            .collect();
        match check_libs(&fixed, cl, &driver_dirs) {
            Ok(lines) => lines.into_iter().for_each(|l| notes.log(l)),
            Err(e) => {
                return notes.fail(
                    Exit::Failed,
                    &format!("cannot leave the check libraries for the consumers: {e}"),
                );
            }
        }
    }

    let reply: Vec<u8> = notes.0.iter().flat_map(HookInstruction::render).collect();
    match write_stdout(&reply) {
        // A closed pipe: nobody reads the reply, so no partial one can mislead.
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            // A partial reply must not look like a complete one.
            notes.fail(
                Exit::Failed,
                &format!(
                    "cannot write the instructions to stdout: {}",
                    elfpatch::error::os_words(&e)
                ),
            )
        }
        _ => Exit::Done,
    }
}

/// Files the check could open but not parse as ELF (garbage after the magic, truncated, a
/// layout elfpatch does not read) are left as they are when no string in them could be read as
/// a stub entry ([`stub_string`]): nixpkgs' own hook skips every file `patchelf --print-rpath`
/// fails on, and a package that ships such a file (a test fixture, firmware) must not fail to
/// build where it built before. One that does hold such a string still fails the check, since
/// a loader may read what elfpatch cannot; so does a file that could not be opened or read, since
/// the store makes it readable later. Returns the rest, and the errors of the files left as they are.
fn tolerate_unparsable(
    checked: Vec<(PathBuf, CheckOutcome)>,
    stubs: &StubMatcher,
) -> (Vec<(PathBuf, CheckOutcome)>, Vec<String>) {
    let mut kept = Vec::with_capacity(checked.len());
    let mut left_alone = Vec::new();
    for (path, outcome) in checked {
        let unparsable = match &outcome {
            Err(FileError::Elf(e)) => matches!(
                e.kind(),
                ErrorKind::NotElf | ErrorKind::Malformed | ErrorKind::Unsupported
            ),
            _ => false,
        };
        if unparsable {
            if let Ok(bytes) = std::fs::read(&path) {
                if stub_string(&bytes, stubs).is_none() {
                    // The message names the file.
                    left_alone.extend(outcome.err().map(|e| e.to_string()));
                    continue;
                }
            }
        }
        kept.push((path, outcome));
    }
    (kept, left_alone)
}

/// What [`check_libs::plan`] needs of each changed file: its `DT_NEEDED` (read again after the
/// fix), the stub directories removed and the run path entries left.
fn fixed_files(fixed: &[(PathBuf, FixOutcome)]) -> Vec<FixedFile> {
    fixed
        .iter()
        .filter_map(|(path, outcome)| {
            let FixOutcome::Changed(changes, _) = outcome else {
                return None;
            };
            // A file the fix rewrote and that cannot be read now has nothing to offer here;
            // the check before this already read it.
            let needed = elf_file::needed(path).ok().flatten()?;
            Some(FixedFile {
                path: path.clone(),
                needed,
                removed: changes.iter().flat_map(|c| c.removed.clone()).collect(),
                entries: changes
                    .iter()
                    .flat_map(|c| c.new.split(':').map(str::to_owned).collect::<Vec<_>>())
                    .filter(|e| !e.is_empty())
                    .collect(),
            })
        })
        .collect()
}

/// Plans and writes the check libraries; the lines for the build log.
fn check_libs(
    fixed: &[(PathBuf, FixOutcome)],
    cl: &CheckLibsConfig,
    driver_dirs: &[String],
) -> Result<Vec<String>, check_libs::write::CheckLibsWriteError> {
    if driver_dirs.iter().any(|d| d.contains('\n')) {
        return Ok(vec![
            "consumers' checks: a driver directory holds a newline; no check libraries left".into(),
        ]);
    }
    let input = CheckLibsInput {
        outputs: &cl.outputs,
        driver_dirs,
        store_dir: &cl.store_dir,
    };
    let plans = check_libs::plan(&fixed_files(fixed), &input, &Disk);
    check_libs::write::write(&plans, driver_dirs, cl.check_hook.as_deref(), &cl.store_dir)
}
