//! Positioned, bounds-checked reads from a file or a byte slice.
//!
//! Parsing never needs the whole file: it asks a [`Source`] for the few ranges it uses (headers,
//! `.dynamic`, the string table, ...), so its cost does not grow with the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Location, Repr, Result};

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
    read_into(src, offset, &mut buf, what)?;
    Ok(buf)
}

/// Fills `buf` from `offset` of `src`, checked as [`read_range`] checks (a caller that reads a
/// large table piece by piece into one buffer).
pub fn read_into<S: Source + ?Sized>(
    src: &S,
    offset: u64,
    buf: &mut [u8],
    what: &str,
) -> Result<()> {
    check_range(src.len(), offset, buf.len() as u64, what)?;
    src.read_exact_at(offset, buf).map_err(|source| {
        Error::from(Repr::Io {
            path: Location::default(),
            op: "read",
            source,
        })
    })
}

/// Checks that `[offset, offset + len)` lies inside a file of `file_len` bytes.
pub fn check_range(file_len: u64, offset: u64, len: u64, what: &str) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(Error::from(Repr::Truncated {
            path: Location::default(),
            what: what.to_string(),
            offset,
            needed: len,
            file_len,
        })),
    }
}

/// A [`Source`] that reads the start and the end of another one up front, in one read each, and
/// answers reads that fall inside them from memory.
///
/// Parsing an ELF file asks for about ten small ranges: the ELF header, the program headers and
/// the bytes after them, the interpreter and `.dynstr` (near the start), the section headers and
/// their names (at the end), `.dynamic` (in between). Over a tree of thousands of files those
/// reads are most of the cost; with a head and a tail window they become two or three, and a
/// file no longer than both windows is read once. Reads outside the windows go to the inner
/// source, so the result is the same as reading the inner source directly.
#[derive(Debug)]
pub struct Prefetched<'a, S: Source + ?Sized> {
    inner: &'a S,
    /// (offset, bytes), at most two, not overlapping.
    windows: Vec<(u64, Vec<u8>)>,
}

impl<'a, S: Source + ?Sized> Prefetched<'a, S> {
    /// Windows sized for ELF headers: 16 KiB at the start holds the headers, the interpreter and,
    /// in small files, `.dynstr`; 16 KiB at the end holds the section headers and their names
    /// (linkers put `.shstrtab` just before them). A file of at most 32 KiB is read whole.
    pub fn for_elf(inner: &'a S) -> io::Result<Self> {
        Self::new(inner, 16 << 10, 16 << 10)
    }

    /// Reads the first `head` and the last `tail` bytes of `inner` (the whole of it when they
    /// meet).
    pub fn new(inner: &'a S, head: u64, tail: u64) -> io::Result<Self> {
        let len = inner.len();
        let mut windows = Vec::with_capacity(2);
        let read = |offset: u64, n: u64| -> io::Result<(u64, Vec<u8>)> {
            let mut buf = vec![0u8; n as usize];
            inner.read_exact_at(offset, &mut buf)?;
            Ok((offset, buf))
        };
        if head.saturating_add(tail) >= len {
            windows.push(read(0, len)?);
        } else {
            if head > 0 {
                windows.push(read(0, head)?);
            }
            if tail > 0 {
                windows.push(read(len - tail, tail)?);
            }
        }
        Ok(Prefetched { inner, windows })
    }
}

impl<S: Source + ?Sized> Source for Prefetched<'_, S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        for (start, bytes) in &self.windows {
            if offset >= *start && end <= start + bytes.len() as u64 {
                let from = (offset - start) as usize;
                buf.copy_from_slice(&bytes[from..from + buf.len()]);
                return Ok(());
            }
        }
        self.inner.read_exact_at(offset, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Bytes that count the reads that reach them.
    struct Counted {
        bytes: Vec<u8>,
        reads: Cell<usize>,
    }

    impl Source for Counted {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.set(self.reads.get() + 1);
            self.bytes.read_exact_at(offset, buf)
        }
    }

    fn counted(n: usize) -> Counted {
        Counted {
            bytes: (0..n).map(|i| (i * 7 % 251) as u8).collect(),
            reads: Cell::new(0),
        }
    }

    #[test]
    fn prefetched_reads_equal_direct_reads() {
        let src = counted(10_000);
        let p = Prefetched::new(&src, 1000, 500).unwrap();
        assert_eq!(src.reads.get(), 2);
        for (off, n) in [
            (0, 64),
            (900, 100),
            (950, 100),
            (5000, 10),
            (9500, 500),
            (9499, 501),
        ] {
            let got = read_range(&p, off, n, "test").unwrap();
            assert_eq!(
                got,
                &src.bytes[off as usize..(off + n) as usize],
                "{off}+{n}"
            );
        }
        // Inside a window: no read; across a window's edge or between them: one read each.
        assert_eq!(src.reads.get(), 2 + 3);
        assert!(read_range(&p, 9999, 2, "test").is_err());
    }

    #[test]
    fn a_short_source_is_read_once() {
        let src = counted(1000);
        let p = Prefetched::new(&src, 600, 600).unwrap();
        for off in [0u64, 100, 500, 990] {
            let got = read_range(&p, off, 10, "test").unwrap();
            assert_eq!(got, &src.bytes[off as usize..off as usize + 10]);
        }
        assert_eq!(src.reads.get(), 1);
    }
}
