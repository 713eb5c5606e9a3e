//! The audit rules: from one parsed ELF file and a view of the filesystem to findings.
//!
//! Pure: everything the rules read comes in through [`AuditSubject`], [`AuditContext`] and
//! [`FsView`], so the rules are tested on in-memory trees; [`super::run`] does the I/O.

use serde::Serialize;

use crate::driver::is_driver_library;
use crate::rule::StubMatcher;
use ldso_model::fsview::{Bytes, ElfInfo, FileId, FsView, Probe};
use ldso_model::resolve::{expand_dst, expand_list, Dst, SearchDir};
use ldso_model::settings::LoaderSettings;
use ldso_model::target::Verdict;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Probably wrong.
    Warning,
    /// Breaks at run time, or leaks the build.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One kind of finding: its stable code, severity, what it means and how to fix it.
#[derive(Clone, Copy, Debug)]
pub struct AuditRule {
    /// `SS001`, ...
    pub code: &'static str,
    /// Its severity.
    pub severity: Severity,
    /// What it is about.
    pub title: &'static str,
    /// A one-line fix.
    pub fix: &'static str,
}

/// A stub directory in RUNPATH or RPATH.
pub const STUB_ENTRY: AuditRule = AuditRule {
    code: "SS001",
    severity: Severity::Error,
    title: "CUDA stub directory in RUNPATH/RPATH",
    fix: "run `stubstrip fix` on the output: the stub entry becomes the driver link",
};
/// A NEEDED library present in more than one directory of the run path.
pub const AMBIGUOUS: AuditRule = AuditRule {
    code: "SS002",
    severity: Severity::Warning,
    title: "ambiguous run path: a NEEDED library is in more than one of its directories",
    fix: "keep one directory that provides the library; the loader silently takes the first",
};
/// A run path entry in the build or a temporary directory.
pub const BUILD_DIR: AuditRule = AuditRule {
    code: "SS003",
    severity: Severity::Error,
    title: "run path entry inside the build or a temporary directory",
    fix: "remove the entry (it does not exist at run time); use $ORIGIN for the output's own libraries",
};
/// A run path entry that does not exist.
pub const MISSING_DIR: AuditRule = AuditRule {
    code: "SS004",
    severity: Severity::Warning,
    title: "run path entry does not exist",
    fix: "remove the entry, or install the library it was meant to provide",
};
/// A relative run path entry.
pub const RELATIVE: AuditRule = AuditRule {
    code: "SS005",
    severity: Severity::Error,
    title: "relative run path entry not anchored at $ORIGIN",
    fix: "write it as $ORIGIN/DIR or an absolute path: relative entries follow the process's current directory",
};
/// A NEEDED library found nowhere.
pub const NOT_FOUND: AuditRule = AuditRule {
    code: "SS006",
    severity: Severity::Warning,
    title: "NEEDED library found neither in the run path, ld.so.cache nor the default directories",
    fix: "add the directory of the library to RUNPATH (or its package to the inputs); it loads now only if another object loaded it first",
};
/// DT_RPATH without DT_RUNPATH.
pub const RPATH_ONLY: AuditRule = AuditRule {
    code: "SS007",
    severity: Severity::Warning,
    title: "DT_RPATH where DT_RUNPATH is meant",
    fix: "link with -Wl,--enable-new-dtags or set it as RUNPATH: RPATH overrides LD_LIBRARY_PATH and is inherited by every library the file loads",
};
/// A NEEDED library of a store file found only on the host system.
pub const HOST_ONLY: AuditRule = AuditRule {
    code: "SS008",
    severity: Severity::Info,
    title: "NEEDED library of a Nix store file resolves only from the host system",
    fix: "add the package providing the library to the inputs so that its lib directory lands in RUNPATH",
};

