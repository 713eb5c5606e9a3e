//! The I/O of `audit`: find the files, read them, read each architecture's loader settings once,
//! print the report, and choose the exit status.

use std::collections::HashMap;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ldso_model::cachedfs::CachedFs;
use ldso_model::fsview::{dirname, Bytes, FsView};
use ldso_model::hostfs::HostFs;
use ldso_model::settings::{self, LoaderSettings, SettingsOverrides};
use ldso_model::target::Target;
use rayon::prelude::*;

use super::report::AuditReport;
use super::rules::{AuditContext, AuditSubject};
use super::{AuditConfig, AuditFileError, AuditOutcome};
use crate::driver::RUNTIME_DIRS;
use crate::elf_input;
use crate::exit::Exit;
use crate::printout::Printout;
use crate::scan::{self, Scan};

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

type SettingsCache = Mutex<HashMap<(Target, Option<Bytes>), Arc<LoaderSettings>>>;

fn audit_file(
    path: &Path,
    c: &AuditConfig,
    build: &[Bytes],
    runtime: &[Bytes],
    cache: &SettingsCache,
    model_fs: &(dyn FsView + Sync),
) -> AuditOutcome {
    let fs = HostFs {
        root: c.root.clone(),
    };
    let p = path.as_os_str().as_bytes();
    // Without a root the model's paths are the host's: the file is read through the model's
    // cache, and read once when other files of the tree load it too.
    let plain = HostFs::default();
    let host: &dyn FsView = match c.root {
        None => model_fs,
        Some(_) => &plain,
    };
    let (header, info) = match elf_input::read_through(path, false, host) {
        Ok(x) => x,
        Err(e) if e.is_not_elf() => return AuditOutcome::NotAudited,
        Err(e) => return AuditOutcome::Failed(e.into()),
    };
    // What elfpatch found in the section headers, for every loadable object (a static program
    // cut short too).
    let mut damage = super::damage::findings(&info.header_warnings);
    damage.extend(super::damage::layout_findings(&info.layout_problems));
    if !header.is_loadable() {
        return AuditOutcome::NotAudited;
    }
    if !info.dynamic {
        return match damage.is_empty() {
            true => AuditOutcome::NotAudited,
            false => AuditOutcome::Audited(damage),
        };
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
                    &SettingsOverrides {
                        unpatched_glibc: c.model.unpatched_glibc,
                        no_dlopen: c.model.no_dlopen,
                        ..SettingsOverrides::default()
                    },
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
                _ => return AuditOutcome::Failed(AuditFileError::OutsideRoot),
            }
        }
        None => canonical,
    };
    let origin = dirname(&logical);
    let cx = AuditContext {
        settings: &settings,
        stubs: &c.stubs,
        build_dirs: build,
        runtime_dirs: runtime,
    };
    let subject = AuditSubject {
        path: &logical,
        origin: &origin,
        info: &info,
    };
    let mut found = super::audit(&subject, &cx, model_fs);
    found.extend(damage);
    AuditOutcome::Audited(found)
}

/// Runs `audit`; returns the exit status.
pub fn run(c: &AuditConfig) -> Exit {
    let scan = scan::scan(&c.paths, &c.exclude);
    let (out, code) = run_on(c, &scan, true);
    out.emit(code)
}

/// Audits the loadable objects of `scan`; the report's text (with the count line when
/// `say_count`) and the exit status (for `fixup`, which prints it elsewhere and has given the
/// count).
///
/// Every file is resolved as the program started (`dlopen`s followed), so the libraries that
/// many files load would be read once per file: one [`CachedFs`] serves the whole run, and
/// each library's headers, dynamic section and notes are read once.
pub fn run_on(c: &AuditConfig, scan: &Scan, say_count: bool) -> (Printout, Exit) {
    let fs = CachedFs::new(HostFs {
        root: c.root.clone(),
    });
    run_with(c, scan, say_count, &fs)
}

/// [`run_on`] with the rules' view of the disk given (the cached one, or for the test that
/// the cache changes nothing, the disk itself).
fn run_with(
    c: &AuditConfig,
    scan: &Scan,
    say_count: bool,
    model_fs: &(dyn FsView + Sync),
) -> (Printout, Exit) {
    let build = build_dirs(&c.build_dirs);
    let runtime: Vec<Bytes> = RUNTIME_DIRS.iter().map(|d| d.as_bytes().to_vec()).collect();
    let cache: SettingsCache = Mutex::new(HashMap::new());
    let results: Vec<(PathBuf, AuditOutcome)> = scan
        .objects()
        .into_par_iter()
        .map(|p| {
            let o = audit_file(&p, c, &build, &runtime, &cache, model_fs);
            (p, o)
        })
        .collect();

    let report = AuditReport::new(&results, scan, c.deny).deny_option(c.deny_option);
    let code = if report.denied() {
        Exit::Found
    } else if report.failed() {
        Exit::Failed
    } else {
        Exit::Done
    };
    (report.render(c.json, say_count), code)
}

#[cfg(test)]
mod tests {
    //! The shared cache changes nothing: `audit` (and `explain`, in its own module) over a real
    //! tree built with gcc give the same report and exit status through [`CachedFs`] as
    //! straight from the disk, in every model (`dlopen`s followed or not, either glibc, inside
    //! a root).

    use std::path::Path;

    use super::*;
    use crate::model_tree::model_tree;
    use crate::rule::StubMatcher;
    use crate::walk::Exclude;
    use ldso_model::settings::SettingsOverrides;

    fn config(
        out: &Path,
        root: Option<&Path>,
        json: bool,
        model: SettingsOverrides,
    ) -> AuditConfig {
        AuditConfig {
            paths: vec![out.to_path_buf()],
            exclude: Exclude::default(),
            deny: Some(Severity::Warning),
            deny_option: "--deny",
            json,
            build_dirs: Vec::new(),
            stubs: StubMatcher::default(),
            root: root.map(Path::to_path_buf),
            model,
        }
    }

    use super::super::Severity;

    #[test]
    fn audit_reports_the_same_through_the_cache_as_without_it() {
        let t = tempfile::tempdir().unwrap();
        let Some(out) = model_tree(t.path()) else {
            return;
        };
        let models = [
            SettingsOverrides::default(),
            SettingsOverrides {
                no_dlopen: true,
                ..SettingsOverrides::default()
            },
            SettingsOverrides {
                unpatched_glibc: true,
                ..SettingsOverrides::default()
            },
        ];
        let mut default_json = String::new();
        for root in [None, Some(t.path())] {
            for model in &models {
                for json in [true, false] {
                    let c = config(&out, root, json, model.clone());
                    let scan = scan::scan(&c.paths, &c.exclude);
                    let plain = run_with(
                        &c,
                        &scan,
                        true,
                        &HostFs {
                            root: c.root.clone(),
                        },
                    );
                    let cached = run_on(&c, &scan, true);
                    assert_eq!(plain, cached, "root {root:?}, {model:?}, json {json}");
                    if root.is_none() && json && !model.no_dlopen && !model.unpatched_glibc {
                        default_json = cached.0.data.clone().unwrap();
                    }
                }
            }
        }
        // The tree gives the model something to cache: dlopen findings reached through
        // libcudart's RUNPATH and the program's .rodata, and the stub in RUNPATH.
        for code in ["SS012", "SS001"] {
            assert!(
                default_json.contains(code),
                "{code} missing: {default_json}"
            );
        }
        assert!(default_json.contains("libbroken.so.1"), "{default_json}");
    }
}
