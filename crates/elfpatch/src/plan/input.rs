//! The first stage of planning: the input. The parsed file, the tables that refer to its
//! strings, the string table itself and the options, checked before anything is decided about
//! them; the later stages (`desired.rs`, `placed.rs`, the strategies) are functions of it.
//!
//! The checks come before any planning: editing assumes the loader's view of the file is sane,
//! and a file that is not is refused here.
//!
//! - the section header table fits in the file (a file cut short is refused whole:
//!   `Elf::check_section_table`);
//! - every section lies inside the file and the address space, and `.dynsym`'s entry size is a
//!   symbol's;
//! - at most one `PT_PHDR`; the `PT_LOAD`s sorted by address and disjoint in memory (usable
//!   alignments are checked where a new segment is placed, see `appended::site`);
//! - `DT_SYMENT` is a symbol's size, and no table pointer appears with two values;
//! - the tables, the interpreter path and the dynamic array overlap neither the headers nor each
//!   other (all of `PT_INTERP` only when the interpreter is rewritten: `check_interp_editable`).

use object::elf;

use super::dynstr::Dynstr;
use super::tags::UNIQUE_TAGS;
use super::Options;
use crate::error::{Error, Result};
use crate::format::{Dyn, Format};
use crate::read::{is_string_tag, Elf};
use crate::refs::{Region, Tables, VerneedEntry};

/// The input of one plan: the parsed file, the tables that refer to its strings, the string
/// table itself, the options.
pub(super) struct Input<'a> {
    pub(super) elf: &'a Elf,
    pub(super) tables: &'a Tables,
    pub(super) dynstr: &'a Dynstr<'a>,
    pub(super) opts: &'a Options,
    pub(super) format: Format,
}

impl<'a> Input<'a> {
    /// The input, once it passed the checks.
    pub(super) fn new(
        elf: &'a Elf,
        tables: &'a Tables,
        dynstr: &'a Dynstr<'a>,
        opts: &'a Options,
    ) -> Result<Self> {
        let input = Input {
            elf,
            tables,
            dynstr,
            opts,
            format: elf.format,
        };
        input.preflight()?;
        Ok(input)
    }

    /// Runs every check, in this order (the first failure is the error).
    fn preflight(&self) -> Result<()> {
        self.elf.check_section_table()?;
        check_sections(self.elf)?;
        check_segments(self.elf)?;
        check_dynamic_tags(self.elf)?;
        check_no_overlaps(self.elf, &self.dynamic_regions(), false)
    }

    /// An edit of the interpreter writes (or zeroes) all of `PT_INTERP`'s bytes: none of them may
    /// be a table's.
    pub(super) fn check_interp_editable(&self) -> Result<()> {
        check_no_overlaps(self.elf, &self.dynamic_regions(), true)
    }

    /// An edit of the dynamic array needs the array where `PT_LOAD` maps it and a string table.
    pub(super) fn check_dynamic_editable(&self) -> Result<()> {
        let elf = self.elf;
        let dynamic = elf
            .dynamic
            .as_ref()
            .ok_or_else(|| Error::unsupported("the file has no dynamic section"))?;
        let size = (dynamic.capacity() * self.format.dyn_size()) as u64;
        if elf.vaddr_to_offset(dynamic.vaddr, size) != Some(dynamic.offset) {
            let what = match dynamic.phdr_index {
                Some(_) => "PT_DYNAMIC",
                None => "the .dynamic section",
            };
            return Err(Error::refused(format!(
                "{what} (offset {:#x}, address {:#x}) is not mapped by a PT_LOAD at the same place",
                dynamic.offset, dynamic.vaddr
            )));
        }
        if elf.strtab.is_none() {
            return Err(Error::unsupported(
                "the dynamic section has no string table (DT_STRTAB)",
            ));
        }
        Ok(())
    }
    /// The tables `.dynamic` points to, with their extents.
    pub(super) fn dynamic_regions(&self) -> Vec<Region> {
        let mut out = Vec::new();
        if let Some(strtab) = &self.elf.strtab {
            out.push(Region {
                offset: strtab.offset,
                vaddr: strtab.vaddr,
                size: strtab.size,
            });
        }
        let tables = self.tables;
        out.extend(tables.dynsym.as_ref().map(|s| s.region));
        out.extend(tables.hash);
        out.extend(tables.gnu_hash);
        out.extend(tables.versym.as_ref().map(|(r, _)| *r));
        out.extend(tables.verneed.as_ref().map(|(r, _)| *r));
        out.extend(tables.verdef.as_ref().map(|(r, _)| *r));
        out
    }

