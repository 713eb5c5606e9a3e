//! Fault injection: what an interrupted or failed edit leaves behind, and files we must not or
//! cannot write.
//!
//! For growing edits (a 300-byte RUNPATH, an added NEEDED, a long SONAME on a library, a long
//! interpreter, all of them at once, a second growing edit on an edited file) on real x86 binaries
//! built here with gcc and on `elfsynth` files of every machine, and for every write index `k` of
//! the plan:
//! - `Fault::FailWrite(k)`: the call fails and the file is byte-identical to the original;
//! - `Fault::StopAfter(k)` (a crash after `k` writes, no rollback): the loader's view of the file is
//!   the old one or the new one — elfpatch and the elfsynth oracle read the old or the new dynamic
//!   information, no segment-level layout issue appears that the original lacks, and the program
//!   still runs, finding its library through the old or the new RUNPATH (both hold one, printing
//!   different markers, which must match what the file says). The plan's order is asserted too:
//!   while only stage writes are done the file reads as the old one, once every commit write is done
//!   it reads as the new one.
//!
//! Then: unprivileged users on files they may not write (through `setpriv`/`runuser`), hard links,
//! symlinks out of the tree, and a file that grows between planning and applying.

use crate::common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use elfpatch::plan::Phase;
use elfpatch::{
    edit_in_place, validate, ApplyOptions, Edit, Elf, ElfFile, ErrorKind, Fault, Options, Plan,
};
use elfsynth::{oracle, Class, Endian, FileType, Machine, Spec};

// The loader-visible dynamic information is shared with the fuzz targets.
use elfpatch_check::Info;

/// `validate::check` issues about segments only (section headers are brought along by cleanup
/// writes after the commit, so mid-edit they may lag behind).
fn segment_issues(e: &Elf) -> Vec<String> {
    validate::check(e)
        .into_iter()
        .map(|i| i.0)
        .filter(|i| !i.contains("section"))
        .collect()
}

