//! Edits of the file header and the program header table that move nothing: `EI_OSABI`, and the
//! stack's `PF_X` in `PT_GNU_STACK`. What they ask is decided here, from the file alone; where the
//! bytes go (in place, or with the table grown like the appended segment grows it) is the
//! strategies' business.

use object::elf;

use crate::format::Phdr;
use crate::read::{Elf, EI_OSABI};

/// What the edits ask of the file header and the program headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct HeaderEdits {
    /// The new `EI_OSABI`.
    pub(super) os_abi: Option<u8>,
    /// Whether the stack should be executable.
    pub(super) execstack: Option<bool>,
}

/// The identification bytes and program headers once the header edits are applied, before any
/// layout change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NewTable {
    /// `e_ident`.
    pub(super) ident: [u8; 16],
    /// The existing entries: `PF_X` changed, or a `PT_NULL` turned into `PT_GNU_STACK`.
    pub(super) phdrs: Vec<Phdr>,
    /// Entries to add at the end of the table (a `PT_GNU_STACK` where there was none and no
    /// `PT_NULL` to hold it).
    pub(super) added: Vec<Phdr>,
    /// The `PT_NULL` entry the new `PT_GNU_STACK` took: a new `PT_LOAD` cannot have it.
    pub(super) taken_null: Option<usize>,
}

impl NewTable {
    /// The table `edits` ask for.
    pub(super) fn of(elf: &Elf, edits: HeaderEdits) -> NewTable {
        let mut ident = elf.header.ident;
        if let Some(abi) = edits.os_abi {
            ident[EI_OSABI] = abi;
        }
        let mut table = NewTable {
            ident,
            phdrs: elf.phdrs.clone(),
            added: Vec::new(),
            taken_null: None,
        };
        if let Some(executable) = edits.execstack {
            table.set_execstack(executable);
        }
        table
    }

    /// Sets `PF_X` of every `PT_GNU_STACK` (the kernel and glibc both take the last one, patchelf
    /// changes the first: with all of them set, both readings agree), or adds one.
    fn set_execstack(&mut self, executable: bool) {
        let mut found = false;
        for p in self
            .phdrs
            .iter_mut()
            .filter(|p| p.p_type == elf::PT_GNU_STACK)
        {
            found = true;
            if executable {
                p.p_flags |= elf::PF_X;
            } else {
                p.p_flags &= !elf::PF_X;
            }
        }
        if found {
            return;
        }
        // The entry patchelf writes: read-write, executable when asked, no extent.
        let stack = Phdr {
            p_type: elf::PT_GNU_STACK,
            p_flags: elf::PF_R | elf::PF_W | if executable { elf::PF_X } else { 0 },
            p_align: 1,
            ..Phdr::default()
        };
        match self.phdrs.iter().position(|p| p.p_type == elf::PT_NULL) {
            Some(i) => {
                self.phdrs[i] = stack;
                self.taken_null = Some(i);
            }
            None => self.added.push(stack),
        }
    }

    /// Whether anything differs from the file.
    pub(super) fn changed(&self, elf: &Elf) -> bool {
        self.ident != elf.header.ident || self.phdrs != elf.phdrs || !self.added.is_empty()
    }
}
