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

use crate::driver::{is_driver_library, RUNTIME_DIRS};
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
    v
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

/// The header of the report: the file and the loader's settings.
fn render_settings(r: &ExplainReport, o: &mut String) {
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

/// The human-readable report: the loader's settings, then every lookup.
fn render_text(r: &ExplainReport) -> String {
    let mut o = String::new();
    render_settings(r, &mut o);
    let _ = writeln!(o);
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    for k in tree_order(r) {
        let l = &r.lookups[k];
        let pad = if r.filtered {
            String::new()
        } else {
            "    ".repeat(l.depth)
        };
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
        let _ = writeln!(o, "{pad}{}", line.trim_end());
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
                let _ = writeln!(o, "{pad}      not in {}  [{via}]", dirs.join(" "));
                continue;
            }
            let _ = writeln!(o, "{pad}      passed over {}: {}", p.path, p.reason);
            i += 1;
        }
        for n in &l.notes {
            let _ = writeln!(o, "{pad}      note: {n}");
        }
        if let Some(k) = &l.dlopen_known_from {
            let _ = writeln!(
                o,
                "{pad}      dlopen by {}, known from {k}",
                base(&l.requested_by)
            );
        }
        if let (Some(st), "loaded") = (&l.stub, l.result) {
            let _ = writeln!(
                o,
                "{pad}      !!! STUB !!! {} is a stub (in {}): {}",
                l.path.as_deref().unwrap_or(""),
                st.directory,
                st.message
            );
        }
    }
    let sm = &r.summary;
    let _ = writeln!(
        o,
        "\n{} loaded, {} not found, {} {}, {} {}{}",
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
        }
    );
    o
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

    /// Whether something is not found, cannot load, or is a stub.
    pub fn has_problems(&self) -> bool {
        let sm = &self.summary;
        sm.not_found + sm.errors + sm.stubs > 0
    }

    /// The report's text: the tree on stdout, or with `json` the report.
    pub fn render(&self, json: bool) -> Printout {
        if json {
            Printout {
                data: Some(json_text(self)),
                ..Printout::default()
            }
        } else {
            Printout {
                report: render_text(self),
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

    fn explain(fs: &MemFs, exe: ElfInfo, st: &LoaderSettings) -> (String, ExplainReport) {
        let program = Program {
            path: b"/app/bin/app".to_vec(),
            origin: b"/app/bin".to_vec(),
            info: exe,
        };
        let res = resolve(program, &[], st, fs);
        let m = StubMatcher::default();
        let r = ExplainReport::new(&res, st, &SettingsProvenance::default(), &[], &m, fs);
        (render_text(&r), r)
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
        assert!(!text.contains("libcuda.so.1"), "{text}");
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
