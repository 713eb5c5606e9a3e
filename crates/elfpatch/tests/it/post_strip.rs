//! Property test: what elfpatch writes survives GNU `strip -S`, the post-processor every nixpkgs
//! build runs after the editors (docs/elfpatch.md, "After the edit"). Random x86-64 files from
//! `elfsynth` (both classes, programs and libraries, every room strategy the planner has) get
//! random growing edits; the edited file and the unedited one are each stripped. On the edited
//! one, strip must succeed where it succeeds on the unedited one, print nothing it does not print
//! there (binutils' `lma ... adjusted`, `can't be allocated in segment`), leave a file whose
//! layout elfsynth's oracle accepts as it accepts the stripped original, and leave a file
//! elfpatch plans a further growing edit on. The host's binutils strip handles x86 only, hence
//! the machine; tests/postproc runs the other architectures and tools on real linker output.

use std::path::Path;
use std::process::Command;

use elfpatch::{Edit, Elf, Layout, Options, Tables};
use elfsynth::oracle;
use elfsynth::strategy::{arb_lib_name, arb_spec};
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("ELFPATCH_STRIP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

/// Whether `strip` runs here; without it the test says so and passes, unless the test run
/// demands every tool (`STUBSTRIP_REQUIRE_TOOLS=1`, as CI sets).
fn strip_available() -> bool {
    let ok = Command::new("strip").arg("--version").output().is_ok();
    if !ok {
        assert!(
            std::env::var_os("STUBSTRIP_REQUIRE_TOOLS").is_none(),
            "strip (GNU binutils) is required"
        );
        eprintln!("post_strip: SKIPPED, no strip on PATH");
    }
    ok
}

/// `strip -S` on a copy of `bytes`: (exit success, what it printed with the path removed, the
/// stripped bytes).
fn strip(dir: &Path, name: &str, bytes: &[u8]) -> (bool, Vec<String>, Vec<u8>) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new("strip").arg("-S").arg(&path).output().unwrap();
    // strip names the file, or the temporary file it writes: only what follows the names.
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines = text
        .lines()
        .map(|l| l.rsplit(": ").next().unwrap_or(l).trim())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    (out.status.success(), lines, std::fs::read(&path).unwrap())
}

/// Growing edits: every one needs room the file does not have.
fn arb_growing_edit(is_program: bool) -> impl Strategy<Value = Edit> {
    let long =
        "/nix/store/[a-z0-9]{32}-[a-z]{3,12}/lib(:/nix/store/[a-z0-9]{32}-[a-z]{3,12}/lib){0,4}";
    let interp = if is_program {
        "/nix/store/[a-z0-9]{32}-glibc-2\\.40/lib/ld-linux-x86-64\\.so\\.2"
            .prop_map(|s| Edit::SetInterpreter(s.into_bytes()))
            .boxed()
    } else {
        "lib[a-z]{40,120}\\.so\\.1"
            .prop_map(|s| Edit::SetSoname(s.into_bytes()))
            .boxed()
    };
    prop_oneof![
        4 => long.prop_map(|s| Edit::SetRunpath(s.into_bytes())),
        2 => arb_lib_name().prop_map(|s| Edit::AddNeeded(s.into_bytes())),
        2 => interp,
    ]
}

fn arb_case() -> impl Strategy<Value = (elfsynth::Spec, Vec<Edit>)> {
    (arb_spec(), any::<bool>()).prop_flat_map(|(mut spec, elf64)| {
        spec.machine = elfsynth::Machine::X86_64;
        spec.class = if elf64 {
            elfsynth::Class::Elf64
        } else {
            elfsynth::Class::Elf32
        };
        spec.endian = elfsynth::Endian::Little;
        spec.with_section_headers = true;
        let is_program = spec.interp.is_some();
        let edits = prop::collection::vec(arb_growing_edit(is_program), 1..3);
        (Just(spec), edits)
    })
}

/// Whether every allocated section with bytes lies inside one `PT_LOAD` (what a linker writes;
/// elfsynth also makes files whose string table runs past its segment, which strip reads its
/// own way whether edited or not).
fn sections_inside_loads(bytes: &[u8]) -> bool {
    let elf = Elf::parse(bytes).unwrap();
    elf.sections.iter().all(|s| {
        let sh = s.shdr;
        !sh.is_alloc()
            || !sh.has_file_bytes()
            || sh.sh_size == 0
            || elf
                .loads()
                .any(|l| l.contains_offset(sh.sh_offset, sh.sh_size))
    })
}

/// The edited bytes, and whether the program header table had to move (nothing after it could:
/// code right after the table), the one layout GNU strip does not keep (docs/elfpatch.md).
fn edit(bytes: &[u8], edits: &[Edit]) -> Result<(Vec<u8>, bool), String> {
    let elf = Elf::parse(bytes).map_err(|e| e.to_string())?;
    let tables = Tables::read(bytes, &elf).map_err(|e| e.to_string())?;
    let plan =
        elfpatch::plan(&elf, &tables, edits, &Options::default()).map_err(|e| e.to_string())?;
    let moved_table = matches!(
        plan.layout,
        Layout::Appended {
            moved_phdrs: true,
            ..
        }
    );
    let mut out = bytes.to_vec();
    plan.apply_to_vec(&mut out, elf.format)
        .map_err(|e| e.to_string())?;
    Ok((out, moved_table))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn strip_keeps_what_elfpatch_wrote((spec, edits) in arb_case()) {
        prop_assume!(spec.validate().is_ok());
        let original = elfsynth::build(&spec);
        prop_assume!(oracle::check_layout(&original).is_empty());
        prop_assume!(sections_inside_loads(&original));
        if !strip_available() {
            return Ok(());
        }
        let (edited, moved_table) = edit(&original, &edits).map_err(TestCaseError::fail)?;
        prop_assume!(!moved_table);
        let dir = tempfile::tempdir().unwrap();
        let (base_ok, base_lines, base) = strip(dir.path(), "unedited", &original);
        let (ok, lines, stripped) = strip(dir.path(), "edited", &edited);
        // The last failing case, for a look with readelf.
        let keep = |what: &str| {
            let _ = std::fs::write(std::env::temp_dir().join("post_strip-edited.elf"), &edited);
            let _ = std::fs::write(std::env::temp_dir().join("post_strip-unedited.elf"), &original);
            what.to_string()
        };
        prop_assume!(base_ok);
        prop_assert!(ok, "{}: {lines:?}", keep("strip -S fails on the edited file"));
        let new: Vec<&String> = lines.iter().filter(|l| !base_lines.contains(l)).collect();
        prop_assert!(new.is_empty(), "{}: {new:?}", keep("strip -S warns on the edited file"));
        let before: Vec<String> = oracle::check_layout(&base);
        let after: Vec<String> = oracle::check_layout(&stripped)
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        prop_assert!(after.is_empty(), "{}: {after:?}", keep("after strip -S"));
        let again = [Edit::SetRunpath(b"/run/opengl-driver/lib:/nix/store/00000000000000000000000000000000-again/lib".to_vec())];
        edit(&stripped, &again).map(|_| ()).map_err(|e| TestCaseError::fail(format!("elfpatch cannot edit the stripped file: {e}")))?;
    }
}
