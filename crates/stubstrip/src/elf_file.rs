//! Reading one file for `fix`, `check` and `fixup`: whether it is ELF, its run paths and
//! `DT_NEEDED` entries. The only place these subcommands open a file to read it (one open per
//! file: this runs on every file of an output).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use elfpatch::note::ResolutionCache;
use elfpatch::source::FileSource;
use elfpatch::Elf;
use serde::Serialize;
use thiserror::Error;

/// Which dynamic entry a run path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RunpathTag {
    /// `DT_RUNPATH`.
    #[serde(rename = "RUNPATH")]
    Runpath,
    /// `DT_RPATH`.
    #[serde(rename = "RPATH")]
    Rpath,
    /// The resolution-cache note (`.note.nixos.ldcache`), which the loader patched by nixpkgs
    /// reads before the run path.
    #[serde(rename = "NOTE")]
    Note,
}

impl RunpathTag {
    /// The name readelf uses.
    pub fn name(self) -> &'static str {
        match self {
            RunpathTag::Runpath => "RUNPATH",
            RunpathTag::Rpath => "RPATH",
            RunpathTag::Note => "NOTE",
        }
    }
}

/// Why one file could not be read or edited; its message names the file.
#[derive(Debug, Error)]
pub enum FileError {
    /// Opening the file or reading its first bytes failed: whether it is an ELF file is unknown.
    #[error("{}: {}", path.display(), elfpatch::error::os_words(.source))]
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

/// The run paths `elf` has, `DT_RUNPATH` first: what the decisions of `fix` and `check` take.
pub fn run_paths(elf: &Elf) -> Vec<(RunpathTag, &[u8])> {
    [
        (RunpathTag::Runpath, elf.runpath()),
        (RunpathTag::Rpath, elf.rpath()),
    ]
    .into_iter()
    .filter_map(|(tag, value)| value.map(|v| (tag, v)))
    .collect()
}

/// The damage elfpatch found reading `elf` (a section header table cut short, which every edit
/// refuses; names out of bounds, which it works around): what `check` and `fix` say they saw,
/// one line each. Facts no loader cares about (alignment) are `audit`'s, not theirs.
pub fn damage(elf: &Elf) -> Vec<String> {
    elf.warnings
        .iter()
        .filter(|w| w.kind == elfpatch::WarningKind::Damage)
        .map(ToString::to_string)
        .collect()
}

/// Opens `path` and parses its headers if it is an ELF file; `Ok(None)` when it is not (after
/// reading 4 bytes).
pub fn open(path: &Path) -> Result<Option<Elf>, FileError> {
    Ok(open_file(path)?.map(|(_, elf)| elf))
}

/// A file's resolution-cache note: where it is, and what it says.
#[derive(Clone, Debug)]
pub struct Note {
    /// File offset of the note.
    pub offset: u64,
    /// Its entries.
    pub cache: ResolutionCache,
}

/// Like [`open`], with the file's resolution-cache note (read through the same open file,
/// only its note segments and sections). A note that cannot be parsed is an error naming the
/// file and the offset.
pub fn open_noted(path: &Path) -> Result<Option<(Elf, Option<Note>)>, FileError> {
    let Some((f, elf)) = open_file(path)? else {
        return Ok(None);
    };
    let source = FileSource {
        file: &f,
        len: elf.file_len,
    };
    let with_path = |e: elfpatch::Error| FileError::Elf(e.with_path(path));
    let note = match elfpatch::note::find(&source, &elf).map_err(with_path)? {
        Some(n) => Some(Note {
            offset: n.offset,
            cache: n.cache().map_err(with_path)?,
        }),
        None => None,
    };
    Ok(Some((elf, note)))
}

fn open_file(path: &Path) -> Result<Option<(File, Elf)>, FileError> {
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
        .map(|elf| Some((f, elf)))
        .map_err(|e| FileError::Elf(e.with_path(path)))
}

/// The `DT_NEEDED` entries of `path`; `Ok(None)` when it is not an ELF file.
pub fn needed(path: &Path) -> Result<Option<Vec<Vec<u8>>>, FileError> {
    Ok(open(path)?.map(|e| e.needed().into_iter().map(<[u8]>::to_vec).collect()))
}

/// Applies `edits` to `path` in place (elfpatch writes only the bytes that change, or nothing).
pub fn edit(path: &Path, edits: &[elfpatch::Edit]) -> Result<(), FileError> {
    elfpatch::edit_in_place(path, edits, &elfpatch::Options::default())
        .map(|_| ())
        .map_err(FileError::Elf)
}
