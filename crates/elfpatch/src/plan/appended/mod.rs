//! The appended edit (copy-on-write): whatever does not fit where it is goes, modified, into a
//! segment at the end of the file and of the address space, and one write of the program headers
//! switches the file over. Interrupted before that write, the file is the old one; after it, the
//! new one.
//!
//! In named phases, each a function below:
//! 1. [`lay_out`](Builder::lay_out): where the segment goes (`site.rs`: the last `PT_LOAD`
//!    extended, or a new one with room for its program header, `room.rs`), what moves into it
//!    ([`Selection`]) and where each item lands;
//! 2. [`stage`](Builder::stage): the segment's bytes, written where nothing points yet;
//! 3. [`program_headers`](Builder::program_headers) (`headers.rs`): the new ELF header and
//!    program headers;
//! 4. [`move_sections`](Builder::move_sections): section headers follow what moved, symbols
//!    follow the sections; a section header table that ended the file is staged, updated, after
//!    the segment (`section_table.rs`), so it still ends the file;
//! 5. [`commit`](Builder::commit): the one write of the headers that switches the file;
//! 6. [`cleanup`](Builder::cleanup): section headers, then the bytes nothing refers to any more,
//!    zeroed.

mod headers;
mod room;
mod section_table;
mod site;
mod tail;

use room::Block;
pub(super) use room::{table_grows_in_place, Room};
use site::{Extent, Item, ItemKind, Mode, SegmentBase, Site};
pub(super) use tail::TailRoom;

use object::elf;

use super::contents::{
    encode_dynamic, final_dynamic, interim_dynamic, pad, section_at, strtab_or_empty,
    version_section_counts, NewStrings, NewVersions, TableAddresses,
};
use super::input::Input;
use super::note_edit::{check_note_containers, note_shdrs, NoteChange};
use super::note_writes::{new_note_bytes, note_extra_phdrs};
use super::placed::Placed;
use super::strings::{self, Range};
use super::symbols::symbol_tables;
use super::symbols::SymbolTables;
use super::writes::{Writes, ELF_AND_PROGRAM_HEADERS, ELF_HEADER};
use super::{Data, Layout, Phase, Plan, SectionMove};
use crate::error::Result;
use crate::format::{Dyn, Shdr};
use crate::plan::appended::room::{described, dynamic_refs_in};
use crate::plan::appended::site::{choose_site_above, new_phnum, place};
use crate::plan::appended::tail::tail_room;
use headers::{drop_emptied_loads, program_headers, read_only_if_emptied, NewHeaders};
use section_table::{add_note_section, section_table_follows, stage_section_table};
use tail::{dynamic_diff, grow_commit};

/// What moves into the appended segment. Live data that changes is copied, so that only the
/// commit write touches anything the old file uses.
struct Selection {
    /// The string table grows, or a new string goes over bytes in use: it is copied.
    copy_strtab: bool,
    /// The interpreter path moves.
    interp: bool,
    /// The version need records move (rewritten).
    verneed: bool,
    /// The symbol versions move (rewritten).
    versym: bool,
    /// The dynamic array moves: its entries change, or a table it points to moves.
    dynamic: bool,
    /// The version need records, padded to the old table's size, when they change.
    verneed_bytes: Option<Vec<u8>>,
    /// Slots of the moved dynamic array.
    dynamic_capacity: usize,
    /// The symbol and hash tables after renames: they move, rewritten.
    symbols: Option<SymbolTables>,
}

/// A contiguous range moved, unchanged: from after the program headers to the new segment, or
/// from after the string table out of its way (`tail.rs`).
#[derive(Clone, Copy)]
struct BlockMove {
    block: Block,
    old_vaddr: u64,
    new_offset: u64,
    new_vaddr: u64,
    /// What it is, for the writes.
    what: &'static str,
}

/// The appended segment once laid out: what the later phases share.
struct AppendedSegment {
    site: Site,
    /// How the string table grows where it is, when it does.
    tail: Option<TailRoom>,
    selection: Selection,
    items: Vec<Item>,
    extent: Extent,
    /// The blocks that moved, with where they went.
    moved: Vec<BlockMove>,
}

impl AppendedSegment {
    fn item(&self, kind: ItemKind) -> Option<&Item> {
        self.items.iter().find(|i| i.kind == kind)
    }

    /// Whether the program header table moves into the segment.
    fn table_moved(&self) -> bool {
        matches!(self.site.mode, Mode::New(Room::MoveTable))
    }

    /// The moved block holding file offset `offset`.
    fn move_of(&self, offset: u64) -> Option<&BlockMove> {
        self.moved
            .iter()
            .find(|m| offset >= m.block.start && offset < m.block.end)
    }

    /// Whether file offset `offset` lies in a moved block.
    fn in_block(&self, offset: u64) -> bool {
        self.move_of(offset).is_some()
    }

