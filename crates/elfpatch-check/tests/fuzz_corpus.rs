//! Replays `regressions/` (inputs the fuzz targets found, and a few interesting seeds)
//! through the fuzz targets' own property checks (this crate), so that
//! `cargo test` keeps them fixed; also on disk, where a refused edit must leave the file
//! byte-identical. Each finding has a test below (with a minimal reproducer built from elfsynth
//! where one is short) that replays its input; the checks tolerate no finding, so an input goes
//! into `regressions/` once its finding is fixed.

use elfpatch_check as check;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use elfpatch::{edit_in_place, validate, Edit, Elf, Options, Tables};
use elfsynth::{oracle, Spec};
use object::elf;

fn regressions(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target);
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no regression inputs in {}", dir.display());
    v
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The bytes of `regressions/plan_apply/NAME` (an ELF file followed by an edit script).
fn regression_input(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions/plan_apply")
        .join(name);
    fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The message with which planning `edits` on the ELF part of regression input `name` fails.
fn refusal(name: &str, edits: &[Edit]) -> String {
    let data = regression_input(name);
    let (elf_bytes, _) = check::split(&data);
    let e = Elf::parse(elf_bytes).unwrap();
    let t = Tables::read(elf_bytes, &e).unwrap();
    elfpatch::plan(&e, &t, edits, &Options::default())
        .unwrap_err()
        .to_string()
}

fn strict(name: &str) {
    let data = regression_input(name);
    match catch_unwind(|| check::plan_apply_checked(&data)) {
        Ok(Ok(_)) => {}
        Ok(Err(f)) => panic!("{name}: {}", f.0),
        Err(p) => panic!("{name}: panicked: {}", panic_message(p)),
    }
}

#[test]
fn regression_inputs_keep_their_properties() {
    let mut failures = Vec::new();
    let mut planned = 0;
    for p in regressions("plan_apply") {
        let data = fs::read(&p).unwrap();
        match catch_unwind(|| check::plan_apply_checked(&data)) {
            Ok(Ok(stats)) => planned += stats.planned,
            Ok(Err(f)) => failures.push(format!("{}: {}", p.display(), f.0)),
            Err(e) => failures.push(format!("{}: panicked: {}", p.display(), panic_message(e))),
        }
        // Every input is also a `parse` input.
        if let Err(e) = catch_unwind(|| check::parse_only(&data)) {
            failures.push(format!("{}: parse: {}", p.display(), panic_message(e)));
        }
    }
    for p in regressions("parse") {
        let data = fs::read(&p).unwrap();
        if let Err(e) = catch_unwind(|| check::parse_only(&data)) {
            failures.push(format!("{}: parse: {}", p.display(), panic_message(e)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(planned > 0, "no regression input was planned at all");
}

/// The same inputs on disk: the first batch through `edit_in_place`. A refusal (or a failed
/// write) leaves the file byte-identical; a success writes exactly what `apply_to_vec` computes.
#[test]
fn regression_inputs_on_disk_refusals_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut refused, mut applied) = (0, 0);
    for p in regressions("plan_apply") {
        let data = fs::read(&p).unwrap();
        let (elf_bytes, _) = check::split(&data);
        let Some((opts, edits)) = check::first_batch(&data) else {
            continue;
        };
        let Ok(elf) = Elf::parse(elf_bytes) else {
            continue;
        };
        let file = dir.path().join(p.file_name().unwrap());
        fs::write(&file, elf_bytes).unwrap();
        let expected = Tables::read(elf_bytes, &elf)
            .and_then(|t| elfpatch::plan(&elf, &t, &edits, &opts))
            .ok()
            .filter(|plan| !check::fixup_out_of_file(plan, &elf))
            .map(|plan| {
                let mut v = elf_bytes.to_vec();
                plan.apply_to_vec(&mut v, elf.format).unwrap();
                v
            });
        match edit_in_place(&file, &edits, &opts) {
            Err(e) => {
                refused += 1;
                assert!(
                    fs::read(&file).unwrap() == elf_bytes,
                    "{}: refused ({e}) but the file changed",
                    p.display()
                );
                assert_eq!(e.to_string().lines().count(), 1, "{e}");
                assert!(e.to_string().contains(file.to_str().unwrap()), "{e}");
            }
            Ok(_) => {
                applied += 1;
                if let Some(x) = expected {
                    assert!(
                        fs::read(&file).unwrap() == x,
                        "{}: on disk differs from in memory",
                        p.display()
                    );
                }
            }
        }
    }
    eprintln!("on disk: {applied} applied, {refused} refused");
    assert!(applied + refused > 0);
}

// ---------------------------------------------------------------------------------------------
// Findings: each test failed until its fix in crates/elfpatch/src.

/// A typical x86_64 PIE from elfsynth (section headers, `.symtab`, versioned NEEDED entries).
fn synth() -> Vec<u8> {
    let b = elfsynth::build(&Spec::default());
    assert!(oracle::check_layout(&b).is_empty());
    b
}

fn put_u64(b: &mut [u8], at: u64, v: u64) {
    b[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
}

/// File offset of field `field` of section `name`'s header (64-bit little endian files).
fn shdr_field(b: &[u8], name: &[u8], field: u64) -> u64 {
    let e = Elf::parse(b).unwrap();
    let s = e.section_by_name(name).unwrap();
    e.header.e_shoff + s.index as u64 * 64 + field
}

fn grow() -> Vec<Edit> {
    vec![Edit::SetRunpath(
        b"/opt/a-rather-long-directory-name".repeat(10),
    )]
}

/// `b` after the growing edit [`grow`].
fn grown(b: &[u8]) -> Vec<u8> {
    let plan = plan_on(b, &grow()).unwrap();
    let mut out = b.to_vec();
    plan.apply_to_vec(&mut out, Elf::parse(b).unwrap().format)
        .unwrap();
    out
}

fn plan_on(b: &[u8], edits: &[Edit]) -> elfpatch::Result<elfpatch::Plan> {
    let e = Elf::parse(b)?;
    let t = Tables::read(b, &e)?;
    elfpatch::plan(&e, &t, edits, &Options::default())
}

/// FOUND BY FUZZING, fixed (the planner, `max_load_align`): `next_power_of_two` of a `p_align` above 2^63
/// overflows (debug: panic), and in release returns 0, after which `choose_layout` computes
/// `offset % align`: "attempt to calculate the remainder with a divisor of zero". So the release
/// CLI panics too on `elfpatch --set-rpath <long> FILE` for such a file. Fuzz input:
/// regressions/plan_apply/load-align-overflow.
#[test]
fn huge_p_align_is_refused_not_a_panic() {
    let mut b = synth();
    let e = Elf::parse(&b).unwrap();
    let i = e
        .phdrs
        .iter()
        .position(|p| p.p_type == elf::PT_LOAD)
        .unwrap() as u64;
    put_u64(&mut b, e.header.e_phoff + i * 56 + 48, (1 << 63) + 1);
    let r = catch_unwind(AssertUnwindSafe(|| plan_on(&b, &grow())));
    assert!(
        r.is_ok(),
        "planning panicked: {}",
        panic_message(r.unwrap_err())
    );
    strict("load-align-overflow");
}

/// FOUND BY FUZZING, fixed (the planner, `occupants`): `end: sh.sh_offset + sh.sh_size` for every section
/// with file bytes, unchecked; a section whose file range wraps (`.comment` at offset
/// 0xffff_ffff_ffff_fff0 here) panics with overflow checks (debug builds, `cargo test`) when a
/// growing edit needs a new `PT_LOAD`, and wraps silently in release. Fuzz input:
/// regressions/plan_apply/plan-section-offset-overflow.
#[test]
fn wrapping_section_range_is_not_a_panic() {
    let mut b = synth();
    let at = shdr_field(&b, b".comment", 24);
    put_u64(&mut b, at, 0xffff_ffff_ffff_fff0);
    let r = catch_unwind(AssertUnwindSafe(|| plan_on(&b, &grow())));
    assert!(
        r.is_ok(),
        "planning panicked: {}",
        panic_message(r.unwrap_err())
    );
    strict("plan-section-offset-overflow");
}

/// FOUND BY FUZZING, fixed (validate.rs, overlap scan of allocated sections): `sh_addr + sh_size` unchecked; an
/// allocated section whose address range wraps makes `validate::check` panic with overflow checks
/// on. Fuzz input: regressions/parse/validate-section-end-overflow.
#[test]
fn validate_survives_a_wrapping_section_address() {
    let mut b = synth();
    let at = shdr_field(&b, b".text", 32);
    put_u64(&mut b, at, u64::MAX - 8);
    let e = Elf::parse(&b).unwrap();
    let r = catch_unwind(|| validate::check(&e));
    assert!(
        r.is_ok(),
        "validate panicked: {}",
        panic_message(r.unwrap_err())
    );
}

/// FOUND BY FUZZING, fixed (the planner, symbol fixups; `Plan::apply_to_vec`): the plan takes `.symtab`'s extent from
/// its section header without checking it against the file; `apply_to_vec` then slices out of
/// bounds and panics. On disk the applier's read fails and it rolls back (checked below), but the
/// plan should have been refused (or the fixup skipped). Fuzz input:
/// regressions/plan_apply/symbol-fixup-out-of-file.
#[test]
fn symbol_table_outside_the_file_is_refused() {
    let mut b = synth();
    let at = shdr_field(&b, b".symtab", 24);
    put_u64(&mut b, at, 0x4000_0000);
    let plan = plan_on(&b, &grow());
    if let Ok(plan) = plan {
        let e = Elf::parse(&b).unwrap();
        let mut v = b.clone();
        let r = catch_unwind(AssertUnwindSafe(|| plan.apply_to_vec(&mut v, e.format)));
        assert!(
            r.is_ok(),
            "apply_to_vec panicked: {}",
            panic_message(r.unwrap_err())
        );
    }
    strict("symbol-fixup-out-of-file");
}

/// The on-disk half of the finding above holds today: the failed read rolls back.
#[test]
fn symbol_table_outside_the_file_leaves_the_file_unchanged_on_disk() {
    let mut b = synth();
    let at = shdr_field(&b, b".symtab", 24);
    put_u64(&mut b, at, 0x4000_0000);
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f");
    fs::write(&p, &b).unwrap();
    let r = edit_in_place(&p, &grow(), &Options::default());
    if let Err(e) = r {
        assert!(fs::read(&p).unwrap() == b, "{e}: file changed");
    }
}

/// FOUND BY FUZZING, fixed (refs.rs, `read_verneed`): elfpatch reads `DT_VERNEEDNUM` records (0 when the tag is
/// absent) while glibc (`_dl_check_map_versions`) follows `vn_next` until it is 0. Version names
/// past the count are then not known to be referenced: when one shares bytes with a string the
/// edit replaces (linker tail merging), those bytes are reused or zeroed, and the loader then asks
/// libm for a version with another name (pitfall 9). Here `DT_VERNEEDNUM` says 1 of 2 records and
/// libm's version name "GLIBC_2.29" is the tail of the SONAME; shrinking the SONAME clobbers it.
/// Fuzz input: regressions/plan_apply/verneednum-missing (`DT_VERNEEDNUM` absent).
#[test]
fn version_names_past_verneednum_are_not_overwritten() {
    let spec = Spec {
        verneed: vec![
            ("libc.so.6".into(), vec!["GLIBC_2.34".into()]),
            ("libm.so.6".into(), vec!["GLIBC_2.29".into()]),
        ],
        soname: Some("libsynth-GLIBC_2.29".into()),
        tail_merge: true,
        ..Spec::default()
    };
    let mut b = elfsynth::build(&spec);
    assert!(oracle::check_layout(&b).is_empty());
    let e = Elf::parse(&b).unwrap();
    let d = e.dynamic.as_ref().unwrap();
    let i = d
        .entries()
        .iter()
        .position(|x| x.tag == u64::from(elf::DT_VERNEEDNUM))
        .unwrap();
    put_u64(&mut b, d.offset + i as u64 * 16 + 8, 1);
    // The oracle reads the chain as the loader does and reports the count on its own.
    assert_eq!(
        oracle::check_layout(&b),
        ["DT_VERNEEDNUM is 1 but the chain has 2 entries"]
    );
    let before = loader_version_needs(&b);
    assert_eq!(before.len(), 2, "{before:?}");
    let mut failures = Vec::new();
    for edits in [
        vec![Edit::SetSoname(b"libx.so.1".to_vec())],
        vec![Edit::SetSoname(
            b"libsynth.so.2-with-a-longer-name".to_vec(),
        )],
    ] {
        let plan = plan_on(&b, &edits).unwrap();
        let mut v = b.clone();
        plan.apply_to_vec(&mut v, e.format).unwrap();
        let after = loader_version_needs(&v);
        if after != before {
            failures.push(format!(
                "{edits:?}: the loader now reads {after:?}, was {before:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    strict("verneednum-missing");
}

/// The version needs as glibc walks them (`vn_next`/`vna_next` chains from `DT_VERNEED`,
/// ignoring `DT_VERNEEDNUM`): (file, version names). 64-bit little-endian files only.
fn loader_version_needs(b: &[u8]) -> Vec<(String, Vec<String>)> {
    let e = Elf::parse(b).unwrap();
    let d = e.dynamic.as_ref().unwrap();
    let st = e.strtab.as_ref().unwrap();
    let u16_at = |o: u64| u16::from_le_bytes([b[o as usize], b[o as usize + 1]]);
    let u32_at = |o: u64| u32::from_le_bytes(b[o as usize..o as usize + 4].try_into().unwrap());
    let name =
        |off: u32| String::from_utf8_lossy(st.get(u64::from(off)).unwrap_or(b"<bad>")).into_owned();
    let mut out = Vec::new();
    let Some(vaddr) = d.get(0x6fff_fffe) else {
        return out;
    };
    let mut at = e.vaddr_to_offset(vaddr, 16).unwrap();
    loop {
        let (cnt, file, aux, next) = (
            u16_at(at + 2),
            u32_at(at + 4),
            u32_at(at + 8),
            u32_at(at + 12),
        );
        let mut names = Vec::new();
        let mut a = at + u64::from(aux);
        for _ in 0..cnt {
            names.push(name(u32_at(a + 8)));
            let nx = u32_at(a + 12);
            if nx == 0 {
                break;
            }
            a += u64::from(nx);
        }
        out.push((name(file), names));
        if next == 0 || out.len() > 64 {
            break;
        }
        at += u64::from(next);
    }
    out
}

/// FOUND BY FUZZING, fixed (refs.rs, symbol count): `.dynsym`'s count comes from its section header when there is
/// one, while the hash table (which the loader uses) covers more symbols; names of the symbols past
/// the section's count are not protected. Fuzz input: regressions/plan_apply/dynsym-count-disagrees.
#[test]
fn dynsym_count_from_the_section_and_the_hash_table_agree() {
    strict("dynsym-count-disagrees");
}

/// FOUND BY FUZZING, fixed (the planner, `find_room`/`occupants`): with section headers present only sections count
/// as occupants after the program header table; `DT_HASH` here lies in bytes no section describes,
/// is taken for slack and overwritten by the grown program header table (the oracle then reads
/// nchain 0). Fuzz input: regressions/plan_apply/room-ignores-dynamic-tables.
#[test]
fn grown_phdr_table_does_not_overwrite_dynamic_tables() {
    strict("room-ignores-dynamic-tables");
}

/// FOUND BY FUZZING, fixed (the planner, `max_load_align` with `Options::page_size`): a page size above every
/// existing `p_align` (here 32 KiB on a 4 KiB file) becomes the new `PT_LOAD`'s `p_align`, and the
/// existing segments are then not congruent modulo the file's largest `p_align`, which the oracle
/// (pitfall 2, glibc < 2.35) rejects. Fuzz input: regressions/plan_apply/page-size-above-existing-align.
#[test]
fn page_size_above_existing_alignment_keeps_congruence() {
    let b = synth();
    let e = Elf::parse(&b).unwrap();
    let t = Tables::read(b.as_slice(), &e).unwrap();
    let plan = elfpatch::plan(
        &e,
        &t,
        &grow(),
        &Options {
            page_size: Some(0x8000),
            ..Options::default()
        },
    )
    .unwrap();
    let mut v = b.clone();
    plan.apply_to_vec(&mut v, e.format).unwrap();
    let bad = oracle::check_layout(&v);
    assert!(bad.is_empty(), "{bad:?}");
    strict("page-size-above-existing-align");
}

/// FOUND BY FUZZING, fixed (the planner, `choose_layout`): the new segment's base is
/// `align_up(top + reach, align) + align` with only `top + reach` checked. A `PT_LOAD` with
/// `p_align` 2^63 (or an image near the top of the address space) overflows: a panic with overflow
/// checks, and in release a wrapped, low base, so the new `PT_LOAD` lands below the others ("PT_LOAD
/// at 0x19e0 follows one at 0x3b18: not sorted by address"). Fuzz input:
/// regressions/plan_apply/new-segment-base-overflow.
#[test]
fn new_segment_base_does_not_wrap() {
    let mut b = synth();
    let e = Elf::parse(&b).unwrap();
    let i = e
        .phdrs
        .iter()
        .position(|p| p.p_type == elf::PT_LOAD)
        .unwrap() as u64;
    put_u64(&mut b, e.header.e_phoff + i * 56 + 48, 1 << 63);
    let r = catch_unwind(AssertUnwindSafe(|| plan_on(&b, &grow())));
    assert!(
        r.is_ok(),
        "planning panicked: {}",
        panic_message(r.unwrap_err())
    );
    strict("new-segment-base-overflow");
}

/// FOUND BY FUZZING, fixed (plan: relocating non-`PT_LOAD` segments): a `PT_INTERP` with a garbage `p_memsz` that the
/// parser accepts (its end still fits in 64 bits) is moved up by a growing edit; afterwards its
/// `p_vaddr + p_memsz` wraps and elfpatch refuses to read its own output ("segment 1 wraps the
/// address space"). The planner should refuse such input or check what it writes. Fuzz input:
/// regressions/plan_apply/relocated-segment-wraps.
#[test]
fn output_of_a_growing_edit_is_readable() {
    strict("relocated-segment-wraps");
}

/// FOUND BY FUZZING, fixed (the reader's `read_interp`/`read_strtab`): the section of a table
/// elfpatch may move was recognized by strict criteria: `.interp` by its name only, `.dynstr` only if its `sh_type` is
/// `SHT_STRTAB`. When that fails (the section name table's `sh_type` is garbage in the first
/// input, `.dynstr`'s in the second; both are gcc PIEs otherwise clean for the oracle), a growing
/// edit moved the interpreter or the string table and left that section header pointing at the
/// old, zeroed bytes. Fuzz inputs: regressions/plan_apply/interp-section-by-name,
/// regressions/plan_apply/dynstr-section-unrecognized.
#[test]
fn moved_tables_sections_follow_them() {
    let mut failures = Vec::new();
    for name in ["interp-section-by-name", "dynstr-section-unrecognized"] {
        if let Err(p) = catch_unwind(|| strict(name)) {
            failures.push(panic_message(p));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// FOUND BY FUZZING, fixed (the planner's room for a grown program header table): the block
/// moved out of the way of the grown program header table was aligned to the largest alignment of its occupants, which includes a
/// non-`PT_LOAD` segment's `p_align` as is; a garbage `p_align` of 0x3ff on `PT_INTERP` (i386 gcc
/// program) makes the block congruent modulo 0x3ff, and the moved `.note.gnu.build-id` lands at
/// 0x493e, not 4-aligned. Non-power-of-two alignments should be ignored or refused. Fuzz input:
/// regressions/plan_apply/block-align-not-power-of-two.
#[test]
fn moved_block_keeps_section_alignment() {
    strict("block-align-not-power-of-two");
}

/// FOUND BY FUZZING, fixed (the planner `symbol_fixups`,
/// `Plan::apply_to_vec`): a `.symtab` of size 0 with a garbage offset became a symbol fixup (no
/// one checks where an empty section lies), and `apply_to_vec` sliced from that offset: a panic
/// ("range start index ... out of range"). Empty tables have nothing to fix now, and a table
/// outside the file is an error, not a panic. Fuzz input: empty-symbol-table-fixup.
#[test]
fn an_empty_symbol_table_with_a_garbage_offset_is_not_a_fixup() {
    strict("empty-symbol-table-fixup");
}

/// FOUND BY FUZZING, fixed (plan/input.rs `Input::new`): a
/// second `DT_STRTAB` (value 1) before the real one; elfpatch took the first, so the "string
/// table" covered the ELF header, and a growing edit zeroed it as dead bytes once the table
/// moved: the CLI reported success and left a file starting `7f 00 00 00`. Tags naming one table
/// with two different values (glibc keeps the last, this reader the first) and tables overlapping
/// the ELF header, the program or section header table, the interpreter path or the dynamic array
/// are refused now; on disk the file stays byte-identical
/// (`regression_inputs_on_disk_refusals_write_nothing`). Fuzz input: duplicate-strtab-over-elf-header.
#[test]
fn a_string_table_over_the_elf_header_is_refused() {
    strict("duplicate-strtab-over-elf-header");
}

/// FOUND BY FUZZING, fixed with the previous one: `PT_INTERP` pointed into `.dynstr` (at the
/// `/lib` tail of the RUNPATH string); replacing a NEEDED zeroed the bytes no dynamic entry used
/// any more, and the interpreter read back empty. Fuzz input: interp-inside-dynstr.
#[test]
fn an_interpreter_path_inside_the_string_table_is_refused() {
    strict("interp-inside-dynstr");
}

/// FOUND BY FUZZING: a writable segment that held `.dynamic` is made read-only once `.dynamic`
/// moved on and only read-only tables are left in it; the first version of that did so from the
/// section headers alone, and garbage ones (an unrecognized `.dynamic`, a MIPS `.rld_map` no
/// section describes) made `PT_DYNAMIC` or `DT_MIPS_RLD_MAP_REL`'s target read-only. Fuzz inputs:
/// dynamic-stays-in-writable-segment, mips-rld-map-keeps-segment-writable.
#[test]
fn segments_the_loader_writes_stay_writable() {
    strict("dynamic-stays-in-writable-segment");
    strict("mips-rld-map-keeps-segment-writable");
}

/// Garbage in, not findings: an `SHT_NULL` section header with the fields of a note section
/// (gABI: its other members are undefined, and the oracle now ignores it), and `e_shoff` 0 with
/// `e_shnum` 29 (no section header table, as the gABI says; the oracle used to read one over the
/// ELF header).
/// Both must still pass the loader-level properties. Fuzz inputs: null-section-with-fields,
/// shoff-zero-with-sections.
#[test]
fn inactive_or_absent_section_headers_do_not_count() {
    strict("null-section-with-fields");
    strict("shoff-zero-with-sections");
}

/// FOUND BY FUZZING, fixed (plan/input.rs `Input::new`,
/// the planner `finish`): `PT_INTERP` at file offset 0, so the "interpreter path" was the ELF
/// header; a longer interpreter moved it and zeroed the old bytes: the file started with four zero
/// bytes. The interpreter path, the dynamic array and the dynamic tables must not overlap the
/// headers or each other now, and a plan that would write anything but the header over the ELF
/// header is refused. Fuzz input: interp-over-elf-header.
#[test]
fn an_interpreter_path_over_the_elf_header_is_refused() {
    strict("interp-over-elf-header");
    let err = refusal(
        "interp-over-elf-header",
        &[Edit::SetInterpreter(vec![b'i'; 300])],
    );
    assert!(err.contains("overlaps the ELF header"), "{err}");
}

/// FOUND BY FUZZING, fixed (plan/input.rs `Input::new`):
/// `DT_SYMENT` 4351 in a shared library; glibc asserts `DT_SYMENT == sizeof (Sym)`, and other
/// readers took one 4351-byte "symbol" at `DT_SYMTAB`, which after the table moved to the end of
/// the file ran past it. A symbol entry size other than the class's is refused now. Fuzz input:
/// symbol-entry-size-garbage.
#[test]
fn a_garbage_symbol_entry_size_is_refused() {
    strict("symbol-entry-size-garbage");
    let err = refusal(
        "symbol-entry-size-garbage",
        &[Edit::SetRunpath(vec![b'r'; 400])],
    );
    assert!(err.contains("DT_SYMENT"), "{err}");
}

/// FOUND BY FUZZING in CI's 60-second run, fixed in the commit that added this test
/// (the planner, `find_room`): a section of garbage type over the bytes of a note, starting where
/// the movable `PT_NOTE` does. The run of movable things freeing room for the grown program header
/// table stopped at the note, and only occupants reaching past the block were checked, so the
/// unmovable section inside it stayed behind, overlapping the grown table. Every occupant that
/// starts inside the block must be movable now, else the table itself moves. Fuzz input:
/// unmovable-section-inside-moved-block.
#[test]
fn an_unmovable_section_inside_the_moved_block_keeps_it_in_place() {
    strict("unmovable-section-inside-moved-block");
}

/// FOUND BY FUZZING, fixed (plan/input.rs `Input::new`): two
/// `PT_PHDR`s, one with a garbage offset and size 0. A growing edit gives every `PT_PHDR` the new
/// table's size, so the garbage one came to claim 0x268 bytes far past the end of the file. The
/// gABI allows one `PT_PHDR`; a file with more is refused. Fuzz input: two-phdr-segments.
#[test]
fn two_program_header_segments_are_refused() {
    strict("two-phdr-segments");
    let err = refusal("two-phdr-segments", &[Edit::SetRunpath(vec![b'r'; 900])]);
    assert!(err.contains("more than one PT_PHDR"), "{err}");
}

/// FOUND BY FUZZING (CI-length run from fresh seeds), fixed in the commit that added this test
/// (the planner, moved sections): an empty `.dynsym` right after the notes, in the block moved
/// out of the way of the grown program header table. `DT_SYMTAB` was rebased with the block, but
/// only sections with bytes followed it, so the empty section kept its old address and the
/// section headers no longer described `DT_SYMTAB`. Fuzz input: empty-section-in-moved-block.
#[test]
fn an_empty_section_in_the_moved_block_moves_with_it() {
    strict("empty-section-in-moved-block");
    // In elfsynth's PIE the grown program header table displaces `.interp` and the build-id
    // note; an empty note section there must keep its place relative to `.interp`. The RUNPATH
    // outgrows the rest of the first segment's page, where `.dynstr` could grow where it is
    // (`appended/tail.rs`): the edit needs a new segment, so a grown table.
    let mut b = synth();
    let size_field = shdr_field(&b, b".note.gnu.build-id", 32);
    put_u64(&mut b, size_field, 0);
    let plan = plan_on(&b, &[Edit::SetRunpath(vec![b'r'; 5000])]).unwrap();
    let mut out = b.clone();
    plan.apply_to_vec(&mut out, Elf::parse(&b).unwrap().format)
        .unwrap();
    let addr = |bytes: &[u8], name: &[u8]| {
        let e = Elf::parse(bytes).unwrap();
        let sh = e.section_by_name(name).unwrap().shdr;
        (sh.sh_offset, sh.sh_addr)
    };
    let (interp_before, note_before) = (addr(&b, b".interp"), addr(&b, b".note.gnu.build-id"));
    let (interp_after, note_after) = (addr(&out, b".interp"), addr(&out, b".note.gnu.build-id"));
    assert_ne!(interp_before, interp_after, ".interp did not move");
    assert_eq!(
        (
            note_after.0.wrapping_sub(interp_after.0),
            note_after.1.wrapping_sub(interp_after.1)
        ),
        (
            note_before.0 - interp_before.0,
            note_before.1 - interp_before.1
        ),
        "the empty note stayed behind: {note_before:x?} -> {note_after:x?}"
    );
}

/// FOUND BY FUZZING (CI's 60-second run; the input was not kept), fixed in the commit that added
/// this test (read/, `read_strtab`): the section of `DT_STRTAB` was the first allocated string
/// table at its address, while the gABI names it through `.dynamic`'s `sh_link`. With another
/// section claiming the same address first, a growing edit moved that one's header and left
/// `.dynstr` describing the old, zeroed bytes.
#[test]
fn the_string_table_section_is_the_one_dynamic_links_to() {
    let mut b = synth();
    let e = Elf::parse(&b).unwrap();
    let dynstr_addr = e.section_by_name(b".dynstr").unwrap().shdr.sh_addr;
    let hash = e.section_by_name(b".gnu.hash").unwrap().index;
    let dynstr = e.section_by_name(b".dynstr").unwrap().index;
    assert!(hash < dynstr);
    let type_field = shdr_field(&b, b".gnu.hash", 4);
    b[type_field as usize..type_field as usize + 4].copy_from_slice(&3u32.to_le_bytes());
    let addr_field = shdr_field(&b, b".gnu.hash", 16);
    put_u64(&mut b, addr_field, dynstr_addr);
    let out = grown(&b);
    let e = Elf::parse(&out).unwrap();
    let sh = e.section_by_name(b".dynstr").unwrap().shdr;
    let st = e.strtab.as_ref().unwrap();
    assert_eq!(
        (sh.sh_offset, sh.sh_addr),
        (st.offset, st.vaddr),
        ".dynstr was left behind"
    );
}

/// Seeds `seed-*-page-tail-several-twice` (fuzz/examples/seeds.rs): the first segment stops short
/// of `.dynstr` and the version tables, which lie in the rest of its last page, mapped by the
/// loader (the layout patchelf 0.17.2 leaves non-PIE programs in). Every batch is planned (none
/// refused) and keeps every property, through elfpatch and through the oracle.
#[test]
fn tables_in_a_page_tail_are_planned_and_keep_the_properties() {
    for name in [
        "seed-x86_64-page-tail-several-twice",
        "seed-ppc64-page-tail-several-twice",
    ] {
        let data = regression_input(name);
        let (elf_bytes, _) = check::split(&data);
        let e = Elf::parse(elf_bytes).unwrap();
        let st = e.strtab.as_ref().unwrap();
        assert!(
            !e.loads().any(|p| p.contains_offset(st.offset, st.size)),
            "{name}: .dynstr is inside p_filesz"
        );
        let stats = check::plan_apply_checked(&data).unwrap_or_else(|f| panic!("{name}: {}", f.0));
        assert_eq!((stats.planned, stats.refused), (2, 0), "{name}: {stats:?}");
        assert_eq!(stats.oracle_checked, 2, "{name}: {stats:?}");
    }
}
