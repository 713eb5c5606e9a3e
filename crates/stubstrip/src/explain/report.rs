//! What `explain` says: the lookups as a tree (or a list, for named libraries) and as JSON,
//! loud about CUDA stubs. Pure: built from the model's [`Resolution`], written by
//! [`super::run`].

use std::fmt::Write;

use serde::Serialize;

use ldso_model::fsview::{dirname, Bytes, FsView};
use ldso_model::resolve::{
    LibraryRequest, LookupOutcome, ObjectKind, Resolution, Reuse, SearchStep,
};
use ldso_model::settings::{LoaderSettings, SettingsProvenance};

use crate::driver::{is_driver_library, DRIVER_LIBRARIES, RUNTIME_DIRS};
use crate::printout::{json_text, Printout};
use crate::rule::StubMatcher;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A stub found where a library should be.
#[derive(Clone, Debug, Serialize)]
pub struct StubMark {
    /// The stub directory that holds it.
    pub directory: String,
    /// Whether the library is one the GPU driver provides (`libcuda.so.1`, ...).
    pub driver_library: bool,
    /// What it means.
    pub message: String,
}

/// The stub directory holding `path` (or the file it links to), if any: a directory that
/// [`StubMatcher::is_stub`] accepts, or one inside it.
pub fn stub_dir(path: &[u8], canonical: Option<&[u8]>, m: &StubMatcher) -> Option<Bytes> {
    for p in std::iter::once(path).chain(canonical) {
        let mut d = dirname(p);
        while d.len() > 1 {
            if m.is_stub(&d) {
                return Some(d);
            }
            d = dirname(&d);
        }
    }
    None
}

fn stub_mark(name: &[u8], soname: Option<&[u8]>, dir: &[u8]) -> StubMark {
    let driver = is_driver_library(name) || soname.is_some_and(is_driver_library);
    let message = if driver {
        format!(
            "a link-time stub of the GPU driver library, not the driver: CUDA calls fail \
             (CUDA_ERROR_STUB_LIBRARY, 34). The driver's copy must be found first, in the \
             driver link ({}): run `stubstrip fix` on this output",
            RUNTIME_DIRS[0]
        )
    } else {
        "a link-time stub, not meant to be loaded at run time: run `stubstrip fix` on this \
         output"
            .to_string()
    };
    StubMark {
        directory: s(dir),
        driver_library: driver,
        message,
    }
}

#[derive(Serialize)]
struct PassedOverView {
    path: String,
    via: String,
    reason: String,
}

#[derive(Serialize)]
struct LookupView {
    requested_by: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expanded: Option<String>,
    dlopen: bool,
    /// For a `dlopen` the requester makes itself: where the model knows it from (its
    /// `.note.dlopen`, or stubstrip's table of NVIDIA's `dlopen`s).
    #[serde(skip_serializing_if = "Option::is_none")]
    dlopen_known_from: Option<String>,
    /// `loaded`, `already_loaded`, `not_found` or `error`.
    result: &'static str,
    path: Option<String>,
    /// `RPATH`, `LD_LIBRARY_PATH`, `resolution-cache note`, `RUNPATH`, `ld.so.cache`,
    /// `default directories`, `direct`.
    found_via: Option<&'static str>,
    /// The object whose RPATH, RUNPATH or resolution-cache note found it.
    search_list_of: Option<String>,
    /// For `already_loaded`: `name`, `soname` or `same file`.
    reused_by: Option<&'static str>,
    stub: Option<StubMark>,
    error: Option<String>,
    passed_over: Vec<PassedOverView>,
    notes: Vec<String>,
    depth: usize,
    /// Whether the library is one the GPU driver provides (`libcuda.so.1`, ...): the lookups
    /// the report's first lines answer for.
    driver_library: bool,
    /// Why the lookup ended where it did, in the words of those lines (`found in its RUNPATH;
    /// STUB: ...`, `already loaded`).
    why: String,
    /// With `--assume-driver`: the driver link a driver library missing here is counted as
    /// found in, because it is on the lookup's search path.
    #[serde(skip_serializing_if = "Option::is_none")]
    assumed_in_driver_link: Option<String>,
    #[serde(skip)]
    object: Option<usize>,
    #[serde(skip)]
    loaded_here: bool,
    #[serde(skip)]
    requester: usize,
}

#[derive(Serialize)]
struct SettingsView {
    default_dirs: Vec<String>,
    default_dirs_from: String,
    cache: String,
    ld_library_path: Option<String>,
    lib: String,
    platform: Option<String>,
    platform_from: String,
    /// `read` (nixpkgs PR #535735's patched glibc) or `ignored` (upstream glibc).
    resolution_cache_note: &'static str,
    /// Whether the `dlopen`s of loaded objects are followed.
    dlopen_followed: bool,
}

#[derive(Serialize, Default)]
struct ExplainSummary {
    loaded: usize,
    not_found: usize,
    errors: usize,
    stubs: usize,
    /// `dlopen`s of loaded objects that find nothing (the program copes: not a problem).
    dlopen_not_found: usize,
    /// With `--assume-driver`: driver libraries missing here, counted as found in the driver
    /// link (not in `not_found`).
    #[serde(skip_serializing_if = "Option::is_none")]
    assumed_from_driver: Option<usize>,
}

/// The report of `stubstrip explain`.
#[derive(Serialize)]
pub struct ExplainReport {
    command: &'static str,
    file: String,
    architecture: String,
    interpreter: Option<String>,
    settings: SettingsView,
    lookups: Vec<LookupView>,
    summary: ExplainSummary,
    #[serde(skip)]
    filtered: bool,
}

fn step_kind(step: SearchStep) -> &'static str {
    match step {
        SearchStep::Direct => "direct",
        SearchStep::Rpath(_) => "RPATH",
        SearchStep::LdLibraryPath => "LD_LIBRARY_PATH",
        SearchStep::Note(_) => "resolution-cache note",
        SearchStep::Runpath(_) => "RUNPATH",
        SearchStep::Cache => "ld.so.cache",
        SearchStep::DefaultDirs => "default directories",
    }
}

