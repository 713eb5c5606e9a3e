//! The command line: clap's definitions, the help texts (their exit statuses from
//! [`crate::exit`]), and clap's errors as one line in the shape of every other message.
//!
//! `--help`, the manual page ([`crate::docs`]) and the shell completions are all written from
//! these definitions, so they cannot drift apart.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::audit::Severity;
use crate::exit;

/// What the top-level help says about where output goes.
pub const STREAMS: &str = "Findings and reports go to stdout, diagnostics to stderr. A line about \
one file starts with the file (FILE: RUNPATH entry DIR), a line about the whole run with the \
program's name; every line on stderr starts with the program's name (then the file, where there \
is one). With --json or --print-removed, stdout carries only that data and the report goes to \
stderr. A closed stdout ends a command quietly, with its own status.";

/// What the top-level help says about which subcommand to use as a build gate.
pub const GATES: &str = "As a build gate: `check` on the outputs (no stub entry left; what the \
setup hook does) and `audit` for run path mistakes; `explain --assume-driver` on a program where \
the driver is not installed (a builder, CI: a driver library the driver link provides counts as \
found); plain `explain` where the program runs (it must find the driver here).";

/// The parser, with `bin_name` as the name usage lines and errors show, and the after-helps
/// built from [`exit`]'s tables, [`STREAMS`] and each subcommand's own text.
pub fn command(bin_name: &str) -> clap::Command {
    let mut cmd = Cli::command()
        .bin_name(bin_name.to_string())
        .after_help(format!("{}\n{STREAMS}\n\n{GATES}", exit::help_table()));
    for (name, before, after) in AFTER_HELP {
        let text = [*before, &exit::subcommand_help(name), *after]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        cmd = cmd.mut_subcommand(name, |s| s.after_help(text));
    }
    cmd
}

/// What each subcommand's help says before and after its exit statuses.
const AFTER_HELP: &[(&str, &str, &str)] = &[
    ("fix", "", ""),
    ("check", "", ""),
    ("fixup", FIXUP_HELP, ""),
    ("explain", "", EXPLAIN_GATES),
    ("audit", "", AUDIT_STREAMS),
    ("driver-link", DRIVER_LINK_HELP, ""),
];

/// What `explain --help` says about build gates.
const EXPLAIN_GATES: &str = "As a build gate: `check` (no stub entry left) and `audit` (run path \
mistakes) on the outputs; `explain --assume-driver` on a program, where the driver is not \
installed (a builder, CI); plain `explain` where it runs.";

/// What `audit --help` says about where output goes.
const AUDIT_STREAMS: &str = "Findings go to stdout; with --json, stdout carries the report as \
JSON and the findings are in it.";

/// The shells whose completion scripts `--generate-completion` writes: the same three as
/// elfpatch's, each checked by the `manpages` suite in its own shell. (The variants carry no doc
/// comment: clap would show it as each value's help, `bash: bash`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

impl CompletionShell {
    /// clap_complete's name for it.
    pub fn shell(self) -> clap_complete::Shell {
        match self {
            CompletionShell::Bash => clap_complete::Shell::Bash,
            CompletionShell::Zsh => clap_complete::Shell::Zsh,
            CompletionShell::Fish => clap_complete::Shell::Fish,
        }
    }
}

/// The top level: a subcommand, or one of the packagers' options.
#[derive(Parser)]
#[command(
    name = "stubstrip",
    version,
    about = "Replace CUDA stub library directories in ELF RUNPATH/RPATH with the driver link",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Print the man page (roff) and exit.
    #[arg(long, exclusive = true)]
    pub generate_man: bool,
    /// Print a completion script for SHELL (bash, zsh or fish) and exit.
    #[arg(long, value_enum, value_name = "SHELL", exclusive = true)]
    pub generate_completion: Option<CompletionShell>,
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Replace stub entries in the run paths of every ELF file under PATH...
    Fix(FixArgs),
    /// Change nothing; fail (exit 1) listing every stub entry that remains under PATH...
    Check(CheckArgs),
    /// What the setup hook runs: fix, check again from disk, audit, and print what the hook exports.
    Fixup(FixupArgs),
    /// Which driver library (libcuda.so.1, ...) each object of FILE gets, and why; with -v, where
    /// the dynamic loader finds every library. Without running FILE.
    Explain(ExplainArgs),
    /// Report run path and dependency problems of every ELF file under PATH...
    Audit(AuditArgs),
    /// On a machine that is not NixOS: make the driver link (/run/opengl-driver/lib) from the
    /// running NVIDIA driver, which fixed programs look in for libcuda.so.1.
    #[command(name = "driver-link")]
    DriverLink(DriverLinkArgs),
}

