//! What a packaging tool does to the ELF files it ships (auditwheel repairing a wheel, maturin
//! bundling a library, a distribution's fixup phase): point RUNPATH at the bundled libraries,
//! give a vendored library a SONAME of its own, and rename the NEEDED entries that name it.
//!
//! ```text
//! cargo run -p elfpatch --example package -- [--runpath DIRS] [--soname NAME]
//!     [--replace-needed OLD=NEW]... FILE...
//! ```
//!
//! Each file is edited in place (its inode, mode and owner kept; a symbolic link is refused, not
//! followed). Prints one line per file — what changed, `unchanged`, or `skipped (not ELF)` — and
//! exits with 1 if any file failed, after trying all of them. A file that fails stays
//! byte-identical.

use std::path::PathBuf;
use std::process::ExitCode;

use elfpatch::{edit_in_place, Edit, ErrorKind, Layout, Options};

/// What to do to every file.
#[derive(Debug, Default)]
pub struct Request {
    /// The new RUNPATH (`DT_RUNPATH`), e.g. `$ORIGIN/../lib`.
    pub runpath: Option<String>,
    /// The new SONAME.
    pub soname: Option<String>,
    /// NEEDED entries to rename: (old, new).
    pub replace_needed: Vec<(String, String)>,
    /// The files.
    pub files: Vec<PathBuf>,
}

impl Request {
    /// Parses the command line (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Request, String> {
        let mut request = Request::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
            match arg.as_str() {
                "--runpath" => request.runpath = Some(value("--runpath")?),
                "--soname" => request.soname = Some(value("--soname")?),
                "--replace-needed" => {
                    let pair = value("--replace-needed")?;
                    let (old, new) = pair
                        .split_once('=')
                        .ok_or(format!("--replace-needed {pair}: expected OLD=NEW"))?;
                    request.replace_needed.push((old.into(), new.into()));
                }
                flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
                _ => request.files.push(arg.into()),
            }
        }
        if request.files.is_empty() {
            return Err("no file given".into());
        }
        Ok(request)
    }

    /// The edits, in the order a packaging tool applies them.
    pub fn edits(&self) -> Vec<Edit> {
        let mut edits = Vec::new();
        if let Some(runpath) = &self.runpath {
            edits.push(Edit::SetRunpath(runpath.clone().into_bytes()));
        }
        if let Some(soname) = &self.soname {
            edits.push(Edit::SetSoname(soname.clone().into_bytes()));
        }
        for (old, new) in &self.replace_needed {
            edits.push(Edit::ReplaceNeeded {
                old: old.clone().into_bytes(),
                new: new.clone().into_bytes(),
            });
        }
        edits
    }
}

/// Edits every file, trying all of them: per file, what happened, or the one-line error that
/// names the file and says what is wrong.
pub fn run(request: &Request) -> Vec<Result<String, String>> {
    let edits = request.edits();
    let mut reports = Vec::new();
    for file in &request.files {
        let shown = file.display();
        let report = match edit_in_place(file, &edits, &Options::default()) {
            Ok(outcome) if !outcome.changed() => Ok(format!("{shown}: unchanged")),
            Ok(outcome) => {
                let how = match outcome.plan.layout {
                    Layout::Appended { .. } => "grown at the end",
                    Layout::Grown { .. } => "with the string table grown where it is",
                    _ => "in place",
                };
                let bytes = outcome.report.bytes;
                Ok(format!("{shown}: edited {how}, {bytes} bytes written"))
            }
            // A tree to package holds scripts and data too: not an error.
            Err(e) if e.kind() == ErrorKind::NotElf => Ok(format!("{shown}: skipped (not ELF)")),
            Err(e) => Err(e.to_string()),
        };
        reports.push(report);
    }
    reports
}

#[allow(dead_code)] // a module of the test that runs it
fn main() -> ExitCode {
    let request = match Request::parse(std::env::args().skip(1)) {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("package: {msg}");
            return ExitCode::from(2);
        }
    };
    let mut status = ExitCode::SUCCESS;
    for report in run(&request) {
        match report {
            Ok(line) => println!("{line}"),
            Err(line) => {
                eprintln!("package: {line}");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}
