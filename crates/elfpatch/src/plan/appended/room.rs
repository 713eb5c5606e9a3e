//! Room for one more program header, which a new `PT_LOAD` needs: a `PT_NULL` entry to reuse,
//! free bytes after the table, room made by moving the read-only tables that follow it
//! (`.interp`, notes, hash tables, `.dynsym`, `.dynstr`, version tables) into the new segment, or
//! a shared library's `PT_PHDR` entry (before a block over 64 KiB); only when none of that works
//! does the table itself move, the one layout GNU strip does not keep (docs/elfpatch.md, "After
//! the edit").
//!
//! What may move is decided from what occupies the bytes after the table: sections when there are
//! section headers, and always the regions the program headers and the dynamic array describe.

use object::elf;

use crate::error::{Error, Result};
use crate::plan::header::NewTable;
use crate::plan::input::Input;
use crate::plan::strings::{self, Range};
use crate::plan::tags::{
    is_fixed_address_tag, is_read_only_table_type, is_relocation_tag, DT_RELR, DT_RELRSZ, SHT_RELR,
};

/// Above this size, a library moves its program header table rather than the block after it.
const LARGE_BLOCK: u64 = 64 << 10;

/// How to make room for one more program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::plan) enum Room {
    /// Reuse the `PT_NULL` entry with this index.
    NullSlot(usize),
    /// Reuse the `PT_PHDR` entry (this index) of a shared library: no loader needs it there
    /// (glibc, musl and bionic find a library's table through the `PT_LOAD` that maps it, as in
    /// every library GNU ld links, which has no `PT_PHDR`), and the table stays where it is.
    PhdrSlot(usize),
    /// The bytes after the table are free.
    Slack,
    /// Move this block out of the way.
    Block(Block),
    /// Move the table itself.
    MoveTable,
}

/// A contiguous range right after the program header table, moved to make room for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::plan) struct Block {
    pub(in crate::plan) start: u64,
    pub(in crate::plan) end: u64,
    /// The largest alignment of what it holds (at most a page).
    pub(in crate::plan) align: u64,
}

/// Something the file describes: a section, a segment other than `PT_LOAD`, a table the dynamic
/// array points to, or a byte an address points at.
#[derive(Clone, Debug)]
pub(in crate::plan) struct Occupant {
    pub(in crate::plan) start: u64,
    pub(in crate::plan) end: u64,
    /// Whether it may move with the block.
    pub(in crate::plan) movable: bool,
    /// Whether it is a relocation table the dynamic array points to (`DT_RELA`, `DT_REL`,
    /// `DT_JMPREL`, `DT_RELR`) or a section of one: the loader finds it only through those
    /// tags, so it may move out of the string table's way (`tail.rs`), though never with the
    /// block after the program headers.
    pub(in crate::plan) relocations: bool,
    pub(in crate::plan) align: u64,
}

