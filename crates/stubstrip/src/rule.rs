//! The decision rule: which run path entries are CUDA stub directories, and what replaces them.
//!
//! Pure functions over bytes, so that the rule can be property-tested on its own:
//! the output never holds a stub entry, every other entry keeps its order, the driver link appears
//! exactly once iff the input had a stub or a driver link entry, and applying the rule twice
//! changes nothing more than applying it once.

use elfpatch::note::{Hint, ResolutionCache};

/// A glob over a whole run path entry: `*` matches any run of bytes (including `/`), `?` one byte,
/// `[...]` a byte class (`[!...]` or `[^...]` negated, ranges with `-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob(Vec<u8>);

impl Glob {
    /// A glob from its pattern text.
    pub fn new(pattern: impl Into<Vec<u8>>) -> Glob {
        Glob(pattern.into())
    }

    /// Whether the whole of `s` matches.
    pub fn matches(&self, s: &[u8]) -> bool {
        glob_match(&self.0, s)
    }
}

fn class_match(class: &[u8], c: u8) -> Option<(bool, usize)> {
    // Returns (matched, bytes consumed including the closing bracket), or None if unterminated.
    let mut i = 1;
    let negate = matches!(class.get(1), Some(b'!') | Some(b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < class.len() {
        if class[i] == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < class.len() && class[i + 1] == b'-' && class[i + 2] != b']' {
            if class[i] <= c && c <= class[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if class[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

fn glob_match(p: &[u8], s: &[u8]) -> bool {
    // Iterative matcher with one backtrack point for the last `*`: linear in practice.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        let step = match p.get(pi) {
            Some(b'*') => {
                star = Some((pi + 1, si));
                pi += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => match class_match(&p[pi..], s[si]) {
                Some((true, n)) => Some(n),
                Some((false, _)) => None,
                None => (s[si] == b'[').then_some(1),
            },
            Some(&c) => (c == s[si]).then_some(1),
            None => None,
        };
        match step {
            Some(n) => {
                pi += n;
                si += 1;
            }
            None => match star {
                Some((sp, ss)) => {
                    pi = sp;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Characters of Nix's base-32 alphabet (store path hashes).
fn is_nix_base32(c: u8) -> bool {
    matches!(c, b'0'..=b'9' | b'a'..=b'd' | b'f'..=b'n' | b'p'..=b's' | b'v'..=b'z')
}

/// Whether a path component is a Nix store object name (`<32-char hash>-<name>`) ending in
/// `-stubs`, the name of the output nixpkgs' CUDA packages keep their stub libraries in.
fn is_stubs_output(component: &[u8]) -> bool {
    component.len() > 33
        && component[..32].iter().all(|&c| is_nix_base32(c))
        && component[32] == b'-'
        && component.ends_with(b"-stubs")
}

/// Which run path entries count as stub directories.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StubMatcher {
    /// Extra patterns (`--stub-pattern`).
    pub patterns: Vec<Glob>,
}

impl StubMatcher {
    /// Whether `entry` is a stub directory: its last component is `stubs`, it lies inside a Nix
    /// store output whose name ends in `-stubs`, or it matches one of the extra patterns.
    pub fn is_stub(&self, entry: &[u8]) -> bool {
        let trimmed = {
            let mut e = entry;
            while e.len() > 1 && e.ends_with(b"/") {
                e = &e[..e.len() - 1];
            }
            e
        };
        let mut components = trimmed.split(|&c| c == b'/').filter(|c| !c.is_empty());
        let last_is_stubs = trimmed.rsplit(|&c| c == b'/').next() == Some(b"stubs".as_slice());
        last_is_stubs
            || components.any(is_stubs_output)
            || self.patterns.iter().any(|g| g.matches(entry))
    }

    /// The hints of a resolution-cache note that name a stub directory ([`hint_dir`]), with
    /// their entry's name, in order.
    pub fn note_stub_hints<'a>(&self, cache: &'a ResolutionCache) -> Vec<(&'a [u8], &'a Hint)> {
        cache
            .entries
            .iter()
            .flat_map(|e| e.hints.iter().map(move |h| (e.needed.as_slice(), h)))
            .filter(|(_, h)| self.is_stub(hint_dir(h)))
            .collect()
    }

    /// The stub entries of a colon-separated run path, in order.
    pub fn stub_entries<'a>(&self, runpath: &'a [u8]) -> Vec<&'a [u8]> {
        runpath
            .split(|&c| c == b':')
            .filter(|e| self.is_stub(e))
            .collect()
    }
}

/// What replaces stub entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StubRule {
    /// The driver link directory (`/run/opengl-driver/lib`).
    pub driver_link: Vec<u8>,
    /// A `cuda_compat` directory to keep immediately before the driver link (Jetson).
    pub compat: Option<Vec<u8>>,
    /// The stub matcher.
    pub stubs: StubMatcher,
}

/// Why a [`StubRule`] cannot be used: one of its own directories is not a directory or would
/// count as a stub.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The driver link is empty or holds a `:`.
    #[error("the driver link must be one non-empty directory")]
    DriverLinkNotOneDirectory,
    /// The driver link matches the stub matcher.
    #[error("the driver link {0} itself matches the stub rule")]
    DriverLinkIsStub(String),
    /// The compat directory is empty or holds a `:`.
    #[error("the compat directory must be one non-empty directory")]
    CompatNotOneDirectory,
    /// The compat directory matches the stub matcher.
    #[error("the compat directory {0} itself matches the stub rule")]
    CompatIsStub(String),
    /// The compat directory is the driver link.
    #[error("the compat directory and the driver link are the same")]
    CompatIsDriverLink,
    /// The driver link or the compat directory is relative or not normalised: it would go into
    /// run paths as written, where the loader takes a relative entry from its working directory.
    #[error("the {what} {value} {why}{}", suggestion.as_ref().map(|s| format!("; write {s}")).unwrap_or_default())]
    NotAbsoluteNormal {
        /// "driver link" or "compat directory".
        what: &'static str,
        /// The value given.
        value: String,
        /// What is wrong with it, naming each offending component.
        why: String,
        /// The normalised form, when the value is absolute.
        suggestion: Option<String>,
    },
}

/// What is wrong with `dir` as a run path directory given on the command line: it must be
/// absolute and normalised (no empty, `.` or `..` component, no trailing `/`). `None` when it
/// is fine. Each offending component is named with the path before it (`a .. after /run/x`),
/// so that a long value says where to look.
pub fn absolute_normal_problem(dir: &[u8]) -> Option<String> {
    if !dir.starts_with(b"/") {
        return Some("is not absolute (it must start with /)".to_string());
    }
    if dir == b"/" {
        return None;
    }
    let parts: Vec<&[u8]> = dir[1..].split(|&c| c == b'/').collect();
    let mut problems = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let before = match i {
            0 => "/".to_string(),
            _ => format!("/{}", String::from_utf8_lossy(&parts[..i].join(&b'/'))),
        };
        let what = match *p {
            b"" if i + 1 == parts.len() => "a trailing /",
            b"" => "an empty component (//)",
            b"." => "a . component",
            b".." => "a .. component",
            _ => continue,
        };
        problems.push(format!("{what} after {before}"));
    }
    (!problems.is_empty()).then(|| format!("is not normalised: {}", problems.join(", ")))
}

/// `dir` (absolute) with empty and `.` components dropped and `..` applied, lexically.
pub fn normalise(dir: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for p in dir.split(|&c| c == b'/') {
        match p {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            _ => parts.push(p),
        }
    }
    let mut out = Vec::new();
    for p in &parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

fn check_absolute_normal(what: &'static str, dir: &[u8]) -> Result<(), RuleError> {
    match absolute_normal_problem(dir) {
        None => Ok(()),
        Some(why) => Err(RuleError::NotAbsoluteNormal {
            what,
            value: String::from_utf8_lossy(dir).into_owned(),
            why,
            suggestion: dir
                .starts_with(b"/")
                .then(|| String::from_utf8_lossy(&normalise(dir)).into_owned()),
        }),
    }
}

/// The result of applying the rule to one run path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunpathRewrite {
    /// The new run path.
    pub new: Vec<u8>,
    /// The stub entries that were removed, in order.
    pub removed: Vec<Vec<u8>>,
}

impl StubRule {
    /// Why the rule itself is unusable, if it is (its own directories would count as stubs).
    pub fn check(&self) -> Result<(), RuleError> {
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        if self.driver_link.is_empty() || self.driver_link.contains(&b':') {
            return Err(RuleError::DriverLinkNotOneDirectory);
        }
        check_absolute_normal("driver link", &self.driver_link)?;
        if self.stubs.is_stub(&self.driver_link) {
            return Err(RuleError::DriverLinkIsStub(lossy(&self.driver_link)));
        }
        if let Some(c) = &self.compat {
            if c.is_empty() || c.contains(&b':') {
                return Err(RuleError::CompatNotOneDirectory);
            }
            check_absolute_normal("compat directory", c)?;
            if self.stubs.is_stub(c) {
                return Err(RuleError::CompatIsStub(lossy(c)));
            }
            if *c == self.driver_link {
                return Err(RuleError::CompatIsDriverLink);
            }
        }
        Ok(())
    }

    /// Applies the rule to a colon-separated run path; `None` when nothing changes.
    ///
    /// - with no stub entry (and at most one driver link entry) the run path is left alone;
    /// - an existing driver link entry stays where it is (later duplicates go), and every stub
    ///   entry is dropped;
    /// - otherwise the first stub entry becomes the driver link and later stub entries are dropped;
    /// - with a compat directory, it sits immediately before the driver link (once).
    pub fn rewrite(&self, runpath: &[u8]) -> Option<RunpathRewrite> {
        let entries: Vec<&[u8]> = runpath.split(|&c| c == b':').collect();
        let compat = self.compat.as_deref();
        let (out, removed) =
            self.rewrite_items(&entries, |e| e, self.driver_link.as_slice(), compat)?;
        let new = out.join(&b':');
        (new != runpath).then_some(RunpathRewrite {
            new,
            removed: removed.into_iter().map(<[u8]>::to_vec).collect(),
        })
    }

    /// The rule over any list of run path items, each read as a directory by `dir`: `driver`
    /// and `compat` are the items to put in (see [`StubRule::rewrite`]). `None` when nothing
    /// changes; else the new items and the stub items removed.
    fn rewrite_items<T: Clone + PartialEq>(
        &self,
        items: &[T],
        dir: impl Fn(&T) -> &[u8],
        driver: T,
        compat: Option<T>,
    ) -> Option<(Vec<T>, Vec<T>)> {
        let driver_dir = self.driver_link.as_slice();
        let compat_dir = self.compat.as_deref();
        let had_stub = items.iter().any(|e| self.stubs.is_stub(dir(e)));
        let drivers = items.iter().filter(|e| dir(e) == driver_dir).count();
        if !had_stub && drivers <= 1 {
            return None;
        }
        let mut out: Vec<T> = Vec::with_capacity(items.len() + 1);
        let mut removed = Vec::new();
        let mut emitted = false;
        for e in items {
            let is_stub = self.stubs.is_stub(dir(e));
            if is_stub {
                removed.push(e.clone());
            }
            let is_driver = dir(e) == driver_dir;
            let is_compat = compat_dir == Some(dir(e));
            // Where the driver link goes: its existing place, else the first stub's.
            let here = if drivers > 0 { is_driver } else { is_stub };
            if here && !emitted {
                if let (Some(c), true) = (&compat, had_stub) {
                    out.push(c.clone());
                }
                out.push(if is_driver { e.clone() } else { driver.clone() });
                emitted = true;
            } else if is_stub || is_driver || (is_compat && had_stub) {
                continue;
            } else {
                out.push(e.clone());
            }
        }
        (out != items).then_some((out, removed))
    }

    /// Applies the rule to the entries of a resolution-cache note ([`elfpatch::note`]), so
    /// that each says what the fixed run path means: in each entry's hints, read as
    /// directories (a `?` hint's directory, the directory of an `=` hint's file), the first
    /// stub becomes `?<driver link>` (after `?<compat>` with a compat directory), later stubs
    /// go, an existing driver link hint stays where it is. An `=` path into the stubs never
    /// survives. Entries without a stub hint, and their order, stay. `None` when nothing
    /// changes.
    pub fn rewrite_note(&self, cache: &ResolutionCache) -> Option<NoteRewrite> {
        let driver = Hint::Search(self.driver_link.clone());
        let compat = self.compat.clone().map(Hint::Search);
        let mut changes = Vec::new();
        let mut new = cache.clone();
        for entry in new.entries.iter_mut() {
            // An entry without a stub stays as patchelf wrote it, duplicate hints included (a
            // name or a directory listed twice), unlike a run path, whose duplicate driver
            // links the rule folds.
            if !entry.hints.iter().any(|h| self.stubs.is_stub(hint_dir(h))) {
                continue;
            }
            let rewritten =
                self.rewrite_items(&entry.hints, hint_dir, driver.clone(), compat.clone());
            if let Some((hints, removed)) = rewritten {
                changes.push(NoteEntryChange {
                    needed: entry.needed.clone(),
                    old: entry.hints.clone(),
                    new: hints.clone(),
                    removed_dirs: removed.iter().map(|h| hint_dir(h).to_vec()).collect(),
                });
                entry.hints = hints;
            }
        }
        (!changes.is_empty()).then_some(NoteRewrite {
            cache: new,
            changes,
        })
    }
}

/// The directory a hint stands for: a `?` hint's directory, the directory of an `=` hint's
/// file (everything before its last `/`).
pub fn hint_dir(h: &Hint) -> &[u8] {
    match h {
        Hint::Search(d) => d,
        Hint::Exact(p) => p
            .iter()
            .rposition(|&b| b == b'/')
            .map_or(&p[..0], |i| &p[..i]),
    }
}

/// One note entry the rule changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteEntryChange {
    /// The `DT_NEEDED` name.
    pub needed: Vec<u8>,
    /// Its hints before.
    pub old: Vec<Hint>,
    /// Its hints after.
    pub new: Vec<Hint>,
    /// The stub directories its removed hints stood for, in order.
    pub removed_dirs: Vec<Vec<u8>>,
}

/// The result of applying the rule to a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteRewrite {
    /// The note's new contents.
    pub cache: ResolutionCache,
    /// The entries that changed, in note order.
    pub changes: Vec<NoteEntryChange>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HASH: &str = "0123456789abcdfghijklmnpqrsvwxyz";

    fn rule(compat: Option<&str>) -> StubRule {
        StubRule {
            driver_link: b"/run/opengl-driver/lib".to_vec(),
            compat: compat.map(|c| c.as_bytes().to_vec()),
            stubs: StubMatcher::default(),
        }
    }

    fn rw(r: &StubRule, s: &str) -> String {
        match r.rewrite(s.as_bytes()) {
            Some(x) => String::from_utf8(x.new).unwrap(),
            None => s.to_string(),
        }
    }

    #[test]
    fn recognises_stub_directories() {
        let m = StubMatcher::default();
        let store = format!("/nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib");
        assert!(m.is_stub(store.as_bytes()));
        assert!(m.is_stub(b"/usr/local/cuda/lib64/stubs"));
        assert!(m.is_stub(b"/opt/cuda/lib/stubs/"));
        assert!(!m.is_stub(b"/usr/lib/stubsy"));
        assert!(!m.is_stub(format!("/nix/store/{HASH}-cuda_cudart-12.8.90-lib/lib").as_bytes()));
        assert!(
            !m.is_stub(b"/nix/store/short-stubs/lib"),
            "not a store hash"
        );
        let m = StubMatcher {
            patterns: vec![Glob::new("/opt/fake-*/lib")],
        };
        assert!(m.is_stub(b"/opt/fake-driver/lib"));
    }

    #[test]
    fn first_stub_becomes_the_driver_link_and_later_ones_go() {
        let r = rule(None);
        let s = format!("/a:/nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib:/b:/x/lib/stubs");
        assert_eq!(rw(&r, &s), "/a:/run/opengl-driver/lib:/b");
    }

    #[test]
    fn an_existing_driver_link_stays_where_it_is() {
        let r = rule(None);
        assert_eq!(
            rw(&r, "/x/stubs:/a:/run/opengl-driver/lib:/b"),
            "/a:/run/opengl-driver/lib:/b"
        );
        assert_eq!(
            rw(&r, "/run/opengl-driver/lib:/a:/x/stubs"),
            "/run/opengl-driver/lib:/a"
        );
        assert_eq!(
            rw(&r, "/run/opengl-driver/lib:/a:/run/opengl-driver/lib"),
            "/run/opengl-driver/lib:/a"
        );
    }

    #[test]
    fn compat_goes_immediately_before_the_driver_link() {
        let r = rule(Some("/nix/store/c-cuda_compat/compat"));
        assert_eq!(
            rw(&r, "/a:/x/stubs:/b"),
            "/a:/nix/store/c-cuda_compat/compat:/run/opengl-driver/lib:/b"
        );
        // autoAddCudaCompatRunpath's order is already right: only the stub goes.
        assert_eq!(
            rw(
                &r,
                "/nix/store/c-cuda_compat/compat:/run/opengl-driver/lib:/x/stubs"
            ),
            "/nix/store/c-cuda_compat/compat:/run/opengl-driver/lib"
        );
    }

    #[test]
    fn a_rule_whose_own_directories_are_stubs_is_refused_naming_them() {
        let mut r = rule(Some("/x/compat/stubs"));
        assert_eq!(
            r.check(),
            Err(RuleError::CompatIsStub("/x/compat/stubs".into()))
        );
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "the compat directory /x/compat/stubs itself matches the stub rule"
        );
        r.compat = Some(b"/run/opengl-driver/lib".to_vec());
        assert_eq!(r.check(), Err(RuleError::CompatIsDriverLink));
        r.compat = None;
        r.driver_link = b"/a:/b".to_vec();
        assert_eq!(r.check(), Err(RuleError::DriverLinkNotOneDirectory));
        r.driver_link = b"/usr/local/cuda/lib64/stubs".to_vec();
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "the driver link /usr/local/cuda/lib64/stubs itself matches the stub rule"
        );
        assert_eq!(rule(None).check(), Ok(()));
    }

    fn cache(entries: &[(&str, &[&str])]) -> ResolutionCache {
        let hint = |h: &str| match h.as_bytes().split_first() {
            Some((b'=', p)) => Hint::Exact(p.to_vec()),
            Some((_, d)) => Hint::Search(d.to_vec()),
            None => panic!("empty test hint"),
        };
        ResolutionCache {
            entries: entries
                .iter()
                .map(|(n, hs)| elfpatch::note::Entry {
                    needed: n.as_bytes().to_vec(),
                    hints: hs.iter().map(|h| hint(h)).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn note_entries_that_name_a_stub_search_the_driver_link_instead() {
        let store = format!("/nix/store/{HASH}-cuda_cudart-12.8.90-stubs/lib");
        let pinned = format!("={store}/libcuda.so.1");
        let before = cache(&[
            (
                "libcuda.so.1",
                &["?$ORIGIN", &pinned, "?/x/lib/stubs", "=/a/libcuda.so.1"],
            ),
            ("libm.so.6", &["?$ORIGIN", "?/x/lib/stubs"]),
            ("libz.so", &["=/a/libz.so"]),
        ]);
        let rw = rule(None).rewrite_note(&before).unwrap();
        let after = cache(&[
            (
                "libcuda.so.1",
                &["?$ORIGIN", "?/run/opengl-driver/lib", "=/a/libcuda.so.1"],
            ),
            ("libm.so.6", &["?$ORIGIN", "?/run/opengl-driver/lib"]),
            ("libz.so", &["=/a/libz.so"]),
        ]);
        assert_eq!(rw.cache, after);
        assert_eq!(rw.changes.len(), 2);
        assert_eq!(
            rw.changes[0].removed_dirs,
            vec![store.into_bytes(), b"/x/lib/stubs".to_vec()]
        );
        // Idempotent, and a note without stubs is left alone.
        assert_eq!(rule(None).rewrite_note(&after), None);
        assert!(StubMatcher::default().note_stub_hints(&after).is_empty());
        assert_eq!(StubMatcher::default().note_stub_hints(&before).len(), 3);
    }

    #[test]
    fn in_the_note_compat_comes_first_and_an_existing_driver_hint_stays() {
        let r = rule(Some("/nix/store/c-cuda_compat/compat"));
        let rw = r
            .rewrite_note(&cache(&[(
                "libcuda.so.1",
                &["=/x/stubs/libcuda.so.1", "?/a"],
            )]))
            .unwrap();
        assert_eq!(
            rw.cache,
            cache(&[(
                "libcuda.so.1",
                &[
                    "?/nix/store/c-cuda_compat/compat",
                    "?/run/opengl-driver/lib",
                    "?/a"
                ]
            )])
        );
        let present = "=/run/opengl-driver/lib/libcuda.so.1";
        let rw = rule(None)
            .rewrite_note(&cache(&[("libcuda.so.1", &["?/x/stubs", present])]))
            .unwrap();
        assert_eq!(rw.cache, cache(&[("libcuda.so.1", &[present])]));
    }

    #[test]
    fn rule_directories_must_be_absolute_and_normalised() {
        let mut r = rule(None);
        for (dir, message) in [
            (
                "relative/dir",
                "the driver link relative/dir is not absolute (it must start with /)",
            ),
            (
                "/run/opengl-driver/lib/",
                "the driver link /run/opengl-driver/lib/ is not normalised: a trailing / after \
                 /run/opengl-driver/lib; write /run/opengl-driver/lib",
            ),
            (
                "/run//x/./../lib",
                "the driver link /run//x/./../lib is not normalised: an empty component (//) \
                 after /run, a . component after /run//x, a .. component after /run//x/.; \
                 write /run/lib",
            ),
            (
                "/run/x/../lib",
                "the driver link /run/x/../lib is not normalised: a .. component after /run/x; \
                 write /run/lib",
            ),
        ] {
            r.driver_link = dir.as_bytes().to_vec();
            assert_eq!(r.check().unwrap_err().to_string(), message, "{dir}");
        }
        r.driver_link = b"/".to_vec();
        assert_eq!(r.check(), Ok(()));
        r = rule(Some("compat"));
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "the compat directory compat is not absolute (it must start with /)"
        );
        assert_eq!(normalise(b"/a/../../b/."), b"/b");
    }

    #[test]
    fn nothing_to_do_is_none() {
        let r = rule(None);
        assert_eq!(r.rewrite(b"/a:/b"), None);
        assert_eq!(r.rewrite(b"/run/opengl-driver/lib:/b"), None);
    }

    #[test]
    fn globs() {
        assert!(Glob::new("*/stubs").matches(b"/a/b/stubs"));
        assert!(Glob::new("/a/?/[bc]*").matches(b"/a/x/cat"));
        assert!(!Glob::new("/a/[!x]").matches(b"/a/x"));
        assert!(Glob::new("*").matches(b""));
        assert!(!Glob::new("a*b").matches(b"acbd"));
    }

    fn entry() -> impl Strategy<Value = String> {
        prop_oneof![
            "/[a-z]{1,6}(/[a-z]{1,6}){0,2}",
            Just("/run/opengl-driver/lib".to_string()),
            Just("/opt/cuda/lib64/stubs".to_string()),
            Just(format!("/nix/store/{HASH}-cuda_cudart-12.8-stubs/lib")),
            Just("$ORIGIN/../lib".to_string()),
            Just("/nix/store/c-cuda_compat/compat".to_string()),
            Just(String::new()),
        ]
    }

    fn hint() -> impl Strategy<Value = Hint> {
        (entry(), any::<bool>()).prop_map(|(dir, exact)| match exact && dir.starts_with('/') {
            true => Hint::Exact(format!("{dir}/libcuda.so.1").into_bytes()),
            false => Hint::Search(dir.into_bytes()),
        })
    }

    proptest! {
        #[test]
        fn note_rule_properties(lists in prop::collection::vec(prop::collection::vec(hint(), 1..6), 0..4), with_compat: bool) {
            let r = rule(with_compat.then_some("/nix/store/c-cuda_compat/compat"));
            let before = ResolutionCache {
                entries: lists
                    .into_iter()
                    .enumerate()
                    .map(|(i, hints)| elfpatch::note::Entry { needed: format!("lib{i}.so").into_bytes(), hints })
                    .collect(),
            };
            let after = r.rewrite_note(&before).map_or_else(|| before.clone(), |rw| rw.cache);
            // No hint into a stub survives; no entry is lost or reordered.
            prop_assert!(r.stubs.note_stub_hints(&after).is_empty());
            let names = |c: &ResolutionCache| c.entries.iter().map(|e| e.needed.clone()).collect::<Vec<_>>();
            prop_assert_eq!(names(&after), names(&before));
            for (b, a) in before.entries.iter().zip(&after.entries) {
                let stubbed = b.hints.iter().any(|h| r.stubs.is_stub(hint_dir(h)));
                // Entries without a stub are untouched; the others search the driver link.
                if !stubbed {
                    prop_assert_eq!(&a.hints, &b.hints);
                } else {
                    let driver = a.hints.iter().filter(|h| hint_dir(h) == r.driver_link.as_slice()).count();
                    prop_assert_eq!(driver, 1);
                }
                // The other hints keep their order.
                let special = |h: &&Hint| r.stubs.is_stub(hint_dir(h)) || hint_dir(h) == r.driver_link.as_slice() || r.compat.as_deref() == Some(hint_dir(h));
                let keep = |v: &[Hint]| v.iter().filter(|h| !special(h)).cloned().collect::<Vec<_>>();
                prop_assert_eq!(keep(&a.hints), keep(&b.hints));
            }
            // Idempotent, and what it writes is a descriptor that parses back.
            prop_assert_eq!(r.rewrite_note(&after), None);
            prop_assert_eq!(ResolutionCache::parse(&after.to_descriptor()).ok(), Some(after.clone()));
        }

        #[test]
        fn rule_properties(entries in prop::collection::vec(entry(), 0..8), with_compat: bool) {
            let r = rule(with_compat.then_some("/nix/store/c-cuda_compat/compat"));
            let input = entries.join(":");
            let out = rw(&r, &input);
            let out_entries: Vec<&str> = out.split(':').collect();
            // 1. no stub survives
            prop_assert!(out_entries.iter().all(|e| !r.stubs.is_stub(e.as_bytes())));
            // 2. the other entries keep their order
            let special = |e: &str| r.stubs.is_stub(e.as_bytes()) || e == "/run/opengl-driver/lib" || (with_compat && e == "/nix/store/c-cuda_compat/compat");
            let had_stub = entries.iter().any(|e| r.stubs.is_stub(e.as_bytes()));
            let keep = |v: &[&str]| -> Vec<String> { v.iter().filter(|e| !special(e)).map(|e| e.to_string()).collect() };
            let ins: Vec<&str> = entries.iter().map(String::as_str).collect();
            if entries.is_empty() { prop_assert_eq!(&out, ""); } else { prop_assert_eq!(keep(&ins), keep(&out_entries)); }
            // 3. the driver link appears once iff there was a stub or a driver link
            let had_driver = entries.iter().any(|e| e == "/run/opengl-driver/lib");
            let n = out_entries.iter().filter(|e| **e == "/run/opengl-driver/lib").count();
            if had_stub || had_driver { prop_assert_eq!(n, 1); } else { prop_assert_eq!(n, 0); }
            // compat right before the driver link whenever a stub was replaced
            if with_compat && had_stub {
                let i = out_entries.iter().position(|e| *e == "/run/opengl-driver/lib").unwrap();
                prop_assert!(i >= 1 && out_entries[i - 1] == "/nix/store/c-cuda_compat/compat");
                prop_assert_eq!(out_entries.iter().filter(|e| **e == "/nix/store/c-cuda_compat/compat").count(), 1);
            }
            // 4. idempotent
            prop_assert_eq!(rw(&r, &out), out.clone());
            // removed entries are exactly the stubs
            let removed = r.rewrite(input.as_bytes()).map(|x| x.removed.len()).unwrap_or(0);
            prop_assert_eq!(removed, entries.iter().filter(|e| r.stubs.is_stub(e.as_bytes())).count());
        }
    }
}
