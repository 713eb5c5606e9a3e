//! The file before placement: its string tables, its symbols, its sections sized and its
//! dynamic entries.

use object::elf;

use super::encode::{align_up, Enc, HeaderSizes};
use super::sections::{Id, Sec, SectionOrder};
use super::symbols::{DynSymbols, Versions};
use super::{Draft, COMMENT, DATA_SIZE, INIT_SIZE, NOTE_SIZE};
use crate::strtab::StrTab;
use crate::{Class, Endian, FileType, Spec};

impl<'a> Draft<'a> {
    pub(super) fn new(spec: &'a Spec) -> Draft<'a> {
        let enc = Enc {
            is64: spec.class == Class::Elf64,
            big: spec.endian == Endian::Big,
        };
        let rpath_shared =
            spec.shared_rpath_runpath && spec.rpath.is_some() && spec.runpath.is_some();
        let syms = DynSymbols::of(spec, enc);
        let versions = Versions::of(spec);
        let sections = SectionOrder::of(spec, versions.present);
        // .symtab names (their values come after placement)
        let mut symtab_names: Vec<&str> = vec!["", "_DYNAMIC", "_init", "_fini"];
        if spec.is_executable() {
            symtab_names.push("_start");
        }
        symtab_names.extend(syms.names.iter().copied());
        let symtab_entries = 1 + sections.alloc_count() + symtab_names.len() - 1;
        let strtab = StrTab::build(symtab_names.iter().copied(), spec.tail_merge);
        let shstrtab = StrTab::build(sections.all.iter().map(|i| i.name()), false);
        Draft {
            spec,
            enc,
            headers: HeaderSizes::of(enc),
            dynstr: dynstr_of(spec, rpath_shared),
            rpath_shared,
            syms,
            versions,
            sections,
            symtab_entries,
            strtab,
            shstrtab,
        }
    }

    /// The `.dynamic` entries, `(d_tag, d_val)`, with the sections at `addr(id)`; their number
    /// does not depend on the addresses.
    pub(super) fn dynamic_entries(&self, addr: &dyn Fn(Id) -> u64) -> Vec<(u64, u64)> {
        let spec = self.spec;
        let dynstr = &self.dynstr;
        let mut d: Vec<(u64, u64)> = Vec::new();
        for n in &spec.needed {
            d.push((elf::DT_NEEDED.into(), dynstr.offset(n)));
        }
        if let Some(s) = &spec.soname {
            d.push((elf::DT_SONAME.into(), dynstr.offset(s)));
        }
        if let Some(s) = &spec.rpath {
            let s = if self.rpath_shared {
                spec.runpath.as_ref().unwrap()
            } else {
                s
            };
            d.push((elf::DT_RPATH.into(), dynstr.offset(s)));
        }
        if let Some(s) = &spec.runpath {
            d.push((elf::DT_RUNPATH.into(), dynstr.offset(s)));
        }
        if spec.hash.sysv() {
            d.push((elf::DT_HASH.into(), addr(Id::Hash)));
        }
        if spec.hash.gnu() {
            d.push((elf::DT_GNU_HASH.into(), addr(Id::GnuHash)));
        }
        d.push((elf::DT_STRTAB.into(), addr(Id::Dynstr)));
        d.push((elf::DT_SYMTAB.into(), addr(Id::Dynsym)));
        d.push((elf::DT_STRSZ.into(), dynstr.bytes.len() as u64));
        d.push((elf::DT_SYMENT.into(), self.enc.sym_size()));
        d.push((elf::DT_INIT.into(), addr(Id::Init)));
        d.push((elf::DT_FINI.into(), addr(Id::Fini)));
        if self.versions.present {
            d.push((elf::DT_VERSYM.into(), addr(Id::Versym)));
        }
        if !spec.verneed.is_empty() {
            d.push((elf::DT_VERNEED.into(), addr(Id::Verneed)));
            d.push((elf::DT_VERNEEDNUM.into(), spec.verneed.len() as u64));
        }
        if !spec.verdef.is_empty() {
            d.push((elf::DT_VERDEF.into(), addr(Id::Verdef)));
            d.push((elf::DT_VERDEFNUM.into(), spec.verdef.len() as u64));
        }
        if spec.is_executable() {
            d.push((elf::DT_DEBUG.into(), 0));
        }
        if spec.has_rld_map() {
            // Relative to the entry's own address.
            let slot = addr(Id::Dynamic) + d.len() as u64 * 2 * self.enc.ws();
            let mut rel = addr(Id::RldMap).wrapping_sub(slot);
            if !self.enc.is64 {
                rel &= 0xffff_ffff;
            }
            d.push((elf::DT_MIPS_RLD_MAP_REL.into(), rel));
        }
        d.push((elf::DT_FLAGS.into(), elf::DF_BIND_NOW.into()));
        let pie = spec.e_type == FileType::Dyn && spec.interp.is_some();
        let flags_1 = elf::DF_1_NOW | if pie { elf::DF_1_PIE } else { 0 };
        d.push((elf::DT_FLAGS_1.into(), flags_1.into()));
        for _ in 0..=spec.spare_dynamic_slots {
            d.push((elf::DT_NULL.into(), 0));
        }
        d
    }

    /// Section `id`, sized and aligned, not yet placed.
    pub(super) fn section(&self, id: Id) -> Sec {
        let spec = self.spec;
        let (enc, ws, syms) = (self.enc, self.enc.ws(), &self.syms);
        let (size, align, entsize) = match id {
            Id::Init | Id::Fini => (INIT_SIZE, 4, 0),
            Id::Interp => (spec.interp.as_ref().map_or(0, |s| s.len() as u64 + 1), 1, 0),
            Id::Note => (NOTE_SIZE, 4, 0),
            Id::Hash => {
                let hent = syms.hash_entry;
                let words = 2 + syms.sysv_buckets as u64 + syms.entries as u64;
                (words * hent, hent, hent)
            }
            Id::GnuHash => (
                16 + syms.bloom_words * ws + 4 * syms.gnu_buckets as u64 + 4 * syms.defined as u64,
                ws,
                if enc.is64 { 0 } else { 4 },
            ),
            Id::Dynsym => (syms.entries as u64 * enc.sym_size(), ws, enc.sym_size()),
            Id::Dynstr => (self.dynstr.bytes.len() as u64, 1, 0),
            Id::Versym => (2 * syms.entries as u64, 2, 2),
            Id::Verdef => (28 * spec.verdef.len() as u64, ws, 0),
            Id::Verneed => {
                let size = spec
                    .verneed
                    .iter()
                    .map(|(_, vs)| 16 + 16 * vs.len() as u64)
                    .sum();
                (size, ws, 0)
            }
            Id::Text => (spec.text_size, 16, 0),
            Id::Dynamic => {
                let entries = self.dynamic_entries(&|_| 0).len() as u64;
                (entries * 2 * ws, ws, 2 * ws)
            }
            Id::RldMap => (ws, ws, 0),
            Id::Data => (DATA_SIZE, ws, 0),
            Id::Bss => (spec.bss_size, ws, 0),
            Id::Comment => (COMMENT.len() as u64, 1, 1),
            Id::Symtab => (
                self.symtab_entries as u64 * enc.sym_size(),
                ws,
                enc.sym_size(),
            ),
            Id::Strtab => (self.strtab.bytes.len() as u64, 1, 0),
            Id::Shstrtab => (self.shstrtab.bytes.len() as u64, 1, 0),
        };
        Sec {
            id,
            size,
            align,
            entsize,
            offset: 0,
            addr: 0,
        }
    }

    /// Program headers: `PT_PHDR`, `PT_INTERP`, three `PT_LOAD`s, `PT_DYNAMIC`, `PT_NOTE`,
    /// `PT_GNU_STACK` and the spare `PT_NULL`s.
    pub(super) fn phnum(&self) -> u64 {
        let spec = self.spec;
        spec.pt_phdr as u64
            + spec.interp.is_some() as u64
            + 3 // PT_LOADs
            + 3 // PT_DYNAMIC, PT_NOTE, PT_GNU_STACK
            + spec.pt_null_slots as u64
    }

    /// Lays `ids` out one after the other from file offset `off`, each at address
    /// `vaddr(offset)`; returns the offset after the last.
    pub(super) fn place_run(
        &self,
        ids: &[Id],
        mut off: u64,
        vaddr: impl Fn(u64) -> u64,
        secs: &mut Vec<Sec>,
    ) -> u64 {
        for &id in ids {
            let mut s = self.section(id);
            off = align_up(off, s.align);
            s.offset = off;
            s.addr = vaddr(off);
            off += s.size;
            secs.push(s);
        }
        off
    }
}

/// `.dynstr`: every name the dynamic section, the symbols and the version records use.
fn dynstr_of(spec: &Spec, rpath_shared: bool) -> StrTab {
    let mut strs: Vec<&str> = Vec::new();
    strs.extend(spec.needed.iter().map(String::as_str));
    strs.extend(spec.soname.as_deref());
    if !rpath_shared {
        strs.extend(spec.rpath.as_deref());
    }
    strs.extend(spec.runpath.as_deref());
    strs.extend(spec.dynsyms.iter().map(String::as_str));
    for (f, vs) in &spec.verneed {
        strs.push(f);
        strs.extend(vs.iter().map(String::as_str));
    }
    strs.extend(spec.verdef.iter().map(String::as_str));
    StrTab::build(strs, spec.tail_merge)
}
