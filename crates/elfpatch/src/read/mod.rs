//! Parsing: from a [`Source`] to an [`Elf`], reading only headers, `.dynamic`, the dynamic string
//! table and the interpreter path.
//!
//! Everything is located through the program headers (`PT_DYNAMIC`, `PT_INTERP`, and `PT_LOAD` to
//! map `DT_STRTAB` to a file offset), so files without section headers are read exactly like the
//! others. Section headers, when present, are read too so that edits can keep them consistent;
//! the one thing found through them is the `.dynamic` section of a file without `PT_DYNAMIC`,
//! which no loader reads (see [`Elf::read`]'s `read_dynamic_section`).
//!
//! [`Elf`] and the entry points are here; each part of the file is read in a module of its own
//! (the file header, the program headers, the section headers, the dynamic array, its string
//! table, the interpreter), whose items are re-exported here.

mod dynamic;
mod header;
mod interp;
mod sections;
mod segments;
mod strtab;

use object::elf;

use crate::error::{Error, Location, Repr, Result, Warning, WarningKind};
use crate::format::{Class, Endian, Format, Header, Phdr};
use crate::need::{type_name, Need};
use crate::source::{read_range, FileSource, Prefetched, Source};

pub use dynamic::{is_string_tag, sysv_hash_word, tag_name, Dynamic, STRING_TAGS};
pub use header::EI_OSABI;
pub use interp::Interp;
pub use sections::{OutOfBounds, Section};
pub(crate) use segments::with_tail;
pub use segments::{execstack, min_page_size};
pub use strtab::{StrContents, StrTab};

use dynamic::{dynamic_section, read_dynamic};
use header::read_format;
use interp::read_interp;
use sections::read_sections;
use segments::read_phdrs;
use strtab::read_strtab;

/// A parsed ELF file: its headers and the dynamic information this crate reads and edits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elf {
    /// Class and byte order.
    pub format: Format,
    /// The file header as stored.
    pub header: Header,
    /// Length of the file when it was parsed.
    pub file_len: u64,
    /// The program headers, in table order.
    pub phdrs: Vec<Phdr>,
    /// The section headers (empty when the file has none).
    pub sections: Vec<Section>,
    /// The dynamic array, when the file has `PT_DYNAMIC`, or has none but a `.dynamic` section
    /// that a `PT_LOAD` maps (see [`Elf::read`]).
    pub dynamic: Option<Dynamic>,
    /// The dynamic string table, when `.dynamic` has `DT_STRTAB`.
    pub strtab: Option<StrTab>,
    /// The interpreter, when the file has `PT_INTERP`.
    pub interp: Option<Interp>,
    /// Up to [`PHDR_TAIL`] bytes that follow the program header table in the file (to tell whether
    /// the table can grow in place).
    pub phdr_tail: Vec<u8>,
    /// The bytes that follow the section header table, up to [`SHDR_TRAILER`] of them (empty when
    /// the table ends the file or the file has none): to tell whether the table ends the file
    /// ([`Elf::section_headers_end_file`]).
    pub shdr_trailer: Vec<u8>,
    /// The bytes that follow the `PT_LOAD` ending last in the file, when fewer than
    /// [`SHDR_TRAILER`] of them end the file (empty otherwise): patchelf ends the files it grows
    /// with its segment and a stray byte or so, and zeros there carry nothing, so the segment
    /// still ends the file for an edit that extends it (`plan/appended/site.rs`).
    pub load_trailer: Vec<u8>,
    /// Damage found in the section headers and worked around, and facts no loader cares about
    /// (see [`Warning`]): for the caller to report by their kind.
    pub warnings: Vec<Warning>,
    /// The section header table, when it does not fit in the file (see
    /// [`Elf::check_section_table`]): the file is read as one without section headers, and an
    /// edit is refused.
    pub section_table_out_of_bounds: Option<OutOfBounds>,
    /// Why a `.dynamic` section in a file without `PT_DYNAMIC` was not read as its dynamic array
    /// (it lies outside every `PT_LOAD`, it has no `DT_NULL`, ...): the reason an edit of the
    /// array is refused. `None` when there was no such section or it was read.
    pub unread_dynamic_section: Option<String>,
}

/// How many bytes after the program header table [`Elf::phdr_tail`] holds.
pub const PHDR_TAIL: u64 = 512;

/// How many bytes after the section header table [`Elf::shdr_trailer`] holds: at most one short
/// of a page of padding lets the table still count as ending the file.
pub const SHDR_TRAILER: u64 = 4096;

impl Elf {
    /// Parses the headers of an ELF file held in memory.
    pub fn parse(bytes: &[u8]) -> Result<Elf> {
        Elf::read(bytes)
    }

