//! The layout invariants of [`check_layout`]: where the segments, the sections and the header
//! tables lie, and what the dynamic array's pointers point at.

use super::symbols::{check_string_refs, check_symbol_lookup};
use super::{k, parse, Parsed, ProgramHeader, SectionHeader, POINTER_TAGS};

fn within(inner_start: u64, inner_len: u64, outer_start: u64, outer_len: u64) -> bool {
    match (
        inner_start.checked_add(inner_len),
        outer_start.checked_add(outer_len),
    ) {
        (Some(ie), Some(oe)) => inner_start >= outer_start && ie <= oe,
        _ => false,
    }
}

/// Pairs `(i, j)`, `i < j`, of overlapping non-empty ranges `(start, len,
/// id)`; every range that overlaps an earlier-starting one is reported once.
fn overlapping(mut items: Vec<(u64, u64, usize)>) -> Vec<(usize, usize)> {
    items.retain(|x| x.1 > 0);
    items.sort_unstable();
    let mut out = Vec::new();
    let mut furthest: Option<(u64, usize)> = None;
    for (start, len, i) in items {
        let end = start.saturating_add(len);
        if let Some((fend, fi)) = furthest {
            if start < fend {
                out.push((fi.min(i), fi.max(i)));
            }
        }
        if !matches!(furthest, Some((fend, _)) if end <= fend) {
            furthest = Some((end, i));
        }
    }
    out
}

fn overlaps(a: u64, alen: u64, b: u64, blen: u64) -> bool {
    alen > 0 && blen > 0 && a < b.saturating_add(blen) && b < a.saturating_add(alen)
}

/// Whether `[off, off+len)` / `[addr, addr+len)` lies in what `p` maps from
/// the file (`mapped` bytes from `p_offset`), with the segment's
/// offset→address mapping.
fn in_load_file(p: &ProgramHeader, mapped: u64, off: u64, addr: u64, len: u64) -> bool {
    within(off, len, p.p_offset, mapped)
        && addr.checked_sub(p.p_vaddr) == off.checked_sub(p.p_offset)
}

/// Lists violations of the layout invariants a loadable, editable ELF file
/// must satisfy. An empty list means the file passed every check:
///
/// * `PT_LOAD`s sorted by `p_vaddr`, non-overlapping in memory and in the
///   file, `p_filesz <= p_memsz`, `p_offset ≡ p_vaddr (mod p_align)` (also
///   modulo the largest `p_align`, as older glibc checks);
/// * every segment and section inside the file; the header tables inside
///   the file and not overlapping any section;
/// * every `SHF_ALLOC` section inside exactly one `PT_LOAD`, by file range
///   and by address consistent with that segment's mapping; allocated
///   sections not overlapping each other; file-backed sections not
///   overlapping each other in the file;
/// * `PT_DYNAMIC`, `PT_INTERP`, `PT_NOTE`, `PT_PHDR` inside a `PT_LOAD`;
///   `PT_DYNAMIC` inside a writable one; `PT_PHDR` and `PT_INTERP` before
///   every `PT_LOAD`; `PT_PHDR` matching `e_phoff`/`e_phnum`; `e_entry` in an
///   executable `PT_LOAD`;
/// * `DT_STRTAB`/`DT_STRSZ` inside a `PT_LOAD` and equal to the `.dynstr`
///   section's address/size when there are section headers; pointer tags
///   ([`POINTER_TAGS`]) inside a `PT_LOAD` and equal to their sections'
///   addresses; `PT_DYNAMIC` and `PT_INTERP` equal to `.dynamic` and
///   `.interp`;
/// * every string reference (string tags, dynsym names, verneed file and
///   version names, verdef names) inside `.dynstr` and NUL-terminated;
///   `vna_hash`/`vd_hash` matching their names;
/// * every dynamic symbol findable through `DT_HASH` and `DT_GNU_HASH` by
///   its (current) name — so a clobbered shared string tail shows up;
/// * `DT_MIPS_RLD_MAP_REL` pointing into a writable `PT_LOAD` (and at
///   `.rld_map` when that section exists);
/// * `sh_link` of every section and `e_shstrndx` valid indices.
pub fn check_layout(data: &[u8]) -> Vec<String> {
    let p = match parse(data) {
        Ok(p) => p,
        Err(e) => return vec![format!("unreadable: {e}")],
    };
    let mut v: Vec<String> = Vec::new();
    let f = LayoutCheck::of(&p, data.len() as u64);
    f.check_loads(&mut v);
    f.check_segments(&mut v);
    f.check_sections(&mut v);
    f.check_section_overlaps(&mut v);
    let dynamic = match p.dynamic_raw() {
        Ok((d, _)) => d,
        Err(e) => {
            v.push(format!("PT_DYNAMIC: {e}"));
            return v;
        }
    };
    f.check_dynamic_sections(&mut v);
    let dynstr = match p.dynstr(&dynamic) {
        Ok(d) => d,
        Err(e) => {
            v.push(e.0);
            None
        }
    };
    f.check_dynamic_pointers(&dynamic, &mut v);
    let Some(strs) = dynstr else {
        return v;
    };
    check_string_refs(&p, &dynamic, strs, &mut v);
    check_symbol_lookup(&p, &dynamic, strs, &mut v);
    v
}

