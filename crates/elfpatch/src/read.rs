//! Parsing: from a [`Source`] to an [`Elf`], reading only headers, `.dynamic`, the dynamic string
//! table and the interpreter path.
//!
//! Everything is located through the program headers (`PT_DYNAMIC`, `PT_INTERP`, and `PT_LOAD` to
//! map `DT_STRTAB` to a file offset), so files without section headers are read exactly like the
//! others. Section headers, when present, are read too so that edits can keep them consistent;
//! the one thing found through them is the `.dynamic` section of a file without `PT_DYNAMIC`,
//! which no loader reads (see [`Elf::read`]'s `read_dynamic_section`).

use object::elf;

use crate::error::{Error, Location, Repr, Result, Warning, WarningKind};
use crate::format::{Class, Dyn, Endian, Format, Header, Phdr, Shdr};
use crate::source::{check_range, read_range, FileSource, Prefetched, Source};

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

/// The dynamic array, as found through `PT_DYNAMIC` or, in a file without one, through its
/// `SHT_DYNAMIC` section (see [`Elf::read`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dynamic {
    /// Index of the `PT_DYNAMIC` program header; `None` when the file has none and the array was
    /// located through its `.dynamic` section, which no loader reads.
    pub phdr_index: Option<usize>,
    /// File offset of the first entry.
    pub offset: u64,
    /// Virtual address of the first entry.
    pub vaddr: u64,
    /// Every slot that fits in `PT_DYNAMIC`'s `p_filesz` (the section's `sh_size` without one),
    /// including the terminating and any spare `DT_NULL` entries.
    pub slots: Vec<Dyn>,
    /// Number of entries before the first `DT_NULL`.
    pub len: usize,
    /// Index of the `SHT_DYNAMIC` section describing the same bytes, if any.
    pub section: Option<usize>,
}

impl Dynamic {
    /// The entries before the terminating `DT_NULL`.
    pub fn entries(&self) -> &[Dyn] {
        &self.slots[..self.len]
    }

    /// The value of the first entry with `tag`.
    pub fn get(&self, tag: u32) -> Option<u64> {
        self.entries()
            .iter()
            .find(|d| d.tag == u64::from(tag))
            .map(|d| d.val)
    }

    /// How many entries (including the terminator) fit where the array is now.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}

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

/// The program interpreter (`PT_INTERP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interp {
    /// Index of the `PT_INTERP` program header.
    pub phdr_index: usize,
    /// File offset of the path.
    pub offset: u64,
    /// Bytes reserved for it (`p_filesz`, including the terminating NUL).
    pub capacity: u64,
    /// The path, without the terminating NUL.
    pub path: Vec<u8>,
    /// Index of the `.interp` section, if any.
    pub section: Option<usize>,
}

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

/// The index of `EI_OSABI` in `e_ident` (not among `object`'s constants).
pub const EI_OSABI: usize = 7;

/// How many bytes after the program header table [`Elf::phdr_tail`] holds.
pub const PHDR_TAIL: u64 = 512;

/// How many bytes after the section header table [`Elf::shdr_trailer`] holds: at most one short
/// of a page of padding lets the table still count as ending the file.
pub const SHDR_TRAILER: u64 = 4096;

/// Dynamic tags whose value is an offset into the dynamic string table.
pub const STRING_TAGS: [u32; 9] = [
    elf::DT_NEEDED,
    elf::DT_SONAME,
    elf::DT_RPATH,
    elf::DT_RUNPATH,
    elf::DT_AUXILIARY,
    elf::DT_FILTER,
    elf::DT_CONFIG,
    elf::DT_DEPAUDIT,
    elf::DT_AUDIT,
];

/// Whether entries with this tag hold a string table offset.
pub fn is_string_tag(tag: u64) -> bool {
    STRING_TAGS.iter().any(|&t| u64::from(t) == tag)
}

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

