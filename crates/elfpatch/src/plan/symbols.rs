//! The new contents of the symbol table and the hash tables when dynamic symbols are renamed.
//!
//! Symbols keep their indices: relocations, `.gnu.version` and MIPS's GOT mapping refer to
//! symbols by index, and renumbering them (as patchelf does) means rewriting every one of those
//! consistently. Only `st_name` changes; the hash tables are rebuilt for the order as it is
//! ([`crate::hash`] says how a GNU table can be valid without sorting), with the same bucket
//! counts and bloom size, so each table keeps its size. The three tables are then written, with
//! the grown string table, into the appended segment, and the dynamic array switched to them in
//! one write.

use object::elf;

use super::input::Input;
use super::placed::Placed;
use crate::error::{Error, Result};
use crate::hash::{self, GnuParams};

/// `DT_MIPS_XHASH`: MIPS's GNU hash variant with a translation table (not in `object` 0.37).
const DT_MIPS_XHASH: u64 = 0x7000_0036;

/// The rewritten tables, each the size of the one it replaces.
pub(super) struct SymbolTables {
    /// `.dynsym` with the new name offsets.
    pub(super) dynsym: Vec<u8>,
    /// `DT_HASH`, rebuilt, when the file has one.
    pub(super) hash: Option<Vec<u8>>,
    /// `DT_GNU_HASH`, rebuilt, when the file has one.
    pub(super) gnu_hash: Option<Vec<u8>>,
}

/// The tables after the renames, or `None` when no symbol is renamed.
pub(super) fn symbol_tables(input: &Input<'_>, placed: &Placed) -> Result<Option<SymbolTables>> {
    let strings = &placed.strings;
    if placed.symbols.renames.is_empty() {
        return Ok(None);
    }
    let elf = input.elf;
    let tables = input.tables;
    let format = input.format;
    let Some(dynsym) = tables.dynsym.as_ref() else {
        return Err(Error::unsupported(
            "renaming symbols needs the dynamic symbol table's extent",
        ));
    };
    if dynsym.bytes.len() != dynsym.names.len() * format.sym_size() {
        return Err(Error::refused(
            "renaming symbols needs the symbol table's bytes, which these tables were read without",
        ));
    }
    let dynamic = elf.dynamic.as_ref();
    let has = |tag: u64| dynamic.is_some_and(|d| d.entries().iter().any(|x| x.tag == tag));
    if has(DT_MIPS_XHASH) {
        return Err(Error::unsupported(
            "renaming symbols of a file with DT_MIPS_XHASH (its hash table is not rebuilt)",
        ));
    }
    if has(u64::from(elf::DT_SYMTAB_SHNDX)) {
        return Err(Error::unsupported(
            "renaming symbols of a file with DT_SYMTAB_SHNDX",
        ));
    }
    let mut bytes = dynsym.bytes.clone();
    let mut names: Vec<Vec<u8>> = dynsym
        .names
        .iter()
        .map(|&n| input.string(u64::from(n)).to_vec())
        .collect();
    for &(i, request) in &strings.symbol_requests {
        let offset = strings.alloc.placements[request].offset();
        let at = i * format.sym_size();
        // st_name is the first field of both symbol layouts.
        bytes[at..at + 4].copy_from_slice(&format.put_u32(offset as u32));
    }
    for (i, name) in &placed.symbols.renames {
        names[*i].clone_from(name);
    }
    Ok(Some(SymbolTables {
        dynsym: bytes,
        hash: rebuilt_sysv_hash(input, &names)?,
        gnu_hash: rebuilt_gnu_hash(input, &names)?,
    }))
}

