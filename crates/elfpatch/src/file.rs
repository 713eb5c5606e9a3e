//! Files on disk: opening without following symlinks, detecting concurrent changes, editing in
//! place or into another path.
//!
//! Opening never follows a symlink (a tree walker must not be led out of its tree); a program that
//! takes paths from its user resolves them first with [`resolve_symlinks`], as the CLI does.
//! [`edit_to`] writes to what its output path names, whatever that is: a new or existing regular
//! file is replaced whole by a rename (old or new contents, never torn) keeping its mode and owner,
//! and anything a rename would destroy (a hard link, a character device, a FIFO) is written
//! through, as patchelf does. A socket, a block device or a directory is refused.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::apply::{apply_plan, ApplyOptions, ApplyReport};
use crate::error::{Error, Location, Repr, Result};
use crate::plan::{plan_with, Dynstr, Edit, Options, Plan};
use crate::read::Elf;
use crate::refs::Tables;
use crate::source::{read_range, FileSource, Prefetched};

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
    ///
    /// Through [`Prefetched::for_elf`], as the headers were read: the symbol, version and hash
    /// tables are a few dozen small reads, which in a small library (stdenv's common case) all
    /// lie in its start or its end, so two reads replace them.
    pub fn tables(&self) -> Result<Tables> {
        let source = FileSource {
            file: &self.file,
            len: self.stamp.len,
        };
        let prefetched =
            Prefetched::for_elf(&source).map_err(|e| Error::io(&self.path, "read", e))?;
        Tables::read(&prefetched, &self.elf).map_err(|e| e.with_path(&self.path))
    }

    /// Plans `edits` without writing anything.
    pub fn plan(&self, edits: &[Edit], opts: &Options) -> Result<Plan> {
        // Only renames rewrite the symbol table, and only these edits its versions: the others
        // need its names, not its bytes.
        let symbols = edits.iter().any(|e| {
            matches!(
                e,
                Edit::RenameDynamicSymbols(_) | Edit::RemoveNeeded(_) | Edit::ClearSymbolVersion(_)
            )
        });
        let source = FileSource {
            file: &self.file,
            len: self.stamp.len,
        };
        let prefetched =
            Prefetched::for_elf(&source).map_err(|e| Error::io(&self.path, "read", e))?;
        let with_path = |e: Error| e.with_path(&self.path);
        let tables = Tables::read_with(&prefetched, &self.elf, symbols).map_err(with_path)?;
        // The string table is read a window at a time as the plan walks it, and whole only
        // where every symbol's name is looked at (the same edits) or the table moves.
        let whole;
        let dynstr = match &self.elf.strtab {
            None => Dynstr::whole(&[]),
            Some(strtab) => match strtab.bytes() {
                Some(bytes) => Dynstr::whole(bytes),
                None if symbols => {
                    whole = read_range(
                        &prefetched,
                        strtab.offset,
                        strtab.size,
                        "dynamic string table",
                    )
                    .map_err(with_path)?;
                    Dynstr::whole(&whole)
                }
                None => {
                    // With the dynamic array's strings, the version records' names are what a
                    // plan looks up by offset (every symbol's name only the edits above).
                    Dynstr::file(&prefetched, strtab, tables.version_refs()).map_err(with_path)?
                }
            },
        };
        plan_with(&self.elf, &tables, &dynstr, edits, opts).map_err(with_path)
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

/// The file header and the program headers of `path` alone ([`crate::read::headers`]): what a
/// file [`ElfFile::open`] refuses as a separate debug-info file
/// ([`Error::is_separate_debug_info`]) can still answer. Nothing else is read; a symlink is not
/// followed.
pub fn read_headers(
    path: impl AsRef<Path>,
) -> Result<(
    crate::Format,
    crate::format::Header,
    Vec<crate::format::Phdr>,
)> {
    let path = path.as_ref();
    let link = fs::symlink_metadata(path).map_err(|e| Error::io(path, "stat", e))?;
    if !link.is_file() {
        return Err(Error::from(Repr::InvalidRequest {
            path: Location(path.to_path_buf()),
            what: "is not a regular file".into(),
        }));
    }
    let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
    let source = FileSource {
        file: &file,
        len: link.len(),
    };
    crate::read::headers(&source).map_err(|e| e.with_path(path))
}

/// How many symlinks [`resolve_symlinks`] follows before giving up (the kernel's `ELOOP` limit).
const MAX_SYMLINKS: usize = 40;

/// Follows `path` while it names a symlink and returns the path it ends at, which need not exist
/// (a dangling link's target is where a new file would be created, as `open(O_CREAT)` does).
/// Only the last component is resolved; a relative link target is taken from the link's directory.
pub fn resolve_symlinks(path: impl AsRef<Path>) -> Result<PathBuf> {
    let start = path.as_ref();
    let mut path = start.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&path).map_err(|e| Error::io(&path, "readlink", e))?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path),
            Err(e) => return Err(Error::io(&path, "stat", e)),
        }
    }
    Err(Error::from(Repr::InvalidRequest {
        path: Location(start.to_path_buf()),
        what: format!("more than {MAX_SYMLINKS} levels of symbolic links"),
    }))
}

