//! Which files every subcommand works on, decided once (pure, over the bytes [`crate::scan`]
//! reads): files that are not ELF are ignored, ELF files that are not loadable objects are
//! skipped with a reason, and the rest are read as programs and libraries.
//!
//! Skipped, because no loader maps them and nothing of theirs is a run path to fix:
//! - separate debug-info files (`objcopy --only-keep-debug`, Nix's `separateDebugInfo` output):
//!   they keep the program headers of the binary they belong to, but every allocated section,
//!   `.dynamic` included, is `SHT_NOBITS`, so what lies at `PT_DYNAMIC`'s offset is something else;
//! - relocatable objects (`ET_REL`: `.o` files, kernel modules);
//! - core files (`ET_CORE`).
//!
//! An ELF file whose header cannot be decoded is not skipped: the reader then says what is wrong
//! with it, with the offset.

use serde::Serialize;

const ET_REL: u16 = 1;
const ET_CORE: u16 = 4;
const PT_DYNAMIC: u32 = 2;
const SHT_NOBITS: u32 = 8;
const SHF_ALLOC: u64 = 2;

/// Why an ELF file is skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A separate debug-info file.
    SeparateDebugFile,
    /// `ET_REL`.
    RelocatableObject,
    /// `ET_CORE`.
    CoreFile,
}

impl SkipReason {
    /// Every reason, in the order reports list them.
    pub const ALL: [SkipReason; 3] = [
        SkipReason::SeparateDebugFile,
        SkipReason::RelocatableObject,
        SkipReason::CoreFile,
    ];

    /// Singular and plural nouns, as reports count them.
    pub fn nouns(self) -> (&'static str, &'static str) {
        match self {
            SkipReason::SeparateDebugFile => {
                ("separate debug-info file", "separate debug-info files")
            }
            SkipReason::RelocatableObject => ("relocatable object", "relocatable objects"),
            SkipReason::CoreFile => ("core file", "core files"),
        }
    }
}

/// What a file is, for every subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileClass {
    /// Not an ELF file (no magic, or shorter than the magic).
    NotElf,
    /// An ELF file to read as a program or library (including one whose header is damaged).
    Object,
    /// An ELF file that is not a loadable object.
    Skipped(SkipReason),
}

/// The fields of an ELF header that classification needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    is64: bool,
    big: bool,
    /// `e_type`.
    pub e_type: u16,
    phoff: u64,
    phentsize: u16,
    phnum: u16,
    shoff: u64,
    shentsize: u16,
    shnum: u16,
}

/// What the first bytes of a file say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// No ELF magic.
    NotElf,
    /// The magic, but a header that cannot be decoded (short, unknown class or byte order).
    Damaged,
    /// A header.
    Elf(Header),
}

/// How many bytes [`parse_header`] wants (an `Elf64_Ehdr`).
pub const HEAD_LEN: usize = 64;

/// The most bytes of program or section headers classification reads; beyond that it leaves
/// the decision to the reader.
pub const MAX_TABLE: u64 = 1 << 20;

fn uint(b: &[u8], at: usize, n: usize, big: bool) -> u64 {
    let Some(s) = b.get(at..at + n) else {
        return 0;
    };
    let fold = |acc: u64, &x: &u8| acc << 8 | u64::from(x);
    if big {
        s.iter().fold(0, fold)
    } else {
        s.iter().rev().fold(0, fold)
    }
}

/// Decodes the first bytes of a file (up to [`HEAD_LEN`]).
pub fn parse_header(head: &[u8]) -> Head {
    if head.len() < 4 || head[..4] != *b"\x7fELF" {
        return Head::NotElf;
    }
    let is64 = match head.get(4) {
        Some(1) => false,
        Some(2) => true,
        _ => return Head::Damaged,
    };
    let big = match head.get(5) {
        Some(1) => false,
        Some(2) => true,
        _ => return Head::Damaged,
    };
    if head.len() < if is64 { 64 } else { 52 } {
        return Head::Damaged;
    }
    let u = |at, n| uint(head, at, n, big);
    // Offsets of e_phoff.. in Elf64_Ehdr and Elf32_Ehdr.
    let (phoff, shoff, tail) = if is64 {
        (u(32, 8), u(40, 8), 54)
    } else {
        (u(28, 4), u(32, 4), 42)
    };
    Head::Elf(Header {
        is64,
        big,
        e_type: u(16, 2) as u16,
        phoff,
        phentsize: u(tail, 2) as u16,
        phnum: u(tail + 2, 2) as u16,
        shoff,
        shentsize: u(tail + 4, 2) as u16,
        shnum: u(tail + 6, 2) as u16,
    })
}

impl Header {
    /// Whether classification needs the program and section headers (only to tell a separate
    /// debug-info file from the binary it belongs to).
    pub fn needs_tables(&self) -> bool {
        !matches!(self.e_type, ET_REL | ET_CORE)
    }

    /// The file range of the program headers: (offset, length), empty when implausible.
    pub fn phdr_range(&self) -> (u64, u64) {
        table(self.phoff, self.phentsize, self.phnum)
    }

    /// The file range of the section headers: (offset, length), empty when implausible.
    pub fn shdr_range(&self) -> (u64, u64) {
        table(self.shoff, self.shentsize, self.shnum)
    }
}

fn table(off: u64, entsize: u16, num: u16) -> (u64, u64) {
    let len = u64::from(entsize) * u64::from(num);
    if off == 0 || len > MAX_TABLE {
        (off, 0)
    } else {
        (off, len)
    }
}

