//! An independent, deliberately small ELF reader used as a test oracle.
//!
//! It shares no code with the builder in this crate or with any editor under
//! test: its decoding and hash functions are its own; the numbers it compares
//! with are `object::elf`'s (the gABI's). Everything read from the file is
//! bounds-checked; malformed input yields an [`Error`] (from [`read`]) or a
//! violation (from [`check_layout`]), never a panic.
//!
//! The dynamic view is the loader's: `.dynamic` is found through
//! `PT_DYNAMIC`, strings through `DT_STRTAB`/`DT_STRSZ` mapped by the
//! `PT_LOAD`s, symbols through `DT_SYMTAB`. Section headers are only used
//! when present (to count `.dynsym`, to list sections and to read
//! `.symtab`).

use std::fmt;

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

/// A section header, with its name resolved through `e_shstrndx`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionHeader {
    /// Name (empty when it cannot be resolved).
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr`.
    pub addr: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size`.
    pub size: u64,
    /// `sh_link`.
    pub link: u32,
    /// `sh_info`.
    pub info: u32,
    /// `sh_addralign`.
    pub addralign: u64,
    /// `sh_entsize`.
    pub entsize: u64,
}

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

// ---------------------------------------------------------------------------
// low-level reader

#[derive(Clone, Copy)]
struct R<'a> {
    d: &'a [u8],
    big: bool,
    is64: bool,
}

