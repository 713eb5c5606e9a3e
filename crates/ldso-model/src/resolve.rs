//! A model of how glibc's `ld.so` finds the libraries of a program, without running it.
//!
//! Follows `_dl_map_object` and `_dl_map_object_deps` (`elf/dl-load.c`, `elf/dl-deps.c`):
//!
//! - objects are visited breadth-first from the program; each `DT_NEEDED` of an object is looked
//!   up with that object as the *requester*, and every library is loaded once;
//! - a name that matches an object loaded earlier (the name it was requested under, its path, or
//!   its `DT_SONAME`) is that object; so is a file found again under another name (same device
//!   and inode);
//! - a name containing `/` is opened as it is (after `$ORIGIN`/`$LIB`/`$PLATFORM` expansion);
//! - any other name is searched in order: `DT_RPATH` of the requester, of the object that loaded
//!   it, and so on up to the program, and then of the program (all only when the requester has
//!   no `DT_RUNPATH`; an object with both uses only its `DT_RUNPATH`); `LD_LIBRARY_PATH` (`:` or
//!   `;` separated, `$ORIGIN` meaning the program's directory); the requester's resolution-cache
//!   note (when [`LoaderSettings::read_ld_cache_note`]: see below); `DT_RUNPATH` of the requester
//!   only; the `ld.so.cache` entry for the name (skipped when the requester has
//!   `DF_1_NODEFLIB` and the entry lies in a default directory); the default directories (unless
//!   the requester has `DF_1_NODEFLIB`);
//! - in each list, empty elements mean the current directory, elements whose substitution is
//!   unknown are dropped, and repeated directories are tried once;
//! - a candidate of the other ELF class or another machine is passed over; a file that is not ELF
//!   at all, has the other byte order, or cannot be read stops the load.
//!
//! The resolution-cache note (`.note.nixos.ldcache`, written by patchelf 0.19's
//! `--build-resolution-cache`) is read as nixpkgs PR #535735's patched glibc reads it: after
//! `LD_LIBRARY_PATH` and before `DT_RUNPATH`, the requester's entry for the name as written is
//! tried hint by hint, in order: `=<path>` is opened like a name with a `/` (a library resolved
//! when the note was written; if it is gone the next hint is tried), `?<dir>` is searched like a
//! run-path directory (with the requester's `$ORIGIN`). When no hint loads, the search goes on
//! with the run path, as without a note. A note that does not parse is ignored (and noted). An
//! unpatched glibc ignores the note (`read_ld_cache_note` false).
//!
//! After the `DT_NEEDED` libraries (all loaded at startup), when
//! [`LoaderSettings::follow_dlopen`], the libraries each loaded object `dlopen`s
//! ([`crate::dlopen::dlopen_edges`]) are looked up in load order, each with that object as the
//! requester: as glibc's `dlopen` does, its own `DT_RUNPATH` (not its loaders'), or when it has
//! none the `DT_RPATH` chain of it and its loaders, then `LD_LIBRARY_PATH`, the cache and the
//! default directories. Of alternatives the first that loads is taken. When in the run the
//! `dlopen`s happen is not known; the model makes them after startup, in load order.
//!
//! Not modelled: `glibc-hwcaps` and legacy hwcap subdirectories of each search directory
//! (which depend on the CPU; files found there are noted), `LD_PRELOAD`, `/etc/ld.so.preload`,
//! `DT_AUXILIARY`/`DT_FILTER`, audit modules, secure (setuid) mode, and `.note.ABI-tag` checks.

use std::collections::VecDeque;

use crate::dlopen::{dlopen_edges, DlopenSource};
use crate::fsview::{absolute, dirname, Bytes, ElfInfo, FileId, FsView, Probe};
use crate::settings::LoaderSettings;
use crate::target::{SkipReason, Verdict};
use elfpatch::note::Hint;
use object::elf::ELFCLASS64;

/// The values dynamic string tokens expand to for one object.
#[derive(Clone, Copy, Debug)]
pub struct Dst<'a> {
    /// `$ORIGIN`: the object's directory; `None` when unknown.
    pub origin: Option<&'a [u8]>,
    /// `$LIB`.
    pub lib: &'a [u8],
    /// `$PLATFORM`.
    pub platform: Option<&'a [u8]>,
}

/// The length of the token `name` at the start of `rest` (just after a `$`), braces included,
/// or 0 (`is_dst` in `dl-load.c`: `$NAME` must not be followed by an identifier character).
fn dst_len(rest: &[u8], name: &[u8]) -> usize {
    let curly = rest.first() == Some(&b'{');
    let body = if curly { &rest[1..] } else { rest };
    if !body.starts_with(name) {
        return 0;
    }
    let next = body.get(name.len()).copied();
    if curly {
        if next == Some(b'}') {
            name.len() + 2
        } else {
            0
        }
    } else if next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
        0
    } else {
        name.len()
    }
}

/// Expands `$ORIGIN`, `$LIB` and `$PLATFORM` (also in `${...}` form) in one path. Unknown tokens
/// stay as they are; `None` when a known token has no value (the loader then drops the path).
pub fn expand_dst(input: &[u8], d: &Dst) -> Option<Bytes> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'$' {
            out.push(input[i]);
            i += 1;
            continue;
        }
        let rest = &input[i + 1..];
        let (len, value) = match () {
            _ if dst_len(rest, b"ORIGIN") > 0 => (dst_len(rest, b"ORIGIN"), d.origin),
            _ if dst_len(rest, b"PLATFORM") > 0 => (dst_len(rest, b"PLATFORM"), d.platform),
            _ if dst_len(rest, b"LIB") > 0 => (dst_len(rest, b"LIB"), Some(d.lib)),
            _ => {
                out.push(b'$');
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(value?);
        i += 1 + len;
    }
    Some(out)
}

/// One directory of a search list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchDir {
    /// The element as written.
    pub entry: Bytes,
    /// The directory after expansion, ending in `/` (empty: the current directory).
    pub dir: Bytes,
}

