//! The third stage of planning: the placement. From the desired contents, where the new strings
//! go in the string table (`contents.rs`: over unreferenced bytes, or appended to the table), the
//! version records and symbol versions that result, the final dynamic entries, and the strategy
//! that follows: **in place** when everything fits where it is, **appended** otherwise.

use super::appended::room::table_grows_in_place;
use super::contents::{
    new_versions, place_strings, update_version_entries, NewStrings, NewVersions,
};
use super::desired::Desired;
use super::edits::{dynamic_changed, Entry, SymbolEdits, VerneedEdits};
use super::header::NewTable;
use super::input::Input;
use super::note_edit::{note_fits, NoteChange};
use crate::error::Result;

/// How the plan writes the new contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Strategy {
    /// Everything fits where it is: small writes into the existing structures (`in_place.rs`).
    InPlace,
    /// Something does not: copy-on-write into the appended segment, or the string table grown
    /// where it is (`appended/`).
    Appended,
}

/// The desired contents, placed.
pub(super) struct Placed {
    /// The dynamic entries to write, version tags adjusted to the records that remain.
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
    /// Where the new strings go.
    pub(super) strings: NewStrings,
    /// The version records and symbol versions after the edit.
    pub(super) versions: NewVersions,
    /// Whether the dynamic entries differ from the file's.
    pub(super) entries_changed: bool,
    /// In place or appended.
    pub(super) strategy: Strategy,
}

/// Places `desired`: the strings, the versions, the final entries, and the strategy.
pub(super) fn place(input: &Input<'_>, desired: Desired) -> Result<Placed> {
    let elf = input.elf;
    let Desired {
        mut entries,
        verneed_edits,
        interp,
        symbols,
        note,
        table,
    } = desired;
    let records_before = input
        .tables
        .verneed
        .as_ref()
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let place = |own_spots| {
        place_strings(
            input,
            &entries,
            &verneed_edits,
            &records_before,
            &symbols,
            own_spots,
        )
    };
    let mut strings = place(true)?;
    if strings.alloc.grows() && strings.live_writes {
        // A string over the one it replaces switches with its own write, not with the
        // others: a table that grows where it is (`appended/tail.rs`) takes its new strings
        // only where nothing was, so that they all switch together.
        strings = place(false)?;
    }
    // Tables read for edits that change no symbol version hold none (`Tables::read_with`).
    let versions_needed = !verneed_edits.removals.is_empty() || !symbols.cleared.is_empty();
    let unread = input
        .tables
        .versym
        .as_ref()
        .is_some_and(|(r, v)| v.is_empty() && r.size > 0);
    if versions_needed && unread {
        return Err(crate::error::Error::refused(
            "the edit changes symbol versions, which these tables were read without",
        ));
    }
    let versions = new_versions(input, &verneed_edits, records_before, &strings, &symbols);
    update_version_entries(&mut entries, &verneed_edits, &versions, elf);

    let entries_changed = dynamic_changed(input, &entries);
    let capacity = elf.dynamic.as_ref().map_or(0, |d| d.capacity());
    let interp_fits = match (&interp, &elf.interp) {
        (Some(new), Some(old)) => (new.len() as u64) < old.capacity,
        _ => true,
    };
    // Program headers the edits add fit when zeros follow the table (a PT_NULL entry is
    // already in the table).
    let table_fits = table_grows_in_place(input, &table);
    // Renamed symbols always go the appended way: the symbol table, both hash tables and the
    // strings change together, so they are written as copies and switched to in one write.
    let fits = symbols.renames.is_empty()
        && !strings.alloc.grows()
        && (!entries_changed || entries.len() < capacity)
        && interp_fits
        && note_fits(input, &note)
        && table_fits;
    Ok(Placed {
        entries,
        verneed_edits,
        interp,
        symbols,
        note,
        table,
        strings,
        versions,
        entries_changed,
        strategy: if fits {
            Strategy::InPlace
        } else {
            Strategy::Appended
        },
    })
}
