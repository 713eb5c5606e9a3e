//! Where appended data goes: extending the last segment, or a new `PT_LOAD` and room for its
//! program header.

use object::elf;

use super::strings::{self, Range};
use super::tags::{is_fixed_address_tag, is_read_only_table_type, DT_RELR, DT_RELRSZ};
use super::{checked_align_up, Planner};
use crate::error::{Error, Result};
use crate::refs::Region;

/// A thing placed in the appended area.
#[derive(Clone, Debug)]
pub(super) struct Item {
    pub(super) kind: ItemKind,
    pub(super) size: u64,
    pub(super) align: u64,
    /// Keep `new_vaddr ≡ old_vaddr (mod align)` (for moved blocks with internal alignment).
    pub(super) congruent_to: Option<u64>,
    pub(super) offset: u64,
    pub(super) vaddr: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ItemKind {
    PhdrTable,
    Block,
    StrTab,
    Interp,
    Verneed,
    Versym,
    Dynamic,
}

/// Sections (or, without section headers, known regions) that follow the program header table.
#[derive(Clone, Debug)]
pub(super) struct Occupant {
    start: u64,
    end: u64,
    movable: bool,
    align: u64,
}

/// A contiguous range right after the program header table moved to make room for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Block {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) align: u64,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Room {
    /// Reuse the `PT_NULL` entry with this index.
    NullSlot(usize),
    /// The bytes after the table are free.
    Slack,
    /// Move this block out of the way.
    Block(Block),
    /// Move the table itself.
    MoveTable,
}

/// Where appended data goes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    /// Extend the last `PT_LOAD` (with this index): it ends the file and the address space.
    Extend(usize),
    /// Add a `PT_LOAD`, making room in the program header table this way.
    New(Room),
}

/// Base of the appended area: (file offset, vaddr, p_align).
pub(super) type Base = (u64, u64, u64);

/// The placed segment.
#[derive(Clone, Copy, Debug)]
pub(super) struct Placed {
    pub(super) offset: u64,
    pub(super) vaddr: u64,
    pub(super) end_offset: u64,
    pub(super) align: u64,
}

impl Item {
    pub(super) fn new(kind: ItemKind, size: u64, align: u64) -> Item {
        Item {
            kind,
            size,
            align: align.max(1),
            congruent_to: None,
            offset: 0,
            vaddr: 0,
        }
    }
}

