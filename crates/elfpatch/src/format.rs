//! Class- and endian-neutral views of the ELF structures this crate touches.
//!
//! The on-disk layouts come from `object::elf` (with `object`'s `unaligned` feature, so any byte
//! offset can be decoded); this module converts them to plain `u64`-based structs and back, so that
//! every algorithm above it is written once for all four ELF flavours.

use object::elf;
use object::endian::{Endianness, U16, U32, U64};
use object::pod::{bytes_of, from_bytes, Pod};

/// ELF class: the width of addresses and offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// `ELFCLASS32`.
    Elf32,
    /// `ELFCLASS64`.
    Elf64,
}

/// Byte order of every multi-byte field in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// `ELFDATA2LSB`.
    Little,
    /// `ELFDATA2MSB`.
    Big,
}

/// Class and byte order together: everything needed to decode or encode a structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    /// Address width.
    pub class: Class,
    /// Byte order.
    pub endian: Endian,
}

/// The ELF file header, widened to 64-bit fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The 16 identification bytes (`e_ident`), kept verbatim.
    pub ident: [u8; 16],
    /// Object file type (`ET_EXEC`, `ET_DYN`, ...).
    pub e_type: u16,
    /// Target machine (`EM_X86_64`, ...).
    pub e_machine: u16,
    /// Object file version.
    pub e_version: u32,
    /// Entry point address.
    pub e_entry: u64,
    /// File offset of the program header table.
    pub e_phoff: u64,
    /// File offset of the section header table (0 when there is none).
    pub e_shoff: u64,
    /// Processor-specific flags.
    pub e_flags: u32,
    /// Size of this header.
    pub e_ehsize: u16,
    /// Size of one program header entry.
    pub e_phentsize: u16,
    /// `e_phnum` as stored (may be `PN_XNUM`).
    pub e_phnum: u16,
    /// Size of one section header entry.
    pub e_shentsize: u16,
    /// `e_shnum` as stored (0 when the count lives in section 0).
    pub e_shnum: u16,
    /// `e_shstrndx` as stored (may be `SHN_XINDEX`).
    pub e_shstrndx: u16,
}

/// One program header, widened to 64-bit fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Phdr {
    /// Segment type (`PT_LOAD`, ...).
    pub p_type: u32,
    /// Segment permissions (`PF_R`, `PF_W`, `PF_X`).
    pub p_flags: u32,
    /// File offset of the segment's first byte.
    pub p_offset: u64,
    /// Virtual address of the segment's first byte.
    pub p_vaddr: u64,
    /// Physical address (normally equal to `p_vaddr`).
    pub p_paddr: u64,
    /// Bytes of the segment present in the file.
    pub p_filesz: u64,
    /// Bytes of the segment in memory (`>= p_filesz`).
    pub p_memsz: u64,
    /// Alignment; `p_offset ≡ p_vaddr (mod p_align)` for loadable segments.
    pub p_align: u64,
}

impl Phdr {
    /// Whether the file range of this segment contains `[offset, offset + len)`.
    pub fn contains_offset(&self, offset: u64, len: u64) -> bool {
        offset >= self.p_offset
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.p_offset.saturating_add(self.p_filesz))
    }

    /// Whether the file-backed memory of this segment contains `[vaddr, vaddr + len)`.
    pub fn contains_vaddr(&self, vaddr: u64, len: u64) -> bool {
        vaddr >= self.p_vaddr
            && vaddr
                .checked_add(len)
                .is_some_and(|end| end <= self.p_vaddr.saturating_add(self.p_filesz))
    }

    /// One past the last virtual address the segment occupies in memory.
    pub fn vaddr_end(&self) -> u64 {
        self.p_vaddr.saturating_add(self.p_memsz)
    }

    /// One past the last file byte the segment occupies.
    pub fn offset_end(&self) -> u64 {
        self.p_offset.saturating_add(self.p_filesz)
    }
}

