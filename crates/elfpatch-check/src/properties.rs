//! The fuzz targets' checks: what every input must keep (see the crate documentation).

use elfpatch::{Edit, Elf, Layout, Plan, Tables};
use elfsynth::oracle;

use crate::issues::{new_issues, validate_issues};
use crate::model::Info;
use crate::script::{batch, options, split, Reader, MAX_BATCHES};

/// Why an input violates a property.
#[derive(Debug)]
pub struct Failure(pub String);

/// What one input exercised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Batches decoded on a parseable file.
    pub batches: usize,
    /// Batches the planner refused.
    pub refused: usize,
    /// Batches planned and applied.
    pub planned: usize,
    /// Batches whose result the oracle checked too.
    pub oracle_checked: usize,
}

/// The `parse` target: never panics, whatever the bytes.
pub fn parse_only(data: &[u8]) {
    let _ = oracle::read(data);
    let _ = oracle::check_layout(data);
    let Ok(elf) = Elf::parse(data) else { return };
    let _ = validate_issues(&elf);
    let _ = (
        elf.needed(),
        elf.runpath(),
        elf.rpath(),
        elf.soname(),
        elf.interpreter(),
        elf.flags(),
        elf.flags_1(),
    );
    let _ = Tables::read(data, &elf).map(|t| t.string_refs().count());
}

/// The `plan_apply` target: panics (so libFuzzer records a crash) on any violated property.
pub fn plan_apply(data: &[u8]) {
    if let Err(Failure(f)) = plan_apply_checked(data) {
        panic!("property violated: {f}");
    }
}

/// Runs the `plan_apply` properties; `Err` describes the first violation. Panics inside elfpatch
/// propagate (they are findings too).
pub fn plan_apply_checked(data: &[u8]) -> Result<Stats, Failure> {
    let (elf_bytes, script) = split(data);
    let mut stats = Stats::default();
    let mut r = Reader::new(script);
    let opts = options(r.byte().unwrap_or(0));
    let mut bytes = elf_bytes.to_vec();
    for _ in 0..MAX_BATCHES {
        let Ok(elf) = Elf::parse(&bytes) else {
            return Ok(stats);
        };
        let needed: Vec<Vec<u8>> = elf.needed().into_iter().map(<[u8]>::to_vec).collect();
        let Some(edits) = batch(&mut r, &needed) else {
            break;
        };
        let issues_before = validate_issues(&elf);
        let Ok(tables) = Tables::read(bytes.as_slice(), &elf) else {
            return Ok(stats);
        };
        stats.batches += 1;
        let Ok(plan) = elfpatch::plan(&elf, &tables, &edits, &opts) else {
            stats.refused += 1;
            continue;
        };
        stats.planned += 1;
        let next = applied(&plan, &elf, &bytes)?;
        let batch = Batch {
            before: &elf,
            tables: &tables,
            edits: &edits,
            shown: show(&edits),
        };
        let expect = batch.check_elfpatch(&next, &issues_before)?;
        if batch.check_oracle(&bytes, &next, &expect)? {
            stats.oracle_checked += 1;
        }
        bytes = next;
    }
    Ok(stats)
}

/// `bytes` with `plan` applied in memory, checked against what the plan said of its layout.
fn applied(plan: &Plan, elf: &Elf, bytes: &[u8]) -> Result<Vec<u8>, Failure> {
    let mut next = bytes.to_vec();
    plan.apply_to_vec(&mut next, elf.format)
        .map_err(|e| Failure(format!("apply_to_vec failed on its own plan: {e}")))?;
    if next.len() as u64 != plan.new_len {
        return Err(Failure(format!(
            "result is {} bytes, the plan said {}",
            next.len(),
            plan.new_len
        )));
    }
    match plan.layout {
        Layout::Unchanged if next != bytes => {
            return Err(Failure("an unchanged plan changed bytes".into()))
        }
        Layout::InPlace if next.len() != bytes.len() => {
            return Err(Failure("an in-place plan changed the length".into()))
        }
        _ => {}
    }
    Ok(next)
}

/// One planned batch and the file it was planned on.
struct Batch<'a> {
    before: &'a Elf,
    tables: &'a Tables,
    edits: &'a [Edit],
    /// `edits`, for failure messages.
    shown: String,
}