    /// Where the byte at file offset `offset` is once the blocks moved.
    fn translate(&self, offset: u64) -> u64 {
        match self.move_of(offset) {
            Some(m) => offset - m.block.start + m.new_offset,
            None => offset,
        }
    }

    /// Where address `vaddr` is once the blocks moved.
    fn relocate(&self, vaddr: u64) -> u64 {
        self.moved
            .iter()
            .find(|m| vaddr >= m.old_vaddr && vaddr < m.old_vaddr + (m.block.end - m.block.start))
            .map_or(vaddr, |m| vaddr - m.old_vaddr + m.new_vaddr)
    }

    /// Where the dynamic array is after the edit: its item in the segment, or where it was.
    fn dynamic_at(&self, elf: &crate::Elf) -> Option<(u64, u64)> {
        match self.item(ItemKind::Dynamic) {
            Some(item) => Some((item.offset, item.vaddr)),
            None => elf.dynamic.as_ref().map(|d| (d.offset, d.vaddr)),
        }
    }
}

/// Section headers after the edit, the moves symbols must follow, and what moved (for humans).
struct SectionMoves {
    shdrs: Vec<Shdr>,
    moves: Vec<SectionMove>,
    names: Vec<String>,
}

/// Something does not fit: copy-on-write into the appended segment, one commit write.
pub(in crate::plan) fn plan(input: &Input<'_>, placed: &Placed) -> Result<Plan> {
    let (strings, versions) = (&placed.strings, &placed.versions);
    let entries_changed = placed.entries_changed;
    let mut w = Writes::new(input.elf);
    let elf = input.elf;
    check_note_containers(input, &placed.note, true)?;
    let tail = tail_growth(input, placed, &strings);
    let segment = lay_out(input, placed, &strings, &versions, entries_changed, tail)?;
    let addresses = table_addresses(input, &segment);
    let final_dynamic = final_dynamic(input, &placed.entries, &strings, &addresses, &|vaddr| {
        segment.relocate(vaddr)
    });
    // A growing string table whose room is in use switches to a dynamic array that still
    // names the old strings first (`tail.rs`).
    let interim = segment
        .tail
        .filter(TailRoom::strings_after_switch)
        .map(|_| interim_array(input, &segment));
    let staged_dynamic = interim.as_deref().unwrap_or(&final_dynamic);
    stage(
        input,
        placed,
        &mut w,
        &segment,
        &strings,
        &versions,
        staged_dynamic,
    )?;
    let NewHeaders { header, mut phdrs } = program_headers(input, placed, &segment)?;
    let sections = move_sections(input, placed, &w, &segment, &versions, &strings);
    if let (Some(dynamic), Some(item)) = (&elf.dynamic, segment.item(ItemKind::Dynamic)) {
        read_only_if_emptied(
            elf,
            &mut phdrs,
            &sections.shdrs,
            dynamic,
            item.vaddr,
            &final_dynamic,
        );
        drop_emptied_loads(
            elf,
            &header,
            &mut phdrs,
            &sections.shdrs,
            dynamic,
            (item.vaddr, &final_dynamic),
        );
    }
    let mut headers = NewHeaders { header, phdrs };
    let tail_end = segment
        .tail
        .map_or(0, |t| t.load_end(elf.phdrs[t.load].offset_end()));
    let mut end = segment.extent.end_offset.max(elf.file_len).max(tail_end);
    let note = segment.item(ItemKind::Note);
    let added = note.and_then(|item| {
        add_note_section(
            input,
            placed,
            &mut w,
            (item.offset, item.vaddr, item.size),
            &mut headers.header,
            &sections.shdrs,
            end,
        )
    });
    // A table that ended the file still does (`section_table.rs`); one with a new section
    // moved already. Without a new segment it stays, unless the strings need its bytes.
    let restage = match segment.site.mode {
        Mode::None => segment.tail.is_some_and(|t| t.section_table_in_way),
        _ => section_table_follows(input),
    };
    let table_end = added.or_else(|| {
        restage
            .then(|| stage_section_table(input, &mut w, &sections.shdrs, &mut headers.header, end))
    });
    commit(input, &mut w, &segment, &headers);
    if let Some(tail) = segment.tail {
        grow_commit(
            input,
            &mut w,
            &segment,
            tail,
            &strings,
            interim.as_deref(),
            &final_dynamic,
        );
    } else if let (Some(d), None) = (&elf.dynamic, segment.item(ItemKind::Dynamic)) {
        // The array stays where it is (`dynamic_bounds_relro`): once the headers map what
        // it will name, its changed entries are written over the old ones.
        let capacity = d.capacity();
        let old = encode_dynamic(input.format, &d.slots, capacity);
        let new = encode_dynamic(input.format, &final_dynamic, capacity);
        dynamic_diff(&mut w, d.offset, &old, &new);
    }
    // Once the section header table moved, its old copy is not written to.
    let original: Vec<Shdr>;
    let cleanup_shdrs = match table_end {
        Some(_) => {
            original = elf.sections.iter().map(|x| x.shdr).collect();
            &original
        }
        None => &sections.shdrs,
    };
    cleanup(
        input,
        placed,
        &mut w,
        &segment,
        &strings,
        &headers,
        cleanup_shdrs,
    );
    end = end.max(table_end.unwrap_or(0));
    let fixups = w.symbol_fixups(&sections.shdrs, sections.moves);
    let layout = match segment.site.mode {
        Mode::None => Layout::Grown {
            moved: sections.names,
        },
        mode => Layout::Appended {
            extended: matches!(mode, Mode::Extend(_)),
            moved_phdrs: segment.table_moved(),
            moved: sections.names,
        },
    };
    w.finish(layout, end, fixups)
}