const DRIVER_LINK_HELP: &str = "\
Finds the driver the machine runs (the kernel module's version in /proc/driver/nvidia/version; \
its libraries through the host's ld.so.cache, /usr/lib/x86_64-linux-gnu, /usr/lib64, /usr/lib, \
/usr/local/nvidia/lib64 and the like; WSL2's /usr/lib/wsl/lib; Jetson's tegra directory) and \
links each of its libraries into the driver link under its SONAME (libcuda.so.1, \
libnvidia-ml.so.1, ...), libcuda also as libcuda.so (Triton links -lcuda when a program runs); \
32-bit libraries into the 32-bit driver link. Only links it made itself are replaced or removed: \
symlinks named like the library they point to by an absolute path. Run it again after a driver \
upgrade.";

/// What the help of every PATH argument says about which files are read.
const PATHS_HELP: &str = "Files or directories. A named symlink is followed; symlinks met while \
walking a directory are not (find -H). Only loadable ELF objects are read: other files are ignored, \
and separate debug-info files, relocatable objects and core files are skipped (counted in the report).";

/// What the help of every --exclude says.
const EXCLUDE_HELP: &str = "Leave out files and directories whose path relative to the named \
directory, or whose name, matches GLOB (* also matches /; repeatable), e.g. '*.debug', 'lib/debug'.";

const FIXUP_HELP: &str = "\
Stdout (only on success) carries instructions for the hook, one per line: `log MESSAGE` (a line \
for the build log) and `export NAME=VALUE` (the hook runs export -- \"NAME=VALUE\"; VALUE holds no \
newline). Files the fix cannot rewrite are tolerated as far as the check finds no stub entry in \
them.";

/// `fixup --audit`: the least severe finding that fails the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AuditLevel {
    /// Fail on every finding.
    Info,
    /// Fail on warnings and errors.
    Warning,
    /// Fail on errors only.
    Error,
}

impl AuditLevel {
    /// The severity it stands for.
    pub fn severity(self) -> Severity {
        match self {
            AuditLevel::Info => Severity::Info,
            AuditLevel::Warning => Severity::Warning,
            AuditLevel::Error => Severity::Error,
        }
    }
}

/// `stubstrip fixup`.
#[derive(Args)]
pub struct FixupArgs {
    /// The derivation's outputs: files or directories.
    #[arg(required = true, value_name = "PATH", long_help = PATHS_HELP)]
    pub paths: Vec<PathBuf>,
    /// Leave out paths matching GLOB (relative path or name; repeatable).
    #[arg(long, value_name = "GLOB", long_help = EXCLUDE_HELP)]
    pub exclude: Vec<String>,
    /// The driver link used when no --driver-link is given (the hook's substituted default).
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver/lib")]
    pub default_driver_link: String,
    /// The directory that replaces the first stub entry (from stubstripFlags; overrides the default;
    /// absolute, normalised).
    #[arg(long, value_name = "DIR")]
    pub driver_link: Option<String>,
    /// A cuda_compat directory to put immediately before the driver link (Jetson; absolute, normalised).
    #[arg(long, value_name = "DIR")]
    pub compat: Option<String>,
    /// Also treat run path entries matching GLOB as stub directories, in the fix, the check and the audit (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    pub stub_patterns: Vec<String>,
    /// One line per changed run path, on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// Worker threads, at least 1 (default: all cores).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// After the check, run `audit` and fail on findings at or above LEVEL (stubstripAudit; the
    /// hook passes `error` for any value other than info or warning).
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub audit: Option<AuditLevel>,
    /// Never put the removed stub directories on LD_LIBRARY_PATH (dontStubstripCheckFallback).
    #[arg(long)]
    pub no_check_fallback: bool,
    /// The LD_LIBRARY_PATH the check-time fallback appends to (default: the environment's).
    #[arg(long, value_name = "P")]
    pub ld_library_path: Option<OsString>,
    /// An output of the derivation (repeatable): the stub libraries its fixed files need go to its
    /// nix-support/stubstrip-check-libs, for the checks of the packages that depend on it.
    #[arg(long = "output", value_name = "DIR")]
    pub outputs: Vec<PathBuf>,
    /// The stubstripCheckHook store path to add to those outputs' propagated-build-inputs.
    #[arg(long, value_name = "PATH")]
    pub propagate_check_hook: Option<String>,
    /// Leave nothing for the consumers' checks (dontStubstripPropagateCheckFallback).
    #[arg(long)]
    pub no_propagate_check_fallback: bool,
    /// The Nix store directory (default: $NIX_STORE, else /nix/store): a stub whose store path an
    /// output references anyway is linked, not copied.
    #[arg(long, value_name = "DIR")]
    pub store_dir: Option<PathBuf>,
    /// Accepted for stubstripFlags written for `fix`: fixup always knows the removed directories.
    #[arg(long, hide = true)]
    pub print_removed: bool,
    /// Refused: stdout carries the instructions for the hook.
    #[arg(long, hide = true)]
    pub json: bool,
}

