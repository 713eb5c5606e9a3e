//! Everything else that points into the dynamic string table, and the tables around it.
//!
//! Before overwriting or zeroing bytes of `.dynstr`, a planner must prove that nothing else points
//! into them: linkers merge a string with the tail of a longer one, so a symbol name may live inside
//! the RUNPATH's bytes. The referrers are the dynamic entries (in [`crate::Elf`]), the dynamic
//! symbols' names, and the version need/definition records; this module loads the latter, found
//! through the dynamic tags (or the section headers when present), and the hash tables whose sizes
//! a file without section headers only reveals by walking them.

use object::elf;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::note::LocatedNote;
use crate::read::{Dynamic, Elf};
use crate::source::{read_into, read_range, Source};

/// A range of the file that is also mapped at `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// File offset.
    pub offset: u64,
    /// Virtual address.
    pub vaddr: u64,
    /// Length in bytes.
    pub size: u64,
}

impl Region {
    /// One past the last file offset.
    pub fn end(&self) -> u64 {
        self.offset + self.size
    }
}

/// The dynamic symbol table's location and the string offsets of its names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymTable {
    /// Where the table is.
    pub region: Region,
    /// `st_name` of every symbol, in order.
    pub names: Vec<u32>,
    /// The largest `st_size` of any symbol.
    pub max_size: u64,
    /// Index of the `.dynsym` section, if any.
    pub section: Option<usize>,
    /// The table's bytes (kept for edits that rewrite symbols: renames). Empty when the tables
    /// were read for edits that rewrite none ([`crate::ElfFile`]'s plans without a rename): a
    /// big library's table is megabytes that such an edit never looks at.
    pub bytes: Vec<u8>,
}

/// The header of a `DT_HASH` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysvHashInfo {
    /// Number of buckets.
    pub nbucket: u64,
    /// Number of chain entries (the symbols the table covers).
    pub nchain: u64,
    /// Size of one entry: 4, or 8 on 64-bit s390.
    pub word: u64,
}

/// The header of a `DT_GNU_HASH` table and how many symbols it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GnuHashInfo {
    /// Bucket count, first hashed symbol, bloom size and shift.
    pub params: crate::hash::GnuParams,
    /// One past the last hashed symbol (from walking the chains).
    pub symbols: u64,
}

/// One `Vernaux` record (a version needed from a file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vernaux {
    /// File offset of the record.
    pub offset: u64,
    /// `vna_hash`.
    pub hash: u32,
    /// `vna_flags`.
    pub flags: u16,
    /// `vna_other`: the version index used in `.gnu.version`.
    pub other: u16,
    /// `vna_name`: string table offset of the version name.
    pub name: u32,
}

/// One `Verneed` record (a file versions are needed from) and its `Vernaux` records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerneedEntry {
    /// File offset of the record.
    pub offset: u64,
    /// `vn_version`.
    pub version: u16,
    /// `vn_file`: string table offset of the file name.
    pub file: u32,
    /// The auxiliary records, in chain order.
    pub aux: Vec<Vernaux>,
}

/// Everything outside `.dynamic` that refers to the dynamic string table, plus the hash tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tables {
    /// `.dynsym`, when its extent could be determined.
    pub dynsym: Option<SymTable>,
    /// `DT_HASH` table extent.
    pub hash: Option<Region>,
    /// `DT_GNU_HASH` table extent.
    pub gnu_hash: Option<Region>,
    /// `DT_HASH` header, when the table exists.
    pub hash_info: Option<SysvHashInfo>,
    /// `DT_GNU_HASH` header and extent in symbols, when the table exists.
    pub gnu_hash_info: Option<GnuHashInfo>,
    /// `.gnu.version` (`DT_VERSYM`): one version index per dynamic symbol (none when read for
    /// edits that change no symbol version: [`crate::ElfFile`]'s plans without one).
    pub versym: Option<(Region, Vec<u16>)>,
    /// `.gnu.version_r` (`DT_VERNEED`) extent and records.
    pub verneed: Option<(Region, Vec<VerneedEntry>)>,
    /// `.gnu.version_d` (`DT_VERDEF`) extent and the string offsets of its names.
    pub verdef: Option<(Region, Vec<u32>)>,
    /// Whether every referrer of the string table is known. When false, no byte of the table may be
    /// overwritten or zeroed: only appending to a copy is safe.
    pub exact: bool,
    /// The resolution-cache note ([`crate::note::find`]), when the file has one that could be
    /// located.
    pub note: Option<LocatedNote>,
    /// Why the file's resolution-cache note could not be located (a malformed note): edits of
    /// the note are refused with this; other edits leave the note alone.
    pub note_fault: Option<NoteFault>,
}