impl<'a> R<'a> {
    fn slice(&self, off: u64, len: u64) -> Res<&'a [u8]> {
        match off.checked_add(len) {
            Some(end) if end <= self.d.len() as u64 => Ok(&self.d[off as usize..end as usize]),
            _ => err(format!(
                "read of {len:#x} bytes at offset {off:#x} is outside the {:#x}-byte file",
                self.d.len()
            )),
        }
    }
    fn u8(&self, off: u64) -> Res<u8> {
        Ok(self.slice(off, 1)?[0])
    }
    fn u16(&self, off: u64) -> Res<u16> {
        let b = self.slice(off, 2)?;
        let a = [b[0], b[1]];
        Ok(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
    fn u32(&self, off: u64) -> Res<u32> {
        let b = self.slice(off, 4)?;
        let a = [b[0], b[1], b[2], b[3]];
        Ok(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    fn u64(&self, off: u64) -> Res<u64> {
        let b = self.slice(off, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    fn word(&self, off: u64) -> Res<u64> {
        if self.is64 {
            self.u64(off)
        } else {
            self.u32(off).map(u64::from)
        }
    }
    fn ws(&self) -> u64 {
        if self.is64 {
            8
        } else {
            4
        }
    }
    fn sym_size(&self) -> u64 {
        if self.is64 {
            24
        } else {
            16
        }
    }
}

fn cstr(bytes: &[u8], off: u64, what: &str) -> Res<String> {
    if off >= bytes.len() as u64 {
        return err(format!(
            "{what}: string offset {off:#x} is outside the {:#x}-byte string table",
            bytes.len()
        ));
    }
    let tail = &bytes[off as usize..];
    match tail.iter().position(|&c| c == 0) {
        Some(end) => Ok(String::from_utf8_lossy(&tail[..end]).into_owned()),
        None => err(format!(
            "{what}: string at offset {off:#x} is not NUL-terminated inside the string table"
        )),
    }
}

// ---------------------------------------------------------------------------
// parsing

struct Parsed<'a> {
    r: R<'a>,
    header: Header,
    phdrs: Vec<ProgramHeader>,
    shdrs: Vec<SectionHeader>,
}

fn parse_header(d: &[u8]) -> Res<(R<'_>, Header)> {
    if d.len() < 16 || &d[..4] != b"\x7fELF" {
        return err("not an ELF file (bad magic or shorter than e_ident)");
    }
    let is64 = match d[4] {
        1 => false,
        2 => true,
        c => return err(format!("bad EI_CLASS {c}")),
    };
    let big = match d[5] {
        1 => false,
        2 => true,
        c => return err(format!("bad EI_DATA {c}")),
    };
    let r = R { d, big, is64 };
    let h = if is64 {
        r.slice(0, 64)?;
        Header {
            class: d[4],
            data: d[5],
            osabi: d[7],
            e_type: r.u16(16)?,
            e_machine: r.u16(18)?,
            e_version: r.u32(20)?,
            e_entry: r.u64(24)?,
            e_phoff: r.u64(32)?,
            e_shoff: r.u64(40)?,
            e_flags: r.u32(48)?,
            e_ehsize: r.u16(52)?,
            e_phentsize: r.u16(54)?,
            e_phnum: r.u16(56)?,
            e_shentsize: r.u16(58)?,
            e_shnum: r.u16(60)?,
            e_shstrndx: r.u16(62)?,
        }
    } else {
        r.slice(0, 52)?;
        Header {
            class: d[4],
            data: d[5],
            osabi: d[7],
            e_type: r.u16(16)?,
            e_machine: r.u16(18)?,
            e_version: r.u32(20)?,
            e_entry: r.u32(24)? as u64,
            e_phoff: r.u32(28)? as u64,
            e_shoff: r.u32(32)? as u64,
            e_flags: r.u32(36)?,
            e_ehsize: r.u16(40)?,
            e_phentsize: r.u16(42)?,
            e_phnum: r.u16(44)?,
            e_shentsize: r.u16(46)?,
            e_shnum: r.u16(48)?,
            e_shstrndx: r.u16(50)?,
        }
    };
    Ok((r, h))
}

fn parse_phdrs(r: R<'_>, h: &Header) -> Res<Vec<ProgramHeader>> {
    let want = if r.is64 { 56 } else { 32 };
    if h.e_phnum == 0 {
        return Ok(Vec::new());
    }
    if u64::from(h.e_phentsize) < want {
        return err(format!(
            "e_phentsize {} is smaller than {want}",
            h.e_phentsize
        ));
    }
    let mut v = Vec::new();
    for i in 0..u64::from(h.e_phnum) {
        let o = i
            .checked_mul(u64::from(h.e_phentsize))
            .and_then(|x| x.checked_add(h.e_phoff))
            .ok_or_else(|| Error("program header offset overflows".into()))?;
        r.slice(o, want)?;
        v.push(if r.is64 {
            ProgramHeader {
                p_type: r.u32(o)?,
                p_flags: r.u32(o + 4)?,
                p_offset: r.u64(o + 8)?,
                p_vaddr: r.u64(o + 16)?,
                p_paddr: r.u64(o + 24)?,
                p_filesz: r.u64(o + 32)?,
                p_memsz: r.u64(o + 40)?,
                p_align: r.u64(o + 48)?,
            }
        } else {
            ProgramHeader {
                p_type: r.u32(o)?,
                p_offset: r.u32(o + 4)? as u64,
                p_vaddr: r.u32(o + 8)? as u64,
                p_paddr: r.u32(o + 12)? as u64,
                p_filesz: r.u32(o + 16)? as u64,
                p_memsz: r.u32(o + 20)? as u64,
                p_flags: r.u32(o + 24)?,
                p_align: r.u32(o + 28)? as u64,
            }
        });
    }
    Ok(v)
}

fn parse_shdrs(r: R<'_>, h: &Header) -> Res<Vec<SectionHeader>> {
    let want = if r.is64 { 64 } else { 40 };
    // gABI: "If the file has no section header table, e_shoff holds zero" (whatever e_shnum
    // says); the loader never reads them either.
    if h.e_shnum == 0 || h.e_shoff == 0 {
        return Ok(Vec::new());
    }
    if u64::from(h.e_shentsize) < want {
        return err(format!(
            "e_shentsize {} is smaller than {want}",
            h.e_shentsize
        ));
    }
    let mut v = Vec::new();
    let mut names = Vec::new();
    for i in 0..u64::from(h.e_shnum) {
        let o = i
            .checked_mul(u64::from(h.e_shentsize))
            .and_then(|x| x.checked_add(h.e_shoff))
            .ok_or_else(|| Error("section header offset overflows".into()))?;
        r.slice(o, want)?;
        names.push(r.u32(o)?);
        let w = |x: u64| r.word(o + x);
        v.push(if r.is64 {
            SectionHeader {
                name: String::new(),
                sh_type: r.u32(o + 4)?,
                flags: w(8)?,
                addr: w(16)?,
                offset: w(24)?,
                size: w(32)?,
                link: r.u32(o + 40)?,
                info: r.u32(o + 44)?,
                addralign: w(48)?,
                entsize: w(56)?,
            }
        } else {
            SectionHeader {
                name: String::new(),
                sh_type: r.u32(o + 4)?,
                flags: w(8)?,
                addr: w(12)?,
                offset: w(16)?,
                size: w(20)?,
                link: r.u32(o + 24)?,
                info: r.u32(o + 28)?,
                addralign: w(32)?,
                entsize: w(36)?,
            }
        });
    }
    let strndx = usize::from(h.e_shstrndx);
    if strndx != 0 && strndx < v.len() {
        let s = &v[strndx];
        if let Ok(bytes) = r.slice(s.offset, s.size) {
            for (sec, &n) in v.iter_mut().zip(&names) {
                sec.name = cstr(bytes, u64::from(n), "section name").unwrap_or_default();
            }
        }
    }
    Ok(v)
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

impl Parsed<'_> {
    fn loads(&self) -> impl Iterator<Item = &ProgramHeader> {
        self.phdrs.iter().filter(|p| p.p_type == k::PT_LOAD)
    }

    /// File offset of `[vaddr, vaddr + len)` if a `PT_LOAD` maps all of it
    /// from the file (see [`Parsed::mapped_filesz`]).
    fn map(&self, vaddr: u64, len: u64) -> Option<u64> {
        let end = vaddr.checked_add(len)?;
        self.loads()
            .find(|p| {
                vaddr >= p.p_vaddr
                    && p.p_vaddr
                        .checked_add(self.mapped_filesz(p))
                        .is_some_and(|pend| end <= pend)
            })
            .and_then(|p| p.p_offset.checked_add(vaddr - p.p_vaddr))
    }

    /// How many bytes from `p_offset` the loader maps from the file for the
    /// `PT_LOAD` `p`. Linux and glibc map whole pages, so this is `p_filesz`
    /// plus the rest of its last page (at 4 KiB, 8 KiB on sparc64 and alpha:
    /// the smallest page of the machine, mapped at every larger one too) —
    /// unless `p_memsz > p_filesz` (that rest is zeroed then), the file ends
    /// first (only what it holds counts), or another `PT_LOAD`'s pages reach
    /// into it (then up to where that one starts if it maps the file with the
    /// same address-offset difference, else nothing).
    fn mapped_filesz(&self, p: &ProgramHeader) -> u64 {
        let page: u64 = match self.header.e_machine {
            43 | 0x9026 => 0x2000,
            _ => 0x1000,
        };
        let delta = p.p_vaddr.wrapping_sub(p.p_offset);
        if p.p_filesz == 0 || p.p_memsz != p.p_filesz || delta % page != 0 {
            return p.p_filesz;
        }
        let (Some(data_end), Some(file_end)) = (
            p.p_vaddr.checked_add(p.p_filesz),
            p.p_offset.checked_add(p.p_filesz),
        ) else {
            return p.p_filesz;
        };
        let in_file = (self.r.d.len() as u64).saturating_sub(file_end);
        let mut page_end = match data_end % page {
            0 => data_end,
            r => data_end.saturating_add(page - r),
        };
        page_end = page_end.min(data_end.saturating_add(in_file));
        for q in self.loads() {
            let q_pages = q.p_vaddr / page * page;
            let q_end = q.p_vaddr.saturating_add(q.p_memsz);
            if q.p_memsz == 0 || q_end <= data_end || q_pages >= page_end {
                continue;
            }
            page_end = if q.p_vaddr.wrapping_sub(q.p_offset) == delta {
                page_end.min(q.p_vaddr.max(data_end))
            } else {
                data_end
            };
        }
        p.p_filesz + (page_end - data_end)
    }

    fn map_slice(&self, vaddr: u64, len: u64, what: &str) -> Res<&[u8]> {
        match self.map(vaddr, len) {
            Some(off) => self.r.slice(off, len),
            None => err(format!(
                "{what}: {len:#x} bytes at address {vaddr:#x} are not mapped from the file by a PT_LOAD"
            )),
        }
    }

    fn map_off(&self, vaddr: u64, what: &str) -> Res<u64> {
        self.map(vaddr, 1).ok_or_else(|| {
            Error(format!(
                "{what}: address {vaddr:#x} is not mapped from the file by a PT_LOAD"
            ))
        })
    }

    /// Raw dynamic entries through PT_DYNAMIC: (entries up to DT_NULL, slots).
    fn dynamic_raw(&self) -> Res<(Vec<(u64, u64)>, usize)> {
        let Some(p) = self.phdrs.iter().find(|p| p.p_type == k::PT_DYNAMIC) else {
            return Ok((Vec::new(), 0));
        };
        let ent = 2 * self.r.ws();
        self.r.slice(p.p_offset, p.p_filesz)?;
        let slots = (p.p_filesz / ent) as usize;
        let mut v = Vec::new();
        for i in 0..slots as u64 {
            let o = p.p_offset + i * ent;
            let tag = self.r.word(o)?;
            let val = self.r.word(o + self.r.ws())?;
            if tag == k::DT_NULL {
                return Ok((v, slots));
            }
            v.push((tag, val));
        }
        err("PT_DYNAMIC has no DT_NULL terminator")
    }

    fn tag(dynamic: &[(u64, u64)], tag: u64) -> Option<u64> {
        dynamic.iter().find(|e| e.0 == tag).map(|e| e.1)
    }

    fn dynstr(&self, dynamic: &[(u64, u64)]) -> Res<Option<&[u8]>> {
        match (
            Self::tag(dynamic, k::DT_STRTAB),
            Self::tag(dynamic, k::DT_STRSZ),
        ) {
            (Some(a), Some(n)) => self.map_slice(a, n, "DT_STRTAB/DT_STRSZ").map(Some),
            (None, None) => Ok(None),
            _ => err("only one of DT_STRTAB and DT_STRSZ is present"),
        }
    }

    fn hash_entry_size(&self) -> u64 {
        if self.r.is64 && self.header.e_machine == k::EM_S390 {
            8
        } else {
            4
        }
    }

    /// Number of `.dynsym` entries (including symbol 0): from the section
    /// headers, else `DT_HASH`'s nchain, else by walking `DT_GNU_HASH`.
    fn dynsym_count(&self, dynamic: &[(u64, u64)]) -> Res<u64> {
        if let Some(s) = self.shdrs.iter().find(|s| s.sh_type == k::SHT_DYNSYM) {
            let ent = if s.entsize == 0 {
                self.r.sym_size()
            } else {
                s.entsize
            };
            return Ok(s.size / ent);
        }
        if let Some(h) = Self::tag(dynamic, k::DT_HASH) {
            let e = self.hash_entry_size();
            let b = self.map_slice(h, 2 * e, "DT_HASH header")?;
            let nchain = if e == 8 {
                R { d: b, ..self.r }.u64(e)?
            } else {
                R { d: b, ..self.r }.u32(4)? as u64
            };
            return Ok(nchain);
        }
        if let Some(g) = Self::tag(dynamic, k::DT_GNU_HASH) {
            let gh = self.gnu_hash(g)?;
            let Some(&maxb) = gh.buckets.iter().max() else {
                return Ok(u64::from(gh.symoffset));
            };
            if maxb == 0 {
                return Ok(u64::from(gh.symoffset));
            }
            let mut i = u64::from(maxb);
            loop {
                let ci = i
                    .checked_sub(u64::from(gh.symoffset))
                    .ok_or_else(|| Error("DT_GNU_HASH bucket below symoffset".into()))?;
                let c = self.r.u32(gh.chain_off.saturating_add(4 * ci))?;
                if c & 1 == 1 {
                    return Ok(i + 1);
                }
                i += 1;
            }
        }
        Ok(0)
    }

    fn gnu_hash(&self, addr: u64) -> Res<GnuHash> {
        let off = self.map_off(addr, "DT_GNU_HASH")?;
        let r = self.r;
        let nb = r.u32(off)?;
        let symoffset = r.u32(off + 4)?;
        let bloom_size = r.u32(off + 8)?;
        let shift = r.u32(off + 12)?;
        let bloom_off = off + 16;
        let bloom_bytes = u64::from(bloom_size) * r.ws();
        r.slice(bloom_off, bloom_bytes)?;
        let buckets_off = bloom_off + bloom_bytes;
        let bb = r.slice(buckets_off, 4 * u64::from(nb))?;
        let rb = R { d: bb, ..r };
        let buckets = (0..u64::from(nb))
            .map(|i| rb.u32(4 * i))
            .collect::<Res<Vec<u32>>>()?;
        Ok(GnuHash {
            symoffset,
            bloom_size,
            shift,
            bloom_off,
            buckets,
            chain_off: buckets_off + 4 * u64::from(nb),
        })
    }

    fn symbols(&self, off: u64, count: u64, ent: u64, strs: &[u8], what: &str) -> Res<Vec<Symbol>> {
        if ent < self.r.sym_size() {
            return err(format!("{what}: entry size {ent} is too small"));
        }
        let total = count
            .checked_mul(ent)
            .ok_or_else(|| Error(format!("{what}: size overflows")))?;
        self.r.slice(off, total)?;
        let r = self.r;
        let mut v = Vec::new();
        for i in 1..count {
            let o = off + i * ent;
            let name_off = r.u32(o)?;
            let (info, shndx, value, size) = if r.is64 {
                (r.u8(o + 4)?, r.u16(o + 6)?, r.u64(o + 8)?, r.u64(o + 16)?)
            } else {
                (
                    r.u8(o + 12)?,
                    r.u16(o + 14)?,
                    r.u32(o + 4)? as u64,
                    r.u32(o + 8)? as u64,
                )
            };
            v.push(Symbol {
                name: cstr(
                    strs,
                    u64::from(name_off),
                    &format!("{what} symbol {i} name"),
                )?,
                value,
                size,
                info,
                shndx,
                version: None,
            });
        }
        Ok(v)
    }

    /// (file, [(name, vna_hash, vna_other)]) per verneed entry; names are
    /// dynstr offsets.
    fn verneed_raw(&self, dynamic: &[(u64, u64)]) -> Res<Vec<RawVerneed>> {
        let Some(a) = Self::tag(dynamic, k::DT_VERNEED) else {
            return Ok(Vec::new());
        };
        let r = self.r;
        let mut off = self.map_off(a, "DT_VERNEED")?;
        let mut out = Vec::new();
        loop {
            let cnt = r.u16(off + 2)?;
            let file = r.u32(off + 4)?;
            let aux = r.u32(off + 8)?;
            let next = r.u32(off + 12)?;
            let mut auxes = Vec::new();
            let mut ao = off
                .checked_add(u64::from(aux))
                .ok_or_else(|| Error("vn_aux overflows".into()))?;
            for j in 0..cnt {
                let hash = r.u32(ao)?;
                let other = r.u16(ao + 6)?;
                let name = r.u32(ao + 8)?;
                let anext = r.u32(ao + 12)?;
                auxes.push((name, hash, other));
                if anext == 0 {
                    if j + 1 != cnt {
                        return err("vernaux chain ends before vn_cnt entries");
                    }
                    break;
                }
                ao = ao
                    .checked_add(u64::from(anext))
                    .ok_or_else(|| Error("vna_next overflows".into()))?;
            }
            out.push((file, auxes));
            if next == 0 {
                break;
            }
            if out.len() > 1 << 16 {
                return err("too many verneed entries");
            }
            off = off
                .checked_add(u64::from(next))
                .ok_or_else(|| Error("vn_next overflows".into()))?;
        }
        Ok(out)
    }

    /// (vda_name of the first aux, vd_hash, vd_ndx) per verdef entry.
    fn verdef_raw(&self, dynamic: &[(u64, u64)]) -> Res<Vec<(u32, u32, u16)>> {
        let Some(a) = Self::tag(dynamic, k::DT_VERDEF) else {
            return Ok(Vec::new());
        };
        let r = self.r;
        let mut off = self.map_off(a, "DT_VERDEF")?;
        let mut out = Vec::new();
        loop {
            let ndx = r.u16(off + 4)?;
            let cnt = r.u16(off + 6)?;
            let hash = r.u32(off + 8)?;
            let aux = r.u32(off + 12)?;
            let next = r.u32(off + 16)?;
            if cnt == 0 {
                return err("verdef entry without verdaux");
            }
            let ao = off
                .checked_add(u64::from(aux))
                .ok_or_else(|| Error("vd_aux overflows".into()))?;
            out.push((r.u32(ao)?, hash, ndx));
            if next == 0 {
                break;
            }
            if out.len() > 1 << 16 {
                return err("too many verdef entries");
            }
            off = off
                .checked_add(u64::from(next))
                .ok_or_else(|| Error("vd_next overflows".into()))?;
        }
        Ok(out)
    }

    /// `DT_VERNEEDNUM` and `DT_VERDEFNUM` against the chains they count. The loader follows
    /// `vn_next`/`vd_next` to the end whatever the counts say, so the chains above are read that
    /// way and a wrong count is a finding of its own: reading only `num` records would hide the
    /// rest of the chain from every other check until an edit corrects the count.
    fn version_count_issues(&self, dynamic: &[(u64, u64)]) -> Vec<String> {
        let mut v = Vec::new();
        let counted = [
            (
                k::DT_VERNEEDNUM,
                "DT_VERNEEDNUM",
                self.verneed_raw(dynamic).map(|c| c.len()),
            ),
            (
                k::DT_VERDEFNUM,
                "DT_VERDEFNUM",
                self.verdef_raw(dynamic).map(|c| c.len()),
            ),
        ];
        for (tag, name, chain) in counted {
            if let (Some(num), Ok(len)) = (Self::tag(dynamic, tag), chain) {
                if num != len as u64 {
                    v.push(format!("{name} is {num} but the chain has {len} entries"));
                }
            }
        }
        v
    }
}

/// `(vn_file, [(vna_name, vna_hash, vna_other)])`, names as `.dynstr` offsets.
type RawVerneed = (u32, Vec<(u32, u32, u16)>);

struct GnuHash {
    symoffset: u32,
    bloom_size: u32,
    shift: u32,
    bloom_off: u64,
    buckets: Vec<u32>,
    chain_off: u64,
}

// Own hash functions.
fn elf_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 4).wrapping_add(u32::from(c));
        let hi = h & 0xf000_0000;
        if hi != 0 {
            h ^= hi >> 24;
        }
        h &= 0x0fff_ffff;
    }
    h
}

fn dl_new_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 5381;
    for &c in name {
        h = (h << 5).wrapping_add(h).wrapping_add(u32::from(c));
    }
    h
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

// ---------------------------------------------------------------------------
// invariants

fn within(inner_start: u64, inner_len: u64, outer_start: u64, outer_len: u64) -> bool {
    match (
        inner_start.checked_add(inner_len),
        outer_start.checked_add(outer_len),
    ) {
        (Some(ie), Some(oe)) => inner_start >= outer_start && ie <= oe,
        _ => false,
    }
}

/// Pairs `(i, j)`, `i < j`, of overlapping non-empty ranges `(start, len,
/// id)`; every range that overlaps an earlier-starting one is reported once.
fn overlapping(mut items: Vec<(u64, u64, usize)>) -> Vec<(usize, usize)> {
    items.retain(|x| x.1 > 0);
    items.sort_unstable();
    let mut out = Vec::new();
    let mut furthest: Option<(u64, usize)> = None;
    for (start, len, i) in items {
        let end = start.saturating_add(len);
        if let Some((fend, fi)) = furthest {
            if start < fend {
                out.push((fi.min(i), fi.max(i)));
            }
        }
        if !matches!(furthest, Some((fend, _)) if end <= fend) {
            furthest = Some((end, i));
        }
    }
    out
}

fn overlaps(a: u64, alen: u64, b: u64, blen: u64) -> bool {
    alen > 0 && blen > 0 && a < b.saturating_add(blen) && b < a.saturating_add(alen)
}

/// Whether `[off, off+len)` / `[addr, addr+len)` lies in what `p` maps from
/// the file (`mapped` bytes from `p_offset`), with the segment's
/// offset→address mapping.
fn in_load_file(p: &ProgramHeader, mapped: u64, off: u64, addr: u64, len: u64) -> bool {
    within(off, len, p.p_offset, mapped)
        && addr.checked_sub(p.p_vaddr) == off.checked_sub(p.p_offset)
}

/// Lists violations of the layout invariants a loadable, editable ELF file
/// must satisfy. An empty list means the file passed every check:
///
/// * `PT_LOAD`s sorted by `p_vaddr`, non-overlapping in memory and in the
///   file, `p_filesz <= p_memsz`, `p_offset ≡ p_vaddr (mod p_align)` (also
///   modulo the largest `p_align`, as older glibc checks);
/// * every segment and section inside the file; the header tables inside
///   the file and not overlapping any section;
/// * every `SHF_ALLOC` section inside exactly one `PT_LOAD`, by file range
///   and by address consistent with that segment's mapping; allocated
///   sections not overlapping each other; file-backed sections not
///   overlapping each other in the file;
/// * `PT_DYNAMIC`, `PT_INTERP`, `PT_NOTE`, `PT_PHDR` inside a `PT_LOAD`;
///   `PT_DYNAMIC` inside a writable one; `PT_PHDR` and `PT_INTERP` before
///   every `PT_LOAD`; `PT_PHDR` matching `e_phoff`/`e_phnum`; `e_entry` in an
///   executable `PT_LOAD`;
/// * `DT_STRTAB`/`DT_STRSZ` inside a `PT_LOAD` and equal to the `.dynstr`
///   section's address/size when there are section headers; pointer tags
///   ([`POINTER_TAGS`]) inside a `PT_LOAD` and equal to their sections'
///   addresses; `PT_DYNAMIC` and `PT_INTERP` equal to `.dynamic` and
///   `.interp`;
/// * every string reference (string tags, dynsym names, verneed file and
///   version names, verdef names) inside `.dynstr` and NUL-terminated;
///   `vna_hash`/`vd_hash` matching their names;
/// * every dynamic symbol findable through `DT_HASH` and `DT_GNU_HASH` by
///   its (current) name — so a clobbered shared string tail shows up;
/// * `DT_MIPS_RLD_MAP_REL` pointing into a writable `PT_LOAD` (and at
///   `.rld_map` when that section exists);
/// * `sh_link` of every section and `e_shstrndx` valid indices.
pub fn check_layout(data: &[u8]) -> Vec<String> {
    let p = match parse(data) {
        Ok(p) => p,
        Err(e) => return vec![format!("unreadable: {e}")],
    };
    let mut v: Vec<String> = Vec::new();
    let f = LayoutCheck::of(&p, data.len() as u64);
    f.check_loads(&mut v);
    f.check_segments(&mut v);
    f.check_sections(&mut v);
    f.check_section_overlaps(&mut v);
    let dynamic = match p.dynamic_raw() {
        Ok((d, _)) => d,
        Err(e) => {
            v.push(format!("PT_DYNAMIC: {e}"));
            return v;
        }
    };
    f.check_dynamic_sections(&mut v);
    let dynstr = match p.dynstr(&dynamic) {
        Ok(d) => d,
        Err(e) => {
            v.push(e.0);
            None
        }
    };
    f.check_dynamic_pointers(&dynamic, &mut v);
    let Some(strs) = dynstr else {
        return v;
    };
    check_string_refs(&p, &dynamic, strs, &mut v);
    check_symbol_lookup(&p, &dynamic, strs, &mut v);
    v
}

/// What the invariant groups of [`check_layout`] read: the parsed file, its length, and its
/// `PT_LOAD`s with their indices in the program header table.
struct LayoutCheck<'p, 'a> {
    p: &'p Parsed<'a>,
    len: u64,
    loads: Vec<(usize, &'p ProgramHeader)>,
}

impl<'p, 'a> LayoutCheck<'p, 'a> {
    fn of(p: &'p Parsed<'a>, len: u64) -> LayoutCheck<'p, 'a> {
        let loads = p
            .phdrs
            .iter()
            .enumerate()
            .filter(|(_, x)| x.p_type == k::PT_LOAD)
            .collect();
        LayoutCheck { p, len, loads }
    }

    fn phsize(&self) -> u64 {
        u64::from(self.p.header.e_phnum) * u64::from(self.p.header.e_phentsize)
    }

    fn shsize(&self) -> u64 {
        u64::from(self.p.header.e_shnum) * u64::from(self.p.header.e_shentsize)
    }

    /// `PT_LOAD`s sorted, `p_filesz <= p_memsz`, aligned, and not overlapping.
    fn check_loads(&self, v: &mut Vec<String>) {
        let loads = &self.loads;
        let max_align = loads.iter().map(|(_, x)| x.p_align).max().unwrap_or(0);
        for w in loads.windows(2) {
            if w[1].1.p_vaddr < w[0].1.p_vaddr {
                v.push(format!(
                    "PT_LOADs not sorted by p_vaddr: phdr {} ({:#x}) follows phdr {} ({:#x})",
                    w[1].0, w[1].1.p_vaddr, w[0].0, w[0].1.p_vaddr
                ));
            }
        }
        for (i, x) in loads {
            if x.p_filesz > x.p_memsz {
                v.push(format!(
                    "PT_LOAD phdr {i}: p_filesz {:#x} > p_memsz {:#x}",
                    x.p_filesz, x.p_memsz
                ));
            }
            if x.p_align > 1 {
                if !x.p_align.is_power_of_two() {
                    v.push(format!(
                        "PT_LOAD phdr {i}: p_align {:#x} is not a power of two",
                        x.p_align
                    ));
                } else if x.p_offset % x.p_align != x.p_vaddr % x.p_align {
                    v.push(format!(
                        "PT_LOAD phdr {i}: p_offset {:#x} not congruent to p_vaddr {:#x} modulo p_align {:#x}",
                        x.p_offset, x.p_vaddr, x.p_align
                    ));
                } else if max_align.is_power_of_two()
                    && x.p_offset % max_align != x.p_vaddr % max_align
                {
                    v.push(format!(
                        "PT_LOAD phdr {i}: p_offset {:#x} not congruent to p_vaddr {:#x} modulo the largest PT_LOAD p_align {max_align:#x}",
                        x.p_offset, x.p_vaddr
                    ));
                }
            }
        }
        let ranges = |f: &dyn Fn(&ProgramHeader) -> (u64, u64)| -> Vec<(u64, u64, usize)> {
            loads
                .iter()
                .map(|(i, x)| {
                    let (a, b) = f(x);
                    (a, b, *i)
                })
                .collect()
        };
        for (i, j) in overlapping(ranges(&|x| (x.p_vaddr, x.p_memsz))) {
            v.push(format!("PT_LOAD phdrs {i} and {j} overlap in memory"));
        }
        for (i, j) in overlapping(ranges(&|x| (x.p_offset, x.p_filesz))) {
            v.push(format!("PT_LOAD phdrs {i} and {j} overlap in the file"));
        }
    }

    /// Every segment inside the file; `PT_DYNAMIC`, `PT_INTERP`, `PT_NOTE` and `PT_PHDR` inside a
    /// `PT_LOAD` (and where the loader needs them); `e_entry` in executable code.
    fn check_segments(&self, v: &mut Vec<String>) {
        let (p, h, len) = (self.p, &self.p.header, self.len);
        let ph = &p.phdrs;
        for (i, x) in ph.iter().enumerate() {
            if x.p_filesz > 0 && !within(x.p_offset, x.p_filesz, 0, len) {
                v.push(format!(
                    "phdr {i} (type {:#x}): file range {:#x}+{:#x} outside the {len:#x}-byte file",
                    x.p_type, x.p_offset, x.p_filesz
                ));
            }
        }
        let first_load = self.loads.first().map(|l| l.0).unwrap_or(usize::MAX);
        for (i, x) in ph.iter().enumerate() {
            let what = match x.p_type {
                k::PT_DYNAMIC => "PT_DYNAMIC",
                k::PT_INTERP => "PT_INTERP",
                k::PT_NOTE => "PT_NOTE",
                k::PT_PHDR => "PT_PHDR",
                _ => continue,
            };
            match self.loads.iter().find(|(_, l)| {
                in_load_file(l, p.mapped_filesz(l), x.p_offset, x.p_vaddr, x.p_filesz)
            }) {
                None => v.push(format!("{what} (phdr {i}) is not inside a PT_LOAD")),
                Some((_, l)) => {
                    // MIPS keeps .dynamic read-only, and says so in PT_DYNAMIC's flags.
                    let mips_read_only = h.e_machine == k::EM_MIPS && x.p_flags & k::PF_W == 0;
                    if x.p_type == k::PT_DYNAMIC && l.p_flags & k::PF_W == 0 && !mips_read_only {
                        v.push(format!(
                            "PT_DYNAMIC (phdr {i}) is inside a read-only PT_LOAD"
                        ));
                    }
                }
            }
            if (x.p_type == k::PT_PHDR || x.p_type == k::PT_INTERP) && i > first_load {
                v.push(format!("{what} (phdr {i}) does not precede every PT_LOAD"));
            }
            if x.p_type == k::PT_PHDR {
                let size = self.phsize();
                if x.p_offset != h.e_phoff || x.p_filesz != size {
                    v.push(format!(
                        "PT_PHDR {:#x}+{:#x} does not match e_phoff {:#x} / e_phnum*e_phentsize {size:#x}",
                        x.p_offset, x.p_filesz, h.e_phoff
                    ));
                }
            }
        }
        if ph.iter().filter(|x| x.p_type == k::PT_PHDR).count() > 1 {
            v.push("more than one PT_PHDR".into());
        }
        if h.e_entry != 0
            && !self.loads.iter().any(|(_, l)| {
                l.p_flags & k::PF_X != 0 && within(h.e_entry, 1, l.p_vaddr, l.p_memsz)
            })
        {
            v.push(format!(
                "e_entry {:#x} is not inside an executable PT_LOAD",
                h.e_entry
            ));
        }
    }

    /// Each section: a valid `sh_link`, inside the file and off the header tables, aligned, and
    /// (allocated) inside exactly one `PT_LOAD`; a valid `e_shstrndx` and a null section 0.
    fn check_sections(&self, v: &mut Vec<String>) {
        let (h, len, sh) = (&self.p.header, self.len, &self.p.shdrs);
        if !sh.is_empty() {
            if usize::from(h.e_shstrndx) >= sh.len() {
                v.push(format!(
                    "e_shstrndx {} is not a valid section index",
                    h.e_shstrndx
                ));
            }
            if let Some(first) = sh.first() {
                if first.sh_type != 0 {
                    v.push("section 0 is not SHT_NULL".into());
                }
            }
        }
        // gABI: an SHT_NULL header is inactive and its other members are undefined, so it describes
        // nothing that could be misplaced.
        for (i, s) in sh
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, s)| s.sh_type != 0)
        {
            let nm = &s.name;
            if s.link as usize >= sh.len() {
                v.push(format!(
                    "section {i} '{nm}': sh_link {} is not a valid section index",
                    s.link
                ));
            }
            let file_backed = s.sh_type != k::SHT_NOBITS && s.size > 0;
            if file_backed && !within(s.offset, s.size, 0, len) {
                v.push(format!(
                    "section {i} '{nm}': file range {:#x}+{:#x} outside the {len:#x}-byte file",
                    s.offset, s.size
                ));
            }
            if file_backed && overlaps(s.offset, s.size, h.e_phoff, self.phsize()) {
                v.push(format!(
                    "section {i} '{nm}' overlaps the program header table"
                ));
            }
            if file_backed && overlaps(s.offset, s.size, h.e_shoff, self.shsize()) {
                v.push(format!(
                    "section {i} '{nm}' overlaps the section header table"
                ));
            }
            if file_backed && overlaps(s.offset, s.size, 0, u64::from(h.e_ehsize)) {
                v.push(format!("section {i} '{nm}' overlaps the ELF header"));
            }
            // gABI: sh_addralign is 0 or a power of two; any other value constrains nothing an
            // edit could keep, and is a finding of its own.
            if s.addralign > 1 && !s.addralign.is_power_of_two() {
                v.push(format!(
                    "section {i} '{nm}': sh_addralign {:#x} is not a power of two",
                    s.addralign
                ));
            } else if s.addralign > 1 && s.flags & k::SHF_ALLOC != 0 && s.addr % s.addralign != 0 {
                v.push(format!(
                    "section {i} '{nm}': address {:#x} not aligned to {:#x}",
                    s.addr, s.addralign
                ));
            }
            if s.flags & k::SHF_ALLOC != 0 {
                let count = self.loads_holding(s);
                if count == 0 || (count > 1 && s.size > 0) {
                    v.push(format!(
                        "SHF_ALLOC section {i} '{nm}' ({:#x}+{:#x} at {:#x}) is inside {count} PT_LOADs, not exactly one",
                        s.offset, s.size, s.addr
                    ));
                }
            }
        }
    }

    /// How many `PT_LOAD`s hold allocated section `s` (by address for `SHT_NOBITS`, else by
    /// file range with the segment's offset-to-address mapping; an empty section at an end
    /// counts).
    fn loads_holding(&self, s: &SectionHeader) -> usize {
        self.loads
            .iter()
            .filter(|(_, l)| {
                if s.sh_type == k::SHT_NOBITS {
                    if s.size == 0 {
                        s.addr >= l.p_vaddr && s.addr <= l.p_vaddr.saturating_add(l.p_memsz)
                    } else {
                        within(s.addr, s.size, l.p_vaddr, l.p_memsz)
                    }
                } else if s.size == 0 {
                    s.offset >= l.p_offset
                        && s.offset <= l.p_offset.saturating_add(l.p_filesz)
                        && s.addr.checked_sub(l.p_vaddr) == s.offset.checked_sub(l.p_offset)
                } else {
                    in_load_file(l, self.p.mapped_filesz(l), s.offset, s.addr, s.size)
                }
            })
            .count()
    }

    /// Sections not overlapping each other, in memory (allocated ones) and in the file; the
    /// header tables inside the file.
    fn check_section_overlaps(&self, v: &mut Vec<String>) {
        let (h, len, sh) = (&self.p.header, self.len, &self.p.shdrs);
        let name = |i: usize| sh.get(i).map_or("", |s| s.name.as_str());
        let alloc: Vec<(u64, u64, usize)> = sh
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, s)| s.sh_type != 0 && s.flags & k::SHF_ALLOC != 0)
            .map(|(i, s)| (s.addr, s.size, i))
            .collect();
        for (i, j) in overlapping(alloc) {
            v.push(format!(
                "sections {i} '{}' and {j} '{}' overlap in memory",
                name(i),
                name(j)
            ));
        }
        let filed: Vec<(u64, u64, usize)> = sh
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, s)| s.sh_type != 0 && s.sh_type != k::SHT_NOBITS)
            .map(|(i, s)| (s.offset, s.size, i))
            .collect();
        for (i, j) in overlapping(filed) {
            v.push(format!(
                "sections {i} '{}' and {j} '{}' overlap in the file",
                name(i),
                name(j)
            ));
        }
        if !sh.is_empty() && !within(h.e_shoff, self.shsize(), 0, len) {
            v.push("section header table outside the file".into());
        }
        if h.e_phnum > 0 && !within(h.e_phoff, self.phsize(), 0, len) {
            v.push("program header table outside the file".into());
        }
    }

    fn section_of_type(&self, t: u32) -> Option<&'p SectionHeader> {
        self.p.shdrs.iter().find(|s| s.sh_type == t)
    }

    /// `PT_DYNAMIC` and `PT_INTERP` the same bytes as `.dynamic` and `.interp`.
    fn check_dynamic_sections(&self, v: &mut Vec<String>) {
        let (ph, sh) = (&self.p.phdrs, &self.p.shdrs);
        let pdyn = ph.iter().find(|x| x.p_type == k::PT_DYNAMIC);
        if let (Some(pd), Some(sd)) = (pdyn, self.section_of_type(k::SHT_DYNAMIC)) {
            if (pd.p_offset, pd.p_vaddr, pd.p_filesz) != (sd.offset, sd.addr, sd.size) {
                v.push("PT_DYNAMIC does not match the .dynamic section".into());
            }
        }
        if let (Some(pi), Some(si)) = (
            ph.iter().find(|x| x.p_type == k::PT_INTERP),
            // An SHT_NULL header is inactive (gABI: its other members are undefined), whatever
            // its name: it describes no bytes an edit must keep in step.
            sh.iter().find(|s| s.name == ".interp" && s.sh_type != 0),
        ) {
            if (pi.p_offset, pi.p_vaddr, pi.p_filesz) != (si.offset, si.addr, si.size) {
                v.push("PT_INTERP does not match the .interp section".into());
            }
        }
    }

    /// `DT_STRTAB`/`DT_STRSZ` and the pointer tags equal to their sections, the pointers inside
    /// a `PT_LOAD`, and `DT_MIPS_RLD_MAP_REL`'s target writable.
    fn check_dynamic_pointers(&self, dynamic: &[(u64, u64)], v: &mut Vec<String>) {
        let (p, sh) = (self.p, &self.p.shdrs);
        let tag = |t: u64| Parsed::tag(dynamic, t);
        if let (Some(a), Some(n)) = (tag(k::DT_STRTAB), tag(k::DT_STRSZ)) {
            // The string table the loader reads is allocated: `.dynamic`'s sh_link names it
            // (gABI) when it points at an allocated string table, else the allocated string
            // table at DT_STRTAB, else the section named `.dynstr`. An unallocated section that
            // claims the address describes nothing the loader sees, and no edit has to keep it
            // in step.
            let dynsec = p
                .phdrs
                .iter()
                .find(|x| x.p_type == k::PT_DYNAMIC)
                .and_then(|pd| {
                    sh.iter()
                        .find(|s| s.sh_type == k::SHT_DYNAMIC && s.offset == pd.p_offset)
                })
                .or_else(|| self.section_of_type(k::SHT_DYNAMIC));
            let loaded_strtab =
                |s: &&SectionHeader| s.sh_type == k::SHT_STRTAB && s.flags & k::SHF_ALLOC != 0;
            let strsec = dynsec
                .and_then(|d| sh.get(d.link as usize))
                .filter(loaded_strtab)
                .or_else(|| sh.iter().filter(loaded_strtab).find(|s| s.addr == a))
                .or_else(|| sh.iter().find(|s| s.name == ".dynstr" && s.sh_type != 0));
            if let Some(s) = strsec {
                if s.addr != a || s.size != n {
                    v.push(format!(
                        "DT_STRTAB/DT_STRSZ {a:#x}/{n:#x} differ from section '{}' {:#x}/{:#x}",
                        s.name, s.addr, s.size
                    ));
                }
            }
        }
        let pointer_sections: [(u64, u32); 6] = [
            (k::DT_HASH, k::SHT_HASH),
            (k::DT_GNU_HASH, k::SHT_GNU_HASH),
            (k::DT_SYMTAB, k::SHT_DYNSYM),
            (k::DT_VERSYM, k::SHT_GNU_VERSYM),
            (k::DT_VERNEED, k::SHT_GNU_VERNEED),
            (k::DT_VERDEF, k::SHT_GNU_VERDEF),
        ];
        for &(t, value) in dynamic {
            if POINTER_TAGS.contains(&t) {
                if p.map(value, 1).is_none() {
                    v.push(format!(
                        "dynamic tag {t:#x} value {value:#x} is not inside a PT_LOAD"
                    ));
                }
                if let Some((_, st)) = pointer_sections.iter().find(|(pt, _)| *pt == t) {
                    if let Some(s) = self.section_of_type(*st) {
                        if s.addr != value {
                            v.push(format!(
                                "dynamic tag {t:#x} value {value:#x} differs from section '{}' address {:#x}",
                                s.name, s.addr
                            ));
                        }
                    }
                }
            }
            if t == k::DT_MIPS_RLD_MAP_REL && p.header.e_machine == k::EM_MIPS {
                self.check_rld_map_rel(dynamic, value, v);
            }
        }
    }

    /// `DT_MIPS_RLD_MAP_REL` (relative to its own entry) points into a writable `PT_LOAD`, at
    /// `.rld_map` when there is one.
    fn check_rld_map_rel(&self, dynamic: &[(u64, u64)], value: u64, v: &mut Vec<String>) {
        let p = self.p;
        let Some(pd) = p.phdrs.iter().find(|x| x.p_type == k::PT_DYNAMIC) else {
            return;
        };
        let idx = dynamic
            .iter()
            .position(|e| e.0 == k::DT_MIPS_RLD_MAP_REL)
            .unwrap_or(0) as u64;
        let slot = pd.p_vaddr.wrapping_add(idx * 2 * p.r.ws());
        let mut target = slot.wrapping_add(value);
        if !p.r.is64 {
            target &= 0xffff_ffff;
        }
        let ok = self.loads.iter().any(|(_, l)| {
            l.p_flags & k::PF_W != 0 && within(target, p.r.ws(), l.p_vaddr, l.p_memsz)
        });
        if !ok {
            v.push(format!(
                "DT_MIPS_RLD_MAP_REL target {target:#x} is not inside a writable PT_LOAD"
            ));
        }
        if let Some(rm) = p.shdrs.iter().find(|s| s.name == ".rld_map") {
            if rm.addr != target {
                v.push(format!(
                    "DT_MIPS_RLD_MAP_REL target {target:#x} differs from .rld_map {:#x}",
                    rm.addr
                ));
            }
        }
    }
}

