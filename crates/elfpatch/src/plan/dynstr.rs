//! The planner's view of the dynamic string table: its bytes when they were read whole, or the
//! file itself, read a window at a time.
//!
//! A big library's table is megabytes (libtorch_cpu's 5.6 MB). An edit needs to know which of
//! its bytes are referenced (a walk over every symbol name, [`super::strings`]) and a few strings
//! by offset; it needs a copy of the whole table only when the table itself must move. Reading
//! it whole into fresh memory faults in a page per 4 KiB, which on a large table costs more than
//! the rest of the edit; windows of one reused size cost a copy from the page cache.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::read::StrTab;
use crate::source::{read_into, read_range, Source};

/// Bytes read at a time from a file: a few pages, reused (the allocator hands the same block back).
pub(super) const WINDOW: u64 = 64 * 1024;

/// Where the table's bytes come from.
enum Bytes<'a> {
    /// All of them, in memory.
    Whole(&'a [u8]),
    /// The file, the table starting at this offset.
    File(&'a dyn Source, u64),
}

/// The dynamic string table as the planner reads it.
pub(crate) struct Dynstr<'a> {
    len: u64,
    bytes: Bytes<'a>,
    /// Bytes read at a time from a file ([`WINDOW`]; smaller in tests, to cross windows).
    window: u64,
    /// With [`Bytes::File`]: the strings looked up by offset (the dynamic array's and the version
    /// need records'), read beforehand, sorted by offset.
    strings: Vec<(u64, Vec<u8>)>,
}

impl<'a> Dynstr<'a> {
    /// A table held whole in memory (also a file's, read whole).
    pub(crate) fn whole(bytes: &'a [u8]) -> Dynstr<'a> {
        Dynstr {
            len: bytes.len() as u64,
            bytes: Bytes::Whole(bytes),
            window: WINDOW,
            strings: Vec::new(),
        }
    }

    /// The table `strtab` of the file `src`, read as needed. `lookups` are the offsets, besides
    /// the dynamic array's strings `strtab` holds, that [`Dynstr::string`] will be asked for.
    pub(crate) fn file(
        src: &'a dyn Source,
        strtab: &StrTab,
        lookups: impl IntoIterator<Item = u64>,
    ) -> Result<Dynstr<'a>> {
        let mut table = Dynstr {
            len: strtab.size,
            bytes: Bytes::File(src, strtab.offset),
            window: WINDOW,
            strings: Vec::new(),
        };
        let mut wanted: Vec<u64> = lookups.into_iter().filter(|&o| o < strtab.size).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut strings = Vec::with_capacity(wanted.len());
        for o in wanted {
            if let Some(s) = strtab.get(o) {
                strings.push((o, s.to_vec()));
                continue;
            }
            let end = table.nul_at_or_after(o)?;
            if end < table.len {
                strings.push((o, table.read(o, end - o)?.into_owned()));
            }
        }
        if let crate::read::StrContents::Strings(known) = &strtab.contents {
            strings.extend(known.iter().cloned());
        }
        strings.sort_unstable();
        strings.dedup_by_key(|(o, _)| *o);
        table.strings = strings;
        Ok(table)
    }