/// How to check that a state of the file still works: run a program and check that its output
/// matches what the file says (which RUNPATH it finds its library through, whether libextra.so is
/// needed).
struct Runner {
    prog: PathBuf,
    /// The marker printed by the libdep.so found through each RUNPATH.
    marks: Vec<(Vec<u8>, &'static str)>,
}

/// One growing edit on one file.
struct Scenario {
    name: String,
    /// The file edited in place (its path matters: programs find it or find through it).
    path: PathBuf,
    original: Vec<u8>,
    edits: Vec<Edit>,
    runner: Option<Runner>,
}

#[derive(Default, Debug)]
struct Tally {
    faults: usize,
    stops_old: usize,
    stops_new: usize,
    runs: usize,
    /// Plans whose string table grew where it is, its new strings over room something used
    /// before the edit: written between two commit writes (`plan/appended/tail.rs`).
    strings_after_switch: usize,
    /// ... or over room nothing used: staged.
    strings_staged: usize,
}

/// Apply options that inject `fault` (the crate's feature `fault-injection`, on in its tests).
fn faulty(sync: bool, fault: Fault) -> ApplyOptions {
    let mut opts = ApplyOptions::default();
    opts.sync = sync;
    opts.fault = Some(fault);
    opts
}

fn open_plan(path: &Path, edits: &[Edit]) -> (ElfFile, Plan) {
    let f = ElfFile::open_rw(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let plan = f
        .plan(edits, &Options::default())
        .unwrap_or_else(|e| panic!("plan {edits:?} on {}: {e}", path.display()));
    (f, plan)
}

fn run_scenario(s: &Scenario, tally: &mut Tally) {
    let path = &s.path;
    fs::write(path, &s.original).unwrap();
    let old_elf = Elf::parse(&s.original).unwrap();
    let old_info = Info::of(&old_elf);
    let old_segment_issues = segment_issues(&old_elf);
    let old_all_issues = validate::check(&old_elf);
    let oracle_ok = oracle::read(&s.original).is_ok();

    // The reference: the whole plan, no fault.
    let (f, plan) = open_plan(path, &s.edits);
    assert!(!plan.is_empty(), "{}: nothing to do", s.name);
    let mut in_memory = s.original.clone();
    plan.apply_to_vec(&mut in_memory, old_elf.format).unwrap();
    let report = f.apply(&plan, &ApplyOptions::default()).unwrap();
    drop(f);
    let new = fs::read(path).unwrap();
    assert_eq!(new, in_memory, "{}: on disk and in memory differ", s.name);
    let new_elf = Elf::parse(&new).unwrap();
    let new_info = Info::of(&new_elf);
    assert_ne!(new_info, old_info, "{}: the edit changed nothing", s.name);
    let new_issues: Vec<_> = validate::check(&new_elf)
        .into_iter()
        .filter(|i| !old_all_issues.contains(i))
        .collect();
    assert!(new_issues.is_empty(), "{}: {new_issues:?}", s.name);
    if let Some(r) = &s.runner {
        check_run(s, r, &new_info, "complete edit");
    }
    let total = report.writes;
    assert!(total > 0, "{}: no writes", s.name);
    for w in plan.writes.iter().filter(|w| w.what == "new strings") {
        match w.phase {
            Phase::Commit => tally.strings_after_switch += 1,
            _ => tally.strings_staged += 1,
        }
    }
    // Small files: every plan write is one pwrite (zeroing and copying go by 1 MiB chunks), and
    // the symbol fixups come after them all.
    let one_pwrite_per_write = plan.writes.iter().all(|w| w.len > 0 && w.len <= 1 << 20);
    assert!(
        total >= plan.writes.len(),
        "{}: fewer pwrites than writes",
        s.name
    );
    // Commit boundaries, when each plan write is one pwrite.
    let last_stage = plan
        .writes
        .iter()
        .rposition(|w| w.phase == Phase::Stage)
        .map_or(0, |i| i + 1);
    let last_commit = plan
        .writes
        .iter()
        .rposition(|w| w.phase == Phase::Commit)
        .map_or(0, |i| i + 1);
    assert!(
        plan.writes.windows(2).all(|w| w[0].phase <= w[1].phase),
        "{}: writes out of phase order",
        s.name
    );

    for k in 0..=total {
        // (i) A write fails: rolled back, byte-identical.
        fs::write(path, &s.original).unwrap();
        let (f, plan_k) = open_plan(path, &s.edits);
        assert_eq!(plan_k, plan, "{}: planning is not deterministic", s.name);
        let r = f.apply(&plan, &faulty(k % 2 == 1, Fault::FailWrite(k)));
        drop(f);
        let now = fs::read(path).unwrap();
        if k < total {
            tally.faults += 1;
            let err = r.expect_err(&format!("{}: FailWrite({k}) succeeded", s.name));
            assert_eq!(
                err.kind(),
                ErrorKind::WriteFailed,
                "{}: FailWrite({k}): {err}",
                s.name
            );
            assert!(err.to_string().contains(path.to_str().unwrap()));
            assert!(
                now == s.original,
                "{}: FailWrite({k}) of {total} left the file changed ({} bytes, was {})",
                s.name,
                now.len(),
                s.original.len()
            );
        } else {
            r.unwrap_or_else(|e| panic!("{}: FailWrite({k}) past the end: {e}", s.name));
            assert!(now == new, "{}: FailWrite({k}) past the end", s.name);
        }

        // (ii) Stopped after k writes, no rollback: the old file or the new one, as the loader sees it.
        fs::write(path, &s.original).unwrap();
        let (f, _) = open_plan(path, &s.edits);
        let r = f.apply(&plan, &faulty(false, Fault::StopAfter(k)));
        drop(f);
        if k < total {
            tally.faults += 1;
            assert!(r.is_err(), "{}: StopAfter({k}) did not stop", s.name);
        } else {
            r.unwrap();
        }
        let now = fs::read(path).unwrap();
        let what = format!("{}: stopped after {k} of {total} writes", s.name);
        let e = Elf::parse(&now).unwrap_or_else(|err| panic!("{what}: unreadable: {err}"));
        let info = Info::of(&e);
        let is_old = info == old_info;
        let is_new = info == new_info;
        assert!(
            is_old || is_new,
            "{what}: a mix of old and new:\n  now {}\n  old {}\n  new {}\n  writes: {}",
            show(&info),
            show(&old_info),
            show(&new_info),
            show_writes(&plan)
        );
        if is_new {
            tally.stops_new += 1;
        } else {
            tally.stops_old += 1;
        }
        if one_pwrite_per_write {
            if k <= last_stage {
                assert!(
                    is_old,
                    "{what}: only stage writes done, but does not read as old: {}",
                    show_writes(&plan)
                );
            }
            if k >= last_commit && last_commit > 0 {
                assert!(
                    is_new,
                    "{what}: every commit write done, but does not read as new: {}",
                    show_writes(&plan)
                );
            }
        }
        let seg: Vec<_> = segment_issues(&e)
            .into_iter()
            .filter(|i| !old_segment_issues.contains(i))
            .collect();
        assert!(seg.is_empty(), "{what}: new segment issues {seg:?}");
        if oracle_ok {
            let o = oracle::read(&now).unwrap_or_else(|err| panic!("{what}: oracle: {err}"));
            let oi = Info::of_oracle(&o);
            assert!(
                oi == info.lossy(),
                "{what}: the oracle reads {oi:?}, elfpatch {info:?}"
            );
        }
        if let Some(r) = &s.runner {
            check_run(s, r, &info, &what);
            tally.runs += 1;
        }
    }
    fs::write(path, &s.original).unwrap();
}

fn check_run(s: &Scenario, r: &Runner, info: &Info, what: &str) {
    let (ok, out) = run_program(&r.prog);
    assert!(ok, "{}: {what}: the program does not run: {out}", s.name);
    // When the edited file is a library the program loads, the program's own entries decide.
    let own;
    let info = if s.path == r.prog {
        info
    } else {
        own = Info::of(&Elf::parse(&fs::read(&r.prog).unwrap()).unwrap());
        &own
    };
    let mark = r
        .marks
        .iter()
        .find(|(rp, _)| info.runpath.as_deref() == Some(rp.as_slice()))
        .map(|(_, m)| *m)
        .unwrap_or_else(|| panic!("{}: {what}: unexpected RUNPATH", s.name));
    assert!(
        out.contains(&format!("DEP:{mark}")),
        "{}: {what}: expected the library found through the {mark} RUNPATH: {out}",
        s.name
    );
    let extra = info.needed.iter().any(|n| n == b"libextra.so");
    assert_eq!(
        out.contains("EXTRA-LOADED"),
        extra,
        "{}: {what}: libextra.so needed: {extra}, output: {out}",
        s.name
    );
}

fn show(i: &Info) -> String {
    let s = |b: &[u8]| {
        let t = String::from_utf8_lossy(b).into_owned();
        if t.len() > 48 {
            format!("…{}", &t[t.len() - 40..])
        } else {
            t
        }
    };
    format!(
        "needed {:?} runpath {:?} rpath {:?} soname {:?} interp {:?}",
        i.needed.iter().map(|n| s(n)).collect::<Vec<_>>(),
        i.runpath.as_deref().map(s),
        i.rpath.as_deref().map(s),
        i.soname.as_deref().map(s),
        i.interp.as_deref().map(s)
    )
}

fn show_writes(p: &Plan) -> String {
    p.writes
        .iter()
        .enumerate()
        .map(|(i, w)| {
            format!(
                "#{i} {:?} {} @{:#x}+{:#x}",
                w.phase, w.what, w.offset, w.len
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The x86 toolchains whose programs run here: gcc PIE, gcc non-PIE, gcc -m32 when multilib works.
fn x86_toolchains() -> Vec<Toolchain> {
    toolchains()
        .into_iter()
        .filter(|t| matches!(t.name, "gcc-pie" | "gcc-nopie" | "gcc-m32"))
        .collect()
}

/// A program linked against `old/libdep.so` with RUNPATH `old/`; `new/…` (≥ 300 bytes) holds
/// another libdep.so printing a different marker; both hold libextra.so; a copy of the
/// interpreter sits under a long directory.
struct RealSetup {
    /// Owns the temporary directory everything lives in.
    _fx: Fixture,
    old_dir: PathBuf,
    new_dir: PathBuf,
    newer_dir: PathBuf,
    prog: PathBuf,
    long_interp: PathBuf,
}

fn real_setup(tc: &Toolchain) -> RealSetup {
    let fx = Fixture::new(tc);
    let old_dir = fx.path("old");
    let new_dir = long_dir(&fx.path("new"), 300);
    let newer_dir = long_dir(&fx.path("newer"), 600);
    for (d, mark) in [(&old_dir, "old"), (&new_dir, "new"), (&newer_dir, "newer")] {
        fx.shared_lib(d, "libdep.so", "libdep.so", LIB_SRC, mark);
        fx.shared_lib(d, "libextra.so", "libextra.so", EXTRA_SRC, mark);
    }
    let rp = format!("-Wl,-rpath,{}", old_dir.display());
    let prog = fx.program("prog", &old_dir, &[&rp, "-Wl,--enable-new-dtags"]);
    let (ok, out) = run_program(&prog);
    assert!(ok && out.contains("DEP:old"), "{}: {out}", tc.name);
    let interp = Elf::parse(&fs::read(&prog).unwrap())
        .unwrap()
        .interpreter()
        .map(|i| String::from_utf8(i.to_vec()).unwrap())
        .unwrap();
    let ld_dir = long_dir(&fx.path("ld"), 150);
    let long_interp = ld_dir.join("ld-copy.so");
    fs::copy(&interp, &long_interp).unwrap();
    RealSetup {
        _fx: fx,
        old_dir,
        new_dir,
        newer_dir,
        prog,
        long_interp,
    }
}

fn b(p: &Path) -> Vec<u8> {
    p.to_str().unwrap().as_bytes().to_vec()
}

fn prog_runner(r: &RealSetup) -> Runner {
    Runner {
        prog: r.prog.clone(),
        marks: vec![
            (b(&r.old_dir), "old"),
            (b(&r.new_dir), "new"),
            (b(&r.newer_dir), "newer"),
        ],
    }
}

fn real_scenarios(r: &RealSetup, tc: &str, which: &str) -> Vec<Scenario> {
    let prog_bytes = fs::read(&r.prog).unwrap();
    let mut v = Vec::new();
    let sc = |name: &str, edits: Vec<Edit>, runner: Runner| Scenario {
        name: format!("{tc}/{name}"),
        path: r.prog.clone(),
        original: prog_bytes.clone(),
        edits,
        runner: Some(runner),
    };
    match which {
        "runpath" => v.push(sc(
            "runpath300",
            vec![Edit::SetRunpath(b(&r.new_dir))],
            prog_runner(r),
        )),
        "needed" => {
            let run = prog_runner(r);
            v.push(sc(
                "add-needed",
                vec![Edit::AddNeeded(b"libextra.so".to_vec())],
                run,
            ))
        }
        "interp" => v.push(sc(
            "interpreter",
            vec![Edit::SetInterpreter(b(&r.long_interp))],
            prog_runner(r),
        )),
        "several" => {
            let run = prog_runner(r);
            v.push(sc(
                "several",
                vec![
                    Edit::SetRunpath(b(&r.new_dir)),
                    Edit::AddNeeded(b"libextra.so".to_vec()),
                    Edit::SetInterpreter(b(&r.long_interp)),
                ],
                run,
            ))
        }
        "second" => {
            // The first growing edit completes; the second one is interrupted.
            fs::write(&r.prog, &prog_bytes).unwrap();
            edit_in_place(
                &r.prog,
                &[Edit::SetRunpath(b(&r.new_dir))],
                &Options::default(),
            )
            .unwrap();
            let once = fs::read(&r.prog).unwrap();
            let run = prog_runner(r);
            v.push(Scenario {
                name: format!("{tc}/second-growing-edit"),
                path: r.prog.clone(),
                original: once,
                edits: vec![
                    Edit::SetRunpath(b(&r.newer_dir)),
                    Edit::AddNeeded(b"libextra.so".to_vec()),
                ],
                runner: Some(run),
            })
        }
        "soname" => {
            let lib = r.old_dir.join("libdep.so");
            v.push(Scenario {
                name: format!("{tc}/long-soname"),
                path: lib.clone(),
                original: fs::read(&lib).unwrap(),
                edits: vec![Edit::SetSoname(
                    b"libdep-with-a-much-much-longer-soname-than-it-had-before-and-then-some.so.1"
                        .repeat(3),
                )],
                runner: Some(prog_runner(r)),
            })
        }
        _ => unreachable!(),
    }
    v
}

fn real(which: &str) -> Tally {
    let tcs = x86_toolchains();
    assert!(!tcs.is_empty(), "no gcc here");
    let mut tally = Tally::default();
    for tc in &tcs {
        let r = real_setup(tc);
        for s in real_scenarios(&r, tc.name, which) {
            run_scenario(&s, &mut tally);
        }
    }
    eprintln!(
        "fault injection, real binaries, {which}: {} faults injected ({tally:?})",
        tally.faults
    );
    assert!(tally.faults > 0);
    assert!(tally.runs > 0);
    assert!(tally.stops_old > 0 && tally.stops_new > 0, "{tally:?}");
    tally
}

/// On gcc's programs the version and relocation tables after `.dynstr` move into the rest of
/// the page, and the strings go over them between two commit writes.
#[test]
fn real_growing_runpath() {
    let tally = real("runpath");
    assert!(tally.strings_after_switch > 0, "{tally:?}");
}

#[test]
fn real_added_needed() {
    real("needed");
}

#[test]
fn real_long_interpreter() {
    real("interp");
}

#[test]
fn real_long_soname_on_a_library() {
    real("soname");
}

/// RUNPATH, NEEDED and interpreter at once, on gcc programs whose `.dynamic` has spare slots (so
/// it could be rewritten in place rather than moved): every intermediate state must be the old file
/// or the new one, all items together. (Were the interpreter switched with the program headers
/// and RUNPATH/NEEDED with a later "dynamic entries" write, `StopAfter` between them would leave
/// the new interpreter with the old RUNPATH; this test catches that.)
#[test]
fn real_several_growing_edits_at_once() {
    real("several");
}

#[test]
fn real_second_growing_edit_on_an_edited_file() {
    real("second");
}

/// elfsynth files of every machine (both classes and byte orders among them), executables and
/// libraries, with and without section headers.
fn synth_specs() -> Vec<(String, Spec)> {
    let combos = [
        (Machine::X86_64, Class::Elf64, Endian::Little, 0x1000),
        (Machine::I386, Class::Elf32, Endian::Little, 0x1000),
        (Machine::AArch64, Class::Elf64, Endian::Little, 0x10000),
        (Machine::Arm, Class::Elf32, Endian::Little, 0x1000),
        (Machine::Ppc64, Class::Elf64, Endian::Big, 0x10000),
        (Machine::S390x, Class::Elf64, Endian::Big, 0x1000),
        (Machine::RiscV, Class::Elf64, Endian::Little, 0x1000),
        (Machine::Mips, Class::Elf32, Endian::Big, 0x10000),
    ];
    let mut v = Vec::new();
    for (i, (machine, class, endian, page)) in combos.into_iter().enumerate() {
        let exec = Spec {
            class,
            endian,
            machine,
            page_size: page,
            e_type: if i % 2 == 0 {
                FileType::Exec
            } else {
                FileType::Dyn
            },
            base: if i % 2 == 0 { 0x40_0000 } else { 0 },
            with_section_headers: i % 3 != 2,
            ..Spec::default()
        };
        let lib = Spec {
            e_type: FileType::Dyn,
            base: 0,
            interp: None,
            soname: Some("libsynth.so.1".into()),
            with_section_headers: i % 3 != 1,
            ..exec.clone()
        };
        v.push((format!("{machine:?}-{class:?}-{endian:?}-exe"), exec));
        v.push((format!("{machine:?}-{class:?}-{endian:?}-lib"), lib));
    }
    // Version tables after .dynstr too big for the rest of their page: they move into a new
    // segment, and .dynstr grows over them.
    let mut many = Spec::default();
    many.dynsyms
        .extend((0..3000).map(|i| format!("exported_symbol_number_{i}")));
    v.push(("X86_64-many-symbols".into(), many));
    v
}

/// `bytes` with `edits` planned and applied in memory.
fn edited(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let e = Elf::parse(bytes).unwrap();
    let t = elfpatch::Tables::read(bytes, &e).unwrap();
    elfpatch::plan(&e, &t, edits, &Options::default())
        .unwrap()
        .apply_to_vec(&mut out, e.format)
        .unwrap();
    out
}

#[test]
fn synthetic_files_of_every_machine() {
    let dir = tempfile::tempdir().unwrap();
    let long = |n: usize| {
        let mut p = b"/opt".to_vec();
        while p.len() < n {
            p.extend_from_slice(b"/a-long-directory-name");
        }
        p
    };
    let mut tally = Tally::default();
    let mut cases = 0;
    for (name, spec) in synth_specs() {
        let bytes = elfsynth::build(&spec);
        assert!(oracle::check_layout(&bytes).is_empty(), "{name}");
        let path = dir.path().join(&name);
        let mut edit_sets: Vec<(&str, Vec<Edit>)> = vec![
            ("runpath300", vec![Edit::SetRunpath(long(300))]),
            (
                "add-needed",
                vec![Edit::AddNeeded(b"libextra.so.1".to_vec())],
            ),
        ];
        if spec.interp.is_some() {
            edit_sets.push(("interpreter", vec![Edit::SetInterpreter(long(150))]));
            edit_sets.push((
                "several",
                vec![
                    Edit::SetRunpath(long(300)),
                    Edit::AddNeeded(b"libextra.so.1".to_vec()),
                    Edit::SetInterpreter(long(150)),
                ],
            ));
        } else {
            edit_sets.push(("soname", vec![Edit::SetSoname(long(200))]));
            edit_sets.push((
                "several",
                vec![
                    Edit::SetRunpath(long(300)),
                    Edit::AddNeeded(b"libextra.so.1".to_vec()),
                    Edit::SetSoname(long(200)),
                ],
            ));
        }
        for (ename, edits) in &edit_sets {
            run_scenario(
                &Scenario {
                    name: format!("{name}/{ename}"),
                    path: path.clone(),
                    original: bytes.clone(),
                    edits: edits.clone(),
                    runner: None,
                },
                &mut tally,
            );
            cases += 1;
        }
        // A second growing edit on the edited file.
        let once = edited(&bytes, &[Edit::SetRunpath(long(300))]);
        run_scenario(
            &Scenario {
                name: format!("{name}/second-growing-edit"),
                path: path.clone(),
                original: once,
                edits: vec![
                    Edit::SetRunpath(long(700)),
                    Edit::AddNeeded(b"libextra.so.1".to_vec()),
                ],
                runner: None,
            },
            &mut tally,
        );
        cases += 1;
        // Or a little longer: into the room the first one left after .dynstr.
        run_scenario(
            &Scenario {
                name: format!("{name}/grown-again"),
                path: path.clone(),
                original: edited(&bytes, &[Edit::SetRunpath(long(300))]),
                edits: vec![Edit::SetRunpath(long(340))],
                runner: None,
            },
            &mut tally,
        );
        cases += 1;
    }
    eprintln!(
        "fault injection, elfsynth files: {cases} edits, {} faults injected ({tally:?})",
        tally.faults
    );
    assert!(tally.faults > 0);
    assert!(tally.stops_old > 0 && tally.stops_new > 0, "{tally:?}");
    // Both ways a string table grows where it is were interrupted.
    assert!(
        tally.strings_after_switch > 0 && tally.strings_staged > 0,
        "{tally:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Permissions, links, concurrent changes.

/// A command prefix that runs a program as `nobody` (uid/gid 65534), if this system has one.
fn as_nobody() -> Option<Vec<String>> {
    let try_prefix = |p: Vec<String>| -> Option<Vec<String>> {
        let out = Command::new(&p[0])
            .args(&p[1..])
            .args(["id", "-u"])
            .output()
            .ok()?;
        (out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "65534")
            .then_some(p)
    };
    if have("setpriv") {
        let p = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ];
        if let Some(p) = try_prefix(p.iter().map(|s| s.to_string()).collect()) {
            return Some(p);
        }
    }
    if have("runuser") {
        let p = ["runuser", "-u", "nobody", "--"];
        if let Some(p) = try_prefix(p.iter().map(|s| s.to_string()).collect()) {
            return Some(p);
        }
    }
    None
}

/// A world-readable temporary directory holding a copy of the CLI and a small real program.
fn world_readable_setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("elfpatch-perm-")
        .tempdir()
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let cli = d.path().join("elfpatch");
    fs::copy(env!("CARGO_BIN_EXE_elfpatch"), &cli).unwrap();
    fs::set_permissions(&cli, fs::Permissions::from_mode(0o755)).unwrap();
    let c = d.path().join("m.c");
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"x\");return 0;}\n",
    )
    .unwrap();
    let prog = d.path().join("prog");
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&prog)
            .arg(&c)
            .arg("-Wl,-rpath,/opt/old"),
    );
    (d, cli, prog)
}

fn assert_refused_unprivileged(prefix: &[String], cli: &Path, file: &Path, what: &str) {
    let before = fs::read(file).unwrap();
    let long = format!("/{}", "a-long-directory".repeat(20));
    for args in [
        vec!["--set-rpath", long.as_str()],
        vec!["--set-rpath", "/x"],
        vec!["--add-needed", "libm.so.6"],
    ] {
        let out = Command::new(&prefix[0])
            .args(&prefix[1..])
            .arg(cli)
            .args(&args)
            .arg(file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{what}: {args:?} succeeded as nobody"
        );
        assert_eq!(err.lines().count(), 1, "{what}: not one line: {err}");
        assert!(
            err.contains(file.to_str().unwrap()),
            "{what}: the message does not name the file: {err}"
        );
        assert!(
            err.contains("Permission denied") || err.contains("ermission"),
            "{what}: the message does not say why: {err}"
        );
        assert_eq!(
            fs::read(file).unwrap(),
            before,
            "{what}: file changed by a refused edit"
        );
        // Reading still works for them.
        let out = Command::new(&prefix[0])
            .args(&prefix[1..])
            .arg(cli)
            .arg("--print-rpath")
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: cannot even read");
    }
}

#[test]
fn unprivileged_users_cannot_edit_files_they_may_not_write() {
    let Some(prefix) = as_nobody() else {
        skip("neither setpriv nor runuser can switch to uid 65534 here");
        return;
    };
    let (d, cli, prog) = world_readable_setup();
    let reachable = Command::new(&prefix[0])
        .args(&prefix[1..])
        .args(["test", "-x"])
        .arg(&cli)
        .status()
        .is_ok_and(|s| s.success());
    if !reachable {
        skip(&format!(
            "uid 65534 cannot reach {} (TMPDIR not world-searchable?)",
            d.path().display()
        ));
        return;
    }
    // Owned by root, 0644, in a directory nobody may read but not write.
    let root_owned = d.path().join("root-owned");
    fs::copy(&prog, &root_owned).unwrap();
    fs::set_permissions(&root_owned, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(fs::metadata(&root_owned).unwrap().uid(), 0);
    assert_refused_unprivileged(&prefix, &cli, &root_owned, "root-owned 0644");
    // Owned by nobody but read-only (0444).
    let ro = d.path().join("nobody-readonly");
    fs::copy(&prog, &ro).unwrap();
    std::os::unix::fs::chown(&ro, Some(65534), Some(65534)).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o444)).unwrap();
    assert_refused_unprivileged(&prefix, &cli, &ro, "nobody-owned 0444");
    // The exit status is the I/O one: a file that could not be read or written.
    let out = Command::new(&prefix[0])
        .args(&prefix[1..])
        .arg(&cli)
        .args(["--set-rpath", "/x"])
        .arg(&ro)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    // And the exit-status table says so, for this case too (not only "could not be read").
    let help = Command::new(&cli).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let three = help.split("\n  3  ").nth(1).unwrap_or_default();
    assert!(three.contains("for writing"), "{help}");
    // Control: nobody may edit a writable file of its own.
    let own = d.path().join("nobody-writable");
    fs::copy(&prog, &own).unwrap();
    std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
    fs::set_permissions(&own, fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(&prefix[0])
        .args(&prefix[1..])
        .arg(&cli)
        .args(["--set-rpath", "/x"])
        .arg(&own)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = Elf::parse(&fs::read(&own).unwrap()).unwrap();
    assert_eq!(e.runpath().or(e.rpath()), Some(&b"/x"[..]));
}

fn small_program(dir: &Path, name: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"RAN\");return 0;}\n",
    )
    .unwrap();
    let p = dir.join(name);
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&p)
            .arg(&c)
            .args(["-Wl,-rpath,/opt/old", "-Wl,--enable-new-dtags"]),
    );
    p
}

