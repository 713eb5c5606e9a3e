//! The appended edit (copy-on-write): whatever does not fit where it is goes, modified, into a
//! segment at the end of the file and of the address space, and one write of the program headers
//! switches the file over. Interrupted before that write, the file is the old one; after it, the
//! new one.
//!
//! [`plan`] is a function of the input and the placement; it goes through named phases, each a
//! function of what it reads, the writes collected in a [`Writes`]:
//! 1. [`lay_out`] (`segment.rs`): where the segment goes (`site.rs`: the last `PT_LOAD`
//!    extended, or a new one with room for its program header, `room.rs`), what moves into it
//!    and where each item lands, or how the string table grows where it is (`tail.rs`);
//! 2. [`stage`]: the segment's bytes, written where nothing points yet;
//! 3. [`program_headers`] (`headers.rs`): the new ELF header and program headers;
//! 4. [`move_sections`]: section headers follow what moved, symbols follow the sections; a
//!    section header table that ended the file is staged, updated, after the segment
//!    (`section_table.rs`), so it still ends the file;
//! 5. [`commit()`] (`commit.rs`): the one write of the headers that switches the file;
//! 6. [`cleanup`]: section headers, then the bytes nothing refers to any more, zeroed.

mod commit;
mod headers;
pub(super) mod room;
mod section_table;
mod segment;
mod site;
mod tail;

use object::elf;

use super::contents::{
    encode_dynamic, final_dynamic, section_at, strtab_or_empty, version_section_counts,
};
use super::input::Input;
use super::note_edit::{check_note_containers, note_shdrs, NoteChange};
use super::note_writes::new_note_bytes;
use super::placed::Placed;
use super::strings::{self, Range};
use super::writes::Writes;
use super::{Data, Layout, Phase, Plan, SectionMove};
use crate::error::Result;
use crate::format::{Dyn, Shdr};
use commit::{commit, dynamic_diff, grow_commit};
use headers::{drop_emptied_loads, program_headers, read_only_if_emptied, NewHeaders};
use room::described;
use section_table::{add_note_section, section_table_follows, stage_section_table};
use segment::{interim_array, lay_out, table_addresses, tail_growth, AppendedSegment};
use site::{ItemKind, Mode};
use tail::TailRoom;

/// Section headers after the edit, the moves symbols must follow, and what moved (for humans).
struct SectionMoves {
    shdrs: Vec<Shdr>,
    moves: Vec<SectionMove>,
    names: Vec<String>,
}

/// Something does not fit: copy-on-write into the appended segment, one commit write.
pub(in crate::plan) fn plan(input: &Input<'_>, placed: &Placed) -> Result<Plan> {
    let strings = &placed.strings;
    let mut w = Writes::new(input.elf);
    let elf = input.elf;
    check_note_containers(input, &placed.note, true)?;
    let tail = tail_growth(input, placed);
    let segment = lay_out(input, placed, tail)?;
    let addresses = table_addresses(input, &segment);
    let final_dynamic = final_dynamic(input, &placed.entries, strings, &addresses, &|vaddr| {
        segment.relocate(vaddr)
    });
    // A growing string table whose room is in use switches to a dynamic array that still
    // names the old strings first (`tail.rs`).
    let interim = segment
        .tail
        .filter(TailRoom::strings_after_switch)
        .map(|_| interim_array(input, &segment));
    let staged_dynamic = interim.as_deref().unwrap_or(&final_dynamic);
    stage(input, placed, &mut w, &segment, staged_dynamic)?;
    let NewHeaders { header, mut phdrs } = program_headers(input, placed, &segment)?;
    let sections = move_sections(input, placed, &w, &segment);
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
            strings,
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
    cleanup(input, placed, &mut w, &segment, &headers, cleanup_shdrs);
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

/// Phase 2: the segment's bytes, where nothing points yet.
fn stage(
    input: &Input<'_>,
    placed: &Placed,
    w: &mut Writes<'_>,
    segment: &AppendedSegment,
    final_dynamic: &[Dyn],
) -> Result<()> {
    let strings = &placed.strings;
    let versions = &placed.versions;
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
) -> SectionMoves {
    let versions = &placed.versions;
    let strings = &placed.strings;
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

/// Phase 6: section headers, then zero what nothing refers to any more.
fn cleanup(
    input: &Input<'_>,
    placed: &Placed,
    w: &mut Writes<'_>,
    segment: &AppendedSegment,
    headers: &NewHeaders,
    shdrs: &[Shdr],
) {
    let strings = &placed.strings;
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