/// Phase 1: the site of the segment, what moves into it, and where each item lands.
fn lay_out(
    input: &Input<'_>,
    placed: &Placed,
    strings: &NewStrings,
    versions: &NewVersions,
    entries_changed: bool,
    tail: Option<TailRoom>,
) -> Result<AppendedSegment> {
    let elf = input.elf;
    let strtab_offset = elf.strtab.as_ref().map_or(0, |s| s.offset);
    let site = match tail {
        Some(t) if !tail_needs_segment(input, placed, t, versions, entries_changed) => Site {
            mode: Mode::None,
            base: SegmentBase {
                offset: 0,
                vaddr: 0,
                align: 1,
            },
        },
        _ => {
            let floor = tail.map(|t| {
                let p = &elf.phdrs[t.load];
                let end = t.load_end(p.offset_end());
                (end, p.p_vaddr + (end - p.p_offset))
            });
            choose_site_above(input, &placed.table, note_extra_phdrs(input, placed), floor)?
        }
    };
    let block = match site.mode {
        Mode::New(Room::Block(block)) => Some(block),
        _ => None,
    };
    // Room made after the program headers by moving the string table (or tables after it)
    // leaves nothing to grow in place: the table is copied.
    let tail = tail
        .filter(|t| block.is_none_or(|b| b.end <= strtab_offset || b.start >= t.load_end(t.start)));
    let selection = select(
        input,
        placed,
        block,
        tail,
        strings,
        versions,
        entries_changed,
    )?;
    let mut items = items(
        input, placed, site.mode, block, tail, &selection, strings, versions,
    );
    let extent = place(input, site.base, &mut items)?;
    let mut moved: Vec<BlockMove> = block
        .zip(items.iter().find(|i| i.kind == ItemKind::Block))
        .map(|(block, item)| BlockMove {
            block,
            old_vaddr: elf.offset_to_vaddr(block.start, 1).unwrap_or(0),
            new_offset: item.offset,
            new_vaddr: item.vaddr,
            what: "the sections after the program headers",
        })
        .into_iter()
        .collect();
    if let Some((t, block)) = tail.and_then(|t| t.block.map(|b| (t, b))) {
        let p = &elf.phdrs[t.load];
        let (new_offset, new_vaddr) =
            match (t.home, items.iter().find(|i| i.kind == ItemKind::TailBlock)) {
                (Some(home), _) => (home, p.p_vaddr + (home - p.p_offset)),
                (None, Some(item)) => (item.offset, item.vaddr),
                (None, None) => unreachable!("a tail block without a home is an item"),
            };
        moved.push(BlockMove {
            block,
            old_vaddr: p.p_vaddr + (block.start - p.p_offset),
            new_offset,
            new_vaddr,
            what: "the tables after the string table",
        });
    }
    Ok(AppendedSegment {
        site,
        tail,
        selection,
        items,
        extent,
        moved,
    })
}

/// How the string table grows where it is, when it grows and can (`tail.rs`). Edits that
/// switch other things with the strings (the interpreter, the note, renamed symbols, added
/// program headers) need the one-write switch of the copy: they copy the table. So do
/// strings that go over bytes in use before the edit, which switch on their own.
fn tail_growth(input: &Input<'_>, placed: &Placed, strings: &NewStrings) -> Option<TailRoom> {
    let grows_alone = strings.alloc.grows()
        && !strings.live_writes
        && placed.interp.is_none()
        && placed.note == NoteChange::Keep
        && placed.symbols.renames.is_empty()
        && placed.table.added.is_empty();
    grows_alone
        .then(|| tail_room(input, strings.alloc.appended.len() as u64))
        .flatten()
}

