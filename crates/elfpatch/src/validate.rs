//! Layout invariants an edit must preserve, checked on a parsed file.
//!
//! The checks are the ones whose violation broke binaries edited by other tools: segments out of
//! order or overlapping, offsets not congruent to addresses, sections left outside segments,
//! `.dynamic` in a read-only segment, headers pointing past the end of the file.

use object::elf;

use crate::format::Phdr;
use crate::read::{with_tail, Elf, Section};

/// One violated invariant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Issue(pub String);

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks `e` and returns every violated invariant (empty for a well-formed file).
///
/// Some real toolchains produce files that violate one of these on purpose (MIPS keeps `.dynamic`
/// read-only), so callers comparing an edit should look for *new* issues.
pub fn check(e: &Elf) -> Vec<Issue> {
    let mut out = Vec::new();
    // What the loader maps from the file: each segment's file part and the tail of its last page.
    let mapped = Mapped(e.mapped_loads().map(|(p, t)| with_tail(p, t)).collect());
    check_loads(e, &mut out);
    check_segments(e, &mapped, &mut out);
    check_sections(e, &mapped, &mut out);
    check_dynamic_sections(e, &mut out);
    out
}

fn issue(out: &mut Vec<Issue>, s: String) {
    out.push(Issue(s));
}

/// The `PT_LOAD`s, each with the mapped tail of its last page added to its file part.
struct Mapped(Vec<Phdr>);

impl Mapped {
    /// Whether `len` bytes at `off` are mapped from the file, at `vaddr`.
    fn holds(&self, off: u64, vaddr: u64, len: u64) -> bool {
        self.holds_where(off, vaddr, len, |_| true)
    }

    /// [`Mapped::holds`], by a segment for which `keep` is true. The address counts, not only the
    /// offset: the tail of another segment's last page can cover the same file bytes at an
    /// address the program never uses for them.
    fn holds_where(&self, off: u64, vaddr: u64, len: u64, keep: impl Fn(&Phdr) -> bool) -> bool {
        self.0.iter().any(|p| {
            keep(p)
                && p.contains_offset(off, len)
                && off - p.p_offset == vaddr.wrapping_sub(p.p_vaddr)
        })
    }
}

/// `PT_LOAD`s sorted, congruent, inside the file, and overlapping neither in memory nor in the file.
fn check_loads(e: &Elf, out: &mut Vec<Issue>) {
    let loads: Vec<_> = e.loads().collect();
    for w in loads.windows(2) {
        if w[1].p_vaddr < w[0].p_vaddr {
            issue(
                out,
                format!(
                    "PT_LOAD at {:#x} follows one at {:#x}: not sorted by address",
                    w[1].p_vaddr, w[0].p_vaddr
                ),
            );
        }
    }
    for (i, a) in loads.iter().enumerate() {
        if a.p_align > 1 && a.p_offset % a.p_align != a.p_vaddr % a.p_align {
            issue(
                out,
                format!(
                    "PT_LOAD at {:#x}: offset {:#x} not congruent to address modulo {:#x}",
                    a.p_vaddr, a.p_offset, a.p_align
                ),
            );
        }
        if a.offset_end() > e.file_len {
            issue(
                out,
                format!(
                    "PT_LOAD at {:#x} extends past the end of the file",
                    a.p_vaddr
                ),
            );
        }
        for b in &loads[i + 1..] {
            if a.p_vaddr < b.vaddr_end() && b.p_vaddr < a.vaddr_end() {
                issue(
                    out,
                    format!(
                        "PT_LOADs at {:#x} and {:#x} overlap in memory",
                        a.p_vaddr, b.p_vaddr
                    ),
                );
            }
            if a.p_filesz > 0
                && b.p_filesz > 0
                && a.p_offset < b.offset_end()
                && b.p_offset < a.offset_end()
            {
                // Linkers let adjacent segments share a page of the file; they never share bytes.
                issue(
                    out,
                    format!(
                        "PT_LOADs at {:#x} and {:#x} overlap in the file",
                        a.p_vaddr, b.p_vaddr
                    ),
                );
            }
        }
    }
}

