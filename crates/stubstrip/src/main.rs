//! `stubstrip`: replace CUDA stub directories in ELF run paths with the driver link.
//!
//! `main` only parses arguments into each subcommand's configuration and hands it over. Every
//! subcommand has the same shape: a pure core that decides and words the report, and a `run`
//! module, the thin I/O layer that reads, writes and prints.
//!
//! - [`fix`] and [`check`] apply the stub [`rule`] to the run paths of every file [`walk`] lists,
//!   reading them through [`elf_file`];
//! - [`fixup`] is what the setup hook runs: fix, check, audit, the check-time fallback and the
//!   check libraries for the consumers, with the hook's policy;
//! - [`explain`] and [`audit`] stand on the loader model of the `ldso-model` crate and share
//!   [`driver`].

mod audit;
mod census;
mod check;
mod classify;
mod driver;
mod elf_file;
mod elf_input;
mod explain;
mod fix;
mod fixup;
mod printout;
mod rule;
mod scan;
mod walk;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;
use thiserror::Error;

use audit::{AuditConfig, Severity};
use check::CheckConfig;
use explain::ExplainConfig;
use fix::FixConfig;
use fixup::{CheckLibsConfig, FixupConfig};
use ldso_model::settings::SettingsOverrides;
use rule::{Glob, RuleError, StubMatcher, StubRule};
use walk::Exclude;