/// Whether growing the string table where it is still needs the appended segment: for the
/// tables in its way that do not fit in their load's tail, for a dynamic array in the way or
/// too full for the entries, for rewritten version tables.
fn tail_needs_segment(
    input: &Input<'_>,
    placed: &Placed,
    tail: TailRoom,
    versions: &NewVersions,
    entries_changed: bool,
) -> bool {
    let tables = input.tables;
    (tail.block.is_some() && tail.home.is_none())
        || tail.dynamic_in_way
        || (entries_changed && !dynamic_fits(input, placed))
        || (versions.verneed.is_some() && tables.verneed.is_some())
        || (versions.versym.is_some() && tables.versym.is_some())
}

/// Whether the new entries fit in the dynamic array's slots, a `DT_NULL` included.
fn dynamic_fits(input: &Input<'_>, placed: &Placed) -> bool {
    let capacity = input.elf.dynamic.as_ref().map_or(0, |d| d.capacity());
    placed.entries.len() < capacity
}

/// Whether the dynamic array begins or ends a `PT_GNU_RELRO` segment. GNU strip and objcopy
/// rebuild that segment from the sections it covers: with `.dynamic` moved out (mold puts
/// it first), the segment would start at the next section while keeping its size, and reach
/// past the `PT_LOAD` that maps it.
fn dynamic_bounds_relro(input: &Input<'_>) -> bool {
    let elf = input.elf;
    let Some(d) = elf.dynamic.as_ref() else {
        return false;
    };
    let size = (d.capacity() * input.format.dyn_size()) as u64;
    elf.phdrs
        .iter()
        .filter(|p| p.p_type == elf::PT_GNU_RELRO)
        .any(|p| d.vaddr == p.p_vaddr || d.vaddr + size == p.p_vaddr + p.p_memsz)
}

/// What moves into the segment.
fn select(
    input: &Input<'_>,
    placed: &Placed,
    block: Option<Block>,
    tail: Option<TailRoom>,
    strings: &NewStrings,
    versions: &NewVersions,
    entries_changed: bool,
) -> Result<Selection> {
    let elf = input.elf;
    let tables = input.tables;
    let verneed_region = tables.verneed.as_ref().map(|(r, _)| *r);
    let copy_strtab =
        tail.is_none() && elf.strtab.is_some() && (strings.alloc.grows() || strings.live_writes);
    let verneed = versions.verneed.is_some() && verneed_region.is_some();
    let versym = versions.versym.is_some() && tables.versym.is_some();
    let block_moves_tables = block.is_some_and(|b| dynamic_refs_in(input, b.start, b.end));
    let symbols = symbol_tables(input, placed, strings)?;
    // Growing in place, the array is written in place when it can be: the switch takes
    // several writes anyway (`tail.rs`). It moves when it is in the strings' way, too full,
    // or must switch with the program headers (tables it names moved out of their way).
    let dynamic = elf.dynamic.is_some()
        && match tail {
            Some(t) => {
                t.dynamic_in_way
                    || (entries_changed && !dynamic_fits(input, placed))
                    || (block_moves_tables && !dynamic_bounds_relro(input))
            }
            // Where moving it would make strip rebuild PT_GNU_RELRO wrongly, and the new
            // entries fit, it is written in place after the switch (`commit_dynamic`).
            None if dynamic_bounds_relro(input) && dynamic_fits(input, placed) => false,
            None => {
                entries_changed
                    || copy_strtab
                    || verneed
                    || versym
                    || block_moves_tables
                    || symbols.is_some()
            }
        };
    if dynamic {
        input.check_dynamic_editable()?;
    }
    let capacity = elf.dynamic.as_ref().map_or(0, |d| d.capacity());
    Ok(Selection {
        copy_strtab,
        interp: placed.interp.is_some(),
        verneed,
        versym,
        dynamic,
        verneed_bytes: versions
            .verneed
            .clone()
            .map(|b| pad(b, verneed_region.map_or(0, |r| r.size))),
        // Never smaller than before: a `_DYNAMIC` symbol's size (gold sets it) must still fit.
        dynamic_capacity: (placed.entries.len() + 1 + input.opts.dynamic_spare).max(capacity),
        symbols,
    })
}

