//! Layout consistency: what a post-processor (GNU `strip`, `eu-strip`, `llvm-strip`) can leave
//! wrong when it re-lays out a file, and what the loader then refuses or trips over. A pure check
//! over a parsed [`Elf`]: no I/O, one [`Problem`] per inconsistency, each a one-line message with
//! its offsets in hex.

use object::elf;

use crate::format::Phdr;
use crate::read::Elf;

/// One layout inconsistency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, in one line (offsets and addresses in hex).
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn problem(message: String) -> Problem {
    Problem { message }
}

/// Whether `[start, start + len)` lies in the file part of a `PT_LOAD`, by address.
fn mapped_by_file(loads: &[&Phdr], start: u64, len: u64) -> bool {
    loads.iter().any(|p| {
        start >= p.p_vaddr
            && start
                .checked_add(len)
                .is_some_and(|end| end <= p.p_vaddr.saturating_add(p.p_filesz))
    })
}

/// Whether `[start, start + len)` lies in a `PT_LOAD`'s file bytes, by offset.
fn inside_by_offset(loads: &[&Phdr], start: u64, len: u64) -> bool {
    loads.iter().any(|p| {
        start >= p.p_offset
            && start
                .checked_add(len)
                .is_some_and(|end| end <= p.p_offset.saturating_add(p.p_filesz))
    })
}

