//! The one error type of the crate.
//!
//! An [`Error`] says what kind of failure it is ([`Error::kind`]), which file it is about
//! ([`Error::path`]) and where in the file ([`Error::offset`]), and displays as one line that
//! names the file, so a binary can print `err.to_string()` as its message. The causes behind it
//! are not part of the API: new ones can come without breaking callers, which match on
//! [`ErrorKind`] (non-exhaustive) rather than on the error itself.
//!
//! Parsing and planning work on bytes and know offsets but not paths; the I/O layer attaches the
//! path with [`Error::with_path`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An operating-system error in the words every message of both binaries uses: the system's
/// description with a lower-case first letter and without the standard library's
/// ` (os error N)` suffix (`no such file or directory`, `permission denied`). The number says
/// nothing a person reading the message needs, and one wording everywhere lets the same failure
/// read the same in every subcommand. An error that is not the system's is shown as it is.
pub fn os_words(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(i)) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    };
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        // "No such file" -> "no such file", but an initialism ("ELF ...") stays as it is.
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text,
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where an error happened: the file (empty for in-memory input).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Location(pub(crate) PathBuf);

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
/// [`ErrorKind::RollbackFailed`], which says so explicitly.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<Repr>);

/// What went wrong, in the terms a caller acts on (an exit code, a retry, a message).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An operating-system call failed (open, read, stat, rename, ...).
    Io,
    /// The file does not start with the ELF magic or has an unknown class or byte order.
    NotElf,
    /// Headers contradict each other or themselves, or a structure extends past the end of the
    /// file.
    Malformed,
    /// A valid ELF feature this crate does not handle.
    Unsupported,
    /// The requested edit cannot be done without risking the binary; nothing was written.
    Refused,
    /// The request itself is invalid (a string with a NUL byte, a symbolic link, ...).
    InvalidRequest,
    /// The file lacks what the request needs, as patchelf reports it with its status 1: it is not
    /// an executable or a shared library (a relocatable object, a core: patchelf's "wrong ELF
    /// type"), or it has no dynamic section (a static program) or no `PT_INTERP` to set or
    /// print. Nothing is wrong with the file; the request does not apply to it.
    Absent,
    /// The file changed between reading and writing; nothing was written (retrying may work).
    Changed,
    /// A write failed; every byte already written was restored, the file is as before.
    WriteFailed,
    /// A write failed and so did restoring the original bytes: the file may be damaged.
    RollbackFailed,
}

