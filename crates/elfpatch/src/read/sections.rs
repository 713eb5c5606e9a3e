//! The section header table: the headers with their names, and what is wrong with them.
//!
//! No loader reads section headers, so a table that cannot be read makes a file one without
//! them (with a warning); they are read so that edits keep them consistent with what moves.

use object::elf;

use super::Elf;
use crate::error::{Error, Result, Warning, WarningKind};
use crate::format::{Format, Header, Shdr};
use crate::source::{read_range, Source};

/// A section header with its index and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Index in the section header table.
    pub index: usize,
    /// Name from the section name string table (empty when unavailable).
    pub name: Vec<u8>,
    /// The header itself.
    pub shdr: Shdr,
}

/// Where a section header table that does not fit in the file claims to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    /// `e_shoff`.
    pub offset: u64,
    /// The number of headers (`e_shnum`, or section 0's `sh_size`); `None` when section 0, which
    /// would hold it, lies past the end itself.
    pub count: Option<u64>,
    /// `e_shentsize`.
    pub entry_size: u64,
}

/// Reads the section headers and returns them with the real program header count (which lives in
/// section 0's `sh_info` when `e_phnum` is `PN_XNUM`), and where the table claims to be when it
/// does not fit in the file.
///
/// No loader reads section headers, so a table that cannot be read is no reason to refuse
/// reading the file: it is read as a file without section headers
/// ([`Elf::section_headers_unusable`]). An entry size that is not the class's is worked around
/// with a warning (an edit that appends data drops the table, and says so:
/// [`crate::plan::dropped`]); a table past the end of the file, or one whose size overflows,
/// is a file cut short, which every edit refuses ([`Elf::check_section_table`]). Only
/// `PN_XNUM` needs section 0, and no loader supports that (the kernel reads at most 64 KiB of
/// program headers, glibc takes `e_phnum` as it is).
pub(super) fn read_sections<S: Source + ?Sized>(
    src: &S,
    f: Format,
    h: &Header,
    warnings: &mut Vec<Warning>,
) -> Result<(Vec<Section>, usize, Option<OutOfBounds>)> {
    let xnum = || {
        Error::malformed(
            0,
            "e_phnum is PN_XNUM but there is no readable section 0 to hold the count",
        )
    };
    let phnum = usize::from(h.e_phnum);
    if h.e_shoff == 0 {
        if h.e_phnum == elf::PN_XNUM {
            return Err(xnum());
        }
        return Ok((Vec::new(), phnum, None));
    }
    let entsize_ok = usize::from(h.e_shentsize) == f.shdr_size();
    if !entsize_ok {
        warnings.push(Warning {
            kind: WarningKind::Damage,
            part: "section header table".into(),
            problem: "section headers have wrong size",
            detail: format!(
                "e_shentsize {}, expected {}; the table is ignored",
                h.e_shentsize,
                f.shdr_size()
            ),
        });
    }
    match read_section_table(src, f, h) {
        Ok((sections, phnum, names)) => {
            warnings.extend(name_warnings(h, &sections, &names));
            warnings.extend(alignment_warnings(&sections));
            Ok((sections, phnum, None))
        }
        // A read that failed for the operating system's reasons says nothing about the table.
        Err(e) if e.kind() == crate::ErrorKind::Io => Err(e),
        Err(_) if h.e_phnum == elf::PN_XNUM => Err(xnum()),
        Err(_) if !entsize_ok => Ok((Vec::new(), phnum, None)),
        Err(_) => {
            let bounds = OutOfBounds {
                offset: h.e_shoff,
                count: section_count(src, f, h),
                entry_size: u64::from(h.e_shentsize),
            };
            warnings.push(Warning {
                kind: WarningKind::Damage,
                part: "section header table".into(),
                problem: "section header table out of bounds",
                detail: format!(
                    "{}, the file has {:#x} bytes; the file is most likely cut short, and elfpatch \
                     refuses to edit it",
                    crate::error::table_extent(bounds.offset, bounds.count, bounds.entry_size),
                    src.len()
                ),
            });
            Ok((Vec::new(), phnum, Some(bounds)))
        }
    }
}

