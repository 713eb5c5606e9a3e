//! [`MemFs`]: an in-memory tree of directories, symlinks and ELF files, for tests of the model
//! and of tools built on it (no file is read).

use std::collections::HashMap;

use crate::fsview::{
    absolute, dirname, Bytes, ElfInfo, FileId, FsView, Probe, ReadElfError, MAX_LINKS,
};
use crate::ldcache::LdCache;
use crate::settings::{Interpreter, LoaderSettings};
use crate::target::{RawHeader, Target};
use object::elf::{ELFCLASS32, ELFCLASS64, ELFDATA2LSB, EM_X86_64, ET_DYN, EV_CURRENT};

/// One node.
#[derive(Clone, Debug)]
pub enum Node {
    /// A directory.
    Dir,
    /// A symlink to this path.
    Link(Bytes),
    /// An ELF file: header bytes and dynamic information.
    Elf(Vec<u8>, Box<ElfInfo>),
    /// Any other file.
    Data(Vec<u8>),
}

/// A tree of nodes keyed by absolute path; parent directories are implied.
#[derive(Clone, Debug, Default)]
pub struct MemFs {
    /// The nodes.
    pub nodes: HashMap<Bytes, Node>,
}

/// The settings of an x86-64 glibc loader whose default directories are `/lib/` and `/usr/lib/`
/// (`$LIB` is `lib`, `$PLATFORM` `x86_64`, `LD_LIBRARY_PATH` unset), with `cache` as its
/// `ld.so.cache`. It reads the resolution-cache note and follows `dlopen`s.
pub fn x86_64_settings(cache: Option<LdCache>) -> LoaderSettings {
    LoaderSettings {
        target: Target::of(&RawHeader::parse(&header(ELFCLASS64, EM_X86_64))),
        system_dirs: vec![b"/lib/".to_vec(), b"/usr/lib/".to_vec()],
        lib: b"lib".to_vec(),
        platform: Some(b"x86_64".to_vec()),
        cache_path: b"/etc/ld.so.cache".to_vec(),
        cache,
        ld_library_path: None,
        interpreter: Some(Interpreter {
            path: b"/lib64/ld-linux-x86-64.so.2".to_vec(),
            soname: Some(b"ld-linux-x86-64.so.2".to_vec()),
        }),
        read_ld_cache_note: true,
        follow_dlopen: true,
    }
}

/// The dynamic information of a file with `PT_DYNAMIC`, these `DT_NEEDED` entries and these run
/// paths.
pub fn dynamic_info(needed: &[&str], runpath: Option<&str>, rpath: Option<&str>) -> ElfInfo {
    ElfInfo {
        needed: needed.iter().map(|n| n.as_bytes().to_vec()).collect(),
        runpath: runpath.map(|r| r.as_bytes().to_vec()),
        rpath: rpath.map(|r| r.as_bytes().to_vec()),
        dynamic: true,
        ..ElfInfo::default()
    }
}

/// The first 64 bytes of an ELF file of this class and machine (little-endian, `ET_DYN`).
///
/// # Panics
/// When `class` is neither `ELFCLASS32` nor `ELFCLASS64`.
pub fn header(class: u8, machine: u16) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = class;
    h[5] = ELFDATA2LSB;
    h[6] = EV_CURRENT;
    h[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
    h[18..20].copy_from_slice(&machine.to_le_bytes());
    h[20..24].copy_from_slice(&u32::from(EV_CURRENT).to_le_bytes());
    if class == ELFCLASS64 {
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
    } else {
        assert_eq!(class, ELFCLASS32);
        h[42..44].copy_from_slice(&32u16.to_le_bytes());
    }
    h
}

impl MemFs {
    /// Adds an x86-64 library (directories are implied).
    pub fn lib(&mut self, path: &str, info: ElfInfo) -> &mut Self {
        self.elf(path, ELFCLASS64, EM_X86_64, info)
    }

    /// Adds an ELF file of any class and machine.
    pub fn elf(&mut self, path: &str, class: u8, machine: u16, info: ElfInfo) -> &mut Self {
        self.nodes.insert(
            path.as_bytes().to_vec(),
            Node::Elf(header(class, machine), Box::new(info)),
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

    fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, ReadElfError> {
        match self.resolve(path) {
            Some((_, Node::Elf(_, info))) => Ok((**info).clone()),
            _ => Err(ReadElfError::NotElf),
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
