//! Layout and emission of synthetic ELF files.
//!
//! A spec is checked (`validate`), drafted (`draft`: string tables, symbols and their versions
//! from `symbols`, the sections of `sections` sized), placed the way GNU ld places files
//! (`place`), and then written: each section's bytes (`contents`) and the headers (`headers`),
//! in the file's class and byte order (`encode`).

mod contents;
mod draft;
mod encode;
mod headers;
mod place;
mod sections;
mod symbols;
mod validate;

use std::fmt;
use std::io::{self, Seek, SeekFrom, Write};

use crate::strtab::StrTab;
use crate::{PlacedSection, Spec};
use encode::{Enc, HeaderSizes};
use sections::{Id, SectionOrder};
use symbols::{DynSymbols, Versions};

/// Why a [`Spec`] cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid elfsynth spec: {}", self.0)
    }
}

impl std::error::Error for SpecError {}

/// One program header as written. Field meanings follow `Elf*_Phdr`
/// (`p_paddr` always equals `p_vaddr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_type`.
    pub p_type: u32,
    /// `p_flags` (`PF_R` = 4, `PF_W` = 2, `PF_X` = 1).
    pub p_flags: u32,
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_align`.
    pub align: u64,
}

/// Where everything of a built file lies. Obtained from [`layout`]; the
/// bytes from [`build`] match it exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Total file size in bytes.
    pub file_size: u64,
    /// `e_entry` (the start of `.text`).
    pub entry: u64,
    /// `e_phoff`.
    pub phoff: u64,
    /// Program headers in table order (`PT_NULL` slots included).
    pub segments: Vec<Segment>,
    /// `e_shoff` (0 without section headers).
    pub shoff: u64,
    /// Sections in section-header order, index 0 being the null section.
    /// Without section headers only the allocated sections are listed
    /// (with the same indices they would have).
    pub sections: Vec<PlacedSection>,
    /// Whether the section header table is written.
    pub section_headers: bool,
    /// `.dynamic` entries as written, `(d_tag, d_val)`, including the
    /// terminating and spare `DT_NULL`s.
    pub dynamic: Vec<(u64, u64)>,
    /// `.dynsym` order: entry `i + 1` of `.dynsym` is `spec.dynsyms[dynsym_order[i]]`.
    pub dynsym_order: Vec<usize>,
    /// The complete `.dynstr` contents.
    pub dynstr: Vec<u8>,
}

impl Layout {
    /// The placed section with this name, if any.
    pub fn section(&self, name: &str) -> Option<&PlacedSection> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// `.dynstr` offset of the string that the first dynamic entry with this
    /// tag points at (e.g. `DT_RUNPATH` = 29).
    pub fn dynstr_offset(&self, tag: u64) -> Option<u64> {
        self.dynamic.iter().find(|e| e.0 == tag).map(|e| e.1)
    }
}

// The sizes and fixed contents of the sections a spec does not size.
const NOTE_SIZE: u64 = 12 + 4 + 20;
const INIT_SIZE: u64 = 16;
const DATA_SIZE: u64 = 16;
const TEXT_PATTERN_LEN: u64 = 64;
const COMMENT: &[u8] = b"elfsynth (synthetic test file)\0";

/// A built file before it is written: its layout and its bytes.
struct Plan {
    layout: Layout,
    /// (file offset, bytes); non-overlapping.
    chunks: Vec<(u64, Vec<u8>)>,
}

/// The file before placement: its string tables, symbols, versions and sections in order.
struct Draft<'a> {
    spec: &'a Spec,
    enc: Enc,
    headers: HeaderSizes,
    dynstr: StrTab,
    /// `DT_RPATH` points at the RUNPATH string ([`Spec::shared_rpath_runpath`], both set).
    rpath_shared: bool,
    syms: DynSymbols<'a>,
    versions: Versions,
    sections: SectionOrder,
    /// Entries of `.symtab`: the null symbol, one per allocated section, then the named ones.
    symtab_entries: usize,
    strtab: StrTab,
    shstrtab: StrTab,
}

/// Lays out `spec`'s file and produces its bytes, the headers last.
fn plan(spec: &Spec) -> Result<Plan, SpecError> {
    validate::validate(spec)?;
    let draft = Draft::new(spec);
    let placement = place::place(&draft)?;
    let dynamic = draft.dynamic_entries(&|id| placement.addr(id));
    let mut chunks = draft.section_chunks(&placement, &dynamic);
    let mut placed = headers::section_headers(&draft, &placement);
    if spec.with_section_headers {
        chunks.push((
            placement.shoff,
            headers::encode_section_headers(&draft, &placed),
        ));
    }
    let segs = headers::program_headers(&draft, &placement);
    chunks.push((
        placement.phoff,
        headers::encode_program_headers(&draft, &segs),
    ));
    let entry = placement.addr(Id::Text);
    chunks.push((
        0,
        headers::elf_header(&draft, &placement, entry, placed.len()),
    ));
    chunks.sort_by_key(|c| c.0);

    if !spec.with_section_headers {
        placed.truncate(1 + draft.sections.alloc_count());
    }
    Ok(Plan {
        layout: Layout {
            file_size: placement.file_size,
            entry,
            phoff: placement.phoff,
            segments: segs,
            shoff: placement.shoff,
            sections: placed,
            section_headers: spec.with_section_headers,
            dynamic,
            dynsym_order: draft.syms.order,
            dynstr: draft.dynstr.bytes,
        },
        chunks,
    })
}

/// Computes where everything of `spec`'s file goes, without building it.
pub fn layout(spec: &Spec) -> Result<Layout, SpecError> {
    plan(spec).map(|p| p.layout)
}

/// Builds the ELF file described by `spec` in memory.
///
/// # Panics
///
/// If the spec is invalid (see [`Spec::validate`]): strings containing NUL,
/// a page size that is not a power of two in 4 KiB..=2 MiB, a base that is
/// not page aligned, more undefined symbols than symbols, a verneed file
/// without versions, or a layout that does not fit a 32-bit file.
pub fn build(spec: &Spec) -> Vec<u8> {
    let p = plan(spec).unwrap_or_else(|e| panic!("{e}"));
    let mut out = vec![0u8; p.layout.file_size as usize];
    for (off, bytes) in &p.chunks {
        let off = *off as usize;
        out[off..off + bytes.len()].copy_from_slice(bytes);
    }
    out
}

/// Writes the ELF file described by `spec` to `w`, which must be empty and
/// positioned at offset 0 (a new file, or an empty `Cursor<Vec<u8>>`).
///
/// Only nonzero regions are written; the bytes in between (most of a large
/// `.text`) are skipped by seeking, so on a file system with sparse files a
/// multi-gigabyte file costs almost nothing to create. The final length is
/// always [`Layout::file_size`].
///
/// An invalid spec gives an [`io::ErrorKind::InvalidInput`] error.
pub fn build_to<W: Write + Seek>(spec: &Spec, w: &mut W) -> io::Result<()> {
    let p = plan(spec).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut end = 0u64;
    for (off, bytes) in &p.chunks {
        w.seek(SeekFrom::Start(*off))?;
        w.write_all(bytes)?;
        end = end.max(off + bytes.len() as u64);
    }
    if end < p.layout.file_size {
        w.seek(SeekFrom::Start(p.layout.file_size - 1))?;
        w.write_all(&[0])?;
    }
    w.flush()
}
