//! The resolution-cache note's part of a plan ([`crate::note`]): what the note becomes
//! (kept, set to a new descriptor, removed), and the header changes that go with it.
//!
//! - A new descriptor that fits in the note's bytes is written there, in place; the note's
//!   `PT_NOTE` and section shrink with it when the note ends them, and the freed bytes are zeroed
//!   (no stale store path survives).
//! - One that does not fit goes into the appended segment; the `PT_NOTE` and the section that
//!   covered exactly the old note follow it, and the old bytes are zeroed.
//! - A removed note's bytes are zeroed, the `PT_NOTE` that covered exactly it becomes `PT_NULL`
//!   (a slot a later edit can reuse) and its section header an all-zero `SHT_NULL` entry, so no
//!   index changes.
//! - A file without a note gets one in the appended segment, with a new `PT_NOTE`, and with a
//!   section `.note.nixos.ldcache` when it has section headers.
//!
//! This module decides what the note becomes and how its headers follow, at the level of the
//! requested edits (below the desired contents and the placement); `note_writes.rs` writes it.
//!
//! Without an explicit note edit, a plan that changes what the note was computed from — the
//! `DT_NEEDED` list or the run path (`DT_RUNPATH`, else `DT_RPATH`) — removes it, as patchelf
//! 0.19.3 does.

use object::elf;

use super::edits::Entry;
use super::input::Input;
use super::Edit;
use crate::error::{Error, Result};
use crate::format::{Format, Phdr, Shdr};
use crate::note::{self, LocatedNote, ResolutionCache};
use crate::plan::edits::value_of;

/// What the plan does to the resolution-cache note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum NoteChange {
    /// Nothing.
    Keep,
    /// The note gets this descriptor (the note is added when the file has none).
    Set(Vec<u8>),
    /// The note goes.
    Remove,
}

/// The note's bytes with descriptor `desc`, padded for a container aligned to `align` (4 or 8).
pub(super) fn encode(format: Format, desc: &[u8], align: u64) -> Vec<u8> {
    let mut out = note::encode_note(format, desc);
    if align == 8 {
        // Owner "NixOS\0" pads to 8 either way; only the descriptor's padding differs.
        let len = note::NOTE_HEADER_SIZE + 8 + (desc.len() as u64).next_multiple_of(8);
        out.resize(len as usize, 0);
    }
    out
}

/// Whether `p` (a `PT_NOTE` or section extent) covers exactly the note.
fn covers_exactly(offset: u64, size: u64, n: &LocatedNote) -> bool {
    offset == n.offset && size == n.size
}

/// The note change the edits ask for, once the dynamic entries are known (`entries`).
pub(super) fn note_change(
    input: &Input<'_>,
    edits: &[Edit],
    entries: &[Entry],
) -> Result<NoteChange> {
    let explicit = edits.iter().rev().find_map(|e| match e {
        Edit::SetResolutionCache(d) => Some(NoteChange::Set(d.clone())),
        Edit::RemoveResolutionCache => Some(NoteChange::Remove),
        _ => None,
    });
    let note = input.tables.note.as_ref();
    let Some(change) = explicit else {
        let stale = note.is_some() && resolution_inputs_changed(input, entries);
        return Ok(if stale {
            NoteChange::Remove
        } else {
            NoteChange::Keep
        });
    };
    if let Some(fault) = &input.tables.note_fault {
        return Err(Error::malformed(fault.offset, fault.what.clone()));
    }
    Ok(match change {
        NoteChange::Set(desc) => {
            ResolutionCache::parse(&desc)
                .map_err(|e| Error::invalid(format!("the new resolution-cache descriptor: {e}")))?;
            if desc.len() > u32::MAX as usize {
                return Err(Error::invalid(
                    "the resolution-cache descriptor is too long",
                ));
            }
            if note.is_some_and(|n| n.desc == desc) {
                NoteChange::Keep
            } else {
                NoteChange::Set(desc)
            }
        }
        NoteChange::Remove if note.is_none() => NoteChange::Keep,
        other => other,
    })
}

/// Whether the `DT_NEEDED` names or the run path the note was computed from change.
fn resolution_inputs_changed(input: &Input<'_>, entries: &[Entry]) -> bool {
    let after = |tag: u32| -> Vec<Vec<u8>> {
        entries
            .iter()
            .filter(|x| x.tag == u64::from(tag))
            .map(|x| value_of(input, &x.val))
            .collect()
    };
    let before = |tag: u32| -> Vec<Vec<u8>> {
        input
            .elf
            .dynamic
            .iter()
            .flat_map(|d| d.entries().iter())
            .filter(|x| x.tag == u64::from(tag))
            .map(|x| input.string(x.val).to_vec())
            .collect()
    };
    let run_path = |get: &dyn Fn(u32) -> Vec<Vec<u8>>| {
        get(elf::DT_RUNPATH)
            .into_iter()
            .next()
            .or_else(|| get(elf::DT_RPATH).into_iter().next())
    };
    after(elf::DT_NEEDED) != before(elf::DT_NEEDED) || run_path(&after) != run_path(&before)
}

