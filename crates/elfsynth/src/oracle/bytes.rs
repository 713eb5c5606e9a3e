//! The oracle's own decoding: bounds-checked reads of the file's bytes in its byte order, and
//! strings from a string table.

use super::{err, Res};

/// The file's bytes, read in its class and byte order.
#[derive(Clone, Copy)]
pub(super) struct R<'a> {
    pub(super) d: &'a [u8],
    pub(super) big: bool,
    pub(super) is64: bool,
}

impl<'a> R<'a> {
    pub(super) fn slice(&self, off: u64, len: u64) -> Res<&'a [u8]> {
        match off.checked_add(len) {
            Some(end) if end <= self.d.len() as u64 => Ok(&self.d[off as usize..end as usize]),
            _ => err(format!(
                "read of {len:#x} bytes at offset {off:#x} is outside the {:#x}-byte file",
                self.d.len()
            )),
        }
    }
    pub(super) fn u8(&self, off: u64) -> Res<u8> {
        Ok(self.slice(off, 1)?[0])
    }
    pub(super) fn u16(&self, off: u64) -> Res<u16> {
        let b = self.slice(off, 2)?;
        let a = [b[0], b[1]];
        Ok(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
    pub(super) fn u32(&self, off: u64) -> Res<u32> {
        let b = self.slice(off, 4)?;
        let a = [b[0], b[1], b[2], b[3]];
        Ok(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    pub(super) fn u64(&self, off: u64) -> Res<u64> {
        let b = self.slice(off, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    pub(super) fn word(&self, off: u64) -> Res<u64> {
        if self.is64 {
            self.u64(off)
        } else {
            self.u32(off).map(u64::from)
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
}

/// The NUL-terminated string at `off` of the string table `bytes`.
pub(super) fn cstr(bytes: &[u8], off: u64, what: &str) -> Res<String> {
    if off >= bytes.len() as u64 {
        return err(format!(
            "{what}: string offset {off:#x} is outside the {:#x}-byte string table",
            bytes.len()
        ));
    }
    let tail = &bytes[off as usize..];
    match tail.iter().position(|&c| c == 0) {
        Some(end) => Ok(String::from_utf8_lossy(&tail[..end]).into_owned()),
        None => err(format!(
            "{what}: string at offset {off:#x} is not NUL-terminated inside the string table"
        )),
    }
}
