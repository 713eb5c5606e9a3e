//! An independent, deliberately small ELF reader used as a test oracle.
//!
//! It shares no code with any editor under test, and with the builder in this
//! crate only the plain record a section is described with ([`SectionHeader`]):
//! its decoding and hash functions are its own; the numbers it compares with
//! are `object::elf`'s (the gABI's). Everything read from the file is
//! bounds-checked; malformed input yields an [`Error`] (from [`read`]) or a
//! violation (from [`check_layout`]), never a panic.
//!
//! The dynamic view is the loader's: `.dynamic` is found through
//! `PT_DYNAMIC`, strings through `DT_STRTAB`/`DT_STRSZ` mapped by the
//! `PT_LOAD`s, symbols through `DT_SYMTAB`. Section headers are only used
//! when present (to count `.dynsym`, to list sections and to read
//! `.symtab`).
//!
//! The model and the entry points are here; the reading is split by what it
//! reads (`bytes`, `headers`, `dynamic`), the checks of [`check_layout`] by
//! what they check (`layout`, `symbols`).

mod bytes;
mod dynamic;
mod headers;
mod layout;
mod symbols;

use std::fmt;

use bytes::{cstr, R};
use headers::{parse_header, parse_phdrs, parse_shdrs};

/// Why a file could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

type Res<T> = Result<T, Error>;

fn err<T>(msg: impl Into<String>) -> Res<T> {
    Err(Error(msg.into()))
}

/// The numbers the oracle compares with: `object::elf`'s (the gABI's and GNU's numbers, not
/// code), typed as the oracle reads the fields (dynamic tags and section flags as 64-bit values).
mod k {
    use object::elf;

    pub use elf::{
        EM_MIPS, EM_S390, PF_W, PF_X, PT_DYNAMIC, PT_INTERP, PT_LOAD, PT_NOTE, PT_PHDR,
        SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM,
        SHT_HASH, SHT_NOBITS, SHT_STRTAB, SHT_SYMTAB,
    };

    pub const SHF_ALLOC: u64 = elf::SHF_ALLOC as u64;
    pub const DT_NULL: u64 = elf::DT_NULL as u64;
    pub const DT_NEEDED: u64 = elf::DT_NEEDED as u64;
    pub const DT_HASH: u64 = elf::DT_HASH as u64;
    pub const DT_STRTAB: u64 = elf::DT_STRTAB as u64;
    pub const DT_SYMTAB: u64 = elf::DT_SYMTAB as u64;
    pub const DT_STRSZ: u64 = elf::DT_STRSZ as u64;
    pub const DT_SYMENT: u64 = elf::DT_SYMENT as u64;
    pub const DT_INIT: u64 = elf::DT_INIT as u64;
    pub const DT_FINI: u64 = elf::DT_FINI as u64;
    pub const DT_SONAME: u64 = elf::DT_SONAME as u64;
    pub const DT_RPATH: u64 = elf::DT_RPATH as u64;
    pub const DT_RUNPATH: u64 = elf::DT_RUNPATH as u64;
    pub const DT_GNU_HASH: u64 = elf::DT_GNU_HASH as u64;
    pub const DT_VERSYM: u64 = elf::DT_VERSYM as u64;
    pub const DT_VERDEF: u64 = elf::DT_VERDEF as u64;
    pub const DT_VERDEFNUM: u64 = elf::DT_VERDEFNUM as u64;
    pub const DT_VERNEED: u64 = elf::DT_VERNEED as u64;
    pub const DT_VERNEEDNUM: u64 = elf::DT_VERNEEDNUM as u64;
    pub const DT_CONFIG: u64 = elf::DT_CONFIG as u64;
    pub const DT_DEPAUDIT: u64 = elf::DT_DEPAUDIT as u64;
    pub const DT_AUDIT: u64 = elf::DT_AUDIT as u64;
    pub const DT_AUXILIARY: u64 = elf::DT_AUXILIARY as u64;
    pub const DT_FILTER: u64 = elf::DT_FILTER as u64;
    pub const DT_MIPS_RLD_MAP_REL: u64 = elf::DT_MIPS_RLD_MAP_REL as u64;
}

/// Dynamic tags whose value is an offset into the dynamic string table.
pub const STRING_TAGS: [u64; 9] = [
    k::DT_NEEDED,
    k::DT_SONAME,
    k::DT_RPATH,
    k::DT_RUNPATH,
    k::DT_CONFIG,
    k::DT_DEPAUDIT,
    k::DT_AUDIT,
    k::DT_AUXILIARY,
    k::DT_FILTER,
];

