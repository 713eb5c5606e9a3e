//! From the desired contents to the writes.
//!
//! Two ways, chosen by whether everything fits where it is:
//! - **in place**: strings over unreferenced bytes of the string table, the dynamic array
//!   rewritten in its slots, the interpreter in its bytes. Each write is small; the ones that
//!   change live data are ordered so that every intermediate file is valid.
//! - **appended** (copy-on-write): everything that changes is written, modified, into the appended
//!   segment — the string table, `.dynamic`, the interpreter, the version tables — and one write of
//!   the program headers switches the file over. Interrupted before that write, the file is the old
//!   one; after it, the new one. Then section headers follow and dead bytes are zeroed.

use object::elf;

use super::edits::{Desired, Entry, Value, VerneedEdits};
use super::layout::{Block, Item, ItemKind, Mode, Room};
use super::strings::{self, Allocation, Range, Request};
use super::tags::{is_fixed_address_tag, is_movable_pointer_tag, is_read_only_table_type};
use super::{
    Data, Layout, Phase, Plan, Planner, SectionMove, SymbolFixup, Write, DT_MIPS_RLD_MAP_REL,
};
use crate::error::{Error, Result};
use crate::format::{Dyn, Format, Phdr, Shdr};
use crate::read::{is_string_tag, StrTab};
use crate::refs::{Region, VerneedEntry};

/// Builds the plan once the desired contents are known.
pub(super) struct Builder<'p, 'a> {
    planner: &'p Planner<'a>,
    entries: Vec<Entry>,
    vn: VerneedEdits,
    interp: Option<Vec<u8>>,
    writes: Vec<Write>,
}

/// Where every new string goes.
struct Strings {
    alloc: Allocation,
    /// For each dynamic entry with a new value: its request index.
    entry_req: Vec<Option<usize>>,
    /// (verneed entry index, request index) for renamed version requirements.
    vn_req: Vec<(usize, usize)>,
    /// Whether some placement overwrites bytes referenced before the edit.
    live_writes: bool,
    /// Size of the table after the edit.
    new_size: u64,
}

/// The version tables after the edit.
struct Versions {
    entries: Vec<VerneedEntry>,
    /// Canonical serialization of the remaining records, when anything changed.
    verneed: Option<Vec<u8>>,
    /// `.gnu.version` after removals, when anything changed.
    versym: Option<Vec<u16>>,
    kept: usize,
}

fn empty_strtab() -> StrTab {
    StrTab {
        offset: 0,
        vaddr: 0,
        bytes: Vec::new(),
        section: None,
    }
}

impl<'p, 'a> Builder<'p, 'a> {
    pub(super) fn new(planner: &'p Planner<'a>, desired: Desired) -> Self {
        Builder {
            planner,
            entries: desired.entries,
            vn: desired.verneed,
            interp: desired.interp,
            writes: Vec::new(),
        }
    }

    fn push(&mut self, offset: u64, data: Data, len: u64, phase: Phase, what: &str) {
        if len > 0 {
            self.writes.push(Write {
                offset,
                len,
                data,
                phase,
                what: what.to_string(),
            });
        }
    }

    fn push_bytes(&mut self, offset: u64, bytes: Vec<u8>, phase: Phase, what: &str) {
        let n = bytes.len() as u64;
        self.push(offset, Data::Bytes(bytes), n, phase, what);
    }

    pub(super) fn build(mut self) -> Result<Plan> {
        let e = self.planner.elf;
        let versions_before: Vec<VerneedEntry> = self
            .planner
            .tables
            .verneed
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let strings = self.strings(&versions_before);
        let versions = self.versions(versions_before, &strings);
        self.update_version_entries(&versions);

        let dyn_entries_change = self.planner.dynamic_changed(&self.entries);
        let capacity = e.dynamic.as_ref().map_or(0, |d| d.capacity());
        let interp_fits = match (&self.interp, &e.interp) {
            (Some(new), Some(old)) => (new.len() as u64) < old.capacity,
            _ => true,
        };
        let fits = !strings.alloc.grows()
            && (!dyn_entries_change || self.entries.len() < capacity)
            && interp_fits;
        if fits {
            self.in_place(strings, versions, dyn_entries_change)
        } else {
            self.appended(strings, versions, dyn_entries_change)
        }
    }

