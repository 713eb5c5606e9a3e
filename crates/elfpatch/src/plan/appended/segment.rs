//! The appended edit's first phase: where the segment goes (`site.rs`: the last `PT_LOAD`
//! extended, or a new one with room for its program header, `room.rs`), what moves into it
//! ([`Selection`]) and where each item lands, or how the string table grows where it is instead
//! (`tail.rs`). The later phases (`mod.rs`, `headers.rs`, `commit.rs`) share the result, an
//! [`AppendedSegment`].

use object::elf;

use super::room::{dynamic_refs_in, Block, Room};
use super::site::{
    choose_site_above, new_phnum, place, Extent, Item, ItemKind, Mode, SegmentBase, Site,
};
use super::tail::{tail_room, TailRoom};
use crate::error::Result;
use crate::format::Dyn;
use crate::plan::contents::{interim_dynamic, pad, strtab_or_empty, TableAddresses};
use crate::plan::input::Input;
use crate::plan::note_edit::NoteChange;
use crate::plan::note_writes::{new_note_bytes, note_extra_phdrs};
use crate::plan::placed::Placed;
use crate::plan::symbols::{symbol_tables, SymbolTables};

/// What moves into the appended segment. Live data that changes is copied, so that only the
/// commit write touches anything the old file uses.
pub(super) struct Selection {
    /// The string table grows, or a new string goes over bytes in use: it is copied.
    pub(super) copy_strtab: bool,
    /// The interpreter path moves.
    pub(super) interp: bool,
    /// The version need records move (rewritten).
    pub(super) verneed: bool,
    /// The symbol versions move (rewritten).
    pub(super) versym: bool,
    /// The dynamic array moves: its entries change, or a table it points to moves.
    pub(super) dynamic: bool,
    /// The version need records, padded to the old table's size, when they change.
    pub(super) verneed_bytes: Option<Vec<u8>>,
    /// Slots of the moved dynamic array.
    pub(super) dynamic_capacity: usize,
    /// The symbol and hash tables after renames: they move, rewritten.
    pub(super) symbols: Option<SymbolTables>,
}

/// A contiguous range moved, unchanged: from after the program headers to the new segment, or
/// from after the string table out of its way (`tail.rs`).
#[derive(Clone, Copy)]
pub(super) struct BlockMove {
    pub(super) block: Block,
    pub(super) old_vaddr: u64,
    pub(super) new_offset: u64,
    pub(super) new_vaddr: u64,
    /// What it is, for the writes.
    pub(super) what: &'static str,
}

/// The appended segment once laid out: what the later phases share.
pub(super) struct AppendedSegment {
    pub(super) site: Site,
    /// How the string table grows where it is, when it does.
    pub(super) tail: Option<TailRoom>,
    pub(super) selection: Selection,
    pub(super) items: Vec<Item>,
    pub(super) extent: Extent,
    /// The blocks that moved, with where they went.
    pub(super) moved: Vec<BlockMove>,
}

impl AppendedSegment {
    pub(super) fn item(&self, kind: ItemKind) -> Option<&Item> {
        self.items.iter().find(|i| i.kind == kind)
    }

    /// Whether the program header table moves into the segment.
    pub(super) fn table_moved(&self) -> bool {
        matches!(self.site.mode, Mode::New(Room::MoveTable))
    }

    /// The moved block holding file offset `offset`.
    pub(super) fn move_of(&self, offset: u64) -> Option<&BlockMove> {
        self.moved
            .iter()
            .find(|m| offset >= m.block.start && offset < m.block.end)
    }

    /// Whether file offset `offset` lies in a moved block.
    pub(super) fn in_block(&self, offset: u64) -> bool {
        self.move_of(offset).is_some()
    }

    /// Where the byte at file offset `offset` is once the blocks moved.
    pub(super) fn translate(&self, offset: u64) -> u64 {
        match self.move_of(offset) {
            Some(m) => offset - m.block.start + m.new_offset,
            None => offset,
        }
    }

    /// Where address `vaddr` is once the blocks moved.
    pub(super) fn relocate(&self, vaddr: u64) -> u64 {
        self.moved
            .iter()
            .find(|m| vaddr >= m.old_vaddr && vaddr < m.old_vaddr + (m.block.end - m.block.start))
            .map_or(vaddr, |m| vaddr - m.old_vaddr + m.new_vaddr)
    }

    /// Where the dynamic array is after the edit: its item in the segment, or where it was.
    pub(super) fn dynamic_at(&self, elf: &crate::Elf) -> Option<(u64, u64)> {
        match self.item(ItemKind::Dynamic) {
            Some(item) => Some((item.offset, item.vaddr)),
            None => elf.dynamic.as_ref().map(|d| (d.offset, d.vaddr)),
        }
    }
}

/// Phase 1: the site of the segment, what moves into it, and where each item lands.
pub(super) fn lay_out(
    input: &Input<'_>,
    placed: &Placed,
    tail: Option<TailRoom>,
) -> Result<AppendedSegment> {
    let elf = input.elf;
    let strtab_offset = elf.strtab.as_ref().map_or(0, |s| s.offset);
    let site = match tail {
        Some(t) if !tail_needs_segment(input, placed, t) => Site {
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
    let selection = select(input, placed, block, tail)?;
    let mut items = items(input, placed, site.mode, block, tail, &selection);
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
pub(super) fn tail_growth(input: &Input<'_>, placed: &Placed) -> Option<TailRoom> {
    let strings = &placed.strings;
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
fn tail_needs_segment(input: &Input<'_>, placed: &Placed, tail: TailRoom) -> bool {
    let versions = &placed.versions;
    let entries_changed = placed.entries_changed;
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
) -> Result<Selection> {
    let strings = &placed.strings;
    let versions = &placed.versions;
    let entries_changed = placed.entries_changed;
    let elf = input.elf;
    let tables = input.tables;
    let verneed_region = tables.verneed.as_ref().map(|(r, _)| *r);
    let copy_strtab =
        tail.is_none() && elf.strtab.is_some() && (strings.alloc.grows() || strings.live_writes);
    let verneed = versions.verneed.is_some() && verneed_region.is_some();
    let versym = versions.versym.is_some() && tables.versym.is_some();
    let block_moves_tables = block.is_some_and(|b| dynamic_refs_in(input, b.start, b.end));
    let symbols = symbol_tables(input, placed)?;
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
) -> Vec<Item> {
    let strings = &placed.strings;
    let versions = &placed.versions;
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
pub(super) fn table_addresses(input: &Input<'_>, segment: &AppendedSegment) -> TableAddresses {
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
pub(super) fn interim_array(input: &Input<'_>, segment: &AppendedSegment) -> Vec<Dyn> {
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
