//! Where the appended segment goes: the last `PT_LOAD` extended when it ends the file and the
//! address space, otherwise a new `PT_LOAD` above the image (with room for its program header,
//! see `room.rs`), and where each item lands inside it.

use object::elf;

use super::room::Room;
use crate::error::{Error, Result};
use crate::plan::appended::room::find_room;
use crate::plan::checked_align_up;
use crate::plan::header::NewTable;
use crate::plan::input::Input;

/// A thing placed in the appended segment.
#[derive(Clone, Debug)]
pub(in crate::plan) struct Item {
    pub(in crate::plan) kind: ItemKind,
    pub(in crate::plan) size: u64,
    pub(in crate::plan) align: u64,
    /// Keep `new_vaddr ≡ old_vaddr (mod align)` (for moved blocks with internal alignment).
    pub(in crate::plan) congruent_to: Option<u64>,
    /// Where it landed (filled in by [`place`]).
    pub(in crate::plan) offset: u64,
    pub(in crate::plan) vaddr: u64,
}

/// What an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::plan) enum ItemKind {
    PhdrTable,
    Block,
    /// The tables that moved out of the string table's way (`tail.rs`).
    TailBlock,
    StrTab,
    Interp,
    Verneed,
    Versym,
    DynSym,
    Hash,
    GnuHash,
    Dynamic,
    /// The resolution-cache note.
    Note,
    /// Zeros the segment starts with, so that no other segment starts where it does.
    Pad,
}

impl Item {
    pub(in crate::plan) fn new(kind: ItemKind, size: u64, align: u64) -> Item {
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

/// How the appended segment comes to be.
#[derive(Clone, Copy, Debug)]
pub(in crate::plan) enum Mode {
    /// Extend the last `PT_LOAD` (with this index): it ends the file and the address space.
    Extend(usize),
    /// Add a `PT_LOAD`, making room in the program header table this way.
    New(Room),
    /// No segment: what moves fits in the tails of the existing ones (`tail.rs`).
    None,
}

/// Where the appended segment starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::plan) struct SegmentBase {
    /// File offset of its first byte.
    pub(in crate::plan) offset: u64,
    /// Its address.
    pub(in crate::plan) vaddr: u64,
    /// Its `p_align`.
    pub(in crate::plan) align: u64,
}

/// The layout choice: how the segment comes to be, and where it starts.
#[derive(Clone, Copy, Debug)]
pub(in crate::plan) struct Site {
    pub(in crate::plan) mode: Mode,
    pub(in crate::plan) base: SegmentBase,
}

/// The placed segment.
#[derive(Clone, Copy, Debug)]
pub(in crate::plan) struct Extent {
    pub(in crate::plan) offset: u64,
    pub(in crate::plan) vaddr: u64,
    pub(in crate::plan) end_offset: u64,
    pub(in crate::plan) align: u64,
}

/// The largest `p_align` of the existing `PT_LOAD`s: the new one declares it too (glibc before
/// 2.35 checks every segment's congruence against the largest).
pub(in crate::plan) fn declared_align(input: &Input<'_>) -> u64 {
    input
        .elf
        .loads()
        .map(|p| p.p_align)
        .max()
        .unwrap_or(1)
        .max(1)
}

/// The alignment the new segment is placed with: the declared one, at least a 4 KiB page, and
/// `Options::page_size` when larger (congruent modulo it, so modulo the declared one too).
pub(in crate::plan) fn placement_align(input: &Input<'_>) -> u64 {
    input
        .opts
        .page_size
        .unwrap_or(0)
        .max(declared_align(input))
        .max(4096)
}

/// The last `PT_LOAD`, if appended data can simply extend it, and the file offset the data
/// starts at: where the segment ends when it ends the file, or the end of the file when only
/// a section header table that ends the file follows it (an earlier appended edit put it
/// there, `section_table.rs`). The extended segment then maps that old table, dead once the
/// edit writes the new one after the data: a table's worth of bytes per edit, rather than a
/// new `PT_LOAD` each time (pitfall: segments piling up).
pub(in crate::plan) fn extendable_tail(input: &Input<'_>) -> Option<(usize, u64)> {
    let elf = input.elf;
    let (index, last) = elf
        .phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type == elf::PT_LOAD)
        .max_by_key(|(_, p)| p.p_vaddr)?;
    let highest_offset = elf.loads().all(|p| p.offset_end() <= last.offset_end());
    let plain = last.p_filesz == last.p_memsz && last.p_flags & elf::PF_X == 0 && last.p_filesz > 0;
    if !(highest_offset && plain) {
        return None;
    }
    // The section header table lies before the segment's end (patchelf puts it at the start
    // of the segment it appends), not after it.
    let shdrs_before = elf.header.e_shoff == 0
        || elf.section_headers_unusable()
        || elf
            .section_table_end()
            .is_some_and(|end| end <= last.offset_end());
    // Zeros after it, fewer than a page (`Elf::load_trailer`), carry nothing: it ends the
    // file all the same, as long as no section's bytes lie there.
    let zeros_after = elf.load_trailer.len() as u64 == elf.file_len - last.offset_end()
        && elf.load_trailer.iter().all(|&b| b == 0)
        && !elf.sections.iter().any(|s| {
            let sh = s.shdr;
            sh.has_file_bytes() && sh.sh_offset + sh.sh_size > last.offset_end()
        });
    if (last.offset_end() == elf.file_len || zeros_after) && shdrs_before {
        return Some((index, elf.file_len));
    }
    only_section_table_after(input, last.offset_end()).then_some((index, elf.file_len))
}