/// One section header, widened to 64-bit fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Shdr {
    /// Offset of the name in the section name string table.
    pub sh_name: u32,
    /// Section type (`SHT_PROGBITS`, ...).
    pub sh_type: u32,
    /// Section flags (`SHF_ALLOC`, ...).
    pub sh_flags: u64,
    /// Address in memory (0 unless `SHF_ALLOC`).
    pub sh_addr: u64,
    /// File offset.
    pub sh_offset: u64,
    /// Size in bytes (in memory for `SHT_NOBITS`).
    pub sh_size: u64,
    /// Index of an associated section.
    pub sh_link: u32,
    /// Extra information, meaning depends on the type.
    pub sh_info: u32,
    /// Required alignment.
    pub sh_addralign: u64,
    /// Size of one entry for table sections.
    pub sh_entsize: u64,
}

impl Shdr {
    /// Whether the section occupies bytes in the file.
    pub fn has_file_bytes(&self) -> bool {
        self.sh_type != elf::SHT_NOBITS && self.sh_type != elf::SHT_NULL && self.sh_size > 0
    }

    /// Whether the section is mapped into memory.
    pub fn is_alloc(&self) -> bool {
        self.sh_flags & u64::from(elf::SHF_ALLOC) != 0
    }
}

/// One dynamic entry. `tag` is zero-extended from 32 bits on ELFCLASS32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dyn {
    /// `d_tag`.
    pub tag: u64,
    /// `d_val` / `d_ptr`.
    pub val: u64,
}

/// The fields of a symbol this crate reads or rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sym {
    /// Offset of the name in the linked string table.
    pub st_name: u32,
    /// Symbol value (an address for defined symbols).
    pub st_value: u64,
    /// Index of the section the symbol is defined in.
    pub st_shndx: u16,
    /// Size of the object or function.
    pub st_size: u64,
    /// Binding (high four bits) and type (low four bits).
    pub st_info: u8,
}

fn ob(e: Endian) -> Endianness {
    match e {
        Endian::Little => Endianness::Little,
        Endian::Big => Endianness::Big,
    }
}

fn decode<T: Pod>(bytes: &[u8]) -> &T {
    // Callers slice exactly `size_of::<T>()` bytes after a bounds check; with `unaligned`
    // every object::elf struct has alignment 1, so this cannot fail.
    from_bytes::<T>(bytes).expect("caller checked size").0
}

impl Format {
    /// Size of the file header.
    pub fn ehdr_size(self) -> usize {
        match self.class {
            Class::Elf32 => size_of::<elf::FileHeader32<Endianness>>(),
            Class::Elf64 => size_of::<elf::FileHeader64<Endianness>>(),
        }
    }

    /// Size of one program header.
    pub fn phdr_size(self) -> usize {
        match self.class {
            Class::Elf32 => size_of::<elf::ProgramHeader32<Endianness>>(),
            Class::Elf64 => size_of::<elf::ProgramHeader64<Endianness>>(),
        }
    }

    /// Size of one section header.
    pub fn shdr_size(self) -> usize {
        match self.class {
            Class::Elf32 => size_of::<elf::SectionHeader32<Endianness>>(),
            Class::Elf64 => size_of::<elf::SectionHeader64<Endianness>>(),
        }
    }

    /// Size of one dynamic entry.
    pub fn dyn_size(self) -> usize {
        match self.class {
            Class::Elf32 => 8,
            Class::Elf64 => 16,
        }
    }

    /// Size of one symbol table entry.
    pub fn sym_size(self) -> usize {
        match self.class {
            Class::Elf32 => 16,
            Class::Elf64 => 24,
        }
    }

    /// Size of an address-sized word.
    pub fn word_size(self) -> u64 {
        match self.class {
            Class::Elf32 => 4,
            Class::Elf64 => 8,
        }
    }

    /// The largest address representable in this class.
    pub fn max_addr(self) -> u64 {
        match self.class {
            Class::Elf32 => u64::from(u32::MAX),
            Class::Elf64 => u64::MAX,
        }
    }

    /// Reads a `u16` in the file's byte order.
    pub fn u16(self, b: &[u8]) -> u16 {
        decode::<U16<Endianness>>(&b[..2]).get(ob(self.endian))
    }

