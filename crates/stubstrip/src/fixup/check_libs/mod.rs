//! Check libraries for the consumers of a fixed package (the design and its costs are in
//! `nix/README-section.md`, "Checks of the packages that depend on a fixed package").
//!
//! Once the fix turns a stub entry into the driver link, a package C that only depends on the
//! fixed package B can no longer load B's library in a sandbox without a driver: nothing provides
//! `libcuda.so.1` there. So `fixup` leaves, in each output of B holding a fixed file,
//! `nix-support/stubstrip-check-libs/<soname>` for every library a fixed file needs that only a
//! removed stub directory provided: a symlink to the stub file when the output references the
//! stub's store path anyway (no new store path in B's closure), else a copy of it (its bytes, no
//! store path). Next to it, `nix-support/stubstrip-driver-dirs` lists where the real library will
//! be (the compat directory, then the driver link), and `nix-support/propagated-build-inputs`
//! gains `stubstripCheckHook`, which puts the directory on `LD_LIBRARY_PATH` for C's checks when
//! none of those directories holds the library in C's sandbox.
//!
//! [`plan`] decides (pure, over a [`FileFacts`]); [`write`](mod@write) is the only code here that writes.

pub mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use super::facts::FileFacts;

/// The directory, under an output's `nix-support`, holding the check libraries.
pub const CHECK_LIBS_DIR: &str = "stubstrip-check-libs";
/// The file, under an output's `nix-support`, listing where the driver's libraries will be.
pub const DRIVER_DIRS_FILE: &str = "stubstrip-driver-dirs";
/// The file stdenv reads the propagated host inputs from.
pub const PROPAGATED_FILE: &str = "propagated-build-inputs";
/// A stub bigger than this is not copied: stubs are small by design (NVIDIA's CUDA 13.0
/// `libcuda.so` has 70,368 bytes), and anything much larger is a real library matched by a
/// `--stub-pattern`, which would bloat every consumer's closure.
pub const MAX_COPY_BYTES: u64 = 1 << 20;

/// One file the fix changed, as the planning sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedFile {
    /// The file.
    pub path: PathBuf,
    /// Its `DT_NEEDED` entries.
    pub needed: Vec<Vec<u8>>,
    /// The stub directories removed from its run paths, in the order they were met.
    pub removed: Vec<String>,
    /// The entries of its run paths after the fix (RUNPATH, then RPATH).
    pub entries: Vec<String>,
}

/// How one check library is provided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckLibSource {
    /// A symlink to this file: the output references its store path anyway (or holds it).
    Link(PathBuf),
    /// A copy of this file: linking to it would add its store path to the output's closure.
    Copy(PathBuf),
    /// Not provided: the file is bigger than [`MAX_COPY_BYTES`] (its size) and not referenced.
    TooBig(PathBuf, u64),
}

/// One library a consumer's checks will need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckLib {
    /// The name the fixed file needs (`libcuda.so.1`).
    pub soname: String,
    /// Where it comes from.
    pub source: CheckLibSource,
    /// The first fixed file that needs it.
    pub needed_by: PathBuf,
}

/// What to write into one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckLibsPlan {
    /// The output (a root given with `--output`).
    pub root: PathBuf,
    /// The libraries, in the order first met.
    pub libs: Vec<CheckLib>,
}

/// What the planning is given besides the fixed files.
#[derive(Clone, Debug)]
pub struct CheckLibsInput<'a> {
    /// The derivation's outputs.
    pub outputs: &'a [PathBuf],
    /// Where the driver's libraries will be at run time: the compat directory (if any), then the
    /// driver link. Never a reason to leave a library out: the consumer's sandbox decides.
    pub driver_dirs: &'a [String],
    /// The Nix store directory (`$NIX_STORE`).
    pub store_dir: &'a Path,
}

/// The store path `path` lies in (`<store>/<hash>-<name>`), if it lies in the store.
pub fn store_path_of(path: &Path, store_dir: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(store_dir).ok()?;
    match rest.components().next()? {
        Component::Normal(name) => Some(store_dir.join(name)),
        _ => None,
    }
}

/// Characters of Nix's base-32 alphabet (store path hashes).
pub(crate) fn is_nix_base32(c: u8) -> bool {
    matches!(c, b'0'..=b'9' | b'a'..=b'd' | b'f'..=b'n' | b'p'..=b's' | b'v'..=b'z')
}

