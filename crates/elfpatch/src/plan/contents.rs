//! The new contents, before anything is placed in the file: where each new string goes in the
//! string table, the version records after renames and removals, and the final dynamic array
//! once the addresses of the tables it points to are known. Shared by both ways of writing.
//!
//! Functions of the input and the desired entries: the placement (`placed.rs`) and the two
//! strategies call them.

use object::elf;

use super::edits::{Entry, SymbolEdits, Value, VerneedEdits};
use super::input::Input;
use super::strings::{self, Allocation, Range, References, Request};
use super::tags::{is_movable_pointer_tag, is_relocation_tag};
use crate::error::Result;
use crate::format::{Dyn, Format, Shdr};
use crate::read::{is_string_tag, Elf, StrContents, StrTab};
use crate::refs::{Region, VerneedEntry};

/// Where every new string goes.
pub(super) struct NewStrings {
    pub(super) alloc: Allocation,
    /// For each dynamic entry with a new value: its request index.
    pub(super) entry_requests: Vec<Option<usize>>,
    /// For each renamed version need record: the record's index and its request index.
    pub(super) record_requests: Vec<RecordRequest>,
    /// For each renamed symbol: its index and its request index.
    pub(super) symbol_requests: Vec<(usize, usize)>,
    /// The bytes of the table that references covered before the edit (sorted, merged).
    pub(super) covered_before: Vec<Range>,
    /// Whether some placement overwrites bytes referenced before the edit.
    pub(super) live_writes: bool,
    /// Size of the table after the edit.
    pub(super) new_size: u64,
}

/// The new file name of a version need record: which record, which string request.
#[derive(Clone, Copy)]
pub(super) struct RecordRequest {
    pub(super) record: usize,
    pub(super) request: usize,
}

/// The version tables after the edit.
pub(super) struct NewVersions {
    /// Every record as before, renamed ones with their new file name offsets.
    pub(super) entries: Vec<VerneedEntry>,
    /// Canonical serialization of the remaining records, when anything changed.
    pub(super) verneed: Option<Vec<u8>>,
    /// `.gnu.version` after removals, when anything changed.
    pub(super) versym: Option<Vec<u16>>,
    /// How many records remain.
    pub(super) kept: usize,
}

/// Where the tables the dynamic array points to end up.
pub(super) struct TableAddresses {
    pub(super) strtab: u64,
    /// The symbol table and hash tables, when rewritten (renames).
    pub(super) dynsym: Option<u64>,
    pub(super) hash: Option<u64>,
    pub(super) gnu_hash: Option<u64>,
    pub(super) verneed: Option<u64>,
    pub(super) versym: Option<u64>,
    pub(super) dynamic: u64,
}

/// The string table, or an empty one at 0 for a file without.
pub(super) fn strtab_or_empty(elf: &Elf) -> &StrTab {
    static EMPTY: StrTab = StrTab {
        offset: 0,
        vaddr: 0,
        size: 0,
        contents: StrContents::Whole(Vec::new()),
        section: None,
    };
    elf.strtab.as_ref().unwrap_or(&EMPTY)
}

