//! The headers: the section headers, the program headers and the ELF header.

use object::elf;

use super::place::Placement;
use super::sections::Id;
use super::{Draft, Segment};
use crate::{AfterPhdrs, FileType, PlacedSection};

/// Every section as its header describes it, the null section first.
pub(super) fn section_headers(d: &Draft<'_>, p: &Placement) -> Vec<PlacedSection> {
    let order = &d.sections;
    let idx = |id: Id| order.idx(id) as u32;
    // The null symbol, the section symbols, and _DYNAMIC, _init, _fini are local.
    let first_global_symtab = (1 + order.alloc_count() + 3) as u32;
    let mut placed: Vec<PlacedSection> = vec![PlacedSection {
        name: String::new(),
        sh_type: 0,
        flags: 0,
        addr: 0,
        offset: 0,
        size: 0,
        link: 0,
        info: 0,
        addralign: 0,
        entsize: 0,
    }];
    for s in &p.secs {
        let (link, info) = match s.id {
            Id::Hash | Id::GnuHash | Id::Versym => (idx(Id::Dynsym), 0),
            Id::Dynsym => (idx(Id::Dynstr), 1),
            Id::Dynamic => (idx(Id::Dynstr), 0),
            Id::Verdef => (idx(Id::Dynstr), d.spec.verdef.len() as u32),
            Id::Verneed => (idx(Id::Dynstr), d.spec.verneed.len() as u32),
            Id::Symtab => (idx(Id::Strtab), first_global_symtab),
            _ => (0, 0),
        };
        placed.push(PlacedSection {
            name: s.id.name().to_string(),
            sh_type: s.id.sh_type(),
            flags: s.id.flags(),
            addr: if s.id.flags() & u64::from(elf::SHF_ALLOC) != 0 {
                s.addr
            } else {
                0
            },
            offset: s.offset,
            size: s.size,
            link,
            info,
            addralign: s.align,
            entsize: s.entsize,
        });
    }
    placed
}

pub(super) fn encode_section_headers(d: &Draft<'_>, placed: &[PlacedSection]) -> Vec<u8> {
    let enc = d.enc;
    let mut b = Vec::new();
    for (i, p) in placed.iter().enumerate() {
        let name = if i == 0 {
            0
        } else {
            d.shstrtab.offset(&p.name) as u32
        };
        enc.u32(&mut b, name);
        enc.u32(&mut b, p.sh_type);
        enc.word(&mut b, p.flags);
        enc.word(&mut b, p.addr);
        enc.word(&mut b, p.offset);
        enc.word(&mut b, p.size);
        enc.u32(&mut b, p.link);
        enc.u32(&mut b, p.info);
        enc.word(&mut b, p.addralign);
        enc.word(&mut b, p.entsize);
    }
    b
}

