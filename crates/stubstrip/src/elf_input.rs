//! Reading the file `explain` or `audit` starts from, through the loader model's view of the disk:
//! its header (what the loader checks) and its dynamic information.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ldso_model::fsview::{ElfInfo, FsView, Probe, ReadElfError};
use ldso_model::hostfs::HostFs;
use ldso_model::target::RawHeader;
use thiserror::Error;

use crate::classify::{FileClass, SkipReason};
use crate::scan;

/// Why the file cannot be read as an ELF file (the caller names the file).
#[derive(Debug, Error)]
pub enum InputError {
    /// It does not start with the ELF magic.
    #[error("not an ELF file")]
    NotElf,
    /// Nothing is there.
    #[error("no such file or directory")]
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
    /// It is an ELF file, but not a loadable object.
    #[error("{}: not a loadable object", .0.nouns().0)]
    Skipped(SkipReason),
    /// Its dynamic information could not be read: elfpatch's message, without the file name
    /// (the caller gives it).
    #[error("{0}")]
    Read(String),
}

/// elfpatch's message for `e` without the file name it starts with: the callers name the file
/// themselves, and an error from bytes read through the loader model's view carries no name, so
/// the message would start with elfpatch's placeholder for an unnamed input.
fn without_file_name(e: &elfpatch::Error) -> String {
    let text = e.to_string();
    let name = e
        .path()
        .map_or_else(|| "<input>".to_string(), |p| p.display().to_string());
    match text.strip_prefix(&name).and_then(|t| t.strip_prefix(": ")) {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

impl From<ReadElfError> for InputError {
    fn from(e: ReadElfError) -> Self {
        match e {
            ReadElfError::Elf(e) => InputError::Read(without_file_name(&e)),
            other => InputError::Read(other.to_string()),
        }
    }
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
/// With `skip_non_loadable`, an ELF file that is not a loadable object is refused as
/// [`InputError::Skipped`], as every subcommand skips it (callers that start from a
/// [`crate::scan::Scan`] know the class already).
pub fn read(path: &Path, skip_non_loadable: bool) -> Result<(RawHeader, ElfInfo), InputError> {
    read_through(path, skip_non_loadable, &HostFs::default())
}

/// [`read`] through `host`, a view of the host's disk without a root (`audit` passes the cache
/// its model reads libraries through, so that a file of the tree that other files load is read
/// once).
pub fn read_through(
    path: &Path,
    skip_non_loadable: bool,
    host: &dyn FsView,
) -> Result<(RawHeader, ElfInfo), InputError> {
    let p = path.as_os_str().as_bytes();
    let header = match host.probe(p) {
        Probe::File(_, h) if h.magic => h,
        Probe::File(..) => return Err(InputError::NotElf),
        Probe::Missing => return Err(InputError::Missing),
        Probe::Directory => return Err(InputError::Directory),
        Probe::Denied => return Err(InputError::Denied),
        Probe::Failed(e) => return Err(InputError::Probe(e)),
    };
    if skip_non_loadable {
        if let Ok(FileClass::Skipped(why)) = scan::class_of(path) {
            return Err(InputError::Skipped(why));
        }
    }
    Ok((header, host.read_elf(p)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_no_placeholder_for_the_file_name() {
        let e = elfpatch::Elf::parse(b"\x7fELF\x02\x01\x01").unwrap_err();
        assert!(e.to_string().starts_with("<input>: "), "{e}");
        let m = InputError::from(ReadElfError::Elf(e)).to_string();
        assert!(
            !m.contains("<input>") && m.starts_with("truncated: "),
            "{m}"
        );
        let named = elfpatch::Elf::parse(b"\x7fELF")
            .unwrap_err()
            .with_path(Path::new("/x/trunc100"));
        let m = InputError::from(ReadElfError::Elf(named)).to_string();
        assert!(!m.contains("/x/trunc100"), "{m}");
    }
}