/// Places the new strings of `entries` and of the version need records `edits` renames.
/// With `own_spots`, a new string may go over the one it replaces (one write switches it);
/// without, only over bytes nothing used before.
pub(super) fn place_strings(
    input: &Input<'_>,
    entries: &[Entry],
    edits: &VerneedEdits,
    records: &[VerneedEntry],
    symbols: &SymbolEdits,
    own_spots: bool,
) -> Result<NewStrings> {
    let elf = input.elf;
    let tables = input.tables;
    let mut requests: Vec<Request> = Vec::new();
    let mut request_of = |bytes: &[u8], replaces: Option<u64>| -> usize {
        if let Some(i) = requests.iter().position(|r| r.bytes == bytes) {
            return i;
        }
        requests.push(Request {
            bytes: bytes.to_vec(),
            replaces: replaces.filter(|_| own_spots),
        });
        requests.len() - 1
    };
    let entry_requests: Vec<Option<usize>> = entries
        .iter()
        .map(|x| match &x.val {
            Value::New(s) => {
                let replaces = x
                    .original
                    .filter(|&i| is_string_tag(input.original_tag(i)))
                    .map(|i| input.original_value(i));
                Some(request_of(s, replaces))
            }
            _ => None,
        })
        .collect();
    let record_requests: Vec<RecordRequest> = edits
        .renames
        .iter()
        .map(|r| RecordRequest {
            record: r.record,
            request: request_of(&r.name, Some(u64::from(records[r.record].file))),
        })
        .collect();
    let symbol_requests: Vec<(usize, usize)> = symbols
        .renames
        .iter()
        .map(|(i, name)| (*i, request_of(name, None)))
        .collect();

    let strtab = strtab_or_empty(elf);
    // A renamed symbol's old name is no longer its reference (other referrers keep theirs).
    let renamed = |i: usize| {
        symbols
            .renames
            .binary_search_by_key(&i, |(j, _)| *j)
            .is_ok()
    };
    let kept = |i: usize| !edits.removals.contains(&i);
    let file_renamed = |i: usize| edits.renames.iter().any(|r| r.record == i);
    // What stays referenced: the symbols' names, the version definitions', the kept version
    // need records' (their file names unless renamed).
    let names = tables.dynsym.iter().flat_map(|s| {
        s.names
            .iter()
            .enumerate()
            .filter(move |(i, _)| !renamed(*i))
            .map(|(_, &n)| u64::from(n))
    });
    let definitions = tables
        .verdef
        .iter()
        .flat_map(|(_, v)| v.iter().map(|&n| u64::from(n)));
    let needs = records
        .iter()
        .enumerate()
        .filter(|(i, _)| kept(*i))
        .flat_map(|(i, r)| {
            let file = (!file_renamed(i)).then_some(u64::from(r.file));
            file.into_iter()
                .chain(r.aux.iter().map(|a| u64::from(a.name)))
        });
    // Only before: the dynamic array's strings, renamed symbols' names, what removed and
    // renamed version need records named.
    let mut before: Vec<u64> = elf
        .dynamic
        .iter()
        .flat_map(|d| {
            d.entries()
                .iter()
                .filter(|x| is_string_tag(x.tag))
                .map(|x| x.val)
        })
        .collect();
    before.extend(
        symbols
            .renames
            .iter()
            .filter_map(|(i, _)| tables.dynsym.as_ref()?.names.get(*i))
            .map(|&n| u64::from(n)),
    );
    for (i, record) in records.iter().enumerate() {
        if !kept(i) {
            before.push(u64::from(record.file));
            before.extend(record.aux.iter().map(|a| u64::from(a.name)));
        } else if file_renamed(i) {
            before.push(u64::from(record.file));
        }
    }
    // Only after: the entries that keep an old string.
    let after: Vec<u64> = entries
        .iter()
        .filter_map(|x| match x.val {
            Value::Old(offset) => Some(offset),
            _ => None,
        })
        .collect();
    let refs = References {
        common: names.chain(definitions).chain(needs),
        before,
        after,
    };
    let alloc = strings::allocate_in(input.dynstr, refs, &requests, tables.exact)?;
    let covered_before = alloc.covered_before.clone();
    let live_writes = alloc
        .writes
        .iter()
        .any(|(at, bytes)| overlaps(&covered_before, *at, *at + bytes.len() as u64));
    let new_size = strtab.size + alloc.appended.len() as u64;
    Ok(NewStrings {
        alloc,
        entry_requests,
        record_requests,
        symbol_requests,
        covered_before,
        live_writes,
        new_size,
    })
}

/// The version records after the renames and removals of `edits`.
pub(super) fn new_versions(
    input: &Input<'_>,
    edits: &VerneedEdits,
    mut entries: Vec<VerneedEntry>,
    strings: &NewStrings,
    symbols: &SymbolEdits,
) -> NewVersions {
    let gone: Vec<u16> = edits
        .removals
        .iter()
        .flat_map(|&i| entries[i].aux.iter().map(|a| a.other & 0x7fff))
        .collect();
    let cleared = &symbols.cleared;
    let versym = if gone.is_empty() && cleared.is_empty() {
        None
    } else {
        input.tables.versym.as_ref().and_then(|(_, old)| {
            let mut new: Vec<u16> = old
                .iter()
                .map(|&v| if gone.contains(&(v & 0x7fff)) { 1 } else { v })
                .collect();
            // patchelf writes VER_NDX_GLOBAL, hidden bit included.
            for &i in cleared {
                if let Some(v) = new.get_mut(i) {
                    *v = 1;
                }
            }
            (new != *old).then_some(new)
        })
    };
    for r in &strings.record_requests {
        entries[r.record].file = strings.alloc.placements[r.request].offset() as u32;
    }
    let kept: Vec<VerneedEntry> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| !edits.removals.contains(i))
        .map(|(_, n)| n.clone())
        .collect();
    let verneed = (!edits.is_empty()).then(|| serialize_verneed(input.format, &kept));
    NewVersions {
        kept: kept.len(),
        entries,
        verneed,
        versym,
    }
}