/// The layout problems of a parsed file: a `PT_LOAD` whose offset and address disagree modulo
/// its alignment, or whose file part passes the end of the file; `PT_PHDR`, `PT_DYNAMIC` or
/// `PT_GNU_RELRO` outside every `PT_LOAD`; `DT_GNU_HASH`/`DT_HASH` pointing outside every
/// `PT_LOAD`'s file part; an allocated section with file bytes outside every `PT_LOAD`.
/// Empty for a file without `PT_LOAD` (a relocatable object, a debug file).
pub fn layout_problems(e: &Elf) -> Vec<Problem> {
    let loads: Vec<&Phdr> = e.loads().collect();
    let mut out = Vec::new();
    if loads.is_empty() {
        return out;
    }
    for (i, p) in e.phdrs.iter().enumerate() {
        if p.p_type == elf::PT_LOAD {
            if p.p_align > 1 && p.p_offset % p.p_align != p.p_vaddr % p.p_align {
                out.push(problem(format!(
                    "program header {i}: PT_LOAD at offset {:#x}, address {:#x} disagree modulo its alignment {:#x}",
                    p.p_offset, p.p_vaddr, p.p_align
                )));
            }
            if p.p_offset.saturating_add(p.p_filesz) > e.file_len {
                out.push(problem(format!(
                    "program header {i}: PT_LOAD's file part {:#x}..{:#x} passes the end of the file ({:#x})",
                    p.p_offset,
                    p.p_offset.saturating_add(p.p_filesz),
                    e.file_len
                )));
            }
            continue;
        }
        let name = match p.p_type {
            elf::PT_PHDR => "PT_PHDR",
            elf::PT_DYNAMIC => "PT_DYNAMIC",
            elf::PT_GNU_RELRO => "PT_GNU_RELRO",
            _ => continue,
        };
        // RELRO may end in a LOAD's memory-only part; PHDR and DYNAMIC are read from the file.
        let covered = match p.p_type {
            elf::PT_GNU_RELRO => loads.iter().any(|l| {
                p.p_vaddr >= l.p_vaddr
                    && p.p_vaddr.saturating_add(p.p_memsz) <= l.p_vaddr.saturating_add(l.p_memsz)
            }),
            _ => mapped_by_file(&loads, p.p_vaddr, p.p_filesz),
        };
        if !covered {
            out.push(problem(format!(
                "program header {i}: {name} at address {:#x} (size {:#x}) is outside every PT_LOAD",
                p.p_vaddr, p.p_memsz
            )));
        }
    }
    if let Some(d) = &e.dynamic {
        for (tag, name) in [(elf::DT_GNU_HASH, "DT_GNU_HASH"), (elf::DT_HASH, "DT_HASH")] {
            if let Some(addr) = d.get(tag) {
                // Both tables start with a header of at least 8 bytes (16 for DT_GNU_HASH).
                let header = if tag == elf::DT_GNU_HASH { 16 } else { 8 };
                if !mapped_by_file(&loads, addr, header) {
                    out.push(problem(format!(
                        "{name} at address {addr:#x}: the hash table is outside every PT_LOAD's file part"
                    )));
                }
            }
        }
    }
    for s in &e.sections {
        let h = &s.shdr;
        if !h.is_alloc() || !h.has_file_bytes() {
            continue;
        }
        // TLS initial images and the like are still in a LOAD's file bytes.
        if !inside_by_offset(&loads, h.sh_offset, h.sh_size) {
            out.push(problem(format!(
                "section {} ({}) at offset {:#x} (size {:#x}) is allocated but outside every PT_LOAD",
                s.index,
                String::from_utf8_lossy(&s.name),
                h.sh_offset,
                h.sh_size
            )));
            continue;
        }
        // The PT_LOAD that holds the section's bytes must map them at the section's address:
        // GNU strip that had to move a section (`lma ... adjusted`) leaves the segment mapping
        // other bytes there, and the loader then reads a hash table from the wrong place (ld.so
        // asserts in _dl_setup_hash).
        let holder = loads
            .iter()
            .find(|l| l.contains_offset(h.sh_offset, h.sh_size.max(1)));
        if let Some(l) = holder {
            let mapped_at = l.p_vaddr.wrapping_add(h.sh_offset - l.p_offset);
            if h.sh_addr != 0 && mapped_at != h.sh_addr {
                out.push(problem(format!(
                    "section {} ({}) at address {:#x}, offset {:#x}: the PT_LOAD holding those bytes maps them at {:#x}",
                    s.index,
                    String::from_utf8_lossy(&s.name),
                    h.sh_addr,
                    h.sh_offset,
                    mapped_at
                )));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_test() -> Elf {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        Elf::parse(&bytes).unwrap()
    }

    #[test]
    fn a_linked_file_is_consistent() {
        let e = this_test();
        assert_eq!(layout_problems(&e), vec![]);
    }

    #[test]
    fn a_misaligned_load_is_named() {
        let mut e = this_test();
        let i = e
            .phdrs
            .iter()
            .position(|p| p.p_type == elf::PT_LOAD)
            .unwrap();
        e.phdrs[i].p_offset += 8;
        let p = layout_problems(&e);
        assert!(
            p.iter().any(|p| p.message.contains("disagree modulo")),
            "{p:?}"
        );
    }

    #[test]
    fn a_shrunk_load_leaves_sections_uncovered() {
        let mut e = this_test();
        for p in e.phdrs.iter_mut().filter(|p| p.p_type == elf::PT_LOAD) {
            p.p_filesz = 0;
        }
        let p = layout_problems(&e);
        assert!(
            p.iter()
                .any(|p| p.message.contains("outside every PT_LOAD")),
            "{p:?}"
        );
    }

    #[test]
    fn a_load_that_maps_sections_elsewhere_is_named() {
        // What GNU strip leaves when it had to move a section (`lma ... adjusted`): the segment
        // maps its bytes elsewhere (here a whole alignment higher, still congruent), the
        // sections' addresses as they were.
        let mut e = this_test();
        let i = e
            .phdrs
            .iter()
            .position(|p| p.p_type == elf::PT_LOAD)
            .unwrap();
        let align = e.phdrs[i].p_align.max(4096);
        e.phdrs[i].p_vaddr += align;
        e.phdrs[i].p_paddr += align;
        let p = layout_problems(&e);
        assert!(
            p.iter().any(|p| p
                .message
                .contains("the PT_LOAD holding those bytes maps them at")),
            "{p:?}"
        );
    }

    #[test]
    fn no_loads_no_problems() {
        let mut e = this_test();
        e.phdrs.retain(|p| p.p_type != elf::PT_LOAD);
        assert!(layout_problems(&e).is_empty());
    }
}

/// The machine's own libraries: `cargo test -p elfpatch --lib layout -- --ignored --nocapture`
/// (the directory from `LAYOUT_SWEEP_DIR`, `/usr/lib/x86_64-linux-gnu` by default).
#[cfg(test)]
#[test]
#[ignore]
fn machine_libraries_are_consistent() {
    let dir =
        std::env::var("LAYOUT_SWEEP_DIR").unwrap_or_else(|_| "/usr/lib/x86_64-linux-gnu".into());
    let (mut files, mut found) = (0, Vec::new());
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(e) = Elf::parse(&bytes) else { continue };
        files += 1;
        for p in layout_problems(&e) {
            found.push(format!("{}: {p}", path.display()));
        }
    }
    println!("{files} ELF files, {} problems", found.len());
    assert!(found.is_empty(), "{found:#?}");
}