impl Planner<'_> {
    /// The largest `p_align` of the existing `PT_LOAD`s: the new one declares it too (glibc before
    /// 2.35 checks every segment's congruence against the largest).
    pub(super) fn declared_align(&self) -> u64 {
        self.elf
            .loads()
            .map(|p| p.p_align)
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// The alignment the new segment is placed with: the declared one, at least a 4 KiB page, and
    /// `Options::page_size` when larger (congruent modulo it, so modulo the declared one too).
    pub(super) fn placement_align(&self) -> u64 {
        self.opts
            .page_size
            .unwrap_or(0)
            .max(self.declared_align())
            .max(4096)
    }

    /// The last `PT_LOAD`, if appended data can simply extend it.
    pub(super) fn extendable_tail(&self) -> Option<usize> {
        let e = self.elf;
        let (i, last) = e
            .phdrs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.p_type == elf::PT_LOAD)
            .max_by_key(|(_, p)| p.p_vaddr)?;
        let highest_offset = e.loads().all(|p| p.offset_end() <= last.offset_end());
        let at_eof = last.offset_end() == e.file_len;
        let plain =
            last.p_filesz == last.p_memsz && last.p_flags & elf::PF_X == 0 && last.p_filesz > 0;
        let shdrs_before = e.header.e_shoff == 0
            || e.section_headers_unusable()
            || e.header.e_shoff < last.p_offset;
        (highest_offset && at_eof && plain && shdrs_before).then_some(i)
    }

    pub(super) fn choose_layout(&self) -> Result<(Mode, Base)> {
        let e = self.elf;
        if let Some(i) = self.extendable_tail() {
            let p = &e.phdrs[i];
            return Ok((
                Mode::Extend(i),
                (p.offset_end(), p.p_vaddr + p.p_filesz, p.p_align),
            ));
        }
        if e.loads().next().is_none() {
            return Err(Error::refused(
                "the file has no PT_LOAD segment to place data after",
            ));
        }
        // A new PT_LOAD declares the largest p_align and is placed congruent modulo it: that must
        // be an alignment. Edits in place and extensions of the last segment need none.
        for p in e.loads() {
            if p.p_align > 1 && (!p.p_align.is_power_of_two() || p.p_align > 1 << 30) {
                return Err(Error::refused(format!(
                    "PT_LOAD at {:#x} has p_align {:#x}, not a usable alignment for a new segment",
                    p.p_vaddr, p.p_align
                )));
            }
        }
        let room = self.find_room()?;
        let align = self.placement_align();
        let top = e.loads().map(|p| p.vaddr_end()).max().unwrap_or(0);
        let no_room = || Error::refused("no address space left above the image for a new segment");
        let mut offset = checked_align_up(e.file_len, 16).ok_or_else(no_room)?;
        // Keep the new segment clear of the old image by a page, and by the largest dynamic
        // symbol: eu-elflint takes a relocation at r_offset against a symbol of size n to touch
        // [r_offset, r_offset + n], and calls a read-only segment in that range "modified".
        let reach = self.tables.dynsym.as_ref().map_or(0, |s| s.max_size);
        let base = top
            .checked_add(reach)
            .and_then(|x| checked_align_up(x, align))
            .and_then(|x| x.checked_add(align))
            .filter(|&b| b < self.format.max_addr())
            .ok_or_else(no_room)?;
        let mut vaddr = base.checked_add(offset % align).ok_or_else(no_room)?;
        if matches!(room, Room::MoveTable) && e.interp.is_some() {
            // Kernels before 5.18 compute AT_PHDR as (first PT_LOAD's vaddr - offset) + e_phoff:
            // keep that bias for the new segment so the moved table is still found there.
            let first = e.loads().min_by_key(|p| p.p_vaddr).expect("has loads");
            let bias = first.p_vaddr.wrapping_sub(first.p_offset);
            if bias <= base {
                // The file offset that lands at `base` with that bias, unless the file is already
                // longer; a hole of more than 1 MiB in the file is not worth it.
                let biased = offset.max(checked_align_up(base - bias, 16).unwrap_or(u64::MAX));
                if biased - offset <= 1 << 20 && biased.checked_add(bias).is_some() {
                    offset = biased;
                    vaddr = offset + bias;
                }
            }
        }
        Ok((Mode::New(room), (offset, vaddr, self.declared_align())))
    }

    /// Lays out the items from `base`, filling in their offsets and addresses.
    pub(super) fn place(&self, base: Base, items: &mut [Item]) -> Result<Placed> {
        let (o0, v0, align) = base;
        let bias = v0.wrapping_sub(o0);
        let mut cur = o0;
        for it in items.iter_mut() {
            let mut off = checked_align_up(cur, it.align)
                .ok_or_else(|| Error::refused("the appended segment would not fit in the file"))?;
            if let Some(old) = it.congruent_to {
                while off.wrapping_add(bias) % it.align != old % it.align {
                    off += 1;
                }
            }
            it.offset = off;
            it.vaddr = off.wrapping_add(bias);
            cur = off + it.size;
        }
        let end_vaddr = cur.wrapping_add(bias);
        if end_vaddr > self.format.max_addr() || end_vaddr < v0 {
            return Err(Error::refused(
                "the appended segment would not fit in the address space",
            ));
        }
        Ok(Placed {
            offset: o0,
            vaddr: v0,
            end_offset: cur,
            align,
        })
    }

    pub(super) fn new_phnum(&self, mode: Option<Mode>) -> usize {
        let n = self.elf.phdrs.len();
        match mode {
            Some(Mode::New(Room::NullSlot(_))) | Some(Mode::Extend(_)) | None => n,
            Some(Mode::New(_)) => n + 1,
        }
    }

    /// Whether a table the dynamic array points to overlaps `[start, end)` of the file.
    pub(super) fn dynamic_refs_in(&self, start: u64, end: u64) -> bool {
        self.dynamic_regions()
            .iter()
            .any(|r| r.offset < end && start < r.end())
    }

    /// The tables `.dynamic` points to, with their extents.
    pub(super) fn dynamic_regions(&self) -> Vec<Region> {
        let mut out = Vec::new();
        if let Some(s) = &self.elf.strtab {
            out.push(Region {
                offset: s.offset,
                vaddr: s.vaddr,
                size: s.bytes.len() as u64,
            });
        }
        let t = self.tables;
        out.extend(t.dynsym.as_ref().map(|s| s.region));
        out.extend(t.hash);
        out.extend(t.gnu_hash);
        out.extend(t.versym.as_ref().map(|(r, _)| *r));
        out.extend(t.verneed.as_ref().map(|(r, _)| *r));
        out.extend(t.verdef.as_ref().map(|(r, _)| *r));
        out
    }

    /// How to make room for one more program header.
    pub(super) fn find_room(&self) -> Result<Room> {
        let e = self.elf;
        let f = self.format;
        if let Some(i) = e.phdrs.iter().position(|p| p.p_type == elf::PT_NULL) {
            return Ok(Room::NullSlot(i));
        }
        if e.phdrs.len() + 1 >= usize::from(elf::PN_XNUM) {
            return Err(Error::unsupported("too many program headers to add one"));
        }
        let need = f.phdr_size() as u64;
        let table_start = e.header.e_phoff;
        let table_end = table_start + (e.phdrs.len() * f.phdr_size()) as u64;
        let Some(load) = e
            .loads()
            .find(|p| p.contains_offset(table_start, table_end - table_start))
        else {
            return Ok(Room::MoveTable);
        };
        let load_end = load.offset_end();
        let occupants = self.occupants(table_end);
        if occupants
            .iter()
            .any(|o| o.start < table_end && o.end > table_start)
        {
            return Ok(Room::MoveTable);
        }
        let next = occupants
            .iter()
            .map(|o| o.start)
            .filter(|&s| s >= table_end)
            .min()
            .unwrap_or(load_end)
            .min(load_end);
        // Free bytes right after the table, known to hold nothing (zeros, no occupant).
        let slack_is_zero = e.phdr_tail.len() as u64 >= need
            && e.phdr_tail[..need as usize].iter().all(|&b| b == 0);
        if next >= table_end + need && slack_is_zero {
            return Ok(Room::Slack);
        }
        // Move the shortest run of movable things that frees `need` bytes.
        let mut end = table_end;
        let mut align = f.word_size();
        let mut sorted: Vec<&Occupant> =
            occupants.iter().filter(|o| o.start >= table_end).collect();
        sorted.sort_by_key(|o| (o.start, o.end));
        let mut iter = sorted.iter().peekable();
        while end < table_end + need {
            let Some(o) = iter.next() else { break };
            if o.start > end && e.sections.is_empty() && o.start - end >= 16 {
                // Unknown bytes between known regions: they may be anything.
                return Ok(Room::MoveTable);
            }
            if !o.movable || o.end > load_end {
                return Ok(Room::MoveTable);
            }
            end = end.max(o.end);
            align = align.max(o.align);
        }
        // Anything overlapping the block must lie inside it entirely, and be movable: also what
        // starts where a movable thing does (a garbage section over a note's bytes), which the
        // run above need not have met.
        loop {
            let mut grew = false;
            for o in &occupants {
                if o.start >= table_end && o.start < end {
                    if !o.movable || o.end > load_end {
                        return Ok(Room::MoveTable);
                    }
                    if o.end > end {
                        end = o.end;
                        align = align.max(o.align);
                        grew = true;
                    }
                }
            }
            if !grew {
                break;
            }
        }
        if end < table_end + need {
            return Ok(Room::MoveTable);
        }
        // Nothing we cannot update may point into the block: the entry point, or address tags
        // other than the table pointers we relocate.
        let lo = e.offset_to_vaddr(table_end, 1).unwrap_or(0);
        let hi = lo + (end - table_end);
        if e.header.e_entry >= lo && e.header.e_entry < hi {
            return Ok(Room::MoveTable);
        }
        if let Some(d) = &e.dynamic {
            for x in d.entries() {
                if is_fixed_address_tag(x.tag) && x.val >= lo && x.val < hi {
                    return Ok(Room::MoveTable);
                }
            }
        }
        Ok(Room::Block(Block {
            start: table_end,
            end,
            align: align.min(4096),
        }))
    }

    /// The parts of `[start, end)` that something the file describes occupies (a section, a
    /// segment other than `PT_LOAD`, a table `.dynamic` points to), merged; the rest is padding or
    /// bytes nothing refers to.
    pub(super) fn described(&self, start: u64, end: u64) -> Vec<Range> {
        let mut v: Vec<Range> = self
            .occupants(start)
            .iter()
            .filter(|o| o.start < end && start < o.end)
            .map(|o| (o.start.max(start), o.end.min(end)))
            .collect();
        strings::merge(&mut v)
    }

    /// What occupies the file after the program header table: sections when there are section
    /// headers, otherwise every region the program headers and dynamic tags describe.
    pub(super) fn occupants(&self, _from: u64) -> Vec<Occupant> {
        let e = self.elf;
        let mut out = Vec::new();
        let movable_phdr =
            |t: u32| matches!(t, elf::PT_INTERP | elf::PT_NOTE | elf::PT_GNU_PROPERTY);
        for p in e.phdrs.iter() {
            if p.p_type == elf::PT_LOAD || p.p_type == elf::PT_PHDR || p.p_filesz == 0 {
                continue;
            }
            // A segment other than PT_LOAD only constrains where its bytes may go when its
            // alignment is a real one; a garbage p_align (0x3ff) must not set the block's.
            out.push(Occupant {
                start: p.p_offset,
                end: p.offset_end(),
                movable: movable_phdr(p.p_type),
                align: if p.p_align.is_power_of_two() {
                    p.p_align
                } else {
                    1
                },
            });
        }
        if !e.sections.is_empty() {
            let strtab_section = e.strtab.as_ref().and_then(|s| s.section);
            let interp_section = e.interp.as_ref().and_then(|i| i.section);
            for s in e.sections.iter() {
                let sh = s.shdr;
                if !sh.has_file_bytes() {
                    continue;
                }
                // The ELF spec allows only 0 and powers of two; with anything else we cannot
                // know where the section may land, so it stays where it is.
                let sane_align = sh.sh_addralign <= 1 || sh.sh_addralign.is_power_of_two();
                let known_table =
                    Some(s.index) == strtab_section || Some(s.index) == interp_section;
                let movable = sane_align
                    && sh.is_alloc()
                    && sh.sh_flags & u64::from(elf::SHF_WRITE | elf::SHF_EXECINSTR) == 0
                    && (is_read_only_table_type(sh.sh_type) || known_table);
                out.push(Occupant {
                    start: sh.sh_offset,
                    end: sh.sh_offset.saturating_add(sh.sh_size),
                    movable,
                    align: sh.sh_addralign.max(1),
                });
            }
            if e.header.e_shoff != 0 {
                let end = e
                    .header
                    .e_shoff
                    .saturating_add((e.sections.len() * self.format.shdr_size()) as u64);
                out.push(Occupant {
                    start: e.header.e_shoff,
                    end,
                    movable: false,
                    align: 1,
                });
            }
        }
        // What the dynamic array and the entry point describe counts too, sections or not: a file
        // may hold tables no section header covers, and the loader uses them all the same.
        {
            for r in self.dynamic_regions() {
                out.push(Occupant {
                    start: r.offset,
                    end: r.end(),
                    movable: true,
                    align: self.format.word_size(),
                });
            }
            if let Some(d) = &e.dynamic {
                let size = (d.capacity() * self.format.dyn_size()) as u64;
                out.push(Occupant {
                    start: d.offset,
                    end: d.offset + size,
                    movable: false,
                    align: 1,
                });
                let pairs = [
                    (elf::DT_RELA, elf::DT_RELASZ),
                    (elf::DT_REL, elf::DT_RELSZ),
                    (elf::DT_JMPREL, elf::DT_PLTRELSZ),
                    (DT_RELR, DT_RELRSZ),
                    (elf::DT_INIT_ARRAY, elf::DT_INIT_ARRAYSZ),
                    (elf::DT_FINI_ARRAY, elf::DT_FINI_ARRAYSZ),
                ];
                for (a, s) in pairs {
                    if let (Some(v), Some(n)) = (d.get(a), d.get(s)) {
                        if let Some(o) = e.vaddr_to_offset(v, n) {
                            out.push(Occupant {
                                start: o,
                                end: o.saturating_add(n.max(1)),
                                movable: false,
                                align: 1,
                            });
                        }
                    }
                }
                for x in d.entries() {
                    if is_fixed_address_tag(x.tag) {
                        if let Some(o) = e.vaddr_to_offset(x.val, 1) {
                            out.push(Occupant {
                                start: o,
                                end: o + 1,
                                movable: false,
                                align: 1,
                            });
                        }
                    }
                }
            }
            if let Some(o) = e.vaddr_to_offset(e.header.e_entry, 1) {
                out.push(Occupant {
                    start: o,
                    end: o + 1,
                    movable: false,
                    align: 1,
                });
            }
        }
        out
    }
}