fn owner(res: &Resolution, step: SearchStep) -> Option<String> {
    match step {
        SearchStep::Rpath(i) | SearchStep::Runpath(i) | SearchStep::Note(i) => {
            Some(s(&res.objects[i].path))
        }
        _ => None,
    }
}

fn lookup_view(
    res: &Resolution,
    r: &LibraryRequest,
    depth: usize,
    fs: &dyn FsView,
    m: &StubMatcher,
) -> LookupView {
    let mut v = LookupView {
        requested_by: s(&res.objects[r.requester].path),
        name: s(&r.name),
        expanded: (r.expanded != r.name).then(|| s(&r.expanded)),
        dlopen: r.dlopen,
        dlopen_known_from: r.dlopen_source.as_ref().map(|d| d.describe()),
        result: "not_found",
        path: None,
        found_via: None,
        search_list_of: None,
        reused_by: None,
        stub: None,
        error: None,
        passed_over: r
            .passed
            .iter()
            .map(|a| PassedOverView {
                path: s(&a.path),
                via: res.step_label(a.step),
                reason: a.why.describe(),
            })
            .collect(),
        notes: r.notes.clone(),
        // A dlopen asked for on the command line is the program's, at the top; one an object
        // makes itself sits under that object.
        depth: if r.dlopen && r.dlopen_source.is_none() {
            0
        } else {
            depth
        },
        driver_library: is_driver_library(base_bytes(&r.expanded)),
        why: String::new(),
        assumed_in_driver_link: None,
        object: None,
        loaded_here: false,
        requester: r.requester,
    };
    let mut found: Option<(usize, Bytes)> = None;
    match &r.outcome {
        LookupOutcome::Loaded(i, step) => {
            v.result = "loaded";
            v.found_via = Some(step_kind(*step));
            v.search_list_of = owner(res, *step);
            v.loaded_here = true;
            found = Some((*i, res.objects[*i].path.clone()));
        }
        LookupOutcome::AlreadyLoaded(i, how) => {
            v.result = "already_loaded";
            v.reused_by = Some(match how {
                Reuse::Name => "name",
                Reuse::Soname => "soname",
                Reuse::SameFile(..) => "same file",
            });
            if let Reuse::SameFile(p, step) = how {
                v.found_via = Some(step_kind(*step));
                v.search_list_of = owner(res, *step);
                found = Some((*i, p.clone()));
            } else {
                found = Some((*i, res.objects[*i].path.clone()));
            }
        }
        LookupOutcome::NotFound(other_class) => {
            if *other_class {
                v.error = Some(format!(
                    "wrong ELF class: only {} files of the other class were found",
                    s(&r.expanded)
                ));
            }
        }
        LookupOutcome::Failed(path, step, e) => {
            v.result = "error";
            v.path = Some(s(path));
            v.found_via = Some(step_kind(*step));
            v.search_list_of = owner(res, *step);
            v.error = Some(e.clone());
        }
        LookupOutcome::BadName(e) => {
            v.result = "error";
            v.error = Some(e.clone());
        }
    }
    if let Some((i, path)) = found {
        v.object = Some(i);
        v.path = Some(s(&path));
        let o = &res.objects[i];
        if matches!(o.kind, ObjectKind::Library | ObjectKind::Dlopened) {
            let canonical = fs.canonical(&path);
            if let Some(dir) = stub_dir(&path, canonical.as_deref(), m) {
                v.stub = Some(stub_mark(&r.expanded, o.info.soname.as_deref(), &dir));
            }
        }
    }
    v.why = why(&v);
    v
}

fn base_bytes(p: &[u8]) -> &[u8] {
    p.rsplit(|&c| c == b'/').next().unwrap_or(p)
}

/// The file name of a path.
fn base(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Where a lookup found its file, in words: `found in its RUNPATH`, `found in ld.so.cache`,
/// and `(the driver link)` when the directory is one.
fn found_words(l: &LookupView) -> Option<String> {
    let of = |kind: &str| match &l.search_list_of {
        Some(o) if *o == l.requested_by => format!("its {kind}"),
        Some(o) => format!("the {kind} of {}", base(o)),
        None => kind.to_string(),
    };
    let mut w = match l.found_via? {
        k @ ("RPATH" | "RUNPATH") => format!("found in {}", of(k)),
        k @ "resolution-cache note" => format!("found through {}", of(k)),
        "default directories" => "found in the default directories".to_string(),
        "direct" => "named by its path".to_string(),
        k => format!("found in {k}"),
    };
    let dir = l
        .path
        .as_deref()
        .map(|p| p.rsplit_once('/').map_or("", |(d, _)| d));
    if dir.is_some_and(|d| RUNTIME_DIRS.contains(&d)) {
        w.push_str(" (the driver link)");
    }
    Some(w)
}

/// What a stub in place of the library means, in a few words.
fn stub_words(l: &LookupView) -> Option<&'static str> {
    let st = l.stub.as_ref()?;
    Some(
        if base(l.expanded.as_deref().unwrap_or(&l.name)).starts_with("libcuda.so") {
            "CUDA calls fail with CUDA_ERROR_STUB_LIBRARY (34)"
        } else if st.driver_library {
            "a link-time stub, not the driver's library"
        } else {
            "a link-time stub, not meant to be loaded at run time"
        },
    )
}

/// Why a lookup ended where it did: the words after its file in the report's first lines.
fn why(l: &LookupView) -> String {
    let mut w = match l.result {
        "loaded" => found_words(l).unwrap_or_default(),
        "already_loaded" => match found_words(l) {
            Some(f) => format!("already loaded ({f} again, the same file)"),
            None => "already loaded".to_string(),
        },
        "error" => l.error.clone().unwrap_or_default(),
        _ => match (&l.error, l.dlopen, l.driver_library) {
            (Some(e), ..) => e.clone(),
            // Only a dlopen the object makes by itself is one it copes with (no failure); one
            // asked for on the command line is the question, and fails it.
            (None, true, _) if l.dlopen_known_from.is_some() => {
                "the dlopen() finds nothing here (the program copes)".to_string()
            }
            (None, true, _) => "the dlopen() finds nothing here".to_string(),
            (None, false, true) => "the driver provides it where the program runs".to_string(),
            (None, false, false) => String::new(),
        },
    };
    if let Some(st) = stub_words(l) {
        if !w.is_empty() {
            w.push_str("; ");
        }
        w.push_str("STUB: ");
        w.push_str(st);
    }
    w
}