/// Every string reference (string tags, version need and definition names) inside `.dynstr` and
/// NUL-terminated; the version hashes matching their names.
fn check_string_refs(p: &Parsed<'_>, dynamic: &[(u64, u64)], strs: &[u8], v: &mut Vec<String>) {
    let check_str = |v: &mut Vec<String>, off: u64, what: String| {
        if let Err(e) = cstr(strs, off, &what) {
            v.push(e.0);
        }
    };
    for &(t, value) in dynamic {
        if STRING_TAGS.contains(&t) {
            check_str(v, value, format!("dynamic tag {t:#x}"));
        }
    }
    v.extend(p.version_count_issues(dynamic));
    match p.verneed_raw(dynamic) {
        Err(e) => v.push(format!("verneed: {e}")),
        Ok(vn) => {
            for (file, auxes) in vn {
                check_str(v, u64::from(file), "vn_file".into());
                for (name, hash, _) in auxes {
                    match cstr(strs, u64::from(name), "vna_name") {
                        Err(e) => v.push(e.0),
                        Ok(n) if elf_hash(n.as_bytes()) != hash => v.push(format!(
                            "vna_hash {hash:#x} does not match version name {n:?}"
                        )),
                        Ok(_) => {}
                    }
                }
            }
        }
    }
    match p.verdef_raw(dynamic) {
        Err(e) => v.push(format!("verdef: {e}")),
        Ok(vd) => {
            for (name, hash, _) in vd {
                match cstr(strs, u64::from(name), "vda_name") {
                    Err(e) => v.push(e.0),
                    Ok(n) if elf_hash(n.as_bytes()) != hash => v.push(format!(
                        "vd_hash {hash:#x} does not match version name {n:?}"
                    )),
                    Ok(_) => {}
                }
            }
        }
    }
}