/// The items of the segment, in the order they are placed.
fn items(
    input: &Input<'_>,
    placed: &Placed,
    mode: Mode,
    block: Option<Block>,
    tail: Option<TailRoom>,
    selection: &Selection,
    strings: &NewStrings,
    versions: &NewVersions,
) -> Vec<Item> {
    let elf = input.elf;
    let format = input.format;
    let mut items: Vec<Item> = Vec::new();
    if matches!(mode, Mode::New(Room::MoveTable)) {
        let size = (new_phnum(
            input,
            mode,
            placed.table.added.len() + note_extra_phdrs(input, placed),
        ) * format.phdr_size()) as u64;
        items.push(Item::new(ItemKind::PhdrTable, size, format.word_size()));
    }
    if let Some((t, block)) = tail.and_then(|t| t.block.map(|b| (t, b))) {
        if t.home.is_none() {
            let p = &elf.phdrs[t.load];
            let mut item = Item::new(ItemKind::TailBlock, block.end - block.start, block.align);
            item.congruent_to = Some(p.p_vaddr + (block.start - p.p_offset));
            items.push(item);
        }
    }
    if selection.copy_strtab {
        items.push(Item::new(ItemKind::StrTab, strings.new_size, 1));
    }
    if let (true, Some(bytes)) = (selection.verneed, &selection.verneed_bytes) {
        items.push(Item::new(ItemKind::Verneed, bytes.len() as u64, 8));
    }
    if let (true, Some(new)) = (selection.versym, &versions.versym) {
        items.push(Item::new(ItemKind::Versym, 2 * new.len() as u64, 2));
    }
    if let Some(symbols) = &selection.symbols {
        let word = format.word_size();
        items.push(Item::new(
            ItemKind::DynSym,
            symbols.dynsym.len() as u64,
            word,
        ));
        if let Some(hash) = &symbols.hash {
            let entry = input.tables.hash_info.map_or(4, |h| h.word);
            items.push(Item::new(ItemKind::Hash, hash.len() as u64, entry));
        }
        if let Some(gnu) = &symbols.gnu_hash {
            items.push(Item::new(ItemKind::GnuHash, gnu.len() as u64, word));
        }
    }
    if selection.dynamic {
        let size = (selection.dynamic_capacity * format.dyn_size()) as u64;
        items.push(Item::new(ItemKind::Dynamic, size, format.word_size()));
    }
    // What other segments describe (PT_INTERP, PT_NOTE) comes after the tables only
    // sections describe: see below.
    if let Some(block) = block {
        let mut item = Item::new(ItemKind::Block, block.end - block.start, block.align);
        item.congruent_to = elf.offset_to_vaddr(block.start, 1);
        items.push(item);
    }
    if selection.interp {
        let size = placed.interp.as_ref().map_or(0, |x| x.len() as u64 + 1);
        items.push(Item::new(ItemKind::Interp, size, 1));
    }
    if let Some(bytes) = new_note_bytes(input, placed) {
        let align = input.tables.note.as_ref().map_or(4, |n| n.align);
        items.push(Item::new(ItemKind::Note, bytes.len() as u64, align));
    }
    // llvm-objcopy and llvm-strip make a segment that starts where an earlier entry of the
    // table starts (PT_INTERP, PT_NOTE, PT_DYNAMIC) the child of that entry, and lay it out
    // at the entry's alignment: the new PT_LOAD would land off its page congruence and the
    // loader refuse the file. A new segment that would start with such bytes starts with a
    // word of zeros instead. (The program header table, when it moves, stays first: GNU
    // objcopy lays a segment that holds it out with the table at its start.)
    let described_by_segment = |kind: ItemKind| {
        matches!(
            kind,
            ItemKind::Block | ItemKind::Interp | ItemKind::Note | ItemKind::Dynamic
        )
    };
    if matches!(mode, Mode::New(_)) && items.first().is_some_and(|i| described_by_segment(i.kind)) {
        items.insert(0, Item::new(ItemKind::Pad, format.word_size(), 1));
    }
    items
}

/// Where the tables the dynamic array points to are once the segment is laid out.
fn table_addresses(input: &Input<'_>, segment: &AppendedSegment) -> TableAddresses {
    let elf = input.elf;
    let strtab = strtab_or_empty(elf);
    TableAddresses {
        strtab: segment
            .item(ItemKind::StrTab)
            .map_or_else(|| segment.relocate(strtab.vaddr), |item| item.vaddr),
        dynsym: segment.item(ItemKind::DynSym).map(|item| item.vaddr),
        hash: segment.item(ItemKind::Hash).map(|item| item.vaddr),
        gnu_hash: segment.item(ItemKind::GnuHash).map(|item| item.vaddr),
        verneed: segment.item(ItemKind::Verneed).map(|item| item.vaddr),
        versym: segment.item(ItemKind::Versym).map(|item| item.vaddr),
        dynamic: segment.item(ItemKind::Dynamic).map_or_else(
            || elf.dynamic.as_ref().map_or(0, |d| d.vaddr),
            |item| item.vaddr,
        ),
    }
}

/// The dynamic array a growing edit switches to first: the old entries, pointing at what
/// moved, at the array's place after the edit (`tail.rs`).
fn interim_array(input: &Input<'_>, segment: &AppendedSegment) -> Vec<Dyn> {
    let elf = input.elf;
    let at = TableAddresses {
        strtab: strtab_or_empty(elf).vaddr,
        dynsym: None,
        hash: None,
        gnu_hash: None,
        verneed: None,
        versym: None,
        dynamic: segment.dynamic_at(elf).map_or(0, |(_, vaddr)| vaddr),
    };
    interim_dynamic(input, &at, &|vaddr| segment.relocate(vaddr))
}