/// Exit status: the command line cannot be used.
const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "stubstrip",
    version,
    about = "Replace CUDA stub library directories in ELF RUNPATH/RPATH with the driver link",
    after_help = "Exit status: 0 ok, 1 check found stub entries, 2 usage error, 3 some file could not be processed.\n\
                  Findings and reports go to stdout, diagnostics to stderr; with --json or --print-removed, \
                  stdout carries only that data and the report goes to stderr."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replace stub entries in the run paths of every ELF file under PATH...
    Fix(FixArgs),
    /// Change nothing; fail (exit 1) listing every stub entry that remains under PATH...
    Check(CheckArgs),
    /// What the setup hook runs: fix, check again from disk, audit, and print what the hook exports.
    #[command(after_help = FIXUP_HELP)]
    Fixup(FixupArgs),
    /// Show where the dynamic loader finds each library of FILE, without running it.
    #[command(
        after_help = "Exit status: 0 everything found, 1 a library is missing, cannot load or is a stub, \
                            3 FILE cannot be read."
    )]
    Explain(ExplainArgs),
    /// Report run path and dependency problems of every ELF file under PATH...
    #[command(
        after_help = "Exit status: 0 ok, 1 a finding at or above --deny, 3 some file could not be read.\n\
                            Findings go to stdout; with --json, stdout carries the report as JSON and the \
                            findings are in it."
    )]
    Audit(AuditArgs),
    /// Write the manual pages (stubstrip.1, stubstrip-SUBCOMMAND.1) into DIR (for packagers).
    #[command(hide = true)]
    GenerateMan {
        /// The directory to write them into (created if missing).
        dir: PathBuf,
    },
    /// Print the completion script for SHELL on stdout (for packagers).
    #[command(hide = true)]
    GenerateCompletion {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// What the help of every PATHS argument says about which files are read.
const PATHS_HELP: &str = "Files or directories. A named symlink is followed; symlinks met while \
walking a directory are not (find -H). Only loadable ELF objects are read: other files are ignored, \
and separate debug-info files, relocatable objects and core files are skipped (counted in the report).";

/// What the help of every --exclude says.
const EXCLUDE_HELP: &str = "Leave out files and directories whose path relative to the named \
directory, or whose name, matches GLOB (* also matches /; repeatable), e.g. '*.debug', 'lib/debug'.";

const FIXUP_HELP: &str = "\
Stdout (only on success) carries instructions for the hook, one per line:
  log MESSAGE        a line for the build log
  export NAME=VALUE  the hook runs: export -- \"NAME=VALUE\" (VALUE holds no newline)
Exit status: 0 ok, 1 a stub entry is left after the fix, 2 usage error, 3 the check could not read
some file, 4 an audit finding at or above --audit, 5 stdout could not be written, 6 the check
libraries for the consumers could not be written.
Files the fix cannot rewrite are tolerated as far as the check finds no stub entry in them.";

#[derive(Args)]
struct FixupArgs {
    /// The derivation's outputs: files or directories.
    #[arg(required = true, long_help = PATHS_HELP)]
    paths: Vec<PathBuf>,
    /// Leave out paths matching GLOB (relative path or name; repeatable).
    #[arg(long, value_name = "GLOB", long_help = EXCLUDE_HELP)]
    exclude: Vec<String>,
    /// The driver link used when no --driver-link is given (the hook's substituted default).
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver/lib")]
    default_driver_link: String,
    /// The directory that replaces the first stub entry (from stubstripFlags; overrides the default;
    /// absolute, normalised).
    #[arg(long, value_name = "DIR")]
    driver_link: Option<String>,
    /// A cuda_compat directory to put immediately before the driver link (Jetson; absolute, normalised).
    #[arg(long, value_name = "DIR")]
    compat: Option<String>,
    /// Also treat run path entries matching GLOB as stub directories, in the fix, the check and the audit (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    stub_patterns: Vec<String>,
    /// One line per changed run path, on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// Worker threads, at least 1 (default: all cores).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
    /// After the check, run `audit` and fail on findings at or above LEVEL: info, warning or error;
    /// any other non-empty value means error (stubstripAudit).
    #[arg(long, value_name = "LEVEL")]
    audit: Option<String>,
    /// Never put the removed stub directories on LD_LIBRARY_PATH (dontStubstripCheckFallback).
    #[arg(long)]
    no_check_fallback: bool,
    /// The LD_LIBRARY_PATH the check-time fallback appends to (default: the environment's).
    #[arg(long, value_name = "P")]
    ld_library_path: Option<OsString>,
    /// An output of the derivation (repeatable): the stub libraries its fixed files need go to its
    /// nix-support/stubstrip-check-libs, for the checks of the packages that depend on it.
    #[arg(long = "output", value_name = "DIR")]
    outputs: Vec<PathBuf>,
    /// The stubstripCheckHook store path to add to those outputs' propagated-build-inputs.
    #[arg(long, value_name = "PATH")]
    propagate_check_hook: Option<String>,
    /// Leave nothing for the consumers' checks (dontStubstripPropagateCheckFallback).
    #[arg(long)]
    no_propagate_check_fallback: bool,
    /// The Nix store directory (default: $NIX_STORE, else /nix/store): a stub whose store path an
    /// output references anyway is linked, not copied.
    #[arg(long, value_name = "DIR")]
    store_dir: Option<PathBuf>,
    /// Accepted for stubstripFlags written for `fix`: fixup always knows the removed directories.
    #[arg(long, hide = true)]
    print_removed: bool,
    /// Refused: stdout carries the instructions for the hook.
    #[arg(long, hide = true)]
    json: bool,
}

#[derive(Args)]
struct ExplainArgs {
    /// The program (or library) to explain.
    file: PathBuf,
    /// Show only these libraries; each is also looked up as if FILE called dlopen() on it.
    libnames: Vec<OsString>,
    /// A machine-readable report on stdout.
    #[arg(long)]
    json: bool,
    /// Resolve as if DIR were / (a sysroot, possibly of another architecture).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// LD_LIBRARY_PATH to assume (default: the environment's; none with --root).
    #[arg(long, value_name = "P")]
    ld_library_path: Option<OsString>,
    /// Value of $PLATFORM (default: what this machine's loader uses, else the architecture's usual one).
    #[arg(long, value_name = "X")]
    platform: Option<OsString>,
    /// The program interpreter to assume (default: FILE's PT_INTERP, else the architecture's usual one).
    #[arg(long, value_name = "PATH")]
    interpreter: Option<OsString>,
    /// Also treat directories matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    stub_patterns: Vec<String>,
    #[command(flatten)]
    model: ModelArgs,
}

/// Which glibc the loader model stands for.
#[derive(Clone, Copy, ValueEnum)]
enum Glibc {
    /// nixpkgs PR #535735's glibc, which reads the resolution-cache note (.note.nixos.ldcache)
    /// after LD_LIBRARY_PATH and before the run path.
    Patched,
    /// Upstream glibc, which ignores the note.
    Upstream,
}

/// How `explain` and `audit` model the loader.
#[derive(Args)]
struct ModelArgs {
    /// The glibc to model. The default is the patched one: a file carries the note only when
    /// built by a nixpkgs whose glibc reads it, and a note that pins a stub must show.
    #[arg(long, value_enum, value_name = "GLIBC", default_value = "patched")]
    glibc: Glibc,
    /// Do not follow the libraries loaded objects dlopen() (.note.dlopen, NVIDIA's libraries).
    #[arg(long)]
    no_dlopen: bool,
}

impl ModelArgs {
    fn overrides(&self) -> SettingsOverrides {
        SettingsOverrides {
            unpatched_glibc: matches!(self.glibc, Glibc::Upstream),
            no_dlopen: self.no_dlopen,
            ..SettingsOverrides::default()
        }
    }
}

/// The least severe finding that makes `audit` fail.
#[derive(Clone, Copy, ValueEnum)]
enum DenyLevel {
    Info,
    Warning,
    Error,
    Never,
}

#[derive(Args)]
struct AuditArgs {
    /// Files or directories.
    #[arg(required = true, long_help = PATHS_HELP)]
    paths: Vec<PathBuf>,
    /// Leave out paths matching GLOB (relative path or name; repeatable).
    #[arg(long, value_name = "GLOB", long_help = EXCLUDE_HELP)]
    exclude: Vec<String>,
    /// Print the table of finding codes (Markdown) and exit (no PATHS needed).
    #[arg(long, exclusive = true)]
    codes: bool,
    /// Exit 1 when a finding at or above LEVEL exists.
    #[arg(long, value_enum, value_name = "LEVEL", default_value = "error")]
    deny: DenyLevel,
    /// A machine-readable report on stdout.
    #[arg(long)]
    json: bool,
    /// Check run paths as if DIR were / (a sysroot or image; PATH... must lie inside it).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Also treat RUNPATH entries under DIR as build-directory leaks (besides /build, $NIX_BUILD_TOP, $TMPDIR; repeatable).
    #[arg(long = "build-dir", value_name = "DIR")]
    build_dirs: Vec<PathBuf>,
    /// Also treat run path entries matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    stub_patterns: Vec<String>,
    /// Worker threads, at least 1 (default: all cores).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Args)]
struct CommonArgs {
    /// Files or directories.
    #[arg(required = true, long_help = PATHS_HELP)]
    paths: Vec<PathBuf>,
    /// Leave out paths matching GLOB (relative path or name; repeatable).
    #[arg(long, value_name = "GLOB", long_help = EXCLUDE_HELP)]
    exclude: Vec<String>,
    /// Also treat run path entries matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    stub_patterns: Vec<String>,
    /// A machine-readable report on stdout (the report for people goes to stderr).
    #[arg(long)]
    json: bool,
    /// Worker threads, at least 1 (default: all cores).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Also one line per ELF file without a stub entry.
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Args)]
struct FixArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// One line per run path changed (files left as they were are not listed).
    #[arg(short, long)]
    verbose: bool,
    /// The directory that replaces the first stub entry (absolute, normalised).
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver/lib")]
    driver_link: String,
    /// A cuda_compat directory to put immediately before the driver link (Jetson; absolute, normalised).
    #[arg(long, value_name = "DIR")]
    compat: Option<String>,
    /// Print each removed stub directory once, one per line, on stdout.
    #[arg(long, conflicts_with = "json")]
    print_removed: bool,
}