    /// The same table, read `window` bytes at a time (tests: windows that strings cross).
    #[cfg(test)]
    pub(crate) fn with_window(self, window: u64) -> Dynstr<'a> {
        Dynstr {
            window: window.max(1),
            ..self
        }
    }

    /// The table's size in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The NUL-terminated string at `offset`, without its NUL: from the whole table, or, read
    /// from a file, among the strings [`Dynstr::file`] was told of.
    pub(crate) fn string(&self, offset: u64) -> Option<&[u8]> {
        match self.bytes {
            Bytes::Whole(bytes) => {
                let rest = bytes.get(usize::try_from(offset).ok()?..)?;
                let end = rest.iter().position(|&b| b == 0)?;
                Some(&rest[..end])
            }
            Bytes::File(..) => self
                .strings
                .binary_search_by_key(&offset, |(o, _)| *o)
                .ok()
                .map(|i| self.strings[i].1.as_slice()),
        }
    }

    /// Up to `n` bytes from `at` (fewer at the table's end).
    pub(crate) fn read(&self, at: u64, n: u64) -> Result<Cow<'a, [u8]>> {
        let at = at.min(self.len);
        let n = n.min(self.len - at);
        match self.bytes {
            Bytes::Whole(bytes) => Ok(Cow::Borrowed(&bytes[at as usize..(at + n) as usize])),
            Bytes::File(src, offset) => {
                read_range(src, offset + at, n, "dynamic string table").map(Cow::Owned)
            }
        }
    }

    /// All of the table (to copy it).
    pub(crate) fn all(&self) -> Result<Cow<'a, [u8]>> {
        self.read(0, self.len)
    }

    /// The offset of the first NUL at or after `from`, or the table's length.
    pub(crate) fn nul_at_or_after(&self, from: u64) -> Result<u64> {
        if let Bytes::Whole(bytes) = self.bytes {
            return Ok(next_nul(bytes, from.min(self.len) as usize) as u64);
        }
        // Strings looked up by offset are short: a first small piece finds most NULs.
        let mut at = from;
        let mut piece = 256;
        while at < self.len {
            let bytes = self.read(at, piece)?;
            if let Some(n) = bytes.iter().position(|&b| b == 0) {
                return Ok(at + n as u64);
            }
            at += bytes.len() as u64;
            piece = self.window;
        }
        Ok(self.len)
    }

    /// A cursor over the table for one pass in increasing offsets.
    pub(crate) fn scan(&self, lookback: u64) -> Scan<'_, 'a> {
        Scan {
            table: self,
            lookback,
            start: 0,
            window: Cow::Borrowed(&[]),
        }
    }
}

/// One pass over the table in increasing offsets ([`Dynstr::scan`]): it keeps one window of the
/// table, and `lookback` bytes before where it was last asked to look, so that the string before
/// a NUL it found can be compared without another read.
pub(crate) struct Scan<'t, 'a> {
    table: &'t Dynstr<'a>,
    lookback: u64,
    /// The window's offset in the table.
    start: u64,
    window: Cow<'a, [u8]>,
}

impl Scan<'_, '_> {
    /// The table's size in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.table.len
    }

    /// Makes the window hold `at` (which is inside the table), with the lookback before it.
    fn hold(&mut self, at: u64) -> Result<()> {
        let end = self.start + self.window.len() as u64;
        if self.start <= at && at < end {
            return Ok(());
        }
        if let Bytes::Whole(bytes) = self.table.bytes {
            (self.start, self.window) = (0, Cow::Borrowed(bytes));
            return Ok(());
        }
        let Bytes::File(src, offset) = self.table.bytes else {
            unreachable!("a table in memory is one window");
        };
        // One buffer for the whole pass: read into, never zeroed again nor faulted in anew.
        let start = at.saturating_sub(self.lookback);
        let n = (self.table.window + (at - start)).min(self.table.len - start);
        let buf = self.window.to_mut();
        buf.resize(n as usize, 0);
        read_into(src, offset + start, buf, "dynamic string table")?;
        self.start = start;
        Ok(())
    }

    /// The offset of the first NUL at or after `from`, or the table's length.
    pub(crate) fn nul_at_or_after(&mut self, from: u64) -> Result<u64> {
        let mut at = from;
        while at < self.table.len {
            self.hold(at)?;
            let i = (at - self.start) as usize;
            let found = next_nul(&self.window, i);
            if found < self.window.len() {
                return Ok(self.start + found as u64);
            }
            at = self.start + self.window.len() as u64;
        }
        Ok(self.table.len)
    }

    /// The `n` bytes before `end`, when the window still holds them (it does for the NUL last
    /// found and `n` up to the lookback); read anew otherwise.
    pub(crate) fn before(&self, end: u64, n: u64) -> Result<Cow<'_, [u8]>> {
        let Some(from) = end.checked_sub(n) else {
            return Err(Error::invalid("string table read before its start"));
        };
        let window_end = self.start + self.window.len() as u64;
        if self.start <= from && end <= window_end {
            let (a, b) = ((from - self.start) as usize, (end - self.start) as usize);
            return Ok(Cow::Borrowed(&self.window[a..b]));
        }
        self.table.read(from, n)
    }
}

/// The offset of the first NUL at or after `from`, or the slice's length (`from` when that is
/// past it). `memchr` looks at a vector register's worth of bytes at a time: an edit of a big
/// library finds the end of each of its hundred thousand symbol names.
pub(super) fn next_nul(table: &[u8], from: usize) -> usize {
    table
        .get(from..)
        .and_then(|rest| memchr::memchr(0, rest))
        .map_or(from.max(table.len()), |i| from + i)
}