/// The store objects of `index` whose hash occurs anywhere in `bytes`: what Nix's reference
/// scanner finds (it looks for the hash alone; gcc, say, records a source file's base name, hash
/// and all, in the symbol table). A copied stub brings them into the output's closure.
pub fn store_paths_in(bytes: &[u8], index: &BTreeMap<Vec<u8>, PathBuf>) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut run = 0usize;
    for (i, &c) in bytes.iter().enumerate() {
        run = if is_nix_base32(c) { run + 1 } else { 0 };
        if run >= 32 {
            if let Some(p) = index.get(&bytes[i + 1 - 32..=i]) {
                found.insert(p.clone());
            }
        }
    }
    found
}

/// Whether a `DT_NEEDED` value names a library the loader searches for (no `/`) and can be a file
/// name here.
fn searchable(soname: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(soname).ok()?;
    let ok = !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\n', '\0']);
    ok.then_some(s)
}

/// A run path entry as a directory to look in: `$ORIGIN` expanded against the file's directory,
/// entries with other dynamic string tokens (`$LIB`, `$PLATFORM`) and relative ones left out.
fn entry_dir(entry: &str, file: &Path) -> Option<PathBuf> {
    let origin = file.parent()?.to_str()?;
    let e = entry
        .replace("${ORIGIN}", origin)
        .replace("$ORIGIN", origin);
    (e.starts_with('/') && !e.contains('$')).then(|| PathBuf::from(e))
}

/// The output `file` belongs to: the longest of `outputs` it lies under.
fn output_of<'a>(file: &Path, outputs: &'a [PathBuf]) -> Option<&'a PathBuf> {
    outputs
        .iter()
        .filter(|o| file.starts_with(o))
        .max_by_key(|o| o.as_os_str().len())
}

/// Decides the check libraries of each output.
///
/// For each fixed file and each library it needs: if a run path entry other than the driver
/// directories provides it, nothing is needed (a real package has it); otherwise the first removed
/// stub directory holding it provides the stub (resolved through its symlinks). Per output, the
/// first stub met for a name wins. A stub is linked when it lies in the output or its store path
/// is named by a run path entry of a fixed file of that output (so the output references it
/// already), copied when it is not bigger than [`MAX_COPY_BYTES`], else left out.
pub fn plan(fixed: &[FixedFile], s: &CheckLibsInput, host: &dyn FileFacts) -> Vec<CheckLibsPlan> {
    let mut plans: Vec<CheckLibsPlan> = Vec::new();
    let mut found: Vec<(PathBuf, String, PathBuf, PathBuf)> = Vec::new();
    for f in fixed {
        let Some(root) = output_of(&f.path, s.outputs) else {
            continue;
        };
        for soname in f.needed.iter().filter_map(|n| searchable(n)) {
            let elsewhere = f
                .entries
                .iter()
                .filter(|e| !s.driver_dirs.contains(e))
                .filter_map(|e| entry_dir(e, &f.path))
                .any(|d| host.exists(&d.join(soname)));
            if elsewhere {
                continue;
            }
            let stub = f
                .removed
                .iter()
                .filter(|r| r.starts_with('/'))
                .map(|r| Path::new(r).join(soname))
                .find(|p| host.exists(p))
                .and_then(|p| host.canonical(&p));
            let Some(stub) = stub else { continue };
            if !found.iter().any(|(r, n, _, _)| r == root && n == soname) {
                found.push((root.clone(), soname.to_owned(), stub, f.path.clone()));
            }
        }
    }
    for (root, soname, stub, needed_by) in found {
        let referenced: BTreeSet<PathBuf> = fixed
            .iter()
            .filter(|f| output_of(&f.path, s.outputs) == Some(&root))
            .flat_map(|f| f.entries.iter().filter_map(|e| entry_dir(e, &f.path)))
            .filter_map(|d| store_path_of(&d, s.store_dir))
            .collect();
        let linked = stub.starts_with(&root)
            || store_path_of(&stub, s.store_dir).is_some_and(|p| referenced.contains(&p));
        let source = if linked {
            CheckLibSource::Link(stub)
        } else {
            match host.size(&stub) {
                Some(n) if n > MAX_COPY_BYTES => CheckLibSource::TooBig(stub, n),
                _ => CheckLibSource::Copy(stub),
            }
        };
        let lib = CheckLib {
            soname,
            source,
            needed_by,
        };
        match plans.iter_mut().find(|p| p.root == root) {
            Some(p) => p.libs.push(lib),
            None => plans.push(CheckLibsPlan {
                root,
                libs: vec![lib],
            }),
        }
    }
    plans
}

