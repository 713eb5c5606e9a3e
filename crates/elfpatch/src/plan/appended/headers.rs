//! The appended edit's new headers: the program headers that describe the segment and what moved
//! into it, the ELF header that points at them, and the writable flag a segment loses when
//! `.dynamic` leaves it holding only tables a loader reads.

use object::elf;

use super::room::Room;
use super::segment::AppendedSegment;
use super::site::{ItemKind, Mode};
use crate::error::{Error, Result};
use crate::format::{Dyn, Header, Phdr, Shdr};
use crate::plan::input::Input;
use crate::plan::note_edit::{new_note_phdr, note_phdrs};
use crate::plan::note_writes::note_extra_phdrs;
use crate::plan::placed::Placed;
use crate::plan::tags::{is_fixed_address_tag, is_read_only_table_type};
use crate::read::{Dynamic, Elf};

/// The ELF header and program headers after the edit.
pub(super) struct NewHeaders {
    pub(super) header: Header,
    pub(super) phdrs: Vec<Phdr>,
}

/// Phase 3: the new program headers and file header.
pub(super) fn program_headers(
    input: &Input<'_>,
    placed: &Placed,
    segment: &AppendedSegment,
) -> Result<NewHeaders> {
    let elf = input.elf;
    let format = input.format;
    let dynamic = elf.dynamic.as_ref();
    // The header edits first: every index below is the file's, and entries the edits add go
    // at the end.
    let mut phdrs = placed.table.phdrs.clone();
    let note = segment.item(ItemKind::Note);
    note_phdrs(
        input,
        &placed.note,
        &mut phdrs,
        note.map(|i| (i.offset, i.vaddr, i.size)),
    );
    for moved in &segment.moved {
        for p in phdrs.iter_mut() {
            let inside = p.p_filesz > 0
                && p.p_offset >= moved.block.start
                && p.offset_end() <= moved.block.end;
            if p.p_type != elf::PT_LOAD && p.p_type != elf::PT_PHDR && inside {
                p.p_offset = segment.translate(p.p_offset);
                p.p_vaddr = segment.relocate(p.p_vaddr);
                p.p_paddr = segment.relocate(p.p_paddr);
            }
        }
    }
    if let (Some(interp), Some(item)) = (elf.interp.as_ref(), segment.item(ItemKind::Interp)) {
        let p = &mut phdrs[interp.phdr_index];
        (p.p_offset, p.p_vaddr, p.p_paddr, p.p_filesz, p.p_memsz) =
            (item.offset, item.vaddr, item.vaddr, item.size, item.size);
    }
    // Without PT_DYNAMIC (an array found through its section) only the section moves: no
    // program header is added, as the file's loader reads no array before the edit either.
    let dynamic_phdr = dynamic.and_then(|d| d.phdr_index);
    if let (Some(i), Some(item)) = (dynamic_phdr, segment.item(ItemKind::Dynamic)) {
        let p = &mut phdrs[i];
        let shift = p.p_paddr.wrapping_sub(p.p_vaddr);
        (p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz) =
            (item.offset, item.vaddr, item.size, item.size);
        p.p_paddr = item.vaddr.wrapping_add(shift);
    }
    // Writable when it holds .dynamic, as the segment it came from was (the loader writes
    // DT_DEBUG there). MIPS keeps .dynamic read-only (its loader writes through
    // DT_MIPS_RLD_MAP instead), and so does the new segment when PT_DYNAMIC says so, even
    // if an earlier editor put .dynamic into a writable segment.
    let mips_read_only_dynamic = elf.machine() == elf::EM_MIPS
        && dynamic_phdr.is_some_and(|i| elf.phdrs[i].p_flags & elf::PF_W == 0);
    let writable = segment.item(ItemKind::Dynamic).is_some()
        && !mips_read_only_dynamic
        && dynamic.is_some_and(|d| {
            elf.loads()
                .any(|l| l.contains_offset(d.offset, 1) && l.p_flags & elf::PF_W != 0)
        });
    let mut header = elf.header.clone();
    header.ident = placed.table.ident;
    if elf.section_headers_unusable() {
        // A table nobody could read: once data is appended where it may claim to be, tools
        // would read that data as section headers. The file has none.
        (header.e_shoff, header.e_shnum, header.e_shstrndx) = (0, 0, 0);
    }
    // The load whose string table grows where it is maps the strings, and the tables that
    // moved into its page's tail (`tail.rs`). Before any entry is inserted or removed.
    if let Some(t) = segment.tail {
        let p = &mut phdrs[t.load];
        let end = t.load_end(p.offset_end());
        p.p_filesz = end - p.p_offset;
        p.p_memsz = p.p_filesz;
    }
    let extent = segment.extent;
    match segment.site.mode {
        Mode::None => {}
        Mode::Extend(i) => {
            let p = &mut phdrs[i];
            p.p_filesz = (extent.end_offset - p.p_offset).max(p.p_filesz);
            p.p_memsz = p.p_filesz;
            if writable {
                p.p_flags |= elf::PF_W;
            }
        }
        Mode::New(room) => {
            let size = extent.end_offset - extent.offset;
            let new_load = Phdr {
                p_type: elf::PT_LOAD,
                p_flags: elf::PF_R | if writable { elf::PF_W } else { 0 },
                p_offset: extent.offset,
                p_vaddr: extent.vaddr,
                p_paddr: extent.vaddr,
                p_filesz: size,
                p_memsz: size,
                p_align: extent.align,
            };
            if let Room::NullSlot(i) | Room::PhdrSlot(i) = room {
                phdrs.remove(i);
            }
            let at = phdrs
                .iter()
                .rposition(|p| p.p_type == elf::PT_LOAD)
                .map_or(phdrs.len(), |i| i + 1);
            phdrs.insert(at, new_load);
            if let (Some(item), 1) = (note, note_extra_phdrs(input, placed)) {
                phdrs.insert(at + 1, new_note_phdr(item.offset, item.vaddr, item.size));
            }
            phdrs.extend_from_slice(&placed.table.added);
            let table_size = (phdrs.len() * format.phdr_size()) as u64;
            let table = segment.item(ItemKind::PhdrTable);
            for p in phdrs.iter_mut().filter(|p| p.p_type == elf::PT_PHDR) {
                match table {
                    Some(item) => {
                        (p.p_offset, p.p_vaddr, p.p_paddr) = (item.offset, item.vaddr, item.vaddr);
                    }
                    // A PT_PHDR that describes some other bytes is not this edit's to repair:
                    // giving it the table's size would give a garbage offset a file range.
                    None if p.p_offset != header.e_phoff => continue,
                    None => {}
                }
                (p.p_filesz, p.p_memsz) = (table_size, table_size);
            }
            if let Some(item) = table {
                header.e_phoff = item.offset;
            }
            header.e_phnum = phdrs.len() as u16;
        }
    }

    // What we write must be something we would read back: no segment may wrap.
    for p in &phdrs {
        if p.p_vaddr
            .checked_add(p.p_memsz)
            .is_none_or(|end| end > format.max_addr().saturating_add(1))
        {
            return Err(Error::refused(format!(
                "the segment of type {:#x} at {:#x} would wrap the address space once moved",
                p.p_type, p.p_vaddr
            )));
        }
    }
    Ok(NewHeaders { header, phdrs })
}

