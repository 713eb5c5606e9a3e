//! `stubstrip`: replace CUDA stub directories in ELF run paths with the driver link.
//!
//! `main` only parses arguments ([`cli`]) into each subcommand's configuration and hands it
//! over; [`docs`] writes the manual page and the completions from the same definitions, and
//! [`exit`] is the one type of exit status, whose table the help and the page print. Every
//! subcommand has the same shape: a pure core that decides and words the report, and a `run`
//! module, the thin I/O layer that reads, writes and prints.
//!
//! - [`fix`] and [`check`] apply the stub [`rule`] to the run paths of every file [`walk`] lists,
//!   reading them through [`elf_file`];
//! - [`fixup`] is what the setup hook runs: fix, check, audit, the check-time fallback and the
//!   check libraries for the consumers, with the hook's policy;
//! - [`explain`] and [`audit`] stand on the loader model of the `ldso-model` crate and share
//!   [`driver`];
//! - [`driver_link`] makes the driver link from the running driver on a machine that is not
//!   NixOS.
//!
//! What several subcommands know lives outside all of them, so that none imports another's
//! internals: [`stubs`] (where a library's stub directory is, a stub entry in raw bytes, how a
//! note's entry reads), [`driver`], [`printout`] and [`exit`].

mod audit;
mod census;
mod check;
mod classify;
mod cli;
mod docs;
mod driver;
mod driver_link;
mod elf_file;
mod elf_input;
mod exit;
mod explain;
mod fix;
mod fixup;
#[cfg(test)]
mod model_tree;
mod printout;
mod prog;
mod rule;
mod scan;
mod stubs;
mod walk;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::FromArgMatches;
use thiserror::Error;

use audit::AuditConfig;
use check::CheckConfig;
use cli::{
    AuditArgs, CheckArgs, Cli, Command, DriverLinkArgs, ExplainArgs, FixArgs, FixupArgs, ModelArgs,
};
use driver_link::DriverLinkConfig;
use exit::Exit;
use explain::ExplainConfig;
use fix::FixConfig;
use fixup::{CheckLibsConfig, FixupConfig};
use ldso_model::settings::SettingsOverrides;
use printout::{finish, write_stdout};
use rule::{Glob, RuleError, StubMatcher, StubRule};
use walk::Exclude;

impl ModelArgs {
    fn overrides(&self) -> SettingsOverrides {
        SettingsOverrides {
            unpatched_glibc: matches!(self.glibc, cli::Glibc::Upstream),
            no_dlopen: self.no_dlopen,
            ..SettingsOverrides::default()
        }
    }
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
    /// A driver link of `driver-link` that cannot be one.
    #[error("{0} {1} {2}")]
    DriverLinkDir(&'static str, String, String),
    /// The two driver links of `driver-link` are one directory.
    #[error("--driver-link and --driver-link-32 must be different directories")]
    DriverLinksSame,
}

/// Prints a usage error of `subcommand` and returns its exit status.
fn usage_error(subcommand: &str, e: UsageError) -> ExitCode {
    let p = prog::name();
    eprintln!("{p}: {e} (see {p} {subcommand} --help)");
    ExitCode::from(Exit::Usage)
}

fn matcher_of(patterns: &[String]) -> StubMatcher {
    StubMatcher {
        patterns: patterns.iter().map(|p| Glob::new(p.as_bytes())).collect(),
    }
}

fn exclude_of(globs: &[String]) -> Exclude {
    Exclude(globs.iter().map(|g| Glob::new(g.as_bytes())).collect())
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
        return usage_error("fix", e.into());
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
    const PREFIX: &str = "fixup";
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
        audit: a.audit.map(cli::AuditLevel::severity),
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
        verbose: a.verbose,
        why: a.why,
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
        assume_driver: a.assume_driver,
    }))
}

fn run_audit(a: AuditArgs) -> ExitCode {
    if a.codes {
        let table = audit::rules::codes_table();
        return ExitCode::from(finish(Exit::Done, write_stdout(table.as_bytes())));
    }
    pool(a.jobs);
    ExitCode::from(audit::run::run(&AuditConfig {
        exclude: exclude_of(&a.exclude),
        paths: a.paths,
        deny: a.deny.severity(),
        deny_option: "--deny",
        json: a.json,
        build_dirs: a.build_dirs,
        stubs: matcher_of(&a.stub_patterns),
        root: a.root,
        model: a.model.overrides(),
    }))
}

fn run_driver_link(a: DriverLinkArgs) -> ExitCode {
    for (what, dir) in [
        ("--driver-link", &a.driver_link),
        ("--driver-link-32", &a.driver_link_32),
    ] {
        if let Some(why) = rule::absolute_normal_problem(dir.as_bytes()) {
            return usage_error(
                "driver-link",
                UsageError::DriverLinkDir(what, dir.clone(), why),
            );
        }
        if dir == "/" {
            return usage_error(
                "driver-link",
                UsageError::DriverLinkDir(what, dir.clone(), "is /".to_string()),
            );
        }
    }
    if a.driver_link == a.driver_link_32 {
        return usage_error("driver-link", UsageError::DriverLinksSame);
    }
    ExitCode::from(driver_link::run::run(&DriverLinkConfig {
        root: a.root,
        link64: a.driver_link.into_bytes(),
        link32: a.driver_link_32.into_bytes(),
        dry_run: a.dry_run,
        remove: a.remove,
        persist: a.persist,
    }))
}

/// Parses the command line. `--help` and `--version` print on stdout and end the program with
/// status 0; every error is one line on stderr, `PROG: what (see PROG SUBCOMMAND --help)`, and
/// status 2.
fn parse(args: Vec<OsString>) -> Result<Cli, ExitCode> {
    let prog = prog::name();
    let subcommand = cli::subcommand_of(&args);
    let parsed = cli::command(prog)
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => Ok(cli),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            // Written here rather than by clap, so that a write error counts as for every
            // other output (a closed pipe quietly, a full disk as status 3).
            let styled = e.render();
            let text = if std::io::stdout().is_terminal() {
                styled.ansi().to_string()
            } else {
                styled.to_string()
            };
            Err(ExitCode::from(finish(
                Exit::Done,
                write_stdout(text.as_bytes()),
            )))
        }
        Err(e) => {
            let rendered = e.render().to_string();
            eprintln!(
                "{}",
                cli::one_line_error(&rendered, prog, subcommand.as_deref())
            );
            Err(ExitCode::from(Exit::Usage))
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    prog::set(prog::name_of(args.first().map(OsString::as_os_str)));
    let cli = match parse(args) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if cli.generate_man {
        let page = docs::man(&docs::documented_command());
        return ExitCode::from(finish(Exit::Done, write_stdout(page.as_bytes())));
    }
    if let Some(shell) = cli.generate_completion {
        return ExitCode::from(finish(Exit::Done, write_stdout(&docs::completion(shell))));
    }
    match cli.command {
        Some(Command::Fix(a)) => run_fix(a),
        Some(Command::Check(a)) => run_check(a),
        Some(Command::Fixup(a)) => run_fixup(a),
        Some(Command::Explain(a)) => run_explain(a),
        Some(Command::Audit(a)) => run_audit(a),
        Some(Command::DriverLink(a)) => run_driver_link(a),
        None => {
            let p = prog::name();
            eprintln!(
                "{p}: no command given: fix, check, fixup, explain, audit or driver-link (see {p} --help)"
            );
            ExitCode::from(Exit::Usage)
        }
    }
}