/// A resolution-cache note that pins a stub.
pub const NOTE_PINS_STUB: AuditRule = AuditRule {
    code: "SS009",
    severity: Severity::Error,
    title: "resolution-cache note (.note.nixos.ldcache) points into a CUDA stub directory",
    fix: "run `stubstrip fix` on the output: the note's stub hints become the driver link",
};
/// A resolution-cache note the file's DT_NEEDED or run path no longer explains.
pub const NOTE_STALE: AuditRule = AuditRule {
    code: "SS010",
    severity: Severity::Warning,
    title: "stale resolution-cache note: it disagrees with DT_NEEDED or the run path",
    fix: "rebuild the note after the last edit (patchelf --build-resolution-cache on a file without one), or remove it",
};
/// A resolution-cache note that points outside the store or into a build directory.
pub const NOTE_OUTSIDE: AuditRule = AuditRule {
    code: "SS011",
    severity: Severity::Warning,
    title: "resolution-cache note points outside the Nix store or into the build directory",
    fix: "fix the run path it was built from, then rebuild the note",
};
/// A stub that loads only through a dlopen.
pub const DLOPEN_STUB: AuditRule = AuditRule {
    code: "SS012",
    severity: Severity::Error,
    title: "a CUDA stub is loaded only through a dlopen() (libcudart's of libcuda.so.1, ...)",
    fix: "run `stubstrip fix` on the output that holds the dlopening library (its RUNPATH finds the stub)",
};

/// Damaged section headers (the audit's damage module finds them in elfpatch's warnings).
pub const DAMAGED: AuditRule = AuditRule {
    code: "SS013",
    severity: Severity::Warning,
    title: "damaged section headers (cut short, or out of bounds): no loader reads them, but the file is most likely broken and editors refuse it",
    fix: "reinstall or rebuild the file; `stubstrip fix`, elfpatch and patchelf leave a cut-off section header table untouched",
};

/// Facts about the section headers no loader cares about.
pub const HARMLESS: AuditRule = AuditRule {
    code: "SS014",
    severity: Severity::Info,
    title: "section headers with facts no loader cares about (content not naturally aligned, unnamed sections)",
    fix: "nothing to do: the loader reads the program headers; tools that take section headers at their word may read such sections misaligned",
};

/// A layout the loader refuses or trips over, as a post-processor can leave it
/// ([`elfpatch::layout::layout_problems`]).
pub const LAYOUT: AuditRule = AuditRule {
    code: "SS015",
    severity: Severity::Error,
    title: "the layout is inconsistent (a hash table outside its segment, sections or segments no PT_LOAD covers, a PT_LOAD misaligned): the loader refuses it or aborts",
    fix: "rebuild the file, or redo the step that re-laid it out (strip, eu-strip, llvm-strip, objcopy) on the unedited file; report it if elfpatch's edit came before",
};

/// Every rule, in code order (the table in EXPLAIN.md).
pub const RULES: &[AuditRule] = &[
    STUB_ENTRY,
    AMBIGUOUS,
    BUILD_DIR,
    MISSING_DIR,
    RELATIVE,
    NOT_FOUND,
    RPATH_ONLY,
    HOST_ONLY,
    NOTE_PINS_STUB,
    NOTE_STALE,
    NOTE_OUTSIDE,
    DLOPEN_STUB,
    DAMAGED,
    HARMLESS,
    LAYOUT,
];

/// The table of [`RULES`] in Markdown: code, severity, finding, fix.
pub fn codes_table() -> String {
    let mut t = String::from("| Code | Severity | Finding | Fix |\n|---|---|---|---|\n");
    for r in RULES {
        t.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.code,
            r.severity.name(),
            r.title,
            r.fix
        ));
    }
    t
}

/// One finding about one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditFinding {
    /// The rule's code.
    pub code: &'static str,
    /// The rule's severity.
    pub severity: Severity,
    /// What was found, in one line.
    pub message: String,
    /// How to fix it, in one line.
    pub fix: &'static str,
    /// `RUNPATH` or `RPATH`, when about an entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<&'static str>,
    /// The run path entry, when about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The NEEDED library, when about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Directories involved (ambiguity: every directory holding the library, in order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directories: Vec<String>,
}

impl AuditFinding {
    /// A finding of `rule` with this message and no details.
    pub fn new(rule: AuditRule, message: String) -> AuditFinding {
        AuditFinding {
            code: rule.code,
            severity: rule.severity,
            message,
            fix: rule.fix,
            tag: None,
            entry: None,
            library: None,
            directories: Vec::new(),
        }
    }
}

/// The file being audited.
#[derive(Clone, Copy, Debug)]
pub struct AuditSubject<'a> {
    /// Its path.
    pub path: &'a [u8],
    /// Its directory, symlinks resolved (`$ORIGIN`).
    pub origin: &'a [u8],
    /// Its dynamic information.
    pub info: &'a ElfInfo,
}

