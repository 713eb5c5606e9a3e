//! The I/O of `driver-link`: the disk as a [`DriverFs`], and the one function that changes it
//! ([`apply`]).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use elfpatch::Elf;
use ldso_model::fsview::{dirname, Bytes};
use ldso_model::hostfs::HostFs;

use super::discover::{discover, join};
use super::plan::{
    plan, plan_remove, render_plan, render_remove, Action, Persist, Plan, RemovePlan, TEMP_PREFIX,
};
use super::{base, lossy, DriverFs, DriverLinkConfig, DriverLinkError, Entry, IoFailure, TMPFILES};
use crate::exit::Exit;
use crate::printout::Printout;

/// Where a path of the modelled system is on the disk: its parent through the root's symlinks,
/// its last component as it is. Every change goes through this: a link made under `--root`
/// points at a path inside the root, and following it from the host would reach the host's
/// file of that name, or the root's library itself.
fn host_of(fs: &HostFs, path: &[u8]) -> io::Result<PathBuf> {
    let parent = fs.host_path(&dirname(path))?;
    Ok(if path == b"/" {
        parent
    } else {
        parent.join(OsStr::from_bytes(base(path)))
    })
}

impl DriverFs for HostFs {
    fn lstat(&self, path: &[u8]) -> Entry {
        let Ok(host) = host_of(self, path) else {
            return Entry::Other;
        };
        match std::fs::symlink_metadata(&host) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Entry::Missing,
            Err(_) => Entry::Other,
            Ok(m) if m.file_type().is_symlink() => std::fs::read_link(&host)
                .map(|t| Entry::Link(t.into_os_string().into_vec()))
                .unwrap_or(Entry::Other),
            Ok(m) if m.is_dir() => Entry::Dir,
            Ok(m) if m.is_file() => Entry::File,
            Ok(_) => Entry::Other,
        }
    }

    fn list(&self, dir: &[u8]) -> io::Result<Vec<Bytes>> {
        let mut names = Vec::new();
        for e in std::fs::read_dir(self.host_path(dir)?)? {
            names.push(e?.file_name().into_vec());
        }
        names.sort();
        Ok(names)
    }

    fn read_small(&self, path: &[u8]) -> io::Result<Vec<u8>> {
        self.read(path)
    }

    fn soname(&self, path: &[u8]) -> Option<Bytes> {
        let f = File::open(self.host_path(path).ok()?).ok()?;
        let len = f.metadata().ok()?.len();
        Elf::read_file(&f, len).ok()?.soname().map(<[u8]>::to_vec)
    }
}

/// Where a path of the modelled system is on the disk.
fn host(fs: &HostFs, path: &[u8], op: &'static str) -> Result<PathBuf, IoFailure> {
    host_of(fs, path).map_err(|source| IoFailure::Write {
        op,
        path: lossy(path),
        source,
    })
}

/// Runs `f` on the host path of `path`; a failure is `op` on `path`.
fn act(
    fs: &HostFs,
    path: &[u8],
    op: &'static str,
    f: impl FnOnce(&PathBuf) -> io::Result<()>,
) -> Result<(), IoFailure> {
    let h = host(fs, path, op)?;
    f(&h).map_err(|source| IoFailure::Write {
        op,
        path: lossy(path),
        source,
    })
}

/// Makes `name` in `dir` a link to `target`, at once: a temporary link renamed over it.
fn link_at_once(fs: &HostFs, dir: &[u8], name: &[u8], target: &[u8]) -> Result<(), IoFailure> {
    let mut temp_name = TEMP_PREFIX.as_bytes().to_vec();
    temp_name.extend_from_slice(name);
    let temp = join(dir, &temp_name);
    act(fs, &temp, "link", |t| {
        match std::fs::remove_file(t) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        symlink(OsStr::from_bytes(target), t)
    })?;
    let to = host(fs, &join(dir, name), "link")?;
    act(fs, &temp, "link", |t| std::fs::rename(t, &to))
}

