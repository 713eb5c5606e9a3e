//! Reading the file `explain` or `audit` starts from, through the loader model's view of the disk:
//! its header (what the loader checks) and its dynamic information.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ldso_model::fsview::{ElfInfo, FsView, Probe, ReadElfError};
use ldso_model::hostfs::HostFs;
use ldso_model::target::RawHeader;
use thiserror::Error;

/// Why the file cannot be read as an ELF file (the caller names the file).
#[derive(Debug, Error)]
pub enum InputError {
    /// It does not start with the ELF magic.
    #[error("not an ELF file")]
    NotElf,
    /// Nothing is there.
    #[error("no such file")]
    Missing,
    /// It is a directory.
    #[error("is a directory")]
    Directory,
    /// Opening it was refused.
    #[error("permission denied")]
    Denied,
    /// Opening or reading its first bytes failed otherwise.
    #[error("{0}")]
    Probe(String),
    /// Its dynamic information could not be read.
    #[error(transparent)]
    Read(#[from] ReadElfError),
}

impl InputError {
    /// Whether the path holds no ELF file at all (rather than one that cannot be read).
    pub fn is_not_elf(&self) -> bool {
        matches!(
            self,
            InputError::NotElf | InputError::Missing | InputError::Directory
        )
    }
}

/// The header and dynamic information of the file at `path` on the host (not inside a sysroot).
pub fn read(path: &Path) -> Result<(RawHeader, ElfInfo), InputError> {
    let host = HostFs::default();
    let p = path.as_os_str().as_bytes();
    let header = match host.probe(p) {
        Probe::File(_, h) if h.magic => h,
        Probe::File(..) => return Err(InputError::NotElf),
        Probe::Missing => return Err(InputError::Missing),
        Probe::Directory => return Err(InputError::Directory),
        Probe::Denied => return Err(InputError::Denied),
        Probe::Failed(e) => return Err(InputError::Probe(e)),
    };
    Ok((header, host.read_elf(p)?))
}
