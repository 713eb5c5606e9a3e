//! `elfpatch`: patchelf's command line for the dynamic-section operations, on top of the
//! `elfpatch` library.
//!
//! Options apply to every file named on the command line, in patchelf's order of operations
//! (print interpreter, print/set OS ABI, print/set soname, set interpreter, print rpath,
//! print/clear/set execstack, rpath edits, print needed, remove/replace/add needed,
//! no-default-lib, add-debug-tag), so a patchelf command line for these operations runs
//! unchanged. Every print shows the file as it was; all edits of one file go into one plan,
//! written once.
//!
//! One rule decides what a file can answer, for prints and edits alike ([`Need`], in the
//! library): an object that is not an executable or shared library fails every request, a file
//! without a dynamic section every request of it, one without `PT_INTERP` every request of the
//! interpreter, each with patchelf's status 1. Differences from patchelf, on purpose: every file
//! is processed even after one fails (each failure is one line on stderr), the exit status tells
//! what went wrong (see `--help`, made from [`exit`]), and options whose effects exclude each other are refused
//! rather than one of them ignored.
//!
//! Messages are `PROG: [FILE: ]what`, PROG being the name the program was run as (`patchelf`
//! when installed under that name). The options are one table (`options::OPTIONS`) that
//! parsing, `--help`, the man page (`--generate-man`) and the completions
//! (`--generate-completion SHELL`) are all made from; how to add one is said at the top of
//! options.rs. Paths named on the command line are followed through symlinks, as patchelf
//! follows them (the library's own opens never follow one).

#[path = "elfpatch/docs.rs"]
mod docs;
#[path = "elfpatch/exit.rs"]
mod exit;
#[path = "elfpatch/options.rs"]
mod options;
#[path = "elfpatch/rpath.rs"]
mod rpath;

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use elfpatch::plan::Layout;
use elfpatch::{edit_to, resolve_symlinks, Edit, ElfFile, Need, Options, WarningKind};
use exit::Exit;
use object::elf::ET_DYN;
use options::{parse_args, Action, Args, ParseError};
use rpath::{current_rpath, rpath_edits};

/// `eprintln!` that never panics: a closed stderr (`elfpatch ... 2>&1 | head -1`) loses the
/// message, not the run.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `text` on stderr as it is, never panicking.
fn say_raw(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// The allocator of the binary (the crate's `dlmalloc` feature, on by default): a call's cost is
/// mostly its start-up, and dlmalloc packs a call's few allocations into one mapping where musl's
/// malloc maps and unmaps each buffer (Cargo.toml says more).
#[cfg(feature = "dlmalloc")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// Why one file failed: elfpatch said so, or the file's resolution-cache note disagrees.
enum Failure {
    Elf(elfpatch::Error),
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
    /// The exit status it ends the run with.
    fn exit(&self) -> Exit {
        match self {
            Failure::Elf(e) => Exit::of_error(e),
            Failure::StaleNote(_) => Exit::Refused,
        }
    }
}

/// Standard output. A closed pipe (`elfpatch --print-needed f | head -1`) is the reader's
/// choice: the printing stops quietly and the run goes on with its own status. Any other write
/// error loses output the caller asked for: it is said once, and the status is [`Exit::Io`] (one
/// status with a file that cannot be read).
struct Out {
    closed: bool,
    error: Option<std::io::Error>,
}

impl Out {
    fn write(&mut self, bytes: &[u8]) {
        if self.closed || self.error.is_some() {
            return;
        }
        let mut out = std::io::stdout().lock();
        match out.write_all(bytes).and_then(|()| out.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => self.closed = true,
            Err(e) => self.error = Some(e),
        }
    }

    fn line(&mut self, s: &[u8]) {
        self.write(&[s, b"\n"].concat());
    }
}

/// What every message of one run starts with: the name the program was run as.
struct Said<'a> {
    prog: &'a str,
}