/// What the invariant groups of [`check_layout`] read: the parsed file, its length, and its
/// `PT_LOAD`s with their indices in the program header table.
struct LayoutCheck<'p, 'a> {
    p: &'p Parsed<'a>,
    len: u64,
    loads: Vec<(usize, &'p ProgramHeader)>,
}

impl<'p, 'a> LayoutCheck<'p, 'a> {
    fn of(p: &'p Parsed<'a>, len: u64) -> LayoutCheck<'p, 'a> {
        let loads = p
            .phdrs
            .iter()
            .enumerate()
            .filter(|(_, x)| x.p_type == k::PT_LOAD)
            .collect();
        LayoutCheck { p, len, loads }
    }

    fn phsize(&self) -> u64 {
        u64::from(self.p.header.e_phnum) * u64::from(self.p.header.e_phentsize)
    }

    fn shsize(&self) -> u64 {
        u64::from(self.p.header.e_shnum) * u64::from(self.p.header.e_shentsize)
    }

    /// `PT_LOAD`s sorted, `p_filesz <= p_memsz`, aligned, and not overlapping.
    fn check_loads(&self, v: &mut Vec<String>) {
        let loads = &self.loads;
        let max_align = loads.iter().map(|(_, x)| x.p_align).max().unwrap_or(0);
        for w in loads.windows(2) {
            if w[1].1.p_vaddr < w[0].1.p_vaddr {
                v.push(format!(
                    "PT_LOADs not sorted by p_vaddr: phdr {} ({:#x}) follows phdr {} ({:#x})",
                    w[1].0, w[1].1.p_vaddr, w[0].0, w[0].1.p_vaddr
                ));
            }
        }
        for (i, x) in loads {
            if x.p_filesz > x.p_memsz {
                v.push(format!(
                    "PT_LOAD phdr {i}: p_filesz {:#x} > p_memsz {:#x}",
                    x.p_filesz, x.p_memsz
                ));
            }
            if x.p_align > 1 {
                if !x.p_align.is_power_of_two() {
                    v.push(format!(
                        "PT_LOAD phdr {i}: p_align {:#x} is not a power of two",
                        x.p_align
                    ));
                } else if x.p_offset % x.p_align != x.p_vaddr % x.p_align {
                    v.push(format!(
                        "PT_LOAD phdr {i}: p_offset {:#x} not congruent to p_vaddr {:#x} modulo p_align {:#x}",
                        x.p_offset, x.p_vaddr, x.p_align
                    ));
                } else if max_align.is_power_of_two()
                    && x.p_offset % max_align != x.p_vaddr % max_align
                {
                    v.push(format!(
                        "PT_LOAD phdr {i}: p_offset {:#x} not congruent to p_vaddr {:#x} modulo the largest PT_LOAD p_align {max_align:#x}",
                        x.p_offset, x.p_vaddr
                    ));
                }
            }
        }
        let ranges = |f: &dyn Fn(&ProgramHeader) -> (u64, u64)| -> Vec<(u64, u64, usize)> {
            loads
                .iter()
                .map(|(i, x)| {
                    let (a, b) = f(x);
                    (a, b, *i)
                })
                .collect()
        };
        for (i, j) in overlapping(ranges(&|x| (x.p_vaddr, x.p_memsz))) {
            v.push(format!("PT_LOAD phdrs {i} and {j} overlap in memory"));
        }
        for (i, j) in overlapping(ranges(&|x| (x.p_offset, x.p_filesz))) {
            v.push(format!("PT_LOAD phdrs {i} and {j} overlap in the file"));
        }
    }

