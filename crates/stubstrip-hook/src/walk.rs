//! Which files to look at: regular files under the given paths, never through a symlink.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// A path that could not be listed.
#[derive(Debug)]
pub struct WalkError {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub error: io::Error,
}

/// Every regular file under `roots` (files are taken as they are, directories recursively), in
/// a stable order. Symlinks are skipped, whether given directly or met in a directory: following
/// them could edit files outside the tree (another store path).
pub fn regular_files(roots: &[PathBuf]) -> (Vec<PathBuf>, Vec<WalkError>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for root in roots {
        visit(root, &mut files, &mut errors);
    }
    (files, errors)
}

fn visit(path: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<WalkError>) {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(error) => {
            errors.push(WalkError {
                path: path.to_path_buf(),
                error,
            });
            return;
        }
    };
    let ft = meta.file_type();
    if ft.is_file() {
        files.push(path.to_path_buf());
    } else if ft.is_dir() {
        let entries = match fs::read_dir(path) {
            Ok(rd) => rd,
            Err(error) => {
                errors.push(WalkError {
                    path: path.to_path_buf(),
                    error,
                });
                return;
            }
        };
        let mut children: Vec<PathBuf> = Vec::new();
        for entry in entries {
            match entry {
                Ok(e) => children.push(e.path()),
                Err(error) => errors.push(WalkError {
                    path: path.to_path_buf(),
                    error,
                }),
            }
        }
        children.sort();
        for c in children {
            visit(&c, files, errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_directories_and_skips_symlinks() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("a/b")).unwrap();
        fs::write(d.path().join("a/b/f"), b"x").unwrap();
        fs::write(d.path().join("g"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("a/link-to-etc")).unwrap();
        std::os::unix::fs::symlink(d.path().join("g"), d.path().join("a/link-to-g")).unwrap();
        let (files, errors) = regular_files(&[d.path().to_path_buf()]);
        assert!(errors.is_empty());
        assert_eq!(files, vec![d.path().join("a/b/f"), d.path().join("g")]);
    }
}
