//! Applying a [`Plan`]: the only module that writes.
//!
//! One applier takes the plan's writes in order (stage, commit, cleanup), then brings the symbol
//! tables along, and writes into a sink: a file ([`apply_plan`], through
//! [`crate::ElfFile::apply`]) or bytes in memory ([`Plan::apply_to_vec`]), the way
//! [`crate::source::Source`] serves reading. Reads and writes are positioned and bounded: copying a
//! moved block or scanning a symbol table goes through a fixed-size buffer, so memory does not grow
//! with the file.
//!
//! On a file, the old contents of every byte about to be overwritten are saved first; if a write
//! fails, everything written so far is put back and the file is truncated to its old length, so a
//! failed edit leaves the file byte-identical.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Location, Repr, Result};
use crate::format::Format;
use crate::plan::{symbol_fixup_writes, Data, Plan};

/// The largest read or write the applier makes at once.
const CHUNK: u64 = 1 << 20;

/// A deliberate failure, to test what an interrupted edit leaves behind (feature
/// `fault-injection`, for tests only).
#[cfg(feature = "fault-injection")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The write with this index (0-based, counting every `pwrite`) fails with an I/O error; the
    /// applier rolls back as it would for a real failure.
    FailWrite(usize),
    /// Stop after this many writes as if the process had been killed: no rollback.
    StopAfter(usize),
}

/// How to apply: `ApplyOptions::default()`, then set the fields that matter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApplyOptions {
    /// `fdatasync` after the staged data and after the commit, so that the order survives a crash
    /// of the machine, not only of the process.
    pub sync: bool,
    /// Testing hook (feature `fault-injection`): inject a failure.
    #[cfg(feature = "fault-injection")]
    pub fault: Option<Fault>,
}

/// What the applier did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Number of `pwrite` calls made.
    pub writes: usize,
    /// Bytes written.
    pub bytes: u64,
}

/// Where the applier's writes go. Reads see the writes made so far.
pub(crate) trait Sink {
    /// Current length in bytes.
    fn len(&self) -> u64;
    /// Fills `buf` from `offset`.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `data` at `offset`.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// The writes of one phase are done (and at the end): a file syncs here when asked to.
    fn barrier(&mut self) -> io::Result<()>;
}

/// Where and why applying stopped.
pub(crate) struct Failure {
    /// The offset being read or written.
    pub(crate) offset: u64,
    /// What went wrong.
    pub(crate) source: io::Error,
}

fn at(offset: u64) -> impl FnOnce(io::Error) -> Failure {
    move |source| Failure { offset, source }
}

/// Applies `plan` to `sink`, whose length must be `plan.old_len`: the writes in plan order, a
/// barrier between phases and at the end, then the symbol fixups. A `Data::Copy` reads what the
/// sink holds when it comes; the planner puts it first, before anything changed.
pub(crate) fn apply_writes<S: Sink>(
    sink: &mut S,
    plan: &Plan,
    format: Format,
) -> Result<(), Failure> {
    let mut phase = None;
    for write in &plan.writes {
        if phase.is_some_and(|p| p != write.phase) {
            sink.barrier().map_err(at(write.offset))?;
        }
        phase = Some(write.phase);
        match &write.data {
            Data::Bytes(bytes) => sink
                .write_at(write.offset, bytes)
                .map_err(at(write.offset))?,
            Data::Zero => {
                let mut done = 0;
                while done < write.len {
                    let n = (write.len - done).min(CHUNK);
                    sink.write_at(write.offset + done, &vec![0u8; n as usize])
                        .map_err(at(write.offset + done))?;
                    done += n;
                }
            }
            Data::Copy(from) => {
                let mut done = 0;
                let mut buf = vec![0u8; write.len.min(CHUNK) as usize];
                while done < write.len {
                    let n = (write.len - done).min(CHUNK) as usize;
                    sink.read_at(from + done, &mut buf[..n])
                        .map_err(at(from + done))?;
                    sink.write_at(write.offset + done, &buf[..n])
                        .map_err(at(write.offset + done))?;
                    done += n as u64;
                }
            }
        }
    }
    let size = format.sym_size() as u64;
    for fixup in &plan.symbol_fixups {
        let inside = fixup
            .count
            .checked_mul(size)
            .and_then(|n| fixup.offset.checked_add(n))
            .is_some_and(|end| end <= sink.len());
        if !inside {
            return Err(Failure {
                offset: fixup.offset,
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    "symbol table to fix up lies outside the file",
                ),
            });
        }
        let per_chunk = (CHUNK / size).max(1);
        let mut first = 0;
        while first < fixup.count {
            let n = (fixup.count - first).min(per_chunk);
            let chunk_at = fixup.offset + first * size;
            let mut buf = vec![0u8; (n * size) as usize];
            sink.read_at(chunk_at, &mut buf).map_err(at(chunk_at))?;
            for (offset, value) in symbol_fixup_writes(format, &buf, &fixup.moves) {
                sink.write_at(chunk_at + offset, &value)
                    .map_err(at(chunk_at + offset))?;
            }
            first += n;
        }
    }
    sink.barrier().map_err(at(0))
}

