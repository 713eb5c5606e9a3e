//! Property tests on synthetic ELF files (`elfsynth`): every class, byte order, file type and
//! machine, with and without section headers, page sizes 4 KiB to 64 KiB. Random sequences of edit
//! batches are planned and applied in memory; after each batch the file is re-read by elfsynth's
//! independent oracle and must say exactly what was asked, keep everything else, and satisfy the
//! layout invariants.

use std::collections::BTreeSet;

use elfpatch::{Edit, Elf, Layout, Options, Tables};
use elfpatch_check::{Asked, Model};
use elfsynth::oracle;
use elfsynth::strategy::{arb_lib_name, arb_spec, arb_string};
use proptest::prelude::*;

fn arb_edit(needed: Vec<String>, has_interp: bool) -> impl Strategy<Value = Edit> {
    let existing = if needed.is_empty() {
        vec!["libabsent.so".to_string()]
    } else {
        needed
    };
    let b = |s: String| s.into_bytes();
    let interp = if has_interp {
        "/[a-z]{1,10}(/[a-z0-9._-]{1,40}){0,6}"
            .prop_map(move |s| Edit::SetInterpreter(s.into_bytes()))
            .boxed()
    } else {
        arb_string()
            .prop_map(move |s| Edit::SetRunpath(s.into_bytes()))
            .boxed()
    };
    let ex2 = existing.clone();
    prop_oneof![
        4 => arb_string().prop_map(move |s| Edit::SetRunpath(b(s))),
        2 => arb_string().prop_map(move |s| Edit::SetRpath(s.into_bytes())),
        1 => Just(Edit::RemoveRunpath),
        1 => Just(Edit::RemoveRpath),
        1 => Just(Edit::RpathToRunpath),
        1 => Just(Edit::RunpathToRpath),
        2 => arb_lib_name().prop_map(|s| Edit::AddNeeded(s.into_bytes())),
        1 => proptest::sample::select(existing).prop_map(|s| Edit::RemoveNeeded(s.into_bytes())),
        2 => (proptest::sample::select(ex2), arb_lib_name()).prop_map(|(o, n)| Edit::ReplaceNeeded { old: o.into_bytes(), new: n.into_bytes() }),
        2 => arb_string().prop_map(|s| Edit::SetSoname(s.into_bytes())),
        2 => interp,
    ]
}

fn arb_case() -> impl Strategy<Value = (elfsynth::Spec, Vec<Vec<Edit>>)> {
    arb_spec().prop_flat_map(|spec| {
        let needed = spec.needed.clone();
        let has_interp = spec.interp.is_some();
        let batches = prop::collection::vec(
            prop::collection::vec(arb_edit(needed, has_interp), 1..4),
            1..4,
        );
        (Just(spec), batches)
    })
}

/// Sections whose bytes an edit may legitimately change or move.
const EDITABLE: [&str; 7] = [
    ".dynstr",
    ".dynamic",
    ".interp",
    ".gnu.version_r",
    ".gnu.version",
    ".dynsym",
    ".symtab",
];

/// The dynamic tags whose entries a batch that asks `asked` may change or add besides strings
/// and pointers.
fn flag_tags(asked: &Asked) -> Vec<u64> {
    let mut tags = Vec::new();
    if asked.flags_1.is_some() {
        tags.push(u64::from(object::elf::DT_FLAGS_1));
    }
    if asked.debug_tag {
        tags.push(u64::from(object::elf::DT_DEBUG));
    }
    tags
}

