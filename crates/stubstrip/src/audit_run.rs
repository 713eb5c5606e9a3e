//! `stubstrip audit`: the thin I/O layer around [`crate::audit`]: find the files, read them,
//! read each architecture's loader settings once, report, and choose the exit status.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use serde::Serialize;

use crate::audit::{self, Context, Finding, Severity, Subject};
use crate::classify::StubMatcher;
use crate::driver::RUNTIME_DIRS;
use crate::walk;
use ldso_model::fsview::{dirname, Bytes, FsView, Probe};
use ldso_model::hostfs::HostFs;
use ldso_model::settings::{self, LoaderSettings, SettingsOverrides};
use ldso_model::target::Target;

/// Exit status: a finding at or above the `--deny` level.
pub const EXIT_DENIED: u8 = 1;
/// Exit status: some file could not be read.
pub const EXIT_UNREADABLE: u8 = 3;

/// What to audit, and how.
#[derive(Clone, Debug)]
pub struct Config {
    /// Files or directories.
    pub paths: Vec<PathBuf>,
    /// Fail on findings at or above this severity (`None`: never).
    pub deny: Option<Severity>,
    /// JSON on stdout.
    pub json: bool,
    /// Build or temporary directories, besides `/build`, `$NIX_BUILD_TOP` and `$TMPDIR`.
    pub build_dirs: Vec<PathBuf>,
    /// Which directories hold stubs.
    pub stubs: StubMatcher,
    /// Check run paths as if this directory were `/` (the files must lie inside it).
    pub root: Option<PathBuf>,
}

/// The build and temporary directories: `/build` (the Nix sandbox's), `$NIX_BUILD_TOP`,
/// `$TMPDIR` and the given ones; without trailing slashes, never `/` itself.
pub fn build_dirs(extra: &[PathBuf]) -> Vec<Bytes> {
    let mut v: Vec<Bytes> = vec![b"/build".to_vec()];
    for var in ["NIX_BUILD_TOP", "TMPDIR"] {
        if let Some(x) = std::env::var_os(var) {
            v.push(x.into_vec());
        }
    }
    v.extend(extra.iter().map(|p| p.as_os_str().as_bytes().to_vec()));
    let mut out: Vec<Bytes> = Vec::new();
    for mut d in v {
        while d.len() > 1 && d.ends_with(b"/") {
            d.pop();
        }
        if d.len() > 1 && d.starts_with(b"/") && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

#[derive(Serialize)]
struct FileFinding<'a> {
    file: String,
    #[serde(flatten)]
    finding: &'a Finding,
}

#[derive(Serialize)]
struct FileError {
    path: String,
    error: String,
}

#[derive(Serialize, Default)]
struct Counts {
    error: usize,
    warning: usize,
    info: usize,
}

#[derive(Serialize)]
struct Report<'a> {
    command: &'static str,
    deny: &'static str,
    files_scanned: usize,
    elf_files: usize,
    files_with_findings: usize,
    counts: Counts,
    denied: bool,
    findings: Vec<FileFinding<'a>>,
    errors: Vec<FileError>,
}

enum Outcome {
    NotAudited,
    Audited(Vec<Finding>),
    Failed(String),
}

type SettingsCache = Mutex<HashMap<(Target, Option<Bytes>), Arc<LoaderSettings>>>;

