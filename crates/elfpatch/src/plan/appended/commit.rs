//! The appended edit's switch: the one write of the headers that moves the file from the old
//! layout to the new one, and, when the string table grows where it is (`tail.rs`), the writes
//! of the dynamic array and the strings that follow it, each leaving the old file or the new
//! one.

use super::headers::NewHeaders;
use super::segment::AppendedSegment;
use super::site::ItemKind;
use super::tail::TailRoom;
use crate::format::Dyn;
use crate::plan::contents::{diff_span, encode_dynamic, NewStrings};
use crate::plan::input::Input;
use crate::plan::writes::{Writes, ELF_AND_PROGRAM_HEADERS, ELF_HEADER};
use crate::plan::Phase;

/// Phase 5: one write of the file header and program headers when they are adjacent.
pub(super) fn commit(
    input: &Input<'_>,
    w: &mut Writes<'_>,
    segment: &AppendedSegment,
    headers: &NewHeaders,
) {
    let elf = input.elf;
    let format = input.format;
    let header = &headers.header;
    let phdr_bytes: Vec<u8> = headers
        .phdrs
        .iter()
        .flat_map(|p| format.encode_phdr(p))
        .collect();
    let header_bytes = format.encode_header(header);
    if let Some(item) = segment.item(ItemKind::PhdrTable) {
        let offset = item.offset;
        w.push_bytes(offset, phdr_bytes, Phase::Stage, "program header table");
        w.push_bytes(0, header_bytes, Phase::Commit, ELF_HEADER);
    } else if header.e_phoff == header_bytes.len() as u64 && *header != elf.header {
        let mut bytes = header_bytes;
        bytes.extend_from_slice(&phdr_bytes);
        w.push_bytes(0, bytes, Phase::Commit, ELF_AND_PROGRAM_HEADERS);
    } else {
        // Unchanged when nothing was added or extended (a string table grown in its own
        // room, `tail.rs`).
        let old_phdrs: Vec<u8> = elf
            .phdrs
            .iter()
            .flat_map(|p| format.encode_phdr(p))
            .collect();
        if phdr_bytes != old_phdrs {
            w.push_bytes(header.e_phoff, phdr_bytes, Phase::Commit, "program headers");
        }
        if *header != elf.header {
            w.push_bytes(0, header_bytes, Phase::Commit, ELF_HEADER);
        }
    }
}

/// The writes after the headers switched, when the string table grows where it is: the
/// dynamic array in place switches to what it names first (the interim array, or the final
/// one when the strings are staged); then, when the strings' room was in use, the strings go
/// over it and one last write of the array switches to them. Each write leaves the old file
/// or the new one: the interim array names the old strings, and the tables it points at are
/// copies staged before.
pub(super) fn grow_commit(
    input: &Input<'_>,
    w: &mut Writes<'_>,
    segment: &AppendedSegment,
    tail: TailRoom,
    strings: &NewStrings,
    interim: Option<&[Dyn]>,
    final_dynamic: &[Dyn],
) {
    let elf = input.elf;
    let format = input.format;
    let first = interim.unwrap_or(final_dynamic);
    let array = elf
        .dynamic
        .as_ref()
        .map(|d| match segment.item(ItemKind::Dynamic) {
            // Staged already with what it names first.
            Some(item) => {
                let capacity = segment.selection.dynamic_capacity;
                (
                    item.offset,
                    capacity,
                    encode_dynamic(format, first, capacity),
                )
            }
            None => {
                let capacity = d.capacity();
                let old = encode_dynamic(format, &d.slots, capacity);
                let new = encode_dynamic(format, first, capacity);
                dynamic_diff(w, d.offset, &old, &new);
                (d.offset, capacity, new)
            }
        });
    if !tail.strings_after_switch() {
        return;
    }
    let bytes = strings.alloc.appended.clone();
    w.push_bytes(tail.start, bytes, Phase::Commit, "new strings");
    if let Some((offset, capacity, current)) = array {
        let last = encode_dynamic(format, final_dynamic, capacity);
        dynamic_diff(w, offset, &current, &last);
    }
}

/// One write of the bytes of the dynamic array at `offset` that differ from `old` to `new`.
pub(super) fn dynamic_diff(w: &mut Writes<'_>, offset: u64, old: &[u8], new: &[u8]) {
    if let Some((lo, hi)) = diff_span(old, new) {
        let bytes = new[lo..hi].to_vec();
        w.push_bytes(offset + lo as u64, bytes, Phase::Commit, "dynamic entries");
    }
}