/// How to make room for `entries` more program headers (a `PT_NULL` entry holds only one),
/// the `PT_NULL` entry `taken` being spoken for already.
pub(in crate::plan) fn find_room(
    input: &Input<'_>,
    taken: Option<usize>,
    entries: usize,
) -> Result<Room> {
    let elf = input.elf;
    let format = input.format;
    let free_null = elf
        .phdrs
        .iter()
        .enumerate()
        .position(|(i, p)| p.p_type == elf::PT_NULL && Some(i) != taken);
    if let (Some(i), 1) = (free_null, entries) {
        return Ok(Room::NullSlot(i));
    }
    if elf.phdrs.len() + entries >= usize::from(elf::PN_XNUM) {
        return Err(Error::unsupported("too many program headers to add one"));
    }
    // When the block after the table cannot move, or is large, a library gives up its
    // PT_PHDR rather than moving the table: the post-processors that run after us (GNU
    // strip and objcopy, eu-strip, llvm-strip) all expect the table where linkers put it,
    // and each breaks a file whose table moved into a segment of its own in its own way.
    let fallback = match (library_phdr_slot(input), entries) {
        (Some(i), 1) => Room::PhdrSlot(i),
        _ => Room::MoveTable,
    };
    let need = (entries * format.phdr_size()) as u64;
    let table_start = elf.header.e_phoff;
    let table_end = table_start + (elf.phdrs.len() * format.phdr_size()) as u64;
    let Some(load) = elf
        .loads()
        .find(|p| p.contains_offset(table_start, table_end - table_start))
    else {
        return Ok(fallback);
    };
    let load_end = load.offset_end();
    let occupants = occupants(input);
    if occupants
        .iter()
        .any(|o| o.start < table_end && o.end > table_start)
    {
        return Ok(fallback);
    }
    let next = occupants
        .iter()
        .map(|o| o.start)
        .filter(|&s| s >= table_end)
        .min()
        .unwrap_or(load_end)
        .min(load_end);
    // Free bytes right after the table, known to hold nothing (zeros, no occupant).
    let slack_is_zero = elf.phdr_tail.len() as u64 >= need
        && elf.phdr_tail[..need as usize].iter().all(|&b| b == 0);
    if next >= table_end + need && slack_is_zero {
        return Ok(Room::Slack);
    }
    // Move the shortest run of movable things that frees `need` bytes.
    let mut end = table_end;
    let mut align = format.word_size();
    let mut sorted: Vec<&Occupant> = occupants.iter().filter(|o| o.start >= table_end).collect();
    sorted.sort_by_key(|o| (o.start, o.end));
    let mut iter = sorted.iter().peekable();
    while end < table_end + need {
        let Some(o) = iter.next() else { break };
        if o.start > end && elf.sections.is_empty() && o.start - end >= 16 {
            // Unknown bytes between known regions: they may be anything.
            return Ok(fallback);
        }
        if !o.movable || o.end > load_end {
            return Ok(fallback);
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
                    return Ok(fallback);
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
        return Ok(fallback);
    }
    // Nothing we cannot update may point into the block: the entry point, or address tags
    // other than the table pointers we relocate.
    let lo = elf.offset_to_vaddr(table_end, 1).unwrap_or(0);
    let hi = lo + (end - table_end);
    if elf.header.e_entry >= lo && elf.header.e_entry < hi {
        return Ok(fallback);
    }
    if let Some(dynamic) = &elf.dynamic {
        for x in dynamic.entries() {
            if is_fixed_address_tag(x.tag) && x.val >= lo && x.val < hi {
                return Ok(fallback);
            }
        }
    }
    // A library with a PT_PHDR gives that entry to the new PT_LOAD rather than moving a
    // large block: the hash and symbol tables that follow the table are megabytes in a
    // library with many exports, copied and written at every such edit.
    if end - table_end > LARGE_BLOCK {
        if let Room::PhdrSlot(i) = fallback {
            return Ok(Room::PhdrSlot(i));
        }
    }
    Ok(Room::Block(Block {
        start: table_end,
        end,
        align: align.min(4096),
    }))
}

/// The index of the `PT_PHDR` entry a shared library can give up: the file has no
/// `PT_INTERP` (no kernel maps it as a program, so nothing reads `AT_PHDR` from it), names a
/// `DT_SONAME` or has no entry point (a static PIE program has neither), and has exactly one
/// `PT_PHDR`, which describes the table where `e_phoff` says it is.
fn library_phdr_slot(input: &Input<'_>) -> Option<usize> {
    let elf = input.elf;
    if elf.header.e_type != elf::ET_DYN || elf.interp.is_some() {
        return None;
    }
    if elf.soname().is_none() && elf.header.e_entry != 0 {
        return None;
    }
    let mut phdrs = elf
        .phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type == elf::PT_PHDR);
    let (i, p) = phdrs.next()?;
    (phdrs.next().is_none() && p.p_offset == elf.header.e_phoff).then_some(i)
}

/// Whether the entries `table` adds fit without a new segment: none, or zeros after the
/// table for them (a `PT_NULL` entry they could take is already in `table`).
pub(in crate::plan) fn table_grows_in_place(input: &Input<'_>, table: &NewTable) -> bool {
    table.added.is_empty()
        || matches!(
            find_room(input, table.taken_null, table.added.len()),
            Ok(Room::Slack)
        )
}

/// Whether a table the dynamic array points to overlaps `[start, end)` of the file.
pub(in crate::plan) fn dynamic_refs_in(input: &Input<'_>, start: u64, end: u64) -> bool {
    input
        .dynamic_regions()
        .iter()
        .any(|r| r.offset < end && start < r.end())
}