    pub(super) fn verneed_records(&self) -> &'a [VerneedEntry] {
        self.tables
            .verneed
            .as_ref()
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    }

    /// The string at `offset` of the original string table (empty when there is none).
    pub(super) fn string(&self, offset: u64) -> &'a [u8] {
        self.dynstr.string(offset).unwrap_or(b"")
    }

    pub(super) fn original_entry(&self, i: usize) -> Dyn {
        self.elf
            .dynamic
            .as_ref()
            .map(|d| d.entries()[i])
            .unwrap_or(Dyn { tag: 0, val: 0 })
    }

    /// The tag of entry `i` of the original array.
    pub(super) fn original_tag(&self, i: usize) -> u64 {
        self.original_entry(i).tag
    }

    /// The value of entry `i` of the original array.
    pub(super) fn original_value(&self, i: usize) -> u64 {
        self.original_entry(i).val
    }

    pub(super) fn original_string(&self, i: usize) -> Vec<u8> {
        if is_string_tag(self.original_tag(i)) {
            self.string(self.original_value(i)).to_vec()
        } else {
            Vec::new()
        }
    }

    pub(super) fn dynsym_names(&self) -> &'a [u32] {
        self.tables
            .dynsym
            .as_ref()
            .map(|s| s.names.as_slice())
            .unwrap_or(&[])
    }
}

/// Every section inside the file and the address space; `.dynsym`'s entries as large as a symbol.
fn check_sections(elf: &Elf) -> Result<()> {
    let format = elf.format;
    for section in &elf.sections {
        let sh = section.shdr;
        let name = String::from_utf8_lossy(&section.name);
        let in_file = sh
            .sh_offset
            .checked_add(sh.sh_size)
            .is_some_and(|end| end <= elf.file_len);
        let in_space = !sh.is_alloc()
            || sh
                .sh_addr
                .checked_add(sh.sh_size)
                .is_some_and(|end| end <= format.max_addr().saturating_add(1));
        if sh.sh_type == elf::SHT_DYNSYM
            && sh.sh_entsize != 0
            && sh.sh_entsize != format.sym_size() as u64
        {
            return Err(Error::refused(format!(
                "section {name} has entry size {}, not the {} bytes of a symbol: the headers disagree",
                sh.sh_entsize,
                format.sym_size()
            )));
        }
        if (sh.has_file_bytes() && !in_file) || !in_space {
            // patchelf's words for the two ways out of the file, after ours.
            let past_end = match (sh.has_file_bytes() && !in_file, sh.sh_offset > elf.file_len) {
                (false, _) => "",
                (true, true) => ": data offset extends past file end",
                (true, false) => ": data region extends past file end",
            };
            return Err(Error::refused(format!(
                "section {name} ({:#x}+{:#x}) lies outside the file or the address space{past_end}",
                sh.sh_offset, sh.sh_size
            )));
        }
    }
    Ok(())
}

/// One `PT_PHDR` at most; `PT_LOAD`s sorted by address and disjoint in memory.
fn check_segments(elf: &Elf) -> Result<()> {
    // gABI: PT_PHDR "may not occur more than once in a file"; an edit that grows the table
    // rewrites it, and a second one would be made to describe the table at its own offset.
    let phdr_segments = elf
        .phdrs
        .iter()
        .filter(|p| p.p_type == elf::PT_PHDR)
        .count();
    if phdr_segments > 1 {
        return Err(Error::malformed(
            elf.header.e_phoff,
            "more than one PT_PHDR",
        ));
    }
    let loads: Vec<_> = elf.loads().collect();
    for (i, first) in loads.iter().enumerate() {
        for later in &loads[i + 1..] {
            if later.p_vaddr < first.p_vaddr {
                return Err(Error::refused(format!(
                    "PT_LOAD at {:#x} follows one at {:#x}: segments are not sorted by address",
                    later.p_vaddr, first.p_vaddr
                )));
            }
            if first.p_memsz > 0
                && later.p_memsz > 0
                && first.p_vaddr < later.vaddr_end()
                && later.p_vaddr < first.vaddr_end()
            {
                return Err(Error::refused(format!(
                    "PT_LOADs at {:#x} and {:#x} overlap in memory",
                    first.p_vaddr, later.p_vaddr
                )));
            }
        }
    }
    Ok(())
}

