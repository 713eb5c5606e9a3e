//! Computing a resolution-cache descriptor ([`crate::note`]) as patchelf 0.19.3's
//! `--build-resolution-cache` does, from the file's `DT_NEEDED` names and run path and what the
//! filesystem holds when the note is written.
//!
//! The rules (patchelf 0.19.3, `buildResolutionCache` and `needsSearchHint`):
//! - the run path is `DT_RUNPATH`, else `DT_RPATH`, split at `:` keeping a trailing empty entry
//!   (an empty run path has no entry); `LD_LIBRARY_PATH` and the default directories play no
//!   part;
//! - no `DT_NEEDED` or no run path entry: no note, and a warning;
//! - names with a `/` are opened as paths by the loader: never in the note;
//! - each run path entry, in order, adds to every searched name either a `?<entry>` hint — when
//!   it is empty or relative, holds a `$` (`$ORIGIN`, `$LIB`, `$PLATFORM`), is not a directory
//!   the writer can search (absent, a plain file, no search permission), or holds a
//!   `glibc-hwcaps` entry — or, for each name it holds as a readable file, `=<entry>/<name>`
//!   (the entry as written, then `/`, then the name);
//! - entries are sorted by name, byte-wise; a name with no hint has no entry; no entry at all:
//!   no note, and a warning;
//! - a `DT_NEEDED` name listed twice gets each hint twice (patchelf walks the list as it is).
//!
//! [`build`] is pure over a [`PatchTimeView`]; [`SystemView`] is the real filesystem.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::note::{Entry, Hint, ResolutionCache};

/// patchelf's warning when the file has no dynamic section.
pub const WARN_NO_DYNAMIC: &str =
    "warning: --build-resolution-cache: no dynamic section (statically linked?); no cache written";
/// patchelf's warning when there is no `DT_NEEDED` or no run path.
pub const WARN_NOTHING_TO_RESOLVE: &str =
    "warning: --build-resolution-cache: no DT_NEEDED entries or run path to resolve; no cache written";
/// patchelf's warning when no name got a hint.
pub const WARN_NOTHING_RESOLVED: &str =
    "warning: --build-resolution-cache: no libraries resolved against the run path; no cache written";
/// patchelf's error when a note is present and the new descriptor differs from it.
pub const ERR_ALREADY_PRESENT: &str =
    "--build-resolution-cache: a resolution cache note is already present; rebuild from an unpatched binary";

/// What the filesystem says when the note is written.
pub trait PatchTimeView {
    /// Whether `dir` (absolute) is a directory the writer may search (`stat` says directory,
    /// `access(X_OK)` succeeds).
    fn is_searchable_dir(&self, dir: &[u8]) -> bool;
    /// Whether `dir/glibc-hwcaps` exists (`access(F_OK)`).
    fn has_glibc_hwcaps(&self, dir: &[u8]) -> bool;
    /// Whether `path` is readable by the writer (`access(R_OK)`).
    fn is_readable(&self, path: &[u8]) -> bool;
}

/// The real filesystem, through `stat` and `access` (the real user's permissions, as patchelf).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemView;

fn path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

impl PatchTimeView for SystemView {
    fn is_searchable_dir(&self, dir: &[u8]) -> bool {
        std::fs::metadata(path(dir)).is_ok_and(|m| m.is_dir())
            && rustix::fs::access(path(dir), rustix::fs::Access::EXEC_OK).is_ok()
    }

    fn has_glibc_hwcaps(&self, dir: &[u8]) -> bool {
        let hwcaps = [dir, b"/glibc-hwcaps".as_slice()].concat();
        rustix::fs::access(path(&hwcaps), rustix::fs::Access::EXISTS).is_ok()
    }

    fn is_readable(&self, file: &[u8]) -> bool {
        rustix::fs::access(path(file), rustix::fs::Access::READ_OK).is_ok()
    }
}

/// What [`build`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Built {
    /// No `DT_NEEDED` or no run path entry: no note ([`WARN_NOTHING_TO_RESOLVE`]).
    NothingToResolve,
    /// No name got a hint: no note ([`WARN_NOTHING_RESOLVED`]).
    NothingResolved,
    /// The cache to write.
    Cache(ResolutionCache),
}

/// The run path's entries as patchelf splits them: at every `:`, a trailing empty entry kept,
/// none at all for an empty run path.
pub fn run_path_entries(run_path: &[u8]) -> Vec<&[u8]> {
    if run_path.is_empty() {
        return Vec::new();
    }
    run_path.split(|&b| b == b':').collect()
}

/// Whether a run path entry becomes a `?` hint rather than being searched now.
fn needs_search_hint(dir: &[u8], view: &impl PatchTimeView) -> bool {
    dir.first() != Some(&b'/')
        || dir.contains(&b'$')
        || !view.is_searchable_dir(dir)
        || view.has_glibc_hwcaps(dir)
}

