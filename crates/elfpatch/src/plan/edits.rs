//! From the requested edits to what the file should say: the dynamic entries in their new order
//! with their new values, the version need records to rename or drop, the interpreter path.
//! Nothing is placed yet; that is the writes' job.

use object::elf;

use super::header::HeaderEdits;
use super::input::Input;
use super::Edit;
use crate::error::{Error, Result};
use crate::need::Need;
use crate::read::is_string_tag;

/// A dynamic entry's value while edits are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Value {
    /// Not a string: kept as it is.
    Raw(u64),
    /// A string already in the table, at this offset.
    Old(u64),
    /// A new string, to be placed.
    New(Vec<u8>),
}

/// One dynamic entry of the edited array.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// `d_tag`.
    pub(super) tag: u64,
    /// Its value.
    pub(super) val: Value,
    /// Its index in the original array, when it was there before.
    pub(super) original: Option<usize>,
}

/// A version need record that names another file after the edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct VerneedRename {
    /// Index of the record (in [`crate::Tables::verneed`]).
    pub(super) record: usize,
    /// Its new file name.
    pub(super) name: Vec<u8>,
}

/// Changes to the version need records.
#[derive(Clone, Debug, Default)]
pub(super) struct VerneedEdits {
    /// Records renamed (`ReplaceNeeded`), at most one rename per record once edits are done.
    pub(super) renames: Vec<VerneedRename>,
    /// Indices of the records to drop (`RemoveNeeded`).
    pub(super) removals: Vec<usize>,
}

impl VerneedEdits {
    /// Whether any record changes.
    pub(super) fn is_empty(&self) -> bool {
        self.renames.is_empty() && self.removals.is_empty()
    }

    /// The file name record `record` has after the edits so far.
    fn current_name(&self, record: usize) -> Option<&[u8]> {
        self.renames
            .iter()
            .rev()
            .find(|r| r.record == record)
            .map(|r| r.name.as_slice())
    }
}

/// Changes to the dynamic symbols.
#[derive(Clone, Debug, Default)]
pub(super) struct SymbolEdits {
    /// (symbol index, new name), one per renamed symbol, sorted by index.
    pub(super) renames: Vec<(usize, Vec<u8>)>,
    /// Indices of the symbols whose version becomes global.
    pub(super) cleared: Vec<usize>,
}

impl SymbolEdits {
    /// Whether no symbol changes.
    pub(super) fn is_empty(&self) -> bool {
        self.renames.is_empty() && self.cleared.is_empty()
    }
}

/// What the file should say once the edits are applied.
#[derive(Clone, Debug)]
pub(super) struct Requested {
    /// The dynamic array's entries, without the terminating `DT_NULL`.
    pub(super) entries: Vec<Entry>,
    /// The version need records to rename or drop.
    pub(super) verneed: VerneedEdits,
    /// The new interpreter path, when an edit sets one.
    pub(super) interp: Option<Vec<u8>>,
    /// Renamed symbols and cleared versions.
    pub(super) symbols: SymbolEdits,
    /// What changes in the file header and the program headers.
    pub(super) header: HeaderEdits,
}

fn check_name(s: &[u8], what: &str) -> Result<()> {
    if s.contains(&0) {
        return Err(Error::invalid(format!("{what} contains a NUL byte")));
    }
    Ok(())
}

/// Applies `edits`, in order, to the file's dynamic entries, version records and interpreter.
pub(super) fn requested(input: &Input<'_>, edits: &[Edit]) -> Result<Requested> {
    let mut requested = Requested {
        entries: original_entries(input),
        verneed: VerneedEdits::default(),
        interp: None,
        symbols: SymbolEdits::default(),
        header: HeaderEdits::default(),
    };
    for edit in edits {
        if edits_dynamic(edit) {
            input.elf.require(Need::Dynamic)?;
        }
        apply_edit(input, &mut requested, edit)?;
    }
    keep_values_set_back(input, &mut requested.entries);
    keep_entries_set_back(input, &mut requested.entries);
    let removals = &requested.verneed.removals;
    requested
        .verneed
        .renames
        .retain(|r| !removals.contains(&r.record));
    Ok(requested)
}

