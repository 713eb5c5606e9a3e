//! What the rule asks of one file's run paths: the changes to report and the exact edits (pure).

use elfpatch::note::ResolutionCache;
use elfpatch::Edit;
use serde::Serialize;

use crate::elf_file::RunpathTag;
use crate::rule::StubRule;
use crate::stubs::note_entry_text;

/// One run path that changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunpathChange {
    /// Which entry.
    pub tag: RunpathTag,
    /// The value before.
    pub old: String,
    /// The value after.
    pub new: String,
    /// Stub directories removed from it.
    pub removed: Vec<String>,
}

/// The changes the rule asks for in one file.
#[derive(Debug, Default)]
pub struct FixPlan {
    /// Human/JSON view of each change.
    pub changes: Vec<RunpathChange>,
    /// The edits, with the exact bytes (paths need not be UTF-8).
    pub edits: Vec<Edit>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Applies `rule` to each of a file's run paths (`DT_RUNPATH` first) and to its
/// resolution-cache note. Whenever the file changes and has a note, the plan says what the note
/// becomes (its entries rewritten, or the same): without that, elfpatch would drop a note
/// whose run path changed.
pub fn plan(
    run_paths: &[(RunpathTag, &[u8])],
    note: Option<&ResolutionCache>,
    rule: &StubRule,
) -> FixPlan {
    let mut p = plan_run_paths(run_paths, rule);
    let Some(cache) = note else {
        return p;
    };
    let rewrite = rule.rewrite_note(cache);
    if let Some(rw) = &rewrite {
        p.changes.extend(rw.changes.iter().map(|c| RunpathChange {
            tag: RunpathTag::Note,
            old: note_entry_text(&c.needed, &c.old),
            new: note_entry_text(&c.needed, &c.new),
            removed: c.removed_dirs.iter().map(|d| lossy(d)).collect(),
        }));
    }
    if !p.edits.is_empty() || rewrite.is_some() {
        let cache = rewrite.map_or_else(|| cache.clone(), |rw| rw.cache);
        p.edits
            .push(Edit::SetResolutionCache(cache.to_descriptor()));
    }
    p
}

fn plan_run_paths(run_paths: &[(RunpathTag, &[u8])], rule: &StubRule) -> FixPlan {
    let mut p = FixPlan::default();
    for &(tag, value) in run_paths {
        let Some(rw) = rule.rewrite(value) else {
            continue;
        };
        let edit = match tag {
            RunpathTag::Runpath => Edit::SetRunpath(rw.new.clone()),
            RunpathTag::Rpath => Edit::SetRpath(rw.new.clone()),
            // `run_paths` holds run paths only; the note is planned apart.
            RunpathTag::Note => continue,
        };
        p.changes.push(RunpathChange {
            tag,
            old: lossy(value),
            new: lossy(&rw.new),
            removed: rw.removed.iter().map(|r| lossy(r)).collect(),
        });
        p.edits.push(edit);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::StubMatcher;

    fn rule() -> StubRule {
        StubRule {
            driver_link: b"/run/opengl-driver/lib".to_vec(),
            compat: None,
            stubs: StubMatcher::default(),
        }
    }

    #[test]
    fn each_run_path_with_a_stub_gets_one_edit_of_its_own_tag() {
        let p = plan(
            &[
                (RunpathTag::Runpath, b"/a:/x/stubs"),
                (RunpathTag::Rpath, b"/x/stubs:/b"),
            ],
            None,
            &rule(),
        );
        assert_eq!(
            p.edits,
            vec![
                Edit::SetRunpath(b"/a:/run/opengl-driver/lib".to_vec()),
                Edit::SetRpath(b"/run/opengl-driver/lib:/b".to_vec()),
            ]
        );
        assert_eq!(p.changes[0].removed, vec!["/x/stubs".to_string()]);
        assert_eq!(p.changes[1].tag, RunpathTag::Rpath);
    }

    #[test]
    fn run_paths_without_stubs_plan_nothing() {
        let p = plan(&[(RunpathTag::Runpath, b"/a:/b")], None, &rule());
        assert!(p.edits.is_empty() && p.changes.is_empty());
    }
}
