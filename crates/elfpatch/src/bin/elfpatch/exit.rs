//! The exit statuses: the one type the program ends with, which library errors map to each, and
//! the words `--help` and the man page print for it, kept side by side so that a number, its
//! meaning and the errors that end with it cannot drift apart.

use std::process::ExitCode;

use elfpatch::ErrorKind;

/// How a run of elfpatch ended: the first failure's status, else 0. The table the stubstrip
/// binary shares where the meanings overlap (0, 2, 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done.
    Done,
    /// 1: the file lacks what was asked (patchelf's status 1).
    Absent,
    /// 2: the command line cannot be used.
    Usage,
    /// 3: a file could not be opened or read, or is not ELF; or stdout could not be written.
    Io,
    /// 4: a malformed file.
    Malformed,
    /// 5: an unsupported file.
    Unsupported,
    /// 6: an edit refused as unsafe.
    Refused,
    /// 7: the file changed while being edited, or a write failed.
    WriteFailed,
    /// 8: an invalid request.
    InvalidRequest,
}

impl Exit {
    /// Every status, in the order the tables list them.
    pub const ALL: [Exit; 9] = [
        Exit::Done,
        Exit::Absent,
        Exit::Usage,
        Exit::Io,
        Exit::Malformed,
        Exit::Unsupported,
        Exit::Refused,
        Exit::WriteFailed,
        Exit::InvalidRequest,
    ];

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::Absent => 1,
            Exit::Usage => 2,
            Exit::Io => 3,
            Exit::Malformed => 4,
            Exit::Unsupported => 5,
            Exit::Refused => 6,
            Exit::WriteFailed => 7,
            Exit::InvalidRequest => 8,
        }
    }

    /// What it means, as `--help` and the man page say it.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::Absent => {
                "the file lacks what was asked, as patchelf reports it with its status 1: not an \
                 executable or a shared library (a relocatable object, a core), no dynamic \
                 section (a static program, a separate debug-info file), no PT_INTERP for \
                 --print-interpreter or --set-interpreter"
            }
            Exit::Usage => "usage error (bad command line)",
            Exit::Io => {
                "a file could not be opened, for reading or for writing, or read: an I/O error \
                 (an @FILE and the --output file included; nothing written), or not an ELF file; \
                 or stdout could not be written (a closed pipe ends the printing quietly instead)"
            }
            Exit::Malformed => {
                "malformed file: headers that contradict each other, a structure past the end of \
                 the file, a section header table out of bounds"
            }
            Exit::Unsupported => "unsupported file",
            Exit::Refused => "edit refused as unsafe (nothing written)",
            Exit::WriteFailed => {
                "the file changed while being edited, or a write failed (restored)"
            }
            Exit::InvalidRequest => {
                "invalid request: a NUL byte or an empty name, a path that is not a regular file, \
                 an output that cannot take an ELF file"
            }
        }
    }

    /// The status a file's failure ends the run with.
    pub fn of_error(e: &elfpatch::Error) -> Exit {
        if e.is_separate_debug_info() {
            // Its dynamic section has no contents: the file lacks what was asked.
            return Exit::Absent;
        }
        match e.kind() {
            ErrorKind::Absent => Exit::Absent,
            ErrorKind::Io | ErrorKind::NotElf => Exit::Io,
            ErrorKind::Malformed => Exit::Malformed,
            ErrorKind::Unsupported => Exit::Unsupported,
            ErrorKind::Refused => Exit::Refused,
            ErrorKind::Changed | ErrorKind::WriteFailed | ErrorKind::RollbackFailed => {
                Exit::WriteFailed
            }
            ErrorKind::InvalidRequest => Exit::InvalidRequest,
            // A kind a later elfpatch adds: a failure all the same, and none that the file
            // merely lacks something.
            _ => Exit::Unsupported,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e.code())
    }
}