/// Bytes in memory, grown to the plan's new length before the writes.
struct VecSink<'a> {
    bytes: &'a mut Vec<u8>,
}

impl VecSink<'_> {
    fn range(&self, offset: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
        offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.bytes.len() as u64)
            .map(|end| offset as usize..end as usize)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the plan reaches past the end of the file",
                )
            })
    }
}

impl Sink for VecSink<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let range = self.range(offset, buf.len())?;
        buf.copy_from_slice(&self.bytes[range]);
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        let range = self.range(offset, data.len())?;
        self.bytes[range].copy_from_slice(data);
        Ok(())
    }

    fn barrier(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Plan {
    /// Applies the plan to a file held in memory (the same applier as on disk).
    pub fn apply_to_vec(&self, bytes: &mut Vec<u8>, format: Format) -> Result<()> {
        if bytes.len() as u64 != self.old_len {
            return Err(Error::from(Repr::Changed {
                path: Default::default(),
                what: format!(
                    "length is {} bytes, the plan was made for {}",
                    bytes.len(),
                    self.old_len
                ),
            }));
        }
        if self.new_len > self.old_len {
            bytes.resize(self.new_len as usize, 0);
        }
        apply_writes(&mut VecSink { bytes }, self, format)
            .map_err(|f| Error::malformed(f.offset, f.source.to_string()))
    }
}

/// An old range of the file, saved before it was overwritten.
struct Saved {
    offset: u64,
    bytes: Vec<u8>,
}

/// A file opened for writing, with the journal that undoes the writes.
struct FileSink<'a> {
    file: &'a File,
    old_len: u64,
    /// The current length: the old one, or past it where writes went.
    len: u64,
    saved: Vec<Saved>,
    writes: usize,
    bytes: u64,
    sync: bool,
    #[cfg(feature = "fault-injection")]
    fault: Option<Fault>,
}

/// The marker error of [`Fault::StopAfter`].
#[cfg(feature = "fault-injection")]
fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "stopped by fault injection")
}

impl Sink for FileSink<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        FileExt::read_exact_at(self.file, buf, offset)
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "fault-injection")]
        match self.fault {
            Some(Fault::FailWrite(k)) if k == self.writes => {
                return Err(io::Error::other("injected write failure"));
            }
            Some(Fault::StopAfter(k)) if k == self.writes => return Err(stopped()),
            _ => {}
        }
        if offset < self.old_len {
            let n = (self.old_len - offset).min(data.len() as u64) as usize;
            let mut old = vec![0u8; n];
            self.file.read_exact_at(&mut old, offset)?;
            self.saved.push(Saved { offset, bytes: old });
        }
        self.writes += 1;
        self.bytes += data.len() as u64;
        self.len = self.len.max(offset + data.len() as u64);
        self.file.write_all_at(data, offset)
    }

    fn barrier(&mut self) -> io::Result<()> {
        if self.sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

impl FileSink<'_> {
    /// Puts back every saved range, newest first, and the old length.
    fn rollback(&mut self) -> io::Result<()> {
        while let Some(saved) = self.saved.pop() {
            self.file.write_all_at(&saved.bytes, saved.offset)?;
        }
        self.file.set_len(self.old_len)
    }
}

/// Applies `plan` to `file` (opened for reading and writing), whose current length must be
/// `plan.old_len`.
pub fn apply_plan(
    file: &File,
    path: &Path,
    plan: &Plan,
    format: Format,
    opts: &ApplyOptions,
) -> Result<ApplyReport> {
    let mut sink = FileSink {
        file,
        old_len: plan.old_len,
        len: plan.old_len,
        saved: Vec::new(),
        writes: 0,
        bytes: 0,
        sync: opts.sync,
        #[cfg(feature = "fault-injection")]
        fault: opts.fault,
    };
    let Err(Failure { offset, source }) = apply_writes(&mut sink, plan, format) else {
        return Ok(ApplyReport {
            writes: sink.writes,
            bytes: sink.bytes,
        });
    };
    let path = Location(path.to_path_buf());
    #[cfg(feature = "fault-injection")]
    if source.kind() == io::ErrorKind::Interrupted && opts.fault.is_some() {
        // A crash, as far as the test that asked for it knows: nothing is undone.
        return Err(Error::from(Repr::WriteFailed {
            path,
            offset,
            source,
        }));
    }
    match sink.rollback() {
        Ok(()) => Err(Error::from(Repr::WriteFailed {
            path,
            offset,
            source,
        })),
        Err(e) => Err(Error::from(Repr::RollbackFailed {
            path,
            offset,
            source,
            restore: e.to_string(),
        })),
    }
}