fn wanted(r: &LibraryRequest, res: &Resolution, names: &[Bytes]) -> bool {
    let base = |p: &[u8]| p.rsplit(|&c| c == b'/').next().unwrap_or(p).to_vec();
    let object_names = match &r.outcome {
        LookupOutcome::Loaded(i, _) | LookupOutcome::AlreadyLoaded(i, _) => {
            let o = &res.objects[*i];
            let mut v = vec![base(&o.path)];
            v.extend(o.info.soname.clone());
            v
        }
        _ => Vec::new(),
    };
    names.iter().any(|n| {
        *n == r.name || *n == r.expanded || base(&r.expanded) == *n || object_names.contains(n)
    })
}

/// The lookups in the order the loader makes them, each with the depth of its requester in the
/// "loaded by" tree.
fn build_lookups(
    res: &Resolution,
    libnames: &[Bytes],
    stubs: &StubMatcher,
    fs: &dyn FsView,
) -> Vec<LookupView> {
    let mut depth = vec![0usize; res.objects.len()];
    for r in &res.requests {
        if let LookupOutcome::Loaded(i, _) = r.outcome {
            depth[i] = depth[r.requester] + 1;
        }
    }
    res.requests
        .iter()
        .filter(|r| libnames.is_empty() || wanted(r, res, libnames))
        .map(|r| lookup_view(res, r, depth[r.requester], fs, stubs))
        .collect()
}

/// The order to print lookups in: depth-first along "loaded by", so that each library sits under
/// the object that loaded it.
fn tree_order(r: &ExplainReport) -> Vec<usize> {
    fn walk(r: &ExplainReport, requester: usize, out: &mut Vec<usize>) {
        for (k, l) in r.lookups.iter().enumerate() {
            if l.requester != requester {
                continue;
            }
            out.push(k);
            if let (true, Some(child)) = (l.loaded_here, l.object) {
                walk(r, child, out);
            }
        }
    }
    if r.filtered {
        return (0..r.lookups.len()).collect();
    }
    let mut out = Vec::new();
    walk(r, 0, &mut out);
    out
}

/// The first line: the file, its architecture and interpreter.
fn render_header(r: &ExplainReport, o: &mut String) {
    let _ = writeln!(
        *o,
        "{}: {}{}",
        r.file,
        r.architecture,
        r.interpreter
            .as_ref()
            .map(|i| format!(", interpreter {i}"))
            .unwrap_or_default()
    );
}

/// The loader's settings (`-v`).
fn render_settings(r: &ExplainReport, o: &mut String) {
    let _ = writeln!(*o, "the loader:");
    let st = &r.settings;
    let _ = writeln!(
        *o,
        "  default dirs     {} ({})",
        st.default_dirs.join(":"),
        st.default_dirs_from
    );
    let _ = writeln!(*o, "  ld.so.cache      {}", st.cache);
    let _ = writeln!(
        *o,
        "  LD_LIBRARY_PATH  {}",
        st.ld_library_path.as_deref().unwrap_or("(unset)")
    );
    let _ = writeln!(
        *o,
        "  $LIB={}  $PLATFORM={} ({})",
        st.lib,
        st.platform.as_deref().unwrap_or("(none)"),
        st.platform_from
    );
    let _ = writeln!(
        *o,
        "  note             resolution-cache note {}; dlopen {}",
        if st.resolution_cache_note == "read" {
            "read (glibc patched as in nixpkgs PR #535735; --glibc upstream ignores it)"
        } else {
            "ignored (upstream glibc)"
        },
        if st.dlopen_followed {
            "followed"
        } else {
            "not followed"
        }
    );
}

/// How much the text says besides the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    /// The loader's settings and every lookup (`-v`).
    pub verbose: bool,
    /// Where each `dlopen` is known from (`--why`).
    pub why: bool,
}

/// Whether a lookup is a problem the exit status counts: a library not found (not a `dlopen`
/// the object makes by itself, which it copes with), one that cannot load, a stub.
fn is_problem(l: &LookupView) -> bool {
    match l.result {
        "not_found" => l.dlopen_known_from.is_none() && l.assumed_in_driver_link.is_none(),
        "error" => true,
        _ => l.stub.is_some() && l.loaded_here,
    }
}

/// The lookups the first lines answer for, each row with the lookups it stands for: every
/// lookup of a driver library, `libcuda.so.1` first, then the other driver libraries in the
/// order of [`DRIVER_LIBRARIES`], then every other problem, each in the loader's order (with
/// LIBNAMEs, every lookup shown, in the loader's order). Lookups of one name that end the same
/// way (the same file, already loaded; nothing found) are one row.
fn answer_rows(r: &ExplainReport) -> Vec<Vec<usize>> {
    type Key<'a> = (&'a str, &'static str, Option<&'a str>, &'a str);
    let mut rows: Vec<(Key, Vec<usize>)> = Vec::new();
    for (k, l) in r.lookups.iter().enumerate() {
        if !(r.filtered || l.driver_library || is_problem(l)) {
            continue;
        }
        let key = (l.name.as_str(), l.result, l.path.as_deref(), l.why.as_str());
        match rows.iter_mut().find(|(k2, _)| *k2 == key) {
            Some((_, row)) => row.push(k),
            None => rows.push((key, vec![k])),
        }
    }
    if !r.filtered {
        // Stable: the loader's order within each library.
        rows.sort_by_key(|(_, row)| {
            let l = &r.lookups[row[0]];
            let name = base(l.expanded.as_deref().unwrap_or(&l.name));
            DRIVER_LIBRARIES
                .iter()
                .position(|d| *d == name)
                .unwrap_or(DRIVER_LIBRARIES.len())
        });
    }
    rows.into_iter().map(|(_, row)| row).collect()
}