/// Every dynamic symbol readable, and findable by its name through `DT_HASH` and `DT_GNU_HASH`.
fn check_symbol_lookup(p: &Parsed<'_>, dynamic: &[(u64, u64)], strs: &[u8], v: &mut Vec<String>) {
    let tag = |t: u64| Parsed::tag(dynamic, t);
    let Some(symaddr) = tag(k::DT_SYMTAB) else {
        return;
    };
    let syms = (|| -> Res<Vec<Symbol>> {
        let count = p.dynsym_count(dynamic)?;
        let ent = tag(k::DT_SYMENT).unwrap_or(p.r.sym_size());
        let off = p.map_off(symaddr, "DT_SYMTAB")?;
        p.symbols(off, count, ent, strs, "dynsym")
    })();
    let syms = match syms {
        Ok(s) => s,
        Err(e) => {
            v.push(e.0);
            return;
        }
    };
    if let Some(hash) = tag(k::DT_HASH) {
        if let Err(e) = check_sysv(p, hash, &syms, v) {
            v.push(format!("DT_HASH: {e}"));
        }
    }
    if let Some(gh) = tag(k::DT_GNU_HASH) {
        if let Err(e) = check_gnu(p, gh, &syms, v) {
            v.push(format!("DT_GNU_HASH: {e}"));
        }
    }
}

