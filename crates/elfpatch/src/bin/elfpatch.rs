//! `elfpatch`: patchelf's command line for the dynamic-section operations, on top of the
//! `elfpatch` library.
//!
//! Options apply to every file named on the command line, in patchelf's order of operations
//! (print interpreter, print/set OS ABI, print/set soname, set interpreter, print rpath,
//! print/clear/set execstack (one of them, in that precedence), rpath edits, print needed,
//! remove/replace/add needed, no-default-lib, add-debug-tag), so a patchelf command line for
//! these operations runs unchanged. Every print shows the file as it was; all edits of one file
//! go into one plan, written once.
//! Differences, on purpose: every file is processed even after one fails (each failure is one line
//! on stderr), and the exit status tells what went wrong (see `--help`).
//!
//! The options are one table (`options::OPTIONS`) that parsing, `--help`, the man page
//! (`--generate-man`) and the completions (`--generate-completion SHELL`) are all made from; how to
//! add one is said at the top of options.rs. Paths named on the command line are followed through
//! symlinks, as patchelf follows them (the library's own opens never follow one).

#[path = "elfpatch/docs.rs"]
mod docs;
#[path = "elfpatch/options.rs"]
mod options;

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use elfpatch::{edit_to, resolve_symlinks, Edit, Elf, ElfFile, ErrorKind, Options};
use options::{parse_args, Action, Args, ParseError};

/// The allocator of the binary (the crate's `dlmalloc` feature, on by default): a call's cost is
/// mostly its start-up, and dlmalloc packs a call's few allocations into one mapping where musl's
/// malloc maps and unmaps each buffer (Cargo.toml says more).
#[cfg(feature = "dlmalloc")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// Why one file failed: elfpatch said so, or the file cannot answer a query.
enum Failure {
    Elf(elfpatch::Error),
    /// `--print-interpreter` on a file without `PT_INTERP`.
    NoInterpreter(PathBuf),
    /// `--build-resolution-cache` on a file whose note says something else (as patchelf).
    StaleNote(PathBuf),
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
            Failure::StaleNote(path) => write!(
                f,
                "{}: {}",
                path.display(),
                elfpatch::resolution::ERR_ALREADY_PRESENT
            ),
        }
    }
}