/// Who asked, for an answer line: `libcudart.so.13 (dlopen)`, `app`; at most six, then how
/// many more.
fn requesters(r: &ExplainReport, row: &[usize]) -> String {
    const SHOWN: usize = 6;
    let who = |k: &usize| {
        let l = &r.lookups[*k];
        let b = base(&l.requested_by);
        match (l.dlopen, l.dlopen_known_from.is_some()) {
            (true, true) => format!("{b} (dlopen)"),
            (true, false) => format!("{b} (dlopen, as asked)"),
            _ => b.to_string(),
        }
    };
    let mut names: Vec<String> = row.iter().take(SHOWN).map(who).collect();
    if row.len() > SHOWN {
        names.push(format!("{} more", row.len() - SHOWN));
    }
    match names.len() {
        0 | 1 => names.concat(),
        n => format!("{} and {}", names[..n - 1].join(", "), names[n - 1]),
    }
}

/// The first lines: for each driver library (and each problem), which file each object gets
/// and why, one line each; with `why`, where each `dlopen` is known from under its line.
fn render_answer(r: &ExplainReport, d: Detail, o: &mut String) {
    let rows = answer_rows(r);
    if rows.is_empty() {
        // The two the users ask about; the whole list is driver::DRIVER_LIBRARIES.
        let _ = writeln!(
            *o,
            "no GPU driver library (libcuda.so.1, libnvidia-ml.so.1, ...) is needed or dlopen()ed, \
             and every library is found"
        );
        return;
    }
    for row in rows {
        let l = &r.lookups[row[0]];
        let name = match &l.expanded {
            Some(e) => format!("{} ({e})", l.name),
            None => l.name.clone(),
        };
        let target = match (l.result, &l.path) {
            ("loaded" | "already_loaded", Some(p)) => p.clone(),
            ("error", Some(p)) => format!("ERROR: {p}"),
            ("error", None) => "ERROR".to_string(),
            _ => match &l.assumed_in_driver_link {
                Some(d) => format!("{d}/{}", base(l.expanded.as_deref().unwrap_or(&l.name))),
                None => "NOT FOUND".to_string(),
            },
        };
        let sep = if l.why.is_empty() { "" } else { ": " };
        let _ = writeln!(
            *o,
            "{name} for {} => {target}{sep}{}",
            requesters(r, &row),
            l.why
        );
        if d.why {
            let mut known: Vec<&str> = row
                .iter()
                .filter_map(|k| r.lookups[*k].dlopen_known_from.as_deref())
                .collect();
            known.dedup();
            for k in known {
                let _ = writeln!(*o, "    dlopen known from {k}");
            }
        }
    }
}

/// A lookup that only reuses an object loaded before, with nothing else to say: the tree
/// shows those of one object on one line.
fn plain_reuse(l: &LookupView) -> bool {
    l.result == "already_loaded"
        && l.found_via.is_none()
        && l.passed_over.is_empty()
        && l.notes.is_empty()
}