/// A resolution-cache note that could not be located: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteFault {
    /// File offset of the offending structure (0 when unknown).
    pub offset: u64,
    /// What is wrong.
    pub what: String,
}

impl Tables {
    /// Loads the tables of `elf` from `src`. Reads only the tables themselves.
    pub fn read<S: Source + ?Sized>(src: &S, e: &Elf) -> Result<Tables> {
        Tables::read_with(src, e, true)
    }

    /// [`Tables::read`], keeping the dynamic symbols' bytes ([`SymTable::bytes`]) and reading
    /// the symbol versions ([`Tables::versym`]'s indices) only with `symbols`, for the edits that
    /// rewrite them: the others read the symbol table a piece at a time, for its names and
    /// sizes, and leave the version indices unread (their extent is known all the same).
    pub(crate) fn read_with<S: Source + ?Sized>(src: &S, e: &Elf, symbols: bool) -> Result<Tables> {
        let mut t = Tables {
            exact: true,
            ..Tables::default()
        };
        match crate::note::find(src, e) {
            Ok(note) => t.note = note,
            Err(err) => {
                t.note_fault = Some(NoteFault {
                    offset: err.offset().unwrap_or(0),
                    what: err.to_string().trim_start_matches("<input>: ").to_string(),
                })
            }
        }
        let Some(d) = &e.dynamic else {
            return Ok(t);
        };
        let r = TableReader { src, e, d, symbols };
        let sysv = r.sysv_hash()?;
        t.hash = sysv.map(|h| h.region);
        t.hash_info = sysv.and_then(|h| h.sysv);
        let gnu = r.gnu_hash()?;
        t.gnu_hash = gnu.map(|h| h.region);
        t.gnu_hash_info = gnu.and_then(|h| h.gnu);
        t.dynsym = r.dynsym(sysv.map(|h| h.symbols), gnu.map(|h| h.symbols))?;
        if t.dynsym.is_none() && d.get(elf::DT_SYMTAB).is_some() {
            // Symbol names we cannot enumerate may point anywhere into the table.
            t.exact = false;
        }
        t.versym = r.versym(t.dynsym.as_ref().map(|s| s.names.len()))?;
        // glibc follows vn_next / vd_next to the end of the chain whatever DT_VERNEEDNUM and
        // DT_VERDEFNUM say; so do we, so that every name it reads is known.
        if let Some(vaddr) = d.get(elf::DT_VERNEED) {
            t.verneed = Some(read_verneed(src, e, vaddr)?);
        }
        if let Some(vaddr) = d.get(elf::DT_VERDEF) {
            t.verdef = Some(read_verdef(src, e, vaddr)?);
        }
        if unknown_dynstr_users(e) {
            t.exact = false;
        }
        Ok(t)
    }

    /// Every string table offset referenced from outside `.dynamic`.
    pub fn string_refs(&self) -> impl Iterator<Item = u64> + '_ {
        let syms = self
            .dynsym
            .iter()
            .flat_map(|s| s.names.iter().map(|&n| u64::from(n)));
        syms.chain(self.version_refs())
    }

    /// The string table offsets of the version records' names (need records' files and
    /// versions, definitions' names).
    pub fn version_refs(&self) -> impl Iterator<Item = u64> + '_ {
        let need = self.verneed.iter().flat_map(|(_, v)| {
            v.iter().flat_map(|n| {
                std::iter::once(u64::from(n.file)).chain(n.aux.iter().map(|a| u64::from(a.name)))
            })
        });
        let def = self
            .verdef
            .iter()
            .flat_map(|(_, v)| v.iter().map(|&n| u64::from(n)));
        need.chain(def)
    }
}

/// A hash table's extent and the number of dynamic symbols it implies.
#[derive(Clone, Copy)]
struct HashExtent {
    region: Region,
    symbols: u64,
    sysv: Option<SysvHashInfo>,
    gnu: Option<GnuHashInfo>,
}

