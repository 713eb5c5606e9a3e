//! Built files are accepted by independent tools: `readelf -aW` prints no
//! warnings or errors, and `eu-elflint --gnu-ld` finds nothing wrong with
//! x86_64 executables and PIEs.

mod common;

use common::*;
use elfsynth::strategy::arb_spec;
use elfsynth::{FileType, Machine, Spec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn readelf_clean(spec: &Spec) {
    let bytes = elfsynth::build(spec);
    let (ok, stdout, stderr) = run_tool("readelf", &["-aW"], &bytes);
    assert!(
        stderr.is_empty(),
        "readelf complained:\n{stderr}\nfor {spec:#?}"
    );
    if !ok {
        // binutils' ARM unwind dumper (`-u`, part of `-a`) silently fails
        // when there is no section string table, i.e. for every ARM file
        // without section headers. Accept that one case, and only if
        // everything else `-a` does succeeds.
        let arm_no_shdrs = spec.machine == Machine::Arm && !spec.with_section_headers;
        assert!(arm_no_shdrs, "readelf -aW failed silently for {spec:#?}");
        let (ok, _, stderr) = run_tool("readelf", &["-W", "-hlSsrdVAIn"], &bytes);
        assert!(ok && stderr.is_empty(), "readelf -hlSsrdVAIn: {stderr}");
        let (ok, _, stderr) = run_tool("readelf", &["-W", "-u"], &bytes);
        assert!(!ok && stderr.is_empty(), "readelf -u: {stderr}");
    }
    // readelf is a third reader: its view of the dynamic strings must match.
    let needed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| {
            l.split_once("Shared library: [")
                .map(|(_, r)| r.strip_suffix(']').unwrap_or(r))
        })
        .collect();
    assert_eq!(needed, spec.needed, "readelf NEEDED list");
    if let Some(rp) = &spec.runpath {
        assert!(
            stdout.contains(&format!("Library runpath: [{rp}]")),
            "readelf RUNPATH"
        );
    }
    if let Some(interp) = &spec.interp {
        assert!(stdout.contains(&format!("[Requesting program interpreter: {interp}]")));
    }
}

fn elflint_clean(spec: &Spec) {
    let bytes = elfsynth::build(spec);
    let (ok, stdout, stderr) = run_tool("eu-elflint", &["--gnu-ld"], &bytes);
    let report = format!("{stdout}{stderr}");
    assert!(
        ok && report.trim() == "No errors",
        "eu-elflint complained:\n{report}\nfor {spec:#?}"
    );
}

#[test]
fn readelf_accepts_the_matrix() {
    if !have("readelf") {
        skip("readelf not found; skipping readelf checks");
        return;
    }
    for s in matrix() {
        readelf_clean(&s);
    }
}

#[test]
fn readelf_accepts_arbitrary_specs() {
    if !have("readelf") {
        skip("readelf not found; skipping readelf checks");
        return;
    }
    let mut runner = TestRunner::new(Config {
        cases: cases(64),
        ..Config::default()
    });
    runner
        .run(&arb_spec(), |s| {
            readelf_clean(&s);
            Ok(())
        })
        .unwrap();
}

fn x86_64_exec_or_dyn(spec: &Spec) -> bool {
    spec.machine == Machine::X86_64 && matches!(spec.e_type, FileType::Exec | FileType::Dyn)
}

#[test]
fn elflint_accepts_x86_64_matrix() {
    if !have("eu-elflint") {
        skip("eu-elflint not found (apt-get install elfutils); skipping");
        return;
    }
    for s in matrix().into_iter().filter(x86_64_exec_or_dyn) {
        elflint_clean(&s);
    }
}

/// elfutils 0.188 has no MIPS backend: it calls every nonzero MIPS
/// `e_flags` "invalid machine flags" and every `DT_MIPS_*` tag an "unknown
/// tag", so MIPS files are left out here (readelf still checks them).
#[test]
fn elflint_accepts_other_machines_except_mips() {
    if !have("eu-elflint") {
        skip("eu-elflint not found (apt-get install elfutils); skipping");
        return;
    }
    for s in matrix().into_iter().filter(|s| s.machine != Machine::Mips) {
        elflint_clean(&s);
    }
    let strategy = arb_spec().prop_filter("no MIPS", |s| s.machine != Machine::Mips);
    let mut runner = TestRunner::new(Config {
        cases: cases(64),
        ..Config::default()
    });
    runner
        .run(&strategy, |s| {
            elflint_clean(&s);
            Ok(())
        })
        .unwrap();
}

#[test]
fn elflint_accepts_arbitrary_x86_64_specs() {
    if !have("eu-elflint") {
        skip("eu-elflint not found (apt-get install elfutils); skipping");
        return;
    }
    let strategy = arb_spec().prop_map(|mut s| {
        s.machine = Machine::X86_64;
        s
    });
    let mut runner = TestRunner::new(Config {
        cases: cases(64),
        ..Config::default()
    });
    runner
        .run(&strategy, |s| {
            elflint_clean(&s);
            Ok(())
        })
        .unwrap();
}