fn rebuilt_sysv_hash(input: &Input<'_>, names: &[Vec<u8>]) -> Result<Option<Vec<u8>>> {
    let tables = input.tables;
    let format = input.format;
    let (Some(info), Some(region)) = (tables.hash_info, tables.hash) else {
        return Ok(None);
    };
    let (Ok(nbucket), Ok(nchain)) = (u32::try_from(info.nbucket), usize::try_from(info.nchain))
    else {
        return Err(Error::malformed(region.offset, "DT_HASH sizes overflow"));
    };
    if nbucket == 0 || nchain > names.len() {
        return Err(Error::unsupported(
            "DT_HASH has no buckets or covers more symbols than there are",
        ));
    }
    // Local symbols stay out of the lists, as the linkers leave them (the loader's lookup
    // skips them); listing them makes eu-elflint report each as missing from .gnu.hash.
    let local: Vec<bool> = input.tables.dynsym.as_ref().map_or_else(Vec::new, |d| {
        d.bytes
            .chunks_exact(format.sym_size())
            .map(|b| format.decode_sym(b).st_info >> 4 == elf::STB_LOCAL)
            .collect()
    });
    let hashes: Vec<Option<u32>> = names[..nchain]
        .iter()
        .enumerate()
        .map(|(i, n)| (!local.get(i).copied().unwrap_or(false)).then(|| hash::sysv_hash(n)))
        .collect();
    let table = hash::build_sysv(nbucket, &hashes);
    let words = [u64::from(nbucket), nchain as u64]
        .into_iter()
        .chain(table.buckets.iter().map(|&b| u64::from(b)))
        .chain(table.chains.iter().map(|&c| u64::from(c)));
    let out: Vec<u8> = if info.word == 8 {
        words.flat_map(|w| put_u64(format, w)).collect()
    } else {
        words.flat_map(|w| format.put_u32(w as u32)).collect()
    };
    check_size(out, region.size, region.offset, "DT_HASH").map(Some)
}

fn rebuilt_gnu_hash(input: &Input<'_>, names: &[Vec<u8>]) -> Result<Option<Vec<u8>>> {
    let tables = input.tables;
    let format = input.format;
    let (Some(info), Some(region)) = (tables.gnu_hash_info, tables.gnu_hash) else {
        return Ok(None);
    };
    let params: GnuParams = info.params;
    let (start, end) = (params.symoffset as usize, info.symbols as usize);
    if params.nbuckets == 0 || end > names.len() {
        return Err(Error::unsupported(
            "DT_GNU_HASH: hash table header out of range: no buckets, or more symbols than there are",
        ));
    }
    let hashes: Vec<u32> = names
        .get(start..end)
        .unwrap_or(&[])
        .iter()
        .map(|n| hash::gnu_hash(n))
        .collect();
    let bits = 8 * format.word_size() as u32;
    let table = hash::build_gnu(params, bits, &hashes);
    let mut out = Vec::new();
    for w in [
        params.nbuckets,
        params.symoffset,
        params.bloom_size,
        params.bloom_shift,
    ] {
        out.extend_from_slice(&format.put_u32(w));
    }
    for &w in &table.bloom {
        out.extend_from_slice(&format.put_word(w));
    }
    for &w in table.buckets.iter().chain(&table.chains) {
        out.extend_from_slice(&format.put_u32(w));
    }
    check_size(out, region.size, region.offset, "DT_GNU_HASH").map(Some)
}

/// A 64-bit word in the file's byte order, whatever its class (64-bit s390's hash entries).
fn put_u64(format: crate::format::Format, v: u64) -> Vec<u8> {
    match format.endian {
        crate::format::Endian::Little => v.to_le_bytes().to_vec(),
        crate::format::Endian::Big => v.to_be_bytes().to_vec(),
    }
}

/// The rebuilt table must be exactly as large as the old one (same parameters, same symbols).
fn check_size(out: Vec<u8>, size: u64, offset: u64, what: &str) -> Result<Vec<u8>> {
    if out.len() as u64 != size {
        return Err(Error::malformed(
            offset,
            format!(
                "{what}: the rebuilt table has {} bytes, the old one {size}",
                out.len()
            ),
        ));
    }
    Ok(out)
}