/// Reads the tables the dynamic array `d` of `e` points at, one at a time.
struct TableReader<'a, S: Source + ?Sized> {
    src: &'a S,
    e: &'a Elf,
    d: &'a Dynamic,
    /// Whether to keep the dynamic symbols' bytes and read their versions.
    symbols: bool,
}

impl<S: Source + ?Sized> TableReader<'_, S> {
    /// The `size` bytes at `vaddr`, which `tag` points at; an error when no `PT_LOAD` maps them
    /// from the file.
    fn region(&self, tag: u32, vaddr: u64, size: u64) -> Result<Region> {
        match self.e.vaddr_to_offset(vaddr, size) {
            Some(offset) => Ok(Region {
                offset,
                vaddr,
                size,
            }),
            None => Err(Error::malformed(
                self.d.offset,
                format!(
                    "{} {vaddr:#x} (+{size:#x}) is not in the bytes any PT_LOAD maps from the file",
                    crate::read::tag_name(u64::from(tag))
                ),
            )),
        }
    }

    /// The `size` bytes `tag` points at, if the file has the tag.
    fn region_at(&self, tag: u32, size: u64) -> Result<Option<Region>> {
        match self.d.get(tag) {
            Some(vaddr) => self.region(tag, vaddr, size).map(Some),
            None => Ok(None),
        }
    }

    /// `DT_HASH`: its header gives its size and the symbol count (`nchain`).
    fn sysv_hash(&self) -> Result<Option<HashExtent>> {
        let f = self.e.format;
        let hash_word = crate::read::sysv_hash_word(self.e.machine(), f.class);
        let Some(r) = self.region_at(elf::DT_HASH, 2 * hash_word)? else {
            return Ok(None);
        };
        let head = read_range(self.src, r.offset, 2 * hash_word, "DT_HASH header")?;
        let (nbucket, nchain) = if hash_word == 8 {
            (f.u64(&head[..8]), f.u64(&head[8..]))
        } else {
            (u64::from(f.u32(&head[..4])), u64::from(f.u32(&head[4..])))
        };
        let size = nbucket
            .checked_add(nchain)
            .and_then(|n| n.checked_add(2))
            .and_then(|n| n.checked_mul(hash_word))
            .ok_or_else(|| Error::malformed(r.offset, "DT_HASH sizes overflow"))?;
        let Some(region) = self.region_at(elf::DT_HASH, size)? else {
            return Err(Error::malformed(
                r.offset,
                "DT_HASH table extends past what its segment maps from the file",
            ));
        };
        Ok(Some(HashExtent {
            region,
            symbols: nchain,
            sysv: Some(SysvHashInfo {
                nbucket,
                nchain,
                word: hash_word,
            }),
            gnu: None,
        }))
    }

    /// `DT_GNU_HASH`: its size and symbol count come from walking it.
    fn gnu_hash(&self) -> Result<Option<HashExtent>> {
        let Some(r) = self.region_at(elf::DT_GNU_HASH, 16)? else {
            return Ok(None);
        };
        let (size, symbols) = walk_gnu_hash(self.src, self.e, r)?;
        let f = self.e.format;
        let head = read_range(self.src, r.offset, 16, "DT_GNU_HASH header")?;
        let params = crate::hash::GnuParams {
            nbuckets: f.u32(&head[0..]),
            symoffset: f.u32(&head[4..]),
            bloom_size: f.u32(&head[8..]),
            bloom_shift: f.u32(&head[12..]),
        };
        Ok(Some(HashExtent {
            region: Region { size, ..r },
            symbols,
            sysv: None,
            gnu: Some(GnuHashInfo { params, symbols }),
        }))
    }

    /// `.dynsym`, when `DT_SYMTAB` exists and some source gives its count: the section, or the
    /// counts the hash tables imply.
    fn dynsym(&self, sysv_count: Option<u64>, gnu_count: Option<u64>) -> Result<Option<SymTable>> {
        let (e, f) = (self.e, self.e.format);
        let symtab = self.d.get(elf::DT_SYMTAB);
        let section = e
            .sections
            .iter()
            .find(|s| s.shdr.sh_type == elf::SHT_DYNSYM && Some(s.shdr.sh_addr) == symtab);
        // Every source of the count, and the largest: the loader looks symbols up through the
        // hash tables, so names they reach must be protected even past the section's size.
        let count = [
            section.map(|s| s.shdr.sh_size / f.sym_size() as u64),
            sysv_count,
            gnu_count,
        ]
        .into_iter()
        .flatten()
        .max();
        let (Some(vaddr), Some(mut count)) = (symtab, count) else {
            return Ok(None);
        };
        if section.is_none() {
            // Without a section header, a GNU table with no hashed symbol (a program exporting
            // nothing) implies fewer symbols than there are: its undefined symbols lie past
            // `symoffset`. The relocations name them; take them too where they are mapped.
            let more = self.relocated_symbols();
            if more > count
                && e.vaddr_to_offset(vaddr, more * f.sym_size() as u64)
                    .is_some()
            {
                count = more;
            }
        }
        let size = count
            .checked_mul(f.sym_size() as u64)
            .ok_or_else(|| Error::malformed(self.d.offset, "symbol count overflows"))?;
        let region = self.region(elf::DT_SYMTAB, vaddr, size)?;
        // Names and sizes, no symbol kept: a library's table holds a hundred thousand of them,
        // read at every edit. Without the bytes, a piece at a time: fresh memory for the whole
        // table costs more than reading it.
        let sym_size = f.sym_size() as u64;
        let piece = if self.symbols {
            size
        } else {
            (SYMBOL_PIECE / sym_size).max(1) * sym_size
        };
        let mut names = Vec::with_capacity(count as usize);
        let mut max_size = 0;
        // One buffer for every piece: a fresh one each time would be fresh memory each time.
        let mut buf = read_range(
            self.src,
            region.offset,
            piece.min(size),
            "dynamic symbol table",
        )?;
        let mut at = 0;
        loop {
            // st_name first in both classes; st_size a word at 8 (32-bit) or 16 (64-bit).
            let size_at = if f.class == crate::Class::Elf64 {
                16
            } else {
                8
            };
            for c in buf.chunks_exact(f.sym_size()) {
                names.push(f.u32(c));
                let st_size = if size_at == 16 {
                    f.u64(&c[16..])
                } else {
                    u64::from(f.u32(&c[8..]))
                };
                max_size = max_size.max(st_size);
            }
            at += buf.len() as u64;
            if at >= size {
                break;
            }
            buf.truncate(piece.min(size - at) as usize);
            read_into(
                self.src,
                region.offset + at,
                &mut buf,
                "dynamic symbol table",
            )?;
        }
        let bytes = if self.symbols { buf } else { Vec::new() };
        Ok(Some(SymTable {
            region,
            names,
            max_size,
            section: section.map(|s| s.index),
            bytes,
        }))
    }

    /// One past the largest symbol index the dynamic relocation tables name (0 when unknown or
    /// unreadable: this only ever adds to a count).
    fn relocated_symbols(&self) -> u64 {
        let f = self.e.format;
        let is64 = f.class == crate::Class::Elf64;
        if is64 && self.e.machine() == elf::EM_MIPS {
            return 0; // MIPS64's r_info has its own layout.
        }
        let word = f.word_size();
        let rela = u64::from(elf::DT_RELA);
        let plt_entry = match self.d.get(elf::DT_PLTREL) {
            Some(t) if t == rela => 3 * word,
            _ => 2 * word,
        };
        let tables = [
            (elf::DT_RELA, elf::DT_RELASZ, 3 * word),
            (elf::DT_REL, elf::DT_RELSZ, 2 * word),
            (elf::DT_JMPREL, elf::DT_PLTRELSZ, plt_entry),
        ];
        let mut max = 0;
        for (addr_tag, size_tag, entry) in tables {
            let (Some(vaddr), Some(size)) = (self.d.get(addr_tag), self.d.get(size_tag)) else {
                continue;
            };
            let Some(offset) = self.e.vaddr_to_offset(vaddr, size) else {
                continue;
            };
            let Ok(bytes) = read_range(self.src, offset, size, "relocations") else {
                continue;
            };
            for r in bytes.chunks_exact(entry as usize) {
                let info = f.word(&r[word as usize..]);
                let sym = if is64 { info >> 32 } else { info >> 8 };
                max = max.max(sym + 1);
            }
        }
        max
    }

    /// `.gnu.version`: one entry for each of the `symbols` dynamic symbols.
    fn versym(&self, symbols: Option<usize>) -> Result<Option<(Region, Vec<u16>)>> {
        let (Some(vaddr), Some(n)) = (self.d.get(elf::DT_VERSYM), symbols) else {
            return Ok(None);
        };
        let size = 2 * n as u64;
        let region = self.region(elf::DT_VERSYM, vaddr, size)?;
        if !self.symbols {
            return Ok(Some((region, Vec::new())));
        }
        let bytes = read_range(self.src, region.offset, size, "symbol version table")?;
        let f = self.e.format;
        Ok(Some((
            region,
            bytes.chunks_exact(2).map(|c| f.u16(c)).collect(),
        )))
    }
}