/// Splits and expands a search list the way `fillin_rpath` does.
pub fn expand_list(list: &[u8], seps: &[u8], d: &Dst) -> Vec<SearchDir> {
    let mut out: Vec<SearchDir> = Vec::new();
    if list.is_empty() {
        return out;
    }
    for entry in list.split(|c| seps.contains(c)) {
        let dir = if entry.is_empty() {
            Vec::new()
        } else {
            let Some(mut e) = expand_dst(entry, d) else {
                continue;
            };
            if e.is_empty() {
                continue;
            }
            while e.len() > 1 && e.ends_with(b"/") {
                e.pop();
            }
            if !e.ends_with(b"/") {
                e.push(b'/');
            }
            e
        };
        if out.iter().all(|s| s.dir != dir) {
            out.push(SearchDir {
                entry: entry.to_vec(),
                dir,
            });
        }
    }
    out
}

/// Where a lookup looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchStep {
    /// A name containing `/`, opened as it is.
    Direct,
    /// `DT_RPATH` of this object.
    Rpath(usize),
    /// `LD_LIBRARY_PATH`.
    LdLibraryPath,
    /// The resolution-cache note of this object.
    Note(usize),
    /// `DT_RUNPATH` of this object.
    Runpath(usize),
    /// `ld.so.cache`.
    Cache,
    /// The default directories.
    DefaultDirs,
}

/// Why a candidate was passed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassReason {
    /// No such file.
    Missing,
    /// Permission denied.
    Denied,
    /// An ELF file of the other class.
    WrongClass(u8),
    /// An ELF file for another machine or ABI.
    WrongMachine(u16),
    /// An error the loader does not stop at.
    Unreadable(String),
    /// A cache entry the loader does not take (the reason).
    CacheEntry(String),
    /// A cache entry in a default directory while the requester has `DF_1_NODEFLIB`.
    Nodeflib,
}

impl PassReason {
    /// A short description.
    pub fn describe(&self) -> String {
        match self {
            PassReason::Missing => "missing".into(),
            PassReason::Denied => "permission denied".into(),
            PassReason::WrongClass(c) => format!(
                "wrong ELF class (ELFCLASS{})",
                if *c == ELFCLASS64 { 64 } else { 32 }
            ),
            PassReason::WrongMachine(m) => format!("wrong machine or ABI (e_machine {m})"),
            PassReason::Unreadable(e) => e.clone(),
            PassReason::CacheEntry(w) => format!("cache entry {w}"),
            PassReason::Nodeflib => {
                "cache entry in a default directory, and the requester has DF_1_NODEFLIB".into()
            }
        }
    }
}

/// A candidate the loader looked at and passed over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The path tried.
    pub path: Bytes,
    /// Which step tried it.
    pub step: SearchStep,
    /// Why it was not taken.
    pub why: PassReason,
}

/// How an already loaded object satisfied a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// It was loaded under this name (or path) before.
    Name,
    /// Its `DT_SONAME` is the name.
    Soname,
    /// The search found the same file again (same device and inode) at this path.
    SameFile(Bytes, SearchStep),
}

/// The result of one lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupOutcome {
    /// A new object was loaded from its path, found at this step.
    Loaded(usize, SearchStep),
    /// An object loaded before.
    AlreadyLoaded(usize, Reuse),
    /// Nothing was found; `true` when a file of the other ELF class was seen.
    NotFound(bool),
    /// The loader stops here: the file at this path cannot be loaded.
    Failed(Bytes, SearchStep, String),
    /// The name itself is unusable.
    BadName(String),
}

/// What kind of object this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// The program being explained.
    Main,
    /// The program interpreter (`ld.so` itself).
    Interpreter,
    /// A library loaded for a `DT_NEEDED` entry.
    Library,
    /// A library loaded by an explicit `dlopen` from the program.
    Dlopened,
}

/// A loaded object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedObject {
    /// The path it was opened at (the loader's `l_name`).
    pub path: Bytes,
    /// What it is.
    pub kind: ObjectKind,
    /// Its dynamic information.
    pub info: ElfInfo,
    /// Its file identity (not recorded for the program and the interpreter).
    pub id: Option<FileId>,
    /// `$ORIGIN` for it.
    pub origin: Option<Bytes>,
    /// The object whose lookup loaded it (`l_loader`).
    pub loader: Option<usize>,
    /// The names it was requested under.
    pub names: Vec<Bytes>,
}

/// One lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryRequest {
    /// The object whose `DT_NEEDED` (or `dlopen`) asked.
    pub requester: usize,
    /// The name as written.
    pub name: Bytes,
    /// The name after expansion of dynamic string tokens.
    pub expanded: Bytes,
    /// Whether this models a `dlopen` rather than a `DT_NEEDED` entry.
    pub dlopen: bool,
    /// For a `dlopen` the requester makes by itself (not one asked for on the command line):
    /// where the model knows it from.
    pub dlopen_source: Option<DlopenSource>,
    /// The result.
    pub outcome: LookupOutcome,
    /// Candidates passed over, in the order tried.
    pub passed: Vec<Attempt>,
    /// Things worth knowing that the model does not decide (hwcaps subdirectories, ...).
    pub notes: Vec<String>,
}

/// The whole result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// Objects in load order: the program first, then the interpreter (if any).
    pub objects: Vec<LoadedObject>,
    /// Lookups in the order the loader makes them.
    pub requests: Vec<LibraryRequest>,
}

impl Resolution {
    /// How a step is described: `RUNPATH of /usr/bin/foo`, `ld.so.cache`, ...
    pub fn step_label(&self, step: SearchStep) -> String {
        let name = |i: usize| String::from_utf8_lossy(&self.objects[i].path).into_owned();
        match step {
            SearchStep::Direct => "path in DT_NEEDED".into(),
            SearchStep::Rpath(i) => format!("RPATH of {}", name(i)),
            SearchStep::LdLibraryPath => "LD_LIBRARY_PATH".into(),
            SearchStep::Note(i) => format!("resolution-cache note of {}", name(i)),
            SearchStep::Runpath(i) => format!("RUNPATH of {}", name(i)),
            SearchStep::Cache => "ld.so.cache".into(),
            SearchStep::DefaultDirs => "default directories".into(),
        }
    }
}

