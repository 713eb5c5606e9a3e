//! `stubstrip`: replace CUDA stub directories in ELF run paths with the driver link.
//!
//! `main` only parses arguments and wires the pieces: [`classify`] decides, [`walk`] finds files,
//! [`fix`] reads and edits one file, [`report`] says what happened.

mod classify;
mod fix;
mod report;
mod walk;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rayon::prelude::*;

use classify::{Glob, Rule, StubMatcher};

/// Exit status: a `check` found stub entries.
const EXIT_CHECK_FAILED: u8 = 1;
/// Exit status: some file could not be processed (named on stderr; left unchanged).
const EXIT_FILE_ERRORS: u8 = 3;

#[derive(Parser)]
#[command(
    name = "stubstrip",
    version,
    about = "Replace CUDA stub library directories in ELF RUNPATH/RPATH with the driver link",
    after_help = "Exit status: 0 ok, 1 check found stub entries, 2 usage error, 3 some file could not be processed.\n\
                  Human-readable lines go to stderr; --json and --print-removed write to stdout."
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
    Check(CommonArgs),
}

#[derive(Args)]
struct CommonArgs {
    /// Files or directories (walked recursively; symlinks are never followed).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Also treat run path entries matching GLOB as stub directories (repeatable).
    #[arg(long = "stub-pattern", value_name = "GLOB")]
    stub_patterns: Vec<String>,
    /// One line per file on stderr.
    #[arg(short, long)]
    verbose: bool,
    /// A machine-readable report on stdout.
    #[arg(long)]
    json: bool,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

#[derive(Args)]
struct FixArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The directory that replaces the first stub entry.
    #[arg(long, value_name = "DIR", default_value = "/run/opengl-driver/lib")]
    driver_link: String,
    /// A cuda_compat directory to put immediately before the driver link (Jetson).
    #[arg(long, value_name = "DIR")]
    compat: Option<String>,
    /// Print each removed stub directory once, one per line, on stdout.
    #[arg(long, conflicts_with = "json")]
    print_removed: bool,
}

fn matcher(c: &CommonArgs) -> StubMatcher {
    StubMatcher {
        patterns: c
            .stub_patterns
            .iter()
            .map(|p| Glob::new(p.as_bytes()))
            .collect(),
    }
}

fn pool(jobs: Option<usize>) {
    if let Some(n) = jobs {
        // Only fails if a global pool exists already, which it cannot at this point.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global();
    }
}

fn run_fix(a: FixArgs) -> ExitCode {
    let rule = Rule {
        driver_link: a.driver_link.into_bytes(),
        compat: a.compat.map(String::into_bytes),
        stubs: matcher(&a.common),
    };
    if let Err(msg) = rule.check() {
        eprintln!("stubstrip: {msg}");
        return ExitCode::from(2);
    }
    pool(a.common.jobs);
    let (files, walk_errors) = walk::regular_files(&a.common.paths);
    let results: Vec<(PathBuf, fix::Outcome)> = files
        .into_par_iter()
        .map(|p| {
            let o = fix::fix(&p, &rule);
            (p, o)
        })
        .collect();
    let r = report::FixReport::new(&rule, &results, &walk_errors);
    r.print(a.common.verbose, a.common.json, a.print_removed);
    if r.failed() {
        ExitCode::from(EXIT_FILE_ERRORS)
    } else {
        ExitCode::SUCCESS
    }
}

fn run_check(a: CommonArgs) -> ExitCode {
    let rule = Rule {
        driver_link: b"/run/opengl-driver/lib".to_vec(),
        compat: None,
        stubs: matcher(&a),
    };
    pool(a.jobs);
    let (files, walk_errors) = walk::regular_files(&a.paths);
    let results: Vec<_> = files
        .into_par_iter()
        .map(|p| {
            let o = fix::stubs_left(&p, &rule);
            (p, o)
        })
        .collect();
    let r = report::CheckReport::new(&results, &walk_errors);
    r.print(a.verbose, a.json);
    if r.stub_entries() > 0 {
        ExitCode::from(EXIT_CHECK_FAILED)
    } else if r.failed() {
        ExitCode::from(EXIT_FILE_ERRORS)
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Fix(a) => run_fix(a),
        Command::Check(a) => run_check(a),
    }
}
