//! The audit rules that need the loader model beyond the file's own run path: its
//! resolution-cache note (SS009, SS010, SS011) and the libraries loaded objects `dlopen`
//! (SS012).
//!
//! Pure, like [`super::rules`]: everything comes in through the subject, the context and an
//! [`FsView`].

use elfpatch::note::Hint;
use ldso_model::fsview::{dirname, Bytes, FsView};
use ldso_model::resolve::{resolve, LookupOutcome, Program, Resolution, Reuse};

use super::rules::{
    trim_slashes, under, AuditContext, AuditFinding, AuditSubject, DLOPEN_STUB, NOTE_OUTSIDE,
    NOTE_PINS_STUB, NOTE_STALE,
};
use crate::stubs::stub_dir;

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn finding(
    rule: super::rules::AuditRule,
    message: String,
    library: &[u8],
    hint: &Hint,
) -> AuditFinding {
    let mut x = AuditFinding::new(rule, message);
    x.tag = Some("note");
    x.library = Some(s(library));
    x.entry = Some(format!("{}{}", hint.marker() as char, s(hint.path())));
    x
}

/// The findings about the file's resolution-cache note: a hint into a stub directory (SS009),
/// an entry or hint that the file's `DT_NEEDED` and run path no longer explain (SS010), a hint
/// outside the store or into a build directory (SS011). A note that does not parse is stale too.
pub fn note_findings(f: &AuditSubject, cx: &AuditContext) -> Vec<AuditFinding> {
    let cache = match &f.info.ld_cache_note {
        None => return Vec::new(),
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            let mut x = AuditFinding::new(
                NOTE_STALE,
                format!("the resolution-cache note does not parse: {e}"),
            );
            x.tag = Some("note");
            return vec![x];
        }
    };
    let mut out = Vec::new();
    for entry in &cache.entries {
        let name = &entry.needed;
        if !f.info.needed.contains(name) {
            let mut x = AuditFinding::new(
                NOTE_STALE,
                format!(
                    "the resolution-cache note has an entry for {}, which is not in DT_NEEDED",
                    s(name)
                ),
            );
            x.tag = Some("note");
            x.library = Some(s(name));
            out.push(x);
        }
        for hint in &entry.hints {
            out.extend(hint_finding(f, cx, name, hint));
        }
    }
    out
}

/// The run path the loader (and patchelf, building the note) uses: RUNPATH, else RPATH.
fn run_path(f: &AuditSubject) -> Vec<Bytes> {
    match f.info.runpath.as_ref().or(f.info.rpath.as_ref()) {
        Some(r) => r.split(|&c| c == b':').map(<[u8]>::to_vec).collect(),
        None => Vec::new(),
    }
}

/// The worst finding about one hint of the entry for `name`.
fn hint_finding(
    f: &AuditSubject,
    cx: &AuditContext,
    name: &[u8],
    hint: &Hint,
) -> Option<AuditFinding> {
    let path = hint.path();
    let dir: Bytes = match hint {
        Hint::Exact(p) => dirname(p),
        Hint::Search(d) => d.clone(),
    };
    let what = match hint {
        Hint::Exact(_) => "pins",
        Hint::Search(_) => "searches",
    };
    if cx.stubs.is_stub(&dir) || stub_dir(path, None, cx.stubs).is_some() {
        return Some(finding(
            NOTE_PINS_STUB,
            format!(
                "the resolution-cache note {what} {} for {} in a CUDA stub directory: a glibc \
                 that reads the note loads the stub whatever RUNPATH says",
                s(path),
                s(name)
            ),
            name,
            hint,
        ));
    }
    let entries = run_path(f);
    let in_run_path = match hint {
        Hint::Search(d) => entries.iter().any(|e| e == d),
        Hint::Exact(p) => {
            p.rsplit(|&c| c == b'/').next() == Some(name)
                && entries
                    .iter()
                    .any(|e| e.starts_with(b"/") && trim_slashes(e) == trim_slashes(&dir))
        }
    };
    if !in_run_path {
        return Some(finding(
            NOTE_STALE,
            format!(
                "the resolution-cache note {what} {} for {}, which the run path {} does not \
                 give: the note is stale",
                s(path),
                s(name),
                s(&entries.join(&b':'))
            ),
            name,
            hint,
        ));
    }
    let absolute = path.starts_with(b"/");
    if let Some(b) = cx.build_dirs.iter().find(|b| under(path, b)) {
        return Some(finding(
            NOTE_OUTSIDE,
            format!(
                "the resolution-cache note {what} {} for {}, inside {}",
                s(path),
                s(name),
                s(b)
            ),
            name,
            hint,
        ));
    }
    let runtime = cx.runtime_dirs.iter().any(|d| under(&dir, d));
    if absolute && !path.contains(&b'$') && !runtime && !path.starts_with(b"/nix/store/") {
        return Some(finding(
            NOTE_OUTSIDE,
            format!(
                "the resolution-cache note {what} {} for {}, outside the Nix store",
                s(path),
                s(name)
            ),
            name,
            hint,
        ));
    }
    None
}