/// What the rules need besides the file.
#[derive(Clone, Copy, Debug)]
pub struct AuditContext<'a> {
    /// The loader's settings for the file's architecture.
    pub settings: &'a LoaderSettings,
    /// Which directories hold stubs.
    pub stubs: &'a StubMatcher,
    /// Build and temporary directories (no trailing `/`).
    pub build_dirs: &'a [Bytes],
    /// Directories that exist only at run time (the driver link).
    pub runtime_dirs: &'a [Bytes],
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `d` without trailing slashes (`/` stays).
pub(super) fn trim_slashes(mut d: &[u8]) -> &[u8] {
    while d.len() > 1 && d.ends_with(b"/") {
        d = &d[..d.len() - 1];
    }
    d
}

/// Whether `path` is `dir` or lies inside it.
pub(super) fn under(path: &[u8], dir: &[u8]) -> bool {
    let (p, d) = (trim_slashes(path), trim_slashes(dir));
    p == d || (p.starts_with(d) && p.get(d.len()) == Some(&b'/'))
}

/// Whether a file at `path` of this target is one the loader would take.
fn accepted(fs: &dyn FsView, cx: &AuditContext, path: &[u8]) -> Result<Option<FileId>, bool> {
    match fs.probe(path) {
        Probe::File(id, h) => match cx.settings.target.verify(&h) {
            Verdict::Accept => Ok(Some(id)),
            Verdict::Skip(_) => Err(true),
            Verdict::Fatal(_) => Ok(None),
        },
        _ => Err(false),
    }
}

/// Where the loader's fallback steps (cache, default directories) find `name` for this file.
fn system_lookup(fs: &dyn FsView, cx: &AuditContext, info: &ElfInfo, name: &[u8]) -> Option<Bytes> {
    let st = cx.settings;
    if let Some(cache) = &st.cache {
        if let Some(p) = cache.lookup(name, &st.target.cache_flags()).chosen {
            let skipped = info.nodeflib() && st.system_dirs.iter().any(|d| p.starts_with(d));
            if !skipped && matches!(accepted(fs, cx, &p), Ok(Some(_))) {
                return Some(p);
            }
        }
    }
    if info.nodeflib() {
        return None;
    }
    st.system_dirs.iter().find_map(|d| {
        let mut p = d.clone();
        p.extend_from_slice(name);
        matches!(accepted(fs, cx, &p), Ok(Some(_))).then_some(p)
    })
}

/// Every finding of these rules for one file: its run path and its libraries. The rules that
/// read the resolution-cache note and the `dlopen`s are [`super::model_rules`]'s, which builds
/// on this module; [`super::audit`] runs both.
pub fn audit(f: &AuditSubject, cx: &AuditContext, fs: &dyn FsView) -> Vec<AuditFinding> {
    let st = cx.settings;
    let dst = Dst {
        origin: Some(f.origin),
        lib: &st.lib,
        platform: st.platform.as_deref(),
    };
    let info = f.info;
    let mut out = Vec::new();
    let mut stub_findings: Vec<StubFinding> = Vec::new();
    for (tag, value) in [("RUNPATH", &info.runpath), ("RPATH", &info.rpath)] {
        let Some(v) = value else { continue };
        for entry in v.split(|&c| c == b':') {
            let Some(x) = entry_finding(tag, entry, v, cx, fs, &dst) else {
                continue;
            };
            if x.code == STUB_ENTRY.code {
                stub_findings.push(StubFinding {
                    entry: entry.to_vec(),
                    at: out.len(),
                });
            }
            out.push(x);
        }
    }
    out.extend(rpath_only(info));
    let search = LibrarySearch::new(f, cx, fs, &dst);
    let mut seen: Vec<&[u8]> = Vec::new();
    for raw in &info.needed {
        if seen.contains(&raw.as_slice()) {
            continue;
        }
        seen.push(raw);
        search.needed_findings(raw, &stub_findings, &mut out);
    }
    out
}

/// A stub entry's finding: the entry, and where the finding is in the list (the library loaded
/// from it is added to its message).
struct StubFinding {
    entry: Bytes,
    at: usize,
}