/// Whether nothing but the section header table, ending the file, follows file offset `end`:
/// at most the table's alignment between them, and no section's bytes.
fn only_section_table_after(input: &Input<'_>, end: u64) -> bool {
    let elf = input.elf;
    let shoff = elf.header.e_shoff;
    let section_after = elf.sections.iter().any(|s| {
        let sh = s.shdr;
        sh.has_file_bytes() && sh.sh_offset + sh.sh_size > end
    });
    elf.section_headers_end_file()
        && shoff >= end
        && shoff - end < input.format.word_size()
        && !section_after
}

/// Chooses the site of the appended segment, for the program header table `table` (entries
/// it adds need room in the table, which extending the last segment does not make) and
/// `extra` more program headers besides its own `PT_LOAD` (a new note's `PT_NOTE`).
#[cfg(test)]
pub(in crate::plan) fn choose_site(
    input: &Input<'_>,
    table: &NewTable,
    extra: usize,
) -> Result<Site> {
    choose_site_above(input, table, extra, None)
}

/// `choose_site`, the segment starting no lower than `floor` (a file offset and an
/// address: where a load the edit grows in place ends, `tail.rs`).
pub(in crate::plan) fn choose_site_above(
    input: &Input<'_>,
    table: &NewTable,
    extra: usize,
    floor: Option<(u64, u64)>,
) -> Result<Site> {
    let elf = input.elf;
    let (floor_offset, floor_vaddr) = floor.unwrap_or((0, 0));
    let extendable = extendable_tail(input).filter(|_| table.added.is_empty() && extra == 0);
    if let Some((index, offset)) = extendable {
        let offset = offset.max(floor_offset);
        let last = &elf.phdrs[index];
        return Ok(Site {
            mode: Mode::Extend(index),
            base: SegmentBase {
                offset,
                vaddr: last.p_vaddr + (offset - last.p_offset),
                align: last.p_align,
            },
        });
    }
    if elf.loads().next().is_none() {
        return Err(Error::refused(
            "the file has no PT_LOAD segment to place data after",
        ));
    }
    // A new PT_LOAD declares the largest p_align and is placed congruent modulo it: that must
    // be an alignment. Edits in place and extensions of the last segment need none.
    for p in elf.loads() {
        if p.p_align > 1 && (!p.p_align.is_power_of_two() || p.p_align > 1 << 30) {
            return Err(Error::refused(format!(
                "PT_LOAD at {:#x} has p_align {:#x}, not a usable alignment for a new segment",
                p.p_vaddr, p.p_align
            )));
        }
    }
    let room = find_room(input, table.taken_null, 1 + table.added.len() + extra)?;
    let align = placement_align(input);
    let top = elf
        .loads()
        .map(|p| p.vaddr_end())
        .max()
        .unwrap_or(0)
        .max(floor_vaddr);
    let no_room = || Error::refused("no address space left above the image for a new segment");
    let mut offset = checked_align_up(elf.file_len.max(floor_offset), 16).ok_or_else(no_room)?;
    // Keep the new segment clear of the old image by a page, and by the largest dynamic
    // symbol: eu-elflint takes a relocation at r_offset against a symbol of size n to touch
    // [r_offset, r_offset + n], and calls a read-only segment in that range "modified".
    // A symbol larger than the whole image is garbage, not an object eu-elflint could reach
    // past the image with: counting it would put the segment where no loader can map it.
    let lowest = elf.loads().map(|p| p.p_vaddr).min().unwrap_or(0);
    let reach = input
        .tables
        .dynsym
        .as_ref()
        .map_or(0, |s| s.max_size)
        .min(top.saturating_sub(lowest));
    let start = top
        .checked_add(reach)
        .and_then(|x| checked_align_up(x, align))
        .and_then(|x| x.checked_add(align))
        .filter(|&b| b < input.format.max_addr())
        .ok_or_else(no_room)?;
    let mut vaddr = start.checked_add(offset % align).ok_or_else(no_room)?;
    if matches!(room, Room::MoveTable) && elf.interp.is_some() {
        // Kernels before 5.18 compute AT_PHDR as (first PT_LOAD's vaddr - offset) + e_phoff:
        // keep that bias for the new segment so the moved table is still found there.
        let first = elf.loads().min_by_key(|p| p.p_vaddr).expect("has loads");
        let bias = first.p_vaddr.wrapping_sub(first.p_offset);
        if bias <= start {
            // The file offset that lands at `start` with that bias, unless the file is already
            // longer; a hole of more than 1 MiB in the file is not worth it.
            let biased = offset.max(checked_align_up(start - bias, 16).unwrap_or(u64::MAX));
            if biased - offset <= 1 << 20 && biased.checked_add(bias).is_some() {
                offset = biased;
                vaddr = offset + bias;
            }
        }
    }
    Ok(Site {
        mode: Mode::New(room),
        base: SegmentBase {
            offset,
            vaddr,
            align: declared_align(input),
        },
    })
}