impl Batch<'_> {
    /// elfpatch's reading of the result: exactly what the edits asked, and no new validate issue.
    /// Returns the expected reading.
    fn check_elfpatch(&self, next: &[u8], issues_before: &[String]) -> Result<Info, Failure> {
        let shown = &self.shown;
        let after = Elf::parse(next).map_err(|e| {
            Failure(format!(
                "elfpatch cannot re-read its output of {shown}: {e}"
            ))
        })?;
        let expect = Info::of(self.before).apply(self.edits);
        let got = Info::of(&after);
        if got != expect {
            return Err(Failure(format!(
                "edits {shown}: elfpatch reads {got:?}, expected {expect:?}"
            )));
        }
        let issues_after = validate_issues(&after);
        let new = new_issues(issues_before, &issues_after);
        if !new.is_empty() {
            return Err(Failure(format!(
                "edits {shown}: new validate issues {new:?} (before: {issues_before:?})"
            )));
        }
        Ok(expect)
    }

    /// The oracle's reading of the result, where it reads the input meaningfully: what the edits
    /// asked, and no new layout violation. Whether it checked.
    fn check_oracle(&self, bytes: &[u8], next: &[u8], expect: &Info) -> Result<bool, Failure> {
        let (elf, shown) = (self.before, &self.shown);
        // A section header table elfpatch cannot use (a garbage entry size) is still read by the
        // oracle, which then counts symbols and version records from garbage; elfpatch drops such
        // a table when it moves things, and the oracle's view of the output is a different one.
        // Its before/after comparison means nothing there when the counts already disagree.
        let garbage_count =
            |o: &oracle::Elf| elf.section_headers_unusable() && counts_disagree(self.tables, o);
        let Some(ob) = oracle::read(bytes).ok().filter(|o| !garbage_count(o)) else {
            return Ok(false);
        };
        let oa = oracle::read(next).map_err(|e| {
            Failure(format!(
                "the oracle reads the input but not the output of {shown}: {e}"
            ))
        })?;
        // The oracle reads its own way; compare it with what it read before, edited.
        let before_oracle = Info::of_oracle(&ob);
        if before_oracle == Info::of(elf).lossy() && Info::of_oracle(&oa) != expect.lossy() {
            return Err(Failure(format!(
                "edits {shown}: the oracle reads {:?}, expected {:?}",
                Info::of_oracle(&oa),
                expect.lossy()
            )));
        }
        let vb = oracle::check_layout(bytes);
        let new = new_issues(&vb, &oracle::check_layout(next));
        if !new.is_empty() {
            return Err(Failure(format!(
                "edits {shown}: new oracle layout violations {new:?} (before: {vb:?})"
            )));
        }
        Ok(true)
    }
}

/// Whether applying `plan` in memory would slice past the end of the file: a symbol fixup that
/// names a table outside the output (on disk, the applier's read fails and it rolls back).
pub fn fixup_out_of_file(plan: &Plan, e: &Elf) -> bool {
    let size = e.format.sym_size() as u64;
    plan.symbol_fixups.iter().any(|fx| {
        fx.count
            .checked_mul(size)
            .and_then(|n| n.checked_add(fx.offset))
            .is_none_or(|end| end > plan.new_len)
    })
}

/// Whether elfpatch's and the oracle's readings of the referrers disagree: elfpatch trusts
/// `DT_VERNEEDNUM`/`DT_VERDEFNUM` and the `.dynsym` section size, the oracle (as glibc) follows
/// `vn_next`/`vd_next` and the hash tables.
pub fn counts_disagree(t: &Tables, o: &oracle::Elf) -> bool {
    let dynsyms = t
        .dynsym
        .as_ref()
        .map_or(0, |d| d.names.len().saturating_sub(1));
    let verneed = t.verneed.as_ref().map_or(0, |(_, v)| v.len());
    let vernaux = t
        .verneed
        .as_ref()
        .map_or(0, |(_, v)| v.iter().map(|n| n.aux.len()).sum::<usize>());
    let verdef = t.verdef.as_ref().map_or(0, |(_, v)| v.len());
    dynsyms != o.dynsyms.len()
        || verneed != o.verneed.len()
        || vernaux != o.verneed.iter().map(|(_, a)| a.len()).sum::<usize>()
        || verdef < o.verdef.len()
}

/// A short, readable form of an edit list for failure messages.
pub fn show(edits: &[Edit]) -> String {
    let s = |b: &[u8]| {
        let t = String::from_utf8_lossy(b);
        if t.len() > 40 {
            format!(
                "{:?}…({} bytes)",
                &t[..t.char_indices().nth(40).map_or(t.len(), |(i, _)| i)],
                b.len()
            )
        } else {
            format!("{t:?}")
        }
    };
    let v: Vec<String> = edits
        .iter()
        .map(|e| match e {
            Edit::SetRunpath(v) => format!("SetRunpath({})", s(v)),
            Edit::SetRpath(v) => format!("SetRpath({})", s(v)),
            Edit::AddNeeded(v) => format!("AddNeeded({})", s(v)),
            Edit::RemoveNeeded(v) => format!("RemoveNeeded({})", s(v)),
            Edit::ReplaceNeeded { old, new } => format!("ReplaceNeeded({} -> {})", s(old), s(new)),
            Edit::SetSoname(v) => format!("SetSoname({})", s(v)),
            Edit::SetInterpreter(v) => format!("SetInterpreter({})", s(v)),
            other => format!("{other:?}"),
        })
        .collect();
    format!("[{}]", v.join(", "))
}
