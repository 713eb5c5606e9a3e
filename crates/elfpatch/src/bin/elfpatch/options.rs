//! The command line: one table of options ([`OPTIONS`]) drives parsing, `--help`, the man page
//! and the shell completions, so none of them can forget an option.
//!
//! Adding an option: a field in [`Args`], one [`Opt`] in [`OPTIONS`] (its `set` fills the field),
//! a line in [`Args::edits_something`] if it edits, and its step in `process` (elfpatch.rs) at its
//! place in patchelf's order of operations. Where patchelf passes the argument through its
//! `resolveArgument` (an argument `@FILE` is FILE's contents), set `at_file`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// The patchelf release whose command line elfpatch follows.
pub const PATCHELF_VERSION: &str = "0.19.3";

/// What the shells offer for an option's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Complete {
    /// A path.
    File,
    /// Free text (a library name, a size).
    Text,
    /// Directories separated by colons (a run path).
    DirList,
    /// One of these words.
    Words(&'static [&'static str]),
}

/// One option: everything the parser, `--help`, the man page and the completions need.
pub struct Opt {
    /// The long name, with its dashes.
    pub name: &'static str,
    /// Other names patchelf accepts for it.
    pub aliases: &'static [&'static str],
    /// The names of its arguments (how many it takes).
    pub args: &'static [&'static str],
    /// What the shells complete its arguments with.
    pub complete: Complete,
    /// patchelf reads the argument from a file when it starts with `@`.
    pub at_file: bool,
    /// May be given several times, each adding to the last.
    pub repeats: bool,
    /// One line for `--help`, the man page and the completions.
    pub help: &'static str,
    /// Records the option (its arguments already read, `@FILE` resolved) in `Args`.
    pub set: fn(&mut Args, Vec<Vec<u8>>) -> Result<(), String>,
}

/// What to do instead of editing files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Print the help.
    Help,
    /// Print the version.
    Version,
    /// Print the man page (roff).
    Man,
    /// Print a completion script for this shell.
    Completion(Shell),
}

/// The shells completions are generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    /// bash (`complete -F`).
    Bash,
    /// zsh (`#compdef`, `_arguments`).
    Zsh,
    /// fish (`complete -c`).
    Fish,
}

/// The parsed command line.
#[derive(Default, Debug)]
pub struct Args {
    /// `--help`, `--version`, ...: done instead of editing.
    pub action: Option<Action>,
    /// `--print-interpreter`.
    pub print_interpreter: bool,
    /// `--set-interpreter`.
    pub set_interpreter: Option<Vec<u8>>,
    /// `--print-soname`.
    pub print_soname: bool,
    /// `--set-soname`.
    pub set_soname: Option<Vec<u8>>,
    /// `--print-rpath`.
    pub print_rpath: bool,
    /// `--set-rpath`.
    pub set_rpath: Option<Vec<u8>>,
    /// `--add-rpath`.
    pub add_rpath: Option<Vec<u8>>,
    /// `--remove-rpath`.
    pub remove_rpath: bool,
    /// `--shrink-rpath`.
    pub shrink_rpath: bool,
    /// `--allowed-rpath-prefixes`, split at colons.
    pub allowed_prefixes: Vec<Vec<u8>>,
    /// `--force-rpath`.
    pub force_rpath: bool,
    /// `--print-needed`.
    pub print_needed: bool,
    /// `--add-needed`, in command-line order.
    pub add_needed: Vec<Vec<u8>>,
    /// `--remove-needed`, in command-line order.
    pub remove_needed: Vec<Vec<u8>>,
    /// `--replace-needed` pairs, in command-line order.
    pub replace_needed: Vec<(Vec<u8>, Vec<u8>)>,
    /// `--print-os-abi`.
    pub print_os_abi: bool,
    /// `--set-os-abi`, as the `EI_OSABI` value.
    pub set_os_abi: Option<u8>,
    /// `--print-execstack`.
    pub print_execstack: bool,
    /// `--set-execstack`.
    pub set_execstack: bool,
    /// `--clear-execstack`.
    pub clear_execstack: bool,
    /// `--no-default-lib`.
    pub no_default_lib: bool,
    /// `--add-debug-tag`.
    pub add_debug_tag: bool,
    /// `--clear-symbol-version`, in command-line order.
    pub clear_symbol_version: Vec<Vec<u8>>,
    /// The pairs of every `--rename-dynamic-symbols` map file, in order (None: no such option).
    pub rename_symbols: Option<elfpatch::symmap::Pairs>,
    /// `--page-size`, a power of two.
    pub page_size: Option<u64>,
    /// `--build-resolution-cache`: write the note after the other edits.
    pub build_resolution_cache: bool,
    /// `--output`.
    pub output: Option<PathBuf>,
    /// `--debug`.
    pub debug: bool,
    /// The input files, in command-line order.
    pub files: Vec<PathBuf>,
    /// Said on stderr before anything is done (an argument taken with another meaning).
    pub warnings: Vec<String>,
}