/// The finding about one entry of a RUNPATH or RPATH (`value`), if any: a stub directory, an
/// empty or relative entry, a build directory, a directory that does not exist.
fn entry_finding(
    tag: &'static str,
    entry: &[u8],
    value: &[u8],
    cx: &AuditContext,
    fs: &dyn FsView,
    dst: &Dst,
) -> Option<AuditFinding> {
    let with = |rule: AuditRule, message: String| {
        let mut x = AuditFinding::new(rule, message);
        x.tag = Some(tag);
        x.entry = Some(s(entry));
        x
    };
    if cx.stubs.is_stub(entry) {
        return Some(with(
            STUB_ENTRY,
            format!("{tag} entry {} is a CUDA stub directory", s(entry)),
        ));
    }
    if entry.is_empty() {
        return (!value.is_empty()).then(|| {
            with(
                RELATIVE,
                format!("{tag} has an empty entry: the loader searches the current directory"),
            )
        });
    }
    if !entry.contains(&b'$') {
        if let Some(b) = cx.build_dirs.iter().find(|b| under(entry, b)) {
            return Some(with(
                BUILD_DIR,
                format!("{tag} entry {} is inside {}", s(entry), s(b)),
            ));
        }
    }
    let expanded = expand_dst(entry, dst)?;
    if !expanded.starts_with(b"/") {
        return Some(with(
            RELATIVE,
            format!(
                "{tag} entry {} is relative: it is searched from the process's current directory",
                s(entry)
            ),
        ));
    }
    let runtime = cx
        .runtime_dirs
        .iter()
        .any(|d| trim_slashes(d) == trim_slashes(&expanded));
    if runtime || fs.is_dir(&expanded) {
        return None;
    }
    let shown = if expanded.as_slice() == entry {
        String::new()
    } else {
        format!(" (here: {})", s(&expanded))
    };
    Some(with(
        MISSING_DIR,
        format!("{tag} entry {} does not exist{shown}", s(entry)),
    ))
}

/// DT_RPATH without DT_RUNPATH.
fn rpath_only(info: &ElfInfo) -> Option<AuditFinding> {
    let (Some(rp), None) = (&info.rpath, &info.runpath) else {
        return None;
    };
    let mut x = AuditFinding::new(RPATH_ONLY, format!("DT_RPATH {} without DT_RUNPATH", s(rp)));
    x.tag = Some("RPATH");
    x.entry = Some(s(rp));
    Some(x)
}

/// How the loader looks for the NEEDED libraries of one file.
struct LibrarySearch<'a> {
    cx: &'a AuditContext<'a>,
    fs: &'a dyn FsView,
    info: &'a ElfInfo,
    dst: &'a Dst<'a>,
    /// The run path the loader uses (`RUNPATH`, else `RPATH`), for messages.
    tag: &'static str,
    /// Its directories, expanded.
    dirs: Vec<SearchDir>,
    /// The names the interpreter is loaded under (its SONAME and file name): always found.
    interp_names: Vec<Bytes>,
    /// Whether the file is in the Nix store (a library found only on the host is worth saying).
    in_store: bool,
}

/// The run path directories that hold a library, and whether one held only a file of the other
/// ELF class (or otherwise unfit for this target).
struct RunPathHits<'a> {
    hits: Vec<(&'a SearchDir, FileId)>,
    other_class: bool,
}

