//! The I/O of `explain`: read the program and the loader's settings, resolve, print.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use ldso_model::cachedfs::CachedFs;
use ldso_model::fsview::{dirname, Bytes, FsView};
use ldso_model::hostfs::HostFs;
use ldso_model::resolve::{self, Program};
use ldso_model::settings;
use ldso_model::target::Target;

use super::report::{Detail, ExplainReport};
use super::ExplainConfig;
use crate::elf_input;
use crate::exit::Exit;
use crate::printout::Printout;

/// The program's path in the modelled system and its `$ORIGIN`.
fn locate_program(file: &Path, fs: &HostFs) -> (Bytes, Bytes) {
    let canonical = std::fs::canonicalize(file)
        .map(|p| p.into_os_string().into_vec())
        .unwrap_or_else(|_| file.as_os_str().as_bytes().to_vec());
    match &fs.root {
        Some(root) => {
            let root = std::fs::canonicalize(root)
                .map(|p| p.into_os_string().into_vec())
                .unwrap_or_default();
            match canonical.strip_prefix(root.as_slice()) {
                Some(rest) if rest.starts_with(b"/") => (rest.to_vec(), dirname(rest)),
                // Outside the root: as if installed at the same path inside it.
                _ => (canonical.clone(), dirname(&canonical)),
            }
        }
        None => (file.as_os_str().as_bytes().to_vec(), dirname(&canonical)),
    }
}

/// Runs `explain`; returns the exit status.
pub fn run(c: &ExplainConfig) -> Exit {
    let host = HostFs {
        root: c.root.clone(),
    };
    // One resolution probes some paths more than once (the hwcaps checks, each object's
    // canonical path); the cache makes that one question each.
    let (out, code) = explain_on(c, &host, &CachedFs::new(host.clone()));
    out.emit(code)
}

/// `explain`'s report and exit status. `host` gives the root and reads the loader's own files;
/// `fs` is the model's view of the disk (cached, or for the test that the cache changes
/// nothing, `host` itself).
fn explain_on(c: &ExplainConfig, host: &HostFs, fs: &dyn FsView) -> (Printout, Exit) {
    let mut out = Printout::default();
    let (header, info) = match elf_input::read(&c.file, true) {
        Ok(x) => x,
        Err(e) => {
            out.diagnostics = format!("{}: {}: {e}\n", crate::prog::name(), c.file.display());
            return (out, Exit::Failed);
        }
    };
    let target = Target::of(&header);
    if !info.dynamic {
        if c.json {
            out.data = Some(format!(
                "{}\n",
                serde_json::json!({"command": "explain", "file": c.file.display().to_string(),
                    "architecture": target.name(), "static": true, "lookups": []})
            ));
        } else {
            out.report = format!(
                "{}: statically linked: no libraries to find\n",
                c.file.display()
            );
        }
        return (out, Exit::Done);
    }
    let (path, origin) = locate_program(&c.file, host);
    let (settings, prov) =
        settings::read_settings(target, info.interpreter.as_deref(), host, &c.overrides);
    let program = Program { path, origin, info };
    let res = resolve::resolve(program, &c.libnames, &settings, fs);
    let mut report = ExplainReport::new(&res, &settings, &prov, &c.libnames, &c.stubs, fs);
    if report.driver_library_not_found() {
        if let Some(why) = crate::driver_link::explain_hint(host) {
            report.set_driver_link_hint(&why);
        }
    }
    if c.assume_driver {
        report.assume_driver(&res);
    }
    let code = if report.has_problems() {
        Exit::Found
    } else {
        Exit::Done
    };
    let detail = Detail {
        verbose: c.verbose,
        why: c.why,
    };
    (report.render(c.json, detail), code)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::model_tree::model_tree;
    use crate::rule::StubMatcher;
    use ldso_model::settings::SettingsOverrides;

    /// `explain` of every program of the audit's test tree (and of a library, a broken file and
    /// a missing one) says the same through the cache as straight from the disk.
    #[test]
    fn explain_says_the_same_through_the_cache_as_without_it() {
        let t = tempfile::tempdir().unwrap();
        let Some(out) = model_tree(t.path()) else {
            return;
        };
        let mut files: Vec<PathBuf> = fs_list(&out.join("bin"));
        files.push(out.join("lib/libdep.so.1"));
        files.push(out.join("lib/libbroken.so.1"));
        files.push(out.join("lib/missing.so"));
        let mut followed = 0;
        for file in files {
            for (libnames, no_dlopen) in [
                (vec![], false),
                (vec![b"libplug.so.2".to_vec()], false),
                (vec![], true),
            ] {
                for json in [true, false] {
                    let c = ExplainConfig {
                        file: file.clone(),
                        libnames: libnames.clone(),
                        verbose: true,
                        why: true,
                        json,
                        root: None,
                        overrides: SettingsOverrides {
                            no_dlopen,
                            ..SettingsOverrides::default()
                        },
                        stubs: StubMatcher::default(),
                        assume_driver: false,
                    };
                    let host = HostFs::default();
                    let plain = explain_on(&c, &host, &host);
                    let cached = explain_on(&c, &host, &CachedFs::new(host.clone()));
                    assert_eq!(plain, cached, "{}", file.display());
                    let data = cached.0.data.unwrap_or_default();
                    followed += usize::from(data.contains("stubstrip's NVIDIA table"));
                }
            }
        }
        // libcudart's dlopen of libcuda.so.1 was followed in the programs that load it.
        assert!(followed >= 4, "{followed}");
    }

    fn fs_list(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }
}