fn original_entries(input: &Input<'_>) -> Vec<Entry> {
    let Some(dynamic) = &input.elf.dynamic else {
        return Vec::new();
    };
    dynamic
        .entries()
        .iter()
        .enumerate()
        .map(|(i, x)| Entry {
            tag: x.tag,
            val: if is_string_tag(x.tag) {
                Value::Old(x.val)
            } else {
                Value::Raw(x.val)
            },
            original: Some(i),
        })
        .collect()
}

fn apply_edit(input: &Input<'_>, requested: &mut Requested, edit: &Edit) -> Result<()> {
    let entries = &mut requested.entries;
    match edit {
        Edit::SetRunpath(s) => {
            check_name(s, "RUNPATH")?;
            set_string(input, entries, elf::DT_RUNPATH, s);
        }
        Edit::SetRpath(s) => {
            check_name(s, "RPATH")?;
            set_string(input, entries, elf::DT_RPATH, s);
        }
        Edit::RemoveRunpath => entries.retain(|x| x.tag != u64::from(elf::DT_RUNPATH)),
        Edit::RemoveRpath => entries.retain(|x| x.tag != u64::from(elf::DT_RPATH)),
        Edit::RpathToRunpath => {
            if has_tag(entries, elf::DT_RUNPATH) {
                entries.retain(|x| x.tag != u64::from(elf::DT_RPATH));
            } else {
                retag(entries, elf::DT_RPATH, elf::DT_RUNPATH);
            }
        }
        Edit::RunpathToRpath => {
            if has_tag(entries, elf::DT_RUNPATH) {
                entries.retain(|x| x.tag != u64::from(elf::DT_RPATH));
                retag(entries, elf::DT_RUNPATH, elf::DT_RPATH);
            }
        }
        Edit::AddNeeded(name) => add_needed(input, entries, name)?,
        Edit::RemoveNeeded(name) => remove_needed(input, requested, name),
        Edit::ReplaceNeeded { old, new } => replace_needed(input, requested, old, new)?,
        Edit::SetSoname(s) => {
            check_name(s, "SONAME")?;
            set_string(input, entries, elf::DT_SONAME, s);
        }
        Edit::SetInterpreter(s) => {
            check_name(s, "interpreter")?;
            input.elf.require(Need::Interpreter)?;
            if s.is_empty() {
                return Err(Error::invalid("empty interpreter path"));
            }
            requested.interp = Some(s.clone());
        }
        Edit::ClearSymbolVersion(name) => clear_version(input, &mut requested.symbols, name),
        Edit::RenameDynamicSymbols(map) => rename_symbols(input, &mut requested.symbols, map)?,
        // Decided once every other edit is known (`note_change`).
        Edit::SetResolutionCache(_) | Edit::RemoveResolutionCache => {}
        Edit::SetOsAbi(abi) => requested.header.os_abi = Some(*abi),
        Edit::SetExecstack(x) => requested.header.execstack = Some(*x),
        Edit::AddFlags1(bits) => add_flags_1(entries, *bits),
        Edit::AddDebugTag => {
            if !has_tag(entries, elf::DT_DEBUG) {
                entries.insert(0, raw_entry(elf::DT_DEBUG, 0));
            }
        }
    }
    Ok(())
}

/// The name of dynamic symbol `i` after the renames so far.
fn symbol_name(input: &Input<'_>, symbols: &SymbolEdits, i: usize, st_name: u32) -> Vec<u8> {
    match symbols.renames.iter().find(|(j, _)| *j == i) {
        Some((_, name)) => name.clone(),
        None => input.string(u64::from(st_name)).to_vec(),
    }
}

/// patchelf's `--clear-symbol-version`: every symbol of that name, defined or not.
fn clear_version(input: &Input<'_>, symbols: &mut SymbolEdits, name: &[u8]) {
    for (i, &st_name) in input.dynsym_names().iter().enumerate() {
        if symbol_name(input, symbols, i, st_name) == name && !symbols.cleared.contains(&i) {
            symbols.cleared.push(i);
        }
    }
}