    /// Places the new strings.
    fn strings(&self, verneed: &[VerneedEntry]) -> Strings {
        let e = self.planner.elf;
        let t = self.planner.tables;
        let mut requests: Vec<Request> = Vec::new();
        let mut request_of = |bytes: &[u8], replaces: Option<u64>| -> usize {
            if let Some(i) = requests.iter().position(|r| r.bytes == bytes) {
                return i;
            }
            requests.push(Request {
                bytes: bytes.to_vec(),
                replaces,
            });
            requests.len() - 1
        };
        let entry_req: Vec<Option<usize>> = self
            .entries
            .iter()
            .map(|x| match &x.val {
                Value::New(s) => {
                    let replaces = x
                        .original
                        .filter(|&i| is_string_tag(self.planner.original_tag(i)))
                        .map(|i| self.planner.original_value(i));
                    Some(request_of(s, replaces))
                }
                _ => None,
            })
            .collect();
        let vn_req: Vec<(usize, usize)> = self
            .vn
            .renames
            .iter()
            .map(|r| {
                (
                    r.record,
                    request_of(&r.name, Some(u64::from(verneed[r.record].file))),
                )
            })
            .collect();

        let empty = empty_strtab();
        let st = e.strtab.as_ref().unwrap_or(&empty);
        let before: Vec<u64> = e
            .dynamic
            .iter()
            .flat_map(|d| {
                d.entries()
                    .iter()
                    .filter(|x| is_string_tag(x.tag))
                    .map(|x| x.val)
            })
            .chain(t.string_refs())
            .collect();
        let mut after: Vec<u64> = self
            .entries
            .iter()
            .filter_map(|x| match x.val {
                Value::Old(o) => Some(o),
                _ => None,
            })
            .collect();
        after.extend(
            t.dynsym
                .iter()
                .flat_map(|s| s.names.iter().map(|&n| u64::from(n))),
        );
        for (i, n) in verneed.iter().enumerate() {
            if self.vn.removals.contains(&i) {
                continue;
            }
            if !self.vn.renames.iter().any(|r| r.record == i) {
                after.push(u64::from(n.file));
            }
            after.extend(n.aux.iter().map(|a| u64::from(a.name)));
        }
        after.extend(
            t.verdef
                .iter()
                .flat_map(|(_, v)| v.iter().map(|&n| u64::from(n))),
        );
        let alloc = strings::allocate(&st.bytes, &before, &after, &requests, t.exact);
        let cov_before = strings::coverage(&st.bytes, before.iter().copied());
        let live_writes = alloc
            .writes
            .iter()
            .any(|(o, w)| overlaps(&cov_before, *o, *o + w.len() as u64));
        let new_size = st.bytes.len() as u64 + alloc.appended.len() as u64;
        Strings {
            alloc,
            entry_req,
            vn_req,
            live_writes,
            new_size,
        }
    }