/// Lays out the items from `base`, filling in their offsets and addresses.
pub(in crate::plan) fn place(
    input: &Input<'_>,
    base: SegmentBase,
    items: &mut [Item],
) -> Result<Extent> {
    let bias = base.vaddr.wrapping_sub(base.offset);
    let mut cursor = base.offset;
    for item in items.iter_mut() {
        let mut offset = checked_align_up(cursor, item.align)
            .ok_or_else(|| Error::refused("the appended segment would not fit in the file"))?;
        if let Some(old) = item.congruent_to {
            while offset.wrapping_add(bias) % item.align != old % item.align {
                offset += 1;
            }
        }
        item.offset = offset;
        item.vaddr = offset.wrapping_add(bias);
        cursor = offset + item.size;
    }
    let end_vaddr = cursor.wrapping_add(bias);
    if end_vaddr > input.format.max_addr() || end_vaddr < base.vaddr {
        return Err(Error::refused(
            "the appended segment would not fit in the address space",
        ));
    }
    Ok(Extent {
        offset: base.offset,
        vaddr: base.vaddr,
        end_offset: cursor,
        align: base.align,
    })
}

/// How many program headers the file has once the segment is added, with `added` more.
pub(in crate::plan) fn new_phnum(input: &Input<'_>, mode: Mode, added: usize) -> usize {
    let n = input.elf.phdrs.len() + added;
    match mode {
        Mode::New(Room::NullSlot(_) | Room::PhdrSlot(_)) | Mode::Extend(_) | Mode::None => n,
        Mode::New(_) => n + 1,
    }
}

#[cfg(test)]
mod tests {
    use elfsynth::{AfterPhdrs, FileType, Spec};
    use object::elf;

    use super::{choose_site, place, Mode, SegmentBase};
    use crate::plan::appended::room::Room;
    use crate::plan::header::NewTable;
    use crate::plan::input::Input;
    use crate::plan::testing::{with_edited_input, with_input};
    use crate::plan::Options;

    /// The program header table as it is.
    fn unchanged(input: &Input<'_>) -> NewTable {
        NewTable::of(input.elf, Default::default())
    }

    /// The last `PT_LOAD` of a file without section headers or `.bss` ends the file.
    fn extendable() -> Spec {
        Spec {
            with_section_headers: false,
            bss_size: 0,
            ..Spec::default()
        }
    }

    #[test]
    fn the_last_segment_grows_when_it_ends_the_file() {
        let spec = extendable();
        with_input(&spec, &Options::default(), |input, layout| {
            let site = choose_site(input, &unchanged(input), 0).unwrap();
            let last = layout
                .segments
                .iter()
                .rposition(|s| s.p_type == elf::PT_LOAD)
                .unwrap();
            let load = layout.segments[last];
            assert!(matches!(site.mode, Mode::Extend(i) if i == last));
            assert_eq!(load.offset + load.filesz, layout.file_size);
            assert_eq!(
                site.base,
                SegmentBase {
                    offset: layout.file_size,
                    vaddr: load.vaddr + load.filesz,
                    align: load.align,
                }
            );
        });
    }

