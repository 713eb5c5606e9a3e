//! The edit in place: everything fits where it is, so each change is a small write into the
//! existing structures — the interpreter in its bytes, strings over unreferenced bytes of the
//! string table, the version records and the dynamic array in their slots. The writes that change
//! live data come in an order that leaves a valid file after every one of them.

use super::builder::Builder;
use super::contents::{
    diff_span, encode_dynamic, overlaps, pad, strtab_or_empty, NewStrings, NewVersions,
    TableAddresses,
};
use super::{Data, Layout, Phase, Plan};
use crate::error::Result;
use crate::format::Shdr;

impl Builder<'_, '_> {
    /// Everything fits: small writes into the existing structures.
    pub(super) fn in_place(
        mut self,
        strings: NewStrings,
        versions: NewVersions,
        entries_changed: bool,
    ) -> Result<Plan> {
        let elf = self.planner.elf;
        let format = self.planner.format;
        let tables = self.planner.tables;
        let strtab = strtab_or_empty(elf);
        // Live data changes in this order: every prefix of it is a valid file.
        if let (Some(new), Some(interp)) = (self.interp.clone(), elf.interp.as_ref()) {
            let mut bytes = new;
            bytes.resize(interp.capacity as usize, 0);
            self.push_bytes(interp.offset, bytes, Phase::Commit, "interpreter path");
        }
        for (at, bytes) in strings.alloc.writes.clone() {
            let live = overlaps(&strings.covered_before, at, at + bytes.len() as u64);
            let phase = if live { Phase::Commit } else { Phase::Stage };
            self.push_bytes(strtab.offset + at, bytes, phase, "string");
        }
        if let Some((region, _)) = tables.verneed.as_ref() {
            if !self.verneed_edits.removals.is_empty() {
                let bytes = pad(versions.verneed.clone().unwrap_or_default(), region.size);
                self.push_bytes(region.offset, bytes, Phase::Commit, "version needs");
            } else {
                // Renames only: the file name fields, nothing else.
                for r in &strings.record_requests {
                    let record = &versions.entries[r.record];
                    self.push_bytes(
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
                self.push_bytes(
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
                verneed: None,
                versym: None,
                dynamic: dynamic.vaddr,
            };
            let final_dynamic = self.final_dynamic(&strings, &at, &|x| x);
            let new = encode_dynamic(format, &final_dynamic, dynamic.capacity());
            let old = encode_dynamic(format, &dynamic.slots, dynamic.capacity());
            if let Some((lo, hi)) = diff_span(&old, &new) {
                self.push_bytes(
                    dynamic.offset + lo as u64,
                    new[lo..hi].to_vec(),
                    Phase::Commit,
                    "dynamic entries",
                );
            }
        }
        for (start, end) in strings.alloc.garbage.clone() {
            self.push(
                strtab.offset + start,
                Data::Zero,
                end - start,
                Phase::Cleanup,
                "unreferenced strings",
            );
        }
        let mut shdrs: Vec<Shdr> = elf.sections.iter().map(|x| x.shdr).collect();
        self.note_in_place(&mut shdrs)?;
        self.version_section_counts(&mut shdrs, &versions);
        self.section_header_writes(&shdrs);
        self.finish(Layout::InPlace, elf.file_len, Vec::new())
    }
}
