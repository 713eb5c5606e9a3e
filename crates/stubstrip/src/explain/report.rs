//! What `explain` says: the lookups as a tree (or a list, for named libraries) and as JSON,
//! loud about CUDA stubs. Pure: built from the model's [`Resolution`], written by
//! [`super::run`].

use std::fmt::Write;

use serde::Serialize;

use ldso_model::fsview::{Bytes, FsView};
use ldso_model::resolve::Resolution;
use ldso_model::settings::{LoaderSettings, SettingsProvenance};

use super::lookup::{base, build_lookups, is_problem, plain_reuse, render_lookup, s, LookupView};
use crate::driver::{DRIVER_LIBRARIES, RUNTIME_DIRS};
use crate::printout::{json_text, Printout};
use crate::rule::StubMatcher;

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
        render_lookup(l, r.filtered, d.why, &pad, o);
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
}