    /// Every segment inside the file; `PT_DYNAMIC`, `PT_INTERP`, `PT_NOTE` and `PT_PHDR` inside a
    /// `PT_LOAD` (and where the loader needs them); `e_entry` in executable code.
    fn check_segments(&self, v: &mut Vec<String>) {
        let (p, h, len) = (self.p, &self.p.header, self.len);
        let ph = &p.phdrs;
        for (i, x) in ph.iter().enumerate() {
            if x.p_filesz > 0 && !within(x.p_offset, x.p_filesz, 0, len) {
                v.push(format!(
                    "phdr {i} (type {:#x}): file range {:#x}+{:#x} outside the {len:#x}-byte file",
                    x.p_type, x.p_offset, x.p_filesz
                ));
            }
        }
        let first_load = self.loads.first().map(|l| l.0).unwrap_or(usize::MAX);
        for (i, x) in ph.iter().enumerate() {
            let what = match x.p_type {
                k::PT_DYNAMIC => "PT_DYNAMIC",
                k::PT_INTERP => "PT_INTERP",
                k::PT_NOTE => "PT_NOTE",
                k::PT_PHDR => "PT_PHDR",
                _ => continue,
            };
            match self.loads.iter().find(|(_, l)| {
                in_load_file(l, p.mapped_filesz(l), x.p_offset, x.p_vaddr, x.p_filesz)
            }) {
                None => v.push(format!("{what} (phdr {i}) is not inside a PT_LOAD")),
                Some((_, l)) => {
                    // MIPS keeps .dynamic read-only, and says so in PT_DYNAMIC's flags.
                    let mips_read_only = h.e_machine == k::EM_MIPS && x.p_flags & k::PF_W == 0;
                    if x.p_type == k::PT_DYNAMIC && l.p_flags & k::PF_W == 0 && !mips_read_only {
                        v.push(format!(
                            "PT_DYNAMIC (phdr {i}) is inside a read-only PT_LOAD"
                        ));
                    }
                }
            }
            if (x.p_type == k::PT_PHDR || x.p_type == k::PT_INTERP) && i > first_load {
                v.push(format!("{what} (phdr {i}) does not precede every PT_LOAD"));
            }
            if x.p_type == k::PT_PHDR {
                let size = self.phsize();
                if x.p_offset != h.e_phoff || x.p_filesz != size {
                    v.push(format!(
                        "PT_PHDR {:#x}+{:#x} does not match e_phoff {:#x} / e_phnum*e_phentsize {size:#x}",
                        x.p_offset, x.p_filesz, h.e_phoff
                    ));
                }
            }
        }
        if ph.iter().filter(|x| x.p_type == k::PT_PHDR).count() > 1 {
            v.push("more than one PT_PHDR".into());
        }
        if h.e_entry != 0
            && !self.loads.iter().any(|(_, l)| {
                l.p_flags & k::PF_X != 0 && within(h.e_entry, 1, l.p_vaddr, l.p_memsz)
            })
        {
            v.push(format!(
                "e_entry {:#x} is not inside an executable PT_LOAD",
                h.e_entry
            ));
        }
    }