fn check_batch(
    before: &[u8],
    after: &[u8],
    expect: &Model,
    asked: &Asked,
) -> Result<(), TestCaseError> {
    let ob =
        oracle::read(before).map_err(|e| TestCaseError::fail(format!("oracle on input: {e:?}")))?;
    let oa =
        oracle::read(after).map_err(|e| TestCaseError::fail(format!("oracle on output: {e:?}")))?;
    // 1. Exactly what was asked.
    prop_assert_eq!(&Model::of_oracle(&oa), expect);
    // 2. Everything else unchanged: dynamic symbols, version definitions, other dynamic entries.
    prop_assert_eq!(ob.dynsym_names(), oa.dynsym_names());
    // A removed library's versions become the global one; once no version record is left at all
    // (and none is defined), DT_VERSYM goes too, and every symbol is unversioned.
    let unversioned = oa.verneed.is_empty() && oa.verdef.is_empty();
    for (x, y) in ob.dynsyms.iter().zip(&oa.dynsyms) {
        prop_assert!(
            x.version == y.version || y.version == Some(1) || (y.version.is_none() && unversioned),
            "symbol version of {} changed",
            x.name
        );
        prop_assert_eq!((x.size, x.info, x.shndx), (y.size, y.info, y.shndx));
    }
    prop_assert_eq!(&ob.verdef, &oa.verdef);
    for (f, vers) in &oa.verneed {
        prop_assert!(
            ob.verneed.iter().any(|(_, v)| v == vers),
            "version names of {} changed",
            f
        );
    }
    let stable = |e: &oracle::Elf| -> BTreeSet<(u64, u64)> {
        e.dynamic
            .iter()
            .filter(|d| {
                d.string.is_none()
                    && !oracle::POINTER_TAGS.contains(&d.tag)
                    && ![5u64, 10, 0x6fff_ffff].contains(&d.tag)
            })
            .filter(|d| d.tag != u64::from(object::elf::DT_MIPS_RLD_MAP_REL)) // slot-relative
            .filter(|d| !flag_tags(asked).contains(&d.tag)) // checked by the header-edit test
            .map(|d| (d.tag, d.value))
            .collect()
    };
    let (sb, sa) = (stable(&ob), stable(&oa));
    prop_assert!(
        sa.iter().all(|x| sb.contains(x)),
        "non-string entries changed: {:?} vs {:?}",
        sb,
        sa
    );
    for (x, y) in ob.symtab.iter().zip(&oa.symtab) {
        prop_assert_eq!(&x.name, &y.name);
    }
    // 3. Bytes of every section we have no business changing are intact (moved ones copied whole).
    for s in &ob.sections {
        if EDITABLE.contains(&s.name.as_str())
            || s.sh_type == object::elf::SHT_NOBITS
            || s.size == 0
        {
            continue;
        }
        let Some(t) = oa
            .sections
            .iter()
            .find(|t| t.name == s.name && t.sh_type == s.sh_type)
        else {
            return Err(TestCaseError::fail(format!("section {} vanished", s.name)));
        };
        let old = &before[s.offset as usize..(s.offset + s.size) as usize];
        let new = &after[t.offset as usize..(t.offset + t.size) as usize];
        prop_assert!(old == new, "bytes of section {} changed", s.name);
    }
    // 4. Layout invariants: nothing the oracle did not already report for the input.
    let vb = oracle::check_layout(before);
    let new_violations: Vec<_> = oracle::check_layout(after)
        .into_iter()
        .filter(|v| !vb.contains(v))
        .collect();
    prop_assert!(
        new_violations.is_empty(),
        "layout violations: {:?}",
        new_violations
    );
    let eb = Elf::parse(before).unwrap();
    let ea = Elf::parse(after)
        .map_err(|e| TestCaseError::fail(format!("elfpatch cannot re-read its output: {e}")))?;
    let ib = elfpatch::validate::check(&eb);
    let new_issues: Vec<_> = elfpatch::validate::check(&ea)
        .into_iter()
        .filter(|i| !ib.contains(i))
        .collect();
    prop_assert!(new_issues.is_empty(), "validate: {:?}", new_issues);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("ELFPATCH_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_edit_sequences_do_exactly_what_was_asked((spec, batches) in arb_case()) {
        let original = elfsynth::build(&spec);
        prop_assume!(oracle::check_layout(&original).is_empty());
        let mut bytes = original.clone();
        let mut model = Model::of_oracle(&oracle::read(&original).unwrap());
        let loads_before = Elf::parse(&original).unwrap().loads().count();
        for batch in &batches {
            let elf = Elf::parse(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let tables = Tables::read(bytes.as_slice(), &elf).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let plan = match elfpatch::plan(&elf, &tables, batch, &Options::default()) {
                Ok(p) => p,
                // A refusal must say why, and only for reasons we accept on these inputs.
                Err(e) => return Err(TestCaseError::fail(format!("refused {batch:?}: {e}"))),
            };
            let mut next = bytes.clone();
            plan.apply_to_vec(&mut next, elf.format).unwrap();
            let mut expect = model.clone();
            let asked = expect.apply(batch);
            check_batch(&bytes, &next, &expect, &asked)?;
            if expect == model {
                prop_assert!(plan.is_empty(), "a no-op batch wrote: {:?}", plan.layout);
            }
            if plan.layout == Layout::InPlace {
                prop_assert_eq!(next.len(), bytes.len());
            }
            model = expect;
            bytes = next;
        }
        // Several growing batches never pile up segments.
        prop_assert!(Elf::parse(&bytes).unwrap().loads().count() <= loads_before + 1);
    }
}

/// The property test is only as good as the layouts it reaches: every strategy of the planner
/// must occur on a few hundred random cases.
#[test]
fn random_cases_reach_every_layout_strategy() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config::default());
    let (mut in_place, mut extended, mut moved_phdrs, mut moved_block, mut plain_new) =
        (0, 0, 0, 0, 0);
    let (mut from_tail, mut grown) = (0, 0);
    for _ in 0..600 {
        let (spec, batches) = arb_case().new_tree(&mut runner).unwrap().current();
        let mut bytes = elfsynth::build(&spec);
        for batch in &batches {
            let elf = Elf::parse(&bytes).unwrap();
            // A string table that runs past p_filesz into the mapped rest of its page.
            let st = elf.strtab.as_ref().unwrap();
            if !elf.loads().any(|p| p.contains_offset(st.offset, st.size)) {
                from_tail += 1;
            }
            let tables = Tables::read(bytes.as_slice(), &elf).unwrap();
            let plan = elfpatch::plan(&elf, &tables, batch, &Options::default()).unwrap();
            match &plan.layout {
                Layout::InPlace => in_place += 1,
                Layout::Appended { extended: true, .. } => extended += 1,
                Layout::Appended {
                    moved_phdrs: true, ..
                } => moved_phdrs += 1,
                Layout::Appended { moved, .. }
                    if moved.iter().any(|m| {
                        m.contains("note")
                            || m.contains("interp")
                            || m.contains("hash")
                            || m.contains("after the program headers")
                    }) =>
                {
                    moved_block += 1
                }
                Layout::Appended { .. } => plain_new += 1,
                Layout::Grown { .. } => grown += 1,
                Layout::Unchanged => {}
            }
            plan.apply_to_vec(&mut bytes, elf.format).unwrap();
        }
    }
    eprintln!("in place {in_place}, extended {extended}, table moved {moved_phdrs}, block moved {moved_block}, new segment {plain_new}, .dynstr grown where it is {grown}, .dynstr in a page's tail {from_tail}");
    for (name, n) in [
        (".dynstr grown where it is", grown),
        (".dynstr in a page's tail", from_tail),
        ("in place", in_place),
        ("extended", extended),
        ("table moved", moved_phdrs),
        ("block moved", moved_block),
        ("new segment", plain_new),
    ] {
        assert!(n > 0, "no case reached: {name}");
    }
}