/// The final dynamic entries: string values resolved, table pointers set, addresses that
/// moved with a block relocated, and `DT_MIPS_RLD_MAP_REL` kept pointing at its target.
pub(super) fn final_dynamic(
    input: &Input<'_>,
    entries: &[Entry],
    strings: &NewStrings,
    at: &TableAddresses,
    relocate: &dyn Fn(u64) -> u64,
) -> Vec<Dyn> {
    let out: Vec<(Dyn, Option<usize>)> = entries
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let val = match &x.val {
                Value::Raw(v) | Value::Old(v) => *v,
                Value::New(_) => {
                    let request = strings.entry_requests[i].expect("new value has a request");
                    strings.alloc.placements[request].offset()
                }
            };
            (Dyn { tag: x.tag, val }, x.original)
        })
        .collect();
    place_dynamic(input, out, strings.new_size, at, relocate)
}

/// The dynamic array as it was, its pointers following what moved: what a growing edit
/// switches to first, before the new strings exist (`appended/tail.rs`). The string table
/// stays where it is, with its old size.
pub(super) fn interim_dynamic(
    input: &Input<'_>,
    at: &TableAddresses,
    relocate: &dyn Fn(u64) -> u64,
) -> Vec<Dyn> {
    let Some(dynamic) = &input.elf.dynamic else {
        return Vec::new();
    };
    let strsz = strtab_or_empty(input.elf).size;
    let old: Vec<(Dyn, Option<usize>)> = dynamic
        .entries()
        .iter()
        .enumerate()
        .map(|(i, x)| (*x, Some(i)))
        .collect();
    place_dynamic(input, old, strsz, at, relocate)
}

/// Entries (each with its index in the original array) placed at `at.dynamic`: table
/// pointers set from `at`, addresses that moved with a block relocated, `DT_STRSZ` set to
/// `strsz`, and `DT_MIPS_RLD_MAP_REL` kept pointing at its target.
fn place_dynamic(
    input: &Input<'_>,
    entries: Vec<(Dyn, Option<usize>)>,
    strsz: u64,
    at: &TableAddresses,
    relocate: &dyn Fn(u64) -> u64,
) -> Vec<Dyn> {
    let format = input.format;
    let mut out: Vec<Dyn> = entries.iter().map(|(x, _)| *x).collect();
    for x in out.iter_mut() {
        x.val = match x.tag as u32 {
            elf::DT_STRTAB => at.strtab,
            elf::DT_STRSZ => strsz,
            elf::DT_VERNEED => at.verneed.unwrap_or_else(|| relocate(x.val)),
            elf::DT_VERSYM => at.versym.unwrap_or_else(|| relocate(x.val)),
            elf::DT_SYMTAB => at.dynsym.unwrap_or_else(|| relocate(x.val)),
            elf::DT_HASH => at.hash.unwrap_or_else(|| relocate(x.val)),
            elf::DT_GNU_HASH => at.gnu_hash.unwrap_or_else(|| relocate(x.val)),
            _ if is_movable_pointer_tag(x.tag) || is_relocation_tag(x.tag) => relocate(x.val),
            _ => x.val,
        };
    }
    if let Some(dynamic) = &input.elf.dynamic {
        // Relative to its own slot: keep the target where it was.
        for (i, (x, original)) in entries.iter().enumerate() {
            let rld_map_rel = x.tag == u64::from(elf::DT_MIPS_RLD_MAP_REL);
            if let (true, Some(original)) = (rld_map_rel, original) {
                let old_slot = dynamic.vaddr + (original * format.dyn_size()) as u64;
                let new_slot = at.dynamic + (i * format.dyn_size()) as u64;
                out[i].val =
                    out[i].val.wrapping_add(old_slot).wrapping_sub(new_slot) & format.max_addr();
            }
        }
    }
    out
}

/// Whether the file defines symbol versions of its own (`DT_VERDEF`).
pub(super) fn defines_versions(elf: &Elf) -> bool {
    elf.dynamic
        .as_ref()
        .is_some_and(|d| d.get(elf::DT_VERDEF).is_some())
}

/// DT_VERNEEDNUM follows the number of records (and both tags go with the last one). When the
/// last record goes and the file defines no versions either, DT_VERSYM goes too: glibc takes
/// each symbol's version from `l_versions[versym]`, which it allocates only for a file with
/// version records, and a DT_VERSYM without them makes it relocate through a null array
/// (SIGSEGV: seen on /usr/bin/kill once its libc.so.6 was removed, with libc preloaded).
pub(super) fn update_version_entries(
    entries: &mut Vec<Entry>,
    edits: &VerneedEdits,
    versions: &NewVersions,
    elf: &Elf,
) {
    if edits.removals.is_empty() {
        return;
    }
    if versions.kept == 0 {
        let versym = !defines_versions(elf);
        entries.retain(|x| {
            x.tag != u64::from(elf::DT_VERNEED)
                && x.tag != u64::from(elf::DT_VERNEEDNUM)
                && !(versym && x.tag == u64::from(elf::DT_VERSYM))
        });
    } else {
        for x in entries
            .iter_mut()
            .filter(|x| x.tag == u64::from(elf::DT_VERNEEDNUM))
        {
            x.val = Value::Raw(versions.kept as u64);
        }
    }
}