/// Phase 2: the segment's bytes, where nothing points yet.
fn stage(
    input: &Input<'_>,
    placed: &Placed,
    w: &mut Writes<'_>,
    segment: &AppendedSegment,
    strings: &NewStrings,
    versions: &NewVersions,
    final_dynamic: &[Dyn],
) -> Result<()> {
    let elf = input.elf;
    let format = input.format;
    let strtab = strtab_or_empty(elf);
    let selection = &segment.selection;
    for m in &segment.moved {
        let block = m.block;
        w.push(
            m.new_offset,
            Data::Copy(block.start),
            block.end - block.start,
            Phase::Stage,
            &format!("copy of {}", m.what),
        );
        // Bytes of the block that nothing describes (padding, or what an earlier editor left
        // there: patchelf leaves old string tables behind) do not travel: nothing can refer
        // to them at their new address, and old strings must not survive the edit.
        let described = described(input, block.start, block.end);
        for (lo, hi) in strings::subtract(&[(block.start, block.end)], &described) {
            w.push(
                m.new_offset + (lo - block.start),
                Data::Zero,
                hi - lo,
                Phase::Stage,
                "undescribed bytes in the moved block",
            );
        }
    }
    // Stale copies of what moves again on its own: old strings must not linger.
    if selection.copy_strtab && segment.in_block(strtab.offset) {
        w.push(
            segment.translate(strtab.offset),
            Data::Zero,
            strtab.size,
            Phase::Stage,
            "stale string table in the moved block",
        );
    }
    if let (true, Some(interp)) = (selection.interp, elf.interp.as_ref()) {
        if segment.in_block(interp.offset) {
            w.push(
                segment.translate(interp.offset),
                Data::Zero,
                interp.capacity,
                Phase::Stage,
                "stale interpreter in the moved block",
            );
        }
    }
    // New strings in room nothing used before the edit go in now; in room something used,
    // after the switch (`grow_commit`).
    if let Some(t) = segment.tail.filter(|t| !t.strings_after_switch()) {
        let bytes = strings.alloc.appended.clone();
        w.push_bytes(t.start, bytes, Phase::Stage, "new strings");
    }
    if !selection.copy_strtab && elf.strtab.is_some() {
        // Only unreferenced bytes get strings (no live writes, or the table would be copied).
        for (at, bytes) in strings.alloc.writes.clone() {
            let offset = segment.translate(strtab.offset + at);
            w.push_bytes(offset, bytes, Phase::Stage, "string");
        }
        if segment.in_block(strtab.offset) {
            for (start, end) in strings.alloc.garbage.clone() {
                w.push(
                    segment.translate(strtab.offset + start),
                    Data::Zero,
                    end - start,
                    Phase::Stage,
                    "unreferenced strings in the moved copy",
                );
            }
        }
    }
    if let Some(item) = segment.item(ItemKind::Pad) {
        w.push(
            item.offset,
            Data::Zero,
            item.size,
            Phase::Stage,
            "segment start",
        );
    }
    if let Some(item) = segment.item(ItemKind::StrTab) {
        // The one place the whole table is read: it moves, and its copy is written here.
        let mut bytes = input.dynstr.all()?.into_owned();
        for (at, new) in &strings.alloc.writes {
            bytes[*at as usize..*at as usize + new.len()].copy_from_slice(new);
        }
        for (start, end) in &strings.alloc.garbage {
            bytes[*start as usize..*end as usize].fill(0);
        }
        bytes.extend_from_slice(&strings.alloc.appended);
        w.push_bytes(item.offset, bytes, Phase::Stage, "dynamic string table");
    }
    if let Some(item) = segment.item(ItemKind::Interp) {
        let mut bytes = placed.interp.clone().unwrap_or_default();
        bytes.push(0);
        w.push_bytes(item.offset, bytes, Phase::Stage, "interpreter path");
    }
    if let (Some(item), Some(bytes)) = (
        segment.item(ItemKind::Verneed),
        &segment.selection.verneed_bytes,
    ) {
        w.push_bytes(item.offset, bytes.clone(), Phase::Stage, "version needs");
    }
    if let (Some(item), Some(new)) = (segment.item(ItemKind::Versym), &versions.versym) {
        let bytes: Vec<u8> = new.iter().flat_map(|&x| format.put_u16(x)).collect();
        w.push_bytes(item.offset, bytes, Phase::Stage, "symbol versions");
    }
    if let Some(symbols) = &selection.symbols {
        let tables = [
            (ItemKind::DynSym, Some(&symbols.dynsym), "dynamic symbols"),
            (ItemKind::Hash, symbols.hash.as_ref(), "hash table"),
            (
                ItemKind::GnuHash,
                symbols.gnu_hash.as_ref(),
                "GNU hash table",
            ),
        ];
        for (kind, bytes, what) in tables {
            if let (Some(item), Some(bytes)) = (segment.item(kind), bytes) {
                w.push_bytes(item.offset, bytes.clone(), Phase::Stage, what);
            }
        }
    }
    if let Some(item) = segment.item(ItemKind::Dynamic) {
        let bytes = encode_dynamic(format, final_dynamic, selection.dynamic_capacity);
        w.push_bytes(item.offset, bytes, Phase::Stage, "dynamic section");
    }
    stage_note(input, placed, w, segment);
    Ok(())
}

