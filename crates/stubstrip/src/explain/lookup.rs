//! One lookup of the loader as `explain` shows it: what it found and why, in the words of the
//! report's first lines, and its lines in the tree (pure). [`super::report`] orders and counts
//! the lookups and writes the rest.

use std::fmt::Write;

use serde::Serialize;

use ldso_model::fsview::{Bytes, FsView};
use ldso_model::resolve::{
    LibraryRequest, LookupOutcome, ObjectKind, Resolution, Reuse, SearchStep,
};

use crate::driver::{is_driver_library, RUNTIME_DIRS};
use crate::rule::StubMatcher;
use crate::stubs::stub_dir;

/// `b` as text.
pub(super) fn s(b: &[u8]) -> String {
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

/// What a stub in place of library `name` (with `soname`) in `dir` means.
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

/// A file a lookup passed over, and why.
#[derive(Serialize)]
pub(super) struct PassedOverView {
    path: String,
    via: String,
    reason: String,
}

/// One lookup of the loader, as the report shows it.
#[derive(Serialize)]
pub(super) struct LookupView {
    pub(super) requested_by: String,
    pub(super) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expanded: Option<String>,
    pub(super) dlopen: bool,
    /// For a `dlopen` the requester makes itself: where the model knows it from (its
    /// `.note.dlopen`, or stubstrip's table of NVIDIA's `dlopen`s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dlopen_known_from: Option<String>,
    /// `loaded`, `already_loaded`, `not_found` or `error`.
    pub(super) result: &'static str,
    pub(super) path: Option<String>,
    /// `RPATH`, `LD_LIBRARY_PATH`, `resolution-cache note`, `RUNPATH`, `ld.so.cache`,
    /// `default directories`, `direct`.
    pub(super) found_via: Option<&'static str>,
    /// The object whose RPATH, RUNPATH or resolution-cache note found it.
    pub(super) search_list_of: Option<String>,
    /// For `already_loaded`: `name`, `soname` or `same file`.
    pub(super) reused_by: Option<&'static str>,
    pub(super) stub: Option<StubMark>,
    pub(super) error: Option<String>,
    pub(super) passed_over: Vec<PassedOverView>,
    pub(super) notes: Vec<String>,
    pub(super) depth: usize,
    /// Whether the library is one the GPU driver provides (`libcuda.so.1`, ...): the lookups
    /// the report's first lines answer for.
    pub(super) driver_library: bool,
    /// Why the lookup ended where it did, in the words of those lines (`found in its RUNPATH;
    /// STUB: ...`, `already loaded`).
    pub(super) why: String,
    /// With `--assume-driver`: the driver link a driver library missing here is counted as
    /// found in, because it is on the lookup's search path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) assumed_in_driver_link: Option<String>,
    #[serde(skip)]
    pub(super) object: Option<usize>,
    #[serde(skip)]
    pub(super) loaded_here: bool,
    #[serde(skip)]
    pub(super) requester: usize,
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
pub(super) fn base(p: &str) -> &str {
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
pub(super) fn build_lookups(
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

/// Whether a lookup is a problem the exit status counts: a library not found (not a `dlopen`
/// the object makes by itself, which it copes with), one that cannot load, a stub.
pub(super) fn is_problem(l: &LookupView) -> bool {
    match l.result {
        "not_found" => l.dlopen_known_from.is_none() && l.assumed_in_driver_link.is_none(),
        "error" => true,
        _ => l.stub.is_some() && l.loaded_here,
    }
}

/// A lookup that only reuses an object loaded before, with nothing else to say: the tree
/// shows those of one object on one line.
pub(super) fn plain_reuse(l: &LookupView) -> bool {
    l.result == "already_loaded"
        && l.found_via.is_none()
        && l.passed_over.is_empty()
        && l.notes.is_empty()
}

/// One lookup in the tree (or, with LIBNAMEs, the list), with what it passed over.
/// `filtered`: LIBNAMEs were given (the list, each lookup naming its requester); `why`: say
/// where a `dlopen` is known from.
pub(super) fn render_lookup(l: &LookupView, filtered: bool, why: bool, pad: &str, o: &mut String) {
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
    } else if filtered {
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
    if let (Some(k), true) = (&l.dlopen_known_from, why) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stub_says_whether_it_stands_for_a_driver_library() {
        let mark = stub_mark(b"libcuda.so.1", None, b"/x/stubs");
        assert!(mark.driver_library);
        let mark = stub_mark(b"libfoo.so.1", Some(b"libfoo.so.1"), b"/x/stubs");
        assert!(!mark.driver_library);
    }
}