/// The descriptor patchelf 0.19.3 would write for these `DT_NEEDED` names (in dynamic-section
/// order) and this run path (`DT_RUNPATH`, else `DT_RPATH`; `None` when neither).
pub fn build(needed: &[&[u8]], run_path: Option<&[u8]>, view: &impl PatchTimeView) -> Built {
    let entries = run_path_entries(run_path.unwrap_or(b""));
    if needed.is_empty() || entries.is_empty() {
        return Built::NothingToResolve;
    }
    let searched: Vec<&[u8]> = needed
        .iter()
        .copied()
        .filter(|n| !n.contains(&b'/'))
        .collect();
    let mut cache: BTreeMap<Vec<u8>, Vec<Hint>> = BTreeMap::new();
    for dir in entries {
        if needs_search_hint(dir, view) {
            for lib in &searched {
                cache
                    .entry(lib.to_vec())
                    .or_default()
                    .push(Hint::Search(dir.to_vec()));
            }
            continue;
        }
        for lib in &searched {
            let file = [dir, b"/".as_slice(), lib].concat();
            if view.is_readable(&file) {
                cache
                    .entry(lib.to_vec())
                    .or_default()
                    .push(Hint::Exact(file));
            }
        }
    }
    if cache.is_empty() {
        return Built::NothingResolved;
    }
    Built::Cache(ResolutionCache {
        entries: cache
            .into_iter()
            .map(|(needed, hints)| Entry { needed, hints })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-memory filesystem: directories (searchable or not), hwcaps dirs, readable files.
    #[derive(Default)]
    struct Mem {
        dirs: Vec<&'static str>,
        hwcaps: Vec<&'static str>,
        files: Vec<&'static str>,
    }

    impl PatchTimeView for Mem {
        fn is_searchable_dir(&self, dir: &[u8]) -> bool {
            self.dirs.iter().any(|d| d.as_bytes() == dir)
        }
        fn has_glibc_hwcaps(&self, dir: &[u8]) -> bool {
            self.hwcaps.iter().any(|d| d.as_bytes() == dir)
        }
        fn is_readable(&self, path: &[u8]) -> bool {
            self.files.iter().any(|f| f.as_bytes() == path)
        }
    }

    fn desc(b: Built) -> Vec<u8> {
        match b {
            Built::Cache(c) => c.to_descriptor(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hints_keep_run_path_order_and_entries_are_sorted_by_name() {
        let fs = Mem {
            dirs: vec!["/a", "/hw", "/b"],
            hwcaps: vec!["/hw"],
            files: vec!["/a/libz.so", "/b/libz.so", "/b/liba.so", "/hw/liba.so"],
        };
        let needed: [&[u8]; 3] = [b"libz.so", b"liba.so", b"/abs/libq.so"];
        let d = desc(build(&needed, Some(b"/a:$ORIGIN/x:/hw:/gone:/b:"), &fs));
        assert_eq!(
            d,
            b"liba.so\0?$ORIGIN/x:?/hw:?/gone:=/b/liba.so:?\0\
              libz.so\0=/a/libz.so:?$ORIGIN/x:?/hw:?/gone:=/b/libz.so:?\0\0"
                .to_vec()
        );
    }

    #[test]
    fn nothing_to_resolve_and_nothing_resolved() {
        let fs = Mem {
            dirs: vec!["/a"],
            ..Mem::default()
        };
        let needed: [&[u8]; 1] = [b"libz.so"];
        assert_eq!(build(&needed, None, &fs), Built::NothingToResolve);
        assert_eq!(build(&needed, Some(b""), &fs), Built::NothingToResolve);
        assert_eq!(build(&[], Some(b"/a"), &fs), Built::NothingToResolve);
        assert_eq!(build(&needed, Some(b"/a"), &fs), Built::NothingResolved);
        // Only names with a slash: searched by nobody.
        let slash: [&[u8]; 1] = [b"./libz.so"];
        assert_eq!(build(&slash, Some(b"rel"), &fs), Built::NothingResolved);
        // An empty entry is a search hint: something is resolved.
        assert_eq!(
            desc(build(&needed, Some(b":"), &fs)),
            b"libz.so\0?:?\0\0".to_vec()
        );
    }

    #[test]
    fn a_name_listed_twice_gets_each_hint_twice_and_trailing_slashes_stay() {
        let fs = Mem {
            dirs: vec!["/a/"],
            files: vec!["/a//libz.so"],
            ..Mem::default()
        };
        let needed: [&[u8]; 2] = [b"libz.so", b"libz.so"];
        assert_eq!(
            desc(build(&needed, Some(b"/a/"), &fs)),
            b"libz.so\0=/a//libz.so:=/a//libz.so\0\0".to_vec()
        );
    }
}
