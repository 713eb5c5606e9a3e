//! The dynamic array: found through `PT_DYNAMIC` or, in a file without one, through its
//! `.dynamic` section; and the facts about its tags that reading and editing share.

use object::elf;

use super::Elf;
use crate::error::{Error, Location, Repr, Result};
use crate::format::Dyn;
use crate::source::{read_range, Source};

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

pub(super) fn read_dynamic<S: Source + ?Sized>(src: &S, e: &Elf) -> Result<Option<Dynamic>> {
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
pub(super) fn dynamic_section<S: Source + ?Sized>(
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