/// The section of type `sh_type` that starts where `region` does.
pub(super) fn section_at(elf: &Elf, sh_type: u32, region: Option<Region>) -> Option<usize> {
    let region = region?;
    elf.sections
        .iter()
        .find(|x| x.shdr.sh_type == sh_type && x.shdr.sh_offset == region.offset)
        .map(|x| x.index)
}

/// Whether any range of `cover` (sorted, merged) overlaps `[start, end)`.
pub(super) fn overlaps(cover: &[Range], start: u64, end: u64) -> bool {
    cover.iter().any(|&(s, e)| s < end && start < e)
}

/// `bytes` padded with zeros to at least `len`.
pub(super) fn pad(mut bytes: Vec<u8>, len: u64) -> Vec<u8> {
    if (bytes.len() as u64) < len {
        bytes.resize(len as usize, 0);
    }
    bytes
}

/// The records in canonical layout: each `Verneed` followed by its `Vernaux` records.
fn serialize_verneed(format: Format, kept: &[VerneedEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, record) in kept.iter().enumerate() {
        let next = if k + 1 == kept.len() {
            0
        } else {
            16 + 16 * record.aux.len() as u32
        };
        out.extend_from_slice(&format.put_u16(record.version));
        out.extend_from_slice(&format.put_u16(record.aux.len() as u16));
        out.extend_from_slice(&format.put_u32(record.file));
        out.extend_from_slice(&format.put_u32(if record.aux.is_empty() { 0 } else { 16 }));
        out.extend_from_slice(&format.put_u32(next));
        for (j, aux) in record.aux.iter().enumerate() {
            out.extend_from_slice(&format.put_u32(aux.hash));
            out.extend_from_slice(&format.put_u16(aux.flags));
            out.extend_from_slice(&format.put_u16(aux.other));
            out.extend_from_slice(&format.put_u32(aux.name));
            let next = if j + 1 == record.aux.len() { 0 } else { 16 };
            out.extend_from_slice(&format.put_u32(next));
        }
    }
    out
}

/// The dynamic array's bytes: `entries`, then `DT_NULL`s up to `capacity` slots.
pub(super) fn encode_dynamic(format: Format, entries: &[Dyn], capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity * format.dyn_size());
    for entry in entries.iter().take(capacity) {
        out.extend_from_slice(&format.encode_dyn(entry));
    }
    while out.len() < capacity * format.dyn_size() {
        out.extend_from_slice(&format.encode_dyn(&Dyn { tag: 0, val: 0 }));
    }
    out
}

/// The smallest `[lo, hi)` outside which `a` and `b` agree (`None` when equal).
pub(super) fn diff_span<T: PartialEq>(a: &[T], b: &[T]) -> Option<(usize, usize)> {
    let n = a.len().min(b.len());
    let lo = (0..n).find(|&i| a[i] != b[i]).unwrap_or(n);
    if lo == n && a.len() == b.len() {
        return None;
    }
    let mut hi = b.len();
    while hi > lo && hi <= a.len() && a[hi - 1] == b[hi - 1] {
        hi -= 1;
    }
    Some((lo, hi))
}

/// `.gnu.version_r`'s `sh_info` is its record count. When no record is left and the file
/// defines no versions, `.gnu.version` describes nothing any more: `DT_VERSYM` goes
/// (`update_version_entries`) and its section header becomes an all-zero `SHT_NULL` entry, as
/// a removed note's does (no index changes).
pub(super) fn version_section_counts(
    input: &Input<'_>,
    shdrs: &mut [Shdr],
    versions: &NewVersions,
) {
    if versions.kept == versions.entries.len() {
        return;
    }
    let region = input.tables.verneed.as_ref().map(|(r, _)| *r);
    if let Some(i) = section_at(input.elf, elf::SHT_GNU_VERNEED, region) {
        shdrs[i].sh_info = versions.kept as u32;
    }
    if versions.kept == 0 && !defines_versions(input.elf) {
        let region = input.tables.versym.as_ref().map(|(r, _)| *r);
        if let Some(i) = section_at(input.elf, elf::SHT_GNU_VERSYM, region) {
            shdrs[i] = Shdr::default();
        }
    }
}
