//! The one walk every subcommand starts from: list the files under the named paths
//! ([`crate::walk`]) and classify each one ([`crate::classify`]) from its first bytes, in
//! parallel. The subcommands then read only the loadable objects, and all report the same
//! [`Census`].

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::census::Census;
use crate::classify::{self, FileClass, Head, HEAD_LEN};
use crate::walk::{self, Exclude, WalkError};

/// Every file under the named paths with its class, and the paths that could not be read.
#[derive(Debug, Default)]
pub struct Scan {
    /// Files whose first bytes were read, with their class, sorted.
    pub files: Vec<(PathBuf, FileClass)>,
    /// Paths that could not be listed, and files whose first bytes could not be read.
    pub errors: Vec<WalkError>,
    /// The count.
    pub census: Census,
    /// Named paths that are neither a regular file nor a directory (a FIFO, a device).
    pub not_regular: Vec<PathBuf>,
}

impl Scan {
    /// The diagnostics every report starts with: named paths that were not read, and why.
    pub fn notes(&self) -> String {
        self.not_regular
            .iter()
            .map(|p| {
                format!(
                    "{}: {}: not a regular file or directory; skipped\n",
                    crate::prog::name(),
                    p.display()
                )
            })
            .collect()
    }

    /// The files to read as programs and libraries.
    pub fn objects(&self) -> Vec<PathBuf> {
        self.files
            .iter()
            .filter(|(_, c)| *c == FileClass::Object)
            .map(|(p, _)| p.clone())
            .collect()
    }
}

/// Lists and classifies the files under `roots` (see [`walk::list`] for which files).
pub fn scan(roots: &[PathBuf], exclude: &Exclude) -> Scan {
    let listing = walk::list(roots, exclude);
    let read: Vec<(PathBuf, io::Result<FileClass>)> = listing
        .files
        .into_par_iter()
        .map(|p| {
            let c = class_of(&p);
            (p, c)
        })
        .collect();
    let mut s = Scan {
        errors: listing.errors,
        not_regular: listing.not_regular,
        ..Scan::default()
    };
    let mut unread_files = 0;
    for (path, class) in read {
        match class {
            Ok(c) => s.files.push((path, c)),
            Err(error) => {
                unread_files += 1;
                s.errors.push(WalkError { path, error });
            }
        }
    }
    s.census = Census::new(
        s.files.iter().map(|(_, c)| c),
        s.errors.len(),
        listing.excluded,
    );
    // A file listed but not read was seen all the same.
    s.census.files_seen += unread_files;
    s
}

/// Reads up to `buf.len()` bytes from the start; fewer only at the end of the file.
fn read_head(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The class of the file at `path`: its header, and for a possible loadable object its program
/// and section headers. Only failing to open it or read its first bytes is an error; tables that
/// cannot be read leave the decision to the reader.
pub fn class_of(path: &Path) -> io::Result<FileClass> {
    let mut f = File::open(path)?;
    let mut head = [0u8; HEAD_LEN];
    let n = read_head(&mut f, &mut head)?;
    let h = match classify::parse_header(&head[..n]) {
        Head::NotElf => return Ok(FileClass::NotElf),
        Head::Damaged => return Ok(FileClass::Object),
        Head::Elf(h) => h,
    };
    let table = |(off, len): (u64, u64)| {
        let mut b = vec![0u8; len as usize];
        f.read_exact_at(&mut b, off).map(|()| b).unwrap_or_default()
    };
    let (phdrs, shdrs) = if h.needs_tables() {
        (table(h.phdr_range()), table(h.shdr_range()))
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(classify::classify(&h, &phdrs, &shdrs))
}
