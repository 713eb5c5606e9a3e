//! The run path edits: what `--set-rpath`, `--add-rpath`, `--remove-rpath` and `--shrink-rpath`
//! make of a file's DT_RUNPATH and DT_RPATH, as patchelf 0.19.3 does.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use elfpatch::{Edit, Elf, ElfFile};

use crate::options::Args;

/// The run path as patchelf reports it: DT_RUNPATH when present, else DT_RPATH.
pub fn current_rpath(e: &Elf) -> Option<&[u8]> {
    e.runpath().or_else(|| e.rpath())
}

/// Whether `dir` holds `lib`, an ELF file of the same class and machine (what the loader would
/// accept), for `--shrink-rpath`.
fn dir_provides(dir: &[u8], lib: &[u8], like: &Elf) -> bool {
    let mut p = dir.to_vec();
    p.push(b'/');
    p.extend_from_slice(lib);
    let path = Path::new(OsStr::from_bytes(&p));
    match ElfFile::open(path) {
        Ok(f) => f.elf().machine() == like.machine() && f.elf().class() == like.class(),
        Err(_) => {
            // A symlink (libfoo.so.1 -> libfoo.so.1.2) is the usual case: follow it here, we only read.
            std::fs::canonicalize(path)
                .ok()
                .and_then(|t| ElfFile::open(t).ok())
                .is_some_and(|f| {
                    f.elf().machine() == like.machine() && f.elf().class() == like.class()
                })
        }
    }
}

/// patchelf's `--shrink-rpath`: keep relative entries, and absolute ones (allowed by the
/// prefixes) that provide a needed library not found in an earlier entry.
fn shrink(e: &Elf, rpath: &[u8], prefixes: &[Vec<u8>]) -> Vec<u8> {
    let needed: Vec<Vec<u8>> = e.needed().into_iter().map(<[u8]>::to_vec).collect();
    let mut found = vec![false; needed.len()];
    let mut keep: Vec<&[u8]> = Vec::new();
    for dir in rpath.split(|&b| b == b':').filter(|d| !d.is_empty()) {
        if dir[0] != b'/' {
            keep.push(dir);
            continue;
        }
        if !prefixes.is_empty() && !prefixes.iter().any(|p| dir.starts_with(p)) {
            continue;
        }
        let mut useful = false;
        for (i, lib) in needed.iter().enumerate() {
            if !found[i] && dir_provides(dir, lib, e) {
                found[i] = true;
                useful = true;
            }
        }
        if useful {
            keep.push(dir);
        }
    }
    keep.join(&b':')
}

/// The edits of the run path the command line asks for, in patchelf's terms (`--force-rpath`
/// writes DT_RPATH, a file with DT_RPATH alone has it turned into DT_RUNPATH).
pub fn rpath_edits(a: &Args, e: &Elf) -> Vec<Edit> {
    let current = current_rpath(e).map(<[u8]>::to_vec);
    let new = if a.shrink_rpath {
        match &current {
            Some(c) => shrink(e, c, &a.allowed_prefixes),
            None => return Vec::new(),
        }
    } else if a.remove_rpath {
        return vec![Edit::RemoveRpath, Edit::RemoveRunpath];
    } else if let Some(s) = &a.set_rpath {
        s.clone()
    } else if let Some(add) = &a.add_rpath {
        match current.as_deref() {
            Some(c) if !c.is_empty() => [c, b":".as_slice(), add].concat(),
            _ => add.clone(),
        }
    } else {
        return Vec::new();
    };
    let (has_rpath, has_runpath) = (e.rpath().is_some(), e.runpath().is_some());
    if a.force_rpath {
        let mut v = Vec::new();
        if has_runpath {
            v.push(Edit::RunpathToRpath);
        }
        v.push(Edit::SetRpath(new));
        v
    } else if has_rpath && !has_runpath {
        vec![Edit::RpathToRunpath, Edit::SetRunpath(new)]
    } else if has_rpath {
        // patchelf points both entries at the new string.
        vec![Edit::SetRunpath(new.clone()), Edit::SetRpath(new)]
    } else {
        vec![Edit::SetRunpath(new)]
    }
}