/// The number of section headers the ELF header gives: `e_shnum`, or when that is 0, section 0's
/// `sh_size` (`None` when section 0 cannot be read).
fn section_count<S: Source + ?Sized>(src: &S, f: Format, h: &Header) -> Option<u64> {
    if h.e_shnum != 0 {
        return Some(u64::from(h.e_shnum));
    }
    read_range(src, h.e_shoff, f.shdr_size() as u64, "section header 0")
        .ok()
        .map(|b| f.decode_shdr(&b).sh_size)
}

/// What is wrong with the section names: patchelf refuses such files, we only lose the names
/// (used to recognize a few sections; every decision also checks types and addresses).
fn name_warnings(h: &Header, sections: &[Section], names: &Names) -> Vec<Warning> {
    let table = |problem: &'static str, detail: String| Warning {
        kind: WarningKind::Damage,
        part: "section header table".into(),
        problem,
        detail,
    };
    let shstrndx = u64::from(h.e_shstrndx);
    match names {
        Names::None => return Vec::new(),
        Names::IndexOutOfBounds => {
            return vec![table(
                "string table index out of bounds",
                format!(
                    "e_shstrndx {shstrndx}, {} sections; section names ignored",
                    sections.len()
                ),
            )]
        }
        Names::PastEnd { offset, size } => {
            return vec![table(
                "section name string table: data region extends past file end",
                format!("{offset:#x}+{size:#x}; section names ignored"),
            )]
        }
        Names::Read(bytes) if bytes.is_empty() => {
            return vec![table(
                "section name string table size is zero",
                "section names ignored".into(),
            )]
        }
        Names::Read(_) => {}
    }
    let Names::Read(bytes) = names else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if bytes.last() != Some(&0) {
        out.push(table(
            "section name string table is not zero terminated",
            "the last name is ignored".into(),
        ));
    }
    for s in sections.iter().skip(1) {
        let part = format!("section header {}", s.index);
        if s.shdr.sh_name as usize >= bytes.len() {
            out.push(Warning {
                kind: WarningKind::Damage,
                part,
                problem: "section name offset out of bounds",
                detail: format!(
                    "sh_name {:#x}, name table of {} bytes; name ignored",
                    s.shdr.sh_name,
                    bytes.len()
                ),
            });
        } else if bytes[s.shdr.sh_name as usize] == 0 && s.shdr.sh_type != elf::SHT_NULL {
            // Nothing is lost: the section is found by its type and address like every other.
            out.push(Warning {
                kind: WarningKind::Harmless,
                part,
                problem: "refers to an unnamed section",
                detail: format!("type {:#x}, sh_name {:#x}", s.shdr.sh_type, s.shdr.sh_name),
            });
        }
    }
    out
}

/// Sections whose file offset is not a multiple of their alignment: a reader that takes the
/// header at its word (patchelf) would read misaligned tables. We find `.dynamic` and the other
/// tables through the program headers and the dynamic array, not through these headers.
fn alignment_warnings(sections: &[Section]) -> Vec<Warning> {
    sections
        .iter()
        .filter(|s| {
            let a = s.shdr.sh_addralign;
            s.shdr.has_file_bytes() && a > 1 && a.is_power_of_two() && s.shdr.sh_offset % a != 0
        })
        .map(|s| Warning {
            kind: WarningKind::Harmless,
            part: format!("section header {}", s.index),
            problem: "section content is not naturally aligned",
            detail: format!(
                "sh_offset {:#x}, sh_addralign {}; the loader does not read it",
                s.shdr.sh_offset, s.shdr.sh_addralign
            ),
        })
        .collect()
}

/// The section name string table as found.
enum Names {
    /// `e_shstrndx` is 0, or names a section that is not a string table (nothing to say).
    None,
    /// `e_shstrndx` is past the table.
    IndexOutOfBounds,
    /// The table's bytes lie past the end of the file.
    PastEnd { offset: u64, size: u64 },
    /// Its bytes.
    Read(Vec<u8>),
}