/// The text of `nix-support/stubstrip-driver-dirs`: one directory per line.
pub fn driver_dirs_text(driver_dirs: &[String]) -> String {
    driver_dirs.iter().map(|d| format!("{d}\n")).collect()
}

/// `propagated-build-inputs` with `hook` added as stdenv's `printWords` writes words (each
/// followed by a space), or `None` when it is there already.
pub fn with_propagated(existing: &str, hook: &str) -> Option<String> {
    if existing.split_whitespace().any(|w| w == hook) {
        return None;
    }
    let mut s = existing.to_owned();
    if !s.is_empty() && !s.ends_with(char::is_whitespace) {
        s.push(' ');
    }
    s.push_str(hook);
    s.push(' ');
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A host with these files (size, and where a symlink resolves to).
    #[derive(Default)]
    struct Fake {
        files: HashMap<PathBuf, u64>,
        links: HashMap<PathBuf, PathBuf>,
    }

    impl Fake {
        fn file(mut self, p: &str, size: u64) -> Self {
            self.files.insert(p.into(), size);
            self
        }
        fn link(mut self, p: &str, to: &str) -> Self {
            self.links.insert(p.into(), to.into());
            self
        }
        fn resolve(&self, p: &Path) -> Option<PathBuf> {
            match self.links.get(p) {
                Some(t) => self.resolve(t),
                None => self.files.contains_key(p).then(|| p.to_path_buf()),
            }
        }
    }

    impl FileFacts for Fake {
        fn exists(&self, p: &Path) -> bool {
            self.resolve(p).is_some()
        }
        fn is_dir(&self, _: &Path) -> bool {
            unreachable!("the plan never asks whether a path is a directory")
        }
        fn canonical(&self, p: &Path) -> Option<PathBuf> {
            self.resolve(p)
        }
        fn size(&self, p: &Path) -> Option<u64> {
            self.resolve(p).and_then(|r| self.files.get(&r).copied())
        }
    }

    const CUDART: &str = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-cuda_cudart-12.9.79";
    const STUBS_OUT: &str = "/nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-cuda_cudart-12.8.90-stubs";
    const B: &str = "/nix/store/cccccccccccccccccccccccccccccccc-b";
    const DRIVER: &str = "/run/opengl-driver/lib";

    fn host() -> Fake {
        Fake::default()
            .file(&format!("{CUDART}/lib/stubs/libcuda.so"), 70_368)
            .link(
                &format!("{CUDART}/lib/stubs/libcuda.so.1"),
                &format!("{CUDART}/lib/stubs/libcuda.so"),
            )
            .file(&format!("{CUDART}/lib/libcudart.so.12"), 700_000)
            .file(&format!("{STUBS_OUT}/lib/stubs/libcuda.so"), 70_368)
            .link(
                &format!("{STUBS_OUT}/lib/libcuda.so.1"),
                &format!("{STUBS_OUT}/lib/stubs/libcuda.so"),
            )
            .file(&format!("{DRIVER}/libcuda.so.1"), 90_000_000)
    }

    fn fixed(path: &str, needed: &[&str], removed: &[&str], entries: &[&str]) -> FixedFile {
        FixedFile {
            path: path.into(),
            needed: needed.iter().map(|n| n.as_bytes().to_vec()).collect(),
            removed: removed.iter().map(|s| s.to_string()).collect(),
            entries: entries.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn settings<'a>(outputs: &'a [PathBuf], driver: &'a [String]) -> CheckLibsInput<'a> {
        CheckLibsInput {
            outputs,
            driver_dirs: driver,
            store_dir: Path::new("/nix/store"),
        }
    }

    fn plan_of(files: &[FixedFile], outputs: &[&str]) -> Vec<CheckLibsPlan> {
        let outputs: Vec<PathBuf> = outputs.iter().map(PathBuf::from).collect();
        let driver = vec![DRIVER.to_string()];
        plan(files, &settings(&outputs, &driver), &host())
    }

    #[test]
    fn a_stub_of_an_output_referenced_anyway_is_linked() {
        // B links libcudart: its RUNPATH keeps naming cuda_cudart's output.
        let f = fixed(
            &format!("{B}/lib/libb.so"),
            &["libcudart.so.12", "libcuda.so.1", "libc.so.6"],
            &[&format!("{CUDART}/lib/stubs")],
            &[DRIVER, &format!("{CUDART}/lib")],
        );
        let got = plan_of(&[f], &[B]);
        assert_eq!(
            got,
            vec![CheckLibsPlan {
                root: B.into(),
                libs: vec![CheckLib {
                    soname: "libcuda.so.1".into(),
                    source: CheckLibSource::Link(format!("{CUDART}/lib/stubs/libcuda.so").into()),
                    needed_by: format!("{B}/lib/libb.so").into(),
                }],
            }]
        );
    }

    #[test]
    fn a_stub_of_an_unreferenced_output_is_copied() {
        // Only the driver API: nothing else names cuda_cudart, and the split stubs output never
        // stays referenced.
        for stubs in [format!("{CUDART}/lib/stubs"), format!("{STUBS_OUT}/lib")] {
            let f = fixed(
                &format!("{B}/lib/libb.so"),
                &["libcuda.so.1"],
                &[&stubs],
                &[DRIVER],
            );
            let got = plan_of(&[f], &[B]);
            assert_eq!(got.len(), 1);
            assert!(
                matches!(&got[0].libs[..], [CheckLib { source: CheckLibSource::Copy(p), .. }] if p.ends_with("stubs/libcuda.so")),
                "{got:?}"
            );
        }
    }

    #[test]
    fn a_driver_present_at_fixup_does_not_count_and_other_entries_do() {
        // The driver link holds libcuda.so.1 on this (GPU) builder: consumers may build elsewhere.
        let f = fixed(
            &format!("{B}/lib/libb.so"),
            &["libcuda.so.1"],
            &[&format!("{CUDART}/lib/stubs")],
            &[DRIVER, &format!("{CUDART}/lib")],
        );
        assert_eq!(plan_of(&[f], &[B]).len(), 1);
        // A non-driver entry that provides the library: nothing to do.
        let f = fixed(
            &format!("{B}/lib/libb.so"),
            &["libcuda.so.1"],
            &[&format!("{CUDART}/lib/stubs")],
            &[DRIVER, &format!("{STUBS_OUT}/lib")],
        );
        assert_eq!(plan_of(&[f], &[B]), vec![]);
    }

    #[test]
    fn only_libraries_of_the_removed_directories_that_the_file_needs() {
        let f = fixed(
            &format!("{B}/lib/libb.so"),
            &[
                "libcudart.so.12",
                "libnvidia-ml.so.1",
                "/abs/libx.so",
                "../libcuda.so.1",
            ],
            &[&format!("{CUDART}/lib/stubs"), "relative/stubs"],
            &[DRIVER],
        );
        assert_eq!(plan_of(&[f], &[B]), vec![]);
    }

    #[test]
    fn per_output_first_stub_wins_and_files_outside_the_outputs_are_ignored() {
        let lib = "/nix/store/dddddddddddddddddddddddddddddddd-b-lib";
        let files = [
            fixed(
                &format!("{lib}/lib/liba.so"),
                &["libcuda.so.1"],
                &[&format!("{STUBS_OUT}/lib")],
                &[DRIVER],
            ),
            fixed(
                &format!("{lib}/lib/libb.so"),
                &["libcuda.so.1"],
                &[&format!("{CUDART}/lib/stubs")],
                &[DRIVER, &format!("{CUDART}/lib")],
            ),
            fixed(
                &format!("{B}/bin/app"),
                &["libcuda.so.1"],
                &[&format!("{CUDART}/lib/stubs")],
                &[DRIVER, &format!("{CUDART}/lib")],
            ),
            fixed(
                "/elsewhere/x.so",
                &["libcuda.so.1"],
                &[&format!("{CUDART}/lib/stubs")],
                &[],
            ),
        ];
        let got = plan_of(&files, &[B, lib]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].root, PathBuf::from(lib));
        assert_eq!(got[0].libs.len(), 1);
        // The first file's stub (the split output), and since the second file's RUNPATH names
        // cuda_cudart, not that output, it is copied.
        assert!(
            matches!(&got[0].libs[0].source, CheckLibSource::Copy(p) if p.starts_with(STUBS_OUT))
        );
        assert_eq!(got[1].root, PathBuf::from(B));
        assert!(matches!(&got[1].libs[0].source, CheckLibSource::Link(p) if p.starts_with(CUDART)));
    }

    #[test]
    fn a_stub_inside_the_output_is_linked_and_origin_is_expanded() {
        let h = host()
            .file(&format!("{B}/lib/stubs/libcuda.so"), 100)
            .file(&format!("{B}/lib/libother.so.1"), 100);
        let outputs = vec![PathBuf::from(B)];
        let driver = vec![DRIVER.to_string()];
        let f = fixed(
            &format!("{B}/lib/libb.so"),
            &["libcuda.so.1", "libother.so.1"],
            &[&format!("{B}/lib/stubs")],
            &["$ORIGIN", DRIVER],
        );
        let h = h.link(
            &format!("{B}/lib/stubs/libcuda.so.1"),
            &format!("{B}/lib/stubs/libcuda.so"),
        );
        let got = plan(&[f], &settings(&outputs, &driver), &h);
        assert!(
            matches!(&got[..], [CheckLibsPlan { libs, .. }] if libs.len() == 1 && matches!(&libs[0].source, CheckLibSource::Link(_)))
        );
        // $ORIGIN found libother.so.1, which needed no stub.
        assert_eq!(got[0].libs[0].soname, "libcuda.so.1");
    }

    #[test]
    fn big_stubs_are_not_copied() {
        let h = host().file(
            &format!("{STUBS_OUT}/lib/stubs/libhuge.so"),
            MAX_COPY_BYTES + 1,
        );
        let outputs = vec![PathBuf::from(B)];
        let driver = vec![DRIVER.to_string()];
        let f = fixed(
            &format!("{B}/lib/libb.so"),
            &["libhuge.so"],
            &[&format!("{STUBS_OUT}/lib/stubs")],
            &[DRIVER],
        );
        let got = plan(&[f], &settings(&outputs, &driver), &h);
        assert!(
            matches!(&got[0].libs[0].source, CheckLibSource::TooBig(_, n) if *n == MAX_COPY_BYTES + 1)
        );
    }

    #[test]
    fn store_paths_and_propagated_words() {
        let s = Path::new("/nix/store");
        assert_eq!(
            store_path_of(Path::new(&format!("{CUDART}/lib/stubs/libcuda.so")), s),
            Some(PathBuf::from(CUDART))
        );
        assert_eq!(store_path_of(Path::new("/usr/lib/libcuda.so"), s), None);
        assert_eq!(store_path_of(s, s), None);
        assert_eq!(with_propagated("", "/h"), Some("/h ".into()));
        assert_eq!(with_propagated("/a /b ", "/h"), Some("/a /b /h ".into()));
        assert_eq!(with_propagated("/a", "/h"), Some("/a /h ".into()));
        assert_eq!(with_propagated("/a /h\n", "/h"), None);
        assert_eq!(with_propagated("/a /hh ", "/h"), Some("/a /hh /h ".into()));
        assert_eq!(
            driver_dirs_text(&["/c".into(), DRIVER.into()]),
            format!("/c\n{DRIVER}\n")
        );
    }

    #[test]
    fn store_paths_named_in_bytes_are_found_by_their_hash() {
        let index: BTreeMap<Vec<u8>, PathBuf> = [CUDART, B]
            .iter()
            .map(|p| (p.as_bytes()[11..43].to_vec(), PathBuf::from(p)))
            .collect();
        // A full path, a bare hash and name (as gcc's STT_FILE keeps a source's base name), a hash
        // inside a longer base-32 run (Nix matches it anywhere), and hashes not in the store.
        let bytes = format!(
            "\0{CUDART}/lib\0{}-b.c\0zz{}zz\0{}\0/nix/store/{}-x",
            &B[11..43],
            &CUDART[11..43],
            "e".repeat(32),
            "e".repeat(31)
        );
        let got: Vec<PathBuf> = store_paths_in(bytes.as_bytes(), &index)
            .into_iter()
            .collect();
        assert_eq!(got, vec![PathBuf::from(CUDART), PathBuf::from(B)]);
        assert_eq!(
            store_paths_in(format!("{}-b.c", &B[11..43]).as_bytes(), &index).len(),
            1
        );
        assert!(store_paths_in(b"", &index).is_empty());
        assert!(store_paths_in(&B.as_bytes()[..42], &index).is_empty());
    }
}