/// The program to start from.
#[derive(Clone, Debug)]
pub struct Program {
    /// Its path in the modelled system.
    pub path: Bytes,
    /// Its directory with symlinks resolved (`$ORIGIN`).
    pub origin: Bytes,
    /// Its dynamic information.
    pub info: ElfInfo,
}

enum Try {
    Found(Bytes, FileId),
    Fatal(Bytes, String),
    Next,
}

struct Resolver<'a> {
    s: &'a LoaderSettings,
    fs: &'a dyn FsView,
    objects: Vec<LoadedObject>,
    requests: Vec<LibraryRequest>,
    other_class: bool,
    last_step: Option<SearchStep>,
}

/// Resolves every dependency of `program`, then (when [`LoaderSettings::follow_dlopen`]) the
/// libraries each loaded object `dlopen`s, then each of `dlopen` as if the program called
/// `dlopen(name)` after starting.
pub fn resolve(
    program: Program,
    dlopen: &[Bytes],
    s: &LoaderSettings,
    fs: &dyn FsView,
) -> Resolution {
    let mut r = Resolver {
        s,
        fs,
        objects: vec![LoadedObject {
            path: program.path,
            kind: ObjectKind::Main,
            info: program.info,
            id: None,
            origin: Some(program.origin),
            loader: None,
            names: Vec::new(),
        }],
        requests: Vec::new(),
        other_class: false,
        last_step: None,
    };
    if let Some(i) = &s.interpreter {
        r.objects.push(LoadedObject {
            path: i.path.clone(),
            kind: ObjectKind::Interpreter,
            info: ElfInfo {
                soname: i.soname.clone(),
                ..ElfInfo::default()
            },
            id: None,
            origin: None,
            loader: None,
            names: vec![i.path.clone()],
        });
    }
    let mut queue = VecDeque::from([0]);
    r.drain(&mut queue);
    if s.follow_dlopen {
        r.follow_dlopens(&mut queue);
    }
    for name in dlopen {
        let before = r.objects.len();
        r.request(0, name, true, None);
        queue.extend(before..r.objects.len());
        r.drain(&mut queue);
    }
    Resolution {
        objects: r.objects,
        requests: r.requests,
    }
}