/// Why a command line that clap accepted still cannot be used.
#[derive(Debug, Error)]
enum UsageError {
    /// The driver link or compat directory.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// `--propagate-check-hook` is written into a whitespace-separated file.
    #[error(
        "--propagate-check-hook must be one path without whitespace \
         (it is written into nix-support/propagated-build-inputs)"
    )]
    CheckHookPath,
    /// `fixup`'s stdout is the hook's.
    #[error(
        "--json cannot be used by the hook: stdout carries its instructions \
         (remove it from stubstripFlags)"
    )]
    FixupJson,
}

/// Prints a usage error after `prefix` and returns its exit status.
fn usage_error(prefix: &str, e: UsageError) -> ExitCode {
    eprintln!("{prefix}: {e}");
    ExitCode::from(EXIT_USAGE)
}

fn matcher_of(patterns: &[String]) -> StubMatcher {
    StubMatcher {
        patterns: patterns.iter().map(|p| Glob::new(p.as_bytes())).collect(),
    }
}

fn exclude_of(globs: &[String]) -> Exclude {
    Exclude(globs.iter().map(|g| Glob::new(g.as_bytes())).collect())
}

/// `--jobs`: a whole number, at least 1 (0 threads cannot do the work).
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (the number of worker threads)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("must be a whole number of worker threads, at least 1".into()),
    }
}

fn pool(jobs: Option<usize>) {
    if let Some(n) = jobs {
        // Only fails if a global pool exists already, which it cannot at this point.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global();
    }
}

fn run_fix(a: FixArgs) -> ExitCode {
    let rule = StubRule {
        driver_link: a.driver_link.into_bytes(),
        compat: a.compat.map(String::into_bytes),
        stubs: matcher_of(&a.common.stub_patterns),
    };
    if let Err(e) = rule.check() {
        return usage_error("stubstrip", e.into());
    }
    pool(a.common.jobs);
    ExitCode::from(fix::run::run(&FixConfig {
        exclude: exclude_of(&a.common.exclude),
        paths: a.common.paths,
        rule,
        verbose: a.verbose,
        json: a.common.json,
        print_removed: a.print_removed,
    }))
}

