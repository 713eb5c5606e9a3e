//! The dynamic string table (`DT_STRTAB`, `DT_STRSZ`): located through the `PT_LOAD`s, read
//! whole or only where the dynamic array's string entries point.

use object::elf;

use super::dynamic::{is_string_tag, Dynamic};
use super::sections::{section_by_extent, Section};
use super::Elf;
use crate::error::{Error, Result};
use crate::source::{read_range, Source};

/// The dynamic string table (`DT_STRTAB`, `DT_STRSZ`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrTab {
    /// File offset.
    pub offset: u64,
    /// Virtual address (`DT_STRTAB`).
    pub vaddr: u64,
    /// Its size in bytes (`DT_STRSZ`).
    pub size: u64,
    /// What of it was read.
    pub contents: StrContents,
    /// Index of the section describing it (`.dynstr`), if any.
    pub section: Option<usize>,
}

/// What of the dynamic string table [`Elf`] holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrContents {
    /// All of its bytes ([`Elf::read`], [`Elf::parse`]).
    Whole(Vec<u8>),
    /// Only the strings the dynamic array names, as `(offset, string without its NUL)`, sorted
    /// by offset ([`Elf::read_file`]). A big library's table is megabytes, and reading it into
    /// fresh memory costs more than the rest of a call; an edit reads it a window at a time.
    Strings(Vec<(u64, Vec<u8>)>),
}

impl StrTab {
    /// The NUL-terminated string at `offset`, without its terminator. With
    /// [`StrContents::Strings`], only the strings the dynamic array names are known.
    pub fn get(&self, offset: u64) -> Option<&[u8]> {
        match &self.contents {
            StrContents::Whole(bytes) => {
                let start = usize::try_from(offset).ok()?;
                let rest = bytes.get(start..)?;
                let end = rest.iter().position(|&b| b == 0)?;
                Some(&rest[..end])
            }
            StrContents::Strings(strings) => strings
                .binary_search_by_key(&offset, |(o, _)| *o)
                .ok()
                .map(|i| strings[i].1.as_slice()),
        }
    }

    /// The whole table, when it was read whole.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.contents {
            StrContents::Whole(bytes) => Some(bytes),
            StrContents::Strings(_) => None,
        }
    }
}

pub(super) fn read_strtab<S: Source + ?Sized>(
    src: &S,
    e: &Elf,
    whole: bool,
) -> Result<Option<StrTab>> {
    let Some(d) = &e.dynamic else {
        return Ok(None);
    };
    let Some(vaddr) = d.get(elf::DT_STRTAB) else {
        return Ok(None);
    };
    let is_dynstr = |s: &&Section| {
        s.shdr.sh_type == elf::SHT_STRTAB && s.shdr.is_alloc() && s.shdr.sh_addr == vaddr
    };
    // `.dynamic`'s sh_link names its string table (gABI); only when it does not describe
    // DT_STRTAB does the first allocated string table at that address stand in for it.
    let by_link = d
        .section
        .and_then(|i| e.sections.get(i))
        .and_then(|ds| e.sections.get(ds.shdr.sh_link as usize))
        .filter(is_dynstr);
    let by_kind = by_link
        .or_else(|| e.sections.iter().find(is_dynstr))
        .map(|s| s.index);
    let size = match d.get(elf::DT_STRSZ) {
        Some(sz) => sz,
        None => match by_kind {
            Some(i) => e.sections[i].shdr.sh_size,
            None => {
                return Err(Error::malformed(d.offset, "DT_STRTAB without DT_STRSZ"));
            }
        },
    };
    let Some(offset) = e.vaddr_to_offset(vaddr, size) else {
        return Err(Error::malformed(
            d.offset,
            format!("DT_STRTAB {vaddr:#x} (+{size:#x}) is not in the bytes any PT_LOAD maps from the file"),
        ));
    };
    let contents = if whole {
        StrContents::Whole(read_range(src, offset, size, "dynamic string table")?)
    } else {
        StrContents::Strings(read_dynamic_strings(src, d, offset, size)?)
    };
    let last = match &contents {
        StrContents::Whole(bytes) => bytes.last().copied(),
        StrContents::Strings(_) if size > 0 => {
            Some(read_range(src, offset + size - 1, 1, "dynamic string table")?[0])
        }
        StrContents::Strings(_) => None,
    };
    // Strings are read up to their NUL: a table whose last byte is not one lets the last string
    // run on into whatever follows it (a copy would make that our strings).
    if last.is_some_and(|b| b != 0) {
        return Err(Error::malformed(
            offset + size - 1,
            format!("DT_STRTAB: string table is not NUL-terminated (last of {size} bytes)"),
        ));
    }
    let section = by_kind.or_else(|| section_by_extent(e, offset, vaddr, size));
    Ok(Some(StrTab {
        offset,
        vaddr,
        size,
        contents,
        section,
    }))
}

/// The strings the dynamic array's string entries name, each read up to its NUL a piece at a
/// time (names and run paths are short; a piece past the table's end is never read). An offset
/// outside the table, or a string without a NUL before its end, is left out: [`StrTab::get`]
/// then knows no string there, as it would not in the whole table.
fn read_dynamic_strings<S: Source + ?Sized>(
    src: &S,
    d: &Dynamic,
    offset: u64,
    size: u64,
) -> Result<Vec<(u64, Vec<u8>)>> {
    const PIECE: u64 = 256;
    let mut wanted: Vec<u64> = d
        .entries()
        .iter()
        .filter(|x| is_string_tag(x.tag) && x.val < size)
        .map(|x| x.val)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut out = Vec::with_capacity(wanted.len());
    for at in wanted {
        let mut string = Vec::new();
        let mut from = at;
        while from < size {
            let piece = read_range(src, offset + from, PIECE.min(size - from), "dynamic string")?;
            match piece.iter().position(|&b| b == 0) {
                Some(n) => {
                    string.extend_from_slice(&piece[..n]);
                    out.push((at, string));
                    break;
                }
                None => {
                    string.extend_from_slice(&piece);
                    from += piece.len() as u64;
                }
            }
        }
    }
    Ok(out)
}