/// The new note in the segment; a copy of the old one in the moved block does not survive.
fn stage_note(input: &Input<'_>, placed: &Placed, w: &mut Writes<'_>, segment: &AppendedSegment) {
    if let (Some(item), Some(bytes)) = (segment.item(ItemKind::Note), new_note_bytes(input, placed))
    {
        w.push_bytes(item.offset, bytes, Phase::Stage, "resolution-cache note");
    }
    if let (Some(n), false) = (input.tables.note.as_ref(), placed.note == NoteChange::Keep) {
        if segment.in_block(n.offset) {
            let at = segment.translate(n.offset);
            let what = "old resolution-cache note in the moved block";
            w.push(at, Data::Zero, n.size, Phase::Stage, what);
        }
    }
}

/// Phase 4: sections follow their contents; symbols defined in them follow the sections.
fn move_sections(
    input: &Input<'_>,
    placed: &Placed,
    w: &Writes<'_>,
    segment: &AppendedSegment,
    versions: &NewVersions,
    strings: &NewStrings,
) -> SectionMoves {
    let elf = input.elf;
    let tables = input.tables;
    let mut shdrs: Vec<Shdr> = elf.sections.iter().map(|x| x.shdr).collect();
    let mut moves: Vec<SectionMove> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for moved in &segment.moved {
        let block = moved.block;
        for section in elf.sections.iter() {
            let sh = section.shdr;
            // An empty section inside the block moves too: the dynamic tags that point at
            // its address (an empty .dynsym or .rela.dyn) are rebased with the block, and
            // its header must keep describing the same place.
            let empty =
                sh.sh_size == 0 && sh.sh_type != elf::SHT_NOBITS && sh.sh_type != elf::SHT_NULL;
            if sh.is_alloc()
                && (sh.has_file_bytes() || empty)
                && sh.sh_offset >= block.start
                && sh.sh_offset < block.end
                && sh.sh_offset + sh.sh_size <= block.end
            {
                w.note_move(
                    &mut shdrs,
                    &mut moves,
                    section.index,
                    segment.translate(sh.sh_offset),
                    segment.relocate(sh.sh_addr),
                    sh.sh_size,
                );
                names.push(String::from_utf8_lossy(&section.name).into_owned());
            }
        }
        if elf.sections.is_empty() {
            names.push(format!(
                "{} bytes after the program headers",
                block.end - block.start
            ));
        }
    }
    // The string table that grew where it is keeps its place and takes its new size.
    if let (Some(_), Some(index)) = (segment.tail, elf.strtab.as_ref().and_then(|s| s.section)) {
        shdrs[index].sh_size = strings.new_size;
    }
    // What moved on its own, and its section when it has one.
    let verneed_region = tables.verneed.as_ref().map(|(r, _)| *r);
    let versym_region = tables.versym.as_ref().map(|(r, _)| *r);
    let own_moves = [
        (
            ItemKind::StrTab,
            elf.strtab.as_ref().and_then(|s| s.section),
            ".dynstr",
        ),
        (
            ItemKind::Interp,
            elf.interp.as_ref().and_then(|i| i.section),
            ".interp",
        ),
        (
            ItemKind::Verneed,
            section_at(elf, elf::SHT_GNU_VERNEED, verneed_region),
            ".gnu.version_r",
        ),
        (
            ItemKind::Versym,
            section_at(elf, elf::SHT_GNU_VERSYM, versym_region),
            ".gnu.version",
        ),
        (
            ItemKind::DynSym,
            tables.dynsym.as_ref().and_then(|s| s.section),
            ".dynsym",
        ),
        (
            ItemKind::Hash,
            section_at(elf, elf::SHT_HASH, tables.hash),
            ".hash",
        ),
        (
            ItemKind::GnuHash,
            section_at(elf, elf::SHT_GNU_HASH, tables.gnu_hash),
            ".gnu.hash",
        ),
        (
            ItemKind::Dynamic,
            elf.dynamic.as_ref().and_then(|d| d.section),
            ".dynamic",
        ),
    ];
    for (kind, section, name) in own_moves {
        if let Some(item) = segment.item(kind) {
            if let Some(index) = section {
                let (offset, vaddr, size) = (item.offset, item.vaddr, item.size);
                w.note_move(&mut shdrs, &mut moves, index, offset, vaddr, size);
            }
            names.push(name.to_string());
        }
    }
    if segment.table_moved() {
        names.push("program headers".into());
    }
    let note = segment.item(ItemKind::Note);
    note_shdrs(
        input,
        &placed.note,
        &mut shdrs,
        note.map(|i| (i.offset, i.vaddr, i.size)),
    );
    if note.is_some() {
        names.push(".note.nixos.ldcache".into());
    }
    names.dedup();
    version_section_counts(input, &mut shdrs, versions);
    SectionMoves {
        shdrs,
        moves,
        names,
    }
}