    /// The version records after renames and removals.
    fn versions(&self, mut entries: Vec<VerneedEntry>, s: &Strings) -> Versions {
        let f = self.planner.format;
        let changed = !self.vn.is_empty();
        let gone: Vec<u16> = self
            .vn
            .removals
            .iter()
            .flat_map(|&i| entries[i].aux.iter().map(|a| a.other & 0x7fff))
            .collect();
        let versym = if gone.is_empty() {
            None
        } else {
            self.planner.tables.versym.as_ref().and_then(|(_, old)| {
                let new: Vec<u16> = old
                    .iter()
                    .map(|&v| if gone.contains(&(v & 0x7fff)) { 1 } else { v })
                    .collect();
                (new != *old).then_some(new)
            })
        };
        for (i, r) in &s.vn_req {
            entries[*i].file = s.alloc.placements[*r].offset() as u32;
        }
        let kept: Vec<VerneedEntry> = entries
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.vn.removals.contains(i))
            .map(|(_, n)| n.clone())
            .collect();
        let verneed = changed.then(|| serialize_verneed(f, &kept));
        Versions {
            kept: kept.len(),
            entries,
            verneed,
            versym,
        }
    }

    /// DT_VERNEEDNUM follows the number of records (and both tags go with the last one).
    fn update_version_entries(&mut self, v: &Versions) {
        if self.vn.removals.is_empty() {
            return;
        }
        if v.kept == 0 {
            self.entries.retain(|x| {
                x.tag != u64::from(elf::DT_VERNEED) && x.tag != u64::from(elf::DT_VERNEEDNUM)
            });
        } else {
            for x in self
                .entries
                .iter_mut()
                .filter(|x| x.tag == u64::from(elf::DT_VERNEEDNUM))
            {
                x.val = Value::Raw(v.kept as u64);
            }
        }
    }

    /// The final dynamic entries: string values resolved, table pointers set, addresses that
    /// moved with a block relocated, and `DT_MIPS_RLD_MAP_REL` kept pointing at its target.
    fn final_dynamic(
        &self,
        s: &Strings,
        at: &Addresses,
        relocate: &dyn Fn(u64) -> u64,
    ) -> Vec<Dyn> {
        let f = self.planner.format;
        let d = self.planner.elf.dynamic.as_ref();
        let mut out: Vec<Dyn> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let val = match &x.val {
                    Value::Raw(v) | Value::Old(v) => *v,
                    Value::New(_) => s.alloc.placements
                        [s.entry_req[i].expect("new value has a request")]
                    .offset(),
                };
                Dyn { tag: x.tag, val }
            })
            .collect();
        for x in out.iter_mut() {
            let tag = x.tag as u32;
            x.val = match tag {
                elf::DT_STRTAB => at.strtab,
                elf::DT_STRSZ => s.new_size,
                elf::DT_VERNEED => at.verneed.unwrap_or_else(|| relocate(x.val)),
                elf::DT_VERSYM => at.versym.unwrap_or_else(|| relocate(x.val)),
                _ if is_movable_pointer_tag(x.tag) => relocate(x.val),
                _ => x.val,
            };
        }
        if let Some(d) = d {
            for (i, x) in self.entries.iter().enumerate() {
                if let (true, Some(o)) = (x.tag == u64::from(DT_MIPS_RLD_MAP_REL), x.original) {
                    let old_slot = d.vaddr + (o * f.dyn_size()) as u64;
                    let new_slot = at.dynamic + (i * f.dyn_size()) as u64;
                    out[i].val =
                        out[i].val.wrapping_add(old_slot).wrapping_sub(new_slot) & f.max_addr();
                }
            }
        }
        out
    }

    /// Everything fits: small writes into the existing structures.
    fn in_place(mut self, s: Strings, v: Versions, dyn_entries_change: bool) -> Result<Plan> {
        let e = self.planner.elf;
        let f = self.planner.format;
        let t = self.planner.tables;
        let empty = empty_strtab();
        let st = e.strtab.as_ref().unwrap_or(&empty);
        // Live data changes in this order: every prefix of it is a valid file.
        if let (Some(new), Some(ip)) = (self.interp.clone(), e.interp.as_ref()) {
            let mut b = new;
            b.resize(ip.capacity as usize, 0);
            self.push_bytes(ip.offset, b, Phase::Commit, "interpreter path");
        }
        let cov_before = strings::coverage(
            &st.bytes,
            e.dynamic
                .iter()
                .flat_map(|d| {
                    d.entries()
                        .iter()
                        .filter(|x| is_string_tag(x.tag))
                        .map(|x| x.val)
                })
                .chain(t.string_refs()),
        );
        for (o, w) in s.alloc.writes.clone() {
            let live = overlaps(&cov_before, o, o + w.len() as u64);
            let phase = if live { Phase::Commit } else { Phase::Stage };
            self.push_bytes(st.offset + o, w, phase, "string");
        }
        if let Some((r, _)) = t.verneed.as_ref() {
            if !self.vn.removals.is_empty() {
                let b = pad(v.verneed.clone().unwrap_or_default(), r.size);
                self.push_bytes(r.offset, b, Phase::Commit, "version needs");
            } else {
                // Renames only: the file name fields, nothing else.
                for (i, _) in &s.vn_req {
                    let off = v.entries[*i].offset + 4;
                    self.push_bytes(
                        off,
                        f.put_u32(v.entries[*i].file).to_vec(),
                        Phase::Commit,
                        "version need file name",
                    );
                }
            }
        }
        if let (Some(new), Some((r, old))) = (&v.versym, t.versym.as_ref()) {
            if let Some((lo, hi)) = diff_span(old, new) {
                let bytes: Vec<u8> = new[lo..hi].iter().flat_map(|&x| f.put_u16(x)).collect();
                self.push_bytes(
                    r.offset + 2 * lo as u64,
                    bytes,
                    Phase::Commit,
                    "symbol versions",
                );
            }
        }
        if let (Some(d), true) = (e.dynamic.as_ref(), dyn_entries_change) {
            let at = Addresses {
                strtab: st.vaddr,
                verneed: None,
                versym: None,
                dynamic: d.vaddr,
            };
            let final_dyn = self.final_dynamic(&s, &at, &|x| x);
            let new = encode_dynamic(f, &final_dyn, d.capacity());
            let old = encode_dynamic(f, &d.slots, d.capacity());
            if let Some((lo, hi)) = diff_span(&old, &new) {
                self.push_bytes(
                    d.offset + lo as u64,
                    new[lo..hi].to_vec(),
                    Phase::Commit,
                    "dynamic entries",
                );
            }
        }
        for (a, b) in s.alloc.garbage.clone() {
            self.push(
                st.offset + a,
                Data::Zero,
                b - a,
                Phase::Cleanup,
                "unreferenced strings",
            );
        }
        let mut shdrs: Vec<Shdr> = e.sections.iter().map(|x| x.shdr).collect();
        self.version_section_counts(&mut shdrs, &v);
        self.section_header_writes(&shdrs);
        self.finish(Layout::InPlace, e.file_len, Vec::new())
    }

    /// Something does not fit: copy-on-write into the appended segment, one commit write.
    fn appended(mut self, s: Strings, v: Versions, dyn_entries_change: bool) -> Result<Plan> {
        let e = self.planner.elf;
        let f = self.planner.format;
        let t = self.planner.tables;
        let empty = empty_strtab();
        let st = e.strtab.as_ref().unwrap_or(&empty);
        let (mode, base) = self.planner.choose_layout()?;
        let block = match mode {
            Mode::New(Room::Block(b)) => Some(b),
            _ => None,
        };
        let vn_region = t.verneed.as_ref().map(|(r, _)| *r);
        let vs_region = t.versym.as_ref().map(|(r, _)| *r);

        // What moves. Live data that changes is copied, so that only the commit write touches
        // anything the old file uses.
        let copy_strtab = e.strtab.is_some() && (s.alloc.grows() || s.live_writes);
        let interp_item = self.interp.is_some();
        let verneed_item = v.verneed.is_some() && vn_region.is_some();
        let versym_item = v.versym.is_some() && vs_region.is_some();
        let block_moves_tables =
            block.is_some_and(|b| self.planner.dynamic_refs_in(b.start, b.end));
        let d = e.dynamic.as_ref();
        let move_dynamic = d.is_some()
            && (dyn_entries_change
                || copy_strtab
                || verneed_item
                || versym_item
                || block_moves_tables);
        if move_dynamic {
            self.planner.check_dynamic_editable()?;
        }

        let mut items: Vec<Item> = Vec::new();
        let new_phnum = self.planner.new_phnum(Some(mode));
        if matches!(mode, Mode::New(Room::MoveTable)) {
            items.push(Item::new(
                ItemKind::PhdrTable,
                (new_phnum * f.phdr_size()) as u64,
                f.word_size(),
            ));
        }
        if let Some(b) = block {
            let mut it = Item::new(ItemKind::Block, b.end - b.start, b.align);
            it.congruent_to = e.offset_to_vaddr(b.start, 1);
            items.push(it);
        }
        if copy_strtab {
            items.push(Item::new(ItemKind::StrTab, s.new_size, 1));
        }
        if interp_item {
            let n = self.interp.as_ref().map_or(0, |x| x.len() as u64 + 1);
            items.push(Item::new(ItemKind::Interp, n, 1));
        }
        let verneed_bytes = v
            .verneed
            .clone()
            .map(|b| pad(b, vn_region.map_or(0, |r| r.size)));
        if let (true, Some(b)) = (verneed_item, &verneed_bytes) {
            items.push(Item::new(ItemKind::Verneed, b.len() as u64, 8));
        }
        if let (true, Some(new)) = (versym_item, &v.versym) {
            items.push(Item::new(ItemKind::Versym, 2 * new.len() as u64, 2));
        }
        let capacity = d.map_or(0, |d| d.capacity());
        // Never smaller than before: a `_DYNAMIC` symbol's size (gold sets it) must still fit.
        let new_capacity = (self.entries.len() + 1 + self.planner.opts.dynamic_spare).max(capacity);
        if move_dynamic {
            items.push(Item::new(
                ItemKind::Dynamic,
                (new_capacity * f.dyn_size()) as u64,
                f.word_size(),
            ));
        }
        let seg = self.planner.place(base, &mut items)?;
        let item = |k: ItemKind| items.iter().find(|i| i.kind == k).cloned();

        // Things that moved with the block keep their offsets relative to it.
        let moved = block.zip(item(ItemKind::Block)).map(|(b, it)| BlockMove {
            block: b,
            old_vaddr: e.offset_to_vaddr(b.start, 1).unwrap_or(0),
            new_offset: it.offset,
            new_vaddr: it.vaddr,
        });
        let relocate = |vaddr: u64| moved.map_or(vaddr, |m| m.vaddr(vaddr));
        let in_block = |off: u64| moved.is_some_and(|m| m.contains(off));
        let translate = |off: u64| moved.map_or(off, |m| m.offset(off));

        let at = Addresses {
            strtab: item(ItemKind::StrTab).map_or_else(|| relocate(st.vaddr), |it| it.vaddr),
            verneed: item(ItemKind::Verneed).map(|it| it.vaddr),
            versym: item(ItemKind::Versym).map(|it| it.vaddr),
            dynamic: item(ItemKind::Dynamic)
                .map_or_else(|| d.map_or(0, |d| d.vaddr), |it| it.vaddr),
        };
        let final_dyn = self.final_dynamic(&s, &at, &relocate);

        // Stage: the appended segment.
        if let (Some(b), Some(it)) = (block, item(ItemKind::Block)) {
            self.push(
                it.offset,
                Data::Copy(b.start),
                b.end - b.start,
                Phase::Stage,
                "copy of the sections after the program headers",
            );
            // Bytes of the block that nothing describes (padding, or what an earlier editor left
            // there: patchelf leaves old string tables behind) do not travel: nothing can refer
            // to them at their new address, and old strings must not survive the edit.
            let described = self.planner.described(b.start, b.end);
            for (lo, hi) in strings::subtract(&[(b.start, b.end)], &described) {
                self.push(
                    it.offset + (lo - b.start),
                    Data::Zero,
                    hi - lo,
                    Phase::Stage,
                    "undescribed bytes in the moved block",
                );
            }
            // Stale copies of what moves again on its own: old strings must not linger.
            if copy_strtab && in_block(st.offset) {
                self.push(
                    translate(st.offset),
                    Data::Zero,
                    st.bytes.len() as u64,
                    Phase::Stage,
                    "stale string table in the moved block",
                );
            }
            if let (true, Some(ip)) = (interp_item, e.interp.as_ref()) {
                if in_block(ip.offset) {
                    self.push(
                        translate(ip.offset),
                        Data::Zero,
                        ip.capacity,
                        Phase::Stage,
                        "stale interpreter in the moved block",
                    );
                }
            }
        }
        if !copy_strtab && e.strtab.is_some() {
            // Only unreferenced bytes get strings (no live writes, or the table would be copied).
            for (o, w) in s.alloc.writes.clone() {
                self.push_bytes(translate(st.offset + o), w, Phase::Stage, "string");
            }
            if in_block(st.offset) {
                for (a, b) in s.alloc.garbage.clone() {
                    self.push(
                        translate(st.offset + a),
                        Data::Zero,
                        b - a,
                        Phase::Stage,
                        "unreferenced strings in the moved copy",
                    );
                }
            }
        }
        if let Some(it) = item(ItemKind::StrTab) {
            let mut bytes = st.bytes.clone();
            for (o, w) in &s.alloc.writes {
                bytes[*o as usize..*o as usize + w.len()].copy_from_slice(w);
            }
            for (a, b) in &s.alloc.garbage {
                bytes[*a as usize..*b as usize].fill(0);
            }
            bytes.extend_from_slice(&s.alloc.appended);
            self.push_bytes(it.offset, bytes, Phase::Stage, "dynamic string table");
        }
        if let Some(it) = item(ItemKind::Interp) {
            let mut b = self.interp.clone().unwrap_or_default();
            b.push(0);
            self.push_bytes(it.offset, b, Phase::Stage, "interpreter path");
        }
        if let (Some(it), Some(b)) = (item(ItemKind::Verneed), verneed_bytes) {
            self.push_bytes(it.offset, b, Phase::Stage, "version needs");
        }
        if let (Some(it), Some(new)) = (item(ItemKind::Versym), &v.versym) {
            let bytes: Vec<u8> = new.iter().flat_map(|&x| f.put_u16(x)).collect();
            self.push_bytes(it.offset, bytes, Phase::Stage, "symbol versions");
        }
        if let Some(it) = item(ItemKind::Dynamic) {
            self.push_bytes(
                it.offset,
                encode_dynamic(f, &final_dyn, new_capacity),
                Phase::Stage,
                "dynamic section",
            );
        }

        // The new program headers and file header.
        let mut phdrs = e.phdrs.clone();
        if let Some(m) = moved {
            for p in phdrs.iter_mut() {
                let inside =
                    p.p_filesz > 0 && m.contains(p.p_offset) && p.offset_end() <= m.block.end;
                if p.p_type != elf::PT_LOAD && p.p_type != elf::PT_PHDR && inside {
                    p.p_offset = m.offset(p.p_offset);
                    p.p_vaddr = m.vaddr(p.p_vaddr);
                    p.p_paddr = m.vaddr(p.p_paddr);
                }
            }
        }
        if let (Some(ip), Some(it)) = (e.interp.as_ref(), item(ItemKind::Interp)) {
            let p = &mut phdrs[ip.phdr_index];
            (p.p_offset, p.p_vaddr, p.p_paddr, p.p_filesz, p.p_memsz) =
                (it.offset, it.vaddr, it.vaddr, it.size, it.size);
        }
        if let (Some(d), Some(it)) = (d, item(ItemKind::Dynamic)) {
            let p = &mut phdrs[d.phdr_index];
            let shift = p.p_paddr.wrapping_sub(p.p_vaddr);
            (p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz) =
                (it.offset, it.vaddr, it.size, it.size);
            p.p_paddr = it.vaddr.wrapping_add(shift);
        }
        // Writable when it holds .dynamic, as the segment it came from was (the loader writes
        // DT_DEBUG there). MIPS keeps .dynamic read-only (its loader writes through
        // DT_MIPS_RLD_MAP instead), and so does the new segment when PT_DYNAMIC says so, even
        // if an earlier editor put .dynamic into a writable segment.
        let mips_read_only_dynamic = e.machine() == elf::EM_MIPS
            && d.is_some_and(|d| e.phdrs[d.phdr_index].p_flags & elf::PF_W == 0);
        let writable = item(ItemKind::Dynamic).is_some()
            && !mips_read_only_dynamic
            && d.is_some_and(|d| {
                e.loads()
                    .any(|l| l.contains_offset(d.offset, 1) && l.p_flags & elf::PF_W != 0)
            });
        let mut header = e.header.clone();
        if e.section_headers_unusable() {
            // A table nobody could read: once data is appended where it may claim to be, tools
            // would read that data as section headers. The file has none.
            (header.e_shoff, header.e_shnum, header.e_shstrndx) = (0, 0, 0);
        }
        let table_moved = matches!(mode, Mode::New(Room::MoveTable));
        match mode {
            Mode::Extend(i) => {
                let p = &mut phdrs[i];
                p.p_filesz = seg.end_offset - p.p_offset;
                p.p_memsz = p.p_filesz;
                if writable {
                    p.p_flags |= elf::PF_W;
                }
            }
            Mode::New(room) => {
                let size = seg.end_offset - seg.offset;
                let new_load = Phdr {
                    p_type: elf::PT_LOAD,
                    p_flags: elf::PF_R | if writable { elf::PF_W } else { 0 },
                    p_offset: seg.offset,
                    p_vaddr: seg.vaddr,
                    p_paddr: seg.vaddr,
                    p_filesz: size,
                    p_memsz: size,
                    p_align: seg.align,
                };
                if let Room::NullSlot(i) = room {
                    phdrs.remove(i);
                }
                let at = phdrs
                    .iter()
                    .rposition(|p| p.p_type == elf::PT_LOAD)
                    .map_or(phdrs.len(), |i| i + 1);
                phdrs.insert(at, new_load);
                let table_size = (phdrs.len() * f.phdr_size()) as u64;
                let table = item(ItemKind::PhdrTable);
                for p in phdrs.iter_mut().filter(|p| p.p_type == elf::PT_PHDR) {
                    if let Some(it) = &table {
                        (p.p_offset, p.p_vaddr, p.p_paddr) = (it.offset, it.vaddr, it.vaddr);
                    }
                    (p.p_filesz, p.p_memsz) = (table_size, table_size);
                }
                if let Some(it) = &table {
                    header.e_phoff = it.offset;
                }
                header.e_phnum = phdrs.len() as u16;
            }
        }

        // What we write must be something we would read back: no segment may wrap.
        for p in &phdrs {
            if p.p_vaddr
                .checked_add(p.p_memsz)
                .is_none_or(|end| end > f.max_addr().saturating_add(1))
            {
                return Err(Error::refused(format!(
                    "the segment of type {:#x} at {:#x} would wrap the address space once moved",
                    p.p_type, p.p_vaddr
                )));
            }
        }

        // Sections follow their contents; symbols defined in them follow the sections.
        let mut shdrs: Vec<Shdr> = e.sections.iter().map(|x| x.shdr).collect();
        let mut moves: Vec<SectionMove> = Vec::new();
        let mut moved_names: Vec<String> = Vec::new();
        if let Some(m) = moved {
            for x in e.sections.iter() {
                let sh = x.shdr;
                // An empty section inside the block moves too: the dynamic tags that point at
                // its address (an empty .dynsym or .rela.dyn) are rebased with the block, and
                // its header must keep describing the same place.
                let empty =
                    sh.sh_size == 0 && sh.sh_type != elf::SHT_NOBITS && sh.sh_type != elf::SHT_NULL;
                if sh.is_alloc()
                    && (sh.has_file_bytes() || empty)
                    && m.contains(sh.sh_offset)
                    && sh.sh_offset + sh.sh_size <= m.block.end
                {
                    self.note_move(
                        &mut shdrs,
                        &mut moves,
                        x.index,
                        m.offset(sh.sh_offset),
                        m.vaddr(sh.sh_addr),
                        sh.sh_size,
                    );
                    moved_names.push(String::from_utf8_lossy(&x.name).into_owned());
                }
            }
            if e.sections.is_empty() {
                moved_names.push(format!(
                    "{} bytes after the program headers",
                    m.block.end - m.block.start
                ));
            }
        }
        let mut follow = |kind: ItemKind, section: Option<usize>, name: &str, this: &mut Self| {
            if let Some(it) = item(kind) {
                if let Some(i) = section {
                    this.note_move(&mut shdrs, &mut moves, i, it.offset, it.vaddr, it.size);
                }
                moved_names.push(name.to_string());
            }
        };
        follow(ItemKind::StrTab, st.section, ".dynstr", &mut self);
        follow(
            ItemKind::Interp,
            e.interp.as_ref().and_then(|i| i.section),
            ".interp",
            &mut self,
        );
        let vn_section = section_at(e, elf::SHT_GNU_VERNEED, vn_region);
        follow(ItemKind::Verneed, vn_section, ".gnu.version_r", &mut self);
        follow(
            ItemKind::Versym,
            section_at(e, elf::SHT_GNU_VERSYM, vs_region),
            ".gnu.version",
            &mut self,
        );
        follow(
            ItemKind::Dynamic,
            d.and_then(|d| d.section),
            ".dynamic",
            &mut self,
        );
        if table_moved {
            moved_names.push("program headers".into());
        }
        moved_names.dedup();
        self.version_section_counts(&mut shdrs, &v);
        if let (Some(d), Some(it)) = (d, item(ItemKind::Dynamic)) {
            read_only_if_emptied(e, &mut phdrs, &shdrs, d, it.vaddr, &final_dyn);
        }

        // Commit: one write of the file header and program headers when they are adjacent.
        let phdr_bytes: Vec<u8> = phdrs.iter().flat_map(|p| f.encode_phdr(p)).collect();
        let eh = f.encode_header(&header);
        if let Some(it) = item(ItemKind::PhdrTable) {
            self.push_bytes(it.offset, phdr_bytes, Phase::Stage, "program header table");
            self.push_bytes(0, eh, Phase::Commit, ELF_HEADER);
        } else if header.e_phoff == eh.len() as u64 && header != e.header {
            let mut b = eh;
            b.extend_from_slice(&phdr_bytes);
            self.push_bytes(0, b, Phase::Commit, ELF_AND_PROGRAM_HEADERS);
        } else {
            self.push_bytes(
                header.e_phoff,
                phdr_bytes.clone(),
                Phase::Commit,
                "program headers",
            );
            if header != e.header {
                self.push_bytes(0, eh, Phase::Commit, ELF_HEADER);
            }
        }

        // Cleanup: section headers, then zero what nothing refers to any more.
        self.section_header_writes(&shdrs);
        let mut dead: Vec<Range> = Vec::new();
        if let Some(b) = block {
            dead.push((b.start, b.end));
        }
        if copy_strtab {
            dead.push((st.offset, st.offset + st.bytes.len() as u64));
        } else if e.strtab.is_some() && !in_block(st.offset) {
            dead.extend(
                s.alloc
                    .garbage
                    .iter()
                    .map(|(a, b)| (st.offset + a, st.offset + b)),
            );
        }
        if let (true, Some(ip)) = (interp_item, e.interp.as_ref()) {
            dead.push((ip.offset, ip.offset + ip.capacity));
        }
        let mut live: Vec<Range> = Vec::new();
        if !table_moved && header.e_phnum != e.header.e_phnum {
            live.push((header.e_phoff, header.e_phoff + phdr_bytes_len(f, &phdrs)));
        }
        for (a, b) in strings::subtract(&strings::merge(&mut dead), &strings::merge(&mut live)) {
            self.push(a, Data::Zero, b - a, Phase::Cleanup, "unreferenced bytes");
        }
        let fixups = self.symbol_fixups(&shdrs, moves);
        let layout = Layout::Appended {
            extended: matches!(mode, Mode::Extend(_)),
            moved_phdrs: table_moved,
            moved: moved_names,
        };
        self.finish(layout, seg.end_offset.max(e.file_len), fixups)
    }

    /// Records that section `i` now lives at `off`/`addr` with `size`. A section can move twice in
    /// one plan (with the block, then on its own): symbols follow the composition, from the
    /// original address.
    fn note_move(
        &self,
        shdrs: &mut [Shdr],
        moves: &mut Vec<SectionMove>,
        i: usize,
        off: u64,
        addr: u64,
        size: u64,
    ) {
        let orig = self.planner.elf.sections[i].shdr;
        moves.retain(|m| m.shndx != i as u16);
        if orig.sh_addr != addr {
            moves.push(SectionMove {
                shndx: i as u16,
                old_addr: orig.sh_addr,
                old_size: orig.sh_size,
                delta: addr.wrapping_sub(orig.sh_addr),
                absolute_start: orig.sh_type == elf::SHT_DYNAMIC,
            });
        }
        (shdrs[i].sh_offset, shdrs[i].sh_addr, shdrs[i].sh_size) = (off, addr, size);
    }

    /// `.gnu.version_r`'s `sh_info` is its record count.
    fn version_section_counts(&self, shdrs: &mut [Shdr], v: &Versions) {
        if v.kept == v.entries.len() {
            return;
        }
        let region = self.planner.tables.verneed.as_ref().map(|(r, _)| *r);
        if let Some(i) = section_at(self.planner.elf, elf::SHT_GNU_VERNEED, region) {
            shdrs[i].sh_info = v.kept as u32;
        }
    }

    fn section_header_writes(&mut self, shdrs: &[Shdr]) {
        let e = self.planner.elf;
        let f = self.planner.format;
        for (i, (new, old)) in shdrs.iter().zip(e.sections.iter()).enumerate() {
            if *new != old.shdr {
                let at = e.header.e_shoff + (i * f.shdr_size()) as u64;
                self.push_bytes(at, f.encode_shdr(new), Phase::Cleanup, "section header");
            }
        }
    }

    fn symbol_fixups(&self, shdrs: &[Shdr], moves: Vec<SectionMove>) -> Vec<SymbolFixup> {
        if moves.is_empty() {
            return Vec::new();
        }
        let f = self.planner.format;
        self.planner
            .elf
            .sections
            .iter()
            // An empty table has nothing to fix, and its offset is checked by nobody: a garbage
            // one may point anywhere.
            .filter(|x| {
                matches!(x.shdr.sh_type, elf::SHT_SYMTAB | elf::SHT_DYNSYM)
                    && x.shdr.sh_size >= f.sym_size() as u64
            })
            .map(|x| SymbolFixup {
                table: x.index,
                offset: shdrs[x.index].sh_offset,
                count: x.shdr.sh_size / f.sym_size() as u64,
                moves: moves.clone(),
            })
            .collect()
    }

    /// Orders the writes and checks they stay inside the new file.
    fn finish(
        mut self,
        layout: Layout,
        new_len: u64,
        symbol_fixups: Vec<SymbolFixup>,
    ) -> Result<Plan> {
        // The last line of defence: only the header write itself may touch the ELF header. The
        // checks in `Planner::new` refuse the inputs known to lead here; anything else that
        // does is refused too rather than written.
        let ehdr = self.planner.format.ehdr_size() as u64;
        if let Some(w) = self
            .writes
            .iter()
            .find(|w| w.offset < ehdr && w.what != ELF_HEADER && w.what != ELF_AND_PROGRAM_HEADERS)
        {
            return Err(Error::refused(format!(
                "the edit would write {} over the ELF header: the file's tables are not where its headers say",
                w.what
            )));
        }
        // Stage, commit, cleanup; within cleanup, section headers before zeroing (right after the
        // commit they are the only thing still describing the old layout). Stable otherwise.
        self.writes
            .sort_by_key(|w| (w.phase, w.phase == Phase::Cleanup && w.data == Data::Zero));
        debug_assert!(
            self.writes.iter().all(|w| w.offset + w.len <= new_len),
            "write past the end"
        );
        Ok(Plan {
            writes: self.writes,
            old_len: self.planner.elf.file_len,
            new_len,
            symbol_fixups,
            layout,
        })
    }
}

