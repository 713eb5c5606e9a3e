//! The sections a spec's file has, what each is, and their order.

use std::collections::HashMap;

use object::elf;

use crate::{AfterPhdrs, Spec};

/// A section the builder can place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Id {
    Init,
    Interp,
    Note,
    Hash,
    GnuHash,
    Dynsym,
    Dynstr,
    Versym,
    Verdef,
    Verneed,
    Text,
    Fini,
    Dynamic,
    RldMap,
    Data,
    Bss,
    Comment,
    Symtab,
    Strtab,
    Shstrtab,
}

impl Id {
    pub(super) fn name(self) -> &'static str {
        match self {
            Id::Init => ".init",
            Id::Interp => ".interp",
            Id::Note => ".note.gnu.build-id",
            Id::Hash => ".hash",
            Id::GnuHash => ".gnu.hash",
            Id::Dynsym => ".dynsym",
            Id::Dynstr => ".dynstr",
            Id::Versym => ".gnu.version",
            Id::Verdef => ".gnu.version_d",
            Id::Verneed => ".gnu.version_r",
            Id::Text => ".text",
            Id::Fini => ".fini",
            Id::Dynamic => ".dynamic",
            Id::RldMap => ".rld_map",
            Id::Data => ".data",
            Id::Bss => ".bss",
            Id::Comment => ".comment",
            Id::Symtab => ".symtab",
            Id::Strtab => ".strtab",
            Id::Shstrtab => ".shstrtab",
        }
    }

    pub(super) fn sh_type(self) -> u32 {
        match self {
            Id::Init | Id::Interp | Id::Text | Id::Fini | Id::RldMap | Id::Data | Id::Comment => {
                elf::SHT_PROGBITS
            }
            Id::Note => elf::SHT_NOTE,
            Id::Hash => elf::SHT_HASH,
            Id::GnuHash => elf::SHT_GNU_HASH,
            Id::Dynsym => elf::SHT_DYNSYM,
            Id::Dynstr | Id::Strtab | Id::Shstrtab => elf::SHT_STRTAB,
            Id::Versym => elf::SHT_GNU_VERSYM,
            Id::Verdef => elf::SHT_GNU_VERDEF,
            Id::Verneed => elf::SHT_GNU_VERNEED,
            Id::Dynamic => elf::SHT_DYNAMIC,
            Id::Bss => elf::SHT_NOBITS,
            Id::Symtab => elf::SHT_SYMTAB,
        }
    }

    pub(super) fn flags(self) -> u64 {
        u64::from(match self {
            Id::Init | Id::Text | Id::Fini => elf::SHF_ALLOC | elf::SHF_EXECINSTR,
            Id::Dynamic | Id::RldMap | Id::Data | Id::Bss => elf::SHF_ALLOC | elf::SHF_WRITE,
            Id::Comment => elf::SHF_MERGE | elf::SHF_STRINGS,
            Id::Symtab | Id::Strtab | Id::Shstrtab => 0,
            _ => elf::SHF_ALLOC,
        })
    }
}

/// A section sized and aligned, and once placed, where it lies.
pub(super) struct Sec {
    pub(super) id: Id,
    pub(super) size: u64,
    pub(super) align: u64,
    pub(super) entsize: u64,
    pub(super) offset: u64,
    pub(super) addr: u64,
}

/// The sections of each part of the file, in file order, and their section header indices.
pub(super) struct SectionOrder {
    /// In the first `PT_LOAD`, after the program headers.
    pub(super) first: Vec<Id>,
    /// In the executable `PT_LOAD`.
    pub(super) text: Vec<Id>,
    /// In the writable `PT_LOAD`.
    pub(super) rw: Vec<Id>,
    /// Not loaded (only with section headers).
    pub(super) nonalloc: Vec<Id>,
    /// All of them, in order.
    pub(super) all: Vec<Id>,
    /// Section header index of each.
    pub(super) index: HashMap<Id, u16>,
}

impl SectionOrder {
    pub(super) fn of(spec: &Spec, has_versions: bool) -> SectionOrder {
        let mut first: Vec<Id> = Vec::new();
        if spec.interp.is_some() {
            first.push(Id::Interp);
        }
        first.push(Id::Note);
        if spec.hash.sysv() {
            first.push(Id::Hash);
        }
        if spec.hash.gnu() {
            first.push(Id::GnuHash);
        }
        first.push(Id::Dynsym);
        first.push(Id::Dynstr);
        if has_versions {
            first.push(Id::Versym);
        }
        if !spec.verdef.is_empty() {
            first.push(Id::Verdef);
        }
        if !spec.verneed.is_empty() {
            first.push(Id::Verneed);
        }
        let mut text: Vec<Id> = vec![Id::Init, Id::Text, Id::Fini];
        match spec.first_after_phdrs {
            AfterPhdrs::Interp => {}
            AfterPhdrs::Text => {
                text.remove(0);
                first.insert(0, Id::Init);
            }
            AfterPhdrs::Dynsym => {
                first.retain(|&i| i != Id::Dynsym);
                first.insert(0, Id::Dynsym);
            }
        }
        let mut rw: Vec<Id> = vec![Id::Dynamic];
        if spec.has_rld_map() {
            rw.push(Id::RldMap);
        }
        rw.push(Id::Data);
        if spec.bss_size > 0 {
            rw.push(Id::Bss);
        }
        let mut nonalloc: Vec<Id> = Vec::new();
        if spec.with_section_headers {
            nonalloc.push(Id::Comment);
            if spec.symtab {
                nonalloc.push(Id::Symtab);
                nonalloc.push(Id::Strtab);
            }
            nonalloc.push(Id::Shstrtab);
        }
        let all: Vec<Id> = first
            .iter()
            .chain(&text)
            .chain(&rw)
            .chain(&nonalloc)
            .copied()
            .collect();
        let index = all
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i as u16 + 1))
            .collect();
        SectionOrder {
            first,
            text,
            rw,
            nonalloc,
            all,
            index,
        }
    }

    /// The section header index of `id` (0 when the file has no such section).
    pub(super) fn idx(&self, id: Id) -> u16 {
        self.index.get(&id).copied().unwrap_or(0)
    }

    /// How many sections are allocated (they come first).
    pub(super) fn alloc_count(&self) -> usize {
        self.first.len() + self.text.len() + self.rw.len()
    }
}