fn read_section_table<S: Source + ?Sized>(
    src: &S,
    f: Format,
    h: &Header,
) -> Result<(Vec<Section>, usize, Names)> {
    let mut phnum = usize::from(h.e_phnum);
    if usize::from(h.e_shentsize) != f.shdr_size() {
        return Err(Error::malformed(
            0,
            format!(
                "e_shentsize is {}, expected {}",
                h.e_shentsize,
                f.shdr_size()
            ),
        ));
    }
    // The count is in e_shnum, or (when that is 0) in section 0's sh_size: read section 0 on its
    // own only when one of the escape values says so.
    let sh0 = if h.e_shnum == 0 || h.e_phnum == elf::PN_XNUM || h.e_shstrndx == elf::SHN_XINDEX {
        let first = read_range(src, h.e_shoff, f.shdr_size() as u64, "section header 0")?;
        f.decode_shdr(&first)
    } else {
        Shdr::default()
    };
    let shnum = if h.e_shnum == 0 {
        sh0.sh_size
    } else {
        u64::from(h.e_shnum)
    };
    if h.e_phnum == elf::PN_XNUM {
        phnum = sh0.sh_info as usize;
    }
    let shstrndx = if h.e_shstrndx == elf::SHN_XINDEX {
        u64::from(sh0.sh_link)
    } else {
        u64::from(h.e_shstrndx)
    };
    let table_len = shnum
        .checked_mul(f.shdr_size() as u64)
        .ok_or_else(|| Error::malformed(0, "section header count overflows"))?;
    let table = read_range(src, h.e_shoff, table_len, "section header table")?;
    let mut shdrs: Vec<Shdr> = table
        .chunks_exact(f.shdr_size())
        .map(|c| f.decode_shdr(c))
        .collect();
    if shdrs.is_empty() {
        shdrs.push(sh0);
    }
    // Names only help to recognize sections: a name table that cannot be read leaves them empty.
    let found = if shstrndx != 0 && (shstrndx as usize) < shdrs.len() {
        let s = shdrs[shstrndx as usize];
        if s.sh_type == elf::SHT_STRTAB && s.sh_size <= 16 << 20 {
            match read_range(src, s.sh_offset, s.sh_size, "section name string table") {
                Ok(bytes) => Names::Read(bytes),
                Err(_) => Names::PastEnd {
                    offset: s.sh_offset,
                    size: s.sh_size,
                },
            }
        } else if s.sh_type == elf::SHT_STRTAB
            && s.sh_offset
                .checked_add(s.sh_size)
                .is_none_or(|e| e > src.len())
        {
            Names::PastEnd {
                offset: s.sh_offset,
                size: s.sh_size,
            }
        } else {
            Names::None
        }
    } else if shstrndx != 0 || h.e_shstrndx == elf::SHN_XINDEX {
        // SHN_XINDEX with section 0's sh_link 0 points nowhere either.
        Names::IndexOutOfBounds
    } else {
        Names::None
    };
    let empty = Vec::new();
    let names = match &found {
        Names::Read(bytes) => bytes,
        _ => &empty,
    };
    let sections = shdrs
        .into_iter()
        .enumerate()
        .map(|(index, shdr)| {
            let name = names
                .get(shdr.sh_name as usize..)
                .and_then(|r| r.iter().position(|&b| b == 0).map(|e| r[..e].to_vec()))
                .unwrap_or_default();
            Section { index, name, shdr }
        })
        .collect();
    Ok((sections, phnum, found))
}

/// The one section that describes exactly the table at `offset`/`vaddr` (`size` bytes), whatever
/// its type and name say. A table that moves must take its section header along, and a damaged
/// or unusual `sh_type` or `.shstrtab` must not leave that header pointing at zeroed bytes; when
/// more than one section claims the bytes, none is chosen (the strict match was the only hope).
pub(super) fn section_by_extent(e: &Elf, offset: u64, vaddr: u64, size: u64) -> Option<usize> {
    let mut found = e.sections.iter().filter(|s| {
        let sh = &s.shdr;
        sh.has_file_bytes()
            && sh.sh_offset == offset
            && sh.sh_addr == vaddr
            && sh.sh_size <= size
            && sh.sh_type != elf::SHT_DYNSYM
            && sh.sh_type != elf::SHT_DYNAMIC
    });
    let first = found.next()?;
    found.next().is_none().then_some(first.index)
}
