//! The second stage of planning: the desired contents. What the dynamic array, the version
//! needs, the interpreter, the symbols, the resolution-cache note and the program header table
//! should become, from the input and the edits (`edits.rs`, `note_edit.rs`, `header.rs` decide
//! each part). Nothing here knows where anything goes: that is the next stage (`placed.rs`).

use super::edits::{dynamic_changed, requested, Entry, SymbolEdits, VerneedEdits};
use super::header::NewTable;
use super::input::Input;
use super::note_edit::{note_change, NoteChange};
use super::Edit;
use crate::error::Result;

/// What the file should say once the edits are applied.
pub(super) struct Desired {
    /// The dynamic entries to write, without the terminating `DT_NULL` (version tags are
    /// adjusted once the records are known, `placed.rs`).
    pub(super) entries: Vec<Entry>,
    /// The version need records to rename or drop.
    pub(super) verneed_edits: VerneedEdits,
    /// The new interpreter path, when it changes.
    pub(super) interp: Option<Vec<u8>>,
    /// Renamed symbols and cleared versions.
    pub(super) symbols: SymbolEdits,
    /// What becomes of the resolution-cache note.
    pub(super) note: NoteChange,
    /// The identification bytes and program headers the header edits ask for.
    pub(super) table: NewTable,
}

/// The desired contents of `input` after `edits`, or `None` when they change nothing.
pub(super) fn desired(input: &Input<'_>, edits: &[Edit]) -> Result<Option<Desired>> {
    let elf = input.elf;
    let mut requested = requested(input, edits)?;
    let dynamic_changed = dynamic_changed(input, &requested.entries);
    let interp_changed = requested
        .interp
        .as_ref()
        .is_some_and(|p| Some(p.as_slice()) != elf.interpreter());
    // The note's fate depends on every other edit's result (a changed run path makes it stale).
    let note = note_change(input, edits, &requested.entries)?;
    let note_unchanged = note == NoteChange::Keep;
    let table = NewTable::of(elf, requested.header);
    let header_changed = table.changed(elf);
    if !dynamic_changed
        && requested.verneed.is_empty()
        && !interp_changed
        && note_unchanged
        && !header_changed
        && requested.symbols.is_empty()
    {
        return Ok(None);
    }
    if dynamic_changed || !requested.verneed.is_empty() || !requested.symbols.renames.is_empty() {
        input.check_dynamic_editable()?;
    }
    if interp_changed {
        input.check_interp_editable()?;
    } else {
        requested.interp = None;
    }
    Ok(Some(Desired {
        entries: requested.entries,
        verneed_edits: requested.verneed,
        interp: requested.interp,
        symbols: requested.symbols,
        note,
        table,
    }))
}