/// The model's resolution of the file as if it were the program started.
fn resolution(f: &AuditSubject, cx: &AuditContext, fs: &dyn FsView) -> Resolution {
    let program = Program {
        path: f.path.to_vec(),
        origin: f.origin.to_vec(),
        info: f.info.clone(),
    };
    resolve(program, &[], cx.settings, fs)
}

/// SS012: a stub that the file's process loads only because some object `dlopen`s it (no
/// `DT_NEEDED` edge loads it), as torch and ollama load `libcuda.so.1` through libcudart.
pub fn dlopen_findings(f: &AuditSubject, cx: &AuditContext, fs: &dyn FsView) -> Vec<AuditFinding> {
    if !cx.settings.follow_dlopen {
        return Vec::new();
    }
    let res = resolution(f, cx, fs);
    let by_needed = |i: usize| {
        res.requests.iter().any(|q| {
            q.dlopen_source.is_none()
                && matches!(q.outcome, LookupOutcome::Loaded(j, _)
                    | LookupOutcome::AlreadyLoaded(j, _) if j == i)
        })
    };
    let mut out = Vec::new();
    for q in res.requests.iter().filter(|q| q.dlopen_source.is_some()) {
        let (i, path, step) = match &q.outcome {
            LookupOutcome::Loaded(i, step) => (*i, res.objects[*i].path.clone(), *step),
            LookupOutcome::AlreadyLoaded(i, Reuse::SameFile(p, step)) => (*i, p.clone(), *step),
            _ => continue,
        };
        let canonical = fs.canonical(&path);
        let Some(dir) = stub_dir(&path, canonical.as_deref(), cx.stubs) else {
            continue;
        };
        if by_needed(i) {
            continue;
        }
        let by = &res.objects[q.requester].path;
        let mut x = AuditFinding::new(
            DLOPEN_STUB,
            format!(
                "{} dlopen()s {}, which loads the stub {} (in {}, found through {}); known from {}",
                s(by),
                s(&q.name),
                s(&path),
                s(&dir),
                res.step_label(step),
                q.dlopen_source
                    .as_ref()
                    .map(|d| d.describe())
                    .unwrap_or_default()
            ),
        );
        x.library = Some(s(&q.name));
        x.directories = vec![s(&dir)];
        out.push(x);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::StubMatcher;
    use elfpatch::note::{Entry, ResolutionCache};
    use ldso_model::fsview::ElfInfo;
    use ldso_model::memfs::{dynamic_info as info, x86_64_settings, MemFs};
    use ldso_model::settings::LoaderSettings;

    const STUBS: &str = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib";
    const OUT: &str = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-app";
    const DRIVER: &str = "/run/opengl-driver/lib";

    fn audit_with(fs: &MemFs, path: &str, i: &ElfInfo, st: &LoaderSettings) -> Vec<AuditFinding> {
        let stubs = StubMatcher::default();
        let build = vec![b"/build".to_vec()];
        let runtime = vec![DRIVER.as_bytes().to_vec()];
        let cx = AuditContext {
            settings: st,
            stubs: &stubs,
            build_dirs: &build,
            runtime_dirs: &runtime,
        };
        let origin = dirname(path.as_bytes());
        let f = AuditSubject {
            path: path.as_bytes(),
            origin: &origin,
            info: i,
        };
        let mut out = note_findings(&f, &cx);
        out.extend(dlopen_findings(&f, &cx, fs));
        out
    }

    fn audit(fs: &MemFs, path: &str, i: &ElfInfo) -> Vec<AuditFinding> {
        audit_with(fs, path, i, &x86_64_settings(None))
    }

    fn codes(f: &[AuditFinding]) -> Vec<&'static str> {
        f.iter().map(|x| x.code).collect()
    }

    fn noted(mut i: ElfInfo, entries: &[(&str, &[String])]) -> ElfInfo {
        let hint = |h: &String| match h.split_at(1) {
            ("=", p) => Hint::Exact(p.as_bytes().to_vec()),
            (_, d) => Hint::Search(d.as_bytes().to_vec()),
        };
        i.ld_cache_note = Some(Ok(ResolutionCache {
            entries: entries
                .iter()
                .map(|(n, hs)| Entry {
                    needed: n.as_bytes().to_vec(),
                    hints: hs.iter().map(hint).collect(),
                })
                .collect(),
        }));
        i
    }

    fn program() -> String {
        format!("{OUT}/bin/app")
    }

    #[test]
    fn a_note_that_pins_a_stub_is_an_error_even_when_runpath_is_fixed() {
        let fs = MemFs::default();
        let i = noted(
            info(&["libcuda.so.1"], Some(DRIVER), None),
            &[("libcuda.so.1", &[format!("={STUBS}/libcuda.so.1")])],
        );
        let f = audit(&fs, &program(), &i);
        // Pinning a stub outranks being stale (the run path no longer names the stubs).
        assert_eq!(codes(&f), vec!["SS009"], "{f:?}");
        assert_eq!(
            f[0].entry.as_deref(),
            Some(&*format!("={STUBS}/libcuda.so.1"))
        );
        // A `?` hint into the stubs pins them as well.
        let i = noted(
            info(&["libcuda.so.1"], Some(STUBS), None),
            &[("libcuda.so.1", &[format!("?{STUBS}")])],
        );
        assert_eq!(codes(&audit(&fs, &program(), &i)), vec!["SS009"]);
    }

    #[test]
    fn a_note_that_the_needed_list_or_run_path_does_not_explain_is_stale() {
        let fs = MemFs::default();
        let lib = format!("{OUT}/lib");
        let i = noted(
            info(
                &["libfoo.so.1", "libbar.so.1"],
                Some(&format!("$ORIGIN/../lib:{DRIVER}")),
                None,
            ),
            &[
                (
                    "libbar.so.1",
                    &["=/nix/store/0123456789abcdfghijklmnpqrsvwxyz-old/libbar.so.1".to_string()],
                ),
                (
                    "libfoo.so.1",
                    &["?$ORIGIN/../lib".to_string(), format!("?{DRIVER}")],
                ),
                ("libgone.so.1", &[format!("={lib}/libgone.so.1")]),
            ],
        );
        let f = audit(&fs, &program(), &i);
        assert_eq!(codes(&f), vec!["SS010", "SS010", "SS010"], "{f:?}");
        assert!(f[0]
            .message
            .contains("the run path $ORIGIN/../lib:/run/opengl-driver/lib does not give"));
        assert!(f[1]
            .message
            .contains("libgone.so.1, which is not in DT_NEEDED"));
        // An `=` hint in a run-path directory, for its own name, is current.
        let i = noted(
            info(&["libfoo.so.1"], Some(&lib), None),
            &[("libfoo.so.1", &[format!("={lib}/libfoo.so.1")])],
        );
        assert_eq!(audit(&fs, &program(), &i), vec![]);
        // A note that does not parse is stale.
        let mut i = info(&["libfoo.so.1"], Some(&lib), None);
        i.ld_cache_note = Some(Err("byte 4: the hint list is empty".into()));
        assert_eq!(codes(&audit(&fs, &program(), &i)), vec!["SS010"]);
    }

    #[test]
    fn a_note_into_the_build_or_outside_the_store_is_a_warning() {
        let fs = MemFs::default();
        let i = noted(
            info(
                &["libfoo.so.1", "libbar.so.1"],
                Some("/build/src/lib:/usr/lib"),
                None,
            ),
            &[
                ("libbar.so.1", &["=/usr/lib/libbar.so.1".to_string()]),
                ("libfoo.so.1", &["=/build/src/lib/libfoo.so.1".to_string()]),
            ],
        );
        let f = audit(&fs, &program(), &i);
        assert_eq!(codes(&f), vec!["SS011", "SS011"], "{f:?}");
        assert!(f[0].message.ends_with("outside the Nix store"));
        assert!(f[1].message.ends_with("inside /build"));
    }

    fn torch_tree(cudart_runpath: &str) -> MemFs {
        let mut fs = MemFs::default();
        let cudart = ElfInfo {
            soname: Some(b"libcudart.so.12".to_vec()),
            ..info(&[], Some(cudart_runpath), None)
        };
        fs.lib("/c/lib/libcudart.so.12", cudart)
            .lib(&format!("{STUBS}/libcuda.so.1"), ElfInfo::default())
            .lib(&format!("{DRIVER}/libcuda.so.1"), ElfInfo::default());
        fs
    }

    #[test]
    fn a_stub_reached_only_through_a_dlopen_is_an_error() {
        let fs = torch_tree(STUBS);
        let i = info(&["libcudart.so.12"], Some("/c/lib"), None);
        let f = audit(&fs, &program(), &i);
        assert_eq!(codes(&f), vec!["SS012"], "{f:?}");
        assert!(
            f[0].message
                .starts_with("/c/lib/libcudart.so.12 dlopen()s libcuda.so.1, which loads the stub"),
            "{}",
            f[0].message
        );
        assert!(f[0].message.contains("RUNPATH of /c/lib/libcudart.so.12"));
        assert!(f[0].message.contains("NVIDIA table"));
        // Fixed: libcudart's RUNPATH finds the driver.
        let fs = torch_tree(DRIVER);
        assert_eq!(audit(&fs, &program(), &i), vec![]);
        // Not followed: nothing to say.
        let fs = torch_tree(STUBS);
        let mut st = x86_64_settings(None);
        st.follow_dlopen = false;
        assert_eq!(audit_with(&fs, &program(), &i, &st), vec![]);
    }

    #[test]
    fn a_stub_also_loaded_by_dt_needed_is_not_a_dlopen_finding() {
        let fs = torch_tree(STUBS);
        // The program links the stub itself (SS001's business), so the dlopen adds nothing.
        let i = info(
            &["libcuda.so.1", "libcudart.so.12"],
            Some(&format!("{STUBS}:/c/lib")),
            None,
        );
        assert_eq!(audit(&fs, &program(), &i), vec![]);
    }
}
