//! Positioned, bounds-checked reads from a file or a byte slice.
//!
//! Parsing never needs the whole file: it asks a [`Source`] for the few ranges it uses (headers,
//! `.dynamic`, the string table, ...), so its cost does not grow with the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Location, Result};

/// Largest single structure we agree to read into memory (a string or symbol table, say).
/// Bigger requests come only from corrupt headers, and refusing them keeps memory bounded.
pub const MAX_READ: u64 = 512 << 20;

/// Something that can be read at an offset: a file, or bytes in memory.
pub trait Source {
    /// Length in bytes.
    fn len(&self) -> u64;

    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` from `offset`; the caller has checked that the range is inside `len()`.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl Source for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = offset as usize;
        buf.copy_from_slice(&self[start..start + buf.len()]);
        Ok(())
    }
}

impl Source for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.as_slice().read_exact_at(offset, buf)
    }
}

/// An open file together with the length it had when opened.
#[derive(Debug)]
pub struct FileSource<'a> {
    /// The file.
    pub file: &'a File,
    /// Its length when the caller looked (edits re-check it before writing).
    pub len: u64,
}

impl Source for FileSource<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        FileExt::read_exact_at(self.file, buf, offset)
    }
}

/// Reads `len` bytes at `offset`, or says which structure did not fit.
pub fn read_range<S: Source + ?Sized>(
    src: &S,
    offset: u64,
    len: u64,
    what: &str,
) -> Result<Vec<u8>> {
    check_range(src.len(), offset, len, what)?;
    if len > MAX_READ {
        return Err(Error::unsupported(format!(
            "{what} at offset {offset:#x} is {len} bytes, more than the {MAX_READ}-byte limit"
        )));
    }
    let mut buf = vec![0u8; len as usize];
    src.read_exact_at(offset, &mut buf)
        .map_err(|source| Error::Io {
            path: Location::default(),
            op: "read",
            source,
        })?;
    Ok(buf)
}

/// Checks that `[offset, offset + len)` lies inside a file of `file_len` bytes.
pub fn check_range(file_len: u64, offset: u64, len: u64, what: &str) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(Error::Truncated {
            path: Location::default(),
            what: what.to_string(),
            offset,
            needed: len,
            file_len,
        }),
    }
}
