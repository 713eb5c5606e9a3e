//! [`CachedFs`]: an [`FsView`] that asks the one it wraps at most once per question, so that a
//! tool resolving many programs over one tree (`stubstrip audit` resolves every file of the tree
//! as if it were the program started, `dlopen`s followed) reads each file once, not once per
//! program that loads it.
//!
//! It decides nothing and reads nothing itself: every answer is the wrapped view's, remembered.
//! The answers are the same as without it as long as the files do not change during the run
//! (the model assumes that anyway: one resolution already reads each object once).
//!
//! What is remembered, per path as asked (the loader's paths: `$ORIGIN` expanded, not
//! canonical):
//!
//! - [`FsView::probe`] (identity and header);
//! - [`FsView::read_elf`], per file *identity* (device and inode, from the remembered probe) when
//!   the path holds a file, so that a library reached under several names (`libfoo.so`,
//!   `libfoo.so.1`, a directory symlink) is read once. A read that fails is not remembered
//!   ([`ReadElfError`] holds an `io::Error`, which cannot be copied): it is asked again, and the
//!   wrapped view fails again the same way. Such files stop the load, so they are rare;
//! - [`FsView::is_dir`], [`FsView::canonical`], and [`FsView::cwd`] (once).
//!
//! Each entry is computed by exactly one thread (the others wait for it): the map's lock is held
//! only to find the entry, never during I/O.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};

use crate::fsview::{Bytes, ElfInfo, FileId, FsView, Probe, ReadElfError};

/// Answers computed once per key, shared between threads.
struct Memo<K, V> {
    slots: Mutex<HashMap<K, Arc<OnceLock<V>>>>,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> Memo<K, V> {
    fn slot(&self, key: K) -> Arc<OnceLock<V>> {
        // A panic in another thread's `compute` does not poison the map (the lock is not held
        // then); a poisoned lock can only come from a panic inside HashMap itself.
        let mut m = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key).or_default().clone()
    }

    fn get(&self, key: K, compute: impl FnOnce() -> V) -> V {
        self.slot(key).get_or_init(compute).clone()
    }

    fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Where a file's dynamic information is remembered: by identity when the path holds a file,
/// else by the path (the wrapped view then decides what the read gives).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum InfoKey {
    File(FileId),
    Path(Bytes),
}

/// An [`FsView`] that remembers the answers of `inner` (see the module documentation).
/// `Sync` when `inner` is: one instance serves every worker thread of a run.
pub struct CachedFs<F> {
    inner: F,
    probes: Memo<Bytes, Probe>,
    // Per key a slot that holds the information once a read succeeded; its own lock makes
    // concurrent readers of one file wait for the first instead of reading it too.
    infos: Mutex<HashMap<InfoKey, Arc<Mutex<Option<ElfInfo>>>>>,
    dirs: Memo<Bytes, bool>,
    canonicals: Memo<Bytes, Option<Bytes>>,
    cwd: OnceLock<Bytes>,
}

/// How many distinct questions a [`CachedFs`] has been asked (each one was passed on once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    /// Paths probed.
    pub probes: usize,
    /// Files (or paths) whose dynamic information was asked for.
    pub elf_reads: usize,
    /// Paths asked whether they are directories.
    pub dirs: usize,
    /// Paths canonicalized.
    pub canonicals: usize,
}

impl<F: FsView> CachedFs<F> {
    /// Wraps `inner`; nothing is asked yet.
    pub fn new(inner: F) -> Self {
        CachedFs {
            inner,
            probes: Memo::default(),
            infos: Mutex::new(HashMap::new()),
            dirs: Memo::default(),
            canonicals: Memo::default(),
            cwd: OnceLock::new(),
        }
    }

    /// The wrapped view.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// How many distinct questions were passed on so far.
    pub fn counts(&self) -> CacheCounts {
        CacheCounts {
            probes: self.probes.len(),
            elf_reads: self.infos.lock().unwrap_or_else(|e| e.into_inner()).len(),
            dirs: self.dirs.len(),
            canonicals: self.canonicals.len(),
        }
    }
}

impl<F: FsView> FsView for CachedFs<F> {
    fn probe(&self, path: &[u8]) -> Probe {
        self.probes.get(path.to_vec(), || self.inner.probe(path))
    }

    fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, ReadElfError> {
        let key = match self.probe(path) {
            Probe::File(id, _) => InfoKey::File(id),
            _ => InfoKey::Path(path.to_vec()),
        };
        let slot = {
            let mut m = self.infos.lock().unwrap_or_else(|e| e.into_inner());
            m.entry(key).or_default().clone()
        };
        let mut held = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(info) = held.as_ref() {
            return Ok(info.clone());
        }
        let info = self.inner.read_elf(path)?;
        *held = Some(info.clone());
        Ok(info)
    }

    fn is_dir(&self, path: &[u8]) -> bool {
        self.dirs.get(path.to_vec(), || self.inner.is_dir(path))
    }