/// Whether a section we do not understand links to `.dynstr`: it may hold offsets into it.
fn unknown_dynstr_users(e: &Elf) -> bool {
    let Some(strsec) = e.strtab.as_ref().and_then(|s| s.section) else {
        return false;
    };
    let known = [
        elf::SHT_DYNSYM,
        elf::SHT_DYNAMIC,
        elf::SHT_GNU_VERNEED,
        elf::SHT_GNU_VERDEF,
    ];
    e.sections.iter().any(|s| {
        s.shdr.sh_link as usize == strsec && s.index != 0 && !known.contains(&s.shdr.sh_type)
    })
}

/// Walks a GNU hash table to find its size and the number of dynamic symbols it implies.
fn walk_gnu_hash<S: Source + ?Sized>(src: &S, e: &Elf, r: Region) -> Result<(u64, u64)> {
    let f = e.format;
    let head = read_range(src, r.offset, 16, "DT_GNU_HASH header")?;
    let nbuckets = u64::from(f.u32(&head[0..]));
    let symoffset = u64::from(f.u32(&head[4..]));
    let bloom_size = u64::from(f.u32(&head[8..]));
    // No linker writes a table without buckets, but `strip --remove-section=.gnu.hash` leaves
    // DT_GNU_HASH pointing at whatever follows, which can read so. Such a table has no chains:
    // it implies only the symbols below `symoffset`. Edits that rebuild or search it refuse it
    // (plan/symbols.rs); the others (the interpreter, the run path) need no lookup through it.
    if nbuckets == 0 {
        let size = bloom_size
            .checked_mul(f.word_size())
            .and_then(|b| b.checked_add(16))
            .ok_or_else(|| Error::malformed(r.offset, "DT_GNU_HASH sizes overflow"))?;
        return Ok((size, symoffset));
    }
    let fixed = bloom_size
        .checked_mul(f.word_size())
        .and_then(|b| b.checked_add(16))
        .and_then(|b| b.checked_add(nbuckets.checked_mul(4)?))
        .ok_or_else(|| Error::malformed(r.offset, "DT_GNU_HASH sizes overflow"))?;
    // The table may run on into the tail of its segment's last page: the loader maps it too.
    let seg_end = e
        .mapped_loads()
        .find(|(p, tail)| r.vaddr >= p.p_vaddr && r.vaddr - p.p_vaddr + 16 <= p.p_filesz + tail)
        .map(|(p, tail)| p.p_offset + p.p_filesz + tail)
        .unwrap_or(r.offset);
    if r.offset + fixed > seg_end {
        return Err(Error::malformed(
            r.offset,
            "DT_GNU_HASH: hash table header out of range: the table extends past what its segment maps from the file",
        ));
    }
    let buckets = read_range(
        src,
        r.offset + 16 + bloom_size * f.word_size(),
        nbuckets * 4,
        "DT_GNU_HASH buckets",
    )?;
    let max_bucket = buckets
        .chunks_exact(4)
        .map(|c| u64::from(f.u32(c)))
        .max()
        .unwrap_or(0);
    if max_bucket == 0 || max_bucket < symoffset {
        return Ok((fixed, symoffset));
    }
    let chains = r.offset + fixed;
    let mut idx = max_bucket;
    loop {
        let at = chains + (idx - symoffset) * 4;
        if at + 4 > seg_end {
            return Err(Error::malformed(
                r.offset,
                "DT_GNU_HASH chain runs past what its segment maps from the file",
            ));
        }
        let word = read_range(src, at, 4, "DT_GNU_HASH chain")?;
        if f.u32(&word) & 1 == 1 {
            break;
        }
        idx += 1;
    }
    Ok((fixed + (idx + 1 - symoffset) * 4, idx + 1))
}