/// A range of addresses the loader writes into: it must stay in a writable segment.
#[derive(Clone, Copy)]
struct LoaderWrite {
    addr: u64,
    len: u64,
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
pub(super) fn read_only_if_emptied(
    elf: &Elf,
    phdrs: &mut [Phdr],
    shdrs: &[Shdr],
    old: &Dynamic,
    new_dynamic: u64,
    final_dynamic: &[Dyn],
) {
    if old.section.is_none() {
        return;
    }
    let loader_writes = if elf.machine() == elf::EM_MIPS {
        // A MIPS file whose GOT cannot be told keeps every segment as it is.
        match mips_loader_writes(elf, new_dynamic, final_dynamic) {
            Some(writes) => writes,
            None => return,
        }
    } else {
        Vec::new()
    };
    let read_only_table = |i: usize, sh: &Shdr| {
        sh.sh_flags & u64::from(elf::SHF_WRITE | elf::SHF_EXECINSTR) == 0
            && (is_read_only_table_type(sh.sh_type)
                || sh.sh_type == elf::SHT_STRTAB
                || (sh.sh_type == elf::SHT_PROGBITS
                    && elf.sections.get(i).is_some_and(|x| x.name == b".interp")))
    };
    // The pages (at the machine's smallest page size) of every writable PT_LOAD: a segment that
    // shares one with another keeps PF_W, since the loader maps the shared page with the flags of
    // the segment it maps last (patchelf 0.17.2's 4 KiB-aligned segments on alpha's 8 KiB pages).
    let page = crate::read::min_page_size(elf.machine());
    let pages = |q: &Phdr| {
        let end = q.p_vaddr.saturating_add(q.p_memsz.max(1));
        (
            q.p_vaddr - q.p_vaddr % page,
            end.div_ceil(page).saturating_mul(page),
        )
    };
    let writable: Vec<(usize, (u64, u64))> = phdrs
        .iter()
        .enumerate()
        .filter(|(_, q)| q.p_type == elf::PT_LOAD && q.p_flags & elf::PF_W != 0)
        .map(|(i, q)| (i, pages(q)))
        .collect();
    for (index, p) in phdrs.iter_mut().enumerate() {
        if p.p_type != elf::PT_LOAD
            || p.p_flags & elf::PF_W == 0
            || !p.contains_offset(old.offset, 1)
        {
            continue;
        }
        let (plo, phi) = pages(p);
        let shares_a_page = writable
            .iter()
            .any(|&(i, (qlo, qhi))| i != index && plo < qhi && qlo < phi);
        if shares_a_page {
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
        let pointed_at = final_dynamic
            .iter()
            .any(|x| is_fixed_address_tag(x.tag) && inside(x.val));
        let loader_written = loader_writes
            .iter()
            .any(|w| w.addr < hi && lo < w.addr.saturating_add(w.len.max(1)));
        if sections_read_only && !pointed_at && !loader_written {
            p.p_flags &= !elf::PF_W;
        }
    }
}

/// What the MIPS loader writes: the GOT, and the debug map `DT_MIPS_RLD_MAP(_REL)` points at.
/// `None` when the GOT's extent cannot be told.
fn mips_loader_writes(
    elf: &Elf,
    new_dynamic: u64,
    final_dynamic: &[Dyn],
) -> Option<Vec<LoaderWrite>> {
    let format = elf.format;
    let word = format.word_size();
    let get = |tag: u32| {
        final_dynamic
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
        (Some(addr), Some(local), Some(symtabno), Some(gotsym)) => local
            .checked_add(symtabno.saturating_sub(gotsym))
            .and_then(|n| n.checked_mul(word))
            .map(|len| LoaderWrite { addr, len }),
        _ => None,
    }?;
    let mut writes = vec![got];
    if let Some(addr) = get(elf::DT_MIPS_RLD_MAP) {
        writes.push(LoaderWrite { addr, len: word });
    }
    writes.extend(
        rld_map_rel_targets(elf, new_dynamic, final_dynamic)
            .map(|addr| LoaderWrite { addr, len: word }),
    );
    Some(writes)
}

/// The addresses `DT_MIPS_RLD_MAP_REL` entries point at: relative to the entry's own slot in the
/// array placed at `new_dynamic`, so its value alone is no address.
fn rld_map_rel_targets<'a>(
    elf: &Elf,
    new_dynamic: u64,
    final_dynamic: &'a [Dyn],
) -> impl Iterator<Item = u64> + 'a {
    let format = elf.format;
    final_dynamic
        .iter()
        .enumerate()
        .filter(|(_, x)| x.tag == u64::from(elf::DT_MIPS_RLD_MAP_REL))
        .map(move |(i, x)| {
            let slot = new_dynamic.wrapping_add((i * format.dyn_size()) as u64);
            slot.wrapping_add(x.val) & format.max_addr()
        })
}

