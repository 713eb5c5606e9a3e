//! What `fixup`'s decisions need to know about the files on this machine, behind a trait so that
//! the decisions are tested on made-up trees; [`Disk`] asks the real filesystem.

use std::fs;
use std::path::{Path, PathBuf};

/// Facts about paths, symlinks followed (bash's `-e` and `-d`, `realpath`, `stat`).
pub trait FileFacts {
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// `path` with every symlink resolved, if it exists.
    fn canonical(&self, path: &Path) -> Option<PathBuf>;
    /// The size of the file at `path`.
    fn size(&self, path: &Path) -> Option<u64>;
}

/// The real filesystem.
pub struct Disk;

impl FileFacts for Disk {
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        fs::canonicalize(path).ok()
    }
    fn size(&self, path: &Path) -> Option<u64> {
        fs::metadata(path).ok().map(|m| m.len())
    }
}