/// The parts of `[start, end)` that something the file describes occupies (a section, a
/// segment other than `PT_LOAD`, a table `.dynamic` points to), merged; the rest is padding or
/// bytes nothing refers to.
pub(in crate::plan) fn described(input: &Input<'_>, start: u64, end: u64) -> Vec<Range> {
    let mut ranges: Vec<Range> = occupants(input)
        .iter()
        .filter(|o| o.start < end && start < o.end)
        .map(|o| (o.start.max(start), o.end.min(end)))
        .collect();
    strings::merge(&mut ranges)
}

/// What occupies the file: sections when there are section headers, and every region the
/// program headers, the dynamic array and the entry point describe.
pub(in crate::plan) fn occupants(input: &Input<'_>) -> Vec<Occupant> {
    let mut out = segment_occupants(input);
    if !input.elf.sections.is_empty() {
        out.extend(section_occupants(input));
    }
    // What the dynamic array and the entry point describe counts too, sections or not: a file
    // may hold tables no section header covers, and the loader uses them all the same.
    out.extend(dynamic_occupants(input));
    out
}

/// Segments other than `PT_LOAD` and `PT_PHDR`; notes, `.interp` and properties may move.
fn segment_occupants(input: &Input<'_>) -> Vec<Occupant> {
    let movable_type = |t: u32| matches!(t, elf::PT_INTERP | elf::PT_NOTE | elf::PT_GNU_PROPERTY);
    input
        .elf
        .phdrs
        .iter()
        .filter(|p| p.p_type != elf::PT_LOAD && p.p_type != elf::PT_PHDR && p.p_filesz != 0)
        .map(|p| Occupant {
            start: p.p_offset,
            end: p.offset_end(),
            movable: movable_type(p.p_type),
            relocations: false,
            // A segment other than PT_LOAD only constrains where its bytes may go when its
            // alignment is a real one; a garbage p_align (0x3ff) must not set the block's.
            align: if p.p_align.is_power_of_two() {
                p.p_align
            } else {
                1
            },
        })
        .collect()
}

/// Sections with bytes in the file (read-only tables may move), and the section header table.
fn section_occupants(input: &Input<'_>) -> Vec<Occupant> {
    let elf = input.elf;
    let strtab_section = elf.strtab.as_ref().and_then(|s| s.section);
    let interp_section = elf.interp.as_ref().and_then(|i| i.section);
    let mut out = Vec::new();
    for section in elf.sections.iter() {
        let sh = section.shdr;
        if !sh.has_file_bytes() {
            continue;
        }
        // The ELF spec allows only 0 and powers of two; with anything else we cannot know
        // where the section may land, so it stays where it is.
        let sane_align = sh.sh_addralign <= 1 || sh.sh_addralign.is_power_of_two();
        let known_table =
            Some(section.index) == strtab_section || Some(section.index) == interp_section;
        let movable = sane_align
            && sh.is_alloc()
            && sh.sh_flags & u64::from(elf::SHF_WRITE | elf::SHF_EXECINSTR) == 0
            && (is_read_only_table_type(sh.sh_type) || known_table);
        let relocation_type = matches!(sh.sh_type, elf::SHT_RELA | elf::SHT_REL | SHT_RELR);
        out.push(Occupant {
            start: sh.sh_offset,
            end: sh.sh_offset.saturating_add(sh.sh_size),
            movable,
            relocations: sane_align
                && relocation_type
                && sh.is_alloc()
                && sh.sh_flags & u64::from(elf::SHF_WRITE | elf::SHF_EXECINSTR) == 0,
            align: sh.sh_addralign.max(1),
        });
    }
    if elf.header.e_shoff != 0 {
        let size = (elf.sections.len() * input.format.shdr_size()) as u64;
        out.push(Occupant {
            start: elf.header.e_shoff,
            end: elf.header.e_shoff.saturating_add(size),
            movable: false,
            relocations: false,
            align: 1,
        });
    }
    out
}

