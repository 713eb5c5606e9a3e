//! Growing the string table where it is, rather than copying it.
//!
//! `DT_STRTAB` names one table, so new strings must follow its last byte. A copy of the table
//! costs its whole size in the file (megabytes for a library with many symbols) and in the write;
//! what follows the table is usually small, so it is cheaper to make room there:
//! - bytes nothing describes (padding, what an earlier edit freed) are room as they are;
//! - the read-only tables the loader finds through the dynamic array (version tables, hash
//!   tables, relocation tables) move out of the way, as one block, copied whole and relocated by
//!   one distance: into the unused rest of the segment's last page when they fit there, else into
//!   the appended segment;
//! - a dynamic array in the way moves into the appended segment, a section header table in the
//!   way is written anew at the end of the file;
//! - the segment that maps the table grows over its page's tail (bytes the loader maps anyway)
//!   or, when it ends the file and the address space (a segment an earlier edit appended, ours or
//!   patchelf's), without bound.
//!
//! Anything else in the way (code, data, a section we do not know, a `PT_*` segment we cannot
//! follow) and the edit copies the table as before (`Selection::copy_strtab`). So does a file
//! without usable section headers: without them, bytes no table describes may still be something.
//! So does a table smaller than the tables in its way when they would go to the appended
//! segment: each adds its size to the file, and the copy is then the smaller.
//!
//! The writes keep the file the old one or the new one after each of them: the copies go where
//! nothing points (stage); the headers and a first dynamic array that points at the copies but
//! still at the old strings switch over (commit); only then do the strings go over the room, and
//! one last write of the dynamic array switches to them. When the room was free before the edit
//! (no table, array or section header table in it) the strings are staged with the copies.

use object::elf;

use super::room::{Block, Occupant};
use crate::plan::appended::room::occupants;
use crate::plan::appended::site::extendable_tail;
use crate::plan::input::Input;

/// How the string table grows where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::plan) struct TailRoom {
    /// Index of the `PT_LOAD` that maps the table.
    pub(in crate::plan) load: usize,
    /// File offset of the table's end: the new strings go from here.
    pub(in crate::plan) start: u64,
    /// How many bytes they take.
    pub(in crate::plan) need: u64,
    /// The tables in the way, moved as one block.
    pub(in crate::plan) block: Option<Block>,
    /// Where the block goes in the load's own tail (file offset), when it fits there; `None`
    /// sends it to the appended segment.
    pub(in crate::plan) home: Option<u64>,
    /// The dynamic array is in the way: it moves into the appended segment.
    pub(in crate::plan) dynamic_in_way: bool,
    /// The section header table is in the way: it is written anew at the end of the file.
    pub(in crate::plan) section_table_in_way: bool,
    /// Whether the load may grow without bound (it ends the file and the address space).
    pub(in crate::plan) unbounded: bool,
}

impl TailRoom {
    /// Whether the strings go over bytes something uses before the edit: they are then written
    /// after the switch, not staged.
    pub(in crate::plan) fn strings_after_switch(&self) -> bool {
        self.block.is_some() || self.dynamic_in_way || self.section_table_in_way
    }

    /// Where the room for the strings ends.
    pub(in crate::plan) fn strings_end(&self) -> u64 {
        self.start + self.need
    }

    /// File offset where the load ends once it maps the strings and a block homed in its tail.
    pub(in crate::plan) fn load_end(&self, old_end: u64) -> u64 {
        let home_end = match (self.block, self.home) {
            (Some(b), Some(h)) => h + (b.end - b.start),
            _ => 0,
        };
        old_end.max(self.strings_end()).max(home_end)
    }
}

/// Room for `need` more bytes after the string table, if the table can grow where it is.
pub(in crate::plan) fn tail_room(input: &Input<'_>, need: u64) -> Option<TailRoom> {
    let elf = input.elf;
    let strtab = elf.strtab.as_ref()?;
    if need == 0 || strtab.section.is_none() || elf.section_headers_unusable() {
        return None;
    }
    let len = strtab.size;
    let start = strtab.offset.checked_add(len)?;
    let load = elf
        .phdrs
        .iter()
        .position(|p| p.p_type == elf::PT_LOAD && p.contains_offset(strtab.offset, len.max(1)))?;
    let strings_end = start.checked_add(need)?;
    let ways = in_the_way(input, start, strings_end)?;
    let p = &elf.phdrs[load];
    let unbounded = extendable_tail(input).is_some_and(|(i, _)| i == load);
    // What the loader maps of this load without a new page: its file part and its page's tail.
    let mapped_end = p.offset_end() + elf.mapped_tail(p);
    let room_end = strings_end.max(ways.block.map_or(0, |b| b.end));
    if room_end > p.offset_end() && !unbounded && room_end > mapped_end {
        return None;
    }
    if room_end > p.offset_end() && p.p_filesz != p.p_memsz {
        return None;
    }
    let mut room = TailRoom {
        load,
        start,
        need,
        block: ways.block,
        home: None,
        dynamic_in_way: ways.dynamic,
        section_table_in_way: ways.section_table,
        unbounded,
    };
    if room.section_table_in_way && !elf.section_headers_end_file() {
        return None;
    }
    if let Some(block) = room.block {
        room.home = tail_home(
            input,
            block,
            room_end,
            if unbounded { None } else { Some(mapped_end) },
        );
        // Tables that leave for the appended segment add their size to the file, a copy of
        // the string table its size and the strings: the smaller goes (a library's few
        // hundred bytes of strings before a 150 KB relocation table are copied).
        if room.home.is_none() && block.end - block.start > len + need {
            return None;
        }
    }
    Some(room)
}

