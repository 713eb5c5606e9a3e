//! Encoding in the file's class and byte order, and the sizes of its headers.

/// Writes fields in the file's class and byte order.
#[derive(Clone, Copy)]
pub(super) struct Enc {
    pub(super) is64: bool,
    pub(super) big: bool,
}

impl Enc {
    pub(super) fn u8(&self, b: &mut Vec<u8>, v: u8) {
        b.push(v);
    }
    pub(super) fn u16(&self, b: &mut Vec<u8>, v: u16) {
        b.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    pub(super) fn u32(&self, b: &mut Vec<u8>, v: u32) {
        b.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    pub(super) fn u64(&self, b: &mut Vec<u8>, v: u64) {
        b.extend_from_slice(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    /// An address-sized field (`Elf_Addr`, `Elf_Off`, `Elf_Xword` for 64).
    pub(super) fn word(&self, b: &mut Vec<u8>, v: u64) {
        if self.is64 {
            self.u64(b, v)
        } else {
            self.u32(b, v as u32)
        }
    }
    pub(super) fn ws(&self) -> u64 {
        if self.is64 {
            8
        } else {
            4
        }
    }
    pub(super) fn sym_size(&self) -> u64 {
        if self.is64 {
            24
        } else {
            16
        }
    }
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sym(
        &self,
        b: &mut Vec<u8>,
        name: u32,
        info: u8,
        shndx: u16,
        value: u64,
        size: u64,
    ) {
        self.u32(b, name);
        if self.is64 {
            self.u8(b, info);
            self.u8(b, 0);
            self.u16(b, shndx);
            self.u64(b, value);
            self.u64(b, size);
        } else {
            self.u32(b, value as u32);
            self.u32(b, size as u32);
            self.u8(b, info);
            self.u8(b, 0);
            self.u16(b, shndx);
        }
    }
}

/// `v` rounded up to a multiple of `a` (unchanged for `a` 0 or 1).
pub(super) fn align_up(v: u64, a: u64) -> u64 {
    if a <= 1 {
        v
    } else {
        v.div_ceil(a) * a
    }
}

/// The sizes of the ELF header and of one program and one section header, for the class.
pub(super) struct HeaderSizes {
    pub(super) ehdr: u64,
    pub(super) phdr: u64,
    pub(super) shdr: u64,
}

impl HeaderSizes {
    pub(super) fn of(enc: Enc) -> HeaderSizes {
        if enc.is64 {
            HeaderSizes {
                ehdr: 64,
                phdr: 56,
                shdr: 64,
            }
        } else {
            HeaderSizes {
                ehdr: 52,
                phdr: 32,
                shdr: 40,
            }
        }
    }
}
