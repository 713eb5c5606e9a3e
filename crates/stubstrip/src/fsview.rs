//! The filesystem as the loader model sees it: a small trait, so that the decisions in
//! [`crate::resolve`] and [`crate::audit`] can be tested on an in-memory tree, and [`HostFs`], the
//! only implementation that touches the disk (optionally inside a `--root` sysroot).

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use elfpatch::Elf;

use crate::target::RawHeader;

/// Paths and strings as the ELF file holds them: bytes, not necessarily UTF-8.
pub type Bytes = Vec<u8>;

/// Device and inode: the loader's notion of "the same file".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// The dynamic-linking facts of one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    /// `DT_NEEDED`, in order.
    pub needed: Vec<Bytes>,
    /// `DT_RUNPATH`.
    pub runpath: Option<Bytes>,
    /// `DT_RPATH`.
    pub rpath: Option<Bytes>,
    /// `DT_SONAME`.
    pub soname: Option<Bytes>,
    /// `DT_FLAGS_1` (0 when absent).
    pub flags_1: u64,
    /// `PT_INTERP`.
    pub interpreter: Option<Bytes>,
    /// Whether the file has `PT_DYNAMIC`.
    pub dynamic: bool,
}

/// `DF_1_NODEFLIB`: do not search the default directories (nor cache entries inside them).
pub const DF_1_NODEFLIB: u64 = 0x800;

impl ElfInfo {
    /// The parts of a parsed file this crate uses.
    pub fn of(e: &Elf) -> ElfInfo {
        ElfInfo {
            needed: e.needed().into_iter().map(<[u8]>::to_vec).collect(),
            runpath: e.runpath().map(<[u8]>::to_vec),
            rpath: e.rpath().map(<[u8]>::to_vec),
            soname: e.soname().map(<[u8]>::to_vec),
            flags_1: e.flags_1().unwrap_or(0),
            interpreter: e.interpreter().map(<[u8]>::to_vec),
            dynamic: e.dynamic.is_some(),
        }
    }

    /// `DT_RPATH` as the loader uses it: ignored when `DT_RUNPATH` is present.
    pub fn effective_rpath(&self) -> Option<&[u8]> {
        match self.runpath {
            Some(_) => None,
            None => self.rpath.as_deref(),
        }
    }

    /// Whether `DF_1_NODEFLIB` is set.
    pub fn nodeflib(&self) -> bool {
        self.flags_1 & DF_1_NODEFLIB != 0
    }
}

/// What is at a path (symlinks followed), as far as opening a library goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Nothing (`ENOENT`, `ENOTDIR`).
    Missing,
    /// `EACCES`.
    Denied,
    /// A directory.
    Directory,
    /// Another error.
    Failed(String),
    /// A file: its identity and its first bytes, decoded.
    File(FileId, RawHeader),
}

/// The filesystem, as the loader model needs it.
pub trait FsView {
    /// What is at `path`, following symlinks (the loader's `open` + first `read`).
    fn probe(&self, path: &[u8]) -> Probe;
    /// The dynamic information of the ELF file at `path`.
    fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, String>;
    /// Whether `path` is a directory (symlinks followed).
    fn is_dir(&self, path: &[u8]) -> bool;
    /// `path` with every symlink resolved, if it exists.
    fn canonical(&self, path: &[u8]) -> Option<Bytes>;
    /// The current directory of the process being modelled (relative paths start there).
    fn cwd(&self) -> Bytes;
}

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

/// How many symlinks one lookup may follow (the kernel's limit).
const MAX_LINKS: usize = 40;

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
        _ => Probe::Failed(e.to_string()),
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
            return Probe::Failed(format!("cannot read file data: {e}"));
        }
        Probe::File(
            FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            },
            RawHeader::parse(&head),
        )
    }

    fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, String> {
        let host = self.host_path(path).map_err(|e| e.to_string())?;
        let f = File::open(&host).map_err(|e| e.to_string())?;
        let len = f.metadata().map_err(|e| e.to_string())?.len();
        let elf = Elf::read_file(&f, len).map_err(|e| e.to_string())?;
        Ok(ElfInfo::of(&elf))
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

use std::os::unix::ffi::OsStringExt;

/// The directory part of a path the way the loader computes `$ORIGIN`: everything before the last
/// `/` (`/` itself for files in the root directory).
pub fn dirname(path: &[u8]) -> Bytes {
    match path.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/".to_vec(),
        Some(i) => path[..i].to_vec(),
        None => b".".to_vec(),
    }
}

/// `path` made absolute against `cwd` (textually, without resolving anything).
pub fn absolute(path: &[u8], cwd: &[u8]) -> Bytes {
    if path.starts_with(b"/") {
        return path.to_vec();
    }
    let mut p = cwd.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(path);
    p
}

#[cfg(test)]
pub mod mem {
    //! An in-memory filesystem for tests of the pure parts.

    use std::collections::HashMap;

    use super::*;
    use crate::target::{CLASS32, CLASS64, DATA_LSB};