/// One lookup in the tree (or, with LIBNAMEs, the list), with what it passed over.
fn render_lookup(r: &ExplainReport, l: &LookupView, d: Detail, pad: &str, o: &mut String) {
    let via = |l: &LookupView| match (&l.found_via, &l.search_list_of) {
        (Some(k), Some(owner)) => format!("[{k} of {}]", base(owner)),
        (Some(k), None) => format!("[{k}]"),
        _ => String::new(),
    };
    let name = match &l.expanded {
        Some(e) => format!("{} ({e})", l.name),
        None => l.name.clone(),
    };
    let from = if l.dlopen_known_from.is_some() {
        format!("dlopen {name}")
    } else if l.dlopen {
        format!("dlopen({}) from {}", name, base(&l.requested_by))
    } else if r.filtered {
        format!("{name} (needed by {})", l.requested_by)
    } else {
        name
    };
    let stub = if l.stub.is_some() { "  STUB" } else { "" };
    let line = match l.result {
        "loaded" => format!("{from} => {}  {}", l.path.as_deref().unwrap_or(""), via(l)),
        "already_loaded" => format!(
            "{from} => {}  (already loaded, by {}{}){stub}",
            l.path.as_deref().unwrap_or(""),
            l.reused_by.unwrap_or(""),
            if l.found_via.is_some() {
                format!(", found again {}", via(l))
            } else {
                String::new()
            }
        ),
        "error" => format!(
            "{from} => ERROR: {}{}  {}",
            l.path
                .as_deref()
                .map(|p| format!("{p}: "))
                .unwrap_or_default(),
            l.error.as_deref().unwrap_or(""),
            via(l)
        ),
        _ => format!(
            "{from} => NOT FOUND{}",
            l.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
    };
    let _ = writeln!(*o, "{pad}{}", line.trim_end());
    // Consecutive misses of one step on one line, by directory; anything else on its own.
    let mut i = 0;
    while i < l.passed_over.len() {
        let p = &l.passed_over[i];
        if p.reason == "missing" {
            let mut dirs = Vec::new();
            while let Some(q) = l
                .passed_over
                .get(i)
                .filter(|q| q.reason == "missing" && q.via == p.via)
            {
                dirs.push(match q.path.rfind('/') {
                    Some(j) => q.path[..=j].to_string(),
                    None => "./".to_string(),
                });
                i += 1;
            }
            let via = match p.via.split_once(" of ") {
                Some((k, owner)) => format!("{k} of {}", base(owner)),
                None => p.via.clone(),
            };
            let _ = writeln!(*o, "{pad}      not in {}  [{via}]", dirs.join(" "));
            continue;
        }
        let _ = writeln!(*o, "{pad}      passed over {}: {}", p.path, p.reason);
        i += 1;
    }
    for n in &l.notes {
        let _ = writeln!(*o, "{pad}      note: {n}");
    }
    if let (Some(k), true) = (&l.dlopen_known_from, d.why) {
        let _ = writeln!(
            *o,
            "{pad}      dlopen by {}, known from {k}",
            base(&l.requested_by)
        );
    }
    if let (Some(st), "loaded") = (&l.stub, l.result) {
        let _ = writeln!(
            *o,
            "{pad}      !!! STUB !!! {} is a stub (in {}): {}",
            l.path.as_deref().unwrap_or(""),
            st.directory,
            st.message
        );
    }
}

/// Every lookup, each library under the object that loaded it; the lookups of one object that
/// only reuse what is loaded already are one `already loaded: ...` line.
fn render_tree(r: &ExplainReport, d: Detail, o: &mut String) {
    let mut reused: Vec<String> = Vec::new();
    let mut reused_pad = String::new();
    let flush = |reused: &mut Vec<String>, pad: &str, o: &mut String| {
        if !reused.is_empty() {
            let _ = writeln!(*o, "{pad}already loaded: {}", reused.join(", "));
            reused.clear();
        }
    };
    for k in tree_order(r) {
        let l = &r.lookups[k];
        let pad = if r.filtered {
            String::new()
        } else {
            "    ".repeat(l.depth)
        };
        if !r.filtered && plain_reuse(l) {
            if pad != reused_pad {
                flush(&mut reused, &reused_pad, o);
                reused_pad = pad;
            }
            let dl = if l.dlopen { "dlopen " } else { "" };
            let by = if l.reused_by == Some("soname") {
                " (by soname)"
            } else {
                ""
            };
            let stub = if l.stub.is_some() { " (STUB)" } else { "" };
            reused.push(format!("{dl}{}{by}{stub}", l.name));
            continue;
        }
        flush(&mut reused, &reused_pad, o);
        render_lookup(r, l, d, &pad, o);
    }
    flush(&mut reused, &reused_pad, o);
}

/// The count of lookups by outcome, and (without `-v` or `--why`) what more there is to see.
fn render_summary(r: &ExplainReport, d: Detail, o: &mut String) {
    let sm = &r.summary;
    let mut more = Vec::new();
    if !d.verbose {
        more.push("-v: every lookup and the loader's settings");
    }
    if !d.why && r.lookups.iter().any(|l| l.dlopen_known_from.is_some()) {
        more.push("--why: where each dlopen() is known from");
    }
    let assumed = match sm.assumed_from_driver {
        Some(n) => format!(", {n} assumed in the driver link (--assume-driver)"),
        None => String::new(),
    };
    let _ = writeln!(
        *o,
        "{} loaded{assumed}, {} not found, {} {}, {} {}{}{}",
        sm.loaded,
        sm.not_found,
        sm.errors,
        if sm.errors == 1 { "error" } else { "errors" },
        sm.stubs,
        if sm.stubs == 1 { "stub" } else { "stubs" },
        if sm.dlopen_not_found > 0 {
            format!(
                " ({} dlopen {} nothing)",
                sm.dlopen_not_found,
                if sm.dlopen_not_found == 1 {
                    "finds"
                } else {
                    "find"
                }
            )
        } else {
            String::new()
        },
        if more.is_empty() {
            String::new()
        } else {
            format!("; {}", more.join("; "))
        }
    );
}

/// The text: the file, the answer for the driver libraries and the problems, and with `-v` the
/// loader's settings and every lookup; then the count.
fn render_text(r: &ExplainReport, d: Detail) -> String {
    let mut o = String::new();
    render_header(r, &mut o);
    render_answer(r, d, &mut o);
    if d.verbose {
        o.push('\n');
        render_settings(r, &mut o);
        o.push('\n');
        render_tree(r, d, &mut o);
    }
    o.push('\n');
    render_summary(r, d, &mut o);
    o
}

/// The first driver link directory ([`RUNTIME_DIRS`]) the loader searches for a library of
/// object `requester`: in its RUNPATH, or without one in the RPATH of it or of an object that
/// loaded it, or in `ld_library_path`. Driver link directories are absolute, so no `$ORIGIN`
/// expansion is needed to recognise them.
fn driver_link_on_path(
    res: &Resolution,
    requester: usize,
    ld_library_path: &str,
) -> Option<&'static str> {
    let mut lists: Vec<String> = vec![ld_library_path.to_string()];
    let o = &res.objects[requester];
    match &o.info.runpath {
        Some(rp) => lists.push(s(rp)),
        None => {
            let mut at = Some(requester);
            while let Some(i) = at {
                lists.extend(res.objects[i].info.rpath.as_deref().map(s));
                // The program has no loader; a chain that loops would be a model bug.
                at = res.objects[i].loader.filter(|&l| l != i);
            }
        }
    }
    RUNTIME_DIRS.iter().copied().find(|d| {
        lists.iter().any(|list| {
            list.split([':', ';'])
                .any(|e| e.trim_end_matches('/') == *d)
        })
    })
}

impl ExplainReport {
    /// The report of a resolution: `libnames` (when not empty) selects the lookups to show,
    /// `stubs` says which directories hold stubs, `fs` resolves the symlinks of found files.
    pub fn new(
        res: &Resolution,
        st: &LoaderSettings,
        prov: &SettingsProvenance,
        libnames: &[Bytes],
        stubs: &StubMatcher,
        fs: &dyn FsView,
    ) -> ExplainReport {
        let lookups = build_lookups(res, libnames, stubs, fs);
        let mut summary = ExplainSummary::default();
        for l in &lookups {
            match l.result {
                "loaded" => summary.loaded += 1,
                "not_found" if l.dlopen_known_from.is_some() => summary.dlopen_not_found += 1,
                "not_found" => summary.not_found += 1,
                "error" => summary.errors += 1,
                _ => {}
            }
            if l.stub.is_some() && l.loaded_here {
                summary.stubs += 1;
            }
        }
        ExplainReport {
            command: "explain",
            file: s(&res.objects[0].path),
            architecture: st.target.name(),
            interpreter: st.interpreter.as_ref().map(|i| s(&i.path)),
            settings: SettingsView {
                default_dirs: st.system_dirs.iter().map(|d| s(d)).collect(),
                default_dirs_from: prov.system_dirs.clone(),
                cache: prov.cache.clone(),
                ld_library_path: st.ld_library_path.as_ref().map(|p| s(p)),
                lib: s(&st.lib),
                platform: st.platform.as_ref().map(|p| s(p)),
                platform_from: prov.platform.clone(),
                resolution_cache_note: if st.read_ld_cache_note {
                    "read"
                } else {
                    "ignored"
                },
                dlopen_followed: st.follow_dlopen,
            },
            lookups,
            summary,
            filtered: !libnames.is_empty(),
        }
    }

