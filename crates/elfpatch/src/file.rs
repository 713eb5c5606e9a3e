//! Files on disk: opening without following symlinks, detecting concurrent changes, editing in
//! place or into another path.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::apply::{apply_plan, ApplyOptions, ApplyReport};
use crate::error::{Error, Location, Repr, Result};
use crate::plan::{plan, Edit, Options, Plan};
use crate::read::Elf;
use crate::refs::Tables;
use crate::source::FileSource;

/// Identity and state of a file when it was opened; compared again before writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: Option<SystemTime>,
}

impl Stamp {
    fn of(m: &fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: m.modified().ok(),
        }
    }
}

/// An ELF file opened for reading or editing.
#[derive(Debug)]
pub struct ElfFile {
    path: PathBuf,
    file: File,
    stamp: Stamp,
    writable: bool,
    elf: Elf,
}

/// What an edit did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The plan that was applied (empty when nothing needed to change).
    pub plan: Plan,
    /// What the applier wrote.
    pub report: ApplyReport,
}

impl Outcome {
    /// Whether the file was written.
    pub fn changed(&self) -> bool {
        !self.plan.is_empty()
    }
}

impl ElfFile {
    /// Opens `path` for reading and parses its headers. Symlinks are not followed.
    pub fn open(path: impl AsRef<Path>) -> Result<ElfFile> {
        ElfFile::open_with(path.as_ref(), false)
    }

    /// Opens `path` for reading and writing and parses its headers. Symlinks are not followed; a
    /// file we may not write is reported before anything else happens.
    pub fn open_rw(path: impl AsRef<Path>) -> Result<ElfFile> {
        ElfFile::open_with(path.as_ref(), true)
    }

    fn open_with(path: &Path, writable: bool) -> Result<ElfFile> {
        let link = fs::symlink_metadata(path).map_err(|e| Error::io(path, "stat", e))?;
        if link.file_type().is_symlink() {
            return Err(Error::from(Repr::InvalidRequest {
                path: Location(path.to_path_buf()),
                what: "is a symbolic link; refusing to follow it (edit its target instead)".into(),
            }));
        }
        if !link.is_file() {
            return Err(Error::from(Repr::InvalidRequest {
                path: Location(path.to_path_buf()),
                what: "is not a regular file".into(),
            }));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| Error::io(path, if writable { "open for writing" } else { "open" }, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, "stat", e))?;
        let stamp = Stamp::of(&meta);
        // The path could have been swapped for a symlink between lstat and open.
        if stamp.dev != link.dev() || stamp.ino != link.ino() {
            return Err(Error::from(Repr::Changed {
                path: Location(path.to_path_buf()),
                what: "replaced while being opened".into(),
            }));
        }
        let elf = Elf::read_file(&file, stamp.len).map_err(|e| e.with_path(path))?;
        Ok(ElfFile {
            path: path.to_path_buf(),
            file,
            stamp,
            writable,
            elf,
        })
    }

    /// The parsed headers.
    pub fn elf(&self) -> &Elf {
        &self.elf
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the tables that refer to the string table (needed to plan edits).
    pub fn tables(&self) -> Result<Tables> {
        Tables::read(
            &FileSource {
                file: &self.file,
                len: self.stamp.len,
            },
            &self.elf,
        )
        .map_err(|e| e.with_path(&self.path))
    }

    /// Plans `edits` without writing anything.
    pub fn plan(&self, edits: &[Edit], opts: &Options) -> Result<Plan> {
        let tables = self.tables()?;
        plan(&self.elf, &tables, edits, opts).map_err(|e| e.with_path(&self.path))
    }

    /// Applies a plan made from this file, in place. Fails without writing if the file changed
    /// since it was opened.
    pub fn apply(&self, plan: &Plan, opts: &ApplyOptions) -> Result<ApplyReport> {
        if plan.is_empty() {
            return Ok(ApplyReport::default());
        }
        if !self.writable {
            return Err(Error::from(Repr::InvalidRequest {
                path: Location(self.path.clone()),
                what: "opened read-only".into(),
            }));
        }
        let now = Stamp::of(
            &self
                .file
                .metadata()
                .map_err(|e| Error::io(&self.path, "stat", e))?,
        );
        if now != self.stamp || plan.old_len != self.stamp.len {
            return Err(Error::from(Repr::Changed {
                path: Location(self.path.clone()),
                what: format!(
                    "length or modification time differ from when it was read ({} → {} bytes)",
                    self.stamp.len, now.len
                ),
            }));
        }
        apply_plan(&self.file, &self.path, plan, self.elf.format, opts)
    }

    /// Plans and applies `edits` in place.
    pub fn edit(&self, edits: &[Edit], opts: &Options) -> Result<Outcome> {
        let plan = self.plan(edits, opts)?;
        let report = self.apply(&plan, &ApplyOptions::default())?;
        Ok(Outcome { plan, report })
    }
}

/// Edits `path` in place: opens it, plans, and writes only what changes. Nothing is written when
/// the edits change nothing, or when any of them cannot be done safely.
pub fn edit_in_place(path: impl AsRef<Path>, edits: &[Edit], opts: &Options) -> Result<Outcome> {
    ElfFile::open_rw(path)?.edit(edits, opts)
}

/// Writes the edited file to `output`, leaving `input` untouched (patchelf's `--output`). The copy
/// is made next to `output` and renamed over it, so `output` is never seen half-written.
pub fn edit_to(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    edits: &[Edit],
    opts: &Options,
) -> Result<Outcome> {
    let (input, output) = (input.as_ref(), output.as_ref());
    let source = ElfFile::open(input)?;
    let plan = source.plan(edits, opts)?;
    let dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.elfpatch-{}", std::process::id()));
    let result = (|| {
        fs::copy(input, &tmp).map_err(|e| Error::io(&tmp, "copy", e))?;
        let copy = ElfFile::open_rw(&tmp)?;
        let report = copy
            .apply(&plan, &ApplyOptions::default())
            .map_err(|e| e.with_path(output))?;
        fs::rename(&tmp, output).map_err(|e| Error::io(output, "rename", e))?;
        Ok(Outcome { plan, report })
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
