//! The one error type of the crate.
//!
//! Parsing and planning work on bytes and know offsets but not paths; the I/O layer attaches the
//! path with [`Error::with_path`]. Every variant names the file, so a binary can print
//! `err.to_string()` as its one-line message.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where an error happened: the file (empty for in-memory input).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location(pub PathBuf);

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.as_os_str().is_empty() {
            f.write_str("<input>")
        } else {
            write!(f, "{}", self.0.display())
        }
    }
}

/// Everything that can go wrong reading, planning or applying an edit.
///
/// After any error the input file is byte-identical to what it was before the call, except for
/// [`Error::RollbackFailed`], which says so explicitly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: Location,
        /// What was being done (`open`, `read`, ...).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file does not start with the ELF magic or has an unknown class/byte order.
    #[error("{path}: not an ELF file ({what})")]
    NotElf {
        /// The file.
        path: Location,
        /// What was found instead.
        what: String,
    },
    /// A structure extends past the end of the file.
    #[error("{path}: truncated: {what} at offset {offset:#x} needs {needed} bytes, the file has {file_len}")]
    Truncated {
        /// The file.
        path: Location,
        /// What was being read.
        what: String,
        /// File offset of the structure.
        offset: u64,
        /// Bytes the structure needs from `offset`.
        needed: u64,
        /// Length of the file.
        file_len: u64,
    },
    /// Headers contradict each other or themselves.
    #[error("{path}: inconsistent headers at offset {offset:#x}: {what}")]
    Malformed {
        /// The file.
        path: Location,
        /// File offset of the offending structure.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A valid ELF feature this crate does not handle.
    #[error("{path}: unsupported: {what}")]
    Unsupported {
        /// The file.
        path: Location,
        /// What is not supported.
        what: String,
    },
    /// The requested edit cannot be done without risking the binary; nothing was written.
    #[error("{path}: refused: {what}")]
    Refused {
        /// The file.
        path: Location,
        /// Why.
        what: String,
    },
    /// The request itself is invalid (a string with a NUL byte, a missing NEEDED, ...).
    #[error("{path}: {what}")]
    InvalidRequest {
        /// The file.
        path: Location,
        /// What is wrong with the request.
        what: String,
    },
    /// The file changed between reading and writing; nothing was written.
    #[error("{path}: file changed while it was being edited ({what}); nothing was written")]
    Changed {
        /// The file.
        path: Location,
        /// What changed.
        what: String,
    },
    /// A write failed; every byte already written was restored, the file is as before.
    #[error(
        "{path}: write at offset {offset:#x} failed ({source}); the file was restored unchanged"
    )]
    WriteFailed {
        /// The file.
        path: Location,
        /// Offset of the failed write.
        offset: u64,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A write failed and so did restoring the original bytes: the file may be damaged.
    #[error("{path}: write at offset {offset:#x} failed ({source}) and restoring the original bytes failed too ({restore}); the file may be damaged")]
    RollbackFailed {
        /// The file.
        path: Location,
        /// Offset of the failed write.
        offset: u64,
        /// The underlying error.
        #[source]
        source: io::Error,
        /// Why restoring failed.
        restore: String,
    },
}

/// A coarse classification of [`Error`], for exit codes and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`Error::Io`].
    Io,
    /// [`Error::NotElf`].
    NotElf,
    /// [`Error::Truncated`] and [`Error::Malformed`].
    Malformed,
    /// [`Error::Unsupported`].
    Unsupported,
    /// [`Error::Refused`].
    Refused,
    /// [`Error::InvalidRequest`].
    InvalidRequest,
    /// [`Error::Changed`], [`Error::WriteFailed`] and [`Error::RollbackFailed`].
    WriteFailed,
}

impl Error {
    /// The classification of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::NotElf { .. } => ErrorKind::NotElf,
            Error::Truncated { .. } | Error::Malformed { .. } => ErrorKind::Malformed,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Refused { .. } => ErrorKind::Refused,
            Error::InvalidRequest { .. } => ErrorKind::InvalidRequest,
            Error::Changed { .. } | Error::WriteFailed { .. } | Error::RollbackFailed { .. } => {
                ErrorKind::WriteFailed
            }
        }
    }

    /// Sets the file this error is about (used by the I/O layer on errors from pure code).
    pub fn with_path(mut self, p: &Path) -> Self {
        let slot = match &mut self {
            Error::Io { path, .. }
            | Error::NotElf { path, .. }
            | Error::Truncated { path, .. }
            | Error::Malformed { path, .. }
            | Error::Unsupported { path, .. }
            | Error::Refused { path, .. }
            | Error::InvalidRequest { path, .. }
            | Error::Changed { path, .. }
            | Error::WriteFailed { path, .. }
            | Error::RollbackFailed { path, .. } => path,
        };
        slot.0 = p.to_path_buf();
        self
    }

    pub(crate) fn malformed(offset: u64, what: impl Into<String>) -> Self {
        Error::Malformed {
            path: Location::default(),
            offset,
            what: what.into(),
        }
    }

    pub(crate) fn unsupported(what: impl Into<String>) -> Self {
        Error::Unsupported {
            path: Location::default(),
            what: what.into(),
        }
    }

    pub(crate) fn refused(what: impl Into<String>) -> Self {
        Error::Refused {
            path: Location::default(),
            what: what.into(),
        }
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Error::InvalidRequest {
            path: Location::default(),
            what: what.into(),
        }
    }

    pub(crate) fn io(path: &Path, op: &'static str, source: io::Error) -> Self {
        Error::Io {
            path: Location(path.to_path_buf()),
            op,
            source,
        }
    }
}