    /// Whether a driver library (`libcuda.so.1`, ...) is found nowhere.
    pub fn driver_library_not_found(&self) -> bool {
        self.lookups
            .iter()
            .any(|l| l.result == "not_found" && l.driver_library && l.error.is_none())
    }

    /// Says `why` of each driver library found nowhere: on a machine that is not NixOS, the
    /// driver link is missing, and what makes it (`crate::driver_link::explain_hint`).
    pub fn set_driver_link_hint(&mut self, why: &str) {
        for l in &mut self.lookups {
            if l.result == "not_found" && l.driver_library && l.error.is_none() {
                l.why = why.to_string();
            }
        }
    }

    /// `--assume-driver`: the answer for a machine where the driver is provided (a GPU-less
    /// builder asks it). A driver library (`libcuda.so.1`, ...) that is missing here counts as
    /// found when a driver link directory is on its search path: the requester's RUNPATH, else
    /// the RPATHs of it and the objects that loaded it, and LD_LIBRARY_PATH. One whose search
    /// path has no driver link stays NOT FOUND: no machine's driver would be found by it. A
    /// later lookup of a name counted as found counts too, wherever it searches: the loader
    /// would have the library loaded by then, and reuse it.
    pub fn assume_driver(&mut self, res: &Resolution) {
        let llp = self.settings.ld_library_path.clone().unwrap_or_default();
        let mut assumed = 0;
        let mut found: Vec<(String, &'static str)> = Vec::new();
        for l in &mut self.lookups {
            if l.result != "not_found" || !l.driver_library || l.error.is_some() {
                continue;
            }
            let name = base(l.expanded.as_deref().unwrap_or(&l.name)).to_string();
            let earlier = found.iter().find(|(n, _)| *n == name).map(|(_, d)| *d);
            let Some(dir) = earlier.or_else(|| driver_link_on_path(res, l.requester, &llp)) else {
                continue;
            };
            found.push((name, dir));
            l.why = format!(
                "not on this machine; counted as found in the driver link {dir}, which provides \
                 it where the driver is installed (--assume-driver)"
            );
            l.assumed_in_driver_link = Some(dir.to_string());
            if l.dlopen_known_from.is_none() {
                self.summary.not_found -= 1;
            } else {
                self.summary.dlopen_not_found -= 1;
            }
            assumed += 1;
        }
        self.summary.assumed_from_driver = Some(assumed);
    }

    /// Whether something is not found, cannot load, or is a stub.
    pub fn has_problems(&self) -> bool {
        let sm = &self.summary;
        sm.not_found + sm.errors + sm.stubs > 0
    }

    /// The report's text, as much as `detail` asks for, on stdout; or with `json` the whole
    /// report.
    pub fn render(&self, json: bool, detail: Detail) -> Printout {
        if json {
            Printout {
                data: Some(json_text(self)),
                ..Printout::default()
            }
        } else {
            Printout {
                report: render_text(self, detail),
                ..Printout::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use elfpatch::note::{Entry, Hint, ResolutionCache};
    use ldso_model::fsview::ElfInfo;
    use ldso_model::memfs::{dynamic_info as info, x86_64_settings, MemFs};
    use ldso_model::resolve::{resolve, Program};

    const STUBS: &str = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib";
    const DRIVER: &str = "/run/opengl-driver/lib";

    const ALL: Detail = Detail {
        verbose: true,
        why: true,
    };

    fn report(fs: &MemFs, exe: ElfInfo, st: &LoaderSettings) -> ExplainReport {
        let program = Program {
            path: b"/app/bin/app".to_vec(),
            origin: b"/app/bin".to_vec(),
            info: exe,
        };
        let res = resolve(program, &[], st, fs);
        let m = StubMatcher::default();
        ExplainReport::new(&res, st, &SettingsProvenance::default(), &[], &m, fs)
    }

    /// The text with everything (`-v --why`), and the report.
    fn explain(fs: &MemFs, exe: ElfInfo, st: &LoaderSettings) -> (String, ExplainReport) {
        let r = report(fs, exe, st);
        (render_text(&r, ALL), r)
    }

    /// The default text's lines.
    fn short(fs: &MemFs, exe: ElfInfo, st: &LoaderSettings) -> Vec<String> {
        let r = report(fs, exe, st);
        render_text(&r, Detail::default())
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A PyTorch-like tree: the program needs libtorch_cuda, which needs libc10_cuda (holding
    /// the string libcuda.so.1: it dlopen()s it), libcudart (which dlopen()s libcuda.so.1, in
    /// NVIDIA's table) and libcublasLt (the string too); libcudart's RUNPATH holds `runpath`
    /// (the stub directory, or after the fix the driver link), each library holds libc.
    fn torch_like(runpath: &str) -> (MemFs, ElfInfo) {
        let mut fs = MemFs::default();
        let with_string = |needed: &[&str]| ElfInfo {
            rodata_names: vec![b"libcuda.so.1".to_vec()],
            ..info(needed, Some("/t/lib"), None)
        };
        fs.lib(
            "/t/lib/libtorch_cuda.so",
            info(
                &[
                    "libc10_cuda.so",
                    "libcudart.so.13",
                    "libcublasLt.so.13",
                    "libc.so.6",
                ],
                Some("/t/lib:/c/lib"),
                None,
            ),
        )
        .lib("/t/lib/libc10_cuda.so", with_string(&["libc.so.6"]))
        .lib("/t/lib/libcublasLt.so.13", with_string(&["libc.so.6"]))
        .lib(
            "/c/lib/libcudart.so.13",
            ElfInfo {
                soname: Some(b"libcudart.so.13".to_vec()),
                ..info(&["libc.so.6"], Some(runpath), None)
            },
        )
        .lib("/lib/libc.so.6", ElfInfo::default())
        .lib(&format!("{STUBS}/libcuda.so.1"), ElfInfo::default())
        .lib(&format!("{DRIVER}/libcuda.so.1"), ElfInfo::default());
        let exe = info(
            &["libtorch_cuda.so", "libc.so.6"],
            Some("/t/lib:/lib"),
            None,
        );
        (fs, exe)
    }

    #[test]
    fn the_first_lines_say_which_libcuda_each_object_gets_and_why() {
        let (fs, exe) = torch_like(STUBS);
        let st = x86_64_settings(None);
        let lines = short(&fs, exe.clone(), &st);
        assert!(lines[0].starts_with("/app/bin/app: x86_64"), "{lines:#?}");
        // The first lookup of libcuda.so.1 loads it; the others get the same file.
        let first = &lines[1];
        assert!(
            first.starts_with("libcuda.so.1 for ")
                && first.contains(" (dlopen) => ")
                && first.contains(&format!("=> {STUBS}/libcuda.so.1: found in "))
                && first.ends_with("; STUB: CUDA calls fail with CUDA_ERROR_STUB_LIBRARY (34)"),
            "{lines:#?}"
        );
        let same = &lines[2];
        assert!(
            same.starts_with("libcuda.so.1 for ")
                && same.ends_with(&format!("=> {STUBS}/libcuda.so.1: already loaded; STUB: CUDA calls fail with CUDA_ERROR_STUB_LIBRARY (34)")),
            "{lines:#?}"
        );
        // Every object that dlopen()s it is named, in one of the two lines.
        for o in ["libc10_cuda.so", "libcudart.so.13", "libcublasLt.so.13"] {
            assert!(
                lines[1..3]
                    .iter()
                    .any(|l| l.contains(&format!("{o} (dlopen)"))),
                "{o}: {lines:#?}"
            );
        }
        // No tree, no settings, no citation without -v and --why; the count says what more there is.
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(
            lines[4].starts_with("6 loaded, 0 not found, 0 errors, 1 stub; -v: "),
            "{lines:#?}"
        );
        assert!(!lines
            .iter()
            .any(|l| l.contains("NVIDIA table") || l.contains("already loaded, by")));

        // After the fix: libcudart's RUNPATH finds the driver link, and says so.
        let (fs, exe) = torch_like(DRIVER);
        let lines = short(&fs, exe, &st);
        let want = format!(
            "libcuda.so.1 for libcudart.so.13 (dlopen) => {DRIVER}/libcuda.so.1: found in its RUNPATH (the driver link)"
        );
        assert!(lines.contains(&want), "{lines:#?}");
        assert!(!lines.iter().any(|l| l.contains("STUB")), "{lines:#?}");
    }

    #[test]
    fn libcuda_comes_first_then_the_other_driver_libraries_then_the_problems() {
        // libnvidia-ml.so.1 dlopen()ed (the string) and a missing library, both looked up
        // before libcuda.so.1; no driver anywhere: each dlopen finds nothing.
        let mut fs = MemFs::default();
        let both = ElfInfo {
            rodata_names: vec![b"libnvidia-ml.so.1".to_vec(), b"libcuda.so.1".to_vec()],
            ..info(&[], Some("/t/lib"), None)
        };
        fs.lib("/t/lib/libc10_cuda.so", both.clone())
            .lib("/t/lib/libnccl.so.2", both)
            .lib(
                "/c/lib/libcudart.so.13",
                ElfInfo {
                    soname: Some(b"libcudart.so.13".to_vec()),
                    ..info(&[], Some("/c/lib"), None)
                },
            );
        let exe = info(
            &[
                "libmissing.so.3",
                "libc10_cuda.so",
                "libnccl.so.2",
                "libcudart.so.13",
            ],
            Some("/t/lib:/c/lib"),
            None,
        );
        let lines = short(&fs, exe, &x86_64_settings(None));
        assert!(
            lines[1].starts_with("libcuda.so.1 for libcudart.so.13 (dlopen), ")
                && lines[1].contains("libc10_cuda.so (dlopen)")
                && lines[1].ends_with(
                    " => NOT FOUND: the dlopen() finds nothing here (the program copes)"
                ),
            "{lines:#?}"
        );
        assert!(
            lines[2].starts_with(
                "libnvidia-ml.so.1 for libc10_cuda.so (dlopen) and libnccl.so.2 (dlopen) => NOT FOUND"
            ),
            "{lines:#?}"
        );
        assert_eq!(
            lines[3], "libmissing.so.3 for app => NOT FOUND",
            "{lines:#?}"
        );
        assert_eq!(lines[4], "", "{lines:#?}");
    }

    #[test]
    fn without_a_driver_library_the_first_lines_say_so_and_problems_still_show() {
        let mut fs = MemFs::default();
        fs.lib("/lib/libc.so.6", ElfInfo::default());
        let exe = info(&["libc.so.6"], Some("/lib"), None);
        let lines = short(&fs, exe.clone(), &x86_64_settings(None));
        assert!(
            lines[1].starts_with("no GPU driver library (libcuda.so.1, "),
            "{lines:#?}"
        );
        let exe = info(&["libc.so.6", "libgone.so.2"], Some("/lib"), None);
        let lines = short(&fs, exe, &x86_64_settings(None));
        assert_eq!(lines[1], "libgone.so.2 for app => NOT FOUND", "{lines:#?}");
    }

    #[test]
    fn the_tree_collapses_what_only_reuses_a_loaded_object_and_why_gives_the_sources() {
        let (fs, exe) = torch_like(STUBS);
        let st = x86_64_settings(None);
        let r = report(&fs, exe, &st);
        let verbose = render_text(
            &r,
            Detail {
                verbose: true,
                why: false,
            },
        );
        assert!(verbose.contains("\nthe loader:\n"), "{verbose}");
        assert!(!verbose.contains("(already loaded, by name)"), "{verbose}");
        assert!(verbose.contains("already loaded: libc.so.6"), "{verbose}");
        assert!(verbose.contains("!!! STUB !!!"), "{verbose}");
        assert!(!verbose.contains("NVIDIA table"), "{verbose}");
        // The answer comes first, the tree after it.
        let answer = verbose.find("libcuda.so.1 for ").unwrap();
        assert!(answer < verbose.find("the loader:").unwrap(), "{verbose}");
        let why = render_text(
            &r,
            Detail {
                verbose: false,
                why: true,
            },
        );
        assert!(
            why.contains(
                "\n    dlopen known from stubstrip's NVIDIA table, entry for libcudart.so.*"
            ),
            "{why}"
        );
        assert!(!why.contains("--why: "), "{why}");
        // JSON keeps every lookup, with the answer's words.
        let v: serde_json::Value = serde_json::from_str(&json_text(&r)).unwrap();
        let lookups = v["lookups"].as_array().unwrap();
        assert_eq!(lookups.len(), r.lookups.len());
        assert!(lookups
            .iter()
            .any(|l| l["driver_library"] == true
                && l["why"].as_str().unwrap().starts_with("found in ")));
    }

    #[test]
    fn a_dlopen_of_libcudart_is_shown_under_it_with_where_it_is_known_from() {
        let mut fs = MemFs::default();
        let cudart = ElfInfo {
            soname: Some(b"libcudart.so.12".to_vec()),
            ..info(&[], Some(STUBS), None)
        };
        fs.lib("/c/lib/libcudart.so.12", cudart)
            .lib(&format!("{STUBS}/libcuda.so.1"), ElfInfo::default())
            .lib(
                "/t/lib/libtorch_cuda.so",
                info(&["libcudart.so.12"], Some("/c/lib"), None),
            );
        let exe = info(&["libtorch_cuda.so"], Some("/t/lib"), None);
        let (text, r) = explain(&fs, exe.clone(), &x86_64_settings(None));
        let want = format!(
            "\n        dlopen libcuda.so.1 => {STUBS}/libcuda.so.1  [RUNPATH of libcudart.so.12]\n"
        );
        assert!(text.contains(&want), "{text}");
        let from =
            "\n              dlopen by libcudart.so.12, known from stubstrip's NVIDIA table, \
                    entry for libcudart.so.* (the CUDA runtime): NVIDIA CUDA Compatibility guide";
        assert!(text.contains(from), "{text}");
        assert!(text.contains("!!! STUB !!!"), "{text}");
        assert_eq!(r.summary.stubs, 1);
        assert!(r.has_problems());
        // Without a driver anywhere, the dlopen finds nothing: not a problem by itself.
        let mut fs2 = fs.clone();
        fs2.nodes.remove(format!("{STUBS}/libcuda.so.1").as_bytes());
        let (text, r) = explain(&fs2, exe.clone(), &x86_64_settings(None));
        assert!(text.contains("dlopen libcuda.so.1 => NOT FOUND"), "{text}");
        assert!(text.contains("(1 dlopen finds nothing)"), "{text}");
        assert!(!r.has_problems());
        let mut st = x86_64_settings(None);
        st.follow_dlopen = false;
        let (text, _) = explain(&fs, exe, &st);
        assert!(!text.contains("dlopen libcuda.so.1"), "{text}");
        assert!(text.contains("dlopen not followed"), "{text}");
    }

    #[test]
    fn a_library_from_the_note_says_so_and_upstream_glibc_ignores_it() {
        let mut fs = MemFs::default();
        fs.lib(&format!("{STUBS}/libcuda.so.1"), ElfInfo::default())
            .lib(&format!("{DRIVER}/libcuda.so.1"), ElfInfo::default());
        let mut exe = info(&["libcuda.so.1"], Some(DRIVER), None);
        exe.ld_cache_note = Some(Ok(ResolutionCache {
            entries: vec![Entry {
                needed: b"libcuda.so.1".to_vec(),
                hints: vec![Hint::Exact(format!("{STUBS}/libcuda.so.1").into_bytes())],
            }],
        }));
        let (text, r) = explain(&fs, exe.clone(), &x86_64_settings(None));
        let want = format!("libcuda.so.1 => {STUBS}/libcuda.so.1  [resolution-cache note of app]");
        assert!(text.contains(&want), "{text}");
        assert_eq!(r.summary.stubs, 1);
        let mut st = x86_64_settings(None);
        st.read_ld_cache_note = false;
        let (text, r) = explain(&fs, exe, &st);
        assert!(
            text.contains(&format!(
                "libcuda.so.1 => {DRIVER}/libcuda.so.1  [RUNPATH of app]"
            )),
            "{text}"
        );
        assert!(
            text.contains("resolution-cache note ignored (upstream glibc)"),
            "{text}"
        );
        assert_eq!(r.summary.stubs, 0);
    }

    #[test]
    fn stubs_are_recognised_by_directory_or_link_target() {
        let m = StubMatcher::default();
        let store = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs";
        assert!(stub_dir(format!("{store}/lib/libcuda.so.1").as_bytes(), None, &m).is_some());
        assert!(stub_dir(b"/usr/local/cuda/lib64/stubs/libcuda.so", None, &m).is_some());
        assert!(stub_dir(b"/usr/lib/x86_64-linux-gnu/libcuda.so.1", None, &m).is_none());
        assert!(stub_dir(
            b"/opt/x/libcuda.so.1",
            Some(b"/usr/local/cuda/lib64/stubs/libcuda.so"),
            &m
        )
        .is_some());
        let mark = stub_mark(b"libcuda.so.1", None, b"/x/stubs");
        assert!(mark.driver_library);
        let mark = stub_mark(b"libfoo.so.1", Some(b"libfoo.so.1"), b"/x/stubs");
        assert!(!mark.driver_library);
    }
}