    /// Reads a `u32` in the file's byte order.
    pub fn u32(self, b: &[u8]) -> u32 {
        decode::<U32<Endianness>>(&b[..4]).get(ob(self.endian))
    }

    /// Reads a `u64` in the file's byte order.
    pub fn u64(self, b: &[u8]) -> u64 {
        decode::<U64<Endianness>>(&b[..8]).get(ob(self.endian))
    }

    /// Encodes a `u16` in the file's byte order.
    pub fn put_u16(self, v: u16) -> [u8; 2] {
        let e = ob(self.endian);
        let mut out = [0; 2];
        out.copy_from_slice(bytes_of(&U16::new(e, v)));
        out
    }

    /// Encodes a `u32` in the file's byte order.
    pub fn put_u32(self, v: u32) -> [u8; 4] {
        let e = ob(self.endian);
        let mut out = [0; 4];
        out.copy_from_slice(bytes_of(&U32::new(e, v)));
        out
    }

    /// Encodes an address-sized word (`v` must fit the class; callers check).
    pub fn put_word(self, v: u64) -> Vec<u8> {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => bytes_of(&U32::new(e, v as u32)).to_vec(),
            Class::Elf64 => bytes_of(&U64::new(e, v)).to_vec(),
        }
    }

    /// Reads an address-sized word.
    pub fn word(self, b: &[u8]) -> u64 {
        match self.class {
            Class::Elf32 => u64::from(self.u32(b)),
            Class::Elf64 => self.u64(b),
        }
    }

    /// Decodes a file header from at least `ehdr_size()` bytes.
    pub fn decode_header(self, b: &[u8]) -> Header {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => {
                let h: &elf::FileHeader32<Endianness> = decode(&b[..self.ehdr_size()]);
                Header {
                    ident: ident_bytes(&h.e_ident),
                    e_type: h.e_type.get(e),
                    e_machine: h.e_machine.get(e),
                    e_version: h.e_version.get(e),
                    e_entry: h.e_entry.get(e).into(),
                    e_phoff: h.e_phoff.get(e).into(),
                    e_shoff: h.e_shoff.get(e).into(),
                    e_flags: h.e_flags.get(e),
                    e_ehsize: h.e_ehsize.get(e),
                    e_phentsize: h.e_phentsize.get(e),
                    e_phnum: h.e_phnum.get(e),
                    e_shentsize: h.e_shentsize.get(e),
                    e_shnum: h.e_shnum.get(e),
                    e_shstrndx: h.e_shstrndx.get(e),
                }
            }
            Class::Elf64 => {
                let h: &elf::FileHeader64<Endianness> = decode(&b[..self.ehdr_size()]);
                Header {
                    ident: ident_bytes(&h.e_ident),
                    e_type: h.e_type.get(e),
                    e_machine: h.e_machine.get(e),
                    e_version: h.e_version.get(e),
                    e_entry: h.e_entry.get(e),
                    e_phoff: h.e_phoff.get(e),
                    e_shoff: h.e_shoff.get(e),
                    e_flags: h.e_flags.get(e),
                    e_ehsize: h.e_ehsize.get(e),
                    e_phentsize: h.e_phentsize.get(e),
                    e_phnum: h.e_phnum.get(e),
                    e_shentsize: h.e_shentsize.get(e),
                    e_shnum: h.e_shnum.get(e),
                    e_shstrndx: h.e_shstrndx.get(e),
                }
            }
        }
    }

    /// Encodes a file header. Address fields must fit the class (the planner checks).
    pub fn encode_header(self, h: &Header) -> Vec<u8> {
        let e = ob(self.endian);
        let ident = ident_struct(&h.ident);
        match self.class {
            Class::Elf32 => bytes_of(&elf::FileHeader32::<Endianness> {
                e_ident: ident,
                e_type: U16::new(e, h.e_type),
                e_machine: U16::new(e, h.e_machine),
                e_version: U32::new(e, h.e_version),
                e_entry: U32::new(e, h.e_entry as u32),
                e_phoff: U32::new(e, h.e_phoff as u32),
                e_shoff: U32::new(e, h.e_shoff as u32),
                e_flags: U32::new(e, h.e_flags),
                e_ehsize: U16::new(e, h.e_ehsize),
                e_phentsize: U16::new(e, h.e_phentsize),
                e_phnum: U16::new(e, h.e_phnum),
                e_shentsize: U16::new(e, h.e_shentsize),
                e_shnum: U16::new(e, h.e_shnum),
                e_shstrndx: U16::new(e, h.e_shstrndx),
            })
            .to_vec(),
            Class::Elf64 => bytes_of(&elf::FileHeader64::<Endianness> {
                e_ident: ident,
                e_type: U16::new(e, h.e_type),
                e_machine: U16::new(e, h.e_machine),
                e_version: U32::new(e, h.e_version),
                e_entry: U64::new(e, h.e_entry),
                e_phoff: U64::new(e, h.e_phoff),
                e_shoff: U64::new(e, h.e_shoff),
                e_flags: U32::new(e, h.e_flags),
                e_ehsize: U16::new(e, h.e_ehsize),
                e_phentsize: U16::new(e, h.e_phentsize),
                e_phnum: U16::new(e, h.e_phnum),
                e_shentsize: U16::new(e, h.e_shentsize),
                e_shnum: U16::new(e, h.e_shnum),
                e_shstrndx: U16::new(e, h.e_shstrndx),
            })
            .to_vec(),
        }
    }

    /// Decodes one program header from at least `phdr_size()` bytes.
    pub fn decode_phdr(self, b: &[u8]) -> Phdr {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => {
                let p: &elf::ProgramHeader32<Endianness> = decode(&b[..self.phdr_size()]);
                Phdr {
                    p_type: p.p_type.get(e),
                    p_flags: p.p_flags.get(e),
                    p_offset: p.p_offset.get(e).into(),
                    p_vaddr: p.p_vaddr.get(e).into(),
                    p_paddr: p.p_paddr.get(e).into(),
                    p_filesz: p.p_filesz.get(e).into(),
                    p_memsz: p.p_memsz.get(e).into(),
                    p_align: p.p_align.get(e).into(),
                }
            }
            Class::Elf64 => {
                let p: &elf::ProgramHeader64<Endianness> = decode(&b[..self.phdr_size()]);
                Phdr {
                    p_type: p.p_type.get(e),
                    p_flags: p.p_flags.get(e),
                    p_offset: p.p_offset.get(e),
                    p_vaddr: p.p_vaddr.get(e),
                    p_paddr: p.p_paddr.get(e),
                    p_filesz: p.p_filesz.get(e),
                    p_memsz: p.p_memsz.get(e),
                    p_align: p.p_align.get(e),
                }
            }
        }
    }

    /// Encodes one program header.
    pub fn encode_phdr(self, p: &Phdr) -> Vec<u8> {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => bytes_of(&elf::ProgramHeader32::<Endianness> {
                p_type: U32::new(e, p.p_type),
                p_offset: U32::new(e, p.p_offset as u32),
                p_vaddr: U32::new(e, p.p_vaddr as u32),
                p_paddr: U32::new(e, p.p_paddr as u32),
                p_filesz: U32::new(e, p.p_filesz as u32),
                p_memsz: U32::new(e, p.p_memsz as u32),
                p_flags: U32::new(e, p.p_flags),
                p_align: U32::new(e, p.p_align as u32),
            })
            .to_vec(),
            Class::Elf64 => bytes_of(&elf::ProgramHeader64::<Endianness> {
                p_type: U32::new(e, p.p_type),
                p_flags: U32::new(e, p.p_flags),
                p_offset: U64::new(e, p.p_offset),
                p_vaddr: U64::new(e, p.p_vaddr),
                p_paddr: U64::new(e, p.p_paddr),
                p_filesz: U64::new(e, p.p_filesz),
                p_memsz: U64::new(e, p.p_memsz),
                p_align: U64::new(e, p.p_align),
            })
            .to_vec(),
        }
    }

    /// Decodes one section header from at least `shdr_size()` bytes.
    pub fn decode_shdr(self, b: &[u8]) -> Shdr {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => {
                let s: &elf::SectionHeader32<Endianness> = decode(&b[..self.shdr_size()]);
                Shdr {
                    sh_name: s.sh_name.get(e),
                    sh_type: s.sh_type.get(e),
                    sh_flags: s.sh_flags.get(e).into(),
                    sh_addr: s.sh_addr.get(e).into(),
                    sh_offset: s.sh_offset.get(e).into(),
                    sh_size: s.sh_size.get(e).into(),
                    sh_link: s.sh_link.get(e),
                    sh_info: s.sh_info.get(e),
                    sh_addralign: s.sh_addralign.get(e).into(),
                    sh_entsize: s.sh_entsize.get(e).into(),
                }
            }
            Class::Elf64 => {
                let s: &elf::SectionHeader64<Endianness> = decode(&b[..self.shdr_size()]);
                Shdr {
                    sh_name: s.sh_name.get(e),
                    sh_type: s.sh_type.get(e),
                    sh_flags: s.sh_flags.get(e),
                    sh_addr: s.sh_addr.get(e),
                    sh_offset: s.sh_offset.get(e),
                    sh_size: s.sh_size.get(e),
                    sh_link: s.sh_link.get(e),
                    sh_info: s.sh_info.get(e),
                    sh_addralign: s.sh_addralign.get(e),
                    sh_entsize: s.sh_entsize.get(e),
                }
            }
        }
    }

    /// Encodes one section header.
    pub fn encode_shdr(self, s: &Shdr) -> Vec<u8> {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => bytes_of(&elf::SectionHeader32::<Endianness> {
                sh_name: U32::new(e, s.sh_name),
                sh_type: U32::new(e, s.sh_type),
                sh_flags: U32::new(e, s.sh_flags as u32),
                sh_addr: U32::new(e, s.sh_addr as u32),
                sh_offset: U32::new(e, s.sh_offset as u32),
                sh_size: U32::new(e, s.sh_size as u32),
                sh_link: U32::new(e, s.sh_link),
                sh_info: U32::new(e, s.sh_info),
                sh_addralign: U32::new(e, s.sh_addralign as u32),
                sh_entsize: U32::new(e, s.sh_entsize as u32),
            })
            .to_vec(),
            Class::Elf64 => bytes_of(&elf::SectionHeader64::<Endianness> {
                sh_name: U32::new(e, s.sh_name),
                sh_type: U32::new(e, s.sh_type),
                sh_flags: U64::new(e, s.sh_flags),
                sh_addr: U64::new(e, s.sh_addr),
                sh_offset: U64::new(e, s.sh_offset),
                sh_size: U64::new(e, s.sh_size),
                sh_link: U32::new(e, s.sh_link),
                sh_info: U32::new(e, s.sh_info),
                sh_addralign: U64::new(e, s.sh_addralign),
                sh_entsize: U64::new(e, s.sh_entsize),
            })
            .to_vec(),
        }
    }

    /// Decodes one dynamic entry from at least `dyn_size()` bytes.
    pub fn decode_dyn(self, b: &[u8]) -> Dyn {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => {
                let d: &elf::Dyn32<Endianness> = decode(&b[..8]);
                Dyn {
                    tag: d.d_tag.get(e).into(),
                    val: d.d_val.get(e).into(),
                }
            }
            Class::Elf64 => {
                let d: &elf::Dyn64<Endianness> = decode(&b[..16]);
                Dyn {
                    tag: d.d_tag.get(e),
                    val: d.d_val.get(e),
                }
            }
        }
    }

    /// Encodes one dynamic entry.
    pub fn encode_dyn(self, d: &Dyn) -> Vec<u8> {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => bytes_of(&elf::Dyn32::<Endianness> {
                d_tag: U32::new(e, d.tag as u32),
                d_val: U32::new(e, d.val as u32),
            })
            .to_vec(),
            Class::Elf64 => bytes_of(&elf::Dyn64::<Endianness> {
                d_tag: U64::new(e, d.tag),
                d_val: U64::new(e, d.val),
            })
            .to_vec(),
        }
    }

    /// Decodes the fields of a symbol this crate uses from at least `sym_size()` bytes.
    pub fn decode_sym(self, b: &[u8]) -> Sym {
        let e = ob(self.endian);
        match self.class {
            Class::Elf32 => {
                let s: &elf::Sym32<Endianness> = decode(&b[..16]);
                Sym {
                    st_name: s.st_name.get(e),
                    st_value: s.st_value.get(e).into(),
                    st_shndx: s.st_shndx.get(e),
                    st_size: s.st_size.get(e).into(),
                    st_info: s.st_info,
                }
            }
            Class::Elf64 => {
                let s: &elf::Sym64<Endianness> = decode(&b[..24]);
                Sym {
                    st_name: s.st_name.get(e),
                    st_value: s.st_value.get(e),
                    st_shndx: s.st_shndx.get(e),
                    st_size: s.st_size.get(e),
                    st_info: s.st_info,
                }
            }
        }
    }

    /// Offset of `st_value` inside a symbol entry.
    pub fn sym_value_offset(self) -> usize {
        match self.class {
            Class::Elf32 => 4,
            Class::Elf64 => 8,
        }
    }
}