/// The causes: private, so that they can change without breaking callers.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Repr {
    /// An operating-system call failed.
    #[error("{path}: {op}: {}", os_words(.source))]
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
    /// A separate debug-info file (`objcopy --only-keep-debug`): its `.dynamic` has no contents.
    #[error("{path}: unsupported: a separate debug-info file: its .dynamic section has no contents (SHT_NOBITS); edit the binary it belongs to")]
    SeparateDebugInfo {
        /// The file.
        path: Location,
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
    /// The file lacks what the request needs (see [`ErrorKind::Absent`]).
    #[error("{path}: {what}")]
    Absent {
        /// The file.
        path: Location,
        /// What it lacks, and what it is instead.
        what: String,
    },
    /// The section header table does not fit in the file (patchelf's words: "section header
    /// table out of bounds"): a file cut short. No loader reads the table, but an edit would have
    /// to drop it, so the file is refused whole rather than changed behind the user's back.
    #[error("{path}: section header table out of bounds: {}, past the end of the file ({file_len:#x} bytes); the file is most likely cut short", table_extent(*.offset, *.count, *.entry_size))]
    SectionTableOutOfBounds {
        /// The file.
        path: Location,
        /// `e_shoff`.
        offset: u64,
        /// How many headers the ELF header says there are; `None` when that count lives in
        /// section 0 (`e_shnum` 0), itself past the end.
        count: Option<u64>,
        /// `e_shentsize`.
        entry_size: u64,
        /// Length of the file.
        file_len: u64,
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
        "{path}: write at offset {offset:#x} failed ({}); the file was restored unchanged",
        os_words(.source)
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
    #[error("{path}: write at offset {offset:#x} failed ({}) and restoring the original bytes failed too ({restore}); the file may be damaged", os_words(.source))]
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

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match &*self.0 {
            Repr::Io { .. } => ErrorKind::Io,
            Repr::NotElf { .. } => ErrorKind::NotElf,
            Repr::Truncated { .. } | Repr::Malformed { .. } => ErrorKind::Malformed,
            Repr::Unsupported { .. } | Repr::SeparateDebugInfo { .. } => ErrorKind::Unsupported,
            Repr::Refused { .. } => ErrorKind::Refused,
            Repr::InvalidRequest { .. } => ErrorKind::InvalidRequest,
            Repr::Absent { .. } => ErrorKind::Absent,
            Repr::SectionTableOutOfBounds { .. } => ErrorKind::Malformed,
            Repr::Changed { .. } => ErrorKind::Changed,
            Repr::WriteFailed { .. } => ErrorKind::WriteFailed,
            Repr::RollbackFailed { .. } => ErrorKind::RollbackFailed,
        }
    }

    /// Whether the file is a separate debug-info file (`objcopy --only-keep-debug`, Nix's
    /// `separateDebugInfo`): its sections keep their headers but not their contents, so it has no
    /// dynamic array to read or edit. The kind is [`ErrorKind::Unsupported`].
    pub fn is_separate_debug_info(&self) -> bool {
        matches!(&*self.0, Repr::SeparateDebugInfo { .. })
    }

    /// The file this error is about; `None` for input held in memory.
    pub fn path(&self) -> Option<&Path> {
        let path = &self.location().0;
        (!path.as_os_str().is_empty()).then_some(path.as_path())
    }

    /// The file offset of the structure or write at fault, when there is one.
    pub fn offset(&self) -> Option<u64> {
        match &*self.0 {
            Repr::Truncated { offset, .. }
            | Repr::Malformed { offset, .. }
            | Repr::SectionTableOutOfBounds { offset, .. }
            | Repr::WriteFailed { offset, .. }
            | Repr::RollbackFailed { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// Sets the file this error is about (for callers that read the bytes themselves, and for
    /// the I/O layer on errors from pure code).
    pub fn with_path(mut self, path: &Path) -> Self {
        self.location_mut().0 = path.to_path_buf();
        self
    }

    /// The message without the file it names: for a reason quoted inside another error about
    /// the same file.
    pub(crate) fn detail(&self) -> String {
        let whole = self.to_string();
        let prefix = format!("{}: ", self.location());
        whole
            .strip_prefix(&prefix)
            .map_or(whole.clone(), str::to_string)
    }

    fn location(&self) -> &Location {
        match &*self.0 {
            Repr::Io { path, .. }
            | Repr::NotElf { path, .. }
            | Repr::Truncated { path, .. }
            | Repr::Malformed { path, .. }
            | Repr::Unsupported { path, .. }
            | Repr::SeparateDebugInfo { path }
            | Repr::Refused { path, .. }
            | Repr::InvalidRequest { path, .. }
            | Repr::Absent { path, .. }
            | Repr::SectionTableOutOfBounds { path, .. }
            | Repr::Changed { path, .. }
            | Repr::WriteFailed { path, .. }
            | Repr::RollbackFailed { path, .. } => path,
        }
    }

    fn location_mut(&mut self) -> &mut Location {
        match &mut *self.0 {
            Repr::Io { path, .. }
            | Repr::NotElf { path, .. }
            | Repr::Truncated { path, .. }
            | Repr::Malformed { path, .. }
            | Repr::Unsupported { path, .. }
            | Repr::SeparateDebugInfo { path }
            | Repr::Refused { path, .. }
            | Repr::InvalidRequest { path, .. }
            | Repr::Absent { path, .. }
            | Repr::SectionTableOutOfBounds { path, .. }
            | Repr::Changed { path, .. }
            | Repr::WriteFailed { path, .. }
            | Repr::RollbackFailed { path, .. } => path,
        }
    }

    pub(crate) fn malformed(offset: u64, what: impl Into<String>) -> Self {
        Repr::Malformed {
            path: Location::default(),
            offset,
            what: what.into(),
        }
        .into()
    }

    pub(crate) fn unsupported(what: impl Into<String>) -> Self {
        Repr::Unsupported {
            path: Location::default(),
            what: what.into(),
        }
        .into()
    }

    pub(crate) fn refused(what: impl Into<String>) -> Self {
        Repr::Refused {
            path: Location::default(),
            what: what.into(),
        }
        .into()
    }

    pub(crate) fn invalid(what: impl Into<String>) -> Self {
        Repr::InvalidRequest {
            path: Location::default(),
            what: what.into(),
        }
        .into()
    }

    pub(crate) fn absent(what: impl Into<String>) -> Self {
        Repr::Absent {
            path: Location::default(),
            what: what.into(),
        }
        .into()
    }

    pub(crate) fn io(path: &Path, op: &'static str, source: io::Error) -> Self {
        Repr::Io {
            path: Location(path.to_path_buf()),
            op,
            source,
        }
        .into()
    }
}

/// Where a section header table claims to be: `N section headers of S bytes at offset O end at
/// E` (or overflow the file offsets, or an unknown count).
pub(crate) fn table_extent(offset: u64, count: Option<u64>, entry_size: u64) -> String {
    let Some(n) = count else {
        return format!(
            "e_shnum is 0, and section header 0 at offset {offset:#x}, which would hold the count, \
             needs {entry_size} bytes"
        );
    };
    match n.checked_mul(entry_size).and_then(|len| len.checked_add(offset)) {
        Some(end) => format!(
            "{n} section headers of {entry_size} bytes at offset {offset:#x} end at {end:#x}"
        ),
        None => format!(
            "{n} section headers of {entry_size} bytes at offset {offset:#x} overflow the file offsets"
        ),
    }
}

impl From<Repr> for Error {
    fn from(repr: Repr) -> Self {
        Error(Box::new(repr))
    }
}

/// What [`crate::Elf::read`] found in a part of the file no loader reads (the section header
/// table, its names, a `.dynamic` section without `PT_DYNAMIC`) and worked around without refusing
/// the file. Kept on [`crate::Elf::warnings`] for the caller to report by its [`WarningKind`];
/// what was ignored stays in the file as it was unless an edit has to drop it, which the edit
/// says ([`crate::plan::dropped`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {problem} ({detail})")]
pub struct Warning {
    /// Whether the user must hear of it, or it is a fact for those who ask.
    pub kind: WarningKind,
    /// The damaged part: `section header table`, `section header N`.
    pub part: String,
    /// What is wrong, in the words patchelf uses for it (`section name offset out of bounds`).
    pub problem: &'static str,
    /// The values found, and what the edit does instead.
    pub detail: String,
}

/// Whether a [`Warning`] is something the user must hear of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// The file is damaged (section headers that cannot all be read, names out of bounds), or
    /// an edit's result is not what tools reading it expect (a `.dynamic` section no loader
    /// reads): said on every run that reads the file (elfpatch's CLI; `stubstrip audit` makes it
    /// a finding).
    Damage,
    /// A fact no loader cares about and nothing the user must act on (a section whose file offset
    /// is not a multiple of its alignment, as NVIDIA's libraries have): shown with `--debug` and
    /// by `stubstrip audit`, never in a build log.
    Harmless,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_words_without_their_number() {
        let missing = io::Error::from_raw_os_error(2);
        assert!(missing.to_string().ends_with("(os error 2)"), "{missing}");
        assert_eq!(os_words(&missing), "no such file or directory");
        assert_eq!(
            os_words(&io::Error::from_raw_os_error(13)),
            "permission denied"
        );
        // Not the system's: as it is, an initialism kept.
        let own = io::Error::other("ELF header cut short");
        assert_eq!(os_words(&own), "ELF header cut short");
        let e = Error::io(Path::new("/x"), "open", io::Error::from_raw_os_error(2));
        assert_eq!(e.to_string(), "/x: open: no such file or directory");
    }
}
