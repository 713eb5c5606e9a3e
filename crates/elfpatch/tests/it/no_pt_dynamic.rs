//! Files with a `.dynamic` section but no `PT_DYNAMIC` (patchelf's test `phdr-corruption`): built
//! here from ordinary libraries and programs of every toolchain by turning `PT_DYNAMIC` into
//! `PT_NULL`. No loader reads such an array, before or after an edit; elfpatch edits it through
//! the section header as patchelf does, says so, and leaves a file no worse than it was: the tools
//! that read sections see the new run path, the program headers stay sound (`PT_PHDR` once, no
//! readelf or eu-elflint complaint the input did not draw), the loader fails on it exactly as it
//! did before, and giving the file its `PT_DYNAMIC` back (at the edited section) makes a file that
//! loads with the new run path, which is what shows the edited array is a whole one.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{run_ok, run_program, Fixture};
use elfpatch::format::Phdr;
use elfpatch::Elf;
use object::elf::{PF_R, PF_W, PT_DYNAMIC, PT_NOTE, PT_NULL};

/// Rewrites the program header at `index` of the file at `p`.
fn set_phdr(p: &Path, index: usize, phdr: Phdr) {
    let mut b = fs::read(p).unwrap();
    let elf = Elf::parse(&b).unwrap();
    let f = elf.format;
    let at = (elf.header.e_phoff + (index * f.phdr_size()) as u64) as usize;
    let enc = f.encode_phdr(&phdr);
    b[at..at + enc.len()].copy_from_slice(&enc);
    fs::write(p, b).unwrap();
}

/// Turns the file's `PT_DYNAMIC` into `PT_NULL`.
fn drop_pt_dynamic(p: &Path) {
    let elf = Elf::parse(&fs::read(p).unwrap()).unwrap();
    let i = elf
        .phdrs
        .iter()
        .position(|x| x.p_type == PT_DYNAMIC)
        .expect("a PT_DYNAMIC to drop");
    set_phdr(
        p,
        i,
        Phdr {
            p_type: PT_NULL,
            ..elf.phdrs[i]
        },
    );
}

/// Gives the file a `PT_DYNAMIC` again, describing its `.dynamic` section as it is now. It takes
/// a `PT_NULL` slot, or when the edit used the one `drop_pt_dynamic` left for its new segment,
/// the `PT_NOTE` (nothing this test runs reads notes at load time).
fn restore_pt_dynamic(p: &Path) {
    let elf = Elf::parse(&fs::read(p).unwrap()).unwrap();
    let index = elf
        .phdrs
        .iter()
        .position(|x| x.p_type == PT_NULL)
        .or_else(|| elf.phdrs.iter().position(|x| x.p_type == PT_NOTE))
        .expect("a slot for PT_DYNAMIC");
    let d = elf.section_by_name(b".dynamic").unwrap().shdr;
    set_phdr(
        p,
        index,
        Phdr {
            p_type: PT_DYNAMIC,
            p_flags: PF_R | PF_W,
            p_offset: d.sh_offset,
            p_vaddr: d.sh_addr,
            p_paddr: d.sh_addr,
            p_filesz: d.sh_size,
            p_memsz: d.sh_size,
            p_align: d.sh_addralign.max(1),
        },
    );
}