/// Where the tables the dynamic array points to end up.
struct Addresses {
    strtab: u64,
    verneed: Option<u64>,
    versym: Option<u64>,
    dynamic: u64,
}

/// A contiguous range moved, unchanged, from after the program headers to the new segment.
#[derive(Clone, Copy)]
struct BlockMove {
    block: Block,
    old_vaddr: u64,
    new_offset: u64,
    new_vaddr: u64,
}

impl BlockMove {
    fn contains(&self, off: u64) -> bool {
        off >= self.block.start && off < self.block.end
    }
    fn offset(&self, off: u64) -> u64 {
        if self.contains(off) {
            off - self.block.start + self.new_offset
        } else {
            off
        }
    }
    fn vaddr(&self, v: u64) -> u64 {
        if v >= self.old_vaddr && v < self.old_vaddr + (self.block.end - self.block.start) {
            v - self.old_vaddr + self.new_vaddr
        } else {
            v
        }
    }
}

/// Drops `PF_W` from the writable `PT_LOAD` that held `.dynamic` when, once `.dynamic` moved on,
/// it holds nothing the process may write. Files an editor already grew have such segments:
/// writable only because `.dynamic` was moved into them next to `.dynstr`, `.interp` or notes
/// (patchelf's appended segment in auditwheel'd Python wheels, or ours after `strip` put the
/// section headers behind it), and a writable segment without writable sections is what
/// eu-elflint reports. A segment the process writes into must stay writable, so this only
/// happens when all of these hold, and the segment is left as it is otherwise:
/// - section headers describe the old `.dynamic` (so they can be trusted to describe the rest),
///   and every allocated section left in the segment is one of the read-only tables a loader
///   only reads (notes, `.interp`, string, symbol, hash and version tables);
/// - the new `.dynamic` (at `new_dynamic`) is elsewhere, and no address in the final dynamic
///   array other than those tables' points into the segment (`DT_PLTGOT`, init arrays,
///   relocation tables, `DT_DEBUG`-style pointers keep it writable);
/// - on MIPS, whose loader writes through `DT_MIPS_RLD_MAP(_REL)` and into the GOT, neither
///   lies in the segment: the GOT from `DT_PLTGOT` over `DT_MIPS_LOCAL_GOTNO + DT_MIPS_SYMTABNO -
///   DT_MIPS_GOTSYM` words (all three tags present), the debug map where `DT_MIPS_RLD_MAP` or
///   `DT_MIPS_RLD_MAP_REL` (from its slot in the new array) puts it. patchelf's appended segment
///   in a grown MIPS library holds neither.
fn read_only_if_emptied(
    e: &crate::read::Elf,
    phdrs: &mut [Phdr],
    shdrs: &[Shdr],
    old: &crate::read::Dynamic,
    new_dynamic: u64,
    final_dyn: &[Dyn],
) {
    if old.section.is_none() {
        return;
    }
    // (start, length) of what the MIPS loader writes; none elsewhere. A MIPS file whose GOT
    // cannot be told keeps every segment as it is.
    let mut mips_writes: Vec<(u64, u64)> = Vec::new();
    if e.machine() == elf::EM_MIPS {
        let f = e.format;
        let get = |tag: u32| {
            final_dyn
                .iter()
                .find(|x| x.tag == u64::from(tag))
                .map(|x| x.val)
        };
        let got = match (
            get(elf::DT_PLTGOT),
            get(elf::DT_MIPS_LOCAL_GOTNO),
            get(elf::DT_MIPS_SYMTABNO),
            get(elf::DT_MIPS_GOTSYM),
        ) {
            (Some(at), Some(local), Some(symtabno), Some(gotsym)) => local
                .checked_add(symtabno.saturating_sub(gotsym))
                .and_then(|n| n.checked_mul(f.word_size()))
                .map(|len| (at, len)),
            _ => None,
        };
        let Some(got) = got else {
            return;
        };
        mips_writes.push(got);
        if let Some(at) = get(elf::DT_MIPS_RLD_MAP) {
            mips_writes.push((at, f.word_size()));
        }
        for (i, x) in final_dyn.iter().enumerate() {
            if x.tag == u64::from(super::DT_MIPS_RLD_MAP_REL) {
                let slot = new_dynamic.wrapping_add((i * f.dyn_size()) as u64);
                mips_writes.push((slot.wrapping_add(x.val) & f.max_addr(), f.word_size()));
            }
        }
    }
    let read_only_table = |i: usize, sh: &Shdr| {
        sh.sh_flags & u64::from(elf::SHF_WRITE | elf::SHF_EXECINSTR) == 0
            && (is_read_only_table_type(sh.sh_type)
                || sh.sh_type == elf::SHT_STRTAB
                || (sh.sh_type == elf::SHT_PROGBITS
                    && e.sections.get(i).is_some_and(|x| x.name == b".interp")))
    };
    for p in phdrs.iter_mut() {
        if p.p_type != elf::PT_LOAD
            || p.p_flags & elf::PF_W == 0
            || !p.contains_offset(old.offset, 1)
        {
            continue;
        }
        let (lo, hi) = (p.p_vaddr, p.p_vaddr.saturating_add(p.p_memsz));
        let inside = |a: u64| a >= lo && a < hi;
        if inside(new_dynamic) {
            continue;
        }
        let sections_read_only = shdrs.iter().enumerate().all(|(i, sh)| {
            let overlaps = sh.sh_addr < hi && lo < sh.sh_addr.saturating_add(sh.sh_size.max(1));
            !sh.is_alloc() || !overlaps || read_only_table(i, sh)
        });
        let pointed_at = final_dyn
            .iter()
            .any(|x| is_fixed_address_tag(x.tag) && inside(x.val));
        let mips_written = mips_writes
            .iter()
            .any(|&(a, n)| a < hi && lo < a.saturating_add(n.max(1)));
        if sections_read_only && !pointed_at && !mips_written {
            p.p_flags &= !elf::PF_W;
        }
    }
}