/// Renames every dynamic symbol (but the null symbol) whose current name the map lists.
fn rename_symbols(
    input: &Input<'_>,
    symbols: &mut SymbolEdits,
    map: &[(Vec<u8>, Vec<u8>)],
) -> Result<()> {
    for (_, new) in map {
        check_name(new, "symbol name")?;
        if new.is_empty() {
            return Err(Error::invalid("empty symbol name"));
        }
    }
    let mut renames = Vec::new();
    for (i, &st_name) in input.dynsym_names().iter().enumerate().skip(1) {
        let current = symbol_name(input, symbols, i, st_name);
        let Some((_, new)) = map.iter().find(|(old, _)| *old == current) else {
            continue;
        };
        renames.push((i, new.clone()));
    }
    for (i, new) in renames {
        symbols.renames.retain(|(j, _)| *j != i);
        let original = input.string(u64::from(input.dynsym_names()[i]));
        if new != original {
            symbols.renames.push((i, new));
        }
    }
    symbols.renames.sort_by_key(|(i, _)| *i);
    Ok(())
}

/// Sets every entry with `tag` to `s`, or adds one at the front of the array.
fn set_string(input: &Input<'_>, entries: &mut Vec<Entry>, tag: u32, s: &[u8]) {
    let tag = u64::from(tag);
    let mut found = false;
    for x in entries.iter_mut().filter(|x| x.tag == tag) {
        found = true;
        if value_of(input, &x.val) != s {
            x.val = Value::New(s.to_vec());
        }
    }
    if !found {
        entries.insert(
            0,
            Entry {
                tag,
                val: Value::New(s.to_vec()),
                original: None,
            },
        );
    }
}

/// Adds a `DT_NEEDED` entry after the ones this plan added, before everything else.
fn add_needed(input: &Input<'_>, entries: &mut Vec<Entry>, name: &[u8]) -> Result<()> {
    check_name(name, "NEEDED name")?;
    if name.is_empty() {
        return Err(Error::invalid("empty NEEDED name"));
    }
    let needed = u64::from(elf::DT_NEEDED);
    let present = entries
        .iter()
        .any(|x| x.tag == needed && value_of(input, &x.val) == name);
    if !present {
        let at = entries
            .iter()
            .rposition(|x| x.original.is_none() && x.tag == needed)
            .map_or(0, |i| i + 1);
        entries.insert(
            at,
            Entry {
                tag: needed,
                val: Value::New(name.to_vec()),
                original: None,
            },
        );
    }
    Ok(())
}

/// Drops the `DT_NEEDED` entries naming `name` and the version records of that file.
fn remove_needed(input: &Input<'_>, requested: &mut Requested, name: &[u8]) {
    requested
        .entries
        .retain(|x| !(x.tag == u64::from(elf::DT_NEEDED) && value_of(input, &x.val) == name));
    let edits = &mut requested.verneed;
    for (i, record) in input.verneed_records().iter().enumerate() {
        let current = edits
            .current_name(i)
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|| input.string(u64::from(record.file)).to_vec());
        if current == name && !edits.removals.contains(&i) {
            edits.removals.push(i);
        }
    }
}

/// Renames the `DT_NEEDED` entries naming `old`, and the version records of that file.
fn replace_needed(
    input: &Input<'_>,
    requested: &mut Requested,
    old: &[u8],
    new: &[u8],
) -> Result<()> {
    check_name(new, "NEEDED name")?;
    if new.is_empty() {
        return Err(Error::invalid("empty NEEDED name"));
    }
    for x in requested
        .entries
        .iter_mut()
        .filter(|x| x.tag == u64::from(elf::DT_NEEDED))
    {
        if value_of(input, &x.val) == old && old != new {
            x.val = if x.original.is_some_and(|i| input.original_string(i) == new) {
                Value::Old(input.original_value(x.original.unwrap_or(0)))
            } else {
                Value::New(new.to_vec())
            };
        }
    }
    let edits = &mut requested.verneed;
    for (i, record) in input.verneed_records().iter().enumerate() {
        if edits.removals.contains(&i) {
            continue;
        }
        let file_name = input.string(u64::from(record.file));
        let current = edits
            .current_name(i)
            .map(<[u8]>::to_vec)
            .unwrap_or_else(|| file_name.to_vec());
        if current == old && old != new {
            edits.renames.retain(|r| r.record != i);
            if file_name != new {
                edits.renames.push(VerneedRename {
                    record: i,
                    name: new.to_vec(),
                });
            }
        }
    }
    Ok(())
}