fn check_sysv(p: &Parsed<'_>, addr: u64, syms: &[Symbol], v: &mut Vec<String>) -> Res<()> {
    let e = p.hash_entry_size();
    let off = p.map_off(addr, "DT_HASH")?;
    let get = |i: u64| -> Res<u64> {
        let o = off + e * i;
        if e == 8 {
            p.r.u64(o)
        } else {
            p.r.u32(o).map(u64::from)
        }
    };
    let nbucket = get(0)?;
    let nchain = get(1)?;
    if nbucket == 0 {
        return err("nbucket is 0");
    }
    p.r.slice(
        off,
        (2u64.saturating_add(nbucket).saturating_add(nchain)).saturating_mul(e),
    )?;
    if nchain != syms.len() as u64 + 1 {
        v.push(format!(
            "DT_HASH nchain {nchain} differs from the {} dynamic symbols",
            syms.len() + 1
        ));
    }
    for (i, s) in syms.iter().enumerate() {
        let want = i as u64 + 1;
        let mut at = get(2 + u64::from(elf_hash(s.name.as_bytes())) % nbucket)?;
        let mut steps = 0;
        while at != 0 && at != want && steps <= nchain {
            if at >= nchain {
                return err(format!("chain index {at} out of range"));
            }
            at = get(2 + nbucket + at)?;
            steps += 1;
        }
        if at != want {
            v.push(format!(
                "dynsym {want} {:?} is not reachable through DT_HASH",
                s.name
            ));
        }
    }
    Ok(())
}