impl Args {
    /// Whether the command line asks for any change.
    pub fn edits_something(&self) -> bool {
        self.edits_run_path() || self.edits_other_than_run_path()
    }

    /// Whether the command line asks to change the run path.
    pub fn edits_run_path(&self) -> bool {
        self.set_rpath.is_some()
            || self.add_rpath.is_some()
            || self.remove_rpath
            || self.shrink_rpath
    }

    /// Whether the command line asks for a change other than of the run path.
    fn edits_other_than_run_path(&self) -> bool {
        self.set_interpreter.is_some()
            || self.set_soname.is_some()
            || !self.add_needed.is_empty()
            || !self.remove_needed.is_empty()
            || !self.replace_needed.is_empty()
            || !self.clear_symbol_version.is_empty()
            || self.rename_symbols.is_some()
            || self.build_resolution_cache
            || self.set_os_abi.is_some()
            || self.set_execstack
            || self.clear_execstack
            || self.no_default_lib
            || self.add_debug_tag
    }

    /// Whether the command line asks to change the dynamic array other than its run path and
    /// soname: the needed libraries, the flags, `DT_DEBUG`, the symbols.
    pub fn edits_dynamic_other_than_run_path(&self) -> bool {
        !self.add_needed.is_empty()
            || !self.remove_needed.is_empty()
            || !self.replace_needed.is_empty()
            || !self.clear_symbol_version.is_empty()
            || self.rename_symbols.is_some()
            || self.no_default_lib
            || self.add_debug_tag
    }

    /// The execstack edit asked for, if any (`check` refuses more than one of the three).
    pub fn execstack_edit(&self) -> Option<elfpatch::Edit> {
        if self.clear_execstack {
            Some(elfpatch::Edit::SetExecstack(false))
        } else if self.set_execstack {
            Some(elfpatch::Edit::SetExecstack(true))
        } else {
            None
        }
    }
}

/// patchelf's names for `EI_OSABI` values, as `--print-os-abi` prints them.
const OS_ABI_NAMES: [(u8, &str); 12] = [
    (0, "System V"),
    (1, "HP-UX"),
    (2, "NetBSD"),
    (3, "Linux"),
    (4, "GNU Hurd"),
    (6, "Solaris"),
    (7, "AIX"),
    (8, "IRIX"),
    (9, "FreeBSD"),
    (10, "Tru64"),
    (12, "OpenBSD"),
    (13, "OpenVMS"),
];

/// `EI_OSABI` as patchelf prints it: its name, or `0x%02X` for a value it has no name for.
pub fn os_abi_name(abi: u8) -> String {
    OS_ABI_NAMES
        .iter()
        .find(|(v, _)| *v == abi)
        .map_or_else(|| format!("0x{abi:02X}"), |(_, n)| (*n).to_string())
}