/// Phase 5: one write of the file header and program headers when they are adjacent.
fn commit(input: &Input<'_>, w: &mut Writes<'_>, segment: &AppendedSegment, headers: &NewHeaders) {
    let elf = input.elf;
    let format = input.format;
    let header = &headers.header;
    let phdr_bytes: Vec<u8> = headers
        .phdrs
        .iter()
        .flat_map(|p| format.encode_phdr(p))
        .collect();
    let header_bytes = format.encode_header(header);
    if let Some(item) = segment.item(ItemKind::PhdrTable) {
        let offset = item.offset;
        w.push_bytes(offset, phdr_bytes, Phase::Stage, "program header table");
        w.push_bytes(0, header_bytes, Phase::Commit, ELF_HEADER);
    } else if header.e_phoff == header_bytes.len() as u64 && *header != elf.header {
        let mut bytes = header_bytes;
        bytes.extend_from_slice(&phdr_bytes);
        w.push_bytes(0, bytes, Phase::Commit, ELF_AND_PROGRAM_HEADERS);
    } else {
        // Unchanged when nothing was added or extended (a string table grown in its own
        // room, `tail.rs`).
        let old_phdrs: Vec<u8> = elf
            .phdrs
            .iter()
            .flat_map(|p| format.encode_phdr(p))
            .collect();
        if phdr_bytes != old_phdrs {
            w.push_bytes(header.e_phoff, phdr_bytes, Phase::Commit, "program headers");
        }
        if *header != elf.header {
            w.push_bytes(0, header_bytes, Phase::Commit, ELF_HEADER);
        }
    }
}

/// Phase 6: section headers, then zero what nothing refers to any more.
fn cleanup(
    input: &Input<'_>,
    placed: &Placed,
    w: &mut Writes<'_>,
    segment: &AppendedSegment,
    strings: &NewStrings,
    headers: &NewHeaders,
    shdrs: &[Shdr],
) {
    let elf = input.elf;
    let format = input.format;
    let strtab = strtab_or_empty(elf);
    w.section_header_writes(shdrs);
    let mut dead: Vec<Range> = Vec::new();
    let mut live: Vec<Range> = Vec::new();
    for m in &segment.moved {
        let block = (m.block.start, m.block.end);
        if segment.tail.is_some_and(|t| t.block == Some(m.block)) {
            // The tables that moved out of the string table's way hold no strings, and the
            // strings go over the first of them: only bytes nothing described (an earlier
            // editor's leftovers) are zeroed, not megabytes of old hash tables.
            let described = described(input, block.0, block.1);
            dead.extend(strings::subtract(&[block], &described));
        } else {
            dead.push(block);
        }
    }
    if let Some(t) = segment.tail {
        live.push((t.start, t.strings_end()));
    }
    if segment.selection.copy_strtab {
        dead.push((strtab.offset, strtab.offset + strtab.size));
    } else if elf.strtab.is_some() && !segment.in_block(strtab.offset) {
        dead.extend(
            strings
                .alloc
                .garbage
                .iter()
                .map(|(start, end)| (strtab.offset + start, strtab.offset + end)),
        );
    }
    if let (true, Some(interp)) = (segment.selection.interp, elf.interp.as_ref()) {
        dead.push((interp.offset, interp.offset + interp.capacity));
    }
    if let (Some(n), false) = (input.tables.note.as_ref(), placed.note == NoteChange::Keep) {
        dead.push((n.offset, n.offset + n.size));
    }
    let header = &headers.header;
    if !segment.table_moved() && header.e_phnum != elf.header.e_phnum {
        let table_len = (headers.phdrs.len() * format.phdr_size()) as u64;
        live.push((header.e_phoff, header.e_phoff + table_len));
    }
    for (start, end) in strings::subtract(&strings::merge(&mut dead), &strings::merge(&mut live)) {
        w.push(
            start,
            Data::Zero,
            end - start,
            Phase::Cleanup,
            "unreferenced bytes",
        );
    }
}