fn check_gnu(p: &Parsed<'_>, addr: u64, syms: &[Symbol], v: &mut Vec<String>) -> Res<()> {
    let g = p.gnu_hash(addr)?;
    let nb = g.buckets.len() as u64;
    if nb == 0 {
        return err("nbuckets is 0");
    }
    if g.bloom_size == 0 {
        return err("bloom size is 0");
    }
    let bits = 8 * p.r.ws();
    for (i, s) in syms.iter().enumerate() {
        let idx = i as u64 + 1;
        if idx < u64::from(g.symoffset) {
            continue;
        }
        let h = dl_new_hash(s.name.as_bytes());
        let word =
            p.r.word(g.bloom_off + p.r.ws() * ((u64::from(h) / bits) % u64::from(g.bloom_size)))?;
        let b1 = u64::from(h) % bits;
        let b2 = u64::from(h.checked_shr(g.shift).unwrap_or(0)) % bits;
        if (word >> b1) & 1 == 0 || (word >> b2) & 1 == 0 {
            v.push(format!(
                "dynsym {idx} {:?} is rejected by the DT_GNU_HASH bloom filter",
                s.name
            ));
            continue;
        }
        let mut at = u64::from(g.buckets[(u64::from(h) % nb) as usize]);
        let mut found = false;
        if at >= u64::from(g.symoffset) {
            while at <= syms.len() as u64 {
                let c = p.r.u32(g.chain_off + 4 * (at - u64::from(g.symoffset)))?;
                if at == idx && (c | 1) == (h | 1) {
                    found = true;
                    break;
                }
                if c & 1 == 1 {
                    break;
                }
                at += 1;
            }
        }
        if !found {
            v.push(format!(
                "dynsym {idx} {:?} is not reachable through DT_GNU_HASH",
                s.name
            ));
        }
    }
    Ok(())
}
