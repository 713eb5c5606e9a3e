//! The filesystem as the loader model sees it: a small trait, [`FsView`], so that the decisions
//! in [`crate::resolve`] (and in tools built on the model) can be tested on an in-memory tree
//! ([`crate::memfs::MemFs`]); [`crate::hostfs::HostFs`] is the only implementation that touches
//! the disk.

use elfpatch::note::ResolutionCache;
use elfpatch::source::{check_range, read_range, Source, MAX_READ};
use elfpatch::Elf;

use crate::dlopen::{self, DlopenDecl, DlopenFacts};
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
    /// What elfpatch found reading the parts of the file no loader reads (the section headers):
    /// damage it worked around or that makes it refuse an edit, and facts no loader cares about
    /// ([`elfpatch::Warning`]). Nothing the loader model decides on; `stubstrip audit` reports it.
    pub header_warnings: Vec<elfpatch::Warning>,
    /// Layout inconsistencies a post-processor can leave (a hash table outside its segment,
    /// sections no `PT_LOAD` covers): [`elfpatch::layout::layout_problems`], one line each.
    /// `stubstrip audit` and `check` report them.
    pub layout_problems: Vec<String>,
}

impl ElfInfo {
    /// What the `dlopen` model reads of the file ([`dlopen::dlopen_edges`]).
    pub fn dlopen_facts(&self) -> DlopenFacts<'_> {
        DlopenFacts {
            declared: &self.dlopen_declared,
            rodata_names: &self.rodata_names,
            needed: &self.needed,
            soname: self.soname.as_deref(),
        }
    }

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
            header_warnings: e.warnings.clone(),
            layout_problems: elfpatch::layout::layout_problems(e)
                .into_iter()
                .map(|p| p.message)
                .collect(),
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
            let names = rodata_names(src, s.shdr.sh_offset, s.shdr.sh_size, RODATA_WINDOW);
            info.rodata_names.extend(names);
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

/// How much of a `.rodata` section is read at a time. Big libraries have tens of MiB of it
/// (libLLVM 35 MiB): read whole, every library a run loads costs a fresh allocation of that size
/// (page faults, zeroing, unmapping) and as much resident memory per worker.
const RODATA_WINDOW: usize = 256 << 10;

/// [`dlopen::scan_rodata`] of the `.rodata` at `offset`, `size` bytes, read `window` bytes at a
/// time; the same names as reading it whole, and none where that read would fail (the range
/// outside the file, over elfpatch's read limit, an I/O error).
fn rodata_names<S: Source + ?Sized>(src: &S, offset: u64, size: u64, window: usize) -> Vec<Bytes> {
    let whole = || {
        read_range(src, offset, size, ".rodata")
            .map(|b| dlopen::scan_rodata(&b))
            .unwrap_or_default()
    };
    if size <= window as u64 {
        return whole();
    }
    if check_range(src.len(), offset, size, ".rodata").is_err() || size > MAX_READ {
        return Vec::new();
    }
    let mut scan = dlopen::RodataScan::default();
    let mut buf = vec![0u8; window + dlopen::RODATA_OVERLAP];
    let (mut kept, mut done) = (0usize, 0u64);
    while done < size {
        let n = (size - done).min(window as u64) as usize;
        if src
            .read_exact_at(offset + done, &mut buf[kept..kept + n])
            .is_err()
        {
            return Vec::new();
        }
        let filled = kept + n;
        scan.window(&buf[..filled]);
        let keep = dlopen::RODATA_OVERLAP.min(filled);
        buf.copy_within(filled - keep..filled, 0);
        kept = keep;
        done += n as u64;
    }
    if scan.needs_whole() {
        return whole();
    }
    scan.names()
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

    /// Windows of every size from 1 byte up, over sections with the watched names and a
    /// libnvrtc builtins name at every offset, give what reading the section whole gives.
    #[test]
    fn rodata_read_by_windows_gives_what_reading_it_whole_gives() {
        let planted: [&[u8]; 5] = [
            b"libcuda.so.1\0",
            b"libnvidia-ml.so.1\0",
            b"xlibcuda.so.1\0",
            b"libcuda.so.12\0",
            b"libnvrtc-builtins.so.12.8\0",
        ];
        for p in planted {
            for at in 0..40 {
                let mut section = vec![b'.'; 70];
                section[at..at + p.len()].copy_from_slice(p);
                // The section lies after 3 bytes of something else in the file.
                let mut file = b"abc".to_vec();
                file.extend_from_slice(&section);
                let want = dlopen::scan_rodata(&section);
                assert!(!want.is_empty() || p == b"libcuda.so.12\0");
                for window in 1..80 {
                    let got = rodata_names(&file[..], 3, section.len() as u64, window);
                    assert_eq!(got, want, "{:?} at {at}, window {window}", p);
                }
            }
        }
        // Both names, in the scanner's order whatever the order in the section.
        let mut s = b"libnvidia-ml.so.1\0".to_vec();
        s.extend_from_slice(&[b'x'; 30]);
        s.extend_from_slice(b"libcuda.so.1\0");
        let want = dlopen::scan_rodata(&s);
        assert_eq!(want.len(), 2);
        assert_eq!(rodata_names(&s[..], 0, s.len() as u64, 7), want);
        // A range the file does not hold gives nothing, window by window too.
        assert_eq!(
            rodata_names(&s[..], 10, s.len() as u64, 7),
            Vec::<Bytes>::new()
        );
    }

    #[test]
    fn origin_is_the_directory_part() {
        assert_eq!(dirname(b"/a/b/libc.so.6"), b"/a/b");
        assert_eq!(dirname(b"/libc.so.6"), b"/");
        assert_eq!(absolute(b"lib/x.so", b"/w"), b"/w/lib/x.so");
        assert_eq!(absolute(b"/x.so", b"/w"), b"/x.so");
    }
}