fn ident_bytes(i: &elf::Ident) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&i.magic);
    out[4] = i.class;
    out[5] = i.data;
    out[6] = i.version;
    out[7] = i.os_abi;
    out[8] = i.abi_version;
    out[9..].copy_from_slice(&i.padding);
    out
}

fn ident_struct(b: &[u8; 16]) -> elf::Ident {
    let mut padding = [0u8; 7];
    padding.copy_from_slice(&b[9..]);
    elf::Ident {
        magic: [b[0], b[1], b[2], b[3]],
        class: b[4],
        data: b[5],
        version: b[6],
        os_abi: b[7],
        abi_version: b[8],
        padding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formats() -> [Format; 4] {
        [
            Format {
                class: Class::Elf32,
                endian: Endian::Little,
            },
            Format {
                class: Class::Elf32,
                endian: Endian::Big,
            },
            Format {
                class: Class::Elf64,
                endian: Endian::Little,
            },
            Format {
                class: Class::Elf64,
                endian: Endian::Big,
            },
        ]
    }

    #[test]
    fn phdr_and_shdr_round_trip_in_every_format() {
        for f in formats() {
            let p = Phdr {
                p_type: 1,
                p_flags: 6,
                p_offset: 0x1234,
                p_vaddr: 0x401234,
                p_paddr: 0x401234,
                p_filesz: 0x100,
                p_memsz: 0x200,
                p_align: 0x10000,
            };
            let b = f.encode_phdr(&p);
            assert_eq!(b.len(), f.phdr_size());
            assert_eq!(f.decode_phdr(&b), p);
            let s = Shdr {
                sh_name: 7,
                sh_type: 3,
                sh_flags: 2,
                sh_addr: 0x500,
                sh_offset: 0x500,
                sh_size: 0x40,
                sh_link: 0,
                sh_info: 0,
                sh_addralign: 1,
                sh_entsize: 0,
            };
            let b = f.encode_shdr(&s);
            assert_eq!(b.len(), f.shdr_size());
            assert_eq!(f.decode_shdr(&b), s);
            let d = Dyn {
                tag: 0x6fff_fffe,
                val: 0x1000,
            };
            assert_eq!(f.decode_dyn(&f.encode_dyn(&d)), d);
        }
    }

    #[test]
    fn big_endian_words_are_stored_most_significant_first() {
        let f = Format {
            class: Class::Elf64,
            endian: Endian::Big,
        };
        assert_eq!(f.put_word(0x0102), vec![0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(f.put_u32(0x0a0b0c0d), [0x0a, 0x0b, 0x0c, 0x0d]);
    }
}