/// Whether the note change can be made in the note's own bytes.
pub(super) fn note_fits(input: &Input<'_>, change: &NoteChange) -> bool {
    match (change, input.tables.note.as_ref()) {
        (NoteChange::Keep | NoteChange::Remove, _) => true,
        (NoteChange::Set(_), None) => false,
        (NoteChange::Set(desc), Some(n)) => {
            let size = encode(input.format, desc, n.align).len() as u64;
            size == n.size || (size < n.size && n.last_in_container)
        }
    }
}

/// Checks that the note's `PT_NOTE`s and section can follow the change: each covers exactly
/// the note, or (for a note that stays where it is, or goes) ends with it. A note that shares
/// its container with notes after it cannot move or go without moving them: refused.
pub(super) fn check_note_containers(
    input: &Input<'_>,
    change: &NoteChange,
    moves: bool,
) -> Result<()> {
    let Some(n) = input.tables.note.as_ref() else {
        return Ok(());
    };
    let mut extents: Vec<(u64, u64, &str)> = n
        .segments
        .iter()
        .map(|&i| {
            (
                input.elf.phdrs[i].p_offset,
                input.elf.phdrs[i].p_filesz,
                "PT_NOTE",
            )
        })
        .collect();
    if let Some(i) = n.section {
        let sh = input.elf.sections[i].shdr;
        extents.push((sh.sh_offset, sh.sh_size, "section"));
    }
    for (offset, size, what) in extents {
        let exact = covers_exactly(offset, size, n);
        let ends = offset + size == n.offset + n.size;
        let ok = match change {
            NoteChange::Keep => true,
            NoteChange::Set(_) if moves => exact,
            NoteChange::Set(_) => true,
            NoteChange::Remove => exact || ends,
        };
        if !ok {
            return Err(Error::refused(format!(
                "the resolution-cache note at {:#x} shares its {what} with other notes and \
                 would have to move out of the middle of it",
                n.offset
            )));
        }
    }
    Ok(())
}

/// Applies the note change to the program headers (checked by
/// [`check_note_containers`]): `placed` is where the new note went in the appended
/// segment (offset, address, size), `None` when it stays where it was.
pub(super) fn note_phdrs(
    input: &Input<'_>,
    change: &NoteChange,
    phdrs: &mut [Phdr],
    placed: Option<(u64, u64, u64)>,
) {
    let Some(n) = input.tables.note.as_ref() else {
        return;
    };
    for &i in &n.segments {
        let old = input.elf.phdrs[i];
        let p = &mut phdrs[i];
        let exact = covers_exactly(old.p_offset, old.p_filesz, n);
        match (change, placed) {
            (NoteChange::Keep, _) => {}
            (NoteChange::Remove, _) if exact => *p = Phdr::default(),
            (NoteChange::Set(_), Some((offset, vaddr, size))) => {
                (p.p_offset, p.p_vaddr, p.p_paddr) = (offset, vaddr, vaddr);
                (p.p_filesz, p.p_memsz) = (size, size);
            }
            (NoteChange::Set(desc), None) => {
                let new = encode(input.format, desc, n.align).len() as u64;
                p.p_filesz = shrunk(old.p_offset, old.p_filesz, n, new);
                p.p_memsz = shrunk(old.p_offset, old.p_memsz, n, new);
            }
            (NoteChange::Remove, _) => {
                p.p_filesz = old.p_filesz - n.size;
                p.p_memsz = old.p_memsz.saturating_sub(n.size);
            }
        }
    }
}

/// Applies the note change to the section headers (as [`note_phdrs`]).
pub(super) fn note_shdrs(
    input: &Input<'_>,
    change: &NoteChange,
    shdrs: &mut [Shdr],
    placed: Option<(u64, u64, u64)>,
) {
    let Some(n) = input.tables.note.as_ref() else {
        return;
    };
    let Some(i) = n.section else {
        return;
    };
    let old = input.elf.sections[i].shdr;
    let sh = &mut shdrs[i];
    let exact = covers_exactly(old.sh_offset, old.sh_size, n);
    match (change, placed) {
        (NoteChange::Keep, _) => {}
        (NoteChange::Remove, _) if exact => *sh = Shdr::default(),
        (NoteChange::Set(_), Some((offset, vaddr, size))) => {
            (sh.sh_offset, sh.sh_size) = (offset, size);
            if old.is_alloc() {
                sh.sh_addr = vaddr;
            }
        }
        (NoteChange::Set(desc), None) => {
            let new = encode(input.format, desc, n.align).len() as u64;
            sh.sh_size = shrunk(old.sh_offset, old.sh_size, n, new);
        }
        (NoteChange::Remove, _) => sh.sh_size = old.sh_size - n.size,
    }
}

/// The size of a container from `start` once the note in it takes `new` bytes: smaller by what
/// the note lost when the note ends it, the same otherwise.
fn shrunk(start: u64, size: u64, n: &LocatedNote, new: u64) -> u64 {
    if start + size == n.offset + n.size {
        size - (n.size - new)
    } else {
        size
    }
}

/// The `PT_NOTE` of a note added at `offset`/`vaddr`, `size` bytes (as patchelf writes it).
pub(super) fn new_note_phdr(offset: u64, vaddr: u64, size: u64) -> Phdr {
    Phdr {
        p_type: elf::PT_NOTE,
        p_flags: elf::PF_R,
        p_offset: offset,
        p_vaddr: vaddr,
        p_paddr: vaddr,
        p_filesz: size,
        p_memsz: size,
        p_align: note::NOTE_ALIGN,
    }
}
