//! Built files are accepted by independent tools: `readelf -aW` prints no
//! warnings or errors, and `eu-elflint --gnu-ld` finds nothing wrong with
//! x86_64 executables and PIEs. Both go by `p_filesz` where the loader maps
//! whole pages: files with tables in the mapped tail of a segment
//! (`Spec::tail_bytes`) draw complaints about exactly that and nothing else.

use crate::common;

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
        .run(&arb_spec().prop_map(without_tail), |s| {
            readelf_clean(&s);
            Ok(())
        })
        .unwrap();
}

/// The spec with every table inside `p_filesz`, which is where these tools look.
fn without_tail(spec: Spec) -> Spec {
    Spec {
        tail_bytes: 0,
        ..spec
    }
}

/// Lines of `after` that `before` lacks, numbers blanked (a tail moves nothing, but keep the
/// comparison about kinds of complaint).
fn new_lines(before: &str, after: &str) -> Vec<String> {
    let norm = |l: &str| -> String {
        l.chars()
            .map(|c| if c.is_ascii_hexdigit() { '#' } else { c })
            .collect()
    };
    let known: Vec<String> = before.lines().map(norm).collect();
    after
        .lines()
        .filter(|l| !known.contains(&norm(l)))
        .map(str::to_string)
        .collect()
}

#[test]
fn tools_only_say_that_tail_tables_lie_past_p_filesz() {
    if !have("readelf") || !have("eu-elflint") {
        skip("readelf or eu-elflint not found; skipping");
        return;
    }
    let strategy = arb_spec()
        .prop_filter("no MIPS (eu-elflint has no MIPS backend)", |s| {
            s.machine != Machine::Mips
        })
        .prop_map(|s| Spec {
            tail_bytes: s.tail_bytes.max(1),
            ..s
        });
    let mut runner = TestRunner::new(Config {
        cases: cases(64),
        ..Config::default()
    });
    let complaints = std::cell::Cell::new(0);
    runner
        .run(&strategy, |s| {
            let plain = without_tail(s.clone());
            let (a, b) = (elfsynth::build(&plain), elfsynth::build(&s));
            let (_, _, readelf_plain) = run_tool("readelf", &["-aW"], &a);
            let (_, _, readelf_tail) = run_tool("readelf", &["-aW"], &b);
            for line in new_lines(&readelf_plain, &readelf_tail) {
                complaints.set(complaints.get() + 1);
                // readelf maps addresses through p_filesz only: a table in the tail is "not
                // located", or read from where it is not.
                prop_assert!(
                    line.contains("not located in any PT_LOAD segment")
                        || line.contains("extends past end of file for")
                        || line.contains("Failed to read in number of buckets")
                        || line.contains("Corrupt DT_STRTAB dynamic entry"),
                    "readelf: {line}\nfor {s:#?}"
                );
            }
            let (_, o1, e1) = run_tool("eu-elflint", &["--gnu-ld"], &a);
            let (_, o2, e2) = run_tool("eu-elflint", &["--gnu-ld"], &b);
            for line in new_lines(&format!("{o1}{e1}"), &format!("{o2}{e2}")) {
                complaints.set(complaints.get() + 1);
                // eu-elflint likewise: sections and dynamic tags that point past p_filesz, and a
                // code segment whose only code (.init) went into the tail.
                prop_assert!(
                    line.contains("not fully contained in segment")
                        || line.contains("alloc flag set but section not in any loaded segment")
                        || line.contains("value must point into loaded segment")
                        || line.contains("is executable but contains no executable sections"),
                    "eu-elflint: {line}\nfor {s:#?}"
                );
            }
            Ok(())
        })
        .unwrap();
    assert!(
        complaints.get() > 0,
        "no tail layout drew a complaint: is the tail there?"
    );
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
    let strategy = arb_spec()
        .prop_filter("no MIPS", |s| s.machine != Machine::Mips)
        .prop_map(without_tail);
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
        without_tail(s)
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
