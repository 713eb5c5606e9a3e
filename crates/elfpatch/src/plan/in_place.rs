//! The edit in place: everything fits where it is, so each change is a small write into the
//! existing structures — the interpreter in its bytes, strings over unreferenced bytes of the
//! string table, the version records and the dynamic array in their slots. The writes that change
//! live data come in an order that leaves a valid file after every one of them.

use object::elf as E;

use super::contents::{
    diff_span, encode_dynamic, final_dynamic, overlaps, pad, strtab_or_empty,
    version_section_counts, TableAddresses,
};
use super::input::Input;
use super::note_edit::note_phdrs;
use super::note_writes::note_in_place;
use super::placed::Placed;
use super::writes::{Writes, ELF_AND_PROGRAM_HEADERS, ELF_HEADER};
use super::{Data, Layout, Phase, Plan};
use crate::error::Result;
use crate::format::{Phdr, Shdr};

/// Everything fits: small writes into the existing structures.
pub(super) fn plan(input: &Input<'_>, placed: &Placed) -> Result<Plan> {
    let (strings, versions) = (&placed.strings, &placed.versions);
    let entries_changed = placed.entries_changed;
    let mut w = Writes::new(input.elf);
    let elf = input.elf;
    let format = input.format;
    let tables = input.tables;
    let strtab = strtab_or_empty(elf);
    // Live data changes in this order: every prefix of it is a valid file.
    if let (Some(new), Some(interp)) = (placed.interp.clone(), elf.interp.as_ref()) {
        let mut bytes = new;
        bytes.resize(interp.capacity as usize, 0);
        w.push_bytes(interp.offset, bytes, Phase::Commit, "interpreter path");
    }
    for (at, bytes) in strings.alloc.writes.clone() {
        let live = overlaps(&strings.covered_before, at, at + bytes.len() as u64);
        let phase = if live { Phase::Commit } else { Phase::Stage };
        w.push_bytes(strtab.offset + at, bytes, phase, "string");
    }
    if let Some((region, _)) = tables.verneed.as_ref() {
        if !placed.verneed_edits.removals.is_empty() {
            let bytes = pad(versions.verneed.clone().unwrap_or_default(), region.size);
            w.push_bytes(region.offset, bytes, Phase::Commit, "version needs");
        } else {
            // Renames only: the file name fields, nothing else.
            for r in &strings.record_requests {
                let record = &versions.entries[r.record];
                w.push_bytes(
                    record.offset + 4,
                    format.put_u32(record.file).to_vec(),
                    Phase::Commit,
                    "version need file name",
                );
            }
        }
    }
    if let (Some(new), Some((region, old))) = (&versions.versym, tables.versym.as_ref()) {
        if let Some((lo, hi)) = diff_span(old, new) {
            let bytes: Vec<u8> = new[lo..hi]
                .iter()
                .flat_map(|&x| format.put_u16(x))
                .collect();
            w.push_bytes(
                region.offset + 2 * lo as u64,
                bytes,
                Phase::Commit,
                "symbol versions",
            );
        }
    }
    if let (Some(dynamic), true) = (elf.dynamic.as_ref(), entries_changed) {
        let at = TableAddresses {
            strtab: strtab.vaddr,
            dynsym: None,
            hash: None,
            gnu_hash: None,
            verneed: None,
            versym: None,
            dynamic: dynamic.vaddr,
        };
        let final_dynamic = final_dynamic(input, &placed.entries, strings, &at, &|x| x);
        let new = encode_dynamic(format, &final_dynamic, dynamic.capacity());
        let old = encode_dynamic(format, &dynamic.slots, dynamic.capacity());
        if let Some((lo, hi)) = diff_span(&old, &new) {
            w.push_bytes(
                dynamic.offset + lo as u64,
                new[lo..hi].to_vec(),
                Phase::Commit,
                "dynamic entries",
            );
        }
    }
    header_writes(input, placed, &mut w);
    for (start, end) in strings.alloc.garbage.clone() {
        w.push(
            strtab.offset + start,
            Data::Zero,
            end - start,
            Phase::Cleanup,
            "unreferenced strings",
        );
    }
    let mut shdrs: Vec<Shdr> = elf.sections.iter().map(|x| x.shdr).collect();
    note_in_place(input, placed, &mut w, &mut shdrs)?;
    version_section_counts(input, &mut shdrs, versions);
    w.section_header_writes(&shdrs);
    w.finish(Layout::InPlace, elf.file_len, Vec::new())
}

/// The header edits, in place: entries the table gains go into the zeros after it first
/// (nothing describes them yet), then one write switches the ELF header and the entries that
/// change (two when the table does not follow the header).
fn header_writes(input: &Input<'_>, placed: &Placed, w: &mut Writes<'_>) {
    let elf = input.elf;
    let format = input.format;
    let table = placed.table.clone();
    let table_start = elf.header.e_phoff;
    let entry = format.phdr_size();
    let encode =
        |phdrs: &[Phdr]| -> Vec<u8> { phdrs.iter().flat_map(|p| format.encode_phdr(p)).collect() };
    let mut phdrs = table.phdrs.clone();
    // The note's program header changes here too, so that one span of writes switches every
    // program header (a separate write of the note's entry would overlap this one).
    note_phdrs(input, &placed.note, &mut phdrs, None);
    let mut header = elf.header.clone();
    header.ident = table.ident;
    if !table.added.is_empty() {
        let old_end = table_start + (elf.phdrs.len() * entry) as u64;
        w.push_bytes(
            old_end,
            encode(&table.added),
            Phase::Stage,
            "new program headers",
        );
        let count = phdrs.len() + table.added.len();
        let size = (count * entry) as u64;
        // As when a PT_LOAD is added: a PT_PHDR describing the table follows its size.
        for p in phdrs
            .iter_mut()
            .filter(|p| p.p_type == E::PT_PHDR && p.p_offset == table_start)
        {
            (p.p_filesz, p.p_memsz) = (size, size);
        }
        header.e_phnum = count as u16;
    }
    let (old_header, new_header) = (
        format.encode_header(&elf.header),
        format.encode_header(&header),
    );
    let (old_table, new_table) = (encode(&elf.phdrs), encode(&phdrs));
    if table_start == old_header.len() as u64 {
        let old = [old_header, old_table].concat();
        let new = [new_header.clone(), new_table].concat();
        if let Some((lo, hi)) = diff_span(&old, &new) {
            let header_len = new_header.len();
            let what = match (lo < header_len, hi > header_len) {
                (true, true) => ELF_AND_PROGRAM_HEADERS,
                (true, false) => ELF_HEADER,
                (false, _) => "program headers",
            };
            w.push_bytes(lo as u64, new[lo..hi].to_vec(), Phase::Commit, what);
        }
        return;
    }
    if let Some((lo, hi)) = diff_span(&old_table, &new_table) {
        w.push_bytes(
            table_start + lo as u64,
            new_table[lo..hi].to_vec(),
            Phase::Commit,
            "program headers",
        );
    }
    if header != elf.header {
        w.push_bytes(0, new_header, Phase::Commit, ELF_HEADER);
    }
}