/// What lies in `[start, end)` after the string table: the tables that must move (a block
/// from `start`, taking in whole every table it touches), and whether the dynamic array or
/// the section header table is there. `None` when something that cannot move is.
fn in_the_way(input: &Input<'_>, start: u64, end: u64) -> Option<Ways> {
    let elf = input.elf;
    let occupants = occupants(input);
    let dynamic = elf.dynamic.as_ref().map(|d| {
        let size = (d.capacity() * input.format.dyn_size()) as u64;
        (d.offset, d.offset + size)
    });
    let shdrs = elf.section_table_end().map(|e| (elf.header.e_shoff, e));
    let inside = |o: &Occupant, r: Option<(u64, u64)>| {
        r.is_some_and(|(lo, hi)| o.start >= lo && o.end <= hi)
    };
    let mut ways = Ways::default();
    let mut block_end = start;
    let mut align = 1;
    // The block's extent grows with each table it takes in; what overlaps it must join too.
    loop {
        let mut grew = false;
        for o in &occupants {
            let reach = end.max(block_end);
            if o.end <= start || o.start >= reach || o.end == o.start {
                continue;
            }
            if o.start < start {
                // Something spans the table's end: it cannot be told apart from the table.
                return None;
            }
            if inside(o, dynamic) {
                ways.dynamic = true;
            } else if inside(o, shdrs) {
                ways.section_table = true;
            } else if o.movable || o.relocations {
                if o.end > block_end {
                    block_end = o.end;
                    grew = true;
                }
                align = align.max(o.align);
            } else {
                return None;
            }
        }
        if !grew {
            break;
        }
    }
    // The block is copied whole: the array and the table, which move on their own, must lie
    // past it.
    let past_block = |r: Option<(u64, u64)>| r.is_none_or(|(lo, _)| lo >= block_end);
    if (ways.dynamic && !past_block(dynamic)) || (ways.section_table && !past_block(shdrs)) {
        return None;
    }
    if block_end > start {
        ways.block = Some(Block {
            start,
            end: block_end,
            align: align.min(4096),
        });
    }
    Some(ways)
}

/// Where `block` can go in the tail of its own load: past `from` (the block and the
/// strings), congruent with where it was, and before `limit` (the end of what the loader
/// maps there) and anything described there. As high as it fits, so that the room it leaves
/// after the strings takes the next edit's. Past the end of a load that ends the file
/// (`limit` `None`) it goes right after the strings, when nothing is there.
fn tail_home(input: &Input<'_>, block: Block, from: u64, limit: Option<u64>) -> Option<u64> {
    let align = block.align.max(1);
    let size = block.end - block.start;
    let congruent = |at: u64| {
        let delta = (block.start % align + align - at % align) % align;
        at + delta
    };
    let occupants = occupants(input);
    let Some(limit) = limit else {
        let at = congruent(from);
        let clear = occupants
            .iter()
            .all(|o| o.end <= from || o.start >= at + size || o.end == o.start);
        return clear.then_some(at);
    };
    // The first thing described at or after `from` ends the room; one across it leaves none.
    if occupants.iter().any(|o| o.start < from && o.end > from) {
        return None;
    }
    let free_end = occupants
        .iter()
        .filter(|o| o.start >= from && o.end > o.start)
        .map(|o| o.start)
        .min()
        .unwrap_or(limit)
        .min(limit);
    let top = free_end.checked_sub(size)?;
    // The highest offset at or below `top` congruent with the block's start.
    let at = top - (top % align + align - block.start % align) % align;
    (at >= from).then_some(at)
}

/// What is in the way of the strings (see [`in_the_way`]).
#[derive(Default)]
struct Ways {
    block: Option<Block>,
    dynamic: bool,
    section_table: bool,
}