impl Said<'_> {
    /// `PROG: FILE: warning: what`.
    fn warn(&self, path: &Path, what: impl std::fmt::Display) {
        say!("{}: {}: warning: {what}", self.prog, path.display());
    }
}

fn process(said: &Said, a: &Args, named: &Path, out: &mut Out) -> Result<(), Failure> {
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
    match opened {
        Ok(file) => whole(said, a, path, &file, out),
        // A separate debug-info file: its sections keep their headers but not their contents, so
        // only its headers answer.
        Err(why) if why.is_separate_debug_info() => {
            let (_, header, phdrs) = elfpatch::read_headers(path)?;
            debug_info(said, a, path, (&header, &phdrs), why, out)
        }
        Err(e) => Err(e.into()),
    }
}

/// The requests on a file that could be read whole, in patchelf's order.
fn whole(said: &Said, a: &Args, path: &Path, file: &ElfFile, out: &mut Out) -> Result<(), Failure> {
    let e = file.elf();
    let need = |n: Need| e.require(n).map_err(|x| Failure::Elf(x.with_path(path)));
    // patchelf refuses these files whatever is asked, before anything is printed.
    e.check_section_table().map_err(|x| x.with_path(path))?;
    need(Need::Image)?;
    // Damage is said; facts no loader cares about only when asked (--debug).
    for w in &e.warnings {
        if w.kind == WarningKind::Damage || a.debug {
            said.warn(path, w);
        }
    }
    let mut edits = Vec::new();
    if a.print_interpreter {
        need(Need::Interpreter)?;
        out.line(e.interpreter().unwrap_or_default());
    }
    if a.print_os_abi {
        out.line(options::os_abi_name(e.os_abi()).as_bytes());
    }
    edits.extend(a.set_os_abi.map(Edit::SetOsAbi));
    let library = e.e_type() == ET_DYN;
    if a.print_soname && library {
        need(Need::Dynamic)?;
        // patchelf prints nothing for an empty DT_SONAME, as for none.
        if let Some(s) = e.soname().filter(|s| !s.is_empty()) {
            out.line(s);
        }
    }
    if let Some(s) = &a.set_soname {
        if library {
            need(Need::Dynamic)?;
            edits.push(Edit::SetSoname(s.clone()));
        } else {
            said.warn(
                path,
                "not a shared library: --set-soname ignored (as patchelf ignores it)",
            );
        }
    }
    if let Some(s) = &a.set_interpreter {
        need(Need::Interpreter)?;
        edits.push(Edit::SetInterpreter(s.clone()));
    }
    if a.print_rpath {
        need(Need::Dynamic)?;
        out.line(current_rpath(e).unwrap_or(b""));
    }
    if a.print_execstack {
        let state = match e.execstack() {
            Some(true) => 'X',
            Some(false) => '-',
            None => '?',
        };
        out.line(format!("execstack: {state}").as_bytes());
    }
    edits.extend(a.execstack_edit());
    if a.edits_run_path() {
        need(Need::Dynamic)?;
        edits.extend(rpath_edits(a, e));
    }
    if a.print_needed {
        need(Need::Dynamic)?;
        for n in e.needed() {
            out.line(n);
        }
    }
    if a.edits_dynamic_other_than_run_path() {
        need(Need::Dynamic)?;
    }
    needed_edits(said, a, path, e, &mut edits);
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
    for w in elfpatch::dropped(e, &outcome.plan) {
        said.warn(path, w);
    }
    if a.debug {
        say!(
            "{}: {}: {}",
            said.prog,
            path.display(),
            edit_words(
                &outcome.plan.layout,
                outcome.report.writes,
                outcome.report.bytes,
                (outcome.plan.old_len, outcome.plan.new_len)
            )
        );
    }
    build_note(a, a.output.as_deref().unwrap_or(path), &opts)
}