/// Dynamic tags whose value is a virtual address that must lie in a
/// `PT_LOAD` (checked by [`check_layout`]).
pub const POINTER_TAGS: [u64; 8] = [
    k::DT_HASH,
    k::DT_GNU_HASH,
    k::DT_SYMTAB,
    k::DT_INIT,
    k::DT_FINI,
    k::DT_VERSYM,
    k::DT_VERNEED,
    k::DT_VERDEF,
];

/// ELF header fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// `EI_CLASS`: 1 = 32-bit, 2 = 64-bit.
    pub class: u8,
    /// `EI_DATA`: 1 = little endian, 2 = big endian.
    pub data: u8,
    /// `EI_OSABI`.
    pub osabi: u8,
    /// `e_type`.
    pub e_type: u16,
    /// `e_machine`.
    pub e_machine: u16,
    /// `e_version`.
    pub e_version: u32,
    /// `e_entry`.
    pub e_entry: u64,
    /// `e_phoff`.
    pub e_phoff: u64,
    /// `e_shoff`.
    pub e_shoff: u64,
    /// `e_flags`.
    pub e_flags: u32,
    /// `e_ehsize`.
    pub e_ehsize: u16,
    /// `e_phentsize`.
    pub e_phentsize: u16,
    /// `e_phnum`.
    pub e_phnum: u16,
    /// `e_shentsize`.
    pub e_shentsize: u16,
    /// `e_shnum`.
    pub e_shnum: u16,
    /// `e_shstrndx`.
    pub e_shstrndx: u16,
}

/// A program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramHeader {
    /// `p_type`.
    pub p_type: u32,
    /// `p_flags`.
    pub p_flags: u32,
    /// `p_offset`.
    pub p_offset: u64,
    /// `p_vaddr`.
    pub p_vaddr: u64,
    /// `p_paddr`.
    pub p_paddr: u64,
    /// `p_filesz`.
    pub p_filesz: u64,
    /// `p_memsz`.
    pub p_memsz: u64,
    /// `p_align`.
    pub p_align: u64,
}

/// A section header, with its name resolved through `e_shstrndx` (the crate's one section type,
/// which the builder's layout uses as well).
pub use crate::section::Section as SectionHeader;

pub use layout::check_layout;

/// One `.dynamic` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynEntry {
    /// `d_tag` (sign-extended tags appear as their unsigned 64-bit value).
    pub tag: u64,
    /// `d_val` / `d_ptr`.
    pub value: u64,
    /// For string tags ([`STRING_TAGS`]), the string the value points at.
    pub string: Option<String>,
}

/// A symbol from `.dynsym` or `.symtab`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Name.
    pub name: String,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `st_info` (binding << 4 | type).
    pub info: u8,
    /// `st_shndx`.
    pub shndx: u16,
    /// The `.gnu.version` entry for dynamic symbols with a `DT_VERSYM`.
    pub version: Option<u16>,
}

/// The plain model returned by [`read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elf {
    /// The ELF header.
    pub header: Header,
    /// Program headers in table order.
    pub program_headers: Vec<ProgramHeader>,
    /// Section headers in table order (empty without section headers).
    pub sections: Vec<SectionHeader>,
    /// `.dynamic` entries (through `PT_DYNAMIC`) up to, not including, the
    /// first `DT_NULL`.
    pub dynamic: Vec<DynEntry>,
    /// Number of entries that fit in `PT_DYNAMIC`'s file size (so the
    /// spare `DT_NULL` slots are `dynamic_slots - dynamic.len() - 1`).
    pub dynamic_slots: usize,
    /// `DT_NEEDED` strings in order.
    pub needed: Vec<String>,
    /// `DT_SONAME`.
    pub soname: Option<String>,
    /// `DT_RPATH`.
    pub rpath: Option<String>,
    /// `DT_RUNPATH`.
    pub runpath: Option<String>,
    /// The interpreter named by `PT_INTERP` (without its NUL).
    pub interpreter: Option<String>,
    /// Dynamic symbols (through `DT_SYMTAB`), without the null symbol 0.
    pub dynsyms: Vec<Symbol>,
    /// `.gnu.version_r` through `DT_VERNEED`: (file, version names).
    pub verneed: Vec<(String, Vec<String>)>,
    /// `.gnu.version_d` through `DT_VERDEF`: the first name of each
    /// definition.
    pub verdef: Vec<String>,
    /// `.symtab` symbols (through section headers), without symbol 0.
    pub symtab: Vec<Symbol>,
}

impl Elf {
    /// Names of [`Elf::dynsyms`].
    pub fn dynsym_names(&self) -> Vec<&str> {
        self.dynsyms.iter().map(|s| s.name.as_str()).collect()
    }