    /// Each section: a valid `sh_link`, inside the file and off the header tables, aligned, and
    /// (allocated) inside exactly one `PT_LOAD`; a valid `e_shstrndx` and a null section 0.
    fn check_sections(&self, v: &mut Vec<String>) {
        let (h, len, sh) = (&self.p.header, self.len, &self.p.shdrs);
        if !sh.is_empty() {
            if usize::from(h.e_shstrndx) >= sh.len() {
                v.push(format!(
                    "e_shstrndx {} is not a valid section index",
                    h.e_shstrndx
                ));
            }
            if let Some(first) = sh.first() {
                if first.sh_type != 0 {
                    v.push("section 0 is not SHT_NULL".into());
                }
            }
        }
        // gABI: an SHT_NULL header is inactive and its other members are undefined, so it describes
        // nothing that could be misplaced.
        for (i, s) in sh
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, s)| s.sh_type != 0)
        {
            let nm = &s.name;
            if s.link as usize >= sh.len() {
                v.push(format!(
                    "section {i} '{nm}': sh_link {} is not a valid section index",
                    s.link
                ));
            }
            let file_backed = s.sh_type != k::SHT_NOBITS && s.size > 0;
            if file_backed && !within(s.offset, s.size, 0, len) {
                v.push(format!(
                    "section {i} '{nm}': file range {:#x}+{:#x} outside the {len:#x}-byte file",
                    s.offset, s.size
                ));
            }
            if file_backed && overlaps(s.offset, s.size, h.e_phoff, self.phsize()) {
                v.push(format!(
                    "section {i} '{nm}' overlaps the program header table"
                ));
            }
            if file_backed && overlaps(s.offset, s.size, h.e_shoff, self.shsize()) {
                v.push(format!(
                    "section {i} '{nm}' overlaps the section header table"
                ));
            }
            if file_backed && overlaps(s.offset, s.size, 0, u64::from(h.e_ehsize)) {
                v.push(format!("section {i} '{nm}' overlaps the ELF header"));
            }
            // gABI: sh_addralign is 0 or a power of two; any other value constrains nothing an
            // edit could keep, and is a finding of its own.
            if s.addralign > 1 && !s.addralign.is_power_of_two() {
                v.push(format!(
                    "section {i} '{nm}': sh_addralign {:#x} is not a power of two",
                    s.addralign
                ));
            } else if s.addralign > 1 && s.flags & k::SHF_ALLOC != 0 && s.addr % s.addralign != 0 {
                v.push(format!(
                    "section {i} '{nm}': address {:#x} not aligned to {:#x}",
                    s.addr, s.addralign
                ));
            }
            if s.flags & k::SHF_ALLOC != 0 {
                let count = self.loads_holding(s);
                if count == 0 || (count > 1 && s.size > 0) {
                    v.push(format!(
                        "SHF_ALLOC section {i} '{nm}' ({:#x}+{:#x} at {:#x}) is inside {count} PT_LOADs, not exactly one",
                        s.offset, s.size, s.addr
                    ));
                }
            }
        }
    }

    /// How many `PT_LOAD`s hold allocated section `s` (by address for `SHT_NOBITS`, else by
    /// file range with the segment's offset-to-address mapping; an empty section at an end
    /// counts).
    fn loads_holding(&self, s: &SectionHeader) -> usize {
        self.loads
            .iter()
            .filter(|(_, l)| {
                if s.sh_type == k::SHT_NOBITS {
                    if s.size == 0 {
                        s.addr >= l.p_vaddr && s.addr <= l.p_vaddr.saturating_add(l.p_memsz)
                    } else {
                        within(s.addr, s.size, l.p_vaddr, l.p_memsz)
                    }
                } else if s.size == 0 {
                    s.offset >= l.p_offset
                        && s.offset <= l.p_offset.saturating_add(l.p_filesz)
                        && s.addr.checked_sub(l.p_vaddr) == s.offset.checked_sub(l.p_offset)
                } else {
                    in_load_file(l, self.p.mapped_filesz(l), s.offset, s.addr, s.size)
                }
            })
            .count()
    }

    /// Sections not overlapping each other, in memory (allocated ones) and in the file; the
    /// header tables inside the file.
    fn check_section_overlaps(&self, v: &mut Vec<String>) {
        let (h, len, sh) = (&self.p.header, self.len, &self.p.shdrs);
        let name = |i: usize| sh.get(i).map_or("", |s| s.name.as_str());
        let alloc: Vec<(u64, u64, usize)> = sh
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, s)| s.sh_type != 0 && s.flags & k::SHF_ALLOC != 0)
            .map(|(i, s)| (s.addr, s.size, i))
            .collect();
        for (i, j) in overlapping(alloc) {
            v.push(format!(
                "sections {i} '{}' and {j} '{}' overlap in memory",
                name(i),
                name(j)
            ));
        }
        let filed: Vec<(u64, u64, usize)> = sh
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, s)| s.sh_type != 0 && s.sh_type != k::SHT_NOBITS)
            .map(|(i, s)| (s.offset, s.size, i))
            .collect();
        for (i, j) in overlapping(filed) {
            v.push(format!(
                "sections {i} '{}' and {j} '{}' overlap in the file",
                name(i),
                name(j)
            ));
        }
        if !sh.is_empty() && !within(h.e_shoff, self.shsize(), 0, len) {
            v.push("section header table outside the file".into());
        }
        if h.e_phnum > 0 && !within(h.e_phoff, self.phsize(), 0, len) {
            v.push("program header table outside the file".into());
        }
    }

    fn section_of_type(&self, t: u32) -> Option<&'p SectionHeader> {
        self.p.shdrs.iter().find(|s| s.sh_type == t)
    }

    /// `PT_DYNAMIC` and `PT_INTERP` the same bytes as `.dynamic` and `.interp`.
    fn check_dynamic_sections(&self, v: &mut Vec<String>) {
        let (ph, sh) = (&self.p.phdrs, &self.p.shdrs);
        let pdyn = ph.iter().find(|x| x.p_type == k::PT_DYNAMIC);
        if let (Some(pd), Some(sd)) = (pdyn, self.section_of_type(k::SHT_DYNAMIC)) {
            if (pd.p_offset, pd.p_vaddr, pd.p_filesz) != (sd.offset, sd.addr, sd.size) {
                v.push("PT_DYNAMIC does not match the .dynamic section".into());
            }
        }
        if let (Some(pi), Some(si)) = (
            ph.iter().find(|x| x.p_type == k::PT_INTERP),
            // An SHT_NULL header is inactive (gABI: its other members are undefined), whatever
            // its name: it describes no bytes an edit must keep in step.
            sh.iter().find(|s| s.name == ".interp" && s.sh_type != 0),
        ) {
            if (pi.p_offset, pi.p_vaddr, pi.p_filesz) != (si.offset, si.addr, si.size) {
                v.push("PT_INTERP does not match the .interp section".into());
            }
        }
    }

    /// `DT_STRTAB`/`DT_STRSZ` and the pointer tags equal to their sections, the pointers inside
    /// a `PT_LOAD`, and `DT_MIPS_RLD_MAP_REL`'s target writable.
    fn check_dynamic_pointers(&self, dynamic: &[(u64, u64)], v: &mut Vec<String>) {
        let (p, sh) = (self.p, &self.p.shdrs);
        let tag = |t: u64| Parsed::tag(dynamic, t);
        if let (Some(a), Some(n)) = (tag(k::DT_STRTAB), tag(k::DT_STRSZ)) {
            // The string table the loader reads is allocated: `.dynamic`'s sh_link names it
            // (gABI) when it points at an allocated string table, else the allocated string
            // table at DT_STRTAB, else the section named `.dynstr`. An unallocated section that
            // claims the address describes nothing the loader sees, and no edit has to keep it
            // in step.
            let dynsec = p
                .phdrs
                .iter()
                .find(|x| x.p_type == k::PT_DYNAMIC)
                .and_then(|pd| {
                    sh.iter()
                        .find(|s| s.sh_type == k::SHT_DYNAMIC && s.offset == pd.p_offset)
                })
                .or_else(|| self.section_of_type(k::SHT_DYNAMIC));
            let loaded_strtab =
                |s: &&SectionHeader| s.sh_type == k::SHT_STRTAB && s.flags & k::SHF_ALLOC != 0;
            let strsec = dynsec
                .and_then(|d| sh.get(d.link as usize))
                .filter(loaded_strtab)
                .or_else(|| sh.iter().filter(loaded_strtab).find(|s| s.addr == a))
                .or_else(|| sh.iter().find(|s| s.name == ".dynstr" && s.sh_type != 0));
            if let Some(s) = strsec {
                if s.addr != a || s.size != n {
                    v.push(format!(
                        "DT_STRTAB/DT_STRSZ {a:#x}/{n:#x} differ from section '{}' {:#x}/{:#x}",
                        s.name, s.addr, s.size
                    ));
                }
            }
        }
        let pointer_sections: [(u64, u32); 6] = [
            (k::DT_HASH, k::SHT_HASH),
            (k::DT_GNU_HASH, k::SHT_GNU_HASH),
            (k::DT_SYMTAB, k::SHT_DYNSYM),
            (k::DT_VERSYM, k::SHT_GNU_VERSYM),
            (k::DT_VERNEED, k::SHT_GNU_VERNEED),
            (k::DT_VERDEF, k::SHT_GNU_VERDEF),
        ];
        for &(t, value) in dynamic {
            if POINTER_TAGS.contains(&t) {
                if p.map(value, 1).is_none() {
                    v.push(format!(
                        "dynamic tag {t:#x} value {value:#x} is not inside a PT_LOAD"
                    ));
                }
                if let Some((_, st)) = pointer_sections.iter().find(|(pt, _)| *pt == t) {
                    if let Some(s) = self.section_of_type(*st) {
                        if s.addr != value {
                            v.push(format!(
                                "dynamic tag {t:#x} value {value:#x} differs from section '{}' address {:#x}",
                                s.name, s.addr
                            ));
                        }
                    }
                }
            }
            if t == k::DT_MIPS_RLD_MAP_REL && p.header.e_machine == k::EM_MIPS {
                self.check_rld_map_rel(dynamic, value, v);
            }
        }
    }

    /// `DT_MIPS_RLD_MAP_REL` (relative to its own entry) points into a writable `PT_LOAD`, at
    /// `.rld_map` when there is one.
    fn check_rld_map_rel(&self, dynamic: &[(u64, u64)], value: u64, v: &mut Vec<String>) {
        let p = self.p;
        let Some(pd) = p.phdrs.iter().find(|x| x.p_type == k::PT_DYNAMIC) else {
            return;
        };
        let idx = dynamic
            .iter()
            .position(|e| e.0 == k::DT_MIPS_RLD_MAP_REL)
            .unwrap_or(0) as u64;
        let slot = pd.p_vaddr.wrapping_add(idx * 2 * p.r.ws());
        let mut target = slot.wrapping_add(value);
        if !p.r.is64 {
            target &= 0xffff_ffff;
        }
        let ok = self.loads.iter().any(|(_, l)| {
            l.p_flags & k::PF_W != 0 && within(target, p.r.ws(), l.p_vaddr, l.p_memsz)
        });
        if !ok {
            v.push(format!(
                "DT_MIPS_RLD_MAP_REL target {target:#x} is not inside a writable PT_LOAD"
            ));
        }
        if let Some(rm) = p.shdrs.iter().find(|s| s.name == ".rld_map") {
            if rm.addr != target {
                v.push(format!(
                    "DT_MIPS_RLD_MAP_REL target {target:#x} differs from .rld_map {:#x}",
                    rm.addr
                ));
            }
        }
    }
}
