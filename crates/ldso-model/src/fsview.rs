//! The filesystem as the loader model sees it: a small trait, [`FsView`], so that the decisions
//! in [`crate::resolve`] (and in tools built on the model) can be tested on an in-memory tree
//! ([`crate::memfs::MemFs`]); [`crate::hostfs::HostFs`] is the only implementation that touches
//! the disk.

use elfpatch::note::ResolutionCache;
use elfpatch::source::{read_range, Source};
use elfpatch::Elf;

use crate::dlopen::{self, DlopenDecl};
use crate::target::RawHeader;
use object::elf::{DF_1_NODEFLIB, PT_NOTE, SHT_NOBITS, SHT_NOTE};

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
    /// The resolution-cache note (`.note.nixos.ldcache`): `None` when there is none, the error
    /// (with its file offset) when it does not parse.
    pub ld_cache_note: Option<Result<ResolutionCache, String>>,
    /// What the file declares in `.note.dlopen`.
    pub dlopen_declared: Vec<DlopenDecl>,
    /// Why its `.note.dlopen` could not be read, if it could not.
    pub dlopen_note_error: Option<String>,
    /// The strings of its `.rodata` that [`crate::dlopen::NVIDIA_TABLE`] watches for.
    pub rodata_names: Vec<Bytes>,
}

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
            ..ElfInfo::default()
        }
    }

    /// [`ElfInfo::of`], plus what only the file's bytes say: its resolution-cache note, its
    /// `.note.dlopen` and the watched strings of its `.rodata` (read section by section, never
    /// the whole file).
    pub fn read<S: Source + ?Sized>(src: &S, e: &Elf) -> ElfInfo {
        let mut info = ElfInfo::of(e);
        info.ld_cache_note = match elfpatch::note::find(src, e) {
            Ok(None) => None,
            Ok(Some(n)) => Some(n.cache().map_err(|e| e.to_string())),
            Err(e) => Some(Err(e.to_string())),
        };
        let usable = !e.section_headers_unusable();
        let sections = e.sections.iter().filter(|_| usable);
        let mut note_ranges: Vec<(u64, u64)> = sections
            .clone()
            .filter(|s| s.shdr.sh_type == SHT_NOTE && s.shdr.sh_size > 0)
            .map(|s| (s.shdr.sh_offset, s.shdr.sh_size))
            .collect();
        if note_ranges.is_empty() {
            // Without section headers the notes are found through their segments.
            note_ranges = e
                .phdrs
                .iter()
                .filter(|p| p.p_type == PT_NOTE && p.p_filesz > 0)
                .map(|p| (p.p_offset, p.p_filesz))
                .collect();
        }
        for (offset, size) in note_ranges {
            let parsed = read_range(src, offset, size, "note section")
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    dlopen::parse_notes(e.format, &b)
                        .map_err(|x| format!("{x} (file offset {:#x})", offset + x.offset as u64))
                });
            match parsed {
                Ok(d) => info.dlopen_declared.extend(d),
                Err(x) => info.dlopen_note_error = Some(x),
            }
        }
        for s in sections.filter(|s| s.name == b".rodata" && s.shdr.sh_type != SHT_NOBITS) {
            if let Ok(b) = read_range(src, s.shdr.sh_offset, s.shdr.sh_size, ".rodata") {
                info.rodata_names.extend(dlopen::scan_rodata(&b));
            }
        }
        info
    }

    /// `DT_RPATH` as the loader uses it: ignored when `DT_RUNPATH` is present.
    pub fn effective_rpath(&self) -> Option<&[u8]> {
        match self.runpath {
            Some(_) => None,
            None => self.rpath.as_deref(),
        }
    }

    /// Whether `DF_1_NODEFLIB` is set: the default directories are not searched (nor cache
    /// entries inside them).
    pub fn nodeflib(&self) -> bool {
        self.flags_1 & u64::from(DF_1_NODEFLIB) != 0
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

/// Why the dynamic information of a file could not be read. The message does not name the file:
/// the caller knows which one it asked for.
#[derive(Debug, thiserror::Error)]
pub enum ReadElfError {
    /// Opening or reading the file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file is not an ELF file elfpatch can read (the message gives the offset).
    #[error(transparent)]
    Elf(#[from] elfpatch::Error),
    /// Not an ELF file at all.
    #[error("not an ELF file")]
    NotElf,
}

/// The filesystem, as the loader model needs it.
pub trait FsView {
    /// What is at `path`, following symlinks (the loader's `open` + first `read`).
    fn probe(&self, path: &[u8]) -> Probe;
    /// The dynamic information of the ELF file at `path`.
    fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, ReadElfError>;
    /// Whether `path` is a directory (symlinks followed).
    fn is_dir(&self, path: &[u8]) -> bool;
    /// `path` with every symlink resolved, if it exists.
    fn canonical(&self, path: &[u8]) -> Option<Bytes>;
    /// The current directory of the process being modelled (relative paths start there).
    fn cwd(&self) -> Bytes;
}

/// How many symlinks one lookup may follow (the kernel's limit).
pub const MAX_LINKS: usize = 40;

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
mod tests {
    use super::*;

    #[test]
    fn origin_is_the_directory_part() {
        assert_eq!(dirname(b"/a/b/libc.so.6"), b"/a/b");
        assert_eq!(dirname(b"/libc.so.6"), b"/");
        assert_eq!(absolute(b"lib/x.so", b"/w"), b"/w/lib/x.so");
        assert_eq!(absolute(b"/x.so", b"/w"), b"/x.so");
    }
}
