//! The writes of a plan as the strategies (`in_place.rs`, `appended/`) make them, and the way
//! every plan ends: section headers that changed, symbol fixups, the writes put in phase order
//! and checked.

use object::elf;

use super::{Data, Layout, Phase, Plan, SectionMove, SymbolFixup, Write};
use crate::error::{Error, Result};
use crate::format::Shdr;
use crate::read::Elf;

/// What the writes of the file header are called: the only writes allowed over it.
pub(super) const ELF_HEADER: &str = "ELF header";
/// See [`ELF_HEADER`].
pub(super) const ELF_AND_PROGRAM_HEADERS: &str = "ELF and program headers";

/// The writes so far of a plan of `elf`.
pub(super) struct Writes<'e> {
    elf: &'e Elf,
    writes: Vec<Write>,
}

impl<'e> Writes<'e> {
    /// No writes yet.
    pub(super) fn new(elf: &'e Elf) -> Self {
        Writes {
            elf,
            writes: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, offset: u64, data: Data, len: u64, phase: Phase, what: &str) {
        if len > 0 {
            self.writes.push(Write {
                offset,
                len,
                data,
                phase,
                what: what.to_string(),
            });
        }
    }

    pub(super) fn push_bytes(&mut self, offset: u64, bytes: Vec<u8>, phase: Phase, what: &str) {
        let len = bytes.len() as u64;
        self.push(offset, Data::Bytes(bytes), len, phase, what);
    }

    /// Records that section `index` now lives at `offset`/`addr` with `size`. A section can move
    /// twice in one plan (with the block, then on its own): symbols follow the composition, from
    /// the original address.
    pub(super) fn note_move(
        &self,
        shdrs: &mut [Shdr],
        moves: &mut Vec<SectionMove>,
        index: usize,
        offset: u64,
        addr: u64,
        size: u64,
    ) {
        let original = self.elf.sections[index].shdr;
        moves.retain(|m| m.shndx != index as u16);
        if original.sh_addr != addr {
            moves.push(SectionMove {
                shndx: index as u16,
                old_addr: original.sh_addr,
                old_size: original.sh_size,
                delta: addr.wrapping_sub(original.sh_addr),
                absolute_start: original.sh_type == elf::SHT_DYNAMIC,
            });
        }
        let sh = &mut shdrs[index];
        (sh.sh_offset, sh.sh_addr, sh.sh_size) = (offset, addr, size);
    }

    /// One cleanup write per section header that changed.
    pub(super) fn section_header_writes(&mut self, shdrs: &[Shdr]) {
        let elf = self.elf;
        let format = elf.format;
        for (i, (new, old)) in shdrs.iter().zip(elf.sections.iter()).enumerate() {
            if *new != old.shdr {
                let at = elf.header.e_shoff + (i * format.shdr_size()) as u64;
                self.push_bytes(
                    at,
                    format.encode_shdr(new),
                    Phase::Cleanup,
                    "section header",
                );
            }
        }
    }

    /// The symbol tables whose symbols must follow the moved sections.
    pub(super) fn symbol_fixups(
        &self,
        shdrs: &[Shdr],
        moves: Vec<SectionMove>,
    ) -> Vec<SymbolFixup> {
        if moves.is_empty() {
            return Vec::new();
        }
        let sym_size = self.elf.format.sym_size() as u64;
        self.elf
            .sections
            .iter()
            // An empty table has nothing to fix, and its offset is checked by nobody: a garbage
            // one may point anywhere.
            .filter(|x| {
                matches!(x.shdr.sh_type, elf::SHT_SYMTAB | elf::SHT_DYNSYM)
                    && x.shdr.sh_size >= sym_size
            })
            .map(|x| SymbolFixup {
                table: x.index,
                offset: shdrs[x.index].sh_offset,
                count: x.shdr.sh_size / sym_size,
                moves: moves.clone(),
            })
            .collect()
    }

    /// Orders the writes and checks they stay inside the new file.
    pub(super) fn finish(
        mut self,
        layout: Layout,
        new_len: u64,
        symbol_fixups: Vec<SymbolFixup>,
    ) -> Result<Plan> {
        // The last line of defence: only the header write itself may touch the ELF header. The
        // checks in `Input::new` refuse the inputs known to lead here; anything else that does is
        // refused too rather than written.
        let ehdr = self.elf.format.ehdr_size() as u64;
        if let Some(w) = self
            .writes
            .iter()
            .find(|w| w.offset < ehdr && w.what != ELF_HEADER && w.what != ELF_AND_PROGRAM_HEADERS)
        {
            return Err(Error::refused(format!(
                "the edit would write {} over the ELF header: the file's tables are not where its headers say",
                w.what
            )));
        }
        // Stage, commit, cleanup; within cleanup, section headers before zeroing (right after the
        // commit they are the only thing still describing the old layout). Stable otherwise.
        self.writes
            .sort_by_key(|w| (w.phase, w.phase == Phase::Cleanup && w.data == Data::Zero));
        debug_assert!(
            self.writes.iter().all(|w| w.offset + w.len <= new_len),
            "write past the end"
        );
        Ok(Plan {
            writes: self.writes,
            old_len: self.elf.file_len,
            new_len,
            symbol_fixups,
            layout,
        })
    }
}
