//! [`HostFs`]: the disk, optionally seen from inside a sysroot (`--root`). The only part of the
//! model that reads files.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use elfpatch::Elf;

use crate::fsview::{Bytes, ElfInfo, FileId, FsView, Probe, ReadElfError, MAX_LINKS};
use crate::target::RawHeader;

/// The disk, seen from `root` (`/` when `None`) the way a `chroot` would see it: absolute
/// symlinks and `..` never leave the root.
#[derive(Clone, Debug, Default)]
pub struct HostFs {
    /// The sysroot, if any.
    pub root: Option<PathBuf>,
}

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

impl HostFs {
    /// The host path for a path of the modelled system, and that path with symlinks resolved.
    pub fn locate(&self, path: &[u8]) -> io::Result<(PathBuf, Bytes)> {
        let Some(root) = &self.root else {
            return Ok((PathBuf::from(os(path)), path.to_vec()));
        };
        let mut pending: VecDeque<Bytes> = split(path);
        let mut stack: Vec<Bytes> = Vec::new();
        let mut links = 0;
        let host = |stack: &[Bytes]| {
            let mut p = root.clone();
            for c in stack {
                p.push(os(c));
            }
            p
        };
        while let Some(c) = pending.pop_front() {
            if c == b"." {
                continue;
            }
            if c == b".." {
                stack.pop();
                continue;
            }
            stack.push(c);
            let here = host(&stack);
            match std::fs::symlink_metadata(&here) {
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(io::Error::other("too many levels of symbolic links"));
                    }
                    let target = std::fs::read_link(&here)?;
                    let t = target.as_os_str().as_bytes();
                    stack.pop();
                    if t.starts_with(b"/") {
                        stack.clear();
                    }
                    for c in split(t).into_iter().rev() {
                        pending.push_front(c);
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    stack.extend(pending.drain(..));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        let mut logical = Vec::new();
        for c in &stack {
            logical.push(b'/');
            logical.extend_from_slice(c);
        }
        if logical.is_empty() {
            logical.push(b'/');
        }
        Ok((host(&stack), logical))
    }

    /// The host path for a path of the modelled system.
    pub fn host_path(&self, path: &[u8]) -> io::Result<PathBuf> {
        self.locate(path).map(|(p, _)| p)
    }

    /// Reads a whole file of the modelled system.
    pub fn read(&self, path: &[u8]) -> io::Result<Vec<u8>> {
        std::fs::read(self.host_path(path)?)
    }
}

fn split(path: &[u8]) -> VecDeque<Bytes> {
    path.split(|&c| c == b'/')
        .filter(|c| !c.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn classify(e: &io::Error) -> Probe {
    match e.raw_os_error() {
        Some(2) | Some(20) => Probe::Missing,
        Some(13) => Probe::Denied,
        _ if e.kind() == io::ErrorKind::NotFound => Probe::Missing,
        _ => Probe::Failed(elfpatch::error::os_words(e)),
    }
}

impl FsView for HostFs {
    fn probe(&self, path: &[u8]) -> Probe {
        let host = match self.host_path(path) {
            Ok(p) => p,
            Err(e) => return classify(&e),
        };
        let mut f = match File::open(&host) {
            Ok(f) => f,
            Err(e) => return classify(&e),
        };
        let meta = match f.metadata() {
            Ok(m) => m,
            Err(e) => return Probe::Failed(e.to_string()),
        };
        if meta.is_dir() {
            return Probe::Directory;
        }
        let mut head = Vec::with_capacity(64);
        if let Err(e) = (&mut f).take(64).read_to_end(&mut head) {
            return Probe::Failed(format!(
                "cannot read file data: {}",
                elfpatch::error::os_words(&e)
            ));
        }
        Probe::File(
            FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            },
            RawHeader::parse(&head),
        )
    }

    fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, ReadElfError> {
        let host = self.host_path(path)?;
        let f = File::open(&host)?;
        let len = f.metadata()?.len();
        let elf = Elf::read_file(&f, len)?;
        let src = elfpatch::source::FileSource { file: &f, len };
        Ok(ElfInfo::read(&src, &elf))
    }

    fn is_dir(&self, path: &[u8]) -> bool {
        self.host_path(path).map(|p| p.is_dir()).unwrap_or(false)
    }

    fn canonical(&self, path: &[u8]) -> Option<Bytes> {
        match &self.root {
            None => std::fs::canonicalize(Path::new(os(path)))
                .ok()
                .map(|p| p.into_os_string().into_vec()),
            Some(_) => {
                let (host, logical) = self.locate(path).ok()?;
                host.exists().then_some(logical)
            }
        }
    }

    fn cwd(&self) -> Bytes {
        match &self.root {
            Some(_) => b"/".to_vec(),
            None => std::env::current_dir()
                .map(|p| p.into_os_string().into_vec())
                .unwrap_or_else(|_| b"/".to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_keeps_absolute_symlinks_inside() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("usr/lib/x")).unwrap();
        std::fs::write(root.join("usr/lib/x/libfoo.so.1.2"), b"x").unwrap();
        std::os::unix::fs::symlink("/usr/lib", root.join("lib")).unwrap();
        std::os::unix::fs::symlink("libfoo.so.1.2", root.join("usr/lib/x/libfoo.so.1")).unwrap();
        std::os::unix::fs::symlink("../../../../../etc", root.join("usr/lib/escape")).unwrap();
        let fs = HostFs {
            root: Some(root.to_path_buf()),
        };
        let (host, logical) = fs.locate(b"/lib/x/libfoo.so.1").unwrap();
        assert_eq!(host, root.join("usr/lib/x/libfoo.so.1.2"));
        assert_eq!(logical, b"/usr/lib/x/libfoo.so.1.2");
        assert_eq!(fs.locate(b"/usr/lib/escape").unwrap().0, root.join("etc"));
        assert!(matches!(fs.probe(b"/lib/x/libfoo.so.1"), Probe::File(..)));
        assert_eq!(fs.probe(b"/lib/x/libbar.so.1"), Probe::Missing);
        assert!(fs.is_dir(b"/lib/x"));
    }
}
