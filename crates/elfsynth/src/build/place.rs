//! Placement: where every section and segment of the file lies, as GNU ld lays files out.

use std::collections::HashMap;

use super::encode::align_up;
use super::sections::{Id, Sec};
use super::{Draft, SpecError};

/// Where every section and segment of the file lies.
pub(super) struct Placement {
    /// The sections in file (and section header) order.
    pub(super) secs: Vec<Sec>,
    /// Index into `secs` of each section.
    pub(super) sec_of: HashMap<Id, usize>,
    pub(super) phoff: u64,
    pub(super) phnum: u64,
    /// `p_filesz` (and `p_memsz`) of the first `PT_LOAD`: short of its end with
    /// [`Spec::tail_bytes`](crate::Spec::tail_bytes).
    pub(super) first_filesz: u64,
    /// The executable `PT_LOAD`'s file range.
    pub(super) text_off: u64,
    pub(super) text_end: u64,
    /// The writable `PT_LOAD`: file offset, address, end of its file part and of its memory.
    pub(super) rw_off: u64,
    pub(super) rw_vaddr: u64,
    pub(super) rw_file_end: u64,
    pub(super) mem_end: u64,
    /// `e_shoff` (0 without section headers).
    pub(super) shoff: u64,
    pub(super) file_size: u64,
}

impl Placement {
    /// The address of section `id` (0 when the file has none).
    pub(super) fn addr(&self, id: Id) -> u64 {
        self.sec_of.get(&id).map_or(0, |&i| self.secs[i].addr)
    }

    pub(super) fn sec(&self, id: Id) -> &Sec {
        &self.secs[self.sec_of[&id]]
    }
}

/// Places the sections the way GNU ld does: the read-only tables after the program headers, the
/// code from the next page, the writable data on the page after the code (same offset in the
/// page), the non-allocated sections and the section headers at the end.
pub(super) fn place(d: &Draft) -> Result<Placement, SpecError> {
    let spec = d.spec;
    let (enc, ws, page, base) = (d.enc, d.enc.ws(), spec.page_size, spec.base);
    let order = &d.sections;
    let phnum = d.phnum();
    let phoff = d.headers.ehdr;
    let mut secs: Vec<Sec> = Vec::new();
    let tables_start = phoff + phnum * d.headers.phdr + spec.phdr_slack as u64;
    let end1 = d.place_run(&order.first, tables_start, |off| base + off, &mut secs);
    // A first PT_LOAD that stops short of its last tables (Spec::tail_bytes): they stay in the
    // rest of its last 4 KiB page, which the loader maps from the file all the same. The cut
    // never reaches below that page or into the program header table.
    let first_filesz = if spec.tail_bytes == 0 {
        end1
    } else {
        let last_page = (end1 - 1) / 0x1000 * 0x1000;
        end1.saturating_sub(spec.tail_bytes)
            .max(last_page + 1)
            .max(phoff + phnum * d.headers.phdr)
            .min(end1)
    };
    let text_off = align_up(end1, page);
    let text_end = d.place_run(&order.text, text_off, |off| base + off, &mut secs);
    let rw_off = align_up(text_end, ws);
    let rw_vaddr = align_up(base + text_end, page) + rw_off % page;
    let delta = rw_vaddr - rw_off;
    let mut off = rw_off;
    let mut mem_end = rw_vaddr;
    for &id in &order.rw {
        let mut s = d.section(id);
        if id == Id::Bss {
            s.addr = align_up(mem_end, s.align);
            s.offset = s.addr - delta;
            mem_end = s.addr + s.size;
        } else {
            off = align_up(off, s.align);
            s.offset = off;
            s.addr = off + delta;
            off += s.size;
            mem_end = s.addr + s.size;
        }
        secs.push(s);
    }
    let rw_file_end = off;
    let off = d.place_run(&order.nonalloc, rw_file_end, |_| 0, &mut secs);
    let (shoff, file_size) = if spec.with_section_headers {
        let shoff = align_up(off, ws);
        (shoff, shoff + (order.all.len() as u64 + 1) * d.headers.shdr)
    } else {
        (0, rw_file_end)
    };
    if !enc.is64 && (file_size > u32::MAX as u64 || mem_end > u32::MAX as u64) {
        return Err(SpecError(format!(
            "a 32-bit file cannot hold this layout (file size {file_size:#x}, end address {mem_end:#x})"
        )));
    }
    if usize::try_from(file_size).is_err() {
        return Err(SpecError("file too large for this host".into()));
    }
    let sec_of = secs.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    Ok(Placement {
        secs,
        sec_of,
        phoff,
        phnum,
        first_filesz,
        text_off,
        text_end,
        rw_off,
        rw_vaddr,
        rw_file_end,
        mem_end,
        shoff,
        file_size,
    })
}