/// One header or flag edit, with what it asks.
fn arb_header_edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<u8>().prop_map(Edit::SetOsAbi),
        any::<bool>().prop_map(Edit::SetExecstack),
        prop_oneof![Just(0x800u64), Just(0x8), Just(0x801)].prop_map(Edit::AddFlags1),
        Just(Edit::AddDebugTag),
    ]
}

/// A case for the header edits: a spec whose `PT_GNU_STACK` is kept, turned into `PT_NULL` (a
/// free entry) or into a type no loader knows (no free entry: the table must grow), and batches
/// mixing header edits with the others.
fn arb_header_case() -> impl Strategy<Value = (elfsynth::Spec, u32, Vec<Vec<Edit>>)> {
    arb_spec().prop_flat_map(|spec| {
        let needed = spec.needed.clone();
        let has_interp = spec.interp.is_some();
        let edit = prop_oneof![
            2 => arb_header_edit(),
            1 => arb_edit(needed, has_interp),
        ];
        let batches = prop::collection::vec(prop::collection::vec(edit, 1..4), 1..3);
        let stack_type = prop_oneof![
            Just(object::elf::PT_GNU_STACK),
            Just(object::elf::PT_NULL),
            Just(0x6000_0000u32),
        ];
        (Just(spec), stack_type, batches)
    })
}