    /// One node.
    #[derive(Clone, Debug)]
    pub enum Node {
        /// A directory.
        Dir,
        /// A symlink to this path.
        Link(Bytes),
        /// An ELF file: header bytes and dynamic information.
        Elf(Vec<u8>, ElfInfo),
        /// Any other file.
        Data(Vec<u8>),
    }

    /// A tree of nodes keyed by absolute path; parent directories are implied.
    #[derive(Clone, Debug, Default)]
    pub struct MemFs {
        /// The nodes.
        pub nodes: HashMap<Bytes, Node>,
    }

    /// The first 64 bytes of an ELF file of this class and machine.
    pub fn header(class: u8, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = DATA_LSB;
        h[6] = 1;
        h[16..18].copy_from_slice(&3u16.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        if class == CLASS64 {
            h[54..56].copy_from_slice(&56u16.to_le_bytes());
        } else {
            assert_eq!(class, CLASS32);
            h[42..44].copy_from_slice(&32u16.to_le_bytes());
        }
        h
    }

    impl MemFs {
        /// Adds an x86-64 library (directories are implied).
        pub fn lib(&mut self, path: &str, info: ElfInfo) -> &mut Self {
            self.elf(path, CLASS64, crate::target::EM_X86_64, info)
        }

        /// Adds an ELF file of any class and machine.
        pub fn elf(&mut self, path: &str, class: u8, machine: u16, info: ElfInfo) -> &mut Self {
            self.nodes.insert(
                path.as_bytes().to_vec(),
                Node::Elf(header(class, machine), info),
            );
            self
        }

        /// Adds a symlink.
        pub fn link(&mut self, path: &str, target: &str) -> &mut Self {
            self.nodes.insert(
                path.as_bytes().to_vec(),
                Node::Link(target.as_bytes().to_vec()),
            );
            self
        }

        /// Adds a non-ELF file.
        pub fn data(&mut self, path: &str, bytes: &[u8]) -> &mut Self {
            self.nodes
                .insert(path.as_bytes().to_vec(), Node::Data(bytes.to_vec()));
            self
        }

        /// Adds an empty directory.
        pub fn dir(&mut self, path: &str) -> &mut Self {
            self.nodes.insert(path.as_bytes().to_vec(), Node::Dir);
            self
        }

        fn normalize(path: &[u8]) -> Bytes {
            let mut out: Vec<&[u8]> = Vec::new();
            for c in path.split(|&c| c == b'/') {
                match c {
                    b"" | b"." => {}
                    b".." => {
                        out.pop();
                    }
                    c => out.push(c),
                }
            }
            let mut p = Vec::new();
            for c in out {
                p.push(b'/');
                p.extend_from_slice(c);
            }
            if p.is_empty() {
                p.push(b'/');
            }
            p
        }

        fn resolve(&self, path: &[u8]) -> Option<(Bytes, &Node)> {
            let mut p = Self::normalize(&absolute(path, b"/work"));
            for _ in 0..MAX_LINKS {
                match self.nodes.get(&p) {
                    Some(Node::Link(t)) => p = Self::normalize(&absolute(t, &dirname(&p))),
                    Some(n) => return Some((p, n)),
                    None => return None,
                }
            }
            None
        }

        fn implied_dir(&self, path: &[u8]) -> bool {
            let mut prefix = Self::normalize(path);
            if prefix != b"/" {
                prefix.push(b'/');
            }
            self.nodes.keys().any(|k| k.starts_with(&prefix))
        }

        fn id(path: &[u8]) -> FileId {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            path.hash(&mut h);
            FileId {
                dev: 1,
                ino: h.finish(),
            }
        }
    }

    impl FsView for MemFs {
        fn probe(&self, path: &[u8]) -> Probe {
            match self.resolve(path) {
                Some((_, Node::Dir)) => Probe::Directory,
                Some((p, Node::Elf(h, _))) => Probe::File(Self::id(&p), RawHeader::parse(h)),
                Some((p, Node::Data(d))) => Probe::File(Self::id(&p), RawHeader::parse(d)),
                Some((_, Node::Link(_))) => Probe::Failed("loop".into()),
                None if self.implied_dir(path) => Probe::Directory,
                None => Probe::Missing,
            }
        }

        fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, String> {
            match self.resolve(path) {
                Some((_, Node::Elf(_, info))) => Ok(info.clone()),
                _ => Err("not an ELF file".into()),
            }
        }

        fn is_dir(&self, path: &[u8]) -> bool {
            matches!(self.resolve(path), Some((_, Node::Dir)))
                || (self.resolve(path).is_none() && self.implied_dir(path))
        }

        fn canonical(&self, path: &[u8]) -> Option<Bytes> {
            match self.resolve(path) {
                Some((p, _)) => Some(p),
                None if self.implied_dir(path) => Some(Self::normalize(path)),
                None => None,
            }
        }

        fn cwd(&self) -> Bytes {
            b"/work".to_vec()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_is_the_directory_part() {
        assert_eq!(dirname(b"/a/b/libc.so.6"), b"/a/b");
        assert_eq!(dirname(b"/libc.so.6"), b"/");
        assert_eq!(absolute(b"lib/x.so", b"/w"), b"/w/lib/x.so");
        assert_eq!(absolute(b"/x.so", b"/w"), b"/x.so");
    }

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
