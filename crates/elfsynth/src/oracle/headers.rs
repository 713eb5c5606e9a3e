//! The file header, the program and section headers, and which file bytes the `PT_LOAD`s map
//! to an address.

use super::bytes::{cstr, R};
use super::{err, k, Error, Header, Parsed, ProgramHeader, Res, SectionHeader};

pub(super) fn parse_header(d: &[u8]) -> Res<(R<'_>, Header)> {
    if d.len() < 16 || &d[..4] != b"\x7fELF" {
        return err("not an ELF file (bad magic or shorter than e_ident)");
    }
    let is64 = match d[4] {
        1 => false,
        2 => true,
        c => return err(format!("bad EI_CLASS {c}")),
    };
    let big = match d[5] {
        1 => false,
        2 => true,
        c => return err(format!("bad EI_DATA {c}")),
    };
    let r = R { d, big, is64 };
    let h = if is64 {
        r.slice(0, 64)?;
        Header {
            class: d[4],
            data: d[5],
            osabi: d[7],
            e_type: r.u16(16)?,
            e_machine: r.u16(18)?,
            e_version: r.u32(20)?,
            e_entry: r.u64(24)?,
            e_phoff: r.u64(32)?,
            e_shoff: r.u64(40)?,
            e_flags: r.u32(48)?,
            e_ehsize: r.u16(52)?,
            e_phentsize: r.u16(54)?,
            e_phnum: r.u16(56)?,
            e_shentsize: r.u16(58)?,
            e_shnum: r.u16(60)?,
            e_shstrndx: r.u16(62)?,
        }
    } else {
        r.slice(0, 52)?;
        Header {
            class: d[4],
            data: d[5],
            osabi: d[7],
            e_type: r.u16(16)?,
            e_machine: r.u16(18)?,
            e_version: r.u32(20)?,
            e_entry: r.u32(24)? as u64,
            e_phoff: r.u32(28)? as u64,
            e_shoff: r.u32(32)? as u64,
            e_flags: r.u32(36)?,
            e_ehsize: r.u16(40)?,
            e_phentsize: r.u16(42)?,
            e_phnum: r.u16(44)?,
            e_shentsize: r.u16(46)?,
            e_shnum: r.u16(48)?,
            e_shstrndx: r.u16(50)?,
        }
    };
    Ok((r, h))
}

pub(super) fn parse_phdrs(r: R<'_>, h: &Header) -> Res<Vec<ProgramHeader>> {
    let want = if r.is64 { 56 } else { 32 };
    if h.e_phnum == 0 {
        return Ok(Vec::new());
    }
    if u64::from(h.e_phentsize) < want {
        return err(format!(
            "e_phentsize {} is smaller than {want}",
            h.e_phentsize
        ));
    }
    let mut v = Vec::new();
    for i in 0..u64::from(h.e_phnum) {
        let o = i
            .checked_mul(u64::from(h.e_phentsize))
            .and_then(|x| x.checked_add(h.e_phoff))
            .ok_or_else(|| Error("program header offset overflows".into()))?;
        r.slice(o, want)?;
        v.push(if r.is64 {
            ProgramHeader {
                p_type: r.u32(o)?,
                p_flags: r.u32(o + 4)?,
                p_offset: r.u64(o + 8)?,
                p_vaddr: r.u64(o + 16)?,
                p_paddr: r.u64(o + 24)?,
                p_filesz: r.u64(o + 32)?,
                p_memsz: r.u64(o + 40)?,
                p_align: r.u64(o + 48)?,
            }
        } else {
            ProgramHeader {
                p_type: r.u32(o)?,
                p_offset: r.u32(o + 4)? as u64,
                p_vaddr: r.u32(o + 8)? as u64,
                p_paddr: r.u32(o + 12)? as u64,
                p_filesz: r.u32(o + 16)? as u64,
                p_memsz: r.u32(o + 20)? as u64,
                p_flags: r.u32(o + 24)?,
                p_align: r.u32(o + 28)? as u64,
            }
        });
    }
    Ok(v)
}

