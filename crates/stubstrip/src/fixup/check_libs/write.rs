//! Writing the planned check libraries into the outputs: the only code of `fixup` that writes
//! files besides the fix itself.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::{
    driver_dirs_text, is_nix_base32, store_paths_in, with_propagated, CheckLib, CheckLibSource,
    CheckLibsPlan, CHECK_LIBS_DIR, DRIVER_DIRS_FILE, MAX_COPY_BYTES, PROPAGATED_FILE,
};

/// The store objects of `store_dir`, by hash (the 32 characters before the first `-`).
pub fn store_index(store_dir: &Path) -> BTreeMap<Vec<u8>, PathBuf> {
    let Ok(entries) = fs::read_dir(store_dir) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let b = name.as_encoded_bytes();
            let hashed = b.len() > 33 && b[..32].iter().all(|&c| is_nix_base32(c)) && b[32] == b'-';
            hashed.then(|| (b[..32].to_vec(), e.path()))
        })
        .collect()
}

/// Writing the check libraries failed; the message names the path.
#[derive(Debug, Error)]
#[error("{}: cannot {op}: {}", path.display(), elfpatch::error::os_words(.source))]
pub struct CheckLibsWriteError {
    /// The path.
    pub path: PathBuf,
    /// What was being done.
    pub op: &'static str,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

fn io_err<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(io::Error) -> CheckLibsWriteError + 'a {
    move |source| CheckLibsWriteError {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Writes `content` to `path` unless it holds exactly that already (a rerun changes nothing).
fn write_if_changed(path: &Path, content: &[u8]) -> Result<(), CheckLibsWriteError> {
    if fs::read(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    fs::write(path, content).map_err(io_err(path, "write"))
}

/// Makes `path` a symlink to `target`, or a copy of it, unless it is one already. For a copy,
/// returns the bytes copied.
fn place(path: &Path, source: &CheckLibSource) -> Result<Option<Vec<u8>>, CheckLibsWriteError> {
    let existing = fs::symlink_metadata(path).ok();
    match source {
        CheckLibSource::Link(target) => {
            if existing.is_some() {
                if fs::read_link(path).ok().as_deref() == Some(target.as_path()) {
                    return Ok(None);
                }
                fs::remove_file(path).map_err(io_err(path, "replace"))?;
            }
            symlink(target, path).map_err(io_err(path, "create the symlink"))?;
            Ok(None)
        }
        CheckLibSource::Copy(from) => {
            let bytes = fs::read(from).map_err(io_err(from, "read the stub"))?;
            if existing.is_some_and(|m| m.is_file())
                && fs::read(path).ok().as_deref() == Some(bytes.as_slice())
            {
                return Ok(Some(bytes));
            }
            // Through a temporary name and a rename: the old file may be read-only, and a
            // half-written library must never be left under the real name.
            let tmp = path.with_extension("stubstrip-tmp");
            fs::write(&tmp, &bytes).map_err(io_err(&tmp, "write"))?;
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
                .map_err(io_err(&tmp, "set the mode of"))?;
            fs::rename(&tmp, path).map_err(io_err(path, "rename into place"))?;
            Ok(Some(bytes))
        }
        CheckLibSource::TooBig(..) => Ok(None),
    }
}

/// Writes each plan: the check libraries, the driver directories, and `check_hook` (when given)
/// in `propagated-build-inputs`. An output whose libraries were all too big gets nothing. Returns
/// the lines for the build log: one per output, naming the store paths a copy brings into the
/// output's closure (those in `store_dir` it names, the output itself aside).
pub fn write(
    plans: &[CheckLibsPlan],
    driver_dirs: &[String],
    check_hook: Option<&str>,
    store_dir: &Path,
) -> Result<Vec<String>, CheckLibsWriteError> {
    let mut notes = Vec::new();
    for p in plans {
        for lib in &p.libs {
            if let CheckLibSource::TooBig(stub, n) = &lib.source {
                notes.push(format!(
                    "consumers' checks: {} ({n} bytes) is too big to copy as a check library for {} (at most {MAX_COPY_BYTES}); left out",
                    stub.display(),
                    lib.soname
                ));
            }
        }
        let libs: Vec<&CheckLib> = p
            .libs
            .iter()
            .filter(|l| !matches!(l.source, CheckLibSource::TooBig(..)))
            .collect();
        if libs.is_empty() {
            continue;
        }
        let support = p.root.join("nix-support");
        let mut index = None;
        let dir = support.join(CHECK_LIBS_DIR);
        fs::create_dir_all(&dir).map_err(io_err(&dir, "create"))?;
        let mut said = Vec::new();
        for lib in &libs {
            let copied = place(&dir.join(&lib.soname), &lib.source)?;
            said.push(match (&lib.source, copied) {
                (CheckLibSource::Copy(f), Some(bytes)) => {
                    let index = index.get_or_insert_with(|| store_index(store_dir));
                    let named: Vec<String> = store_paths_in(&bytes, index)
                        .into_iter()
                        .filter(|named| !p.root.starts_with(named))
                        .map(|named| named.display().to_string())
                        .collect();
                    if named.is_empty() {
                        format!("{} (a copy of {})", lib.soname, f.display())
                    } else {
                        format!(
                            "{} (a copy of {}, which names {})",
                            lib.soname,
                            f.display(),
                            named.join(" ")
                        )
                    }
                }
                (CheckLibSource::Link(t), _) => format!("{} -> {}", lib.soname, t.display()),
                _ => unreachable!("too big ones are filtered out above"),
            });
        }
        write_if_changed(
            &support.join(DRIVER_DIRS_FILE),
            driver_dirs_text(driver_dirs).as_bytes(),
        )?;
        if let Some(hook) = check_hook {
            let file = support.join(PROPAGATED_FILE);
            let existing = match fs::read_to_string(&file) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(io_err(&file, "read")(e)),
            };
            if let Some(new) = with_propagated(&existing, hook) {
                fs::write(&file, new).map_err(io_err(&file, "write"))?;
            }
        }
        notes.push(format!(
            "consumers' checks: {}: {}{}",
            dir.display(),
            said.join(", "),
            if check_hook.is_some() {
                ", propagating stubstripCheckHook"
            } else {
                " (no check hook given: nothing propagates it)"
            }
        ));
    }
    Ok(notes)
}
