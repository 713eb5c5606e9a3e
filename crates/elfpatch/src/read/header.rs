//! The file header: the identification bytes that give the class and byte order, and the
//! header they precede.

use object::elf;

use crate::error::{Error, Repr, Result};
use crate::format::{Class, Endian, Format};
use crate::source::{read_range, Source};

/// The index of `EI_OSABI` in `e_ident` (not among `object`'s constants).
pub const EI_OSABI: usize = 7;

/// Reads the identification bytes and the file header in one read.
pub(super) fn read_format<S: Source + ?Sized>(src: &S) -> Result<(Format, Vec<u8>)> {
    let not_elf = |what: String| {
        Error::from(Repr::NotElf {
            path: Default::default(),
            what,
        })
    };
    let n = src.len().min(64);
    if n < 4 {
        return Err(not_elf(format!("{} bytes long", src.len())));
    }
    let head = read_range(src, 0, n, "ELF header")?;
    if head[..4] != elf::ELFMAG {
        let bytes: Vec<String> = head[..4].iter().map(|b| format!("{b:#04x}")).collect();
        return Err(not_elf(format!(
            "it starts with {}, not 0x7f 'E' 'L' 'F'",
            bytes.join(" ")
        )));
    }
    let truncated = |needed: usize| {
        Error::from(Repr::Truncated {
            path: Default::default(),
            what: "ELF header".into(),
            offset: 0,
            needed: needed as u64,
            file_len: src.len(),
        })
    };
    if head.len() < 16 {
        return Err(truncated(16));
    }
    let class = match head[4] {
        elf::ELFCLASS32 => Class::Elf32,
        elf::ELFCLASS64 => Class::Elf64,
        c => return Err(not_elf(format!("unknown class {c}"))),
    };
    let endian = match head[5] {
        elf::ELFDATA2LSB => Endian::Little,
        elf::ELFDATA2MSB => Endian::Big,
        d => return Err(not_elf(format!("unknown data encoding {d}"))),
    };
    let f = Format { class, endian };
    if head.len() < f.ehdr_size() {
        return Err(truncated(f.ehdr_size()));
    }
    Ok((f, head))
}