/// `PT_PHDR` describing the table, mapped, before the `PT_LOAD`s; `PT_INTERP`, `PT_DYNAMIC`,
/// `PT_NOTE` and `PT_GNU_PROPERTY` mapped, `PT_DYNAMIC` writable; every segment inside the file.
fn check_segments(e: &Elf, mapped: &Mapped, out: &mut Vec<Issue>) {
    for (i, p) in e.phdrs.iter().enumerate() {
        match p.p_type {
            elf::PT_PHDR => {
                let size = (e.phdrs.len() * e.format.phdr_size()) as u64;
                if p.p_offset != e.header.e_phoff || p.p_filesz != size {
                    issue(
                        out,
                        format!(
                            "PT_PHDR ({:#x}+{:#x}) does not describe the table ({:#x}+{:#x})",
                            p.p_offset, p.p_filesz, e.header.e_phoff, size
                        ),
                    );
                }
                if !mapped.holds(p.p_offset, p.p_vaddr, p.p_filesz) {
                    issue(out, "PT_PHDR is not inside a PT_LOAD".into());
                }
                if i != 0 && e.phdrs[..i].iter().any(|q| q.p_type == elf::PT_LOAD) {
                    issue(out, "PT_PHDR does not precede the PT_LOADs".into());
                }
            }
            elf::PT_INTERP | elf::PT_DYNAMIC | elf::PT_NOTE | elf::PT_GNU_PROPERTY
                if p.p_filesz > 0 =>
            {
                if !mapped.holds(p.p_offset, p.p_vaddr, p.p_filesz) {
                    issue(
                        out,
                        format!(
                            "segment of type {:#x} at {:#x} is not inside a PT_LOAD",
                            p.p_type, p.p_offset
                        ),
                    );
                }
                // MIPS keeps .dynamic read-only (its loader writes through DT_MIPS_RLD_MAP
                // instead), and says so in PT_DYNAMIC's flags.
                let mips_read_only = e.machine() == elf::EM_MIPS && p.p_flags & elf::PF_W == 0;
                if p.p_type == elf::PT_DYNAMIC
                    && !mips_read_only
                    && !mapped.holds_where(p.p_offset, p.p_vaddr, p.p_filesz, |l| {
                        l.p_flags & elf::PF_W != 0
                    })
                {
                    issue(out, "PT_DYNAMIC is not inside a writable PT_LOAD".into());
                }
            }
            _ => {}
        }
        if p.p_offset.saturating_add(p.p_filesz) > e.file_len {
            issue(out, format!("segment {i} extends past the end of the file"));
        }
    }
}

/// Allocated sections mapped and not overlapping; every section inside the file and linking to
/// one that exists.
fn check_sections(e: &Elf, mapped: &Mapped, out: &mut Vec<Issue>) {
    let name = |s: &Section| String::from_utf8_lossy(&s.name).into_owned();
    let mut alloc: Vec<_> = e
        .sections
        .iter()
        .filter(|s| s.shdr.is_alloc() && s.shdr.has_file_bytes())
        .collect();
    for s in &alloc {
        let sh = s.shdr;
        if !mapped.holds(sh.sh_offset, sh.sh_addr, sh.sh_size) {
            issue(
                out,
                format!(
                    "section {} ({:#x}+{:#x}) is not inside a PT_LOAD",
                    name(s),
                    sh.sh_offset,
                    sh.sh_size
                ),
            );
        }
    }
    alloc.sort_by_key(|s| s.shdr.sh_addr);
    for w in alloc.windows(2) {
        if w[0].shdr.sh_addr.saturating_add(w[0].shdr.sh_size) > w[1].shdr.sh_addr {
            issue(
                out,
                format!("sections {} and {} overlap", name(w[0]), name(w[1])),
            );
        }
    }
    for s in &e.sections {
        if s.shdr.has_file_bytes() && s.shdr.sh_offset.saturating_add(s.shdr.sh_size) > e.file_len {
            issue(
                out,
                format!("section {} extends past the end of the file", name(s)),
            );
        }
        if s.shdr.sh_link as usize >= e.sections.len() {
            issue(
                out,
                format!("section {} links to a missing section", name(s)),
            );
        }
    }
}

/// `.dynstr` and `.dynamic`, when the section headers name them, where the dynamic array says.
fn check_dynamic_sections(e: &Elf, out: &mut Vec<Issue>) {
    let (Some(st), Some(d)) = (&e.strtab, &e.dynamic) else {
        return;
    };
    if let Some(i) = st.section {
        let sh = e.sections[i].shdr;
        if sh.sh_offset != st.offset || sh.sh_size != st.size {
            issue(
                out,
                ".dynstr section does not match DT_STRTAB/DT_STRSZ".into(),
            );
        }
    }
    if let Some(i) = d.section {
        let sh = e.sections[i].shdr;
        if sh.sh_offset != d.offset || sh.sh_addr != d.vaddr {
            issue(out, ".dynamic section does not match PT_DYNAMIC".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use object::elf;

    use super::check;
    use crate::read::Elf;

    const NOT_WRITABLE: &str = "PT_DYNAMIC is not inside a writable PT_LOAD";

    fn issues(edit: impl FnOnce(&mut Elf)) -> Vec<String> {
        let bytes = elfsynth::build(&elfsynth::Spec::default());
        let mut e = Elf::parse(&bytes).expect("elfpatch reads what elfsynth builds");
        edit(&mut e);
        check(&e).into_iter().map(|i| i.0).collect()
    }

    #[test]
    fn dynamic_in_the_writable_segment_is_fine() {
        assert!(!issues(|_| {}).iter().any(|i| i == NOT_WRITABLE));
    }

    #[test]
    fn a_writable_segment_holding_the_bytes_at_another_address_does_not_count() {
        // The fuzz input behind regressions/plan_apply/dynamic-writable-only-by-offset-through-
        // another-tail had .dynamic's file offset in a writable segment's page tail and its
        // address in a read-only segment (where the loader writes DT_DEBUG). Here, simpler: the
        // writable segment holds the offset, and PT_DYNAMIC's address is elsewhere.
        let found = issues(|e| {
            let d = e
                .phdrs
                .iter_mut()
                .find(|p| p.p_type == elf::PT_DYNAMIC)
                .expect("a PT_DYNAMIC");
            d.p_vaddr += 0x10_0000;
        });
        assert!(found.iter().any(|i| i == NOT_WRITABLE), "{found:?}");
    }
}