/// Whether the stack is executable, from the program headers alone (see [`Elf::execstack`]).
pub fn execstack(phdrs: &[Phdr]) -> Option<bool> {
    phdrs
        .iter()
        .rev()
        .find(|p| p.p_type == elf::PT_GNU_STACK)
        .map(|p| p.p_flags & elf::PF_X != 0)
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

/// `p` with its file part grown by `tail` bytes (what the loader maps from the file, with
/// [`Elf::mapped_tail`]).
pub(crate) fn with_tail(p: &Phdr, tail: u64) -> Phdr {
    Phdr {
        p_filesz: p.p_filesz + tail,
        ..*p
    }
}

/// The smallest page size Linux runs `machine` with: 8 KiB on sparc64 and alpha, 4 KiB on every
/// other architecture (x86, arm, aarch64, ppc, s390, riscv, mips, loongarch also run with 16 or
/// 64 KiB pages, which map a superset). What the loader maps at this size it maps at every size a
/// file of that machine may meet.
pub fn min_page_size(machine: u16) -> u64 {
    match machine {
        elf::EM_SPARCV9 | elf::EM_ALPHA => 8192,
        _ => 4096,
    }
}

/// The size of a System V hash table's words (`DT_HASH`: nbucket, nchain, buckets, chains): 8
/// bytes on 64-bit s390 and alpha, whose C libraries define `Elf_Symndx` as a 64-bit type, 4 on
/// every other machine (the gABI's `Elf64_Word`).
pub fn sysv_hash_word(machine: u16, class: crate::Class) -> u64 {
    match (machine, class) {
        (elf::EM_S390 | elf::EM_ALPHA, crate::Class::Elf64) => 8,
        _ => 4,
    }
}

/// A short name for a dynamic tag, for messages.
pub fn tag_name(tag: u64) -> String {
    let t = tag as u32;
    let name = match t {
        elf::DT_NEEDED => "DT_NEEDED",
        elf::DT_SONAME => "DT_SONAME",
        elf::DT_RPATH => "DT_RPATH",
        elf::DT_RUNPATH => "DT_RUNPATH",
        elf::DT_STRTAB => "DT_STRTAB",
        elf::DT_STRSZ => "DT_STRSZ",
        elf::DT_SYMTAB => "DT_SYMTAB",
        elf::DT_AUXILIARY => "DT_AUXILIARY",
        elf::DT_FILTER => "DT_FILTER",
        elf::DT_CONFIG => "DT_CONFIG",
        elf::DT_DEPAUDIT => "DT_DEPAUDIT",
        elf::DT_AUDIT => "DT_AUDIT",
        elf::DT_VERNEED => "DT_VERNEED",
        elf::DT_VERDEF => "DT_VERDEF",
        elf::DT_VERSYM => "DT_VERSYM",
        elf::DT_HASH => "DT_HASH",
        elf::DT_GNU_HASH => "DT_GNU_HASH",
        _ => return format!("dynamic tag {tag:#x}"),
    };
    name.to_string()
}

/// Reads the identification bytes and the file header in one read.
fn read_format<S: Source + ?Sized>(src: &S) -> Result<(Format, Vec<u8>)> {
    let not_elf = |what: String| {
        Error::from(Repr::NotElf {
            path: Default::default(),
            what,
        })
    };
    let n = src.len().min(64);
    if n < 4 {
        return Err(not_elf(format!("{} bytes long", src.len())));
    }
    let head = read_range(src, 0, n, "ELF header")?;
    if head[..4] != elf::ELFMAG {
        let bytes: Vec<String> = head[..4].iter().map(|b| format!("{b:#04x}")).collect();
        return Err(not_elf(format!(
            "it starts with {}, not 0x7f 'E' 'L' 'F'",
            bytes.join(" ")
        )));
    }
    let truncated = |needed: usize| {
        Error::from(Repr::Truncated {
            path: Default::default(),
            what: "ELF header".into(),
            offset: 0,
            needed: needed as u64,
            file_len: src.len(),
        })
    };
    if head.len() < 16 {
        return Err(truncated(16));
    }
    let class = match head[4] {
        elf::ELFCLASS32 => Class::Elf32,
        elf::ELFCLASS64 => Class::Elf64,
        c => return Err(not_elf(format!("unknown class {c}"))),
    };
    let endian = match head[5] {
        elf::ELFDATA2LSB => Endian::Little,
        elf::ELFDATA2MSB => Endian::Big,
        d => return Err(not_elf(format!("unknown data encoding {d}"))),
    };
    let f = Format { class, endian };
    if head.len() < f.ehdr_size() {
        return Err(truncated(f.ehdr_size()));
    }
    Ok((f, head))
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
fn read_sections<S: Source + ?Sized>(
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

fn read_phdrs<S: Source + ?Sized>(
    src: &S,
    f: Format,
    h: &Header,
    phnum: usize,
) -> Result<Vec<Phdr>> {
    if phnum == 0 {
        return Ok(Vec::new());
    }
    if usize::from(h.e_phentsize) != f.phdr_size() {
        return Err(Error::malformed(
            0,
            format!(
                "e_phentsize is {}, expected {}",
                h.e_phentsize,
                f.phdr_size()
            ),
        ));
    }
    let len = (phnum * f.phdr_size()) as u64;
    let table = read_range(
        src,
        h.e_phoff,
        len,
        "program header table out of bounds: the table",
    )?;
    let phdrs: Vec<Phdr> = table
        .chunks_exact(f.phdr_size())
        .map(|c| f.decode_phdr(c))
        .collect();
    for (i, p) in phdrs.iter().enumerate() {
        let at = h.e_phoff + (i * f.phdr_size()) as u64;
        if p.p_type == elf::PT_LOAD || p.p_type == elf::PT_DYNAMIC || p.p_type == elf::PT_INTERP {
            if p.p_filesz > p.p_memsz && p.p_type == elf::PT_LOAD {
                return Err(Error::malformed(
                    at,
                    format!("PT_LOAD {i} has p_filesz > p_memsz"),
                ));
            }
            // A segment with no file bytes reads nothing, wherever its offset (objcopy's
            // `--only-keep-debug` leaves the emptied ones past the shortened file's end).
            let file_range = if p.p_filesz == 0 { 0 } else { p.p_offset };
            check_range(src.len(), file_range, p.p_filesz, &format!("segment {i}"))
                .map_err(|_| {
                    Error::malformed(
                        at,
                        format!(
                            "segment {i} (file range {:#x}+{:#x}) extends past the end of the file ({:#x} bytes)",
                            p.p_offset,
                            p.p_filesz,
                            src.len()
                        ),
                    )
                })?;
            if p.p_vaddr
                .checked_add(p.p_memsz)
                .is_none_or(|e| e > f.max_addr().saturating_add(1))
            {
                return Err(Error::malformed(
                    at,
                    format!("segment {i} wraps the address space"),
                ));
            }
        }
    }
    Ok(phdrs)
}

fn read_dynamic<S: Source + ?Sized>(src: &S, e: &Elf) -> Result<Option<Dynamic>> {
    let mut found = e
        .phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type == elf::PT_DYNAMIC);
    let Some((phdr_index, p)) = found.next() else {
        return Ok(None);
    };
    if found.next().is_some() {
        return Err(Error::malformed(
            e.header.e_phoff,
            "more than one PT_DYNAMIC",
        ));
    }
    // Separate debug-info files keep the program headers but not the contents: their .dynamic
    // is SHT_NOBITS, and whatever lies at p_offset is something else.
    if e.sections.iter().any(|s| {
        s.shdr.sh_type == elf::SHT_NOBITS
            && s.shdr.is_alloc()
            && s.shdr.sh_addr == p.p_vaddr
            && s.shdr.sh_size > 0
    }) {
        return Err(Repr::SeparateDebugInfo {
            path: Location::default(),
        }
        .into());
    }
    if p.p_filesz == 0 {
        // An empty PT_DYNAMIC (linker scripts that name one and put nothing in it; patchelf's
        // tests `empty-note`, `contiguous-note-sections`) holds no array: the file is read as one
        // without, so that edits of the interpreter and the headers go through.
        return Ok(None);
    }
    let f = e.format;
    let bytes = read_range(src, p.p_offset, p.p_filesz, "dynamic section")?;
    let slots: Vec<Dyn> = bytes
        .chunks_exact(f.dyn_size())
        .map(|c| f.decode_dyn(c))
        .collect();
    let Some(len) = slots.iter().position(|d| d.tag == u64::from(elf::DT_NULL)) else {
        return Err(Error::malformed(
            p.p_offset,
            format!(
                // patchelf's words for it close the message: scripts (its own invalid-elf test
                // among them) look for them.
                "dynamic section ({} bytes) has no DT_NULL terminator, so any edit of it would \
                 write past its end (patchelf: setSubstr: write extends past end of section)",
                p.p_filesz
            ),
        ));
    };
    let section = e
        .sections
        .iter()
        .find(|s| s.shdr.sh_type == elf::SHT_DYNAMIC && s.shdr.sh_offset == p.p_offset)
        .map(|s| s.index);
    Ok(Some(Dynamic {
        phdr_index: Some(phdr_index),
        offset: p.p_offset,
        vaddr: p.p_vaddr,
        slots,
        len,
        section,
    }))
}

/// The `.dynamic` section of a file without `PT_DYNAMIC` (see [`Elf::read_dynamic_section`]):
/// `Ok(None)` when there is none with file bytes, `Err` with the reason it cannot be read as the
/// dynamic array.
fn dynamic_section<S: Source + ?Sized>(
    src: &S,
    e: &Elf,
) -> std::result::Result<Option<Dynamic>, String> {
    let mut found = e
        .sections
        .iter()
        .filter(|s| s.shdr.sh_type == elf::SHT_DYNAMIC && s.shdr.has_file_bytes());
    let Some(s) = found.next() else {
        return Ok(None);
    };
    if found.next().is_some() {
        return Err("there is more than one SHT_DYNAMIC section".into());
    }
    let sh = s.shdr;
    let f = e.format;
    // Only what a segment maps from the file is the image's: an array elsewhere would be moved
    // into the image by an edit, or edited where no segment puts it.
    if sh.sh_size < f.dyn_size() as u64
        || !sh.is_alloc()
        || e.vaddr_to_offset(sh.sh_addr, sh.sh_size) != Some(sh.sh_offset)
    {
        return Err(format!(
            "it (offset {:#x}, address {:#x}, {} bytes) is not where a PT_LOAD maps it from the file",
            sh.sh_offset, sh.sh_addr, sh.sh_size
        ));
    }
    let bytes =
        read_range(src, sh.sh_offset, sh.sh_size, "dynamic section").map_err(|e| e.to_string())?;
    let slots: Vec<Dyn> = bytes
        .chunks_exact(f.dyn_size())
        .map(|c| f.decode_dyn(c))
        .collect();
    let Some(len) = slots.iter().position(|d| d.tag == u64::from(elf::DT_NULL)) else {
        return Err(format!(
            "it ({} bytes at offset {:#x}) has no DT_NULL terminator",
            sh.sh_size, sh.sh_offset
        ));
    };
    Ok(Some(Dynamic {
        phdr_index: None,
        offset: sh.sh_offset,
        vaddr: sh.sh_addr,
        slots,
        len,
        section: Some(s.index),
    }))
}

fn read_strtab<S: Source + ?Sized>(src: &S, e: &Elf, whole: bool) -> Result<Option<StrTab>> {
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

fn read_interp<S: Source + ?Sized>(src: &S, e: &Elf) -> Result<Option<Interp>> {
    let mut found = e
        .phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type == elf::PT_INTERP);
    let Some((phdr_index, p)) = found.next() else {
        return Ok(None);
    };
    if found.next().is_some() {
        return Err(Error::malformed(
            e.header.e_phoff,
            "more than one PT_INTERP",
        ));
    }
    if p.p_filesz > 1 << 16 {
        return Err(Error::malformed(
            p.p_offset,
            format!("PT_INTERP is {} bytes long", p.p_filesz),
        ));
    }
    let bytes = read_range(src, p.p_offset, p.p_filesz, "interpreter path")?;
    let Some(end) = bytes.iter().position(|&b| b == 0) else {
        return Err(Error::malformed(
            p.p_offset,
            "PT_INTERP path is not NUL-terminated",
        ));
    };
    let section = e
        .sections
        .iter()
        .find(|s| s.shdr.sh_offset == p.p_offset && s.shdr.has_file_bytes() && s.name == b".interp")
        .map(|s| s.index)
        .or_else(|| section_by_extent(e, p.p_offset, p.p_vaddr, p.p_filesz));
    Ok(Some(Interp {
        phdr_index,
        offset: p.p_offset,
        capacity: p.p_filesz,
        path: bytes[..end].to_vec(),
        section,
    }))
}

/// The one section that describes exactly the table at `offset`/`vaddr` (`size` bytes), whatever
/// its type and name say. A table that moves must take its section header along, and a damaged
/// or unusual `sh_type` or `.shstrtab` must not leave that header pointing at zeroed bytes; when
/// more than one section claims the bytes, none is chosen (the strict match was the only hope).
fn section_by_extent(e: &Elf, offset: u64, vaddr: u64, size: u64) -> Option<usize> {
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