/// Turns into `PT_NULL` every `PT_LOAD` this edit leaves holding nothing: a segment an earlier
/// appended edit added, whose `.dynstr` and `.dynamic` have now moved on into the new segment.
///
/// Why not keep it (read-only, zeroed): a `PT_LOAD` that no section covers is what GNU strip
/// cannot rewrite. It keeps the segment with `p_filesz` 0 at a file offset chosen for the
/// sections around it, not congruent to `p_vaddr` modulo the page size, and glibc refuses to
/// load the result ("ELF load command address/offset not page-aligned"); lld- and gold-linked
/// libraries edited, stripped, edited again three times ended there. Extending that segment
/// instead is not possible once strip has put the section headers and non-allocated sections
/// after it in the file, and the bytes it held are dead (superseded copies, zeroed by
/// `cleanup`), so nothing is lost by dropping its program header. The entry stays in the table
/// as `PT_NULL`, which the loader skips and which the next growing edit reuses for its own
/// segment (`Room::NullSlot`): the table stops growing edit after edit (pitfall: segments
/// piling up).
///
/// Only when section headers describe the old `.dynamic` (so they are trusted to describe the
/// segment), the segment held an allocated section before the edit and holds none after, and
/// nothing else points into it: no other segment, no value in the final dynamic array (any
/// tag, conservatively), no `DT_MIPS_RLD_MAP_REL` target (from its slot in the array placed at
/// `new_dynamic`), not the entry point, not the ELF header, program or section header tables.
/// Anything else leaves the segment as it is.
pub(super) fn drop_emptied_loads(
    elf: &Elf,
    header: &Header,
    phdrs: &mut [Phdr],
    shdrs: &[Shdr],
    old: &Dynamic,
    (new_dynamic, final_dynamic): (u64, &[Dyn]),
) {
    if old.section.is_none() || elf.sections.is_empty() {
        return;
    }
    let format = elf.format;
    let overlaps = |lo: u64, hi: u64, sh: &Shdr| {
        sh.is_alloc() && sh.sh_addr < hi && lo < sh.sh_addr.saturating_add(sh.sh_size.max(1))
    };
    let phdr_table = (
        header.e_phoff,
        header.e_phoff + (phdrs.len() * format.phdr_size()) as u64,
    );
    let shdr_table = (
        header.e_shoff,
        header.e_shoff + (shdrs.len() * format.shdr_size()) as u64,
    );
    let others: Vec<Phdr> = phdrs
        .iter()
        .filter(|p| p.p_type != elf::PT_LOAD && p.p_type != elf::PT_NULL && p.p_memsz > 0)
        .copied()
        .collect();
    for p in phdrs.iter_mut().filter(|p| p.p_type == elf::PT_LOAD) {
        let (lo, hi) = (p.p_vaddr, p.p_vaddr.saturating_add(p.p_memsz.max(1)));
        let (start, end) = (p.p_offset, p.offset_end().max(p.p_offset + 1));
        let file_overlaps = |(a, b): (u64, u64)| a < end && start < b.max(a + 1);
        let held_before = elf.sections.iter().any(|s| overlaps(lo, hi, &s.shdr));
        let holds_now = shdrs.iter().any(|sh| overlaps(lo, hi, sh));
        let other_segment = others.iter().any(|o| {
            (o.p_vaddr < hi && lo < o.p_vaddr.saturating_add(o.p_memsz))
                || (o.p_filesz > 0 && file_overlaps((o.p_offset, o.offset_end())))
        });
        let pointed_at = final_dynamic.iter().any(|x| x.val >= lo && x.val < hi)
            || rld_map_rel_targets(elf, new_dynamic, final_dynamic).any(|a| a >= lo && a < hi)
            || (header.e_entry >= lo && header.e_entry < hi);
        let tables = file_overlaps((0, format.ehdr_size() as u64))
            || file_overlaps(phdr_table)
            || (header.e_shoff != 0 && file_overlaps(shdr_table));
        if held_before && !holds_now && !other_segment && !pointed_at && !tables {
            *p = Phdr {
                p_type: elf::PT_NULL,
                ..Phdr::default()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use object::elf;

    use super::read_only_if_emptied;
    use crate::format::{Dyn, Phdr};
    use crate::read::Elf;

    /// Where the moved `.dynamic` goes in these cases: far above every segment.
    const NEW_DYNAMIC: u64 = 0x10_0000;

    /// Runs the rule on elfsynth's default PIE (as `machine`), its writable `PT_LOAD` (the one
    /// holding `.dynamic`) left with nothing the process writes, plus a second writable
    /// `PT_LOAD` at `place(end)`, `end` being the first one's end address. Returns whether the
    /// first one keeps `PF_W`.
    fn keeps_write(machine: u16, place: impl Fn(u64) -> u64, pointed_at: bool) -> bool {
        let bytes = elfsynth::build(&elfsynth::Spec::default());
        let mut elf = Elf::parse(&bytes).expect("elfpatch reads what elfsynth builds");
        elf.header.e_machine = machine;
        let old = elf.dynamic.clone().expect("a dynamic file");
        let mut phdrs = elf.phdrs.clone();
        let rw = phdrs
            .iter()
            .position(|p| {
                p.p_type == elf::PT_LOAD
                    && p.p_flags & elf::PF_W != 0
                    && p.contains_offset(old.offset, 1)
            })
            .expect("the writable PT_LOAD holding .dynamic");
        // The segment ends 2 KiB into an 8 KiB page, so that a 4 KiB boundary follows its end
        // inside that page (its .bss grows, which changes nothing the rule looks at).
        let first = &mut phdrs[rw];
        first.p_memsz =
            (first.p_vaddr + first.p_memsz).next_multiple_of(0x2000) + 0x800 - first.p_vaddr;
        let at = place(first.p_vaddr + first.p_memsz);
        phdrs.push(Phdr {
            p_type: elf::PT_LOAD,
            p_flags: elf::PF_R | elf::PF_W,
            p_offset: at,
            p_vaddr: at,
            p_paddr: at,
            p_filesz: 0x10,
            p_memsz: 0x10,
            p_align: 0x1000,
        });
        // The sections the rule would look at are the edit's: none is left in the segment.
        let final_dynamic = if pointed_at {
            vec![Dyn {
                tag: elf::DT_PLTGOT.into(),
                val: phdrs[rw].p_vaddr,
            }]
        } else {
            Vec::new()
        };
        read_only_if_emptied(&elf, &mut phdrs, &[], &old, NEW_DYNAMIC, &final_dynamic);
        phdrs[rw].p_flags & elf::PF_W != 0
    }

    /// The first 4 KiB boundary at or above `end`: not an 8 KiB one, as `keeps_write` places
    /// the end.
    fn odd_4k(end: u64) -> u64 {
        let a = end.next_multiple_of(0x1000);
        assert_ne!(a % 0x2000, 0);
        a
    }

    #[test]
    fn an_emptied_segment_alone_on_its_pages_becomes_read_only() {
        assert!(!keeps_write(
            elf::EM_X86_64,
            |e| e.next_multiple_of(0x1000),
            false
        ));
        assert!(!keeps_write(
            elf::EM_X86_64,
            |e| e.next_multiple_of(0x1000) + 0x3000,
            false
        ));
        assert!(!keeps_write(
            elf::EM_ALPHA,
            |e| e.next_multiple_of(0x2000),
            false
        ));
    }

    #[test]
    fn a_segment_sharing_a_page_with_another_writable_one_stays_writable() {
        // The loader maps a shared page once, with the flags of the segment it maps last: the
        // other segment's data would turn read-only with it.
        assert!(keeps_write(elf::EM_X86_64, |e| e, false));
        assert!(keeps_write(elf::EM_X86_64, |e| e + 0x10, false));
    }

    #[test]
    fn sharing_is_judged_at_the_machines_smallest_page() {
        // On a 4 KiB boundary that is not an 8 KiB one: a page of its own on x86_64, the first
        // segment's last 8 KiB page on alpha and sparc64 (patchelf 0.17.2 aligned its segments
        // to 4 KiB there).
        assert!(!keeps_write(elf::EM_X86_64, odd_4k, false));
        assert!(keeps_write(elf::EM_ALPHA, odd_4k, false));
        assert!(keeps_write(elf::EM_SPARCV9, odd_4k, false));
    }

    #[test]
    fn an_address_the_dynamic_array_points_at_keeps_the_segment_writable() {
        assert!(keeps_write(
            elf::EM_X86_64,
            |e| e.next_multiple_of(0x1000),
            true
        ));
    }
}
