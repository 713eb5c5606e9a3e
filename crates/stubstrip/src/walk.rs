//! Which files to look at: the regular files under the paths named on the command line.
//!
//! A path named on the command line is followed when it is a symlink (people name
//! `libfoo.so.1`, which is almost always one); symlinks met while walking a directory are not
//! followed, which keeps the hook inside its outputs (another store path is not ours to edit).
//! This is `find -H`. `--exclude` globs leave files and whole directories out.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use thiserror::Error;

use crate::rule::Glob;

/// A path that could not be listed or read; its message names the path.
#[derive(Debug, Error)]
#[error("{}: {}", path.display(), elfpatch::error::os_words(.error))]
pub struct WalkError {
    /// The path.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub error: io::Error,
}

/// What `--exclude` leaves out: a glob matches the path relative to the named root it was found
/// under (`lib/debug`, `lib/debug/*`; `*` also matches `/`) or the file's own name (`*.debug`).
/// A directory that matches is not entered. The named paths themselves are never excluded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exclude(pub Vec<Glob>);

impl Exclude {
    /// Whether the entry at `relative` (below its named root, never empty) is left out.
    pub fn excludes(&self, relative: &Path) -> bool {
        let rel = relative.as_os_str().as_bytes();
        let name = relative.file_name().map_or(rel, |n| n.as_bytes());
        self.0.iter().any(|g| g.matches(rel) || g.matches(name))
    }
}

/// The files under the named paths.
#[derive(Debug, Default)]
pub struct Listing {
    /// Every regular file, in a stable order (sorted).
    pub files: Vec<PathBuf>,
    /// Paths that could not be listed.
    pub errors: Vec<WalkError>,
    /// Files and directories left out by `--exclude` (a directory counts once).
    pub excluded: usize,
    /// Named paths that are neither a regular file nor a directory (a device, a FIFO).
    pub not_regular: Vec<PathBuf>,
}

/// Lists the regular files under `roots`: a named file as it is, a named directory recursively,
/// a named symlink followed (listed under the path it resolves to); symlinks inside a directory
/// are skipped.
///
/// Directories are listed in parallel, and the type of each entry comes from the listing itself
/// (no `stat` per file): on a tree of 20,000 files that is most of the walk's cost.
pub fn list(roots: &[PathBuf], exclude: &Exclude) -> Listing {
    let mut out = Listing::default();
    for named in roots {
        // A named symlink is followed (find -H): the files are listed under the path it resolves
        // to, the one a file is edited at (elfpatch never writes through a symlink). A dangling
        // one is an error.
        let resolved;
        let root = match fs::symlink_metadata(named) {
            Ok(m) if m.file_type().is_symlink() => match fs::canonicalize(named) {
                Ok(p) => {
                    resolved = p;
                    &resolved
                }
                Err(error) => {
                    out.errors.push(WalkError {
                        path: named.clone(),
                        error,
                    });
                    continue;
                }
            },
            _ => named,
        };
        match fs::metadata(root) {
            Ok(m) if m.is_file() => out.files.push(root.clone()),
            Ok(m) if m.is_dir() => {
                let below = visit_dir(root, Path::new(""), exclude);
                out.files.extend(below.files);
                out.errors.extend(below.errors);
                out.excluded += below.excluded;
            }
            Ok(_) => out.not_regular.push(named.clone()),
            Err(error) => out.errors.push(WalkError {
                path: root.clone(),
                error,
            }),
        }
    }
    out.files.sort();
    out.files.dedup();
    out
}

fn visit_dir(dir: &Path, relative: &Path, exclude: &Exclude) -> Listing {
    let mut out = Listing::default();
    let entries = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(error) => {
            out.errors.push(WalkError {
                path: dir.to_path_buf(),
                error,
            });
            return out;
        }
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(error) => {
                out.errors.push(WalkError {
                    path: dir.to_path_buf(),
                    error,
                });
                continue;
            }
        };
        let rel = relative.join(entry.file_name());
        // file_type() comes from the directory entry; it only stats when the filesystem does not
        // say, and it never follows a symlink.
        let kind = match entry.file_type() {
            Ok(t) if t.is_file() || t.is_dir() => t,
            Ok(_) => continue,
            Err(error) => {
                out.errors.push(WalkError {
                    path: entry.path(),
                    error,
                });
                continue;
            }
        };
        if exclude.excludes(&rel) {
            out.excluded += 1;
        } else if kind.is_dir() {
            dirs.push((entry.path(), rel));
        } else {
            out.files.push(entry.path());
        }
    }
    dirs.sort();
    let below: Vec<Listing> = dirs
        .par_iter()
        .map(|(d, rel)| visit_dir(d, rel, exclude))
        .collect();
    for b in below {
        out.files.extend(b.files);
        out.errors.extend(b.errors);
        out.excluded += b.excluded;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_directories_and_skips_symlinks_inside_them() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("a/b")).unwrap();
        fs::write(d.path().join("a/b/f"), b"x").unwrap();
        fs::write(d.path().join("g"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("a/link-to-etc")).unwrap();
        std::os::unix::fs::symlink(d.path().join("g"), d.path().join("a/link-to-g")).unwrap();
        let l = list(&[d.path().to_path_buf()], &Exclude::default());
        assert!(l.errors.is_empty());
        assert_eq!(l.files, vec![d.path().join("a/b/f"), d.path().join("g")]);
    }

    #[test]
    fn named_symlinks_are_followed() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("real")).unwrap();
        fs::write(d.path().join("real/f"), b"x").unwrap();
        std::os::unix::fs::symlink("real", d.path().join("dirlink")).unwrap();
        std::os::unix::fs::symlink("real/f", d.path().join("filelink")).unwrap();
        std::os::unix::fs::symlink("nowhere", d.path().join("dangling")).unwrap();
        let l = list(
            &[
                d.path().join("dirlink"),
                d.path().join("filelink"),
                d.path().join("dangling"),
            ],
            &Exclude::default(),
        );
        // Both lead to the one file, listed once, at the path it is edited at.
        let real = fs::canonicalize(d.path().join("real/f")).unwrap();
        assert_eq!(l.files, vec![real]);
        assert_eq!(l.errors.len(), 1);
        assert_eq!(l.errors[0].path, d.path().join("dangling"));
    }

    #[test]
    fn exclude_matches_the_relative_path_or_the_name() {
        let ex = Exclude(vec![Glob::new("*.debug"), Glob::new("lib/debug")]);
        assert!(ex.excludes(Path::new("lib/x/libfoo.so.debug")));
        assert!(ex.excludes(Path::new("lib/debug")));
        assert!(!ex.excludes(Path::new("share/lib/debug/x")));
        assert!(!ex.excludes(Path::new("lib/libfoo.so")));
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("lib/debug/.build-id")).unwrap();
        fs::write(d.path().join("lib/debug/.build-id/ab.debug"), b"x").unwrap();
        fs::write(d.path().join("lib/a.debug"), b"x").unwrap();
        fs::write(d.path().join("lib/a.so"), b"x").unwrap();
        let l = list(&[d.path().to_path_buf()], &ex);
        assert_eq!(l.files, vec![d.path().join("lib/a.so")]);
        assert_eq!(l.excluded, 2, "the directory counts once, and the file");
    }
}