/// How many bytes of the dynamic symbol table are read at a time when its bytes are not kept.
const SYMBOL_PIECE: u64 = 256 << 10;

/// Most records a version chain may have: far more than any real file, and a bound for cycles.
const MAX_VERSION_RECORDS: u64 = 1 << 16;

fn read_verneed<S: Source + ?Sized>(
    src: &S,
    e: &Elf,
    vaddr: u64,
) -> Result<(Region, Vec<VerneedEntry>)> {
    let f: Format = e.format;
    let Some(start) = e.vaddr_to_offset(vaddr, 16) else {
        return Err(Error::malformed(
            0,
            format!("DT_VERNEED {vaddr:#x} is not in the bytes any PT_LOAD maps from the file"),
        ));
    };
    let mut out = Vec::new();
    let mut end = start;
    let mut at = start;
    loop {
        if out.len() as u64 >= MAX_VERSION_RECORDS {
            return Err(Error::malformed(start, "version need chain does not end"));
        }
        let b = read_range(src, at, 16, "version need record")?;
        let (version, cnt, file, aux_off, next) = (
            f.u16(&b),
            f.u16(&b[2..]),
            f.u32(&b[4..]),
            f.u32(&b[8..]),
            f.u32(&b[12..]),
        );
        end = end.max(at + 16);
        let mut aux = Vec::new();
        let mut a = at + u64::from(aux_off);
        for _ in 0..cnt {
            let x = read_range(src, a, 16, "version need auxiliary record")?;
            aux.push(Vernaux {
                offset: a,
                hash: f.u32(&x),
                flags: f.u16(&x[4..]),
                other: f.u16(&x[6..]),
                name: f.u32(&x[8..]),
            });
            end = end.max(a + 16);
            let nx = f.u32(&x[12..]);
            if nx == 0 {
                break;
            }
            a += u64::from(nx);
        }
        out.push(VerneedEntry {
            offset: at,
            version,
            file,
            aux,
        });
        if next == 0 {
            break;
        }
        at += u64::from(next);
    }
    let size = end - start;
    if e.vaddr_to_offset(vaddr, size) != Some(start) {
        return Err(Error::malformed(
            start,
            "version need records extend past what their segment maps from the file",
        ));
    }
    check_verneed_names(e, &out)?;
    Ok((
        Region {
            offset: start,
            vaddr,
            size,
        },
        out,
    ))
}