    fn canonical(&self, path: &[u8]) -> Option<Bytes> {
        self.canonicals
            .get(path.to_vec(), || self.inner.canonical(path))
    }

    fn cwd(&self) -> Bytes {
        self.cwd.get_or_init(|| self.inner.cwd()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memfs::{dynamic_info, x86_64_settings, MemFs};
    use crate::resolve::{resolve, Program};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A view that counts what it is asked, over a [`MemFs`]; reading `/l/libbroken.so` fails
    /// (its header is an ELF header: only the read finds the damage).
    #[derive(Default)]
    struct Counting {
        fs: MemFs,
        probes: AtomicUsize,
        reads: AtomicUsize,
        canonicals: AtomicUsize,
    }

    impl FsView for Counting {
        fn probe(&self, path: &[u8]) -> Probe {
            self.probes.fetch_add(1, Ordering::Relaxed);
            self.fs.probe(path)
        }
        fn read_elf(&self, path: &[u8]) -> Result<ElfInfo, ReadElfError> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            match path.ends_with(b"libbroken.so") {
                true => Err(ReadElfError::NotElf),
                false => self.fs.read_elf(path),
            }
        }
        fn is_dir(&self, path: &[u8]) -> bool {
            self.fs.is_dir(path)
        }
        fn canonical(&self, path: &[u8]) -> Option<Bytes> {
            self.canonicals.fetch_add(1, Ordering::Relaxed);
            self.fs.canonical(path)
        }
        fn cwd(&self) -> Bytes {
            self.fs.cwd()
        }
    }

    fn counting() -> Counting {
        let mut fs = MemFs::default();
        fs.lib(
            "/l/libc.so.6",
            ElfInfo {
                soname: Some(b"libc.so.6".to_vec()),
                dynamic: true,
                ..ElfInfo::default()
            },
        )
        .lib("/l/libz.so.1.3", dynamic_info(&["libc.so.6"], None, None))
        .link("/l/libz.so.1", "libz.so.1.3")
        .link("/l/libz.so", "libz.so.1")
        .lib(
            "/l/libcudart.so.12",
            dynamic_info(&["libc.so.6"], Some("$ORIGIN"), None),
        )
        .lib("/l/libcuda.so.1", dynamic_info(&["libc.so.6"], None, None))
        .lib("/l/libbroken.so", ElfInfo::default())
        .data(
            "/l/libdata.so",
            b"not an ELF file, but long enough to be read as one",
        );
        Counting {
            fs,
            ..Counting::default()
        }
    }

    fn programs() -> Vec<Program> {
        let p = |name: &str, needed: &[&str]| Program {
            path: format!("/app/bin/{name}").into_bytes(),
            origin: b"/app/bin".to_vec(),
            info: dynamic_info(needed, Some("/l"), None),
        };
        vec![
            p("a", &["libz.so.1", "libcudart.so.12"]),
            p("b", &["libz.so", "libc.so.6"]),
            p(
                "c",
                &["libdata.so", "libmissing.so", "libbroken.so", "libz.so.1"],
            ),
            p("d", &["libcudart.so.12", "libz.so.1.3"]),
        ]
    }

    #[test]
    fn resolutions_through_the_cache_equal_those_without_it() {
        let plain = counting();
        let cached = CachedFs::new(counting());
        let s = x86_64_settings(None);
        let rounds = 2;
        for _ in 0..rounds {
            for p in programs() {
                let a = resolve(p.clone(), &[b"libcuda.so.1".to_vec()], &s, &plain);
                let b = resolve(p, &[b"libcuda.so.1".to_vec()], &s, &cached);
                assert_eq!(a, b);
            }
        }
        let inner = cached.inner();
        // Every path was probed once through the cache, many times without it.
        let counts = cached.counts();
        assert_eq!(inner.probes.load(Ordering::Relaxed), counts.probes);
        assert!(plain.probes.load(Ordering::Relaxed) > 2 * counts.probes);
        assert_eq!(inner.canonicals.load(Ordering::Relaxed), counts.canonicals);
        // libz, reached under three names, and the libraries every program loads are read
        // once in all (4 files); the broken one fails each time it is asked (once per round).
        assert_eq!(inner.reads.load(Ordering::Relaxed), 4 + rounds);
        assert!(plain.reads.load(Ordering::Relaxed) > 4 * rounds + rounds);
    }

    #[test]
    fn one_cache_serves_many_threads_with_the_same_answers() {
        let cached = CachedFs::new(counting());
        let plain = counting();
        let s = x86_64_settings(None);
        let want: Vec<_> = programs()
            .into_iter()
            .map(|p| resolve(p, &[], &s, &plain))
            .collect();
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for (p, w) in programs().into_iter().zip(&want) {
                        assert_eq!(&resolve(p, &[], &s, &cached), w);
                    }
                });
            }
        });
        assert_eq!(
            cached.inner().probes.load(Ordering::Relaxed),
            cached.counts().probes
        );
    }
}