/// `stubstrip explain`.
#[derive(Args)]
pub struct ExplainArgs {
    /// The program (or library) to explain.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Show only these libraries; each is also looked up as if FILE called dlopen() on it.
    #[arg(value_name = "LIBNAME")]
    pub libnames: Vec<OsString>,
    /// Also the loader's settings and every lookup, as a tree of who loads what.
    #[arg(short, long)]
    pub verbose: bool,
    /// Also where each dlopen() is known from (the object's .note.dlopen, or the source of
    /// stubstrip's NVIDIA table entry).
    #[arg(long)]
    pub why: bool,
    /// A machine-readable report on stdout (everything -v and --why show).
    #[arg(long)]
    pub json: bool,
    /// Resolve as if DIR were / (a sysroot, possibly of another architecture).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// LD_LIBRARY_PATH to assume (default: the environment's; none with --root).
    #[arg(long, value_name = "P")]
    pub ld_library_path: Option<OsString>,
    /// Value of $PLATFORM (default: what this machine's loader uses, else the architecture's usual one).
    #[arg(long, value_name = "X")]
    pub platform: Option<OsString>,
    /// The program interpreter to assume (default: FILE's PT_INTERP, else the architecture's usual one).
    #[arg(long, value_name = "PATH")]
    pub interpreter: Option<OsString>,
    /// Also treat directories matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    pub stub_patterns: Vec<String>,
    /// Answer "will it load where the driver is provided?" (a build gate on a machine without
    /// the driver): a driver library (libcuda.so.1, ...) missing here but searched for in the
    /// driver link counts as found there. Without it explain answers "will it load here?".
    #[arg(long)]
    pub assume_driver: bool,
    /// How to model the loader.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Which glibc the loader model stands for.
#[derive(Clone, Copy, ValueEnum)]
pub enum Glibc {
    /// nixpkgs PR #535735's glibc, which reads the resolution-cache note (.note.nixos.ldcache)
    /// after LD_LIBRARY_PATH and before the run path.
    Patched,
    /// Upstream glibc, which ignores the note.
    Upstream,
}

/// How `explain` and `audit` model the loader.
#[derive(Args)]
pub struct ModelArgs {
    /// The glibc to model. The default is the patched one: a file carries the note only when
    /// built by a nixpkgs whose glibc reads it, and a note that pins a stub must show.
    #[arg(long, value_enum, value_name = "GLIBC", default_value = "patched")]
    pub glibc: Glibc,
    /// Do not follow the libraries loaded objects dlopen() (.note.dlopen, NVIDIA's libraries).
    #[arg(long)]
    pub no_dlopen: bool,
}

/// The least severe finding that makes `audit` fail.
#[derive(Clone, Copy, ValueEnum)]
pub enum DenyLevel {
    /// Every finding.
    Info,
    /// Warnings and errors.
    Warning,
    /// Errors only.
    Error,
    /// None: report only.
    Never,
}

impl DenyLevel {
    /// The least severe finding that fails, if any.
    pub fn severity(self) -> Option<Severity> {
        match self {
            DenyLevel::Info => Some(Severity::Info),
            DenyLevel::Warning => Some(Severity::Warning),
            DenyLevel::Error => Some(Severity::Error),
            DenyLevel::Never => None,
        }
    }
}

/// `stubstrip audit`.
#[derive(Args)]
pub struct AuditArgs {
    /// Files or directories.
    #[arg(required = true, value_name = "PATH", long_help = PATHS_HELP)]
    pub paths: Vec<PathBuf>,
    /// Leave out paths matching GLOB (relative path or name; repeatable).
    #[arg(long, value_name = "GLOB", long_help = EXCLUDE_HELP)]
    pub exclude: Vec<String>,
    /// Print the table of finding codes (Markdown) and exit (no PATH needed).
    #[arg(long, exclusive = true)]
    pub codes: bool,
    /// Exit 1 when a finding at or above LEVEL exists.
    #[arg(long, value_enum, value_name = "LEVEL", default_value = "error")]
    pub deny: DenyLevel,
    /// A machine-readable report on stdout.
    #[arg(long)]
    pub json: bool,
    /// Check run paths as if DIR were / (a sysroot or image; PATH... must lie inside it).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Also treat RUNPATH entries under DIR as build-directory leaks (besides /build, $NIX_BUILD_TOP, $TMPDIR; repeatable).
    #[arg(long = "build-dir", value_name = "DIR")]
    pub build_dirs: Vec<PathBuf>,
    /// Also treat run path entries matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    pub stub_patterns: Vec<String>,
    /// Worker threads, at least 1 (default: all cores).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// How to model the loader.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `stubstrip driver-link`.
#[derive(Args)]
pub struct DriverLinkArgs {
    /// The driver link for 64-bit libraries (absolute, normalised).
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver/lib")]
    pub driver_link: String,
    /// The driver link for 32-bit libraries (absolute, normalised).
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver-32/lib")]
    pub driver_link_32: String,
    /// Work on the system under DIR as if it were / (an image, a chroot, a test tree): the driver
    /// is looked for, and the links made, inside it.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also write /etc/tmpfiles.d/stubstrip-driver-link.conf, so that systemd-tmpfiles makes the
    /// links again at boot (/run is emptied then); without systemd, say what to do instead.
    #[arg(long, conflicts_with = "remove")]
    pub persist: bool,
    /// Undo: remove the links this command made, the driver links when nothing else is in them,
    /// and its tmpfiles entry.
    #[arg(long)]
    pub remove: bool,
}

/// What `fix` and `check` share.
#[derive(Args)]
pub struct CommonArgs {
    /// Files or directories.
    #[arg(required = true, value_name = "PATH", long_help = PATHS_HELP)]
    pub paths: Vec<PathBuf>,
    /// Leave out paths matching GLOB (relative path or name; repeatable).
    #[arg(long, value_name = "GLOB", long_help = EXCLUDE_HELP)]
    pub exclude: Vec<String>,
    /// Also treat run path entries matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    pub stub_patterns: Vec<String>,
    /// A machine-readable report on stdout (the report for people goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Worker threads, at least 1 (default: all cores).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<usize>,
}

/// `stubstrip check`.
#[derive(Args)]
pub struct CheckArgs {
    /// What `fix` and `check` share.
    #[command(flatten)]
    pub common: CommonArgs,
    /// Also one line per ELF file without a stub entry.
    #[arg(short, long)]
    pub verbose: bool,
}

/// `stubstrip fix`.
#[derive(Args)]
pub struct FixArgs {
    /// What `fix` and `check` share.
    #[command(flatten)]
    pub common: CommonArgs,
    /// One line per run path changed (files left as they were are not listed).
    #[arg(short, long)]
    pub verbose: bool,
    /// The directory that replaces the first stub entry (absolute, normalised).
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver/lib")]
    pub driver_link: String,
    /// A cuda_compat directory to put immediately before the driver link (Jetson; absolute, normalised).
    #[arg(long, value_name = "DIR")]
    pub compat: Option<String>,
    /// Print each removed stub directory once, one per line, on stdout.
    #[arg(long, conflicts_with = "json")]
    pub print_removed: bool,
}

/// `--jobs`: a whole number, at least 1 (0 threads cannot do the work).
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (the number of worker threads)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("must be a whole number of worker threads, at least 1".into()),
    }
}