#[test]
fn hard_links_keep_the_inode_and_both_names_see_the_edit() {
    let d = tempfile::tempdir().unwrap();
    let a = small_program(d.path(), "a");
    let b_link = d.path().join("b");
    fs::hard_link(&a, &b_link).unwrap();
    let ino = fs::metadata(&a).unwrap().ino();
    let long = format!("/{}", "x".repeat(300));
    // A failed edit through one name leaves both untouched.
    let before = fs::read(&a).unwrap();
    let f = ElfFile::open_rw(&b_link).unwrap();
    let plan = f
        .plan(
            &[Edit::SetRunpath(long.clone().into_bytes())],
            &Options::default(),
        )
        .unwrap();
    assert!(f.apply(&plan, &faulty(false, Fault::FailWrite(1))).is_err());
    drop(f);
    assert_eq!(fs::read(&a).unwrap(), before);
    assert_eq!(fs::read(&b_link).unwrap(), before);
    // A successful one shows through both.
    edit_in_place(
        &b_link,
        &[Edit::SetRunpath(long.clone().into_bytes())],
        &Options::default(),
    )
    .unwrap();
    let (ma, mb) = (fs::metadata(&a).unwrap(), fs::metadata(&b_link).unwrap());
    assert_eq!(ma.ino(), ino);
    assert_eq!(mb.ino(), ino);
    assert_eq!(ma.nlink(), 2);
    let bytes = fs::read(&a).unwrap();
    assert_eq!(bytes, fs::read(&b_link).unwrap());
    assert_eq!(Elf::parse(&bytes).unwrap().runpath(), Some(long.as_bytes()));
    let (ok, out) = run_program(&a);
    assert!(ok && out.contains("RAN"), "{out}");
}