    #[test]
    fn a_segment_that_does_not_end_the_file_or_maps_more_than_it_reads_gets_a_new_one_above() {
        let cases = [
            ("section headers after it", Spec::default()),
            (
                ".bss",
                Spec {
                    bss_size: 0x10,
                    ..extendable()
                },
            ),
        ];
        for (what, spec) in cases {
            with_input(&spec, &Options::default(), |input, layout| {
                let site = choose_site(input, &unchanged(input), 0).unwrap();
                assert!(matches!(site.mode, Mode::New(_)), "{what}");
                let top = layout.segments.iter().filter(|s| s.p_type == elf::PT_LOAD);
                let top = top.map(|s| s.vaddr + s.memsz).max().unwrap();
                let base = site.base;
                // Past the end of the file, a page clear of the image, congruent modulo the
                // page, declaring the largest p_align of the file.
                assert!(base.offset >= layout.file_size, "{what}");
                assert!(base.vaddr >= top + 0x1000, "{what}");
                assert_eq!(base.vaddr % 0x1000, base.offset % 0x1000, "{what}");
                assert_eq!(base.align, spec.page_size, "{what}");
            });
        }
    }

    #[test]
    fn a_larger_page_size_places_the_segment_for_it_but_declares_the_files_alignment() {
        let opts = Options {
            page_size: Some(0x10000),
            ..Options::default()
        };
        with_input(&Spec::default(), &opts, |input, _| {
            let base = choose_site(input, &unchanged(input), 0).unwrap().base;
            assert_eq!(base.vaddr % 0x10000, base.offset % 0x10000);
            assert_eq!(base.align, 0x1000);
        });
    }

    #[test]
    fn a_moved_table_keeps_the_first_segments_bias_for_old_kernels() {
        // A non-PIE program whose table cannot grow in place: the kernel finds the moved table
        // at (first PT_LOAD's vaddr - offset) + e_phoff.
        let spec = Spec {
            e_type: FileType::Exec,
            base: 0x40_0000,
            first_after_phdrs: AfterPhdrs::Text,
            ..Spec::default()
        };
        with_input(&spec, &Options::default(), |input, layout| {
            let site = choose_site(input, &unchanged(input), 0).unwrap();
            assert!(matches!(site.mode, Mode::New(Room::MoveTable)));
            assert_eq!(site.base.vaddr - site.base.offset, 0x40_0000);
            assert!(site.base.offset >= layout.file_size);
        });
    }

    #[test]
    fn a_load_alignment_that_is_no_power_of_two_is_refused_for_a_new_segment() {
        let misalign = |elf: &mut crate::Elf| {
            let load = elf
                .phdrs
                .iter_mut()
                .find(|p| p.p_type == elf::PT_LOAD)
                .unwrap();
            load.p_align = 0x3000;
        };
        with_edited_input(
            &Spec::default(),
            &Options::default(),
            misalign,
            |input, _| {
                let err = choose_site(input, &unchanged(input), 0).unwrap_err();
                assert!(err.to_string().contains("not a usable alignment"), "{err}");
            },
        );
    }

    #[test]
    fn items_are_placed_in_order_aligned_and_congruent() {
        use super::{Item, ItemKind};
        with_input(&Spec::default(), &Options::default(), |input, _| {
            let base = SegmentBase {
                offset: 0x3001,
                vaddr: 0x5001,
                align: 0x1000,
            };
            let mut block = Item::new(ItemKind::Block, 0x40, 16);
            block.congruent_to = Some(0x2_0008);
            let mut items = [
                Item::new(ItemKind::StrTab, 5, 1),
                block,
                Item::new(ItemKind::Dynamic, 0x100, 8),
            ];
            let placed = place(input, base, &mut items).unwrap();
            assert_eq!((items[0].offset, items[0].vaddr), (0x3001, 0x5001));
            // 16-aligned would be 0x3010; congruent with 0x2_0008 modulo 16 is 0x3018.
            assert_eq!((items[1].offset, items[1].vaddr), (0x3018, 0x5018));
            assert_eq!(items[2].offset, 0x3058);
            assert_eq!(placed.end_offset, 0x3158);
            assert_eq!(
                (placed.offset, placed.vaddr, placed.align),
                (0x3001, 0x5001, 0x1000)
            );
        });
    }
}