/// `readelf -lW`: (how many lines name PHDR, stderr).
fn phdr_lines(p: &Path) -> (usize, String) {
    let out = Command::new("readelf").arg("-lW").arg(p).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    (
        stdout.lines().filter(|l| l.contains("PHDR")).count(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The run path `objdump -p` reads (it finds `.dynamic` through the section headers).
fn objdump_runpath(p: &Path) -> Option<String> {
    let out = run_ok(Command::new("objdump").arg("-p").arg(p));
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("RUNPATH")
            .or_else(|| l.strip_prefix("RPATH"))
            .map(|v| v.trim().to_string())
    })
}

/// Edits `p` with `--set-rpath dir` and checks what every such edit must give.
fn edit_and_check(tc: &str, p: &Path, dir: &str) {
    let before = p.with_extension("before");
    fs::copy(p, &before).unwrap();
    let (phdrs_before, _) = phdr_lines(&before);
    let out = common::elfpatch()
        .args(["--set-rpath", dir])
        .arg(p)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{tc}: {}: {stderr}", p.display());
    assert!(
        stderr.contains("no PT_DYNAMIC program header") && stderr.contains(".dynamic section"),
        "{tc}: no warning naming what is odd: {stderr:?}"
    );
    assert_eq!(objdump_runpath(p).as_deref(), Some(dir), "{tc}: objdump -p");
    let printed = run_ok(common::elfpatch().arg("--print-rpath").arg(p));
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), dir, "{tc}");
    let (phdrs_after, readelf_err) = phdr_lines(p);
    assert_eq!(phdrs_after, phdrs_before, "{tc}: PHDR lines in readelf -l");
    assert!(readelf_err.is_empty(), "{tc}: readelf -l: {readelf_err}");
    common::assert_no_new_complaints(&before, p);
    // Still no PT_DYNAMIC: the edit adds nothing a loader would read.
    let elf = Elf::parse(&fs::read(p).unwrap()).unwrap();
    assert!(!elf.phdrs.iter().any(|x| x.p_type == PT_DYNAMIC), "{tc}");
}

#[test]
fn a_dynamic_section_without_pt_dynamic_is_edited_through_its_section_header() {
    let toolchains = common::toolchains();
    if toolchains.is_empty() {
        return;
    }
    if !common::have("objdump") || !common::have("readelf") {
        common::skip("no binutils: objdump and readelf check the result");
        return;
    }
    for tc in &toolchains {
        let f = Fixture::new(tc);
        let good = f.path("good");
        let bad = f.path("bad");
        f.shared_lib(&good, "libdep.so", "libdep.so", common::LIB_SRC, "A");
        let lib = f.shared_lib(&bad, "libdep.so", "libdep.so", common::LIB_SRC, "A");
        // The program finds libdep.so in `bad` first: the library without PT_DYNAMIC.
        let rpath = format!("-Wl,-rpath,{}", bad.display());
        let prog = f.program("main", &good, &[&rpath]);
        let (ok, out) = run_program(&prog);
        assert!(ok && out.contains("DEP:A"), "{}: {out}", tc.name);

        // The library: glibc refuses it before and after, in the same words.
        drop_pt_dynamic(&lib);
        let (ok, before) = run_program(&prog);
        assert!(
            !ok && before.contains("no dynamic section"),
            "{}: {before}",
            tc.name
        );
        let dir = common::long_dir(f.dir.path(), 120);
        let dir = dir.to_str().unwrap();
        edit_and_check(tc.name, &lib, dir);
        let (ok, after) = run_program(&prog);
        assert!(
            !ok && after.contains("no dynamic section"),
            "{}: {after}",
            tc.name
        );
        // With its PT_DYNAMIC back, at the edited array, the library loads and has the new run
        // path: the array elfpatch wrote is a whole one (strings, string table, terminator).
        restore_pt_dynamic(&lib);
        let (ok, out) = run_program(&prog);
        assert!(ok && out.contains("DEP:A"), "{}: restored: {out}", tc.name);
        let strings = common::dynamic_strings(&lib);
        assert!(
            strings.iter().any(|(t, v)| t.contains("PATH") && v == dir),
            "{}: readelf -d of the restored library: {strings:?}",
            tc.name
        );

        // A program (it has PT_PHDR): ld.so cannot relocate it, before or after. Its new run
        // path names `good`, where the restored program then finds its library.
        let prog2 = common::copy(&prog, &f.path("main-nodyn"));
        drop_pt_dynamic(&prog2);
        assert!(
            !run_program(&prog2).0,
            "{}: runs without PT_DYNAMIC",
            tc.name
        );
        edit_and_check(tc.name, &prog2, good.to_str().unwrap());
        assert!(!run_program(&prog2).0, "{}: runs after the edit", tc.name);
        restore_pt_dynamic(&prog2);
        let (ok, out) = run_program(&prog2);
        assert!(
            ok && out.contains("DEP:A"),
            "{}: restored program: {out}",
            tc.name
        );
    }
}