pub(super) fn parse_shdrs(r: R<'_>, h: &Header) -> Res<Vec<SectionHeader>> {
    let want = if r.is64 { 64 } else { 40 };
    // gABI: "If the file has no section header table, e_shoff holds zero" (whatever e_shnum
    // says); the loader never reads them either.
    if h.e_shnum == 0 || h.e_shoff == 0 {
        return Ok(Vec::new());
    }
    if u64::from(h.e_shentsize) < want {
        return err(format!(
            "e_shentsize {} is smaller than {want}",
            h.e_shentsize
        ));
    }
    let mut v = Vec::new();
    let mut names = Vec::new();
    for i in 0..u64::from(h.e_shnum) {
        let o = i
            .checked_mul(u64::from(h.e_shentsize))
            .and_then(|x| x.checked_add(h.e_shoff))
            .ok_or_else(|| Error("section header offset overflows".into()))?;
        r.slice(o, want)?;
        names.push(r.u32(o)?);
        let w = |x: u64| r.word(o + x);
        v.push(if r.is64 {
            SectionHeader {
                name: String::new(),
                sh_type: r.u32(o + 4)?,
                flags: w(8)?,
                addr: w(16)?,
                offset: w(24)?,
                size: w(32)?,
                link: r.u32(o + 40)?,
                info: r.u32(o + 44)?,
                addralign: w(48)?,
                entsize: w(56)?,
            }
        } else {
            SectionHeader {
                name: String::new(),
                sh_type: r.u32(o + 4)?,
                flags: w(8)?,
                addr: w(12)?,
                offset: w(16)?,
                size: w(20)?,
                link: r.u32(o + 24)?,
                info: r.u32(o + 28)?,
                addralign: w(32)?,
                entsize: w(36)?,
            }
        });
    }
    let strndx = usize::from(h.e_shstrndx);
    if strndx != 0 && strndx < v.len() {
        let s = &v[strndx];
        if let Ok(bytes) = r.slice(s.offset, s.size) {
            for (sec, &n) in v.iter_mut().zip(&names) {
                sec.name = cstr(bytes, u64::from(n), "section name").unwrap_or_default();
            }
        }
    }
    Ok(v)
}

impl Parsed<'_> {
    pub(super) fn loads(&self) -> impl Iterator<Item = &ProgramHeader> {
        self.phdrs.iter().filter(|p| p.p_type == k::PT_LOAD)
    }

    /// File offset of `[vaddr, vaddr + len)` if a `PT_LOAD` maps all of it
    /// from the file (see [`Parsed::mapped_filesz`]).
    pub(super) fn map(&self, vaddr: u64, len: u64) -> Option<u64> {
        let end = vaddr.checked_add(len)?;
        self.loads()
            .find(|p| {
                vaddr >= p.p_vaddr
                    && p.p_vaddr
                        .checked_add(self.mapped_filesz(p))
                        .is_some_and(|pend| end <= pend)
            })
            .and_then(|p| p.p_offset.checked_add(vaddr - p.p_vaddr))
    }

    /// How many bytes from `p_offset` the loader maps from the file for the
    /// `PT_LOAD` `p`. Linux and glibc map whole pages, so this is `p_filesz`
    /// plus the rest of its last page (at 4 KiB, 8 KiB on sparc64 and alpha:
    /// the smallest page of the machine, mapped at every larger one too) —
    /// unless `p_memsz > p_filesz` (that rest is zeroed then), the file ends
    /// first (only what it holds counts), or another `PT_LOAD`'s pages reach
    /// into it (then up to where that one starts if it maps the file with the
    /// same address-offset difference, else nothing).
    pub(super) fn mapped_filesz(&self, p: &ProgramHeader) -> u64 {
        let page: u64 = match self.header.e_machine {
            43 | 0x9026 => 0x2000,
            _ => 0x1000,
        };
        let delta = p.p_vaddr.wrapping_sub(p.p_offset);
        if p.p_filesz == 0 || p.p_memsz != p.p_filesz || delta % page != 0 {
            return p.p_filesz;
        }
        let (Some(data_end), Some(file_end)) = (
            p.p_vaddr.checked_add(p.p_filesz),
            p.p_offset.checked_add(p.p_filesz),
        ) else {
            return p.p_filesz;
        };
        let in_file = (self.r.d.len() as u64).saturating_sub(file_end);
        let mut page_end = match data_end % page {
            0 => data_end,
            r => data_end.saturating_add(page - r),
        };
        page_end = page_end.min(data_end.saturating_add(in_file));
        for q in self.loads() {
            let q_pages = q.p_vaddr / page * page;
            let q_end = q.p_vaddr.saturating_add(q.p_memsz);
            if q.p_memsz == 0 || q_end <= data_end || q_pages >= page_end {
                continue;
            }
            page_end = if q.p_vaddr.wrapping_sub(q.p_offset) == delta {
                page_end.min(q.p_vaddr.max(data_end))
            } else {
                data_end
            };
        }
        p.p_filesz + (page_end - data_end)
    }

    pub(super) fn map_slice(&self, vaddr: u64, len: u64, what: &str) -> Res<&[u8]> {
        match self.map(vaddr, len) {
            Some(off) => self.r.slice(off, len),
            None => err(format!(
                "{what}: {len:#x} bytes at address {vaddr:#x} are not mapped from the file by a PT_LOAD"
            )),
        }
    }

    pub(super) fn map_off(&self, vaddr: u64, what: &str) -> Res<u64> {
        self.map(vaddr, 1).ok_or_else(|| {
            Error(format!(
                "{what}: address {vaddr:#x} is not mapped from the file by a PT_LOAD"
            ))
        })
    }
}