/// The `EI_OSABI` value of a name `--set-os-abi` takes: patchelf's names and aliases, ignoring
/// case and surrounding white space.
fn os_abi_code(name: &[u8]) -> Option<u8> {
    let name = String::from_utf8_lossy(name.trim_ascii()).to_ascii_lowercase();
    let aliases: [(&str, u8); 5] = [
        ("system-v", 0),
        ("sysv", 0),
        ("gnu", 3),
        ("gnu-hurd", 4),
        ("hurd", 4),
    ];
    OS_ABI_NAMES
        .iter()
        .find(|(_, n)| n.to_ascii_lowercase() == name)
        .map(|(v, _)| *v)
        .or_else(|| aliases.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
}

/// An option without arguments that sets one flag of [`Args`].
const fn flag(
    name: &'static str,
    help: &'static str,
    set: fn(&mut Args, Vec<Vec<u8>>) -> Result<(), String>,
) -> Opt {
    Opt {
        name,
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help,
        set,
    }
}

fn one(mut v: Vec<Vec<u8>>) -> Vec<u8> {
    v.swap_remove(0)
}

/// `--page-size`: patchelf takes any positive number (`atoi`) and uses it as the least alignment
/// of the segment it adds. A loader only maps power-of-two alignments (glibc: "ELF load command
/// alignment not page-aligned"; patchelf itself aborts on an assertion for a non-PIE program), so
/// a size that is not one is rounded up to the next power of two, with a warning.
pub fn page_size(arg: &[u8]) -> Result<(u64, Option<String>), String> {
    let text = String::from_utf8_lossy(arg);
    let n: u64 = text
        .parse()
        .map_err(|_| format!("--page-size: not a number: {text}"))?;
    if n == 0 {
        return Err("--page-size: must be positive".into());
    }
    if n.is_power_of_two() {
        return Ok((n, None));
    }
    let up = n
        .checked_next_power_of_two()
        .ok_or_else(|| format!("--page-size: {n} is too large"))?;
    Ok((
        up,
        Some(format!(
            "--page-size {n} is not a power of two, which no loader accepts as an alignment: using {up}"
        )),
    ))
}

fn version_as(args: &mut Args, _: Vec<Vec<u8>>) -> Result<(), String> {
    args.action = Some(Action::Version);
    Ok(())
}

fn help(args: &mut Args, _: Vec<Vec<u8>>) -> Result<(), String> {
    args.action = Some(Action::Help);
    Ok(())
}

const SHELLS: &[&str] = &["bash", "zsh", "fish"];

/// Every option, in the order `--help` lists them (patchelf's, then elfpatch's own).
pub const OPTIONS: &[Opt] = &[
    Opt {
        name: "--set-interpreter",
        aliases: &["--interpreter"],
        args: &["INTERPRETER"],
        complete: Complete::File,
        at_file: true,
        repeats: false,
        help: "set the program interpreter (PT_INTERP)",
        set: |a, v| {
            a.set_interpreter = Some(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--page-size",
        aliases: &[],
        args: &["SIZE"],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "least alignment of a segment added at the end (default: the file's largest p_align, at least 4096; rounded up to a power of two)",
        set: |a, v| {
            let (n, warning) = page_size(&v[0])?;
            a.page_size = Some(n);
            a.warnings.extend(warning);
            Ok(())
        },
    },
    Opt {
        name: "--print-interpreter",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print the program interpreter (PT_INTERP)",
        set: |a, _| {
            a.print_interpreter = true;
            Ok(())
        },
    },
    flag(
        "--print-os-abi",
        "print EI_OSABI by patchelf's names (System V, Linux, FreeBSD, ...; 0xNN for others)",
        |a, _| {
            a.print_os_abi = true;
            Ok(())
        },
    ),
    Opt {
        name: "--set-os-abi",
        aliases: &[],
        args: &["ABI"],
        complete: Complete::Text,
        at_file: true,
        repeats: false,
        help: "set EI_OSABI: patchelf's names, any case ('System V' or sysv, Linux or gnu, 'GNU Hurd' or hurd, HP-UX, NetBSD, Solaris, AIX, IRIX, FreeBSD, Tru64, OpenBSD, OpenVMS)",
        set: |a, v| {
            let abi = os_abi_code(&v[0]).ok_or_else(|| {
                format!(
                    "--set-os-abi: unrecognized OS ABI {:?}",
                    String::from_utf8_lossy(&v[0])
                )
            })?;
            a.set_os_abi = Some(abi);
            Ok(())
        },
    },
    Opt {
        name: "--print-soname",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print DT_SONAME (nothing, status 0, when there is none, as patchelf)",
        set: |a, _| {
            a.print_soname = true;
            Ok(())
        },
    },
    Opt {
        name: "--set-soname",
        aliases: &[],
        args: &["SONAME"],
        complete: Complete::Text,
        at_file: true,
        repeats: false,
        help: "set DT_SONAME (shared libraries only; ignored with a warning otherwise, as patchelf)",
        set: |a, v| {
            a.set_soname = Some(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--set-rpath",
        aliases: &[],
        args: &["RPATH"],
        complete: Complete::DirList,
        at_file: true,
        repeats: false,
        help: "set the run path (DT_RUNPATH; DT_RPATH with --force-rpath)",
        set: |a, v| {
            a.set_rpath = Some(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--add-rpath",
        aliases: &[],
        args: &["RPATH"],
        complete: Complete::DirList,
        at_file: true,
        repeats: false,
        help: "append RPATH to the run path",
        set: |a, v| {
            a.add_rpath = Some(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--remove-rpath",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "remove DT_RPATH and DT_RUNPATH",
        set: |a, _| {
            a.remove_rpath = true;
            Ok(())
        },
    },
    Opt {
        name: "--shrink-rpath",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "keep only the run path entries that hold a needed library",
        set: |a, _| {
            a.shrink_rpath = true;
            Ok(())
        },
    },
    Opt {
        name: "--allowed-rpath-prefixes",
        aliases: &[],
        args: &["PREFIXES"],
        complete: Complete::DirList,
        at_file: false,
        repeats: false,
        help: "with --shrink-rpath, drop entries starting with none of PREFIXES (colon-separated)",
        set: |a, v| {
            a.allowed_prefixes = v[0]
                .split(|&b| b == b':')
                .filter(|p| !p.is_empty())
                .map(<[u8]>::to_vec)
                .collect();
            Ok(())
        },
    },
    Opt {
        name: "--print-rpath",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print DT_RUNPATH, or DT_RPATH when there is no DT_RUNPATH",
        set: |a, _| {
            a.print_rpath = true;
            Ok(())
        },
    },
    Opt {
        name: "--force-rpath",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "write DT_RPATH rather than DT_RUNPATH",
        set: |a, _| {
            a.force_rpath = true;
            Ok(())
        },
    },
    Opt {
        name: "--build-resolution-cache",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "write the resolution-cache note (.note.nixos.ldcache) as patchelf 0.19.3 does, after the other edits",
        set: |a, _| {
            a.build_resolution_cache = true;
            Ok(())
        },
    },
    Opt {
        name: "--add-needed",
        aliases: &[],
        args: &["LIBRARY"],
        complete: Complete::Text,
        at_file: true,
        repeats: true,
        help: "add a DT_NEEDED entry (one already there is kept, not doubled)",
        set: |a, v| {
            a.add_needed.push(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--remove-needed",
        aliases: &[],
        args: &["LIBRARY"],
        complete: Complete::Text,
        at_file: true,
        repeats: true,
        help: "remove a DT_NEEDED entry and its symbol version requirements",
        set: |a, v| {
            a.remove_needed.push(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--replace-needed",
        aliases: &[],
        args: &["LIBRARY", "NEW_LIBRARY"],
        complete: Complete::Text,
        at_file: false,
        repeats: true,
        help: "rename a DT_NEEDED entry and its symbol version requirements",
        set: |a, mut v| {
            let new = v.pop().unwrap_or_default();
            let old = v.pop().unwrap_or_default();
            a.replace_needed.push((old, new));
            Ok(())
        },
    },
    Opt {
        name: "--clear-symbol-version",
        aliases: &[],
        args: &["SYMBOL"],
        complete: Complete::Text,
        at_file: true,
        repeats: true,
        help: "give the dynamic symbols named SYMBOL the global version in .gnu.version",
        set: |a, v| {
            a.clear_symbol_version.push(one(v));
            Ok(())
        },
    },
    Opt {
        name: "--rename-dynamic-symbols",
        aliases: &[],
        args: &["MAP_FILE"],
        complete: Complete::File,
        at_file: false,
        repeats: true,
        help: "rename dynamic symbols, defined and undefined: MAP_FILE has one `OLD NEW` pair per line (patchelf's format)",
        set: |a, v| {
            let file = PathBuf::from(OsString::from_vec(one(v)));
            let text = std::fs::read(&file)
                .map_err(|e| {
                    format!(
                        "cannot open map file {}: {}",
                        file.display(),
                        elfpatch::error::os_words(&e)
                    )
                })?;
            let map = a.rename_symbols.get_or_insert_with(Vec::new);
            elfpatch::symmap::parse_into(&text, map).map_err(|e| format!("{}:{e}", file.display()))
        },
    },
    Opt {
        name: "--print-needed",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print the DT_NEEDED entries",
        set: |a, _| {
            a.print_needed = true;
            Ok(())
        },
    },
    flag(
        "--no-default-lib",
        "set DF_1_NODEFLIB in DT_FLAGS_1 (adding DT_FLAGS_1 when absent): no search of the default directories",
        |a, _| {
            a.no_default_lib = true;
            Ok(())
        },
    ),
    flag(
        "--no-sort",
        "accepted for patchelf's sake: elfpatch never reorders program or section headers",
        |_, _| Ok(()),
    ),
    flag(
        "--add-debug-tag",
        "add a DT_DEBUG entry unless there is one",
        |a, _| {
            a.add_debug_tag = true;
            Ok(())
        },
    ),
    flag(
        "--print-execstack",
        "print 'execstack: X' (executable stack), 'execstack: -' (not) or 'execstack: ?' (no PT_GNU_STACK)",
        |a, _| {
            a.print_execstack = true;
            Ok(())
        },
    ),
    flag(
        "--clear-execstack",
        "clear PF_X in PT_GNU_STACK (adding a non-executable PT_GNU_STACK when absent)",
        |a, _| {
            a.clear_execstack = true;
            Ok(())
        },
    ),
    flag(
        "--set-execstack",
        "set PF_X in PT_GNU_STACK (adding one when absent)",
        |a, _| {
            a.set_execstack = true;
            Ok(())
        },
    ),
    flag(
        "--no-clobber-old-sections",
        "accepted for patchelf's sake: elfpatch zeroes only bytes it has proven nothing references (old strings, moved tables), never other sections' contents, so there is nothing more to keep",
        |_, _| Ok(()),
    ),
    Opt {
        name: "--output",
        aliases: &[],
        args: &["FILE"],
        complete: Complete::File,
        at_file: true,
        repeats: false,
        help: "write the result to FILE (one input only; symlinks followed, devices, FIFOs and hard links written through)",
        set: |a, v| {
            a.output = Some(PathBuf::from(OsString::from_vec(one(v))));
            Ok(())
        },
    },
    Opt {
        name: "--debug",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "say on stderr which program answers (elfpatch, whatever its name), each edit's layout, and what no loader cares about (section alignment); also when PATCHELF_DEBUG is set, as patchelf's debug output",
        set: |a, _| {
            a.debug = true;
            Ok(())
        },
    },
    Opt {
        name: "--help",
        aliases: &["-h"],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print this help",
        set: help,
    },
    Opt {
        name: "--version",
        aliases: &["-V"],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print the version: run as `patchelf`, exactly what patchelf 0.19.3 prints (`patchelf 0.19.3`, which its clients parse; --help and --debug say that elfpatch answered), else elfpatch's own",
        set: version_as,
    },
    Opt {
        name: "--generate-man",
        aliases: &[],
        args: &[],
        complete: Complete::Text,
        at_file: false,
        repeats: false,
        help: "print the man page (roff) and exit",
        set: |a, _| {
            a.action = Some(Action::Man);
            Ok(())
        },
    },
    Opt {
        name: "--generate-completion",
        aliases: &[],
        args: &["SHELL"],
        complete: Complete::Words(SHELLS),
        at_file: false,
        repeats: false,
        help: "print a completion script for SHELL (bash, zsh or fish) and exit",
        set: |a, v| {
            let shell = match v[0].as_slice() {
                b"bash" => Shell::Bash,
                b"zsh" => Shell::Zsh,
                b"fish" => Shell::Fish,
                other => {
                    return Err(format!(
                        "--generate-completion: unknown shell {} (bash, zsh or fish)",
                        String::from_utf8_lossy(other)
                    ))
                }
            };
            a.action = Some(Action::Completion(shell));
            Ok(())
        },
    },
];

/// Why the command line was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// A usage error ([`crate::exit::Exit::Usage`]).
    Usage(String),
    /// An `@FILE` argument whose file cannot be read ([`crate::exit::Exit::Io`], as any file
    /// that cannot be read).
    AtFile(String),
}

fn find(arg: &[u8]) -> Option<&'static Opt> {
    OPTIONS
        .iter()
        .find(|o| o.name.as_bytes() == arg || o.aliases.iter().any(|a| a.as_bytes() == arg))
}

/// patchelf's `resolveArgument`: `@FILE` stands for FILE's whole contents, as they are (a final
/// newline included); anything else is itself.
pub fn resolve_at(opt: &str, arg: Vec<u8>) -> Result<Vec<u8>, ParseError> {
    let Some(name) = arg.strip_prefix(b"@") else {
        return Ok(arg);
    };
    let path = PathBuf::from(OsString::from_vec(name.to_vec()));
    // patchelf's words ("getting info about 'FILE': No such file or directory"), which its own
    // tests look for: the system's description as strerror capitalises it, without Rust's
    // "(os error N)".
    std::fs::read(&path).map_err(|e| {
        let words = elfpatch::error::os_words(&e);
        let mut chars = words.chars();
        let words: String = chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        ParseError::AtFile(format!(
            "{opt} @{}: getting info about '{}': {words}",
            path.display(),
            path.display()
        ))
    })
}

/// Parses the arguments after the program name. `exists` tells whether a path names something
/// (an argument that looks like an option but is none is a file name only if there is one, as
/// patchelf takes every unknown argument as a file name).
pub fn parse_args(argv: Vec<OsString>, exists: impl Fn(&Path) -> bool) -> Result<Args, ParseError> {
    let mut a = Args::default();
    let mut it = argv.into_iter().map(OsString::into_vec);
    let mut only_files = false;
    while let Some(arg) = it.next() {
        if only_files {
            a.files.push(PathBuf::from(OsString::from_vec(arg)));
            continue;
        }
        if arg == b"--" {
            only_files = true;
            continue;
        }
        if let Some(opt) = find(&arg) {
            let mut values = Vec::with_capacity(opt.args.len());
            for _ in opt.args {
                let v = it.next().ok_or_else(|| {
                    ParseError::Usage(format!(
                        "{} needs {} argument{}: {}",
                        opt.name,
                        opt.args.len(),
                        if opt.args.len() > 1 { "s" } else { "" },
                        opt.args.join(" ")
                    ))
                })?;
                values.push(if opt.at_file {
                    resolve_at(opt.name, v)?
                } else {
                    v
                });
            }
            (opt.set)(&mut a, values).map_err(ParseError::Usage)?;
            if a.action.is_some() {
                // As patchelf: --help and --version act at once, whatever follows.
                return Ok(a);
            }
            continue;
        }
        let path = PathBuf::from(OsString::from_vec(arg));
        let dashed = path.as_os_str().len() > 1 && path.as_os_str().as_encoded_bytes()[0] == b'-';
        if dashed && !exists(&path) {
            return Err(ParseError::Usage(format!(
                "unknown option {} (and no file by that name)",
                path.display()
            )));
        }
        a.files.push(path);
    }
    check(&a)?;
    let said = modifier_warnings(&a);
    a.warnings.extend(said);
    Ok(a)
}

/// Options of which patchelf does only the first given, in this order.
type Exclusive = (&'static [(&'static str, fn(&Args) -> bool)], &'static str);

const EXCLUSIVE: [Exclusive; 2] = [
    (
        &[
            ("--shrink-rpath", |a| a.shrink_rpath),
            ("--remove-rpath", |a| a.remove_rpath),
            ("--set-rpath", |a| a.set_rpath.is_some()),
            ("--add-rpath", |a| a.add_rpath.is_some()),
        ],
        "each is a whole edit of the run path",
    ),
    (
        &[
            ("--print-execstack", |a| a.print_execstack),
            ("--clear-execstack", |a| a.clear_execstack),
            ("--set-execstack", |a| a.set_execstack),
        ],
        "patchelf reads or writes the stack flag once per run",
    ),
];

/// Options that only modify another one, said when that one is absent (patchelf ignores them).
pub fn modifier_warnings(a: &Args) -> Vec<String> {
    let mut w = Vec::new();
    if !a.allowed_prefixes.is_empty() && !a.shrink_rpath {
        w.push("--allowed-rpath-prefixes has no effect without --shrink-rpath".to_string());
    }
    if a.force_rpath && a.set_rpath.is_none() && a.add_rpath.is_none() && !a.shrink_rpath {
        w.push(
            "--force-rpath has no effect without --set-rpath, --add-rpath or --shrink-rpath"
                .to_string(),
        );
    }
    w
}

/// Combinations patchelf refuses, or that cannot mean anything.
fn check(a: &Args) -> Result<(), ParseError> {
    let usage = |m: &str| Err(ParseError::Usage(m.into()));
    if a.files.is_empty() {
        return usage("no input file");
    }
    if a.output.is_some() && a.files.len() != 1 {
        return usage("--output takes exactly one input file (patchelf refuses more too)");
    }
    if a.set_rpath.is_some() && a.add_rpath.is_some() {
        return usage("--set-rpath cannot be combined with --add-rpath (patchelf refuses it too)");
    }
    // patchelf does the first of each group and ignores the others without a word; a command
    // line that asks for two of them asks for something that will not happen.
    for (group, what) in EXCLUSIVE {
        let given: Vec<&str> = group
            .iter()
            .filter(|(_, on)| on(a))
            .map(|(n, _)| *n)
            .collect();
        if given.len() > 1 {
            return usage(&format!(
                "{} cannot be combined: {what} (patchelf would do {} alone)",
                given.join(" and "),
                given[0]
            ));
        }
    }
    if a.force_rpath && a.build_resolution_cache {
        return usage("--build-resolution-cache cannot be combined with --force-rpath");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, ParseError> {
        parse_args(args.iter().map(OsString::from).collect(), |p| {
            p == Path::new("-weird-but-there")
        })
    }

    #[test]
    fn names_are_unique_and_every_option_documents_itself() {
        let mut seen = std::collections::HashSet::new();
        for o in OPTIONS {
            for n in std::iter::once(&o.name).chain(o.aliases) {
                assert!(seen.insert(*n), "{n} defined twice");
                assert!(n.starts_with('-'), "{n}");
            }
            assert!(!o.help.is_empty(), "{}", o.name);
        }
    }

    #[test]
    fn options_take_their_arguments_and_the_rest_are_files() {
        let a = parse(&["--replace-needed", "a", "b", "x", "--add-needed", "c", "y"]).unwrap();
        assert_eq!(a.replace_needed, vec![(b"a".to_vec(), b"b".to_vec())]);
        assert_eq!(a.add_needed, vec![b"c".to_vec()]);
        assert_eq!(a.files, vec![PathBuf::from("x"), PathBuf::from("y")]);
        let a = parse(&["--interpreter", "/ld", "--", "--print-rpath", "f"]).unwrap();
        assert_eq!(a.set_interpreter.as_deref(), Some(&b"/ld"[..]));
        assert!(!a.print_rpath);
        assert_eq!(a.files.len(), 2);
    }

    #[test]
    fn unknown_dashed_arguments_are_files_only_when_they_exist() {
        assert!(matches!(parse(&["-X"]), Err(ParseError::Usage(m)) if m.contains("-X")));
        // -V is --version (patchelf takes it for a file name).
        assert_eq!(parse(&["-V"]).unwrap().action, Some(Action::Version));
        assert!(
            matches!(parse(&["--print-rpat", "f"]), Err(ParseError::Usage(m)) if m.contains("--print-rpat"))
        );
        assert_eq!(
            parse(&["-weird-but-there"]).unwrap().files,
            vec![PathBuf::from("-weird-but-there")]
        );
    }

    #[test]
    fn patchelfs_refused_combinations_are_refused() {
        for bad in [
            &["--output", "o", "a", "b"][..],
            &["--set-rpath", "/x", "--add-rpath", "/y", "f"],
            &["--shrink-rpath", "--set-rpath", "/x", "f"],
            &["--remove-rpath", "--shrink-rpath", "f"],
            &["--print-execstack", "--set-execstack", "f"],
            &["--clear-execstack", "--set-execstack", "f"],
            &["--print-rpath"],
            &["--set-rpath"],
            &["--replace-needed", "a"],
            &["--generate-completion", "tcsh"],
            &["--page-size", "0", "f"],
            &["--page-size", "12k", "f"],
        ] {
            assert!(matches!(parse(bad), Err(ParseError::Usage(_))), "{bad:?}");
        }
        // --help and --version stop the parse, as patchelf's do.
        assert_eq!(
            parse(&["--version", "-X"]).unwrap().action,
            Some(Action::Version)
        );
        assert_eq!(parse(&["-h"]).unwrap().action, Some(Action::Help));
    }

    #[test]
    fn page_sizes_round_up_to_a_power_of_two_with_a_warning() {
        assert_eq!(page_size(b"65536").unwrap(), (65536, None));
        let (n, w) = page_size(b"3000").unwrap();
        assert_eq!(n, 4096);
        assert!(w.unwrap().contains("3000"));
        assert!(page_size(b"-4096").is_err());
        assert!(page_size(b"18446744073709551615").is_err());
    }

    #[test]
    fn at_file_arguments_are_read_whole_only_where_patchelf_reads_them() {
        let d = std::env::temp_dir().join(format!("elfpatch-at-{}", std::process::id()));
        std::fs::write(&d, b"/from/file\n").unwrap();
        let at = format!("@{}", d.display());
        let a = parse(&["--set-rpath", &at, "--replace-needed", &at, &at, "f"]).unwrap();
        std::fs::remove_file(&d).unwrap();
        assert_eq!(a.set_rpath.as_deref(), Some(&b"/from/file\n"[..]));
        assert_eq!(a.replace_needed[0].0, at.as_bytes());
        match parse(&["--add-needed", "@/nonexistent/x", "f"]) {
            Err(ParseError::AtFile(m)) => assert!(m.contains("/nonexistent/x"), "{m}"),
            other => panic!("{other:?}"),
        }
        let with_at: Vec<&str> = OPTIONS
            .iter()
            .filter(|o| o.at_file)
            .map(|o| o.name)
            .collect();
        assert_eq!(
            with_at,
            [
                "--set-interpreter",
                "--set-os-abi",
                "--set-soname",
                "--set-rpath",
                "--add-rpath",
                "--add-needed",
                "--remove-needed",
                // patchelf passes it through resolveArgument too.
                "--clear-symbol-version",
                "--output"
            ]
        );
    }
}
