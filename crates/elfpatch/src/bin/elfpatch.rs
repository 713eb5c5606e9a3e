//! `elfpatch`: patchelf's command line for the dynamic-section operations, on top of the
//! `elfpatch` library.
//!
//! Options apply to every file named on the command line, in patchelf's order of operations
//! (print interpreter, print/set soname, set interpreter, print rpath, rpath edits, print needed,
//! remove/replace/add needed), so a patchelf command line for these operations runs unchanged.
//! Differences, on purpose: every file is processed even after one fails (each failure is one line
//! on stderr), and the exit status tells what went wrong (see `--help`).

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use elfpatch::{edit_to, Edit, Elf, ElfFile, ErrorKind, Options};

const USAGE: &str = "\
usage: elfpatch [OPTIONS] FILE...

Reads and edits the dynamic section of ELF files, patchelf-compatible.

  --print-interpreter          print PT_INTERP
  --set-interpreter PATH       set PT_INTERP
  --print-soname               print DT_SONAME (nothing, status 0, when absent: as patchelf)
  --set-soname NAME            set DT_SONAME (shared libraries only; ignored with a warning otherwise, as patchelf)
  --print-rpath                print DT_RUNPATH, or DT_RPATH when there is no DT_RUNPATH
  --set-rpath PATH             set the run path (DT_RUNPATH; DT_RPATH with --force-rpath)
  --add-rpath PATH             append to the run path
  --remove-rpath               remove DT_RPATH and DT_RUNPATH
  --shrink-rpath               keep only run path entries that hold a needed library
  --allowed-rpath-prefixes P   with --shrink-rpath, keep only entries starting with one of P (colon-separated)
  --force-rpath                use DT_RPATH rather than DT_RUNPATH
  --print-needed               print DT_NEEDED entries
  --add-needed LIB             add a DT_NEEDED entry (repeatable)
  --remove-needed LIB          remove a DT_NEEDED entry and its version requirements (repeatable)
  --replace-needed OLD NEW     rename a DT_NEEDED entry and its version requirements (repeatable)
  --page-size SIZE             alignment of an appended segment (default: the file's largest p_align)
  --output FILE                write the result to FILE instead of editing in place
  --debug                      describe each edit's layout on stderr
  --version, --help

Exit status: 0 ok, 1 I/O error, 2 usage, 3 not ELF, 4 malformed file, 5 unsupported,
6 refused as unsafe, 7 file changed or write failed (restored), 8 invalid request.";

#[derive(Default)]
struct Args {
    print_interpreter: bool,
    set_interpreter: Option<Vec<u8>>,
    print_soname: bool,
    set_soname: Option<Vec<u8>>,
    print_rpath: bool,
    set_rpath: Option<Vec<u8>>,
    add_rpath: Option<Vec<u8>>,
    remove_rpath: bool,
    shrink_rpath: bool,
    allowed_prefixes: Vec<Vec<u8>>,
    force_rpath: bool,
    print_needed: bool,
    add_needed: Vec<Vec<u8>>,
    remove_needed: Vec<Vec<u8>>,
    replace_needed: Vec<(Vec<u8>, Vec<u8>)>,
    page_size: Option<u64>,
    output: Option<PathBuf>,
    debug: bool,
    files: Vec<PathBuf>,
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("elfpatch: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn parse_args(argv: Vec<OsString>) -> Result<Option<Args>, String> {
    let mut a = Args::default();
    let mut it = argv.into_iter();
    let value = |it: &mut std::vec::IntoIter<OsString>, flag: &str| -> Result<Vec<u8>, String> {
        it.next()
            .map(|v| v.into_vec())
            .ok_or_else(|| format!("{flag} needs an argument"))
    };
    let mut only_files = false;
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy();
        if only_files || !s.starts_with("--") {
            a.files.push(PathBuf::from(arg));
            continue;
        }
        match s.as_ref() {
            "--" => only_files = true,
            "--print-interpreter" => a.print_interpreter = true,
            "--set-interpreter" | "--interpreter" => a.set_interpreter = Some(value(&mut it, &s)?),
            "--print-soname" => a.print_soname = true,
            "--set-soname" => a.set_soname = Some(value(&mut it, &s)?),
            "--print-rpath" => a.print_rpath = true,
            "--set-rpath" => a.set_rpath = Some(value(&mut it, &s)?),
            "--add-rpath" => a.add_rpath = Some(value(&mut it, &s)?),
            "--remove-rpath" => a.remove_rpath = true,
            "--shrink-rpath" => a.shrink_rpath = true,
            "--allowed-rpath-prefixes" => {
                a.allowed_prefixes = value(&mut it, &s)?
                    .split(|&b| b == b':')
                    .filter(|p| !p.is_empty())
                    .map(<[u8]>::to_vec)
                    .collect();
            }
            "--force-rpath" => a.force_rpath = true,
            "--print-needed" => a.print_needed = true,
            "--add-needed" => a.add_needed.push(value(&mut it, &s)?),
            "--remove-needed" => a.remove_needed.push(value(&mut it, &s)?),
            "--replace-needed" => {
                let old = value(&mut it, &s)?;
                let new = value(&mut it, &s)?;
                a.replace_needed.push((old, new));
            }
            "--page-size" => {
                let v = value(&mut it, &s)?;
                let n: u64 = String::from_utf8_lossy(&v).parse().map_err(|_| {
                    format!("--page-size: not a number: {}", String::from_utf8_lossy(&v))
                })?;
                if n == 0 || !n.is_power_of_two() {
                    return Err(format!("--page-size: {n} is not a power of two"));
                }
                a.page_size = Some(n);
            }
            "--output" => a.output = Some(PathBuf::from(OsString::from_vec(value(&mut it, &s)?))),
            "--debug" => a.debug = true,
            "--version" => {
                println!("elfpatch {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown or unsupported option {other}")),
        }
    }
    if a.files.is_empty() {
        return Err("no input file".into());
    }
    Ok(Some(a))
}

/// Why one file failed: elfpatch said so, or the file cannot answer a query.
enum Failure {
    Elf(elfpatch::Error),
    /// `--print-interpreter` on a file without `PT_INTERP`.
    NoInterpreter(PathBuf),
}

impl From<elfpatch::Error> for Failure {
    fn from(e: elfpatch::Error) -> Self {
        Failure::Elf(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Elf(e) => write!(f, "{e}"),
            Failure::NoInterpreter(path) => write!(
                f,
                "{}: has no PT_INTERP (it is most likely a shared library or statically linked)",
                path.display()
            ),
        }
    }
}

impl Failure {
    /// The exit status (see `USAGE`).
    fn exit_code(&self) -> u8 {
        let Failure::Elf(e) = self else {
            return 8;
        };
        match e.kind() {
            ErrorKind::Io => 1,
            ErrorKind::NotElf => 3,
            ErrorKind::Malformed => 4,
            ErrorKind::Unsupported => 5,
            ErrorKind::Refused => 6,
            ErrorKind::Changed | ErrorKind::WriteFailed | ErrorKind::RollbackFailed => 7,
            ErrorKind::InvalidRequest => 8,
            // A kind a later elfpatch adds: a failure all the same.
            _ => 1,
        }
    }
}

/// The run path as patchelf reports it: DT_RUNPATH when present, else DT_RPATH.
fn current_rpath(e: &Elf) -> Option<&[u8]> {
    e.runpath().or_else(|| e.rpath())
}

/// Whether `dir` holds `lib`, an ELF file of the same class and machine (what the loader would
/// accept), for `--shrink-rpath`.
fn dir_provides(dir: &[u8], lib: &[u8], like: &Elf) -> bool {
    let mut p = dir.to_vec();
    p.push(b'/');
    p.extend_from_slice(lib);
    let path = Path::new(OsStr::from_bytes(&p));
    match ElfFile::open(path) {
        Ok(f) => f.elf().machine() == like.machine() && f.elf().class() == like.class(),
        Err(_) => {
            // A symlink (libfoo.so.1 -> libfoo.so.1.2) is the usual case: follow it here, we only read.
            std::fs::canonicalize(path)
                .ok()
                .and_then(|t| ElfFile::open(t).ok())
                .is_some_and(|f| {
                    f.elf().machine() == like.machine() && f.elf().class() == like.class()
                })
        }
    }
}

/// patchelf's `--shrink-rpath`: keep relative entries, and absolute ones (allowed by the
/// prefixes) that provide a needed library not found in an earlier entry.
fn shrink(e: &Elf, rpath: &[u8], prefixes: &[Vec<u8>]) -> Vec<u8> {
    let needed: Vec<Vec<u8>> = e.needed().into_iter().map(<[u8]>::to_vec).collect();
    let mut found = vec![false; needed.len()];
    let mut keep: Vec<&[u8]> = Vec::new();
    for dir in rpath.split(|&b| b == b':').filter(|d| !d.is_empty()) {
        if dir[0] != b'/' {
            keep.push(dir);
            continue;
        }
        if !prefixes.is_empty() && !prefixes.iter().any(|p| dir.starts_with(p)) {
            continue;
        }
        let mut useful = false;
        for (i, lib) in needed.iter().enumerate() {
            if !found[i] && dir_provides(dir, lib, e) {
                found[i] = true;
                useful = true;
            }
        }
        if useful {
            keep.push(dir);
        }
    }
    keep.join(&b':')
}

fn rpath_edits(a: &Args, e: &Elf) -> Vec<Edit> {
    let current = current_rpath(e).map(<[u8]>::to_vec);
    let new = if a.shrink_rpath {
        match &current {
            Some(c) => shrink(e, c, &a.allowed_prefixes),
            None => return Vec::new(),
        }
    } else if a.remove_rpath {
        return vec![Edit::RemoveRpath, Edit::RemoveRunpath];
    } else if let Some(s) = &a.set_rpath {
        s.clone()
    } else if let Some(add) = &a.add_rpath {
        match current.as_deref() {
            Some(c) if !c.is_empty() => [c, b":".as_slice(), add].concat(),
            _ => add.clone(),
        }
    } else {
        return Vec::new();
    };
    let (has_rpath, has_runpath) = (e.rpath().is_some(), e.runpath().is_some());
    if a.force_rpath {
        let mut v = Vec::new();
        if has_runpath {
            v.push(Edit::RunpathToRpath);
        }
        v.push(Edit::SetRpath(new));
        v
    } else if has_rpath && !has_runpath {
        vec![Edit::RpathToRunpath, Edit::SetRunpath(new)]
    } else if has_rpath {
        // patchelf points both entries at the new string.
        vec![Edit::SetRunpath(new.clone()), Edit::SetRpath(new)]
    } else {
        vec![Edit::SetRunpath(new)]
    }
}

fn line(out: &mut impl std::io::Write, s: &[u8]) {
    let _ = out.write_all(s);
    let _ = out.write_all(b"\n");
}

impl Args {
    /// Whether the command line asks for any change.
    fn edits_something(&self) -> bool {
        self.set_interpreter.is_some()
            || self.set_soname.is_some()
            || self.set_rpath.is_some()
            || self.add_rpath.is_some()
            || self.remove_rpath
            || self.shrink_rpath
            || !self.add_needed.is_empty()
            || !self.remove_needed.is_empty()
            || !self.replace_needed.is_empty()
    }
}

fn process(a: &Args, path: &Path) -> Result<(), Failure> {
    // One open and one parse per file: for reading and writing when the file will be edited in
    // place (an unwritable file is then reported before anything is printed or planned).
    let in_place = a.output.is_none() && a.edits_something();
    let file = if in_place {
        ElfFile::open_rw(path)?
    } else {
        ElfFile::open(path)?
    };
    let e = file.elf();
    // Damage in the section headers the edit can do without: said, not refused (patchelf
    // refuses; its words are in each message).
    for w in &e.warnings {
        eprintln!("elfpatch: warning: {}: {w}", path.display());
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.print_interpreter {
        match e.interpreter() {
            Some(i) => line(&mut out, i),
            None => return Err(Failure::NoInterpreter(path.to_path_buf())),
        }
    }
    let mut edits = Vec::new();
    if a.print_soname {
        if let Some(s) = e.soname() {
            line(&mut out, s);
        }
    }
    if let Some(s) = &a.set_soname {
        if e.e_type() == object::elf::ET_DYN {
            edits.push(Edit::SetSoname(s.clone()));
        } else {
            eprintln!(
                "elfpatch: {}: not a shared library, --set-soname ignored (as patchelf does)",
                path.display()
            );
        }
    }
    if let Some(s) = &a.set_interpreter {
        edits.push(Edit::SetInterpreter(s.clone()));
    }
    if a.print_rpath {
        line(&mut out, current_rpath(e).unwrap_or(b""));
    }
    edits.extend(rpath_edits(a, e));
    if a.print_needed {
        for n in e.needed() {
            line(&mut out, n);
        }
    }
    drop(out);
    edits.extend(
        a.remove_needed
            .iter()
            .map(|n| Edit::RemoveNeeded(n.clone())),
    );
    edits.extend(a.replace_needed.iter().map(|(o, n)| Edit::ReplaceNeeded {
        old: o.clone(),
        new: n.clone(),
    }));
    edits.extend(a.add_needed.iter().map(|n| Edit::AddNeeded(n.clone())));
    let opts = Options {
        page_size: a.page_size,
        ..Options::default()
    };
    let outcome = match &a.output {
        Some(o) => edit_to(path, o, &edits, &opts)?,
        None if edits.is_empty() => return Ok(()),
        None => file.edit(&edits, &opts)?,
    };
    if a.debug {
        eprintln!(
            "elfpatch: {}: {:?}, {} writes, {} bytes, length {} -> {}",
            path.display(),
            outcome.plan.layout,
            outcome.report.writes,
            outcome.report.bytes,
            outcome.plan.old_len,
            outcome.plan.new_len
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let args = match parse_args(argv) {
        Ok(Some(a)) => a,
        Ok(None) => return ExitCode::SUCCESS,
        Err(msg) => return usage_error(&msg),
    };
    let mut status = 0u8;
    for f in &args.files {
        if let Err(e) = process(&args, f) {
            let _ = std::io::stdout().flush();
            eprintln!("elfpatch: {e}");
            if status == 0 {
                status = e.exit_code();
            }
        }
    }
    ExitCode::from(status)
}