#[test]
fn a_symlink_out_of_the_tree_is_refused_and_its_target_untouched() {
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside");
    let tree = d.path().join("tree");
    fs::create_dir_all(&outside).unwrap();
    fs::create_dir_all(&tree).unwrap();
    let target = small_program(&outside, "prog");
    let before = fs::read(&target).unwrap();
    let mtime = fs::metadata(&target).unwrap().modified().unwrap();
    let link = tree.join("prog");
    std::os::unix::fs::symlink("../outside/prog", &link).unwrap();
    let edits = [Edit::SetRunpath(b"/a/new/runpath".to_vec())];
    let err = edit_in_place(&link, &edits, &Options::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidRequest, "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(err.to_string().contains(link.to_str().unwrap()), "{err}");
    assert!(ElfFile::open_rw(&link).is_err());
    assert_eq!(fs::read(&target).unwrap(), before);
    assert_eq!(fs::metadata(&target).unwrap().modified().unwrap(), mtime);
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // The CLI, like patchelf, follows a symlink its user names (tests/it/paths.rs): that is the
    // caller's choice of file, not a walk leaving its tree.
}

#[test]
fn a_file_that_changes_while_we_edit_it_is_not_written() {
    let d = tempfile::tempdir().unwrap();
    let p = small_program(d.path(), "prog");
    let original = fs::read(&p).unwrap();
    for (edits, label) in [
        (
            vec![Edit::SetRunpath(
                format!("/{}", "y".repeat(300)).into_bytes(),
            )],
            "growing",
        ),
        (vec![Edit::SetRunpath(b"/o".to_vec())], "in place"),
    ] {
        // It grows between planning and applying.
        fs::write(&p, &original).unwrap();
        let f = ElfFile::open_rw(&p).unwrap();
        let plan = f.plan(&edits, &Options::default()).unwrap();
        assert!(!plan.is_empty());
        let appended = b"appended by someone else";
        {
            use std::io::Write;
            let mut o = fs::OpenOptions::new().append(true).open(&p).unwrap();
            o.write_all(appended).unwrap();
        }
        let err = f.apply(&plan, &ApplyOptions::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Changed, "{label}: {err}");
        assert!(err.to_string().contains(p.to_str().unwrap()));
        drop(f);
        let mut expect = original.clone();
        expect.extend_from_slice(appended);
        assert!(
            fs::read(&p).unwrap() == expect,
            "{label}: something of ours was written"
        );
        // It changes in place, same length, between planning and applying.
        fs::write(&p, &original).unwrap();
        let f = ElfFile::open_rw(&p).unwrap();
        let plan = f.plan(&edits, &Options::default()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut changed = original.clone();
        let last = changed.len() - 1;
        changed[last] ^= 0xff;
        {
            use std::os::unix::fs::FileExt;
            let o = fs::OpenOptions::new().write(true).open(&p).unwrap();
            o.write_all_at(&changed[last..], last as u64).unwrap();
        }
        let err = f.apply(&plan, &ApplyOptions::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Changed, "{label}: {err}");
        drop(f);
        assert!(fs::read(&p).unwrap() == changed, "{label}: written anyway");
    }
}