/// Carries the plan out: directories, then each driver link's removals and links, then the
/// tmpfiles entry.
pub fn apply(fs: &HostFs, p: &Plan) -> Result<(), IoFailure> {
    for d in &p.dirs {
        if d.create {
            act(fs, &d.dir, "create", |h| std::fs::create_dir_all(h))?;
        }
        for s in &d.steps {
            match s.action {
                Action::Keep => {}
                Action::Remove(_) => act(fs, &join(&d.dir, &s.name), "remove", |h| {
                    std::fs::remove_file(h)
                })?,
                Action::Make | Action::Replace(_) => link_at_once(fs, &d.dir, &s.name, &s.target)?,
            }
        }
    }
    if let Persist::Write {
        text,
        unchanged: false,
    } = &p.persist
    {
        let path = TMPFILES.as_bytes();
        act(fs, &dirname(path), "create", |h| std::fs::create_dir_all(h))?;
        act(fs, path, "write", |h| std::fs::write(h, text))?;
    }
    Ok(())
}

/// Carries out `--remove`.
pub fn apply_remove(fs: &HostFs, p: &RemovePlan) -> Result<(), IoFailure> {
    for d in &p.dirs {
        for (name, _) in &d.links {
            act(fs, &join(&d.dir, name), "remove", |h| {
                std::fs::remove_file(h)
            })?;
        }
        if d.rmdir {
            act(fs, &d.dir, "remove", |h| std::fs::remove_dir(h))?;
        }
        if d.rmdir_parent {
            act(fs, &dirname(&d.dir), "remove", |h| std::fs::remove_dir(h))?;
        }
    }
    if p.tmpfiles {
        act(fs, TMPFILES.as_bytes(), "remove", |h| {
            std::fs::remove_file(h)
        })?;
    }
    Ok(())
}

/// The report and exit status of `driver-link` over `fs`. When a change fails half-way, the
/// report is the plan in the conditional ("would make"), and the failure says where it stopped:
/// the steps before it are done, and running the command again finishes the job.
fn driver_link_on(c: &DriverLinkConfig, fs: &HostFs) -> (Printout, Exit) {
    let mut out = Printout::default();
    let result = if c.remove {
        plan_remove(fs, &[&c.link64, &c.link32]).and_then(|p| {
            out.report = render_remove(&p, c.dry_run);
            if c.dry_run {
                return Ok(());
            }
            apply_remove(fs, &p).map_err(|e| {
                out.report = render_remove(&p, true);
                e.into()
            })
        })
    } else {
        discover(fs)
            .map_err(DriverLinkError::from)
            .and_then(|d| plan(fs, d, &c.link64, &c.link32, c.persist))
            .and_then(|p| {
                out.report = render_plan(&p, c.dry_run);
                if c.dry_run || p.is_noop() {
                    return Ok(());
                }
                apply(fs, &p).map_err(|e| {
                    out.report = render_plan(&p, true);
                    e.into()
                })
            })
    };
    match result {
        Ok(()) => (out, Exit::Done),
        Err(e) => {
            let stopped = match e {
                DriverLinkError::Io(_) => "; stopped there (the plan is above)",
                DriverLinkError::Refused(_) => "",
            };
            out.diagnostics = format!("{}: driver-link: {e}{stopped}\n", crate::prog::name());
            (out, e.exit_code())
        }
    }
}

/// Runs `driver-link`; returns the exit status.
pub fn run(c: &DriverLinkConfig) -> Exit {
    let fs = HostFs {
        root: c.root.clone(),
    };
    let (out, code) = driver_link_on(c, &fs);
    out.emit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_answers_as_the_model_does() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::write(root.join("usr/lib/libfoo.so.1"), b"x").unwrap();
        symlink("/usr/lib/libfoo.so.1", root.join("usr/lib/libfoo.so")).unwrap();
        symlink("/usr/lib", root.join("lib")).unwrap();
        let fs = HostFs {
            root: Some(root.to_path_buf()),
        };
        assert_eq!(
            fs.lstat(b"/lib/libfoo.so"),
            Entry::Link(b"/usr/lib/libfoo.so.1".to_vec())
        );
        assert_eq!(fs.lstat(b"/lib"), Entry::Link(b"/usr/lib".to_vec()));
        assert_eq!(fs.lstat(b"/usr/lib/libfoo.so.1"), Entry::File);
        assert_eq!(fs.lstat(b"/usr/lib"), Entry::Dir);
        assert_eq!(fs.lstat(b"/usr/lib/none"), Entry::Missing);
        assert_eq!(
            fs.list(b"/lib").unwrap(),
            vec![b"libfoo.so".to_vec(), b"libfoo.so.1".to_vec()]
        );
        assert_eq!(fs.soname(b"/usr/lib/libfoo.so.1"), None);
    }
}
