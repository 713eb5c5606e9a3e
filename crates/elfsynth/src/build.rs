//! Layout and emission of synthetic ELF files.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Seek, SeekFrom, Write};

use object::elf;

use crate::strtab::StrTab;
use crate::{AfterPhdrs, Class, Endian, FileType, Spec};

/// Why a [`Spec`] cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid elfsynth spec: {}", self.0)
    }
}

impl std::error::Error for SpecError {}

/// One section as placed by the builder (whether or not section headers are
/// written). Field meanings follow `Elf*_Shdr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedSection {
    /// Section name, e.g. `.dynstr`.
    pub name: String,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr` (0 for non-alloc sections).
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

// ---------------------------------------------------------------------------
// constants

const NOTE_SIZE: u64 = 12 + 4 + 20;
const INIT_SIZE: u64 = 16;
const DATA_SIZE: u64 = 16;
const TEXT_PATTERN_LEN: u64 = 64;
const COMMENT: &[u8] = b"elfsynth (synthetic test file)\0";

// ---------------------------------------------------------------------------
// hashing (the builder's own copy; the oracle has an independent one)

pub(crate) fn sysv_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 4).wrapping_add(c as u32);
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}

pub(crate) fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

/// Bucket counts in the spirit of GNU ld's table.
fn bucket_count(nsyms: usize) -> u32 {
    const SIZES: [u32; 12] = [1, 3, 17, 37, 67, 97, 131, 197, 263, 521, 1031, 2053];
    let mut best = 1;
    for &s in &SIZES {
        if s as usize <= nsyms {
            best = s;
        }
    }
    best
}

// ---------------------------------------------------------------------------
// encoding helper

#[derive(Clone, Copy)]
struct Enc {
    is64: bool,
    big: bool,
}

impl Enc {
    fn u8(&self, b: &mut Vec<u8>, v: u8) {
        b.push(v);
    }
    fn u16(&self, b: &mut Vec<u8>, v: u16) {
        b.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u32(&self, b: &mut Vec<u8>, v: u32) {
        b.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u64(&self, b: &mut Vec<u8>, v: u64) {
        b.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    /// An address-sized field (`Elf_Addr`, `Elf_Off`, `Elf_Xword` for 64).
    fn word(&self, b: &mut Vec<u8>, v: u64) {
        if self.is64 {
            self.u64(b, v)
        } else {
            self.u32(b, v as u32)
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
    #[allow(clippy::too_many_arguments)]
    fn sym(&self, b: &mut Vec<u8>, name: u32, info: u8, shndx: u16, value: u64, size: u64) {
        self.u32(b, name);
        if self.is64 {
            self.u8(b, info);
            self.u8(b, 0);
            self.u16(b, shndx);
            self.u64(b, value);
            self.u64(b, size);
        } else {
            self.u32(b, value as u32);
            self.u32(b, size as u32);
            self.u8(b, info);
            self.u8(b, 0);
            self.u16(b, shndx);
        }
    }
}

fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a) * a
    }
}

// ---------------------------------------------------------------------------
// sections

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Id {
    Init,
    Interp,
    Note,
    Hash,
    GnuHash,
    Dynsym,
    Dynstr,
    Versym,
    Verdef,
    Verneed,
    Text,
    Fini,
    Dynamic,
    RldMap,
    Data,
    Bss,
    Comment,
    Symtab,
    Strtab,
    Shstrtab,
}

impl Id {
    fn name(self) -> &'static str {
        match self {
            Id::Init => ".init",
            Id::Interp => ".interp",
            Id::Note => ".note.gnu.build-id",
            Id::Hash => ".hash",
            Id::GnuHash => ".gnu.hash",
            Id::Dynsym => ".dynsym",
            Id::Dynstr => ".dynstr",
            Id::Versym => ".gnu.version",
            Id::Verdef => ".gnu.version_d",
            Id::Verneed => ".gnu.version_r",
            Id::Text => ".text",
            Id::Fini => ".fini",
            Id::Dynamic => ".dynamic",
            Id::RldMap => ".rld_map",
            Id::Data => ".data",
            Id::Bss => ".bss",
            Id::Comment => ".comment",
            Id::Symtab => ".symtab",
            Id::Strtab => ".strtab",
            Id::Shstrtab => ".shstrtab",
        }
    }

    fn sh_type(self) -> u32 {
        match self {
            Id::Init | Id::Interp | Id::Text | Id::Fini | Id::RldMap | Id::Data | Id::Comment => {
                elf::SHT_PROGBITS
            }
            Id::Note => elf::SHT_NOTE,
            Id::Hash => elf::SHT_HASH,
            Id::GnuHash => elf::SHT_GNU_HASH,
            Id::Dynsym => elf::SHT_DYNSYM,
            Id::Dynstr | Id::Strtab | Id::Shstrtab => elf::SHT_STRTAB,
            Id::Versym => elf::SHT_GNU_VERSYM,
            Id::Verdef => elf::SHT_GNU_VERDEF,
            Id::Verneed => elf::SHT_GNU_VERNEED,
            Id::Dynamic => elf::SHT_DYNAMIC,
            Id::Bss => elf::SHT_NOBITS,
            Id::Symtab => elf::SHT_SYMTAB,
        }
    }

    fn flags(self) -> u64 {
        u64::from(match self {
            Id::Init | Id::Text | Id::Fini => elf::SHF_ALLOC | elf::SHF_EXECINSTR,
            Id::Dynamic | Id::RldMap | Id::Data | Id::Bss => elf::SHF_ALLOC | elf::SHF_WRITE,
            Id::Comment => elf::SHF_MERGE | elf::SHF_STRINGS,
            Id::Symtab | Id::Strtab | Id::Shstrtab => 0,
            _ => elf::SHF_ALLOC,
        })
    }
}

struct Sec {
    id: Id,
    size: u64,
    align: u64,
    entsize: u64,
    offset: u64,
    addr: u64,
}

// ---------------------------------------------------------------------------
// planning

struct Plan {
    layout: Layout,
    /// (file offset, bytes); non-overlapping.
    chunks: Vec<(u64, Vec<u8>)>,
}

fn check_str(what: &str, s: &str) -> Result<(), SpecError> {
    if s.as_bytes().contains(&0) {
        Err(SpecError(format!("{what} {s:?} contains a NUL byte")))
    } else {
        Ok(())
    }
}

fn validate(spec: &Spec) -> Result<(), SpecError> {
    let p = spec.page_size;
    if !p.is_power_of_two() || !(0x1000..=0x20_0000).contains(&p) {
        return Err(SpecError(format!(
            "page_size {p:#x} must be a power of two between 4 KiB and 2 MiB"
        )));
    }
    if spec.base % p != 0 {
        return Err(SpecError(format!(
            "base {:#x} is not a multiple of page_size {p:#x}",
            spec.base
        )));
    }
    if spec.base > 1 << 56 || spec.text_size > 1 << 48 || spec.bss_size > 1 << 48 {
        return Err(SpecError(
            "base, text_size or bss_size is absurdly large".into(),
        ));
    }
    if spec.undefined_dynsyms > spec.dynsyms.len() {
        return Err(SpecError(format!(
            "undefined_dynsyms {} exceeds the {} dynsyms",
            spec.undefined_dynsyms,
            spec.dynsyms.len()
        )));
    }
    if spec.phdr_slack > 1 << 20
        || spec.pt_null_slots > 1000
        || spec.spare_dynamic_slots > 1 << 16
        || spec.tail_bytes > 1 << 20
    {
        return Err(SpecError(
            "phdr_slack, pt_null_slots, spare_dynamic_slots or tail_bytes too large".into(),
        ));
    }
    if let Some(s) = &spec.interp {
        check_str("interp", s)?;
    }
    for s in &spec.needed {
        check_str("needed", s)?;
    }
    for (what, s) in [
        ("soname", &spec.soname),
        ("rpath", &spec.rpath),
        ("runpath", &spec.runpath),
    ] {
        if let Some(s) = s {
            check_str(what, s)?;
        }
    }
    for s in &spec.dynsyms {
        check_str("dynsym", s)?;
    }
    for (f, vs) in &spec.verneed {
        check_str("verneed file", f)?;
        if vs.is_empty() {
            return Err(SpecError(format!("verneed file {f:?} lists no versions")));
        }
        for v in vs {
            check_str("verneed version", v)?;
        }
    }
    for v in &spec.verdef {
        check_str("verdef", v)?;
    }
    Ok(())
}

fn build_id(spec: &Spec) -> [u8; 20] {
    // FNV-1a over the spec's debug representation: deterministic per spec.
    let text = format!("{spec:?}");
    let mut out = [0u8; 20];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        for &c in text.as_bytes().iter().chain(&[i as u8]) {
            h ^= c as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        let bytes = h.to_be_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    out
}

/// The sizes of the ELF header and of one program and one section header, for the class.
struct HeaderSizes {
    ehdr: u64,
    phdr: u64,
    shdr: u64,
}

impl HeaderSizes {
    fn of(enc: Enc) -> HeaderSizes {
        if enc.is64 {
            HeaderSizes {
                ehdr: 64,
                phdr: 56,
                shdr: 64,
            }
        } else {
            HeaderSizes {
                ehdr: 52,
                phdr: 32,
                shdr: 40,
            }
        }
    }
}

/// The dynamic symbols in `.dynsym` order, and the parameters of the hash tables over them.
struct DynSymbols<'a> {
    /// Entry `i + 1` of `.dynsym` is `spec.dynsyms[order[i]]`.
    order: Vec<usize>,
    /// The names in that order.
    names: Vec<&'a str>,
    /// How many come first, undefined.
    undefined: usize,
    /// How many are defined (the ones `.gnu.hash` covers).
    defined: usize,
    /// Entries of `.dynsym`, the null symbol included.
    entries: usize,
    /// `.hash` buckets.
    sysv_buckets: u32,
    /// Size of a `.hash` word (8 on 64-bit s390x, else 4).
    hash_entry: u64,
    /// `.gnu.hash` buckets.
    gnu_buckets: u32,
    /// Bits in one bloom filter word.
    bloom_bits: u64,
    /// Words of the bloom filter.
    bloom_words: u64,
    /// The bloom filter's second hash shift.
    bloom_shift: u32,
}

impl<'a> DynSymbols<'a> {
    fn of(spec: &'a Spec, enc: Enc) -> DynSymbols<'a> {
        let undefined = spec.undefined_dynsyms;
        let total = spec.dynsyms.len();
        let defined = total - undefined;
        let gnu_buckets = bucket_count(defined);
        // GNU ld sorts the defined symbols by their GNU hash bucket, as the table requires.
        let mut order: Vec<usize> = (0..total).collect();
        if spec.hash.gnu() {
            order[undefined..].sort_by_key(|&i| gnu_hash(spec.dynsyms[i].as_bytes()) % gnu_buckets);
        }
        let names = order.iter().map(|&i| spec.dynsyms[i].as_str()).collect();
        let bloom_bits = enc.ws() * 8;
        DynSymbols {
            order,
            names,
            undefined,
            defined,
            entries: total + 1,
            sysv_buckets: bucket_count(total + 1),
            hash_entry: spec.machine.hash_entry_size(spec.class),
            gnu_buckets,
            bloom_bits,
            bloom_words: (((2 * defined as u64).div_ceil(bloom_bits)).max(1)).next_power_of_two(),
            bloom_shift: if enc.is64 { 6 } else { 5 },
        }
    }
}

/// The version indices: of every needed version, and of every dynamic symbol.
struct Versions {
    /// Whether `.gnu.version` is written (some version is needed or defined).
    present: bool,
    /// `vna_other` of every needed version, in `spec.verneed` order, flattened.
    need_indices: Vec<u16>,
    /// The version index of each of `spec.dynsyms` (in the spec's order): undefined symbols take
    /// the needed versions in turn, defined ones the non-base definitions.
    of_symbol: Vec<u16>,
}

impl Versions {
    fn of(spec: &Spec) -> Versions {
        let first_need_index = spec.verdef.len().max(1) as u16 + 1;
        let mut need_indices: Vec<u16> = Vec::new();
        let mut index = first_need_index;
        for (_, versions) in &spec.verneed {
            for _ in versions {
                need_indices.push(index);
                index += 1;
            }
        }
        let undefined = spec.undefined_dynsyms;
        let of_symbol = (0..spec.dynsyms.len())
            .map(|k| {
                if k < undefined {
                    if need_indices.is_empty() {
                        1
                    } else {
                        need_indices[k % need_indices.len()]
                    }
                } else if spec.verdef.len() > 1 {
                    2 + ((k - undefined) % (spec.verdef.len() - 1)) as u16
                } else {
                    1
                }
            })
            .collect();
        Versions {
            present: !spec.verneed.is_empty() || !spec.verdef.is_empty(),
            need_indices,
            of_symbol,
        }
    }
}

/// The sections of each part of the file, in file order, and their section header indices.
struct SectionOrder {
    /// In the first `PT_LOAD`, after the program headers.
    first: Vec<Id>,
    /// In the executable `PT_LOAD`.
    text: Vec<Id>,
    /// In the writable `PT_LOAD`.
    rw: Vec<Id>,
    /// Not loaded (only with section headers).
    nonalloc: Vec<Id>,
    /// All of them, in order.
    all: Vec<Id>,
    /// Section header index of each.
    index: HashMap<Id, u16>,
}

impl SectionOrder {
    fn of(spec: &Spec, has_versions: bool) -> SectionOrder {
        let mut first: Vec<Id> = Vec::new();
        if spec.interp.is_some() {
            first.push(Id::Interp);
        }
        first.push(Id::Note);
        if spec.hash.sysv() {
            first.push(Id::Hash);
        }
        if spec.hash.gnu() {
            first.push(Id::GnuHash);
        }
        first.push(Id::Dynsym);
        first.push(Id::Dynstr);
        if has_versions {
            first.push(Id::Versym);
        }
        if !spec.verdef.is_empty() {
            first.push(Id::Verdef);
        }
        if !spec.verneed.is_empty() {
            first.push(Id::Verneed);
        }
        let mut text: Vec<Id> = vec![Id::Init, Id::Text, Id::Fini];
        match spec.first_after_phdrs {
            AfterPhdrs::Interp => {}
            AfterPhdrs::Text => {
                text.remove(0);
                first.insert(0, Id::Init);
            }
            AfterPhdrs::Dynsym => {
                first.retain(|&i| i != Id::Dynsym);
                first.insert(0, Id::Dynsym);
            }
        }
        let mut rw: Vec<Id> = vec![Id::Dynamic];
        if spec.has_rld_map() {
            rw.push(Id::RldMap);
        }
        rw.push(Id::Data);
        if spec.bss_size > 0 {
            rw.push(Id::Bss);
        }
        let mut nonalloc: Vec<Id> = Vec::new();
        if spec.with_section_headers {
            nonalloc.push(Id::Comment);
            if spec.symtab {
                nonalloc.push(Id::Symtab);
                nonalloc.push(Id::Strtab);
            }
            nonalloc.push(Id::Shstrtab);
        }
        let all: Vec<Id> = first
            .iter()
            .chain(&text)
            .chain(&rw)
            .chain(&nonalloc)
            .copied()
            .collect();
        let index = all
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i as u16 + 1))
            .collect();
        SectionOrder {
            first,
            text,
            rw,
            nonalloc,
            all,
            index,
        }
    }

    /// The section header index of `id` (0 when the file has no such section).
    fn idx(&self, id: Id) -> u16 {
        self.index.get(&id).copied().unwrap_or(0)
    }

    /// How many sections are allocated (they come first).
    fn alloc_count(&self) -> usize {
        self.first.len() + self.text.len() + self.rw.len()
    }
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

impl<'a> Draft<'a> {
    fn new(spec: &'a Spec) -> Draft<'a> {
        let enc = Enc {
            is64: spec.class == Class::Elf64,
            big: spec.endian == Endian::Big,
        };
        let rpath_shared =
            spec.shared_rpath_runpath && spec.rpath.is_some() && spec.runpath.is_some();
        let syms = DynSymbols::of(spec, enc);
        let versions = Versions::of(spec);
        let sections = SectionOrder::of(spec, versions.present);
        // .symtab names (their values come after placement)
        let mut symtab_names: Vec<&str> = vec!["", "_DYNAMIC", "_init", "_fini"];
        if spec.is_executable() {
            symtab_names.push("_start");
        }
        symtab_names.extend(syms.names.iter().copied());
        let symtab_entries = 1 + sections.alloc_count() + symtab_names.len() - 1;
        let strtab = StrTab::build(symtab_names.iter().copied(), spec.tail_merge);
        let shstrtab = StrTab::build(sections.all.iter().map(|i| i.name()), false);
        Draft {
            spec,
            enc,
            headers: HeaderSizes::of(enc),
            dynstr: dynstr_of(spec, rpath_shared),
            rpath_shared,
            syms,
            versions,
            sections,
            symtab_entries,
            strtab,
            shstrtab,
        }
    }

    /// The `.dynamic` entries, `(d_tag, d_val)`, with the sections at `addr(id)`; their number
    /// does not depend on the addresses.
    fn dynamic_entries(&self, addr: &dyn Fn(Id) -> u64) -> Vec<(u64, u64)> {
        let spec = self.spec;
        let dynstr = &self.dynstr;
        let mut d: Vec<(u64, u64)> = Vec::new();
        for n in &spec.needed {
            d.push((elf::DT_NEEDED.into(), dynstr.offset(n)));
        }
        if let Some(s) = &spec.soname {
            d.push((elf::DT_SONAME.into(), dynstr.offset(s)));
        }
        if let Some(s) = &spec.rpath {
            let s = if self.rpath_shared {
                spec.runpath.as_ref().unwrap()
            } else {
                s
            };
            d.push((elf::DT_RPATH.into(), dynstr.offset(s)));
        }
        if let Some(s) = &spec.runpath {
            d.push((elf::DT_RUNPATH.into(), dynstr.offset(s)));
        }
        if spec.hash.sysv() {
            d.push((elf::DT_HASH.into(), addr(Id::Hash)));
        }
        if spec.hash.gnu() {
            d.push((elf::DT_GNU_HASH.into(), addr(Id::GnuHash)));
        }
        d.push((elf::DT_STRTAB.into(), addr(Id::Dynstr)));
        d.push((elf::DT_SYMTAB.into(), addr(Id::Dynsym)));
        d.push((elf::DT_STRSZ.into(), dynstr.bytes.len() as u64));
        d.push((elf::DT_SYMENT.into(), self.enc.sym_size()));
        d.push((elf::DT_INIT.into(), addr(Id::Init)));
        d.push((elf::DT_FINI.into(), addr(Id::Fini)));
        if self.versions.present {
            d.push((elf::DT_VERSYM.into(), addr(Id::Versym)));
        }
        if !spec.verneed.is_empty() {
            d.push((elf::DT_VERNEED.into(), addr(Id::Verneed)));
            d.push((elf::DT_VERNEEDNUM.into(), spec.verneed.len() as u64));
        }
        if !spec.verdef.is_empty() {
            d.push((elf::DT_VERDEF.into(), addr(Id::Verdef)));
            d.push((elf::DT_VERDEFNUM.into(), spec.verdef.len() as u64));
        }
        if spec.is_executable() {
            d.push((elf::DT_DEBUG.into(), 0));
        }
        if spec.has_rld_map() {
            // Relative to the entry's own address.
            let slot = addr(Id::Dynamic) + d.len() as u64 * 2 * self.enc.ws();
            let mut rel = addr(Id::RldMap).wrapping_sub(slot);
            if !self.enc.is64 {
                rel &= 0xffff_ffff;
            }
            d.push((elf::DT_MIPS_RLD_MAP_REL.into(), rel));
        }
        d.push((elf::DT_FLAGS.into(), elf::DF_BIND_NOW.into()));
        let pie = spec.e_type == FileType::Dyn && spec.interp.is_some();
        let flags_1 = elf::DF_1_NOW | if pie { elf::DF_1_PIE } else { 0 };
        d.push((elf::DT_FLAGS_1.into(), flags_1.into()));
        for _ in 0..=spec.spare_dynamic_slots {
            d.push((elf::DT_NULL.into(), 0));
        }
        d
    }

    /// Section `id`, sized and aligned, not yet placed.
    fn section(&self, id: Id) -> Sec {
        let spec = self.spec;
        let (enc, ws, syms) = (self.enc, self.enc.ws(), &self.syms);
        let (size, align, entsize) = match id {
            Id::Init | Id::Fini => (INIT_SIZE, 4, 0),
            Id::Interp => (spec.interp.as_ref().map_or(0, |s| s.len() as u64 + 1), 1, 0),
            Id::Note => (NOTE_SIZE, 4, 0),
            Id::Hash => {
                let hent = syms.hash_entry;
                let words = 2 + syms.sysv_buckets as u64 + syms.entries as u64;
                (words * hent, hent, hent)
            }
            Id::GnuHash => (
                16 + syms.bloom_words * ws + 4 * syms.gnu_buckets as u64 + 4 * syms.defined as u64,
                ws,
                if enc.is64 { 0 } else { 4 },
            ),
            Id::Dynsym => (syms.entries as u64 * enc.sym_size(), ws, enc.sym_size()),
            Id::Dynstr => (self.dynstr.bytes.len() as u64, 1, 0),
            Id::Versym => (2 * syms.entries as u64, 2, 2),
            Id::Verdef => (28 * spec.verdef.len() as u64, ws, 0),
            Id::Verneed => {
                let size = spec
                    .verneed
                    .iter()
                    .map(|(_, vs)| 16 + 16 * vs.len() as u64)
                    .sum();
                (size, ws, 0)
            }
            Id::Text => (spec.text_size, 16, 0),
            Id::Dynamic => {
                let entries = self.dynamic_entries(&|_| 0).len() as u64;
                (entries * 2 * ws, ws, 2 * ws)
            }
            Id::RldMap => (ws, ws, 0),
            Id::Data => (DATA_SIZE, ws, 0),
            Id::Bss => (spec.bss_size, ws, 0),
            Id::Comment => (COMMENT.len() as u64, 1, 1),
            Id::Symtab => (
                self.symtab_entries as u64 * enc.sym_size(),
                ws,
                enc.sym_size(),
            ),
            Id::Strtab => (self.strtab.bytes.len() as u64, 1, 0),
            Id::Shstrtab => (self.shstrtab.bytes.len() as u64, 1, 0),
        };
        Sec {
            id,
            size,
            align,
            entsize,
            offset: 0,
            addr: 0,
        }
    }

    /// Program headers: `PT_PHDR`, `PT_INTERP`, three `PT_LOAD`s, `PT_DYNAMIC`, `PT_NOTE`,
    /// `PT_GNU_STACK` and the spare `PT_NULL`s.
    fn phnum(&self) -> u64 {
        let spec = self.spec;
        spec.pt_phdr as u64
            + spec.interp.is_some() as u64
            + 3 // PT_LOADs
            + 3 // PT_DYNAMIC, PT_NOTE, PT_GNU_STACK
            + spec.pt_null_slots as u64
    }

    /// Lays `ids` out one after the other from file offset `off`, each at address
    /// `vaddr(offset)`; returns the offset after the last.
    fn place_run(
        &self,
        ids: &[Id],
        mut off: u64,
        vaddr: impl Fn(u64) -> u64,
        secs: &mut Vec<Sec>,
    ) -> u64 {
        for &id in ids {
            let mut s = self.section(id);
            off = align_up(off, s.align);
            s.offset = off;
            s.addr = vaddr(off);
            off += s.size;
            secs.push(s);
        }
        off
    }
}

/// `.dynstr`: every name the dynamic section, the symbols and the version records use.
fn dynstr_of(spec: &Spec, rpath_shared: bool) -> StrTab {
    let mut strs: Vec<&str> = Vec::new();
    strs.extend(spec.needed.iter().map(String::as_str));
    strs.extend(spec.soname.as_deref());
    if !rpath_shared {
        strs.extend(spec.rpath.as_deref());
    }
    strs.extend(spec.runpath.as_deref());
    strs.extend(spec.dynsyms.iter().map(String::as_str));
    for (f, vs) in &spec.verneed {
        strs.push(f);
        strs.extend(vs.iter().map(String::as_str));
    }
    strs.extend(spec.verdef.iter().map(String::as_str));
    StrTab::build(strs, spec.tail_merge)
}

/// Where every section and segment of the file lies.
struct Placement {
    /// The sections in file (and section header) order.
    secs: Vec<Sec>,
    /// Index into `secs` of each section.
    sec_of: HashMap<Id, usize>,
    phoff: u64,
    phnum: u64,
    /// `p_filesz` (and `p_memsz`) of the first `PT_LOAD`: short of its end with
    /// [`Spec::tail_bytes`].
    first_filesz: u64,
    /// The executable `PT_LOAD`'s file range.
    text_off: u64,
    text_end: u64,
    /// The writable `PT_LOAD`: file offset, address, end of its file part and of its memory.
    rw_off: u64,
    rw_vaddr: u64,
    rw_file_end: u64,
    mem_end: u64,
    /// `e_shoff` (0 without section headers).
    shoff: u64,
    file_size: u64,
}

impl Placement {
    /// The address of section `id` (0 when the file has none).
    fn addr(&self, id: Id) -> u64 {
        self.sec_of.get(&id).map_or(0, |&i| self.secs[i].addr)
    }

    fn sec(&self, id: Id) -> &Sec {
        &self.secs[self.sec_of[&id]]
    }
}

/// Places the sections the way GNU ld does: the read-only tables after the program headers, the
/// code from the next page, the writable data on the page after the code (same offset in the
/// page), the non-allocated sections and the section headers at the end.
fn place(d: &Draft) -> Result<Placement, SpecError> {
    let spec = d.spec;
    let (enc, ws, page, base) = (d.enc, d.enc.ws(), spec.page_size, spec.base);
    let order = &d.sections;
    let phnum = d.phnum();
    let phoff = d.headers.ehdr;
    let mut secs: Vec<Sec> = Vec::new();
    let tables_start = phoff + phnum * d.headers.phdr + spec.phdr_slack as u64;
    let end1 = d.place_run(&order.first, tables_start, |off| base + off, &mut secs);
    // A first PT_LOAD that stops short of its last tables (Spec::tail_bytes): they stay in the
    // rest of its last 4 KiB page, which the loader maps from the file all the same. The cut
    // never reaches below that page or into the program header table.
    let first_filesz = if spec.tail_bytes == 0 {
        end1
    } else {
        let last_page = (end1 - 1) / 0x1000 * 0x1000;
        end1.saturating_sub(spec.tail_bytes)
            .max(last_page + 1)
            .max(phoff + phnum * d.headers.phdr)
            .min(end1)
    };
    let text_off = align_up(end1, page);
    let text_end = d.place_run(&order.text, text_off, |off| base + off, &mut secs);
    let rw_off = align_up(text_end, ws);
    let rw_vaddr = align_up(base + text_end, page) + rw_off % page;
    let delta = rw_vaddr - rw_off;
    let mut off = rw_off;
    let mut mem_end = rw_vaddr;
    for &id in &order.rw {
        let mut s = d.section(id);
        if id == Id::Bss {
            s.addr = align_up(mem_end, s.align);
            s.offset = s.addr - delta;
            mem_end = s.addr + s.size;
        } else {
            off = align_up(off, s.align);
            s.offset = off;
            s.addr = off + delta;
            off += s.size;
            mem_end = s.addr + s.size;
        }
        secs.push(s);
    }
    let rw_file_end = off;
    let off = d.place_run(&order.nonalloc, rw_file_end, |_| 0, &mut secs);
    let (shoff, file_size) = if spec.with_section_headers {
        let shoff = align_up(off, ws);
        (shoff, shoff + (order.all.len() as u64 + 1) * d.headers.shdr)
    } else {
        (0, rw_file_end)
    };
    if !enc.is64 && (file_size > u32::MAX as u64 || mem_end > u32::MAX as u64) {
        return Err(SpecError(format!(
            "a 32-bit file cannot hold this layout (file size {file_size:#x}, end address {mem_end:#x})"
        )));
    }
    if usize::try_from(file_size).is_err() {
        return Err(SpecError("file too large for this host".into()));
    }
    let sec_of = secs.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    Ok(Placement {
        secs,
        sec_of,
        phoff,
        phnum,
        first_filesz,
        text_off,
        text_end,
        rw_off,
        rw_vaddr,
        rw_file_end,
        mem_end,
        shoff,
        file_size,
    })
}

/// Deterministic stand-in bytes for code and data sections.
fn code(salt: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(salt) | 1)
        .collect()
}

/// The contents of each section, by concept.
impl Draft<'_> {
    fn note(&self) -> Vec<u8> {
        let enc = self.enc;
        let mut b = Vec::new();
        enc.u32(&mut b, 4);
        enc.u32(&mut b, 20);
        enc.u32(&mut b, 3); // NT_GNU_BUILD_ID
        b.extend_from_slice(b"GNU\0");
        b.extend_from_slice(&build_id(self.spec));
        b
    }

    /// `.hash`: every dynamic symbol in its bucket's chain.
    fn sysv_hash_table(&self) -> Vec<u8> {
        let (enc, syms) = (self.enc, &self.syms);
        let nbucket = syms.sysv_buckets;
        let mut bucket = vec![0u32; nbucket as usize];
        let mut chain = vec![0u32; syms.entries];
        for (i, n) in syms.names.iter().enumerate() {
            let si = i + 1;
            let b = (sysv_hash(n.as_bytes()) % nbucket) as usize;
            chain[si] = bucket[b];
            bucket[b] = si as u32;
        }
        let mut b = Vec::new();
        let put = |b: &mut Vec<u8>, v: u32| {
            if syms.hash_entry == 8 {
                enc.u64(b, v as u64)
            } else {
                enc.u32(b, v)
            }
        };
        put(&mut b, nbucket);
        put(&mut b, syms.entries as u32);
        for v in bucket.into_iter().chain(chain) {
            put(&mut b, v);
        }
        b
    }

    /// `.gnu.hash`: the bloom filter, the buckets and the chains over the defined symbols.
    fn gnu_hash_table(&self) -> Vec<u8> {
        let (enc, syms) = (self.enc, &self.syms);
        let (nb, ndef, bloom_bits) = (syms.gnu_buckets, syms.defined, syms.bloom_bits);
        let symoffset = (syms.undefined + 1) as u32;
        let hashes: Vec<u32> = syms.names[syms.undefined..]
            .iter()
            .map(|n| gnu_hash(n.as_bytes()))
            .collect();
        let mut bloom = vec![0u64; syms.bloom_words as usize];
        let mut buckets = vec![0u32; nb as usize];
        let mut chain = vec![0u32; ndef];
        for (k, &h) in hashes.iter().enumerate() {
            let word = ((h as u64 / bloom_bits) % syms.bloom_words) as usize;
            bloom[word] |= 1u64 << (h as u64 % bloom_bits);
            bloom[word] |= 1u64 << ((h >> syms.bloom_shift) as u64 % bloom_bits);
            let bk = (h % nb) as usize;
            if buckets[bk] == 0 {
                buckets[bk] = symoffset + k as u32;
            }
            let last = k + 1 == ndef || hashes[k + 1] % nb != h % nb;
            chain[k] = (h & !1) | last as u32;
        }
        let mut b = Vec::new();
        enc.u32(&mut b, nb);
        let first = if ndef == 0 {
            syms.entries as u32
        } else {
            symoffset
        };
        enc.u32(&mut b, first);
        enc.u32(&mut b, syms.bloom_words as u32);
        enc.u32(&mut b, syms.bloom_shift);
        for w in bloom {
            enc.word(&mut b, w);
        }
        for v in buckets.into_iter().chain(chain) {
            enc.u32(&mut b, v);
        }
        b
    }

    /// The value and size of the `k`-th defined symbol: 16-byte functions through `.text`,
    /// wrapping around.
    fn symbol_place(&self, text_addr: u64, k: usize) -> (u64, u64) {
        let text_size = self.spec.text_size;
        if text_size == 0 {
            (text_addr, 0)
        } else {
            let pos = (16 * k as u64) % text_size;
            (text_addr + pos, (text_size - pos).min(16))
        }
    }

    fn dynsym_table(&self, p: &Placement) -> Vec<u8> {
        let (enc, syms) = (self.enc, &self.syms);
        let text_idx = self.sections.idx(Id::Text);
        let mut b = Vec::new();
        enc.sym(&mut b, 0, 0, 0, 0, 0);
        for (i, n) in syms.names.iter().enumerate() {
            let info = (elf::STB_GLOBAL << 4) | elf::STT_FUNC;
            let name = self.dynstr.offset(n) as u32;
            if i < syms.undefined {
                enc.sym(&mut b, name, info, 0, 0, 0);
            } else {
                let (v, sz) = self.symbol_place(p.addr(Id::Text), i - syms.undefined);
                enc.sym(&mut b, name, info, text_idx, v, sz);
            }
        }
        b
    }

    fn versym_table(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.enc.u16(&mut b, 0);
        for &i in &self.syms.order {
            self.enc.u16(&mut b, self.versions.of_symbol[i]);
        }
        b
    }

    fn verdef_table(&self) -> Vec<u8> {
        let (enc, verdef) = (self.enc, &self.spec.verdef);
        let mut b = Vec::new();
        let n = verdef.len();
        for (i, v) in verdef.iter().enumerate() {
            enc.u16(&mut b, 1); // vd_version
            enc.u16(&mut b, if i == 0 { 1 } else { 0 }); // VER_FLG_BASE
            enc.u16(&mut b, i as u16 + 1); // vd_ndx
            enc.u16(&mut b, 1); // vd_cnt
            enc.u32(&mut b, sysv_hash(v.as_bytes()));
            enc.u32(&mut b, 20); // vd_aux
            enc.u32(&mut b, if i + 1 == n { 0 } else { 28 }); // vd_next
            enc.u32(&mut b, self.dynstr.offset(v) as u32); // vda_name
            enc.u32(&mut b, 0); // vda_next
        }
        b
    }

    fn verneed_table(&self) -> Vec<u8> {
        let (enc, verneed) = (self.enc, &self.spec.verneed);
        let mut b = Vec::new();
        let n = verneed.len();
        let mut k = 0;
        for (i, (f, vs)) in verneed.iter().enumerate() {
            enc.u16(&mut b, 1); // vn_version
            enc.u16(&mut b, vs.len() as u16); // vn_cnt
            enc.u32(&mut b, self.dynstr.offset(f) as u32); // vn_file
            enc.u32(&mut b, 16); // vn_aux
            let next = if i + 1 == n {
                0
            } else {
                16 + 16 * vs.len() as u32
            };
            enc.u32(&mut b, next); // vn_next
            for (j, v) in vs.iter().enumerate() {
                enc.u32(&mut b, sysv_hash(v.as_bytes())); // vna_hash
                enc.u16(&mut b, 0); // vna_flags
                enc.u16(&mut b, self.versions.need_indices[k]); // vna_other
                enc.u32(&mut b, self.dynstr.offset(v) as u32); // vna_name
                enc.u32(&mut b, if j + 1 == vs.len() { 0 } else { 16 }); // vna_next
                k += 1;
            }
        }
        b
    }

    fn dynamic_table(&self, dynamic: &[(u64, u64)]) -> Vec<u8> {
        let mut b = Vec::new();
        for &(t, v) in dynamic {
            self.enc.word(&mut b, t);
            self.enc.word(&mut b, v);
        }
        b
    }

    /// `.symtab`: a section symbol per allocated section, `_DYNAMIC`, `_init`, `_fini`,
    /// `_start` in executables, and the dynamic symbols again.
    fn symtab_table(&self, p: &Placement) -> Vec<u8> {
        let (enc, order) = (self.enc, &self.sections);
        let idx = |id: Id| order.idx(id);
        let so = |n: &str| self.strtab.offset(n) as u32;
        let local = |kind: u8| (elf::STB_LOCAL << 4) | kind;
        let mut b = Vec::new();
        enc.sym(&mut b, 0, 0, 0, 0, 0);
        for s in &p.secs[..order.alloc_count()] {
            enc.sym(&mut b, 0, local(elf::STT_SECTION), idx(s.id), s.addr, 0);
        }
        let dynsec = p.sec(Id::Dynamic);
        let (init, fini) = (idx(Id::Init), idx(Id::Fini));
        enc.sym(
            &mut b,
            so("_DYNAMIC"),
            local(elf::STT_OBJECT),
            idx(Id::Dynamic),
            dynsec.addr,
            dynsec.size,
        );
        let init_addr = p.addr(Id::Init);
        enc.sym(
            &mut b,
            so("_init"),
            local(elf::STT_FUNC),
            init,
            init_addr,
            INIT_SIZE,
        );
        let fini_addr = p.addr(Id::Fini);
        enc.sym(
            &mut b,
            so("_fini"),
            local(elf::STT_FUNC),
            fini,
            fini_addr,
            INIT_SIZE,
        );
        let g = (elf::STB_GLOBAL << 4) | elf::STT_FUNC;
        let (text_idx, text_addr) = (idx(Id::Text), p.addr(Id::Text));
        if self.spec.is_executable() {
            enc.sym(&mut b, so("_start"), g, text_idx, text_addr, 0);
        }
        for (i, n) in self.syms.names.iter().enumerate() {
            if i < self.syms.undefined {
                enc.sym(&mut b, so(n), g, 0, 0, 0);
            } else {
                let (v, sz) = self.symbol_place(text_addr, i - self.syms.undefined);
                enc.sym(&mut b, so(n), g, text_idx, v, sz);
            }
        }
        debug_assert_eq!(b.len() as u64, p.sec(Id::Symtab).size);
        b
    }

    /// The bytes of every section that has any, at its offset, in section order.
    fn section_chunks(&self, p: &Placement, dynamic: &[(u64, u64)]) -> Vec<(u64, Vec<u8>)> {
        let spec = self.spec;
        let mut contents: HashMap<Id, Vec<u8>> = HashMap::new();
        if let Some(s) = &spec.interp {
            let mut b = s.as_bytes().to_vec();
            b.push(0);
            contents.insert(Id::Interp, b);
        }
        contents.insert(Id::Note, self.note());
        if spec.hash.sysv() {
            contents.insert(Id::Hash, self.sysv_hash_table());
        }
        if spec.hash.gnu() {
            contents.insert(Id::GnuHash, self.gnu_hash_table());
        }
        contents.insert(Id::Dynsym, self.dynsym_table(p));
        contents.insert(Id::Dynstr, self.dynstr.bytes.clone());
        if self.versions.present {
            contents.insert(Id::Versym, self.versym_table());
        }
        if !spec.verdef.is_empty() {
            contents.insert(Id::Verdef, self.verdef_table());
        }
        if !spec.verneed.is_empty() {
            contents.insert(Id::Verneed, self.verneed_table());
        }
        contents.insert(Id::Init, code(0x10, INIT_SIZE));
        contents.insert(Id::Fini, code(0x20, INIT_SIZE));
        contents.insert(Id::Text, code(0x30, spec.text_size.min(TEXT_PATTERN_LEN)));
        contents.insert(Id::Data, code(0x40, DATA_SIZE));
        if spec.has_rld_map() {
            contents.insert(Id::RldMap, vec![0; self.enc.ws() as usize]);
        }
        contents.insert(Id::Dynamic, self.dynamic_table(dynamic));
        if spec.with_section_headers {
            contents.insert(Id::Comment, COMMENT.to_vec());
            if spec.symtab {
                contents.insert(Id::Symtab, self.symtab_table(p));
                contents.insert(Id::Strtab, self.strtab.bytes.clone());
            }
            contents.insert(Id::Shstrtab, self.shstrtab.bytes.clone());
        }
        let mut chunks = Vec::new();
        for s in &p.secs {
            if let Some(b) = contents.remove(&s.id) {
                debug_assert!(b.len() as u64 <= s.size, "{:?}", s.id);
                if !b.is_empty() {
                    chunks.push((s.offset, b));
                }
            }
        }
        chunks
    }
}

/// The headers: sections, segments and the ELF header.
impl Draft<'_> {
    /// Every section as its header describes it, the null section first.
    fn section_headers(&self, p: &Placement) -> Vec<PlacedSection> {
        let order = &self.sections;
        let idx = |id: Id| order.idx(id) as u32;
        // The null symbol, the section symbols, and _DYNAMIC, _init, _fini are local.
        let first_global_symtab = (1 + order.alloc_count() + 3) as u32;
        let mut placed: Vec<PlacedSection> = vec![PlacedSection {
            name: String::new(),
            sh_type: 0,
            flags: 0,
            addr: 0,
            offset: 0,
            size: 0,
            link: 0,
            info: 0,
            addralign: 0,
            entsize: 0,
        }];
        for s in &p.secs {
            let (link, info) = match s.id {
                Id::Hash | Id::GnuHash | Id::Versym => (idx(Id::Dynsym), 0),
                Id::Dynsym => (idx(Id::Dynstr), 1),
                Id::Dynamic => (idx(Id::Dynstr), 0),
                Id::Verdef => (idx(Id::Dynstr), self.spec.verdef.len() as u32),
                Id::Verneed => (idx(Id::Dynstr), self.spec.verneed.len() as u32),
                Id::Symtab => (idx(Id::Strtab), first_global_symtab),
                _ => (0, 0),
            };
            placed.push(PlacedSection {
                name: s.id.name().to_string(),
                sh_type: s.id.sh_type(),
                flags: s.id.flags(),
                addr: if s.id.flags() & u64::from(elf::SHF_ALLOC) != 0 {
                    s.addr
                } else {
                    0
                },
                offset: s.offset,
                size: s.size,
                link,
                info,
                addralign: s.align,
                entsize: s.entsize,
            });
        }
        placed
    }

    fn encode_section_headers(&self, placed: &[PlacedSection]) -> Vec<u8> {
        let enc = self.enc;
        let mut b = Vec::new();
        for (i, p) in placed.iter().enumerate() {
            let name = if i == 0 {
                0
            } else {
                self.shstrtab.offset(&p.name) as u32
            };
            enc.u32(&mut b, name);
            enc.u32(&mut b, p.sh_type);
            enc.word(&mut b, p.flags);
            enc.word(&mut b, p.addr);
            enc.word(&mut b, p.offset);
            enc.word(&mut b, p.size);
            enc.u32(&mut b, p.link);
            enc.u32(&mut b, p.info);
            enc.word(&mut b, p.addralign);
            enc.word(&mut b, p.entsize);
        }
        b
    }

    fn program_headers(&self, p: &Placement) -> Vec<Segment> {
        let spec = self.spec;
        let (page, base) = (spec.page_size, spec.base);
        let from_sec = |p_type: u32, p_flags: u32, id: Id, align: u64| -> Segment {
            let s = p.sec(id);
            Segment {
                p_type,
                p_flags,
                offset: s.offset,
                vaddr: s.addr,
                filesz: s.size,
                memsz: s.size,
                align,
            }
        };
        let load = |p_flags: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64| Segment {
            p_type: elf::PT_LOAD,
            p_flags,
            offset,
            vaddr,
            filesz,
            memsz,
            align: page,
        };
        let empty = |p_type: u32, p_flags: u32, align: u64| Segment {
            p_type,
            p_flags,
            offset: 0,
            vaddr: 0,
            filesz: 0,
            memsz: 0,
            align,
        };
        let mut segs: Vec<Segment> = Vec::new();
        let phsize = p.phnum * self.headers.phdr;
        if spec.pt_phdr {
            segs.push(Segment {
                p_type: elf::PT_PHDR,
                p_flags: elf::PF_R,
                offset: p.phoff,
                vaddr: base + p.phoff,
                filesz: phsize,
                memsz: phsize,
                align: self.enc.ws(),
            });
        }
        if spec.interp.is_some() {
            segs.push(from_sec(elf::PT_INTERP, elf::PF_R, Id::Interp, 1));
        }
        let first_flags = if spec.first_after_phdrs == AfterPhdrs::Text {
            elf::PF_R | elf::PF_X
        } else {
            elf::PF_R
        };
        segs.push(load(first_flags, 0, base, p.first_filesz, p.first_filesz));
        let text_size = p.text_end - p.text_off;
        let text_vaddr = base + p.text_off;
        segs.push(load(
            elf::PF_R | elf::PF_X,
            p.text_off,
            text_vaddr,
            text_size,
            text_size,
        ));
        let rw_filesz = p.rw_file_end - p.rw_off;
        let rw_memsz = p.mem_end - p.rw_vaddr;
        let rw = elf::PF_R | elf::PF_W;
        segs.push(load(rw, p.rw_off, p.rw_vaddr, rw_filesz, rw_memsz));
        segs.push(from_sec(elf::PT_DYNAMIC, rw, Id::Dynamic, self.enc.ws()));
        segs.push(from_sec(elf::PT_NOTE, elf::PF_R, Id::Note, 4));
        segs.push(empty(elf::PT_GNU_STACK, rw, 16));
        for _ in 0..spec.pt_null_slots {
            segs.push(empty(elf::PT_NULL, 0, 0));
        }
        debug_assert_eq!(segs.len() as u64, p.phnum);
        segs
    }

    fn encode_program_headers(&self, segs: &[Segment]) -> Vec<u8> {
        let enc = self.enc;
        let mut b = Vec::new();
        for s in segs {
            enc.u32(&mut b, s.p_type);
            if enc.is64 {
                enc.u32(&mut b, s.p_flags);
            }
            enc.word(&mut b, s.offset);
            enc.word(&mut b, s.vaddr);
            enc.word(&mut b, s.vaddr);
            enc.word(&mut b, s.filesz);
            enc.word(&mut b, s.memsz);
            if !enc.is64 {
                enc.u32(&mut b, s.p_flags);
            }
            enc.word(&mut b, s.align);
        }
        b
    }

    /// The ELF header; `shnum` counts the null section.
    fn elf_header(&self, p: &Placement, entry: u64, shnum: usize) -> Vec<u8> {
        let (spec, enc, sizes) = (self.spec, self.enc, &self.headers);
        let shdrs = spec.with_section_headers;
        let mut b = vec![0x7f, b'E', b'L', b'F'];
        b.push(if enc.is64 { 2 } else { 1 });
        b.push(if enc.big { 2 } else { 1 });
        b.push(1); // EI_VERSION
        b.push(0); // ELFOSABI_NONE
        b.resize(16, 0);
        enc.u16(&mut b, if spec.e_type == FileType::Exec { 2 } else { 3 });
        enc.u16(&mut b, spec.machine.e_machine());
        enc.u32(&mut b, 1);
        enc.word(&mut b, entry);
        enc.word(&mut b, p.phoff);
        enc.word(&mut b, p.shoff);
        enc.u32(&mut b, spec.machine.e_flags(spec.class, spec.endian));
        enc.u16(&mut b, sizes.ehdr as u16);
        enc.u16(&mut b, sizes.phdr as u16);
        enc.u16(&mut b, p.phnum as u16);
        enc.u16(&mut b, sizes.shdr as u16);
        enc.u16(&mut b, if shdrs { shnum as u16 } else { 0 });
        let shstrndx = if shdrs {
            self.sections.idx(Id::Shstrtab)
        } else {
            0
        };
        enc.u16(&mut b, shstrndx);
        debug_assert_eq!(b.len() as u64, sizes.ehdr);
        b
    }
}

fn plan(spec: &Spec) -> Result<Plan, SpecError> {
    validate(spec)?;
    let draft = Draft::new(spec);
    let placement = place(&draft)?;
    let dynamic = draft.dynamic_entries(&|id| placement.addr(id));
    let mut chunks = draft.section_chunks(&placement, &dynamic);
    let mut placed = draft.section_headers(&placement);
    if spec.with_section_headers {
        chunks.push((placement.shoff, draft.encode_section_headers(&placed)));
    }
    let segs = draft.program_headers(&placement);
    chunks.push((placement.phoff, draft.encode_program_headers(&segs)));
    let entry = placement.addr(Id::Text);
    chunks.push((0, draft.elf_header(&placement, entry, placed.len())));
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