    /// The first section with this name.
    pub fn section(&self, name: &str) -> Option<&SectionHeader> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The first dynamic entry with this tag.
    pub fn dyn_entry(&self, tag: u64) -> Option<&DynEntry> {
        self.dynamic.iter().find(|e| e.tag == tag)
    }
}

/// A file's headers, read once for [`read`] and [`check_layout`]; the dynamic array and the
/// tables it points at are read from it on demand.
struct Parsed<'a> {
    r: R<'a>,
    header: Header,
    phdrs: Vec<ProgramHeader>,
    shdrs: Vec<SectionHeader>,
}

fn parse(d: &[u8]) -> Res<Parsed<'_>> {
    let (r, header) = parse_header(d)?;
    let phdrs = parse_phdrs(r, &header)?;
    let shdrs = parse_shdrs(r, &header)?;
    Ok(Parsed {
        r,
        header,
        phdrs,
        shdrs,
    })
}

/// Reads `data` into the plain [`Elf`] model.
pub fn read(data: &[u8]) -> Result<Elf, Error> {
    let p = parse(data)?;
    let raw_dyn = p.dynamic_raw()?;
    let (dynamic_raw, dynamic_slots) = raw_dyn;
    let strs = p.dynstr(&dynamic_raw)?;
    let s = |off: u64, what: &str| -> Res<String> {
        match strs {
            Some(b) => cstr(b, off, what),
            None => err(format!("{what}: no DT_STRTAB")),
        }
    };
    let mut dynamic = Vec::new();
    let (mut needed, mut soname, mut rpath, mut runpath) = (Vec::new(), None, None, None);
    for &(tag, value) in &dynamic_raw {
        let string = if STRING_TAGS.contains(&tag) {
            Some(s(value, &format!("dynamic tag {tag:#x}"))?)
        } else {
            None
        };
        match tag {
            k::DT_NEEDED => needed.push(string.clone().unwrap_or_default()),
            k::DT_SONAME if soname.is_none() => soname = string.clone(),
            k::DT_RPATH if rpath.is_none() => rpath = string.clone(),
            k::DT_RUNPATH if runpath.is_none() => runpath = string.clone(),
            _ => {}
        }
        dynamic.push(DynEntry { tag, value, string });
    }
    let interpreter = match p.phdrs.iter().find(|x| x.p_type == k::PT_INTERP) {
        Some(ph) => Some(cstr(p.r.slice(ph.p_offset, ph.p_filesz)?, 0, "PT_INTERP")?),
        None => None,
    };
    let mut dynsyms = Vec::new();
    if let Some(symtab) = Parsed::tag(&dynamic_raw, k::DT_SYMTAB) {
        let count = p.dynsym_count(&dynamic_raw)?;
        let ent = Parsed::tag(&dynamic_raw, k::DT_SYMENT).unwrap_or(p.r.sym_size());
        let off = p.map_off(symtab, "DT_SYMTAB")?;
        dynsyms = p.symbols(off, count, ent, strs.unwrap_or(&[]), "dynsym")?;
        if let Some(vs) = Parsed::tag(&dynamic_raw, k::DT_VERSYM) {
            let vo = p.map_off(vs, "DT_VERSYM")?;
            for (i, sym) in dynsyms.iter_mut().enumerate() {
                sym.version = Some(p.r.u16(vo + 2 * (i as u64 + 1))?);
            }
        }
    }
    let mut verneed = Vec::new();
    for (file, auxes) in p.verneed_raw(&dynamic_raw)? {
        let names = auxes
            .iter()
            .map(|a| s(u64::from(a.0), "vna_name"))
            .collect::<Res<Vec<_>>>()?;
        verneed.push((s(u64::from(file), "vn_file")?, names));
    }
    let verdef = p
        .verdef_raw(&dynamic_raw)?
        .iter()
        .map(|v| s(u64::from(v.0), "vda_name"))
        .collect::<Res<Vec<_>>>()?;
    let mut symtab = Vec::new();
    if let Some(st) = p.shdrs.iter().find(|x| x.sh_type == k::SHT_SYMTAB) {
        let strsec = p
            .shdrs
            .get(st.link as usize)
            .ok_or_else(|| Error(".symtab sh_link is not a valid section index".into()))?;
        let strb = p.r.slice(strsec.offset, strsec.size)?;
        let ent = if st.entsize == 0 {
            p.r.sym_size()
        } else {
            st.entsize
        };
        symtab = p.symbols(st.offset, st.size / ent, ent, strb, "symtab")?;
    }
    Ok(Elf {
        header: p.header,
        program_headers: p.phdrs,
        sections: p.shdrs,
        dynamic,
        dynamic_slots,
        needed,
        soname,
        rpath,
        runpath,
        interpreter,
        dynsyms,
        verneed,
        verdef,
        symtab,
    })
}
