//! The section header table after an appended edit.
//!
//! Linkers and `strip` put the section header table last in the file, and tools rely on it
//! (patchelf's test helper `pad-to-page` refuses a file whose table does not end it). An
//! appended edit puts its segment at the end of the file, after the table; when the table ended
//! the input ([`Elf::section_headers_end_file`](crate::Elf::section_headers_end_file)), an
//! updated copy of it is written after the segment, so that it ends the output too. A table
//! that did not end the input (data after it: an appended payload, a signature) stays where it
//! is: the property is kept, not imposed.
//!
//! The old copy is left as it is, not zeroed: nothing points at it once `e_shoff` moves, it
//! holds no string that the edit removes (only offsets and indexes into the section name table,
//! which stays), and zeroing it would be a write of the whole table where the edit needs none.
//! The library writes only what changes.

use crate::format::{Header, Shdr};
use crate::plan::builder::Builder;
use crate::plan::Phase;

impl Builder<'_, '_> {
    /// Whether the appended edit moves the section header table after its segment: the table
    /// ends the input file.
    pub(in crate::plan) fn section_table_follows(&self) -> bool {
        self.planner.elf.section_headers_end_file()
    }

    /// Stages `table` as the section header table at `at` (rounded up to the word size), where
    /// nothing points yet, and points `header` at it (the commit write switches to it). Returns
    /// where it ends: the new end of the file.
    pub(in crate::plan) fn stage_section_table(
        &mut self,
        table: &[Shdr],
        header: &mut Header,
        at: u64,
    ) -> u64 {
        let format = self.planner.format;
        let table_at = at.next_multiple_of(format.word_size());
        let bytes: Vec<u8> = table.iter().flat_map(|sh| format.encode_shdr(sh)).collect();
        let table_end = table_at + bytes.len() as u64;
        self.push_bytes(table_at, bytes, Phase::Stage, "section header table");
        header.e_shoff = table_at;
        table_end
    }
}