/// What [`edit_to`] does with its output path: a pure decision on what `lstat` said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// It is the input itself (same inode): an edit in place.
    Input,
    /// Nothing there: a new file (mode `0777` less the umask, as patchelf creates it), renamed
    /// into place.
    New,
    /// A regular file with one name: replaced by a rename, keeping its mode and owner.
    Replace,
    /// Something a rename would break (a regular file with other names, a character device, a
    /// FIFO): opened and written, as patchelf does.
    WriteThrough,
    /// What no ELF file should be written to.
    Refuse(&'static str),
}

fn classify(output: Option<&fs::Metadata>, input: &Stamp) -> Target {
    let Some(m) = output else {
        return Target::New;
    };
    let t = m.file_type();
    if t.is_file() {
        if m.dev() == input.dev && m.ino() == input.ino {
            Target::Input
        } else if m.nlink() > 1 {
            Target::WriteThrough
        } else {
            Target::Replace
        }
    } else if t.is_char_device() || t.is_fifo() {
        Target::WriteThrough
    } else if t.is_socket() {
        Target::Refuse("is a socket; an ELF file cannot be written to it")
    } else if t.is_block_device() {
        Target::Refuse("is a block device; refusing to write an ELF file over a disk")
    } else if t.is_dir() {
        Target::Refuse("is a directory")
    } else {
        Target::Refuse("is not a file an ELF file can be written to")
    }
}

/// A name no other call of this process uses, for files made next to the output.
fn unique_suffix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "elfpatch-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes the edited file to `output`, leaving `input` untouched (patchelf's `--output`).
///
/// `input` is opened as [`ElfFile::open`] does (a symlink is refused); `output` is followed through
/// symlinks ([`resolve_symlinks`]) and then:
/// - absent: the result is made next to it and renamed into place, with mode `0777` less the
///   umask (what patchelf creates);
/// - a regular file with one name: replaced by a rename (never seen half-written), keeping its
///   mode and owner; where the owner cannot be kept or its directory not written (not root), it
///   is written through instead;
/// - a regular file with several names, a character device or a FIFO: written through, so every
///   name sees the result and the node itself stays (patchelf does the same);
/// - the input itself: edited in place, as [`edit_in_place`] does;
/// - a socket, block device or directory: refused, nothing written.
pub fn edit_to(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
    edits: &[Edit],
    opts: &Options,
) -> Result<Outcome> {
    let input = input.as_ref();
    let output = resolve_symlinks(output)?;
    let source = ElfFile::open(input)?;
    let plan = source.plan(edits, opts)?;
    let existing = match fs::symlink_metadata(&output) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(&output, "stat", e)),
    };
    match classify(existing.as_ref(), &source.stamp) {
        Target::Input => {
            drop(source);
            edit_in_place(input, edits, opts)
        }
        Target::Refuse(what) => Err(Error::from(Repr::InvalidRequest {
            path: Location(output),
            what: what.into(),
        })),
        Target::New => replace(&source, plan, &output, None),
        Target::Replace => replace(&source, plan, &output, existing.as_ref()),
        Target::WriteThrough => write_through(&source, plan, &output),
    }
}