/// The section of type `sh_type` that starts where `region` does.
fn section_at(e: &crate::read::Elf, sh_type: u32, region: Option<Region>) -> Option<usize> {
    let r = region?;
    e.sections
        .iter()
        .find(|x| x.shdr.sh_type == sh_type && x.shdr.sh_offset == r.offset)
        .map(|x| x.index)
}

/// Whether any range of `cover` (sorted, merged) overlaps `[a, b)`.
fn overlaps(cover: &[Range], a: u64, b: u64) -> bool {
    cover.iter().any(|&(s, e)| s < b && a < e)
}

fn pad(mut b: Vec<u8>, len: u64) -> Vec<u8> {
    if (b.len() as u64) < len {
        b.resize(len as usize, 0);
    }
    b
}

/// The records in canonical layout: each `Verneed` followed by its `Vernaux` records.
fn serialize_verneed(f: Format, kept: &[VerneedEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, n) in kept.iter().enumerate() {
        let next = if k + 1 == kept.len() {
            0
        } else {
            16 + 16 * n.aux.len() as u32
        };
        out.extend_from_slice(&f.put_u16(n.version));
        out.extend_from_slice(&f.put_u16(n.aux.len() as u16));
        out.extend_from_slice(&f.put_u32(n.file));
        out.extend_from_slice(&f.put_u32(if n.aux.is_empty() { 0 } else { 16 }));
        out.extend_from_slice(&f.put_u32(next));
        for (j, a) in n.aux.iter().enumerate() {
            out.extend_from_slice(&f.put_u32(a.hash));
            out.extend_from_slice(&f.put_u16(a.flags));
            out.extend_from_slice(&f.put_u16(a.other));
            out.extend_from_slice(&f.put_u32(a.name));
            out.extend_from_slice(&f.put_u32(if j + 1 == n.aux.len() { 0 } else { 16 }));
        }
    }
    out
}

fn phdr_bytes_len(f: Format, phdrs: &[Phdr]) -> u64 {
    (phdrs.len() * f.phdr_size()) as u64
}

fn encode_dynamic(f: Format, entries: &[Dyn], capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity * f.dyn_size());
    for d in entries.iter().take(capacity) {
        out.extend_from_slice(&f.encode_dyn(d));
    }
    while out.len() < capacity * f.dyn_size() {
        out.extend_from_slice(&f.encode_dyn(&Dyn { tag: 0, val: 0 }));
    }
    out
}

/// The smallest `[lo, hi)` outside which `a` and `b` agree (`None` when equal).
fn diff_span<T: PartialEq>(a: &[T], b: &[T]) -> Option<(usize, usize)> {
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

/// What the writes of the file header are called: the only writes allowed over it.
const ELF_HEADER: &str = "ELF header";
/// See [`ELF_HEADER`].
const ELF_AND_PROGRAM_HEADERS: &str = "ELF and program headers";