impl<'a> LibrarySearch<'a> {
    fn new(
        f: &'a AuditSubject,
        cx: &'a AuditContext,
        fs: &'a dyn FsView,
        dst: &'a Dst,
    ) -> LibrarySearch<'a> {
        let info = f.info;
        let (tag, list) = match (&info.runpath, info.effective_rpath()) {
            (Some(r), _) => ("RUNPATH", Some(r.as_slice())),
            (None, Some(r)) => ("RPATH", Some(r)),
            _ => ("RUNPATH", None),
        };
        let dirs: Vec<SearchDir> = list.map(|l| expand_list(l, b":", dst)).unwrap_or_default();
        let interp_names: Vec<Bytes> = cx
            .settings
            .interpreter
            .iter()
            .flat_map(|i| {
                let base = i.path.rsplit(|&c| c == b'/').next().map(<[u8]>::to_vec);
                i.soname.clone().into_iter().chain(base)
            })
            .collect();
        LibrarySearch {
            cx,
            fs,
            info,
            dst,
            tag,
            dirs,
            interp_names,
            in_store: f.path.starts_with(b"/nix/store/"),
        }
    }

    /// The findings about NEEDED library `raw`: not found, ambiguous, found only on the host; a
    /// stub entry it is loaded from gets its name.
    fn needed_findings(&self, raw: &[u8], stubs: &[StubFinding], out: &mut Vec<AuditFinding>) {
        let Some(name) = expand_dst(raw, self.dst) else {
            return;
        };
        if name.contains(&b'/') {
            if !matches!(accepted(self.fs, self.cx, &name), Ok(Some(_))) {
                let mut x =
                    AuditFinding::new(NOT_FOUND, format!("NEEDED {} does not exist", s(raw)));
                x.library = Some(s(raw));
                out.push(x);
            }
            return;
        }
        let found = self.in_run_path(&name);
        if let Some((first, _)) = found.hits.first() {
            if let Some(stub) = stubs.iter().find(|x| x.entry == first.entry) {
                out[stub.at]
                    .message
                    .push_str(&format!("; {} is loaded from it", s(&name)));
            }
        }
        if found.hits.len() > 1 {
            out.push(self.ambiguous(&name, &found.hits));
        }
        if !found.hits.is_empty() || self.interp_names.contains(&name) {
            return;
        }
        out.extend(self.outside_run_path(&name, found.other_class));
    }

    /// Where in the run path the loader would find `name`.
    fn in_run_path(&self, name: &[u8]) -> RunPathHits<'_> {
        let mut hits: Vec<(&SearchDir, FileId)> = Vec::new();
        let mut other_class = false;
        for d in &self.dirs {
            let mut p = d.dir.clone();
            p.extend_from_slice(name);
            match accepted(self.fs, self.cx, &p) {
                Ok(Some(id)) => {
                    if hits.iter().all(|(_, h)| *h != id) {
                        hits.push((d, id));
                    }
                }
                Ok(None) => {}
                Err(oc) => other_class |= oc,
            }
        }
        RunPathHits { hits, other_class }
    }

    /// `name` in more than one run path directory.
    fn ambiguous(&self, name: &[u8], hits: &[(&SearchDir, FileId)]) -> AuditFinding {
        let tag = self.tag;
        let listed: Vec<String> = hits.iter().map(|(d, _)| s(&d.entry)).collect();
        let mut x = AuditFinding::new(
            AMBIGUOUS,
            format!(
                "{} is in {} {tag} directories: {}; the loader takes {}",
                s(name),
                hits.len(),
                listed.join(", "),
                listed[0]
            ),
        );
        x.tag = Some(tag);
        x.library = Some(s(name));
        x.directories = listed;
        x
    }

    /// The finding about `name`, which the run path does not provide: found only on the host (a
    /// store file), or nowhere (unless it is a driver library, which exists only at run time).
    fn outside_run_path(&self, name: &[u8], other_class: bool) -> Option<AuditFinding> {
        let (message, rule) = match system_lookup(self.fs, self.cx, self.info, name) {
            Some(p) if self.in_store => (
                format!("{} resolves only from the host system: {}", s(name), s(&p)),
                HOST_ONLY,
            ),
            Some(_) => return None,
            None if is_driver_library(name) => return None,
            None => (
                format!(
                    "{} is found neither in {}, ld.so.cache nor the default directories{}",
                    s(name),
                    self.tag,
                    if other_class {
                        " (only files of the other ELF class)"
                    } else {
                        ""
                    }
                ),
                NOT_FOUND,
            ),
        };
        let mut x = AuditFinding::new(rule, message);
        x.library = Some(s(name));
        Some(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldso_model::fsview::dirname;
    use ldso_model::memfs::{dynamic_info as info, x86_64_settings, MemFs};
    use object::elf::{ELFCLASS32, EM_386};

    const STUBS: &str = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib";

    fn run(fs: &MemFs, path: &str, i: &ElfInfo) -> Vec<AuditFinding> {
        let st = x86_64_settings(None);
        let stubs = StubMatcher::default();
        let build = vec![b"/build".to_vec()];
        let runtime = vec![b"/run/opengl-driver/lib".to_vec()];
        let cx = AuditContext {
            settings: &st,
            stubs: &stubs,
            build_dirs: &build,
            runtime_dirs: &runtime,
        };
        let origin = dirname(path.as_bytes());
        audit(
            &AuditSubject {
                path: path.as_bytes(),
                origin: &origin,
                info: i,
            },
            &cx,
            fs,
        )
    }

    fn codes(f: &[AuditFinding]) -> Vec<&'static str> {
        f.iter().map(|x| x.code).collect()
    }

    fn base() -> MemFs {
        let mut fs = MemFs::default();
        fs.lib("/lib/libc.so.6", ElfInfo::default())
            .lib("/out/lib/libfoo.so.1", ElfInfo::default());
        fs
    }

    #[test]
    fn a_clean_file_has_no_findings() {
        let mut fs = base();
        fs.dir("/opt/empty");
        let i = info(
            &["libfoo.so.1", "libc.so.6"],
            Some("$ORIGIN/../lib:/opt/empty"),
            None,
        );
        assert_eq!(run(&fs, "/out/bin/app", &i), vec![]);
    }

    #[test]
    fn stub_entries_name_what_would_load_from_them() {
        let mut fs = base();
        fs.lib(&format!("{STUBS}/libcuda.so.1"), ElfInfo::default());
        let i = info(
            &["libcuda.so.1", "libc.so.6"],
            Some(&format!("{STUBS}:/run/opengl-driver/lib")),
            None,
        );
        let f = run(&fs, "/out/bin/app", &i);
        assert_eq!(codes(&f), vec!["SS001"]);
        assert!(
            f[0].message.contains("libcuda.so.1 is loaded from it"),
            "{f:?}"
        );
    }

    #[test]
    fn ambiguity_lists_every_directory_in_order() {
        let mut fs = base();
        fs.lib("/a/libfoo.so.1", ElfInfo::default())
            .lib("/b/libfoo.so.1", ElfInfo::default())
            .link("/c/libfoo.so.1", "/b/libfoo.so.1")
            .elf("/d/libfoo.so.1", ELFCLASS32, EM_386, ElfInfo::default());
        let i = info(&["libfoo.so.1"], Some("/d:/a:/b:/c"), None);
        let f = run(&fs, "/out/bin/app", &i);
        assert_eq!(codes(&f), vec!["SS002"]);
        assert_eq!(
            f[0].directories,
            vec!["/a", "/b"],
            "same file and wrong class do not count"
        );
        let i = info(&["libfoo.so.1"], Some("/a"), None);
        assert_eq!(run(&fs, "/out/bin/app", &i), vec![]);
    }

    #[test]
    fn build_relative_missing_entries() {
        let fs = base();
        let i = info(
            &["libc.so.6"],
            Some("/build/source/lib:lib:$ORIGIN/../nope::/nope:/run/opengl-driver/lib"),
            None,
        );
        let f = run(&fs, "/out/bin/app", &i);
        assert_eq!(codes(&f), vec!["SS003", "SS005", "SS004", "SS005", "SS004"]);
        assert_eq!(
            f[2].message,
            "RUNPATH entry $ORIGIN/../nope does not exist (here: /out/bin/../nope)"
        );
    }

    #[test]
    fn missing_needed_except_driver_libraries_and_the_interpreter() {
        let mut fs = base();
        fs.elf(
            "/out/lib32/libbar.so.1",
            ELFCLASS32,
            EM_386,
            ElfInfo::default(),
        );
        let i = info(
            &[
                "libbar.so.1",
                "libcuda.so.1",
                "ld-linux-x86-64.so.2",
                "libc.so.6",
            ],
            Some("/out/lib32"),
            None,
        );
        let f = run(&fs, "/out/bin/app", &i);
        assert_eq!(codes(&f), vec!["SS006"]);
        assert!(f[0].message.contains("other ELF class"));
    }

    #[test]
    fn rpath_without_runpath_and_host_only_libraries() {
        let fs = base();
        let i = info(&["libfoo.so.1", "libc.so.6"], None, Some("/out/lib"));
        let f = run(&fs, "/nix/store/x-app/bin/app", &i);
        assert_eq!(codes(&f), vec!["SS007", "SS008"]);
        assert_eq!(f[1].library.as_deref(), Some("libc.so.6"));
    }
}