/// `bytes` with the `PT_GNU_STACK` entry's type replaced by `p_type`.
fn retype_stack(bytes: &mut [u8], p_type: u32) {
    let elf = Elf::parse(bytes).unwrap();
    let f = elf.format;
    for (i, p) in elf.phdrs.iter().enumerate() {
        if p.p_type == object::elf::PT_GNU_STACK {
            let at = (elf.header.e_phoff + (i * f.phdr_size()) as u64) as usize;
            let enc = f.encode_phdr(&elfpatch::format::Phdr { p_type, ..*p });
            bytes[at..at + enc.len()].copy_from_slice(&enc);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    /// The header and flag edits, alone and with the others, on every class, byte order and
    /// machine: each says what was asked, the rest as `random_edit_sequences_do_exactly_what_was_asked`
    /// checks it, and a program header table grown for a new `PT_GNU_STACK` keeps the layout
    /// invariants.
    #[test]
    fn header_edits_do_exactly_what_was_asked((spec, stack_type, batches) in arb_header_case()) {
        let mut bytes = elfsynth::build(&spec);
        retype_stack(&mut bytes, stack_type);
        prop_assume!(oracle::check_layout(&bytes).is_empty());
        let mut model = Model::of_oracle(&oracle::read(&bytes).unwrap());
        for batch in &batches {
            let elf = Elf::parse(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let tables = Tables::read(bytes.as_slice(), &elf).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let plan = elfpatch::plan(&elf, &tables, batch, &Options::default())
                .map_err(|e| TestCaseError::fail(format!("refused {batch:?}: {e}")))?;
            let mut next = bytes.clone();
            plan.apply_to_vec(&mut next, elf.format).unwrap();
            let mut expect = model.clone();
            let asked = expect.apply(batch);
            check_batch(&bytes, &next, &expect, &asked)?;
            let after = Elf::parse(&next).unwrap();
            let dynamic = after.dynamic.as_ref().unwrap();
            let count = |tag: u32| dynamic.entries().iter().filter(|x| x.tag == u64::from(tag)).count();
            let abi = asked.os_abi.unwrap_or(elf.os_abi());
            let stack = asked.execstack.or(elf.execstack());
            let (bits, debug) = (asked.flags_1.unwrap_or(0), asked.debug_tag);
            prop_assert_eq!(after.os_abi(), abi);
            prop_assert_eq!(after.execstack(), stack);
            let stacks = after.phdrs.iter().filter(|p| p.p_type == object::elf::PT_GNU_STACK).count();
            prop_assert!(stacks <= 1, "{} PT_GNU_STACK entries", stacks);
            prop_assert_eq!(after.flags_1().unwrap_or(0) & bits, bits);
            let before_flags = elf.flags_1();
            if let Some(v) = before_flags {
                prop_assert_eq!(after.flags_1().unwrap() & v, v, "DT_FLAGS_1 lost bits");
            }
            prop_assert!(count(object::elf::DT_FLAGS_1) <= 1);
            if debug {
                prop_assert_eq!(count(object::elf::DT_DEBUG), 1);
            } else {
                prop_assert_eq!(count(object::elf::DT_DEBUG), elf.dynamic.as_ref().unwrap().entries().iter().filter(|x| x.tag == u64::from(object::elf::DT_DEBUG)).count());
            }
            model = expect;
            bytes = next;
        }
    }
}
