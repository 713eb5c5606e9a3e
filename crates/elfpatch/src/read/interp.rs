//! The program interpreter (`PT_INTERP`).

use object::elf;

use super::sections::section_by_extent;
use super::Elf;
use crate::error::{Error, Result};
use crate::source::{read_range, Source};

/// The program interpreter (`PT_INTERP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interp {
    /// Index of the `PT_INTERP` program header.
    pub phdr_index: usize,
    /// File offset of the path.
    pub offset: u64,
    /// Bytes reserved for it (`p_filesz`, including the terminating NUL).
    pub capacity: u64,
    /// The path, without the terminating NUL.
    pub path: Vec<u8>,
    /// Index of the `.interp` section, if any.
    pub section: Option<usize>,
}

pub(super) fn read_interp<S: Source + ?Sized>(src: &S, e: &Elf) -> Result<Option<Interp>> {
    let mut found = e
        .phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type == elf::PT_INTERP);
    let Some((phdr_index, p)) = found.next() else {
        return Ok(None);
    };
    if found.next().is_some() {
        return Err(Error::malformed(
            e.header.e_phoff,
            "more than one PT_INTERP",
        ));
    }
    if p.p_filesz > 1 << 16 {
        return Err(Error::malformed(
            p.p_offset,
            format!("PT_INTERP is {} bytes long", p.p_filesz),
        ));
    }
    let bytes = read_range(src, p.p_offset, p.p_filesz, "interpreter path")?;
    let Some(end) = bytes.iter().position(|&b| b == 0) else {
        return Err(Error::malformed(
            p.p_offset,
            "PT_INTERP path is not NUL-terminated",
        ));
    };
    let section = e
        .sections
        .iter()
        .find(|s| s.shdr.sh_offset == p.p_offset && s.shdr.has_file_bytes() && s.name == b".interp")
        .map(|s| s.index)
        .or_else(|| section_by_extent(e, p.p_offset, p.p_vaddr, p.p_filesz));
    Ok(Some(Interp {
        phdr_index,
        offset: p.p_offset,
        capacity: p.p_filesz,
        path: bytes[..end].to_vec(),
        section,
    }))
}