/// Every file and version name of the version need records must start inside the dynamic
/// string table: a replaced or removed needed library is matched, and renamed, by them.
fn check_verneed_names(e: &Elf, records: &[VerneedEntry]) -> Result<()> {
    let Some(strtab) = &e.strtab else {
        return Ok(());
    };
    let len = strtab.size;
    for r in records {
        let names = std::iter::once((r.offset + 4, "vn_file", r.file))
            .chain(r.aux.iter().map(|a| (a.offset + 8, "vna_name", a.name)));
        for (at, field, value) in names {
            if u64::from(value) >= len {
                return Err(Error::malformed(
                    at,
                    format!(
                        "version need record {field}: string table index out of bounds ({value:#x}, {len}-byte string table)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn read_verdef<S: Source + ?Sized>(src: &S, e: &Elf, vaddr: u64) -> Result<(Region, Vec<u32>)> {
    let f = e.format;
    let Some(start) = e.vaddr_to_offset(vaddr, 20) else {
        return Err(Error::malformed(
            0,
            format!("DT_VERDEF {vaddr:#x} is not in the bytes any PT_LOAD maps from the file"),
        ));
    };
    let mut names = Vec::new();
    let mut end = start;
    let mut at = start;
    for _ in 0..MAX_VERSION_RECORDS {
        let b = read_range(src, at, 20, "version definition record")?;
        let (cnt, aux_off, next) = (f.u16(&b[6..]), f.u32(&b[12..]), f.u32(&b[16..]));
        end = end.max(at + 20);
        let mut a = at + u64::from(aux_off);
        for _ in 0..cnt {
            let x = read_range(src, a, 8, "version definition auxiliary record")?;
            names.push(f.u32(&x));
            end = end.max(a + 8);
            let nx = f.u32(&x[4..]);
            if nx == 0 {
                break;
            }
            a += u64::from(nx);
        }
        if next == 0 {
            let size = end - start;
            return Ok((
                Region {
                    offset: start,
                    vaddr,
                    size,
                },
                names,
            ));
        }
        at += u64::from(next);
    }
    Err(Error::malformed(
        start,
        "version definition chain does not end",
    ))
}
