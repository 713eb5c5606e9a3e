//! The resolution-cache note's writes ([`crate::note`]), once the placement is known: the note
//! set or removed in its own bytes (in place), or its bytes in the appended segment (its new
//! section is `appended/section_table.rs`'s). What the note becomes is decided below, in `note_edit.rs`.

use super::contents::pad;
use super::input::Input;
use super::note_edit::{check_note_containers, encode, note_shdrs, NoteChange};
use super::placed::Placed;
use super::writes::Writes;
use super::{Data, Phase};
use crate::error::Result;
use crate::format::Shdr;
use crate::note;

/// Program headers the note change adds besides the appended `PT_LOAD`: a `PT_NOTE` for a
/// note the file did not have.
pub(super) fn note_extra_phdrs(input: &Input<'_>, placed: &Placed) -> usize {
    usize::from(matches!(placed.note, NoteChange::Set(_)) && input.tables.note.is_none())
}

/// The bytes of the note to place in the appended segment, when the note is set.
pub(super) fn new_note_bytes(input: &Input<'_>, placed: &Placed) -> Option<Vec<u8>> {
    let NoteChange::Set(desc) = &placed.note else {
        return None;
    };
    let align = input
        .tables
        .note
        .as_ref()
        .map_or(note::NOTE_ALIGN, |n| n.align);
    Some(encode(input.format, desc, align))
}

/// The note's writes when it stays where it is (set in place, or removed): its bytes, then
/// its program headers (one write each that changes), then (by the caller) its section.
pub(super) fn note_in_place(
    input: &Input<'_>,
    placed: &Placed,
    w: &mut Writes<'_>,
    shdrs: &mut [Shdr],
) -> Result<()> {
    let format = input.format;
    let Some(n) = input.tables.note.as_ref() else {
        return Ok(());
    };
    let change = placed.note.clone();
    check_note_containers(input, &change, false)?;
    match &change {
        NoteChange::Keep => return Ok(()),
        NoteChange::Set(desc) => {
            // One write: the new note and zeros over what it no longer uses.
            let bytes = pad(encode(format, desc, n.align), n.size);
            w.push_bytes(n.offset, bytes, Phase::Commit, "resolution-cache note");
        }
        NoteChange::Remove => {
            w.push(
                n.offset,
                Data::Zero,
                n.size,
                Phase::Cleanup,
                "removed resolution-cache note",
            );
        }
    }
    // Its program header is written with the others (`header_writes`).
    note_shdrs(input, &change, shdrs, None);
    Ok(())
}