/// What `--debug` says about an edit, for people: how the layout changed, how much was written,
/// and the file's length, e.g. `edited in place: 2 writes, 31 bytes; length 16,384 bytes, unchanged`
/// or `appended a new PT_LOAD segment (moved: .dynstr, .dynamic) and moved the program headers
/// there: 6 writes, 4,200 bytes; length 16,384 -> 20,480 bytes`.
fn edit_words(layout: &Layout, writes: usize, bytes: u64, (old, new): (u64, u64)) -> String {
    let list = |moved: &[String]| match moved {
        [] => String::new(),
        m => format!(" (moved: {})", m.join(", ")),
    };
    // if-let rather than match: a layout the planner adds later is still said, by its name.
    let how = if let Layout::Appended {
        extended,
        moved_phdrs,
        moved,
    } = layout
    {
        format!(
            "{}{}{}",
            if *extended {
                "appended to the last PT_LOAD segment"
            } else {
                "appended a new PT_LOAD segment"
            },
            list(moved),
            if *moved_phdrs {
                " and moved the program headers there"
            } else {
                ""
            }
        )
    } else if let Layout::Grown { moved } = layout {
        format!("grew the string table where it is{}", list(moved))
    } else if *layout == Layout::InPlace {
        "edited in place".to_string()
    } else if *layout == Layout::Unchanged {
        return "nothing to change: the file already is as asked".to_string();
    } else {
        format!("{layout:?}")
    };
    let n = |v: u64| {
        let digits = v.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let length = if old == new {
        format!("length {} bytes, unchanged", n(old))
    } else {
        format!("length {} -> {} bytes", n(old), n(new))
    };
    format!(
        "{how}: {} {}, {} {}; {length}",
        writes,
        if writes == 1 { "write" } else { "writes" },
        n(bytes),
        if bytes == 1 { "byte" } else { "bytes" }
    )
}

/// `--remove-needed`, `--replace-needed` and `--add-needed`, in that order; a request that
/// changes nothing is said (patchelf is silent), and the run goes on.
fn needed_edits(said: &Said, a: &Args, path: &Path, e: &elfpatch::Elf, edits: &mut Vec<Edit>) {
    let needed = e.needed();
    let is_needed = |n: &[u8]| needed.contains(&n);
    let shown = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    for n in &a.remove_needed {
        if !is_needed(n) {
            said.warn(
                path,
                format!("{} is not needed: nothing to remove", shown(n)),
            );
        }
        edits.push(Edit::RemoveNeeded(n.clone()));
    }
    for (old, new) in &a.replace_needed {
        if !is_needed(old) {
            said.warn(
                path,
                format!("{} is not needed: nothing to replace", shown(old)),
            );
        }
        edits.push(Edit::ReplaceNeeded {
            old: old.clone(),
            new: new.clone(),
        });
    }
    for n in &a.add_needed {
        if is_needed(n) {
            // patchelf 0.19.3 would add a second entry naming it; one is all the loader uses.
            said.warn(
                path,
                format!("{} is already needed, not added again", shown(n)),
            );
        }
        edits.push(Edit::AddNeeded(n.clone()));
    }
}

/// The requests on a separate debug-info file (`objcopy --only-keep-debug`, Nix's
/// `separateDebugInfo`), in patchelf's order: its headers answer `--print-os-abi` and
/// `--print-execstack`; `--print-soname` on one that is not a library prints nothing, as on any
/// such file. `--print-rpath` prints nothing and succeeds, as patchelf's test
/// `no-dynamic-section` wants, and so do the run path edits, which leave the file as it is:
/// nixpkgs' `autoFixElfFiles` takes `--print-rpath`'s success for "dynamically linked" and then
/// edits the run path of every such file, the `debug` output's included, and a failure there
/// would fail the build. No loader reads a debug-info file, so there is no run path to fix.
/// Everything else needs the dynamic section or the interpreter, which have no contents here:
/// the request fails with status 1 and nothing is written.
fn debug_info(
    said: &Said,
    a: &Args,
    path: &Path,
    (header, phdrs): (&elfpatch::format::Header, &[elfpatch::format::Phdr]),
    why: elfpatch::Error,
    out: &mut Out,
) -> Result<(), Failure> {
    let library = header.e_type == ET_DYN;
    let lacks = a.print_interpreter
        || a.set_os_abi.is_some()
        || (a.print_soname && library)
        || (a.set_soname.is_some() && library)
        || a.set_interpreter.is_some();
    // The prints before the first request the file cannot answer are made, as patchelf makes
    // them.
    if a.print_interpreter {
        return Err(why.into());
    }
    if a.print_os_abi {
        let abi = header.ident[elfpatch::read::EI_OSABI];
        out.line(options::os_abi_name(abi).as_bytes());
    }
    if lacks {
        return Err(why.into());
    }
    if a.set_soname.is_some() {
        said.warn(
            path,
            "not a shared library: --set-soname ignored (as patchelf ignores it)",
        );
    }
    if a.print_execstack {
        let state = match elfpatch::read::execstack(phdrs) {
            Some(true) => 'X',
            Some(false) => '-',
            None => '?',
        };
        out.line(format!("execstack: {state}").as_bytes());
    }
    let edits = a.execstack_edit().is_some()
        || a.edits_dynamic_other_than_run_path()
        || a.build_resolution_cache
        || a.output.is_some();
    if a.print_needed || edits {
        return Err(why.into());
    }
    if a.debug {
        say!(
            "{}: {}: a separate debug-info file: no dynamic section contents, nothing done",
            said.prog,
            path.display()
        );
    }
    Ok(())
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
        // patchelf's own words, which its tests compare.
        say!("{warning}");
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
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "elfpatch".into())
}

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    let prog = program_name(argv.next().as_deref());
    let argv: Vec<OsString> = argv.collect();
    if argv.is_empty() {
        // As patchelf: no arguments at all, the help on stderr and a failure.
        say_raw(&docs::help(&prog));
        return ExitCode::from(Exit::Usage);
    }
    let mut out = Out {
        closed: false,
        error: None,
    };
    let mut args = match parse_args(argv, |p| std::fs::symlink_metadata(p).is_ok()) {
        Ok(a) => a,
        Err(ParseError::Usage(msg)) => {
            say!("{prog}: {msg} (see {prog} --help)");
            return ExitCode::from(Exit::Usage);
        }
        Err(ParseError::AtFile(msg)) => {
            say!("{prog}: {msg}");
            return ExitCode::from(Exit::Io);
        }
    };
    // patchelf's own switch for its debug output (its test suite sets it, and greps for what
    // elfpatch says only then: facts no loader cares about).
    args.debug |= std::env::var_os("PATCHELF_DEBUG").is_some();
    if args.debug {
        // Which program answers, whatever its name: clients parse `--version`, people read this.
        say!("{prog}: {}", docs::identity());
    }
    let said = Said { prog: &prog };
    let status = match args.action {
        Some(action) => {
            let text = match action {
                Action::Help => docs::help(&prog),
                Action::Version => docs::version(&prog),
                Action::Man => docs::man(),
                Action::Completion(shell) => docs::completion(shell),
            };
            out.write(text.as_bytes());
            if !text.ends_with('\n') {
                out.write(b"\n");
            }
            Exit::Done
        }
        None => {
            for w in &args.warnings {
                say!("{prog}: warning: {w}");
            }
            let mut status = Exit::Done;
            for f in &args.files {
                if let Err(e) = process(&said, &args, f, &mut out) {
                    say!("{prog}: {e}");
                    if status == Exit::Done {
                        status = e.exit();
                    }
                }
            }
            status
        }
    };
    match out.error {
        Some(e) => {
            say!(
                "{prog}: cannot write to stdout: {}",
                elfpatch::error::os_words(&e)
            );
            ExitCode::from(if status == Exit::Done {
                Exit::Io
            } else {
                status
            })
        }
        None => ExitCode::from(status),
    }
}
