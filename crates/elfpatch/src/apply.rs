//! Applying a [`Plan`] to a file: the only module that writes.
//!
//! Writes happen in plan order (stage, commit, cleanup). Before overwriting bytes of the original
//! file, their old contents are saved; if a write fails, everything written so far is put back and
//! the file is truncated to its old length, so a failed edit leaves the file byte-identical.
//! Reads are positioned and bounded: copying a moved block or scanning a symbol table goes through
//! a fixed-size buffer, so memory does not grow with the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Location, Result};
use crate::format::Format;
use crate::plan::{symbol_fixup_writes, Data, Plan};

const CHUNK: u64 = 1 << 20;

/// A deliberate failure, to test what an interrupted edit leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The write with this index (0-based, counting every `pwrite`) fails with an I/O error; the
    /// applier rolls back as it would for a real failure.
    FailWrite(usize),
    /// Stop after this many writes as if the process had been killed: no rollback.
    StopAfter(usize),
}

/// How to apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// `fdatasync` after the staged data and after the commit, so that the order survives a crash
    /// of the machine, not only of the process.
    pub sync: bool,
    /// Testing hook: inject a failure.
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

struct Writer<'a> {
    file: &'a File,
    path: &'a Path,
    old_len: u64,
    saved: Vec<(u64, Vec<u8>)>,
    count: usize,
    bytes: u64,
    fault: Option<Fault>,
}

/// The marker error of [`Fault::StopAfter`].
fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "stopped by fault injection")
}

impl Writer<'_> {
    fn write(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        match self.fault {
            Some(Fault::FailWrite(k)) if k == self.count => {
                return Err(io::Error::other("injected write failure"));
            }
            Some(Fault::StopAfter(k)) if k == self.count => return Err(stopped()),
            _ => {}
        }
        if offset < self.old_len {
            let n = (self.old_len - offset).min(data.len() as u64) as usize;
            let mut old = vec![0u8; n];
            self.file.read_exact_at(&mut old, offset)?;
            self.saved.push((offset, old));
        }
        self.count += 1;
        self.bytes += data.len() as u64;
        self.file.write_all_at(data, offset)
    }

    fn rollback(&mut self) -> io::Result<()> {
        while let Some((offset, old)) = self.saved.pop() {
            self.file.write_all_at(&old, offset)?;
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
    let mut w = Writer {
        file,
        path,
        old_len: plan.old_len,
        saved: Vec::new(),
        count: 0,
        bytes: 0,
        fault: opts.fault,
    };
    match run(&mut w, plan, format, opts) {
        Ok(()) => Ok(ApplyReport {
            writes: w.count,
            bytes: w.bytes,
        }),
        Err((offset, source)) => {
            if source.kind() == io::ErrorKind::Interrupted && opts.fault.is_some() {
                return Err(Error::WriteFailed {
                    path: Location(path.to_path_buf()),
                    offset,
                    source,
                });
            }
            match w.rollback() {
                Ok(()) => Err(Error::WriteFailed {
                    path: Location(w.path.to_path_buf()),
                    offset,
                    source,
                }),
                Err(e) => Err(Error::RollbackFailed {
                    path: Location(w.path.to_path_buf()),
                    offset,
                    source,
                    restore: e.to_string(),
                }),
            }
        }
    }
}

fn run(
    w: &mut Writer<'_>,
    plan: &Plan,
    format: Format,
    opts: &ApplyOptions,
) -> Result<(), (u64, io::Error)> {
    let mut phase = None;
    for wr in &plan.writes {
        if opts.sync && phase.is_some_and(|p| p != wr.phase) {
            w.file.sync_data().map_err(|e| (wr.offset, e))?;
        }
        phase = Some(wr.phase);
        match &wr.data {
            Data::Bytes(b) => w.write(wr.offset, b).map_err(|e| (wr.offset, e))?,
            Data::Zero => {
                let mut done = 0;
                while done < wr.len {
                    let n = (wr.len - done).min(CHUNK);
                    w.write(wr.offset + done, &vec![0u8; n as usize])
                        .map_err(|e| (wr.offset + done, e))?;
                    done += n;
                }
            }
            Data::Copy(from) => {
                let mut done = 0;
                let mut buf = vec![0u8; wr.len.min(CHUNK) as usize];
                while done < wr.len {
                    let n = (wr.len - done).min(CHUNK) as usize;
                    w.file
                        .read_exact_at(&mut buf[..n], from + done)
                        .map_err(|e| (from + done, e))?;
                    w.write(wr.offset + done, &buf[..n])
                        .map_err(|e| (wr.offset + done, e))?;
                    done += n as u64;
                }
            }
        }
    }
    let size = format.sym_size() as u64;
    for fx in &plan.symbol_fixups {
        let per = (CHUNK / size).max(1);
        let mut first = 0;
        while first < fx.count {
            let n = (fx.count - first).min(per);
            let at = fx.offset + first * size;
            let mut buf = vec![0u8; (n * size) as usize];
            w.file.read_exact_at(&mut buf, at).map_err(|e| (at, e))?;
            for (off, val) in symbol_fixup_writes(format, &buf, &fx.moves) {
                w.write(at + off, &val).map_err(|e| (at + off, e))?;
            }
            first += n;
        }
    }
    if opts.sync {
        w.file.sync_data().map_err(|e| (0, e))?;
    }
    Ok(())
}