impl Resolver<'_> {
    fn drain(&mut self, queue: &mut VecDeque<usize>) {
        while let Some(i) = queue.pop_front() {
            for name in self.objects[i].info.needed.clone() {
                let before = self.objects.len();
                self.request(i, &name, false, None);
                queue.extend(before..self.objects.len());
            }
        }
    }

    /// The `dlopen`s of every loaded object, in load order (objects they load included): first
    /// every declared or known one, then those only inferred from a string (the CUDA runtime's
    /// `dlopen` of the driver happens on the first CUDA call, before other users of the name
    /// get to theirs). Of each edge's alternatives, the first that loads (or is loaded already)
    /// ends the edge.
    fn follow_dlopens(&mut self, queue: &mut VecDeque<usize>) {
        let (mut known, mut inferred) = (0, 0);
        loop {
            let (i, weak) = if known < self.objects.len() {
                known += 1;
                (known - 1, false)
            } else if inferred < self.objects.len() {
                inferred += 1;
                (inferred - 1, true)
            } else {
                break;
            };
            let o = &self.objects[i];
            if o.kind == ObjectKind::Interpreter {
                continue;
            }
            let canonical = self.fs.canonical(&o.path);
            let paths: Vec<&[u8]> = std::iter::once(o.path.as_slice())
                .chain(canonical.as_deref())
                .collect();
            let edges = dlopen_edges(&paths, &o.info.dlopen_facts());
            for edge in edges.into_iter().filter(|e| e.source.is_inferred() == weak) {
                for name in &edge.names {
                    let before = self.objects.len();
                    self.request(i, name, true, Some(edge.source.clone()));
                    queue.extend(before..self.objects.len());
                    self.drain(queue);
                    let done = self.requests.last().is_some_and(|q| {
                        matches!(
                            q.outcome,
                            LookupOutcome::Loaded(..) | LookupOutcome::AlreadyLoaded(..)
                        )
                    });
                    if done {
                        break;
                    }
                }
            }
        }
    }

    fn dst(&self, i: usize) -> Dst<'_> {
        Dst {
            origin: self.objects[i].origin.as_deref(),
            lib: &self.s.lib,
            platform: self.s.platform.as_deref(),
        }
    }

    fn loaded_by_name(&self, name: &[u8]) -> Option<(usize, Reuse)> {
        self.objects.iter().enumerate().find_map(|(i, o)| {
            let by_name =
                o.kind != ObjectKind::Main && (o.path == name || o.names.iter().any(|n| n == name));
            if by_name {
                Some((i, Reuse::Name))
            } else if o.info.soname.as_deref() == Some(name) {
                Some((i, Reuse::Soname))
            } else {
                None
            }
        })
    }

    fn request(
        &mut self,
        requester: usize,
        name: &[u8],
        dlopen: bool,
        dlopen_source: Option<DlopenSource>,
    ) {
        let followed = dlopen_source.is_some();
        let mut req = LibraryRequest {
            requester,
            name: name.to_vec(),
            expanded: name.to_vec(),
            dlopen,
            dlopen_source,
            outcome: LookupOutcome::NotFound(false),
            passed: Vec::new(),
            notes: Vec::new(),
        };
        if name.contains(&b'$') {
            match expand_dst(name, &self.dst(requester)) {
                Some(e) if !e.is_empty() => req.expanded = e,
                _ => {
                    req.outcome =
                        LookupOutcome::BadName("empty dynamic string token substitution".into());
                    self.requests.push(req);
                    return;
                }
            }
        }
        if let Some((i, how)) = self.loaded_by_name(&req.expanded) {
            req.outcome = LookupOutcome::AlreadyLoaded(i, how);
            self.requests.push(req);
            return;
        }
        self.other_class = false;
        self.last_step = None;
        let name = req.expanded.clone();
        let found = if name.contains(&b'/') {
            self.try_file(&mut req, name.clone(), SearchStep::Direct)
        } else {
            self.search(&mut req, requester, &name)
        };
        let step = self.last_step.take().unwrap_or(SearchStep::Direct);
        req.outcome = match found {
            Try::Next => LookupOutcome::NotFound(self.other_class),
            Try::Fatal(path, msg) => LookupOutcome::Failed(path, step, msg),
            Try::Found(path, id) => {
                // A dlopen from an object other than the program: the object is its loader.
                let loader = (!dlopen || followed).then_some(requester);
                self.found(&mut req, loader, dlopen, path, id, step)
            }
        };
        self.requests.push(req);
    }

    fn found(
        &mut self,
        req: &mut LibraryRequest,
        loader: Option<usize>,
        dlopen: bool,
        path: Bytes,
        id: FileId,
        step: SearchStep,
    ) -> LookupOutcome {
        let same = self.objects.iter().position(|o| o.id == Some(id));
        if let Some(i) = same {
            if !self.objects[i].names.contains(&req.expanded) {
                self.objects[i].names.push(req.expanded.clone());
            }
            return LookupOutcome::AlreadyLoaded(i, Reuse::SameFile(path, step));
        }
        let info = match self.fs.read_elf(&path) {
            Ok(info) => info,
            Err(e) => return LookupOutcome::Failed(path, step, e.to_string()),
        };
        let origin = dirname(&absolute(&path, &self.fs.cwd()));
        self.objects.push(LoadedObject {
            path,
            kind: if dlopen {
                ObjectKind::Dlopened
            } else {
                ObjectKind::Library
            },
            info,
            id: Some(id),
            origin: Some(origin),
            loader,
            names: vec![req.expanded.clone()],
        });
        LookupOutcome::Loaded(self.objects.len() - 1, step)
    }

    fn try_file(&mut self, req: &mut LibraryRequest, path: Bytes, step: SearchStep) -> Try {
        self.last_step = Some(step);
        let why = match self.fs.probe(&path) {
            Probe::Missing => PassReason::Missing,
            Probe::Denied => PassReason::Denied,
            Probe::Failed(e) => PassReason::Unreadable(e),
            Probe::Directory => {
                return Try::Fatal(path, "cannot read file data: Is a directory".into())
            }
            Probe::File(id, h) => match self.s.target.verify(&h) {
                Verdict::Accept => return Try::Found(path, id),
                Verdict::Fatal(e) => return Try::Fatal(path, e.to_string()),
                Verdict::Skip(SkipReason::WrongClass(c)) => {
                    self.other_class = true;
                    PassReason::WrongClass(c)
                }
                Verdict::Skip(SkipReason::WrongMachine(m)) => PassReason::WrongMachine(m),
            },
        };
        req.passed.push(Attempt { path, step, why });
        Try::Next
    }

    fn try_dirs(
        &mut self,
        req: &mut LibraryRequest,
        dirs: &[SearchDir],
        name: &[u8],
        step: SearchStep,
    ) -> Try {
        for d in dirs {
            self.note_hwcaps(req, &d.dir, name);
            let mut path = d.dir.clone();
            path.extend_from_slice(name);
            match self.try_file(req, path, step) {
                Try::Next => continue,
                t => return t,
            }
        }
        Try::Next
    }

    fn note_hwcaps(&self, req: &mut LibraryRequest, dir: &[u8], name: &[u8]) {
        let subdirs = self.s.target.hwcaps_subdirs();
        if subdirs.is_empty() {
            return;
        }
        let mut base = dir.to_vec();
        base.extend_from_slice(b"glibc-hwcaps/");
        if !self.fs.is_dir(&base) {
            return;
        }
        for sub in subdirs {
            let mut p = base.clone();
            p.extend_from_slice(sub.as_bytes());
            p.push(b'/');
            p.extend_from_slice(name);
            if let Probe::File(_, h) = self.fs.probe(&p) {
                if self.s.target.verify(&h) == Verdict::Accept {
                    req.notes.push(format!(
                        "{} exists: on CPUs that support {sub} the loader takes it before \
                         {}{} (glibc-hwcaps subdirectories are not modelled)",
                        String::from_utf8_lossy(&p),
                        String::from_utf8_lossy(dir),
                        String::from_utf8_lossy(name)
                    ));
                }
            }
        }
    }

    fn rpath_dirs(&self, i: usize) -> Vec<SearchDir> {
        match self.objects[i].info.effective_rpath() {
            Some(r) => expand_list(r, b":", &self.dst(i)),
            None => Vec::new(),
        }
    }

    /// The requester's resolution-cache note entry for the name as written, hint by hint.
    fn note_hints(&mut self, req: &mut LibraryRequest, requester: usize, info: &ElfInfo) -> Try {
        if !self.s.read_ld_cache_note {
            return Try::Next;
        }
        let cache = match &info.ld_cache_note {
            None => return Try::Next,
            Some(Err(e)) => {
                req.notes.push(format!(
                    "the requester's resolution-cache note is malformed ({e}): ignored"
                ));
                return Try::Next;
            }
            Some(Ok(c)) => c,
        };
        let Some(entry) = cache.get(&req.name) else {
            return Try::Next;
        };
        let step = SearchStep::Note(requester);
        for hint in entry.hints.clone() {
            let t = match hint {
                Hint::Exact(path) => self.try_file(req, path, step),
                Hint::Search(dir) => {
                    // `?` with nothing after it is an empty run-path entry: the current
                    // directory.
                    let dirs = match dir.is_empty() {
                        true => vec![SearchDir {
                            entry: Vec::new(),
                            dir: Vec::new(),
                        }],
                        false => expand_list(&dir, b"", &self.dst(requester)),
                    };
                    let name = req.expanded.clone();
                    self.try_dirs(req, &dirs, &name, step)
                }
            };
            if !matches!(t, Try::Next) {
                return t;
            }
        }
        Try::Next
    }

    fn search(&mut self, req: &mut LibraryRequest, requester: usize, name: &[u8]) -> Try {
        let info = self.objects[requester].info.clone();
        if info.runpath.is_none() {
            let mut did_main = false;
            let mut l = Some(requester);
            while let Some(i) = l {
                let dirs = self.rpath_dirs(i);
                if !dirs.is_empty() {
                    match self.try_dirs(req, &dirs, name, SearchStep::Rpath(i)) {
                        Try::Next => {}
                        t => return t,
                    }
                    did_main |= i == 0;
                }
                l = self.objects[i].loader;
            }
            if !did_main {
                let dirs = self.rpath_dirs(0);
                match self.try_dirs(req, &dirs, name, SearchStep::Rpath(0)) {
                    Try::Next => {}
                    t => return t,
                }
            }
        }
        if let Some(llp) = self.s.ld_library_path.clone() {
            let dirs = expand_list(&llp, b":;", &self.dst(0));
            match self.try_dirs(req, &dirs, name, SearchStep::LdLibraryPath) {
                Try::Next => {}
                t => return t,
            }
        }
        match self.note_hints(req, requester, &info) {
            Try::Next => {}
            t => return t,
        }
        if let Some(rp) = &info.runpath {
            let dirs = expand_list(rp, b":", &self.dst(requester));
            match self.try_dirs(req, &dirs, name, SearchStep::Runpath(requester)) {
                Try::Next => {}
                t => return t,
            }
        }
        if let Some(cache) = &self.s.cache {
            let lookup = cache.lookup(name, &self.s.target.cache_flags());
            for (path, why) in lookup.passed_over {
                req.passed.push(Attempt {
                    path,
                    step: SearchStep::Cache,
                    why: PassReason::CacheEntry(why),
                });
            }
            if let Some(path) = lookup.chosen {
                if info.nodeflib() && self.s.system_dirs.iter().any(|d| path.starts_with(d)) {
                    req.passed.push(Attempt {
                        path,
                        step: SearchStep::Cache,
                        why: PassReason::Nodeflib,
                    });
                } else {
                    match self.try_file(req, path, SearchStep::Cache) {
                        Try::Next => {}
                        t => return t,
                    }
                }
            }
        }
        if info.nodeflib() {
            req.notes
                .push("default directories skipped: the requester has DF_1_NODEFLIB".into());
            return Try::Next;
        }
        let dirs: Vec<SearchDir> = self
            .s
            .system_dirs
            .iter()
            .map(|d| SearchDir {
                entry: d.clone(),
                dir: d.clone(),
            })
            .collect();
        self.try_dirs(req, &dirs, name, SearchStep::DefaultDirs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ldcache::LdCache;
    use crate::memfs::{dynamic_info as lib, x86_64_settings, MemFs};
    use object::elf::{DF_1_NODEFLIB, ELFCLASS32, ELFCLASS64, EM_386, EM_AARCH64};

    fn dst<'a>(origin: &'a [u8]) -> Dst<'a> {
        Dst {
            origin: Some(origin),
            lib: b"lib64",
            platform: Some(b"x86_64"),
        }
    }

    #[test]
    fn expands_origin_lib_and_platform_like_the_loader() {
        let d = dst(b"/opt/app/bin");
        let e = |s: &str| expand_dst(s.as_bytes(), &d).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(e("$ORIGIN/../lib").unwrap(), "/opt/app/bin/../lib");
        assert_eq!(e("${ORIGIN}/x").unwrap(), "/opt/app/bin/x");
        assert_eq!(e("/usr/$LIB/$PLATFORM").unwrap(), "/usr/lib64/x86_64");
        assert_eq!(e("/a/${LIB}64").unwrap(), "/a/lib6464");
        // Not tokens: an identifier character follows, an unknown name, an unclosed brace.
        assert_eq!(e("$ORIGINAL/x").unwrap(), "$ORIGINAL/x");
        assert_eq!(e("$LIBDIR").unwrap(), "$LIBDIR");
        assert_eq!(e("$FOO/$").unwrap(), "$FOO/$");
        assert_eq!(e("${ORIGIN/x").unwrap(), "${ORIGIN/x");
        // A known token without a value drops the path.
        let none = Dst {
            origin: None,
            lib: b"lib",
            platform: None,
        };
        assert_eq!(expand_dst(b"$PLATFORM/x", &none), None);
        assert_eq!(expand_dst(b"$ORIGIN", &none), None);
    }

    #[test]
    fn search_lists_split_trim_and_dedupe() {
        let d = dst(b"/o");
        let dirs: Vec<String> = expand_list(b"/a//:$ORIGIN::/a:/:$ORIGIN/", b":", &d)
            .into_iter()
            .map(|s| String::from_utf8(s.dir).unwrap())
            .collect();
        assert_eq!(dirs, vec!["/a/", "/o/", "", "/"]);
        assert!(expand_list(b"", b":", &d).is_empty());
        let llp: Vec<String> = expand_list(b"/x;/y:/z", b":;", &d)
            .into_iter()
            .map(|s| String::from_utf8(s.dir).unwrap())
            .collect();
        assert_eq!(llp, vec!["/x/", "/y/", "/z/"]);
    }

    fn program(info: ElfInfo) -> Program {
        Program {
            path: b"/app/bin/app".to_vec(),
            origin: b"/app/bin".to_vec(),
            info,
        }
    }

    /// Where each name was found: (name, path or "-", step).
    fn summary(r: &Resolution) -> Vec<(String, String, String)> {
        r.requests
            .iter()
            .map(|q| {
                let name = String::from_utf8_lossy(&q.expanded).into_owned();
                let (path, how) = match &q.outcome {
                    LookupOutcome::Loaded(i, st) => (r.objects[*i].path.clone(), r.step_label(*st)),
                    LookupOutcome::AlreadyLoaded(i, how) => {
                        (r.objects[*i].path.clone(), format!("already: {how:?}"))
                    }
                    LookupOutcome::NotFound(oc) => (b"-".to_vec(), format!("not found {oc}")),
                    LookupOutcome::Failed(p, _, e) => (p.clone(), format!("failed: {e}")),
                    LookupOutcome::BadName(e) => (b"-".to_vec(), e.clone()),
                };
                (name, String::from_utf8_lossy(&path).into_owned(), how)
            })
            .collect()
    }

    fn row(name: &str, path: &str, how: &str) -> (String, String, String) {
        (name.into(), path.into(), how.into())
    }

    #[test]
    fn rpath_chain_then_ld_library_path_then_own_runpath_then_cache_then_defaults() {
        let mut fs = MemFs::default();
        // Every name exists in every place; each is found by the earliest step that has it.
        fs.lib("/rp-exe/liba.so", lib(&["libb.so"], None, None))
            .lib("/llp/liba.so", ElfInfo::default())
            .lib("/llp/libb.so", ElfInfo::default())
            .lib("/llp/libd.so", ElfInfo::default())
            .lib("/rp-exe/libb.so", ElfInfo::default())
            .lib("/ru/libc.so", ElfInfo::default())
            .lib("/cached/libe.so", ElfInfo::default())
            .lib("/lib/libe.so", ElfInfo::default())
            .lib("/usr/lib/libf.so", ElfInfo::default())
            .lib(
                "/llp/libc2.so",
                lib(&["libc.so", "libg.so"], Some("/ru"), Some("/ignored")),
            )
            .lib("/rp-exe/libg.so", ElfInfo::default());
        let cache = LdCache::new(vec![crate::ldcache::CacheEntry {
            flags: 0x303,
            key: b"libe.so".to_vec(),
            value: b"/cached/libe.so".to_vec(),
            osversion: 0,
            hwcap: 0,
        }]);
        let mut s = x86_64_settings(Some(cache));
        s.ld_library_path = Some(b"/llp".to_vec());
        let exe = lib(
            &["liba.so", "libd.so", "libc2.so", "libe.so", "libf.so"],
            None,
            Some("/rp-exe"),
        );
        let r = resolve(program(exe), &[], &s, &fs);
        assert_eq!(
            summary(&r),
            vec![
                row("liba.so", "/rp-exe/liba.so", "RPATH of /app/bin/app"),
                row("libd.so", "/llp/libd.so", "LD_LIBRARY_PATH"),
                row("libc2.so", "/llp/libc2.so", "LD_LIBRARY_PATH"),
                row("libe.so", "/cached/libe.so", "ld.so.cache"),
                row("libf.so", "/usr/lib/libf.so", "default directories"),
                // liba has no RUNPATH: the program's RPATH applies (the loader chain).
                row("libb.so", "/rp-exe/libb.so", "RPATH of /app/bin/app"),
                // libc2 has RUNPATH: no RPATH at all (its own is ignored, the program's too).
                row("libc.so", "/ru/libc.so", "RUNPATH of /llp/libc2.so"),
                row("libg.so", "-", "not found false"),
            ]
        );
    }

    #[test]
    fn wrong_class_is_passed_over_and_garbage_stops_the_load() {
        let mut fs = MemFs::default();
        fs.elf("/a/libw.so", ELFCLASS32, EM_386, ElfInfo::default())
            .elf("/b/libw.so", ELFCLASS64, EM_AARCH64, ElfInfo::default())
            .lib("/c/libw.so", ElfInfo::default())
            .elf("/a/libonly32.so", ELFCLASS32, EM_386, ElfInfo::default())
            .data(
                "/a/libscript.so",
                b"/* GNU ld script */ GROUP ( libfoo.so.1 ) and some padding to 64 bytes",
            )
            .lib("/c/libscript.so", ElfInfo::default());
        let exe = lib(
            &["libw.so", "libonly32.so", "libscript.so"],
            Some("/a:/b:/c"),
            None,
        );
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        let s = summary(&r);
        assert_eq!(
            s[0],
            row("libw.so", "/c/libw.so", "RUNPATH of /app/bin/app")
        );
        assert_eq!(
            r.requests[0]
                .passed
                .iter()
                .map(|a| a.why.clone())
                .collect::<Vec<_>>(),
            vec![
                PassReason::WrongClass(ELFCLASS32),
                PassReason::WrongMachine(EM_AARCH64)
            ]
        );
        assert_eq!(s[1].2, "not found true");
        assert_eq!(
            s[2],
            row(
                "libscript.so",
                "/a/libscript.so",
                "failed: invalid ELF header"
            )
        );
    }

    #[test]
    fn names_and_files_are_loaded_once() {
        let mut fs = MemFs::default();
        fs.lib(
            "/l/libx.so.1",
            ElfInfo {
                soname: Some(b"libx.so.1".to_vec()),
                ..ElfInfo::default()
            },
        )
        .link("/l/libx.so", "libx.so.1")
        .lib(
            "/l/liby.so",
            lib(&["libx.so.1", "ld-linux-x86-64.so.2"], None, None),
        );
        let exe = lib(
            &["libx.so", "liby.so", "libx.so.1", "libx.so"],
            Some("/l"),
            None,
        );
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        let s = summary(&r);
        assert_eq!(
            s[0],
            row("libx.so", "/l/libx.so", "RUNPATH of /app/bin/app")
        );
        assert_eq!(
            s[1],
            row("liby.so", "/l/liby.so", "RUNPATH of /app/bin/app")
        );
        // The SONAME of the object loaded as libx.so matches before any search.
        assert_eq!(s[2], row("libx.so.1", "/l/libx.so", "already: Soname"));
        assert_eq!(s[3], row("libx.so", "/l/libx.so", "already: Name"));
        // liby has no RUNPATH: it finds nothing by search, but the name is loaded already.
        assert_eq!(s[4], row("libx.so.1", "/l/libx.so", "already: Soname"));
        assert_eq!(
            s[5],
            row(
                "ld-linux-x86-64.so.2",
                "/lib64/ld-linux-x86-64.so.2",
                "already: Soname"
            )
        );
    }

    #[test]
    fn the_same_file_under_another_name_is_the_same_object() {
        let mut fs = MemFs::default();
        fs.lib("/l/libreal.so.1", ElfInfo::default())
            .link("/l/libalias.so.1", "libreal.so.1");
        let exe = lib(&["libreal.so.1", "libalias.so.1"], Some("/l"), None);
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        assert_eq!(
            r.requests[1].outcome,
            LookupOutcome::AlreadyLoaded(
                2,
                Reuse::SameFile(b"/l/libalias.so.1".to_vec(), SearchStep::Runpath(0))
            )
        );
    }

    #[test]
    fn nodeflib_skips_default_directories_and_cache_entries_inside_them() {
        let mut fs = MemFs::default();
        fs.lib("/lib/libz.so.1", ElfInfo::default())
            .lib("/opt/libq.so.1", ElfInfo::default());
        let cache = LdCache::new(vec![
            crate::ldcache::CacheEntry {
                flags: 0x303,
                key: b"libq.so.1".to_vec(),
                value: b"/opt/libq.so.1".to_vec(),
                osversion: 0,
                hwcap: 0,
            },
            crate::ldcache::CacheEntry {
                flags: 0x303,
                key: b"libz.so.1".to_vec(),
                value: b"/lib/libz.so.1".to_vec(),
                osversion: 0,
                hwcap: 0,
            },
        ]);
        let mut exe = lib(&["libz.so.1", "libq.so.1"], None, None);
        exe.flags_1 = u64::from(DF_1_NODEFLIB);
        let r = resolve(program(exe), &[], &x86_64_settings(Some(cache)), &fs);
        let s = summary(&r);
        assert_eq!(s[0].2, "not found false");
        assert_eq!(r.requests[0].passed[0].why, PassReason::Nodeflib);
        assert_eq!(s[1], row("libq.so.1", "/opt/libq.so.1", "ld.so.cache"));
    }

    #[test]
    fn files_in_glibc_hwcaps_subdirectories_are_noted_not_taken() {
        let mut fs = MemFs::default();
        fs.lib("/l/libv.so.1", ElfInfo::default())
            .lib("/l/glibc-hwcaps/x86-64-v3/libv.so.1", ElfInfo::default());
        let exe = lib(&["libv.so.1"], Some("/l"), None);
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        assert_eq!(
            summary(&r)[0],
            row("libv.so.1", "/l/libv.so.1", "RUNPATH of /app/bin/app")
        );
        assert_eq!(r.requests[0].notes.len(), 1);
        assert!(r.requests[0].notes[0].starts_with("/l/glibc-hwcaps/x86-64-v3/libv.so.1 exists"));
    }

    fn with_note(mut info: ElfInfo, entries: &[(&str, &[&str])]) -> ElfInfo {
        use elfpatch::note::{Entry, ResolutionCache};
        let hint = |h: &str| match h.split_at(1) {
            ("=", p) => Hint::Exact(p.as_bytes().to_vec()),
            (_, d) => Hint::Search(d.as_bytes().to_vec()),
        };
        info.ld_cache_note = Some(Ok(ResolutionCache {
            entries: entries
                .iter()
                .map(|(n, hs)| Entry {
                    needed: n.as_bytes().to_vec(),
                    hints: hs.iter().map(|h| hint(h)).collect(),
                })
                .collect(),
        }));
        info
    }

    const STUBS: &str = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib";

    #[test]
    fn the_patched_loader_reads_the_note_after_ld_library_path_before_runpath() {
        let mut fs = MemFs::default();
        let stub = format!("{STUBS}/libcuda.so.1");
        fs.lib(&stub, ElfInfo::default())
            .lib("/run/opengl-driver/lib/libcuda.so.1", ElfInfo::default())
            .lib("/app/lib/libfoo.so.1", ElfInfo::default())
            .lib("/llp/libbar.so.1", ElfInfo::default())
            .lib("/app/lib/libbar.so.1", ElfInfo::default());
        let exe = with_note(
            lib(
                &["libcuda.so.1", "libfoo.so.1", "libbar.so.1"],
                Some("/run/opengl-driver/lib:$ORIGIN/../lib"),
                None,
            ),
            &[
                ("libcuda.so.1", &[&format!("={stub}")]),
                // The first hint is gone: the next one, a directory with $ORIGIN, is searched.
                ("libfoo.so.1", &["=/gone/libfoo.so.1", "?$ORIGIN/../lib"]),
                ("libbar.so.1", &["=/app/lib/libbar.so.1"]),
            ],
        );
        let mut s = x86_64_settings(None);
        s.ld_library_path = Some(b"/llp".to_vec());
        let r = resolve(program(exe.clone()), &[], &s, &fs);
        let note = "resolution-cache note of /app/bin/app";
        assert_eq!(
            summary(&r),
            vec![
                row("libcuda.so.1", &stub, note),
                row("libfoo.so.1", "/app/bin/../lib/libfoo.so.1", note),
                // LD_LIBRARY_PATH comes first.
                row("libbar.so.1", "/llp/libbar.so.1", "LD_LIBRARY_PATH"),
            ]
        );
        let passed = &r.requests[1].passed;
        assert_eq!(passed[0].step, SearchStep::LdLibraryPath);
        assert_eq!(passed[1].path, b"/gone/libfoo.so.1");
        assert_eq!(passed[1].step, SearchStep::Note(0));
        // An upstream glibc ignores the note: RUNPATH finds the driver.
        s.read_ld_cache_note = false;
        let r = resolve(program(exe), &[], &s, &fs);
        assert_eq!(
            summary(&r)[0],
            row(
                "libcuda.so.1",
                "/run/opengl-driver/lib/libcuda.so.1",
                "RUNPATH of /app/bin/app"
            )
        );
    }

    #[test]
    fn a_malformed_note_is_ignored_and_said() {
        let mut fs = MemFs::default();
        fs.lib("/app/lib/libfoo.so.1", ElfInfo::default());
        let mut exe = lib(&["libfoo.so.1"], Some("/app/lib"), None);
        exe.ld_cache_note = Some(Err("byte 9: the hint list is empty".into()));
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        assert_eq!(
            summary(&r)[0],
            row(
                "libfoo.so.1",
                "/app/lib/libfoo.so.1",
                "RUNPATH of /app/bin/app"
            )
        );
        assert!(r.requests[0].notes[0].contains("malformed"));
    }

    #[test]
    fn a_dlopen_is_searched_with_the_dlopening_objects_own_runpath() {
        let mut fs = MemFs::default();
        let stub = format!("{STUBS}/libcuda.so.1");
        let cudart = ElfInfo {
            soname: Some(b"libcudart.so.12".to_vec()),
            ..lib(&[], Some(STUBS), None)
        };
        fs.lib("/cudart/lib/libcudart.so.12", cudart)
            .lib(&stub, ElfInfo::default())
            .lib("/run/opengl-driver/lib/libcuda.so.1", ElfInfo::default())
            .lib(
                "/torch/lib/libtorch_cuda.so",
                lib(&["libcudart.so.12"], Some("/cudart/lib"), None),
            );
        // The program's RUNPATH has the driver link: not used for libcudart's dlopen.
        let exe = lib(
            &["libtorch_cuda.so"],
            Some("/torch/lib:/run/opengl-driver/lib"),
            None,
        );
        let mut s = x86_64_settings(None);
        let r = resolve(program(exe.clone()), &[], &s, &fs);
        let sm = summary(&r);
        assert_eq!(
            sm[2],
            row(
                "libcuda.so.1",
                &stub,
                "RUNPATH of /cudart/lib/libcudart.so.12"
            )
        );
        let q = &r.requests[2];
        assert!(q.dlopen);
        assert!(
            matches!(&q.dlopen_source, Some(DlopenSource::Table(t)) if t.dlopens == "libcuda.so.1")
        );
        let LookupOutcome::Loaded(i, _) = q.outcome else {
            unreachable!()
        };
        assert_eq!(r.objects[i].loader, Some(q.requester));
        // Without a RUNPATH, libcudart's dlopen uses the RPATH chain of its loaders.
        let cudart = ElfInfo {
            soname: Some(b"libcudart.so.12".to_vec()),
            ..lib(&[], None, None)
        };
        fs.lib("/cudart/lib/libcudart.so.12", cudart).lib(
            "/torch/lib/libtorch_cuda.so",
            lib(
                &["libcudart.so.12"],
                None,
                Some("/cudart/lib:/run/opengl-driver/lib"),
            ),
        );
        let r = resolve(program(exe), &[], &s, &fs);
        assert_eq!(
            summary(&r)[2],
            row(
                "libcuda.so.1",
                "/run/opengl-driver/lib/libcuda.so.1",
                "RPATH of /torch/lib/libtorch_cuda.so"
            )
        );
        s.follow_dlopen = false;
        let exe = lib(&["libtorch_cuda.so"], Some("/torch/lib"), None);
        assert_eq!(resolve(program(exe), &[], &s, &fs).requests.len(), 2);
    }

    #[test]
    fn libcudarts_dlopen_goes_before_dlopens_inferred_from_a_string() {
        let mut fs = MemFs::default();
        let stub = format!("{STUBS}/libcuda.so.1");
        let cudart = ElfInfo {
            soname: Some(b"libcudart.so.12".to_vec()),
            ..lib(&[], Some(STUBS), None)
        };
        let shmem = ElfInfo {
            rodata_names: vec![b"libcuda.so.1".to_vec()],
            ..lib(&[], Some("/run/opengl-driver/lib"), None)
        };
        fs.lib("/c/libcudart.so.12", cudart)
            .lib("/s/libshmem.so", shmem)
            .lib(&stub, ElfInfo::default())
            .lib("/run/opengl-driver/lib/libcuda.so.1", ElfInfo::default());
        // libshmem loads first, but only a string says it dlopens libcuda.so.1.
        let exe = lib(&["libshmem.so", "libcudart.so.12"], Some("/s:/c"), None);
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        let sm = summary(&r);
        assert_eq!(
            sm[2],
            row("libcuda.so.1", &stub, "RUNPATH of /c/libcudart.so.12")
        );
        assert_eq!(sm[3].2, "already: Name");
        assert_eq!(r.requests[3].requester, 2);
    }

    #[test]
    fn declared_alternatives_stop_at_the_first_that_loads() {
        let mut fs = MemFs::default();
        let plugin = ElfInfo {
            dlopen_declared: vec![crate::dlopen::DlopenDecl {
                sonames: vec![
                    b"libzstd.so.1".to_vec(),
                    b"libzstd.so".to_vec(),
                    b"libz3.so".to_vec(),
                ],
                feature: Some("zstd".into()),
                priority: Some("suggested".into()),
            }],
            ..lib(&[], Some("/z"), None)
        };
        fs.lib("/p/libplugin.so", plugin)
            .lib("/z/libzstd.so", ElfInfo::default())
            .lib("/z/libz3.so", ElfInfo::default());
        let exe = lib(&["libplugin.so"], Some("/p"), None);
        let r = resolve(program(exe), &[], &x86_64_settings(None), &fs);
        let sm = summary(&r);
        assert_eq!(sm.len(), 3, "{sm:?}");
        assert_eq!(sm[1].2, "not found false");
        assert_eq!(
            sm[2],
            row("libzstd.so", "/z/libzstd.so", "RUNPATH of /p/libplugin.so")
        );
    }

    #[test]
    fn origin_in_needed_and_dlopen_from_the_program() {
        let mut fs = MemFs::default();
        fs.lib(
            "/app/bin/plugins/libp.so",
            lib(&["libdep.so"], Some("$ORIGIN"), None),
        )
        .lib("/app/bin/plugins/libdep.so", ElfInfo::default())
        .lib("/app/lib/libcuda.so.1", ElfInfo::default());
        let exe = lib(&["$ORIGIN/plugins/libp.so"], Some("$ORIGIN/../lib"), None);
        let r = resolve(
            program(exe),
            &[b"libcuda.so.1".to_vec()],
            &x86_64_settings(None),
            &fs,
        );
        let s = summary(&r);
        assert_eq!(
            s[0],
            row(
                "/app/bin/plugins/libp.so",
                "/app/bin/plugins/libp.so",
                "path in DT_NEEDED"
            )
        );
        assert_eq!(
            s[1],
            row(
                "libdep.so",
                "/app/bin/plugins/libdep.so",
                "RUNPATH of /app/bin/plugins/libp.so"
            )
        );
        assert_eq!(
            s[2],
            row(
                "libcuda.so.1",
                "/app/bin/../lib/libcuda.so.1",
                "RUNPATH of /app/bin/app"
            )
        );
        assert!(r.requests[2].dlopen);
    }
}