fn audit_file(
    path: &std::path::Path,
    c: &Config,
    build: &[Bytes],
    runtime: &[Bytes],
    cache: &SettingsCache,
) -> Outcome {
    let host = HostFs::default();
    let fs = HostFs {
        root: c.root.clone(),
    };
    let p = path.as_os_str().as_bytes();
    let header = match host.probe(p) {
        Probe::File(_, h) if h.magic => h,
        Probe::File(..) | Probe::Directory | Probe::Missing => return Outcome::NotAudited,
        Probe::Denied => return Outcome::Failed("permission denied".into()),
        Probe::Failed(e) => return Outcome::Failed(e),
    };
    let info = match host.read_elf(p) {
        Ok(i) => i,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    if !info.dynamic || !header.is_loadable() {
        return Outcome::NotAudited;
    }
    let target = Target::of(&header);
    let key = (target, info.interpreter.clone());
    let settings = {
        let mut m = cache.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key)
            .or_insert_with(|| {
                let (s, _) = settings::read_settings(
                    target,
                    info.interpreter.as_deref(),
                    &fs,
                    &SettingsOverrides::default(),
                );
                Arc::new(s)
            })
            .clone()
    };
    let canonical = std::fs::canonicalize(path)
        .map(|c| c.into_os_string().into_vec())
        .unwrap_or_else(|_| p.to_vec());
    // Inside a root, the file's path there.
    let logical = match &c.root {
        Some(r) => {
            let r = std::fs::canonicalize(r)
                .map(|r| r.into_os_string().into_vec())
                .unwrap_or_default();
            match canonical.strip_prefix(r.as_slice()) {
                Some(rest) if rest.starts_with(b"/") => rest.to_vec(),
                _ => return Outcome::Failed("outside --root".into()),
            }
        }
        None => canonical,
    };
    let origin = dirname(&logical);
    let cx = Context {
        settings: &settings,
        stubs: &c.stubs,
        build_dirs: build,
        runtime_dirs: runtime,
    };
    let subject = Subject {
        path: &logical,
        origin: &origin,
        info: &info,
    };
    Outcome::Audited(audit::audit(&subject, &cx, &fs))
}

/// Runs `audit`; returns the exit status.
pub fn run(c: &Config) -> u8 {
    let build = build_dirs(&c.build_dirs);
    let runtime: Vec<Bytes> = RUNTIME_DIRS.iter().map(|d| d.as_bytes().to_vec()).collect();
    let cache: SettingsCache = Mutex::new(HashMap::new());
    let (files, walk_errors) = walk::regular_files(&c.paths);
    let results: Vec<(PathBuf, Outcome)> = files
        .into_par_iter()
        .map(|p| {
            let o = audit_file(&p, c, &build, &runtime, &cache);
            (p, o)
        })
        .collect();

    let mut report = Report {
        command: "audit",
        deny: c.deny.map(Severity::name).unwrap_or("never"),
        files_scanned: results.len(),
        elf_files: 0,
        files_with_findings: 0,
        counts: Counts::default(),
        denied: false,
        findings: Vec::new(),
        errors: walk_errors
            .iter()
            .map(|w| FileError {
                path: w.path.display().to_string(),
                error: w.error.to_string(),
            })
            .collect(),
    };
    for (path, o) in &results {
        match o {
            Outcome::NotAudited => {}
            Outcome::Failed(e) => report.errors.push(FileError {
                path: path.display().to_string(),
                error: e.clone(),
            }),
            Outcome::Audited(fs) => {
                report.elf_files += 1;
                if !fs.is_empty() {
                    report.files_with_findings += 1;
                }
                for f in fs {
                    match f.severity {
                        Severity::Error => report.counts.error += 1,
                        Severity::Warning => report.counts.warning += 1,
                        Severity::Info => report.counts.info += 1,
                    }
                    if c.deny.is_some_and(|d| f.severity >= d) {
                        report.denied = true;
                    }
                    report.findings.push(FileFinding {
                        file: path.display().to_string(),
                        finding: f,
                    });
                }
            }
        }
    }

    let mut err = std::io::stderr().lock();
    for e in &report.errors {
        let _ = writeln!(err, "stubstrip: error: {}: {}", e.path, e.error);
    }
    if !c.json {
        for f in &report.findings {
            let x = f.finding;
            let _ = writeln!(
                err,
                "{}: {}[{}]: {}\n    fix: {}",
                f.file,
                x.severity.name(),
                x.code,
                x.message,
                x.fix
            );
        }
    }
    let _ = writeln!(
        err,
        "stubstrip: audit: {} errors, {} warnings, {} info in {} of {} ELF files{}{}",
        report.counts.error,
        report.counts.warning,
        report.counts.info,
        report.files_with_findings,
        report.elf_files,
        if report.errors.is_empty() {
            String::new()
        } else {
            format!(", {} files could not be read", report.errors.len())
        },
        if report.denied {
            format!(" (failing: findings at or above --deny {})", report.deny)
        } else {
            String::new()
        }
    );
    if c.json {
        let mut out = std::io::stdout().lock();
        let _ = serde_json::to_writer_pretty(&mut out, &report);
        let _ = writeln!(out);
    }
    if report.denied {
        EXIT_DENIED
    } else if !report.errors.is_empty() {
        EXIT_UNREADABLE
    } else {
        0
    }
}