fn run_check(a: CheckArgs) -> ExitCode {
    pool(a.common.jobs);
    ExitCode::from(check::run::run(&CheckConfig {
        stubs: matcher_of(&a.common.stub_patterns),
        exclude: exclude_of(&a.common.exclude),
        paths: a.common.paths,
        verbose: a.verbose,
        json: a.common.json,
    }))
}
fn run_fixup(a: FixupArgs) -> ExitCode {
    const PREFIX: &str = "stubstrip fixup";
    if a.json {
        return usage_error(PREFIX, UsageError::FixupJson);
    }
    let _ = a.print_removed;
    let rule = StubRule {
        driver_link: a.driver_link.unwrap_or(a.default_driver_link).into_bytes(),
        compat: a.compat.map(String::into_bytes),
        stubs: matcher_of(&a.stub_patterns),
    };
    if let Err(e) = rule.check() {
        return usage_error(PREFIX, e.into());
    }
    if let Some(h) = &a.propagate_check_hook {
        if h.is_empty() || h.contains(char::is_whitespace) {
            return usage_error(PREFIX, UsageError::CheckHookPath);
        }
    }
    let check_libs =
        (!a.no_propagate_check_fallback && !a.outputs.is_empty()).then(|| CheckLibsConfig {
            outputs: a.outputs,
            check_hook: a.propagate_check_hook,
            store_dir: a
                .store_dir
                .or_else(|| std::env::var_os("NIX_STORE").map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from("/nix/store")),
        });
    pool(a.jobs);
    ExitCode::from(fixup::run::run(&FixupConfig {
        exclude: exclude_of(&a.exclude),
        paths: a.paths,
        rule,
        verbose: a.verbose,
        audit: a.audit.as_deref().and_then(fixup::audit_level),
        check_fallback: !a.no_check_fallback,
        ld_library_path: a
            .ld_library_path
            .or_else(|| std::env::var_os("LD_LIBRARY_PATH"))
            .map(OsString::into_vec)
            .unwrap_or_default(),
        check_libs,
    }))
}

fn run_explain(a: ExplainArgs) -> ExitCode {
    ExitCode::from(explain::run::run(&ExplainConfig {
        file: a.file,
        libnames: a.libnames.into_iter().map(OsString::into_vec).collect(),
        json: a.json,
        root: a.root,
        overrides: SettingsOverrides {
            ld_library_path: a.ld_library_path.map(OsString::into_vec),
            platform: a.platform.map(OsString::into_vec),
            interpreter: a.interpreter.map(OsString::into_vec),
            use_environment: true,
            ..a.model.overrides()
        },
        stubs: matcher_of(&a.stub_patterns),
    }))
}

fn run_audit(a: AuditArgs) -> ExitCode {
    if a.codes {
        print!("{}", audit::rules::codes_table());
        return ExitCode::SUCCESS;
    }
    pool(a.jobs);
    ExitCode::from(audit::run::run(&AuditConfig {
        exclude: exclude_of(&a.exclude),
        paths: a.paths,
        deny: match a.deny {
            DenyLevel::Info => Some(Severity::Info),
            DenyLevel::Warning => Some(Severity::Warning),
            DenyLevel::Error => Some(Severity::Error),
            DenyLevel::Never => None,
        },
        json: a.json,
        build_dirs: a.build_dirs,
        stubs: matcher_of(&a.stub_patterns),
        root: a.root,
        model: a.model.overrides(),
    }))
}

/// The manual pages or a completion script, from the same definitions as the parser: what
/// packages install (nix/package.nix), never hand-written copies that drift.
fn generate(man_dir: Option<PathBuf>, shell: Option<Shell>) -> ExitCode {
    let mut cmd = Cli::command();
    if let Some(dir) = man_dir {
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| clap_mangen::generate_to(cmd.clone(), &dir));
        if let Err(e) = made {
            eprintln!(
                "stubstrip: cannot write the manual pages to {}: {e}",
                dir.display()
            );
            return ExitCode::from(EXIT_FILE_ERRORS);
        }
    }
    if let Some(shell) = shell {
        let name = cmd.get_name().to_string();
        clap_complete::generate(shell, &mut cmd, name, &mut std::io::stdout());
    }
    ExitCode::SUCCESS
}

/// Exit status: a file could not be written.
const EXIT_FILE_ERRORS: u8 = 3;

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Fix(a) => run_fix(a),
        Command::Check(a) => run_check(a),
        Command::Fixup(a) => run_fixup(a),
        Command::Explain(a) => run_explain(a),
        Command::Audit(a) => run_audit(a),
        Command::GenerateMan { dir } => generate(Some(dir), None),
        Command::GenerateCompletion { shell } => generate(None, Some(shell)),
    }
}