/// The subcommand a command line names: its first word that is not an option, when that is a
/// subcommand's name.
pub fn subcommand_of(args: &[OsString]) -> Option<String> {
    let word = args
        .iter()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'))?;
    let word = word.to_str()?;
    Cli::command()
        .get_subcommands()
        .any(|s| s.get_name() == word)
        .then(|| word.to_string())
}

/// clap's error as rendered (`error: what`, context lines, a usage line, a pointer to --help)
/// made one line: `PROG: what; context (see PROG SUBCOMMAND --help)`.
pub fn one_line_error(rendered: &str, prog: &str, subcommand: Option<&str>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.starts_with("Usage:") {
            break;
        }
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        let line = line
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .unwrap_or(line);
        match parts.last_mut() {
            // "the following required arguments were not provided:" and the list under it.
            Some(last) if last.ends_with(':') => {
                last.push(' ');
                last.push_str(line);
            }
            _ => parts.push(line.to_string()),
        }
    }
    let see = match subcommand {
        Some(sub) => format!("{prog} {sub}"),
        None => prog.to_string(),
    };
    format!("{prog}: {} (see {see} --help)", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(args: &[&str]) -> String {
        let e = match command("foo").try_get_matches_from(args) {
            Err(e) => e,
            Ok(_) => panic!("{args:?} parsed"),
        };
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let sub = subcommand_of(&args);
        one_line_error(&e.render().to_string(), "foo", sub.as_deref())
    }

    #[test]
    fn clap_errors_become_one_line_naming_the_program_and_where_to_look() {
        assert_eq!(
            error_of(&["foo", "fix", "--jobs", "0", "d"]),
            "foo: invalid value '0' for '--jobs <N>': must be at least 1 (the number of worker \
             threads) (see foo fix --help)"
        );
        assert_eq!(
            error_of(&["foo", "fixup", "--audit", "bogus", "d"]),
            "foo: invalid value 'bogus' for '--audit <LEVEL>'; possible values: info, warning, \
             error (see foo fixup --help)"
        );
        let e = error_of(&["foo", "audit"]);
        assert_eq!(
            e,
            "foo: the following required arguments were not provided: <PATH>... \
             (see foo audit --help)"
        );
        let e = error_of(&["foo", "check", "--bogus", "d"]);
        assert!(
            e.starts_with("foo: unexpected argument '--bogus' found")
                && e.ends_with(" (see foo check --help)")
                && !e.contains('\n'),
            "{e}"
        );
        let e = error_of(&["foo", "bogus"]);
        assert!(
            e.starts_with("foo: unrecognized subcommand 'bogus'")
                && e.ends_with("(see foo --help)"),
            "{e}"
        );
    }

    #[test]
    fn the_help_carries_the_exit_statuses_and_the_packagers_options() {
        let help = command("stubstrip").render_long_help().to_string();
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for e in crate::exit::Exit::ALL {
            assert!(
                flat.contains(&format!(" {} {}", e.code(), e.meaning())),
                "{help}"
            );
        }
        assert!(help.contains("--generate-man"), "{help}");
        assert!(help.contains("--generate-completion <SHELL>"), "{help}");
        assert!(help.contains("-V, --version"), "{help}");
    }

    #[test]
    fn every_subcommand_says_its_exit_statuses() {
        let cmd = command("stubstrip");
        let mut names = Vec::new();
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            let after = sub.get_after_help().map(|a| a.to_string());
            let line = crate::exit::subcommand_help(name);
            assert!(after.is_some_and(|a| a.contains(&line)), "{name}");
            names.push(name);
        }
        let mut listed: Vec<&str> = crate::exit::SUBCOMMANDS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        listed.sort_unstable();
        assert_eq!(names, listed);
    }

    #[test]
    fn the_definitions_hold_together() {
        command("stubstrip").debug_assert();
    }
}