pub(super) fn program_headers(d: &Draft<'_>, p: &Placement) -> Vec<Segment> {
    let spec = d.spec;
    let (page, base) = (spec.page_size, spec.base);
    let from_sec = |p_type: u32, p_flags: u32, id: Id, align: u64| -> Segment {
        let s = p.sec(id);
        Segment {
            p_type,
            p_flags,
            offset: s.offset,
            vaddr: s.addr,
            filesz: s.size,
            memsz: s.size,
            align,
        }
    };
    let load = |p_flags: u32, offset: u64, vaddr: u64, filesz: u64, memsz: u64| Segment {
        p_type: elf::PT_LOAD,
        p_flags,
        offset,
        vaddr,
        filesz,
        memsz,
        align: page,
    };
    let empty = |p_type: u32, p_flags: u32, align: u64| Segment {
        p_type,
        p_flags,
        offset: 0,
        vaddr: 0,
        filesz: 0,
        memsz: 0,
        align,
    };
    let mut segs: Vec<Segment> = Vec::new();
    let phsize = p.phnum * d.headers.phdr;
    if spec.pt_phdr {
        segs.push(Segment {
            p_type: elf::PT_PHDR,
            p_flags: elf::PF_R,
            offset: p.phoff,
            vaddr: base + p.phoff,
            filesz: phsize,
            memsz: phsize,
            align: d.enc.ws(),
        });
    }
    if spec.interp.is_some() {
        segs.push(from_sec(elf::PT_INTERP, elf::PF_R, Id::Interp, 1));
    }
    let first_flags = if spec.first_after_phdrs == AfterPhdrs::Text {
        elf::PF_R | elf::PF_X
    } else {
        elf::PF_R
    };
    segs.push(load(first_flags, 0, base, p.first_filesz, p.first_filesz));
    let text_size = p.text_end - p.text_off;
    let text_vaddr = base + p.text_off;
    segs.push(load(
        elf::PF_R | elf::PF_X,
        p.text_off,
        text_vaddr,
        text_size,
        text_size,
    ));
    let rw_filesz = p.rw_file_end - p.rw_off;
    let rw_memsz = p.mem_end - p.rw_vaddr;
    let rw = elf::PF_R | elf::PF_W;
    segs.push(load(rw, p.rw_off, p.rw_vaddr, rw_filesz, rw_memsz));
    segs.push(from_sec(elf::PT_DYNAMIC, rw, Id::Dynamic, d.enc.ws()));
    segs.push(from_sec(elf::PT_NOTE, elf::PF_R, Id::Note, 4));
    segs.push(empty(elf::PT_GNU_STACK, rw, 16));
    for _ in 0..spec.pt_null_slots {
        segs.push(empty(elf::PT_NULL, 0, 0));
    }
    debug_assert_eq!(segs.len() as u64, p.phnum);
    segs
}

pub(super) fn encode_program_headers(d: &Draft<'_>, segs: &[Segment]) -> Vec<u8> {
    let enc = d.enc;
    let mut b = Vec::new();
    for s in segs {
        enc.u32(&mut b, s.p_type);
        if enc.is64 {
            enc.u32(&mut b, s.p_flags);
        }
        enc.word(&mut b, s.offset);
        enc.word(&mut b, s.vaddr);
        enc.word(&mut b, s.vaddr);
        enc.word(&mut b, s.filesz);
        enc.word(&mut b, s.memsz);
        if !enc.is64 {
            enc.u32(&mut b, s.p_flags);
        }
        enc.word(&mut b, s.align);
    }
    b
}

/// The ELF header; `shnum` counts the null section.
pub(super) fn elf_header(d: &Draft<'_>, p: &Placement, entry: u64, shnum: usize) -> Vec<u8> {
    let (spec, enc, sizes) = (d.spec, d.enc, &d.headers);
    let shdrs = spec.with_section_headers;
    let mut b = vec![0x7f, b'E', b'L', b'F'];
    b.push(if enc.is64 { 2 } else { 1 });
    b.push(if enc.big { 2 } else { 1 });
    b.push(1); // EI_VERSION
    b.push(0); // ELFOSABI_NONE
    b.resize(16, 0);
    enc.u16(&mut b, if spec.e_type == FileType::Exec { 2 } else { 3 });
    enc.u16(&mut b, spec.machine.e_machine());
    enc.u32(&mut b, 1);
    enc.word(&mut b, entry);
    enc.word(&mut b, p.phoff);
    enc.word(&mut b, p.shoff);
    enc.u32(&mut b, spec.machine.e_flags(spec.class, spec.endian));
    enc.u16(&mut b, sizes.ehdr as u16);
    enc.u16(&mut b, sizes.phdr as u16);
    enc.u16(&mut b, p.phnum as u16);
    enc.u16(&mut b, sizes.shdr as u16);
    enc.u16(&mut b, if shdrs { shnum as u16 } else { 0 });
    let shstrndx = if shdrs {
        d.sections.idx(Id::Shstrtab)
    } else {
        0
    };
    enc.u16(&mut b, shstrndx);
    debug_assert_eq!(b.len() as u64, sizes.ehdr);
    b
}