/// Makes the edited copy in `staged`: the input's bytes as they were parsed (a change since is
/// refused), then the plan applied to them.
fn stage(source: &ElfFile, plan: &Plan, staged: &File, output: &Path) -> Result<ApplyReport> {
    let mut reader = &source.file;
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(&source.path, "seek", e))?;
    let mut writer = staged;
    let copied = io::copy(&mut reader.take(source.stamp.len), &mut writer)
        .map_err(|e| Error::io(output, "copy", e))?;
    let now = source
        .file
        .metadata()
        .map_err(|e| Error::io(&source.path, "stat", e))?;
    if copied != source.stamp.len || Stamp::of(&now) != source.stamp {
        return Err(Error::from(Repr::Changed {
            path: Location(source.path.clone()),
            what: "it changed while being copied".into(),
        }));
    }
    apply_plan(
        staged,
        output,
        plan,
        source.elf.format,
        &ApplyOptions::default(),
    )
    .map_err(|e| e.with_path(output))
}

/// The new file is made next to `output` and renamed over it; `keep` is what it replaces, whose
/// owner and mode the new file takes.
fn replace(
    source: &ElfFile,
    plan: Plan,
    output: &Path,
    keep: Option<&fs::Metadata>,
) -> Result<Outcome> {
    let dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}", unique_suffix()));
    let staged = match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        // Less the umask, as patchelf's open(O_CREAT, 0777) makes a new output.
        .mode(0o777)
        .open(&tmp)
    {
        Ok(f) => f,
        // A writable file in a directory we may not write: write through, as patchelf does.
        Err(e) if keep.is_some() && e.kind() == io::ErrorKind::PermissionDenied => {
            return write_through(source, plan, output)
        }
        Err(e) => return Err(Error::io(output, "create a file next to it", e)),
    };
    let result = (|| -> Result<Option<ApplyReport>> {
        if let Some(old) = keep {
            let mine = staged.metadata().map_err(|e| Error::io(&tmp, "stat", e))?;
            if (mine.uid(), mine.gid()) != (old.uid(), old.gid())
                && std::os::unix::fs::fchown(&staged, Some(old.uid()), Some(old.gid())).is_err()
            {
                // Not allowed to give the file its owner back: write through, as patchelf does.
                return Ok(None);
            }
            // After chown, which clears set-user-ID bits.
            staged
                .set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
                .map_err(|e| Error::io(&tmp, "chmod", e))?;
        }
        let report = stage(source, &plan, &staged, output)?;
        fs::rename(&tmp, output).map_err(|e| Error::io(output, "rename", e))?;
        Ok(Some(report))
    })();
    if !matches!(result, Ok(Some(_))) {
        let _ = fs::remove_file(&tmp);
    }
    match result? {
        Some(report) => Ok(Outcome { plan, report }),
        None => write_through(source, plan, output),
    }
}

/// Writes the edited file into the existing `output` without replacing it: staged in an unnamed
/// temporary file first (so a refused or failed edit writes nothing to `output`), then copied.
fn write_through(source: &ElfFile, plan: Plan, output: &Path) -> Result<Outcome> {
    let tmp = std::env::temp_dir().join(unique_suffix());
    let staged = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| Error::io(&tmp, "create", e))?;
    // Unnamed from here on: nothing is left behind, whatever happens.
    fs::remove_file(&tmp).map_err(|e| Error::io(&tmp, "unlink", e))?;
    let report = stage(source, &plan, &staged, output)?;
    // Opening a FIFO waits for a reader, as it does for patchelf.
    let out = OpenOptions::new()
        .write(true)
        .open(output)
        .map_err(|e| Error::io(output, "open for writing", e))?;
    let is_file = out
        .metadata()
        .map_err(|e| Error::io(output, "stat", e))?
        .is_file();
    let mut reader = &staged;
    reader
        .seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(output, "seek", e))?;
    let mut writer = &out;
    let written = io::copy(&mut reader, &mut writer).map_err(|e| Error::io(output, "write", e))?;
    if is_file {
        // Written over the old contents first, cut to length after: never shorter than needed.
        out.set_len(written)
            .map_err(|e| Error::io(output, "truncate", e))?;
    }
    Ok(Outcome { plan, report })
}