    /// Parses the headers of an ELF file from any [`Source`], reading only what it needs, and
    /// the whole dynamic string table ([`StrContents::Whole`], what [`crate::plan()`] needs).
    pub fn read<S: Source + ?Sized>(src: &S) -> Result<Elf> {
        Elf::read_with(src, true)
    }

    fn read_with<S: Source + ?Sized>(src: &S, whole_strtab: bool) -> Result<Elf> {
        let file_len = src.len();
        let (format, ehdr) = read_format(src)?;
        let header = format.decode_header(&ehdr);
        // No version check: the kernel looks at neither EI_VERSION nor e_version, and glibc
        // checks them only in the libraries it maps itself, not in the program.
        let mut warnings = Vec::new();
        let (sections, phnum, section_table_out_of_bounds) =
            read_sections(src, format, &header, &mut warnings)?;
        let phdrs = read_phdrs(src, format, &header, phnum)?;
        let mut elf = Elf {
            format,
            header,
            file_len,
            phdrs,
            sections,
            dynamic: None,
            strtab: None,
            interp: None,
            phdr_tail: Vec::new(),
            shdr_trailer: Vec::new(),
            load_trailer: Vec::new(),
            warnings,
            section_table_out_of_bounds,
            unread_dynamic_section: None,
        };
        // Up to `max` bytes after a table ending at `end`: what follows it tells whether it can
        // grow in place (program headers) or ends the file (section headers).
        let after = |end: u64, max: u64, what: &'static str| -> Result<Vec<u8>> {
            if end < file_len {
                read_range(src, end, max.min(file_len - end), what)
            } else {
                Ok(Vec::new())
            }
        };
        if !elf.phdrs.is_empty() {
            let table_end = elf.header.e_phoff + (elf.phdrs.len() * format.phdr_size()) as u64;
            elf.phdr_tail = after(table_end, PHDR_TAIL, "bytes after the program headers")?;
        }
        if let Some(end) = elf.section_table_end() {
            elf.shdr_trailer = after(end, SHDR_TRAILER, "bytes after the section headers")?;
        }
        if let Some(end) = elf.loads().map(|p| p.offset_end()).max() {
            if end < file_len && file_len - end < SHDR_TRAILER {
                elf.load_trailer = after(end, SHDR_TRAILER, "bytes after the last segment")?;
            }
        }
        elf.dynamic = read_dynamic(src, &elf)?;
        if elf.dynamic.is_some() {
            elf.strtab = read_strtab(src, &elf, whole_strtab)?;
            elf.check_string_entries()?;
        } else if !elf.phdrs.iter().any(|p| p.p_type == elf::PT_DYNAMIC) {
            // (An empty PT_DYNAMIC is read where glibc reads it, not through a section.)
            elf.read_dynamic_section(src, whole_strtab);
        }
        elf.interp = read_interp(src, &elf)?;
        Ok(elf)
    }

    /// A file without `PT_DYNAMIC` may still have a `.dynamic` section (patchelf's test
    /// `phdr-corruption`: a linker script that lists no `PT_DYNAMIC`). No loader reads it (glibc:
    /// "object file has no dynamic section"), but tools do (`objdump -p`, `eu-elflint`), and
    /// patchelf edits it. It is read as the dynamic array, with a warning, when a `PT_LOAD` maps
    /// it from the file where the section says and it reads as soundly as an array at
    /// `PT_DYNAMIC` must: then an edit keeps the file what it was, a file whose tools see the
    /// new values and whose loader sees none. Anything less (the section outside every
    /// `PT_LOAD`, two of them, no `DT_NULL`, a string table that cannot be read) leaves the file
    /// one without a dynamic array, the reason kept for the refusal of an edit of it, so that
    /// edits of the interpreter and the headers still go through.
    fn read_dynamic_section<S: Source + ?Sized>(&mut self, src: &S, whole_strtab: bool) {
        match dynamic_section(src, self) {
            Ok(None) => {}
            Ok(Some(dynamic)) => {
                let at = dynamic.offset;
                self.dynamic = Some(dynamic);
                match read_strtab(src, self, whole_strtab).and_then(|st| {
                    self.strtab = st;
                    self.check_string_entries()
                }) {
                    Ok(()) => self.warnings.push(Warning {
                        kind: WarningKind::Damage,
                        part: format!(".dynamic section at offset {at:#x}"),
                        problem: "no PT_DYNAMIC program header",
                        detail: "read and edited through the section header; no loader reads it, \
                                 before or after the edit"
                            .into(),
                    }),
                    Err(e) => {
                        (self.dynamic, self.strtab) = (None, None);
                        // The refusal names the file itself.
                        self.unread_dynamic_section = Some(e.detail());
                    }
                }
            }
            Err(reason) => self.unread_dynamic_section = Some(reason),
        }
    }

    /// Parses the headers of an open file of `len` bytes through [`Prefetched::for_elf`]: its
    /// start and its end are read once, and most files need no further read. Of the dynamic
    /// string table only the strings the dynamic array names are read
    /// ([`StrContents::Strings`]); [`crate::ElfFile::plan`] reads the rest as it needs it.
    pub fn read_file(file: &std::fs::File, len: u64) -> Result<Elf> {
        let source = FileSource { file, len };
        let prefetched = Prefetched::for_elf(&source).map_err(|source| {
            Error::from(Repr::Io {
                path: Location::default(),
                op: "read",
                source,
            })
        })?;
        Elf::read_with(&prefetched, false)
    }

    /// Maps `[vaddr, vaddr + len)` to a file offset through the `PT_LOAD` that maps it from the
    /// file: its file part (`p_filesz`) or the tail of its last page ([`Elf::mapped_tail`]).
    pub fn vaddr_to_offset(&self, vaddr: u64, len: u64) -> Option<u64> {
        self.loads()
            .find(|p| p.contains_vaddr(vaddr, len))
            .or_else(|| {
                self.mapped_loads()
                    .find(|(p, tail)| with_tail(p, *tail).contains_vaddr(vaddr, len))
                    .map(|(p, _)| p)
            })
            .map(|p| p.p_offset + (vaddr - p.p_vaddr))
    }

    /// Maps a file offset to a virtual address through the `PT_LOAD` that maps it from the file
    /// (its file part, or the tail of its last page).
    pub fn offset_to_vaddr(&self, offset: u64, len: u64) -> Option<u64> {
        self.loads()
            .find(|p| p.contains_offset(offset, len))
            .or_else(|| {
                self.mapped_loads()
                    .find(|(p, tail)| with_tail(p, *tail).contains_offset(offset, len))
                    .map(|(p, _)| p)
            })
            .map(|p| p.p_vaddr + (offset - p.p_offset))
    }

    /// Each `PT_LOAD` with the number of bytes past its `p_filesz` that the loader maps from the
    /// file too ([`Elf::mapped_tail`]).
    pub fn mapped_loads(&self) -> impl Iterator<Item = (&Phdr, u64)> {
        self.loads().map(|p| (p, self.mapped_tail(p)))
    }

    /// How many file bytes past `p_filesz` the loader maps, unchanged, for the `PT_LOAD` `p`: the
    /// rest of its last page, at the smallest page size the machine runs with
    /// ([`min_page_size`]).
    ///
    /// The kernel (`binfmt_elf`, for a program) and glibc (`_dl_map_segments`, for everything it
    /// loads) map whole pages: `[p_vaddr & -page, (p_vaddr + p_filesz + page - 1) & -page)` from
    /// the file offset `p_offset & -page`. When `p_memsz > p_filesz` both zero what follows
    /// `p_filesz` in that page (the kernel to the page's end, glibc up to `p_memsz`), so those
    /// bytes are not the file's: no tail then. Otherwise the tail holds the file's bytes at every
    /// page size from the smallest up, as long as
    /// - `p_offset ≡ p_vaddr` modulo that page (else no loader maps the segment at all);
    /// - the bytes exist: the tail stops at the end of the file (past it a page reads as zeros);
    /// - no other `PT_LOAD` maps the same page with other contents: one whose page range
    ///   overlaps the tail ends it where that segment starts when both map the file with the same
    ///   bias (the same bytes), and leaves none otherwise.
    pub fn mapped_tail(&self, p: &Phdr) -> u64 {
        let page = min_page_size(self.machine());
        let bias = |q: &Phdr| q.p_vaddr.wrapping_sub(q.p_offset);
        if p.p_type != elf::PT_LOAD
            || p.p_filesz == 0
            || p.p_memsz != p.p_filesz
            || bias(p) % page != 0
        {
            return 0;
        }
        let Some(end) = p.p_vaddr.checked_add(p.p_filesz) else {
            return 0;
        };
        let Some(page_end) = end.checked_next_multiple_of(page) else {
            return 0;
        };
        let mut tail = (page_end - end).min(self.file_len.saturating_sub(p.offset_end()));
        for q in self.loads() {
            if q.p_memsz == 0 || tail == 0 {
                continue;
            }
            let q_lo = q.p_vaddr - q.p_vaddr % page;
            if q_lo < end + tail && q.vaddr_end() > end {
                tail = if bias(q) == bias(p) {
                    tail.min(q.p_vaddr.saturating_sub(end))
                } else {
                    0
                };
            }
        }
        tail
    }

    /// The `PT_LOAD` program headers, in table order.
    pub fn loads(&self) -> impl Iterator<Item = &Phdr> {
        self.phdrs.iter().filter(|p| p.p_type == elf::PT_LOAD)
    }

    /// The class (32 or 64-bit).
    pub fn class(&self) -> Class {
        self.format.class
    }

    /// The byte order.
    pub fn endian(&self) -> Endian {
        self.format.endian
    }

    /// `e_machine`.
    pub fn machine(&self) -> u16 {
        self.header.e_machine
    }

    /// `e_type`.
    pub fn e_type(&self) -> u16 {
        self.header.e_type
    }

    /// The interpreter path, if the file has `PT_INTERP`.
    pub fn interpreter(&self) -> Option<&[u8]> {
        self.interp.as_ref().map(|i| i.path.as_slice())
    }

    fn string_values(&self, tag: u32) -> Vec<&[u8]> {
        let (Some(d), Some(s)) = (&self.dynamic, &self.strtab) else {
            return Vec::new();
        };
        d.entries()
            .iter()
            .filter(|e| e.tag == u64::from(tag))
            .filter_map(|e| s.get(e.val))
            .collect()
    }

    /// `DT_NEEDED` names in order.
    pub fn needed(&self) -> Vec<&[u8]> {
        self.string_values(elf::DT_NEEDED)
    }

    /// `DT_SONAME`, if present.
    pub fn soname(&self) -> Option<&[u8]> {
        self.string_values(elf::DT_SONAME).into_iter().next()
    }

    /// `DT_RPATH`, if present.
    pub fn rpath(&self) -> Option<&[u8]> {
        self.string_values(elf::DT_RPATH).into_iter().next()
    }

    /// `DT_RUNPATH`, if present.
    pub fn runpath(&self) -> Option<&[u8]> {
        self.string_values(elf::DT_RUNPATH).into_iter().next()
    }

    /// `EI_OSABI`, the identification byte naming the OS ABI.
    pub fn os_abi(&self) -> u8 {
        self.header.ident[EI_OSABI]
    }

    /// Whether the stack is executable as the loader decides it: `PF_X` of the last
    /// `PT_GNU_STACK` (the kernel and glibc both take the last). `None` when there is none: the
    /// architecture's default applies then (executable on x86, for one).
    pub fn execstack(&self) -> Option<bool> {
        execstack(&self.phdrs)
    }

    /// `DT_FLAGS`, if present.
    pub fn flags(&self) -> Option<u64> {
        self.dynamic.as_ref().and_then(|d| d.get(elf::DT_FLAGS))
    }

    /// `DT_FLAGS_1`, if present.
    pub fn flags_1(&self) -> Option<u64> {
        self.dynamic.as_ref().and_then(|d| d.get(elf::DT_FLAGS_1))
    }

    /// Whether `e_shoff` names a section header table that cannot be read (see `read_sections`):
    /// the file is then read as one without section headers.
    pub fn section_headers_unusable(&self) -> bool {
        self.header.e_shoff != 0 && self.sections.is_empty()
    }

    /// Refuses a file whose section header table does not fit in it (a file cut short), in
    /// patchelf's words ("section header table out of bounds") with the offsets. The loader
    /// reads no section header, so the file still loads and [`Elf::read`] reads it; but an edit
    /// would have to drop the table (data appended where it claims to be would be read as
    /// section headers), and a truncated library is a broken install the user must hear of. So
    /// every request of elfpatch's CLI, a print included, is refused on it, and so is every
    /// plan: the file stays byte-identical. The other section-header damage (an entry size that
    /// is not the class's, names out of bounds) is worked around, with a [`Warning`].
    pub fn check_section_table(&self) -> Result<()> {
        match self.section_table_out_of_bounds {
            None => Ok(()),
            Some(t) => Err(Repr::SectionTableOutOfBounds {
                path: Location::default(),
                offset: t.offset,
                count: t.count,
                entry_size: t.entry_size,
                file_len: self.file_len,
            }
            .into()),
        }
    }

    /// Where the section header table ends, when the file has one that could be read.
    pub fn section_table_end(&self) -> Option<u64> {
        let size = (self.sections.len() * self.format.shdr_size()) as u64;
        (!self.sections.is_empty()).then(|| self.header.e_shoff.saturating_add(size))
    }

    /// Whether the section header table ends the file, as linkers and `strip` leave it: nothing
    /// after it but padding, that is fewer than [`SHDR_TRAILER`] zero bytes. Zeros carry no
    /// data, and less than a page of them is what an alignment leaves; anything else after the
    /// table (an appended payload, a signature, more zeros than any alignment needs) is someone's
    /// data, and the table is not last.
    pub fn section_headers_end_file(&self) -> bool {
        self.section_table_end().is_some_and(|end| {
            end <= self.file_len
                && self.file_len - end < SHDR_TRAILER
                && self.shdr_trailer.len() as u64 == self.file_len - end
                && self.shdr_trailer.iter().all(|&b| b == 0)
        })
    }

    /// The section with this index.
    pub fn section(&self, index: usize) -> Option<&Section> {
        self.sections.get(index)
    }

    /// The first section with this name.
    pub fn section_by_name(&self, name: &[u8]) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// Every string entry must point inside the string table at a NUL-terminated string:
    /// otherwise editing would read or write past it.
    fn check_string_entries(&self) -> Result<()> {
        let Some(d) = &self.dynamic else {
            return Ok(());
        };
        for (i, e) in d.entries().iter().enumerate() {
            if !is_string_tag(e.tag) {
                continue;
            }
            let entry_off = d.offset + (i * self.format.dyn_size()) as u64;
            let Some(s) = &self.strtab else {
                return Err(Error::malformed(
                    entry_off,
                    format!(
                        "dynamic entry {} holds a string but there is no DT_STRTAB",
                        tag_name(e.tag)
                    ),
                ));
            };
            if s.get(e.val).is_none() {
                return Err(Error::malformed(
                    entry_off,
                    format!(
                        "{} offset {:#x} is outside the {}-byte string table or not NUL-terminated: string table index out of bounds",
                        tag_name(e.tag),
                        e.val,
                        s.size
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The file header and the program headers alone: what `--print-os-abi` and `--print-execstack`
/// read, for a file [`Elf::read`] refuses because its dynamic information has no contents (a
/// separate debug-info file, [`crate::Error::is_separate_debug_info`]). Nothing else is read, so
/// nothing here can be planned or edited.
pub fn headers<S: Source + ?Sized>(src: &S) -> Result<(Format, Header, Vec<Phdr>)> {
    let (format, ehdr) = read_format(src)?;
    let header = format.decode_header(&ehdr);
    let (_, phnum, _) = read_sections(src, format, &header, &mut Vec::new())?;
    let phdrs = read_phdrs(src, format, &header, phnum)?;
    Ok((format, header, phdrs))
}

/// What a request needs of the file (`crate::need`).
impl Elf {
    /// Whether the file has what `need` asks for; the error says what it is instead.
    pub fn require(&self, need: Need) -> Result<()> {
        let t = self.e_type();
        if t != elf::ET_EXEC && t != elf::ET_DYN {
            return Err(Error::absent(format!(
                "wrong ELF type: {}, not an executable or a shared library",
                type_name(t)
            )));
        }
        match need {
            Need::Image => Ok(()),
            Need::Dynamic if self.dynamic.is_none() => Err(self.no_dynamic()),
            Need::Interpreter if self.interp.is_none() => Err(Error::absent(
                "no PT_INTERP: the file has no program interpreter (a shared library, or a \
                 statically linked program)",
            )),
            Need::Dynamic | Need::Interpreter => Ok(()),
        }
    }

    /// Why a file without a dynamic array cannot answer or take a request of it.
    fn no_dynamic(&self) -> Error {
        if self.phdrs.iter().any(|p| p.p_type == elf::PT_DYNAMIC) {
            // An empty PT_DYNAMIC (linker scripts that list one with nothing in it): glibc reads
            // the array at its address all the same, so no loader uses what a .dynamic section
            // outside it would say, and an array there would be one the loader never meant.
            Error::unsupported("the file's PT_DYNAMIC is empty: there is no dynamic array")
        } else if let Some(reason) = &self.unread_dynamic_section {
            // A .dynamic section no PT_DYNAMIC describes is read when it reads soundly
            // (`Elf::read_dynamic_section`); this one does not.
            Error::unsupported(format!(
                "the file has a .dynamic section but no PT_DYNAMIC, and the section cannot be \
                 read soundly: {reason}"
            ))
        } else if self
            .sections
            .iter()
            .any(|s| s.shdr.sh_type == elf::SHT_DYNAMIC)
        {
            // SHT_NOBITS: a debug-info file's placeholder, not an array.
            Error::unsupported(
                "the file's .dynamic section holds no bytes and there is no PT_DYNAMIC",
            )
        } else {
            Error::absent(
                "no dynamic section (no PT_DYNAMIC): the file is most likely statically linked",
            )
        }
    }
}