/// The tables the dynamic array points to (movable), the array itself, relocation and init
/// tables and every other address it holds (fixed), and the entry point (fixed).
fn dynamic_occupants(input: &Input<'_>) -> Vec<Occupant> {
    let elf = input.elf;
    let word = input.format.word_size();
    let fixed = |start: u64, end: u64| Occupant {
        start,
        end,
        movable: false,
        relocations: false,
        align: 1,
    };
    let mut out: Vec<Occupant> = input
        .dynamic_regions()
        .into_iter()
        .map(|r| Occupant {
            start: r.offset,
            end: r.end(),
            movable: true,
            relocations: false,
            align: word,
        })
        .collect();
    if let Some(dynamic) = &elf.dynamic {
        let size = (dynamic.capacity() * input.format.dyn_size()) as u64;
        out.push(fixed(dynamic.offset, dynamic.offset + size));
        let tables = [
            (elf::DT_RELA, elf::DT_RELASZ),
            (elf::DT_REL, elf::DT_RELSZ),
            (elf::DT_JMPREL, elf::DT_PLTRELSZ),
            (DT_RELR, DT_RELRSZ),
            (elf::DT_INIT_ARRAY, elf::DT_INIT_ARRAYSZ),
            (elf::DT_FINI_ARRAY, elf::DT_FINI_ARRAYSZ),
        ];
        for (address_tag, size_tag) in tables {
            if let (Some(vaddr), Some(size)) = (dynamic.get(address_tag), dynamic.get(size_tag)) {
                if let Some(offset) = elf.vaddr_to_offset(vaddr, size) {
                    let mut o = fixed(offset, offset.saturating_add(size.max(1)));
                    o.relocations = is_relocation_tag(u64::from(address_tag));
                    out.push(o);
                }
            }
        }
        for x in dynamic.entries() {
            if is_fixed_address_tag(x.tag) {
                if let Some(offset) = elf.vaddr_to_offset(x.val, 1) {
                    let mut o = fixed(offset, offset + 1);
                    o.relocations = is_relocation_tag(x.tag);
                    out.push(o);
                }
            }
        }
    }
    if let Some(offset) = elf.vaddr_to_offset(elf.header.e_entry, 1) {
        out.push(fixed(offset, offset + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use elfsynth::{AfterPhdrs, Class, Spec};
    use object::elf;

    use super::{find_room, Block, Room};
    use crate::plan::testing::{phdr_table_end, with_edited_input, with_input};
    use crate::plan::Options;

    fn room(spec: &Spec) -> Room {
        with_input(spec, &Options::default(), |input, _| {
            find_room(input, None, 1).unwrap()
        })
    }

    #[test]
    fn a_pt_null_entry_is_reused() {
        let spec = Spec {
            pt_null_slots: 2,
            ..Spec::default()
        };
        with_input(&spec, &Options::default(), |input, layout| {
            let first_null = layout
                .segments
                .iter()
                .position(|s| s.p_type == elf::PT_NULL);
            assert_eq!(
                find_room(input, None, 1).unwrap(),
                Room::NullSlot(first_null.unwrap())
            );
            // The first taken, the next one; none for two entries.
            let second = layout
                .segments
                .iter()
                .enumerate()
                .position(|(i, s)| s.p_type == elf::PT_NULL && Some(i) != first_null);
            assert_eq!(
                find_room(input, first_null, 1).unwrap(),
                Room::NullSlot(second.unwrap())
            );
            assert!(!matches!(
                find_room(input, None, 2).unwrap(),
                Room::NullSlot(_)
            ));
        });
    }

    #[test]
    fn zeros_after_the_table_are_room_enough() {
        for (class, entry) in [(Class::Elf64, 56), (Class::Elf32, 32)] {
            let spec = Spec {
                class,
                phdr_slack: entry,
                ..Spec::default()
            };
            assert_eq!(room(&spec), Room::Slack, "{class:?}");
            // One byte short of an entry: the tables after it move instead.
            let spec = Spec {
                phdr_slack: entry - 1,
                ..spec
            };
            assert!(matches!(room(&spec), Room::Block(_)), "{class:?}");
        }
    }

    #[test]
    fn the_read_only_tables_after_the_table_move_out_of_its_way() {
        for with_section_headers in [true, false] {
            let spec = Spec {
                with_section_headers,
                ..Spec::default()
            };
            with_input(&spec, &Options::default(), |input, layout| {
                let Room::Block(Block { start, end, align }) = find_room(input, None, 1).unwrap()
                else {
                    panic!("no block moved (section headers: {with_section_headers})");
                };
                // From the end of the table, over whole tables, at least one entry's worth.
                assert_eq!(start, phdr_table_end(layout, &spec));
                assert!(end - start >= 56);
                let interp = layout.section(".interp").unwrap();
                let note = layout.section(".note.gnu.build-id").unwrap();
                assert_eq!(interp.offset, start);
                assert!(end >= interp.offset + interp.size);
                assert!(
                    end == note.offset + note.size || end <= note.offset,
                    "the block ends inside the note"
                );
                assert!(align.is_power_of_two() && align <= 4096);
            });
        }
    }

    #[test]
    fn the_block_takes_every_table_a_section_would_split() {
        // .dynsym directly after the table: it moves whole, whatever its size.
        let spec = Spec {
            first_after_phdrs: AfterPhdrs::Dynsym,
            ..Spec::default()
        };
        with_input(&spec, &Options::default(), |input, layout| {
            let Room::Block(block) = find_room(input, None, 1).unwrap() else {
                panic!("no block moved");
            };
            let dynsym = layout.section(".dynsym").unwrap();
            assert_eq!(block.start, dynsym.offset);
            assert!(block.end >= dynsym.offset + dynsym.size);
            for s in &layout.sections {
                let starts_inside = s.offset >= block.start && s.offset < block.end;
                assert!(
                    !starts_inside || s.offset + s.size <= block.end,
                    "{} is cut by the block",
                    s.name
                );
            }
        });
    }

    #[test]
    fn a_library_gives_up_its_pt_phdr_rather_than_move_a_large_block() {
        // .dynsym right after the table, 20,000 symbols: a 480 KB block.
        let mut program = Spec {
            first_after_phdrs: AfterPhdrs::Dynsym,
            pt_phdr: true,
            ..Spec::default()
        };
        program
            .dynsyms
            .extend((0..20_000).map(|i| format!("exported_symbol_{i}")));
        let library = Spec {
            interp: None,
            soname: Some("libsynth.so.1".into()),
            ..program.clone()
        };
        let phdr_index = elfsynth::layout(&library)
            .unwrap()
            .segments
            .iter()
            .position(|p| p.p_type == elf::PT_PHDR)
            .unwrap();
        assert_eq!(room(&library), Room::PhdrSlot(phdr_index));
        // The table never moves away from where linkers put it when something else works:
        // without a PT_PHDR to give up, the large block moves.
        let no_phdr = Spec {
            pt_phdr: false,
            ..library.clone()
        };
        assert!(matches!(room(&no_phdr), Room::Block(b) if b.end - b.start > 64 << 10));
        // A program keeps its table where the kernel reads it (pitfall 11), and its PT_PHDR
        // (AT_PHDR): the block moves.
        assert!(matches!(room(&program), Room::Block(b) if b.end - b.start > 64 << 10));
        // A small block still moves in a library.
        let small = Spec {
            interp: None,
            ..Spec::default()
        };
        assert!(matches!(room(&small), Room::Block(_)));
    }

    #[test]
    fn a_library_with_nothing_movable_after_its_table_gives_up_its_pt_phdr() {
        let spec = Spec {
            interp: None,
            soname: Some("libsynth.so.1".into()),
            first_after_phdrs: AfterPhdrs::Text,
            pt_phdr: true,
            ..Spec::default()
        };
        assert!(matches!(room(&spec), Room::PhdrSlot(_)));
    }

    #[test]
    fn code_after_the_table_makes_the_table_move() {
        for with_section_headers in [true, false] {
            let spec = Spec {
                first_after_phdrs: AfterPhdrs::Text,
                with_section_headers,
                ..Spec::default()
            };
            assert_eq!(room(&spec), Room::MoveTable, "{with_section_headers}");
        }
    }

    #[test]
    fn the_entry_point_in_the_block_makes_the_table_move() {
        let spec = Spec::default();
        let interp = elfsynth::layout(&spec)
            .unwrap()
            .section(".interp")
            .unwrap()
            .addr;
        let set_entry = |elf: &mut crate::Elf| elf.header.e_entry = interp;
        with_edited_input(&spec, &Options::default(), set_entry, |input, _| {
            assert_eq!(find_room(input, None, 1).unwrap(), Room::MoveTable);
        });
    }
}
