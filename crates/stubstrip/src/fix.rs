//! Per-file work: look at one file, decide with [`crate::classify`], edit with `elfpatch`.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use elfpatch::{edit_in_place, Edit, Elf, Options};
use serde::Serialize;
use thiserror::Error;

use crate::classify::Rule;

/// Which dynamic entry a change is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Tag {
    /// `DT_RUNPATH`.
    #[serde(rename = "RUNPATH")]
    Runpath,
    /// `DT_RPATH`.
    #[serde(rename = "RPATH")]
    Rpath,
}

impl Tag {
    /// The name readelf uses.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Runpath => "RUNPATH",
            Tag::Rpath => "RPATH",
        }
    }
}

/// One run path that changes (or, for `check`, holds stubs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EntryChange {
    /// Which entry.
    pub tag: Tag,
    /// The value before.
    pub old: String,
    /// The value after.
    pub new: String,
    /// Stub directories removed from it.
    pub removed: Vec<String>,
}

/// Why one file could not be read or edited; its message names the file.
#[derive(Debug, Error)]
pub enum FileError {
    /// Opening the file or reading its first bytes failed: whether it is an ELF file is unknown.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file starts with the ELF magic, but elfpatch could not parse or edit it (the message
    /// gives the offset where it applies); nothing was written.
    #[error(transparent)]
    Elf(#[from] elfpatch::Error),
}

impl FileError {
    /// Whether the file is known to be an ELF file (it had the magic).
    pub fn is_elf(&self) -> bool {
        matches!(self, FileError::Elf(_))
    }
}

/// What happened to one file.
#[derive(Debug)]
pub enum Outcome {
    /// Not an ELF file (or too short to tell).
    NotElf,
    /// An ELF file without a dynamic section, or with a run path that needs nothing.
    Clean,
    /// The run paths that changed (or would change, for `check`).
    Changed(Vec<EntryChange>),
    /// The file could not be read or edited; it was left as it was.
    Failed(FileError),
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Opens `path` and parses its headers if it is an ELF file; `Ok(None)` when it is not (after
/// reading 4 bytes). One open per file: this runs on every file of an output.
fn open_elf(path: &Path) -> Result<Option<Elf>, FileError> {
    let io_err = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io_err)?;
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = f.read(&mut magic[got..]).map_err(io_err)?;
        if n == 0 {
            return Ok(None);
        }
        got += n;
    }
    if magic != *b"\x7fELF" {
        return Ok(None);
    }
    let len = f.metadata().map_err(io_err)?.len();
    Elf::read_file(&f, len)
        .map(Some)
        .map_err(|e| FileError::Elf(e.with_path(path)))
}

/// What the rule asks of one file: the report, and the exact edits.
#[derive(Debug, Default)]
pub struct Decision {
    /// Human/JSON view of each change.
    pub changes: Vec<EntryChange>,
    /// The edits, with the exact bytes (paths need not be UTF-8).
    pub edits: Vec<Edit>,
}

/// The changes the rule asks for in `path`, without writing; `Ok(None)` for non-ELF files.
pub fn decide(path: &Path, rule: &Rule) -> Result<Option<Decision>, FileError> {
    let Some(e) = open_elf(path)? else {
        return Ok(None);
    };
    let mut d = Decision::default();
    for (tag, value) in [(Tag::Runpath, e.runpath()), (Tag::Rpath, e.rpath())] {
        let Some(v) = value else { continue };
        let Some(rw) = rule.rewrite(v) else { continue };
        d.changes.push(EntryChange {
            tag,
            old: lossy(v),
            new: lossy(&rw.new),
            removed: rw.removed.iter().map(|r| lossy(r)).collect(),
        });
        d.edits.push(match tag {
            Tag::Runpath => Edit::SetRunpath(rw.new),
            Tag::Rpath => Edit::SetRpath(rw.new),
        });
    }
    Ok(Some(d))
}

/// Applies the rule to one file, writing only when something changes.
pub fn fix(path: &Path, rule: &Rule) -> Outcome {
    let d = match decide(path, rule) {
        Ok(None) => return Outcome::NotElf,
        Ok(Some(d)) if d.edits.is_empty() => return Outcome::Clean,
        Ok(Some(d)) => d,
        Err(e) => return Outcome::Failed(e),
    };
    match edit_in_place(path, &d.edits, &Options::default()) {
        Ok(_) => Outcome::Changed(d.changes),
        Err(e) => Outcome::Failed(FileError::Elf(e)),
    }
}

/// The `DT_NEEDED` entries of one file; `Ok(None)` for non-ELF files.
pub fn needed(path: &Path) -> Result<Option<Vec<Vec<u8>>>, FileError> {
    Ok(open_elf(path)?.map(|e| e.needed().into_iter().map(<[u8]>::to_vec).collect()))
}

/// The stub entries left in one file, for `check`.
pub fn stubs_left(path: &Path, rule: &Rule) -> Result<Option<Vec<(Tag, String)>>, FileError> {
    let Some(e) = open_elf(path)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (tag, value) in [(Tag::Runpath, e.runpath()), (Tag::Rpath, e.rpath())] {
        if let Some(v) = value {
            out.extend(rule.stub_entries(v).into_iter().map(|s| (tag, lossy(s))));
        }
    }
    Ok(Some(out))
}