/// `DT_SYMENT` is a symbol's size, and every table pointer has one value.
fn check_dynamic_tags(elf: &Elf) -> Result<()> {
    let Some(dynamic) = &elf.dynamic else {
        return Ok(());
    };
    // Symbols are as large as the class says; glibc asserts it, and a table moved with another
    // entry size would be read differently by other readers.
    let sym_size = elf.format.sym_size();
    if let Some(n) = dynamic.get(elf::DT_SYMENT) {
        if n != sym_size as u64 {
            return Err(Error::malformed(
                dynamic.offset,
                format!("DT_SYMENT is {n}, not the {sym_size} bytes of a symbol"),
            ));
        }
    }
    // One value per table pointer: glibc keeps the last of several entries, this reader the
    // first, so with two different values nobody can say which table an edit must change.
    for tag in UNIQUE_TAGS {
        let mut values = dynamic.entries().iter().filter(|x| x.tag == u64::from(tag));
        if let Some(first) = values.next() {
            if let Some(other) = values.find(|x| x.val != first.val) {
                return Err(Error::malformed(
                    dynamic.offset,
                    format!(
                        "dynamic tag {tag:#x} appears with two values ({:#x} and {:#x}): \
                         which one the loader uses depends on the loader",
                        first.val, other.val
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What an edit may write over in place or zero once it moved — the dynamic tables, the
/// interpreter path, the dynamic array — must share no byte with the headers or with each other:
/// editing one would change another, and garbage offsets (a `PT_INTERP` at offset 0, a second
/// `DT_STRTAB` pointing into the ELF header) would have an edit zero the ELF header.
/// `whole_interp`: all of `PT_INTERP`'s bytes count, as when the edit rewrites the interpreter;
/// otherwise only those the kernel looks at.
fn check_no_overlaps(elf: &Elf, tables: &[Region], whole_interp: bool) -> Result<()> {
    #[derive(PartialEq)]
    enum Kind {
        Table,
        Editable,
        Header,
    }
    struct Area {
        what: String,
        start: u64,
        len: u64,
        kind: Kind,
    }
    let format = elf.format;
    let mut areas: Vec<Area> = tables
        .iter()
        .map(|r| Area {
            what: format!(
                "a dynamic table ({:#x}+{:#x} in the file)",
                r.offset, r.size
            ),
            start: r.offset,
            len: r.size,
            kind: Kind::Table,
        })
        .collect();
    if let Some(interp) = &elf.interp {
        // The kernel reads all of PT_INTERP's bytes but uses only the path up to its NUL and
        // checks that the last byte is NUL: bytes between are nobody's, and tables there (a
        // linker script's PT_INTERP over a whole run of sections, patchelf's `phdr-corruption`)
        // are no conflict until the interpreter itself is rewritten, which writes them all.
        let path = interp.path.len() as u64 + 1;
        let len = if whole_interp { interp.capacity } else { path };
        areas.push(Area {
            what: "the interpreter path (PT_INTERP)".into(),
            start: interp.offset,
            len,
            kind: Kind::Editable,
        });
        if len < interp.capacity {
            areas.push(Area {
                what: "the last byte of PT_INTERP (which the kernel checks is NUL)".into(),
                start: interp.offset + interp.capacity - 1,
                len: 1,
                kind: Kind::Editable,
            });
        }
    }
    if let Some(dynamic) = &elf.dynamic {
        areas.push(Area {
            what: "the dynamic array (PT_DYNAMIC)".into(),
            start: dynamic.offset,
            len: (dynamic.capacity() * format.dyn_size()) as u64,
            kind: Kind::Editable,
        });
    }
    areas.push(Area {
        what: "the ELF header".into(),
        start: 0,
        len: u64::from(elf.header.e_ehsize).max(format.ehdr_size() as u64),
        kind: Kind::Header,
    });
    areas.push(Area {
        what: "the program header table".into(),
        start: elf.header.e_phoff,
        len: (elf.phdrs.len() * format.phdr_size()) as u64,
        kind: Kind::Header,
    });
    if elf.header.e_shoff != 0 {
        areas.push(Area {
            what: "the section header table".into(),
            start: elf.header.e_shoff,
            len: (elf.sections.len() * format.shdr_size()) as u64,
            kind: Kind::Header,
        });
    }
    for (i, area) in areas.iter().enumerate() {
        for other in &areas[i + 1..] {
            let overlap = area.len > 0
                && other.len > 0
                && area.start < other.start.saturating_add(other.len)
                && other.start < area.start.saturating_add(area.len);
            if !overlap || area.kind == Kind::Header {
                continue;
            }
            let (start, len, other_start, other_len) =
                (area.start, area.len, other.start, other.len);
            if area.kind == Kind::Table && other.kind == Kind::Table {
                return Err(Error::refused(format!(
                    "the dynamic tables at {start:#x}+{len:#x} and {other_start:#x}+{other_len:#x} overlap"
                )));
            }
            return Err(Error::malformed(
                start,
                format!("{} overlaps {}", area.what, other.what),
            ));
        }
    }
    Ok(())
}
