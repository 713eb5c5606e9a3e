//! The program header table, and what the loader makes of the segments it describes.

use object::elf;

use crate::error::{Error, Result};
use crate::format::{Format, Header, Phdr};
use crate::source::{check_range, read_range, Source};

/// Whether the stack is executable, from the program headers alone (see
/// [`Elf::execstack`](super::Elf::execstack)).
pub fn execstack(phdrs: &[Phdr]) -> Option<bool> {
    phdrs
        .iter()
        .rev()
        .find(|p| p.p_type == elf::PT_GNU_STACK)
        .map(|p| p.p_flags & elf::PF_X != 0)
}

/// `p` with its file part grown by `tail` bytes (what the loader maps from the file, with
/// [`Elf::mapped_tail`](super::Elf::mapped_tail)).
pub(crate) fn with_tail(p: &Phdr, tail: u64) -> Phdr {
    Phdr {
        p_filesz: p.p_filesz + tail,
        ..*p
    }
}

/// The smallest page size Linux runs `machine` with: 8 KiB on sparc64 and alpha, 4 KiB on every
/// other architecture (x86, arm, aarch64, ppc, s390, riscv, mips, loongarch also run with 16 or
/// 64 KiB pages, which map a superset). What the loader maps at this size it maps at every size a
/// file of that machine may meet.
pub fn min_page_size(machine: u16) -> u64 {
    match machine {
        elf::EM_SPARCV9 | elf::EM_ALPHA => 8192,
        _ => 4096,
    }
}

pub(super) fn read_phdrs<S: Source + ?Sized>(
    src: &S,
    f: Format,
    h: &Header,
    phnum: usize,
) -> Result<Vec<Phdr>> {
    if phnum == 0 {
        return Ok(Vec::new());
    }
    if usize::from(h.e_phentsize) != f.phdr_size() {
        return Err(Error::malformed(
            0,
            format!(
                "e_phentsize is {}, expected {}",
                h.e_phentsize,
                f.phdr_size()
            ),
        ));
    }
    let len = (phnum * f.phdr_size()) as u64;
    let table = read_range(
        src,
        h.e_phoff,
        len,
        "program header table out of bounds: the table",
    )?;
    let phdrs: Vec<Phdr> = table
        .chunks_exact(f.phdr_size())
        .map(|c| f.decode_phdr(c))
        .collect();
    for (i, p) in phdrs.iter().enumerate() {
        let at = h.e_phoff + (i * f.phdr_size()) as u64;
        if p.p_type == elf::PT_LOAD || p.p_type == elf::PT_DYNAMIC || p.p_type == elf::PT_INTERP {
            if p.p_filesz > p.p_memsz && p.p_type == elf::PT_LOAD {
                return Err(Error::malformed(
                    at,
                    format!("PT_LOAD {i} has p_filesz > p_memsz"),
                ));
            }
            // A segment with no file bytes reads nothing, wherever its offset (objcopy's
            // `--only-keep-debug` leaves the emptied ones past the shortened file's end).
            let file_range = if p.p_filesz == 0 { 0 } else { p.p_offset };
            check_range(src.len(), file_range, p.p_filesz, &format!("segment {i}"))
                .map_err(|_| {
                    Error::malformed(
                        at,
                        format!(
                            "segment {i} (file range {:#x}+{:#x}) extends past the end of the file ({:#x} bytes)",
                            p.p_offset,
                            p.p_filesz,
                            src.len()
                        ),
                    )
                })?;
            if p.p_vaddr
                .checked_add(p.p_memsz)
                .is_none_or(|e| e > f.max_addr().saturating_add(1))
            {
                return Err(Error::malformed(
                    at,
                    format!("segment {i} wraps the address space"),
                ));
            }
        }
    }
    Ok(phdrs)
}