impl Failure {
    /// The exit status (see `docs::EXIT`).
    fn exit_code(&self) -> u8 {
        let e = match self {
            Failure::Elf(e) => e,
            Failure::NoInterpreter(_) => return 8,
            Failure::StaleNote(_) => return 6,
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

fn process(a: &Args, named: &Path) -> Result<(), Failure> {
    // A symlink named on the command line is followed (`libz.so.1`), as patchelf does: an edit
    // in place edits its target and leaves the link.
    let path = &resolve_symlinks(named)?;
    // One open and one parse per file: for reading and writing when the file will be edited in
    // place (an unwritable file is then reported before anything is printed or planned).
    let in_place = a.output.is_none() && a.edits_something();
    let opened = if in_place {
        ElfFile::open_rw(path)
    } else {
        ElfFile::open(path)
    };
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.is_separate_debug_info() && a.only_run_path() => {
            if a.debug {
                eprintln!(
                    "elfpatch: {}: no dynamic section, nothing to do",
                    path.display()
                );
            }
            return Ok(());
        }
        Err(e) => return Err(e.into()),
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
    if a.print_os_abi {
        line(&mut out, options::os_abi_name(e.os_abi()).as_bytes());
    }
    edits.extend(a.set_os_abi.map(Edit::SetOsAbi));
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
    if a.print_execstack {
        let state = match e.execstack() {
            Some(true) => 'X',
            Some(false) => '-',
            None => '?',
        };
        line(&mut out, format!("execstack: {state}").as_bytes());
    }
    edits.extend(a.execstack_edit());
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
    for n in &a.add_needed {
        if e.needed().contains(&n.as_slice()) {
            // patchelf 0.19.3 would add a second entry naming it; one is all the loader uses.
            eprintln!(
                "elfpatch: {}: {} is already needed, not added again",
                path.display(),
                String::from_utf8_lossy(n)
            );
        }
        edits.push(Edit::AddNeeded(n.clone()));
    }
    if a.no_default_lib {
        edits.push(Edit::AddFlags1(u64::from(object::elf::DF_1_NODEFLIB)));
    }
    if a.add_debug_tag {
        edits.push(Edit::AddDebugTag);
    }
    // patchelf's order: versions cleared (by the old names), then the renames.
    edits.extend(
        a.clear_symbol_version
            .iter()
            .map(|n| Edit::ClearSymbolVersion(n.clone())),
    );
    if let Some(map) = &a.rename_symbols {
        edits.push(Edit::RenameDynamicSymbols(map.clone()));
    }
    let opts = Options {
        page_size: a.page_size,
        ..Options::default()
    };
    let outcome = match &a.output {
        Some(o) => edit_to(path, o, &edits, &opts)?,
        None if edits.is_empty() => return build_note(a, path, &opts),
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
    build_note(a, a.output.as_deref().unwrap_or(path), &opts)
}

/// `--build-resolution-cache` on `path`, once the other edits are written: the descriptor
/// patchelf 0.19.3 computes from the file's DT_NEEDED and run path, its warnings when there is
/// nothing to write, its refusal when a note that says something else is already there.
fn build_note(a: &Args, path: &Path, opts: &Options) -> Result<(), Failure> {
    use elfpatch::resolution::{self, Built};
    if !a.build_resolution_cache {
        return Ok(());
    }
    let file = ElfFile::open_rw(path)?;
    let e = file.elf();
    let tables = file.tables()?;
    // patchelf looks for the note by its section's name; elfpatch finds it by its segment too.
    let present = tables.note.is_some()
        || tables.note_fault.is_some()
        || e.section_by_name(elfpatch::note::SECTION_NAME).is_some();
    let nothing = |warning: &str| {
        if present {
            return Err(Failure::StaleNote(path.to_path_buf()));
        }
        eprintln!("{warning}");
        Ok(())
    };
    if e.dynamic.is_none() {
        return nothing(resolution::WARN_NO_DYNAMIC);
    }
    let built = resolution::build(&e.needed(), current_rpath(e), &resolution::SystemView);
    let desc = match built {
        Built::NothingToResolve => return nothing(resolution::WARN_NOTHING_TO_RESOLVE),
        Built::NothingResolved => return nothing(resolution::WARN_NOTHING_RESOLVED),
        Built::Cache(cache) => cache.to_descriptor(),
    };
    if present {
        return match tables.note {
            Some(n) if n.desc == desc => Ok(()),
            _ => Err(Failure::StaleNote(path.to_path_buf())),
        };
    }
    file.edit(&[Edit::SetResolutionCache(desc)], opts)?;
    Ok(())
}

/// What the program was called (`patchelf` when installed under that name).
fn program_name(argv0: Option<&OsStr>) -> String {
    argv0
        .map(Path::new)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    let program = program_name(argv.next().as_deref());
    let argv: Vec<OsString> = argv.collect();
    if argv.is_empty() {
        // As patchelf: no arguments at all, the help on stderr and a failure.
        eprint!("{}", docs::help());
        return ExitCode::from(2);
    }
    let args = match parse_args(argv, |p| std::fs::symlink_metadata(p).is_ok()) {
        Ok(a) => a,
        Err(ParseError::Usage(msg)) => {
            eprintln!("elfpatch: {msg} (see elfpatch --help)");
            return ExitCode::from(2);
        }
        Err(ParseError::AtFile(msg)) => {
            eprintln!("elfpatch: {msg}");
            return ExitCode::from(1);
        }
    };
    if let Some(action) = args.action {
        let text = match action {
            Action::Help => docs::help(),
            Action::Version => docs::version(&program),
            Action::Man => docs::man(),
            Action::Completion(shell) => docs::completion(shell),
        };
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
        return ExitCode::SUCCESS;
    }
    for w in &args.warnings {
        eprintln!("elfpatch: warning: {w}");
    }
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