/// Classifies an ELF file from its header and the bytes of its program and section headers
/// (either may be empty when they could not be read: the file is then not called a debug file).
pub fn classify(h: &Header, phdrs: &[u8], shdrs: &[u8]) -> FileClass {
    match h.e_type {
        ET_REL => FileClass::Skipped(SkipReason::RelocatableObject),
        ET_CORE => FileClass::Skipped(SkipReason::CoreFile),
        _ if is_separate_debug(h, phdrs, shdrs) => {
            FileClass::Skipped(SkipReason::SeparateDebugFile)
        }
        _ => FileClass::Object,
    }
}

/// A section's type, flags, address and size.
struct Section {
    kind: u32,
    flags: u64,
    addr: u64,
    size: u64,
}

/// The rule elfpatch refuses such files by: an allocated `SHT_NOBITS` section of non-zero size
/// at `PT_DYNAMIC`'s address. Without `PT_DYNAMIC` (a static program's debug file): every
/// allocated section of non-zero size is `SHT_NOBITS`, and there is at least one.
fn is_separate_debug(h: &Header, phdrs: &[u8], shdrs: &[u8]) -> bool {
    let u = |b: &[u8], at, n| uint(b, at, n, h.big);
    let (pes, ses) = (usize::from(h.phentsize), usize::from(h.shentsize));
    let (pmin, smin) = if h.is64 { (56, 64) } else { (32, 40) };
    if pes < pmin || ses < smin {
        return false;
    }
    let dynamic_vaddr = phdrs
        .chunks_exact(pes)
        .find(|p| u(p, 0, 4) == u64::from(PT_DYNAMIC))
        .map(|p| if h.is64 { u(p, 16, 8) } else { u(p, 8, 4) });
    let alloc: Vec<Section> = shdrs
        .chunks_exact(ses)
        .map(|s| {
            let (flags, addr, size) = if h.is64 {
                (u(s, 8, 8), u(s, 16, 8), u(s, 32, 8))
            } else {
                (u(s, 8, 4), u(s, 12, 4), u(s, 20, 4))
            };
            Section {
                kind: u(s, 4, 4) as u32,
                flags,
                addr,
                size,
            }
        })
        .filter(|s| s.flags & SHF_ALLOC != 0 && s.size > 0)
        .collect();
    match dynamic_vaddr {
        Some(v) => alloc.iter().any(|s| s.kind == SHT_NOBITS && s.addr == v),
        None => !alloc.is_empty() && alloc.iter().all(|s| s.kind == SHT_NOBITS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Elf64 little-endian header with one program header and two section headers after it.
    fn elf64(e_type: u16, dynamic_nobits: bool) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[16..18].copy_from_slice(&e_type.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[40..48].copy_from_slice(&120u64.to_le_bytes()); // e_shoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        b[58..60].copy_from_slice(&64u16.to_le_bytes());
        b[60..62].copy_from_slice(&2u16.to_le_bytes());
        let mut ph = vec![0u8; 56];
        ph[..4].copy_from_slice(&PT_DYNAMIC.to_le_bytes());
        ph[16..24].copy_from_slice(&0x3000u64.to_le_bytes());
        b.extend(ph);
        let section = |kind: u32, addr: u64| {
            let mut s = vec![0u8; 64];
            s[4..8].copy_from_slice(&kind.to_le_bytes());
            s[8..16].copy_from_slice(&SHF_ALLOC.to_le_bytes());
            s[16..24].copy_from_slice(&addr.to_le_bytes());
            s[32..40].copy_from_slice(&0x100u64.to_le_bytes());
            s
        };
        b.extend(section(1, 0x1000));
        b.extend(section(if dynamic_nobits { SHT_NOBITS } else { 6 }, 0x3000));
        b
    }

    fn class_of(bytes: &[u8]) -> FileClass {
        match parse_header(&bytes[..HEAD_LEN.min(bytes.len())]) {
            Head::NotElf => FileClass::NotElf,
            Head::Damaged => FileClass::Object,
            Head::Elf(h) => {
                let slice = |(o, l): (u64, u64)| &bytes[o as usize..(o + l) as usize];
                classify(&h, slice(h.phdr_range()), slice(h.shdr_range()))
            }
        }
    }

    #[test]
    fn each_kind_of_file_is_told_apart() {
        assert_eq!(class_of(b"#!/bin/sh\n"), FileClass::NotElf);
        assert_eq!(class_of(b"\x7fEL"), FileClass::NotElf);
        assert_eq!(class_of(b"\x7fELF\x02\x01"), FileClass::Object, "damaged");
        assert_eq!(class_of(&elf64(3, false)), FileClass::Object);
        assert_eq!(
            class_of(&elf64(3, true)),
            FileClass::Skipped(SkipReason::SeparateDebugFile)
        );
        assert_eq!(
            class_of(&elf64(2, true)),
            FileClass::Skipped(SkipReason::SeparateDebugFile)
        );
        assert_eq!(
            class_of(&elf64(1, false)),
            FileClass::Skipped(SkipReason::RelocatableObject)
        );
        assert_eq!(
            class_of(&elf64(4, false)),
            FileClass::Skipped(SkipReason::CoreFile)
        );
    }

    #[test]
    fn without_tables_nothing_is_called_a_debug_file() {
        let b = elf64(3, true);
        let Head::Elf(h) = parse_header(&b[..64]) else {
            panic!("not parsed");
        };
        assert_eq!(classify(&h, &[], &[]), FileClass::Object);
        assert_eq!(classify(&h, &b[64..120], &[]), FileClass::Object);
    }

    #[test]
    fn big_endian_32_bit_headers_decode() {
        let mut b = vec![0u8; 52];
        b[..6].copy_from_slice(b"\x7fELF\x01\x02");
        b[16..18].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(class_of(&b), FileClass::Skipped(SkipReason::CoreFile));
        b.truncate(40);
        assert_eq!(class_of(&b), FileClass::Object, "short: damaged");
    }
}