/// A value set back to what it was is not a change.
fn keep_values_set_back(input: &Input<'_>, entries: &mut [Entry]) {
    for x in entries.iter_mut() {
        if let (Value::New(s), Some(i)) = (&x.val, x.original) {
            if input.original_string(i) == *s && is_string_tag(input.original_tag(i)) {
                x.val = Value::Old(input.original_value(i));
            }
        }
    }
}

/// A run path or SONAME removed and set again to the same value in one plan is the original
/// entry, where it was (their position means nothing; NEEDED order does, so not those).
fn keep_entries_set_back(input: &Input<'_>, entries: &mut Vec<Entry>) {
    let len = input.elf.dynamic.as_ref().map_or(0, |d| d.len);
    for i in 0..len {
        let tag = input.original_tag(i);
        let movable = [elf::DT_RUNPATH, elf::DT_RPATH, elf::DT_SONAME]
            .iter()
            .any(|&t| u64::from(t) == tag);
        if !movable || entries.iter().any(|x| x.original == Some(i)) {
            continue;
        }
        let same = |x: &Entry| {
            x.original.is_none()
                && x.tag == tag
                && matches!(&x.val, Value::New(v) if *v == input.original_string(i))
        };
        if let Some(j) = entries.iter().position(same) {
            entries.remove(j);
            let at = entries
                .iter()
                .position(|x| x.original.is_some_and(|o| o > i))
                .unwrap_or(entries.len());
            entries.insert(
                at,
                Entry {
                    tag,
                    val: Value::Old(input.original_value(i)),
                    original: Some(i),
                },
            );
        }
    }
}

/// The string a value stands for (empty for a raw value).
pub(super) fn value_of(input: &Input<'_>, value: &Value) -> Vec<u8> {
    match value {
        Value::Old(offset) => input.string(*offset).to_vec(),
        Value::New(s) => s.clone(),
        Value::Raw(_) => Vec::new(),
    }
}

/// Whether `entries` differ from the original array (order, tags or values).
pub(super) fn dynamic_changed(input: &Input<'_>, entries: &[Entry]) -> bool {
    let Some(dynamic) = &input.elf.dynamic else {
        return false;
    };
    entries.len() != dynamic.len
        || entries.iter().enumerate().any(|(i, x)| {
            let before = dynamic.entries()[i];
            x.original != Some(i)
                || x.tag != before.tag
                || !matches!(x.val, Value::Raw(v) | Value::Old(v) if v == before.val)
        })
}

/// Whether an edit changes the dynamic array (the others change the interpreter or headers).
fn edits_dynamic(edit: &Edit) -> bool {
    !matches!(
        edit,
        Edit::SetInterpreter(_)
            | Edit::SetOsAbi(_)
            | Edit::SetExecstack(_)
            | Edit::SetResolutionCache(_)
            | Edit::RemoveResolutionCache
    )
}

/// A new entry with a value that is no string.
fn raw_entry(tag: u32, val: u64) -> Entry {
    Entry {
        tag: u64::from(tag),
        val: Value::Raw(val),
        original: None,
    }
}

/// Sets `bits` in every `DT_FLAGS_1` (glibc reads the last, patchelf the first; a linker writes
/// one), or adds one at the front of the array, as patchelf does.
fn add_flags_1(entries: &mut Vec<Entry>, bits: u64) {
    let tag = u64::from(elf::DT_FLAGS_1);
    if !has_tag(entries, elf::DT_FLAGS_1) {
        entries.insert(0, raw_entry(elf::DT_FLAGS_1, bits));
        return;
    }
    for x in entries.iter_mut().filter(|x| x.tag == tag) {
        if let Value::Raw(v) = &mut x.val {
            *v |= bits;
        }
    }
}

/// Whether an entry has `tag`.
fn has_tag(entries: &[Entry], tag: u32) -> bool {
    entries.iter().any(|x| x.tag == u64::from(tag))
}

/// Gives every entry with tag `from` the tag `to`.
fn retag(entries: &mut [Entry], from: u32, to: u32) {
    for x in entries.iter_mut().filter(|x| x.tag == u64::from(from)) {
        x.tag = u64::from(to);
    }
}
