//! The resolution-cache note's writes ([`crate::note`]), once the builder knows where things go:
//! the note set or removed in its own bytes, or its bytes and its new section in the appended
//! segment. What the note becomes is decided below, in `note_edit.rs`.

use object::elf;

use super::builder::Builder;
use super::contents::pad;
use super::note_edit::{encode, NoteChange};
use super::{Data, Phase};
use crate::error::Result;
use crate::format::Shdr;
use crate::note;
use crate::plan::note_edit::{check_note_containers, note_shdrs};

impl Builder<'_, '_> {
    /// A note added to a file with usable section headers gets a section `.note.nixos.ldcache`:
    /// a copy of the section name table with the name appended, and a copy of the section header
    /// table (`shdrs`, as the edit leaves them) with the note's header appended, both staged from
    /// `end` on; `header` points at them. Returns the new end of the file, `None` when no
    /// section is added.
    pub(super) fn add_note_section(
        &mut self,
        placed: (u64, u64, u64),
        header: &mut crate::format::Header,
        shdrs: &[Shdr],
        end: u64,
    ) -> Option<u64> {
        let elf = self.planner.elf;
        let format = self.planner.format;
        let shstrndx = usize::from(elf.header.e_shstrndx);
        let usable = self.note_extra_phdrs() == 1
            && !elf.sections.is_empty()
            && !elf.section_headers_unusable()
            && usize::from(elf.header.e_shentsize) == format.shdr_size()
            && shstrndx > 0
            && shstrndx < elf.sections.len()
            && elf.sections.len() + 1 < usize::from(elf::SHN_LORESERVE)
            && elf.sections[shstrndx].shdr.sh_type == elf::SHT_STRTAB;
        if !usable {
            return None;
        }
        let old_names = elf.sections[shstrndx].shdr;
        let mut name = note::SECTION_NAME.to_vec();
        name.push(0);
        let names_at = end;
        self.push(
            names_at,
            Data::Copy(old_names.sh_offset),
            old_names.sh_size,
            Phase::Stage,
            "section names",
        );
        let name_at = names_at + old_names.sh_size;
        self.push_bytes(name_at, name.clone(), Phase::Stage, "section name");
        let mut table = shdrs.to_vec();
        table[shstrndx].sh_offset = names_at;
        table[shstrndx].sh_size = old_names.sh_size + name.len() as u64;
        let (offset, vaddr, size) = placed;
        table.push(Shdr {
            sh_name: old_names.sh_size as u32,
            sh_type: elf::SHT_NOTE,
            sh_flags: u64::from(elf::SHF_ALLOC),
            sh_addr: vaddr,
            sh_offset: offset,
            sh_size: size,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: note::NOTE_ALIGN,
            sh_entsize: 0,
        });
        header.e_shnum = table.len() as u16;
        Some(self.stage_section_table(&table, header, name_at + name.len() as u64))
    }

    /// Program headers the note change adds besides the appended `PT_LOAD`: a `PT_NOTE` for a
    /// note the file did not have.
    pub(super) fn note_extra_phdrs(&self) -> usize {
        usize::from(matches!(self.note, NoteChange::Set(_)) && self.planner.tables.note.is_none())
    }

    /// The bytes of the note to place in the appended segment, when the note is set.
    pub(super) fn new_note_bytes(&self) -> Option<Vec<u8>> {
        let NoteChange::Set(desc) = &self.note else {
            return None;
        };
        let align = self
            .planner
            .tables
            .note
            .as_ref()
            .map_or(note::NOTE_ALIGN, |n| n.align);
        Some(encode(self.planner.format, desc, align))
    }

    /// The note's writes when it stays where it is (set in place, or removed): its bytes, then
    /// its program headers (one write each that changes), then (by the caller) its section.
    pub(super) fn note_in_place(&mut self, shdrs: &mut [Shdr]) -> Result<()> {
        let planner = self.planner;
        let format = planner.format;
        let Some(n) = planner.tables.note.as_ref() else {
            return Ok(());
        };
        let change = self.note.clone();
        check_note_containers(planner, &change, false)?;
        match &change {
            NoteChange::Keep => return Ok(()),
            NoteChange::Set(desc) => {
                // One write: the new note and zeros over what it no longer uses.
                let bytes = pad(encode(format, desc, n.align), n.size);
                self.push_bytes(n.offset, bytes, Phase::Commit, "resolution-cache note");
            }
            NoteChange::Remove => {
                self.push(
                    n.offset,
                    Data::Zero,
                    n.size,
                    Phase::Cleanup,
                    "removed resolution-cache note",
                );
            }
        }
        // Its program header is written with the others (`header_writes`).
        note_shdrs(planner, &change, shdrs, None);
        Ok(())
    }
}
