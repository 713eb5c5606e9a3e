//! The refusal audit (`elfpatch::refusals` in the crate docs): for each reason elfpatch refuses a
//! file, a file with exactly that defect — a gcc-built x86_64 program with one header field
//! changed — is run by the real loader and edited by elfpatch. Each case states whether the loader
//! runs it; the test checks that claim, the refusal's message, and that the refused file is left
//! byte-identical. A case whose file the loader runs is a file elfpatch refuses for a reason the
//! loader does not share: the crate docs list each one and say why it stays refused.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use elfpatch::format::{Dyn, Phdr};
use elfpatch::{edit_in_place, Edit, Elf, Options};
use object::elf::{
    DT_DEBUG, DT_GNU_HASH, DT_RUNPATH, DT_STRSZ, DT_SYMENT, DT_VERNEED, DT_VERSYM, PT_DYNAMIC,
    PT_GNU_STACK, PT_INTERP, PT_LOAD, PT_PHDR, SHT_DYNAMIC,
};

/// How `cases` builds a program whose `.dynamic` section no `PT_DYNAMIC` describes.
const NO_PT_DYNAMIC: &[&str] = &["gcc", "m.c", "-Wl,-T,no-pt-dynamic.ld", "-o"];

/// A gcc-built PIE that prints "x", with a RUNPATH, and its parsed headers.
struct Sample {
    dir: tempfile::TempDir,
    bytes: Vec<u8>,
    elf: Elf,
}

fn sample() -> Sample {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("m.c");
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"x\");return 0;}\n",
    )
    .unwrap();
    let out = dir.path().join("m");
    common::run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .args(["-Wl,-rpath,/opt/some/dir", "-Wl,--enable-new-dtags"]),
    );
    let bytes = fs::read(&out).unwrap();
    fs::copy(&out, dir.path().join("m.orig")).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    Sample { dir, bytes, elf }
}

impl Sample {
    fn phdr_index(&self, p_type: u32) -> usize {
        self.elf
            .phdrs
            .iter()
            .position(|p| p.p_type == p_type)
            .unwrap()
    }
    fn loads(&self) -> Vec<usize> {
        (0..self.elf.phdrs.len())
            .filter(|&i| self.elf.phdrs[i].p_type == PT_LOAD)
            .collect()
    }
    fn set_phdr(&self, b: &mut [u8], i: usize, p: Phdr) {
        let f = self.elf.format;
        let at = (self.elf.header.e_phoff + (i * f.phdr_size()) as u64) as usize;
        let enc = f.encode_phdr(&p);
        b[at..at + enc.len()].copy_from_slice(&enc);
    }
    fn dyn_index(&self, tag: u32) -> usize {
        let d = self.elf.dynamic.as_ref().unwrap();
        d.entries()
            .iter()
            .position(|x| x.tag == u64::from(tag))
            .unwrap()
    }
    fn dyn_val(&self, tag: u32) -> u64 {
        self.elf.dynamic.as_ref().unwrap().get(tag).unwrap()
    }
    fn set_dyn(&self, b: &mut [u8], k: usize, tag: u32, val: u64) {
        let f = self.elf.format;
        let at = (self.elf.dynamic.as_ref().unwrap().offset + (k * f.dyn_size()) as u64) as usize;
        let tag = u64::from(tag);
        let enc = f.encode_dyn(&Dyn { tag, val });
        b[at..at + enc.len()].copy_from_slice(&enc);
    }
    /// e_shoff, e_shnum, e_shstrndx zeroed: no section header says how long `.dynstr` is.
    fn drop_section_headers(&self, b: &mut [u8]) {
        b[0x28..0x30].fill(0);
        b[0x3c..0x40].fill(0);
    }
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        fs::write(&p, bytes).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }
}

/// Whether the loader runs the program to its end ("x" printed, exit 0).
fn runs(p: &Path) -> bool {
    let (ok, out) = common::run_program(p);
    ok && out.contains('x')
}

/// A growing edit: elfpatch's refusal message; asserts the file is byte-identical after it.
fn refusal(p: &Path) -> String {
    let before = fs::read(p).unwrap();
    let edits = [Edit::SetRunpath(
        b"/a/directory/much/longer/than/the/one/the/file/had/before".to_vec(),
    )];
    let err = edit_in_place(p, &edits, &Options::default())
        .err()
        .unwrap_or_else(|| panic!("{}: edited", p.display()));
    assert_eq!(fs::read(p).unwrap(), before, "{}: changed", p.display());
    err.to_string()
}

/// One audited reason: the file, whether the loader runs it, what elfpatch says.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    loader_runs: bool,
    message: &'static str,
}

fn cases(s: &Sample) -> Vec<Case> {
    let b = || s.bytes.clone();
    let ph = |i: usize| s.elf.phdrs[i];
    let mut v = Vec::new();
    let mut case = |name, bytes, loader_runs, message| {
        v.push(Case {
            name,
            bytes,
            loader_runs,
            message,
        })
    };

    // Identification and file header.
    let mut x = b();
    x[4] = 3;
    case(
        "unknown-class",
        x,
        true,
        "not an ELF file (unknown class 3)",
    );
    let mut x = b();
    x[5] = 3;
    case(
        "unknown-byte-order",
        x,
        true,
        "not an ELF file (unknown data encoding 3)",
    );
    case("short-file", s.bytes[..40].to_vec(), false, "truncated");
    let mut x = b();
    x[0x36] = 64;
    case("phentsize", x, false, "e_phentsize is 64, expected 56");
    let mut x = b();
    x[0x38..0x3a].copy_from_slice(&[0xff, 0xff]);
    s.drop_section_headers(&mut x);
    case("pn-xnum", x, false, "PN_XNUM");

    // Program headers.
    let l = s.loads();
    let mut x = b();
    s.set_phdr(
        &mut x,
        l[0],
        Phdr {
            p_filesz: ph(l[0]).p_memsz + 8,
            ..ph(l[0])
        },
    );
    case("filesz-above-memsz", x, false, "has p_filesz > p_memsz");
    let last = *l.last().unwrap();
    let end = ph(last).offset_end() as usize;
    let mut x = s.bytes[..end].to_vec();
    s.drop_section_headers(&mut x);
    let p = ph(last);
    let grown = Phdr {
        p_filesz: p.p_filesz + 8,
        p_memsz: p.p_memsz.max(p.p_filesz + 8),
        ..p
    };
    s.set_phdr(&mut x, last, grown);
    case(
        "load-past-end-of-file",
        x,
        true,
        "extends past the end of the file",
    );
    let mut x = b();
    s.set_phdr(
        &mut x,
        last,
        Phdr {
            p_memsz: p.p_vaddr.wrapping_neg() + 0x1000,
            ..p
        },
    );
    case("segment-wraps", x, false, "wraps the address space");
    let stack = s.phdr_index(PT_GNU_STACK);
    for (name, t, msg) in [
        ("two-dynamic", PT_DYNAMIC, "more than one PT_DYNAMIC"),
        ("two-interp", PT_INTERP, "more than one PT_INTERP"),
        ("two-phdr", PT_PHDR, "more than one PT_PHDR"),
    ] {
        let mut x = b();
        s.set_phdr(&mut x, stack, ph(s.phdr_index(t)));
        case(name, x, true, msg);
    }
    let ip = s.phdr_index(PT_INTERP);
    let mut x = b();
    let i = ph(ip);
    s.set_phdr(
        &mut x,
        ip,
        Phdr {
            p_filesz: i.p_filesz - 1,
            p_memsz: i.p_memsz - 1,
            ..i
        },
    );
    case(
        "interp-not-nul-terminated",
        x,
        false,
        "PT_INTERP path is not NUL-terminated",
    );
    let mut x = b();
    let (a, c) = (ph(l[1]), ph(l[2]));
    s.set_phdr(&mut x, l[1], c);
    s.set_phdr(&mut x, l[2], a);
    case(
        "loads-unsorted",
        x,
        true,
        "segments are not sorted by address",
    );
    let mut x = b();
    for &k in &l {
        s.set_phdr(
            &mut x,
            k,
            Phdr {
                p_align: 0x3000,
                ..ph(k)
            },
        );
    }
    case(
        "align-not-a-power-of-two",
        x,
        true,
        "not a usable alignment for a new segment",
    );

    // The dynamic array and what it points to.
    let dy = s.phdr_index(PT_DYNAMIC);
    let d = ph(dy);
    let len = s.elf.dynamic.as_ref().unwrap().len as u64 * 16;
    let mut x = b();
    s.set_phdr(
        &mut x,
        dy,
        Phdr {
            p_filesz: len,
            p_memsz: len,
            ..d
        },
    );
    case("dynamic-without-null", x, true, "has no DT_NULL terminator");
    let mut x = b();
    s.set_phdr(
        &mut x,
        dy,
        Phdr {
            p_offset: d.p_offset + 16,
            ..d
        },
    );
    case(
        "dynamic-offset-not-its-address",
        x,
        true,
        "is not mapped by a PT_LOAD at the same place",
    );
    let mut x = b();
    s.set_dyn(&mut x, s.dyn_index(DT_STRSZ), 0x6fff_fdff, 0);
    s.drop_section_headers(&mut x);
    case(
        "strtab-without-strsz",
        x,
        true,
        "DT_STRTAB without DT_STRSZ",
    );
    let mut x = b();
    s.set_dyn(
        &mut x,
        s.dyn_index(DT_STRSZ),
        DT_STRSZ,
        s.dyn_val(DT_RUNPATH),
    );
    s.drop_section_headers(&mut x);
    case("string-past-strsz", x, true, "is outside the");
    let mut x = b();
    s.set_dyn(
        &mut x,
        s.dyn_index(DT_DEBUG),
        DT_STRSZ,
        s.dyn_val(DT_STRSZ) + 16,
    );
    case("two-strsz", x, true, "appears with two values");
    let mut x = b();
    s.set_dyn(&mut x, s.dyn_index(DT_SYMENT), DT_SYMENT, 16);
    case("syment", x, true, "DT_SYMENT is 16");
    let mut x = b();
    s.set_dyn(&mut x, s.dyn_index(DT_VERNEED), DT_VERNEED, 0x700_0000);
    case(
        "table-not-mapped",
        x,
        false,
        "DT_VERNEED 0x7000000 is not in the bytes any PT_LOAD maps",
    );
    let mut x = b();
    s.set_dyn(
        &mut x,
        s.dyn_index(DT_VERSYM),
        DT_VERSYM,
        s.dyn_val(DT_GNU_HASH),
    );
    case("tables-overlap", x, true, "overlap");

    // Files that are not dynamically linked programs or libraries.
    let run_gcc = |args: &[&str], out: &str| -> Option<Vec<u8>> {
        let o = s.dir.path().join(out);
        let ok = Command::new(args[0])
            .args(&args[1..])
            .arg(&o)
            .current_dir(s.dir.path())
            .status()
            .is_ok_and(|st| st.success());
        ok.then(|| fs::read(&o).unwrap())
    };
    common::write_link_inputs(s.dir.path());
    for (name, cmd, out, loader_runs, message) in [
        (
            "empty-pt-dynamic",
            &[
                "gcc",
                "-pie",
                "-nostdlib",
                "-Wl,--build-id=none",
                "-T",
                "empty-pt-dynamic.ld",
                "start.s",
                "-o",
            ][..],
            "m.emptydyn",
            false,
            "PT_DYNAMIC is empty",
        ),
        (
            "separate-debug-info",
            &["objcopy", "--only-keep-debug", "m.orig"][..],
            "m.debug",
            false,
            "a separate debug-info file",
        ),
        (
            "object-file",
            &["gcc", "-c", "m.c", "-o"][..],
            "m.o",
            false,
            "wrong ELF type: a relocatable object (e_type ET_REL)",
        ),
        (
            "static-program",
            &["gcc", "-static", "m.c", "-o"][..],
            "m.static",
            true,
            "no dynamic section (no PT_DYNAMIC): the file is most likely statically linked",
        ),
    ] {
        match run_gcc(cmd, out) {
            Some(x) => case(name, x, loader_runs, message),
            None => common::skip(&format!("{name}: `{}` failed here", cmd.join(" "))),
        }
    }

    // A .dynamic section no PT_DYNAMIC describes (patchelf's `phdr-corruption`) is edited
    // through its section header (`a_dynamic_section_without_pt_dynamic_is_edited`,
    // no_pt_dynamic.rs) when that can be done soundly. These cannot: ld.so runs none of them
    // (it cannot relocate a program without PT_DYNAMIC), and each stays refused.
    if let Some(nodyn) = run_gcc(NO_PT_DYNAMIC, "m.nodyn") {
        let e = Elf::parse(&nodyn).unwrap();
        let d = e.section_by_name(b".dynamic").unwrap();
        let comment = e.section_by_name(b".comment").unwrap();
        let shdr = |i: usize| (e.header.e_shoff + i as u64 * 64) as usize;
        let put = |x: &mut Vec<u8>, at: usize, v: u64, n: usize| {
            x[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
        };
        let mut x = nodyn.clone();
        put(&mut x, shdr(d.index) + 16, 0x700_0000, 8);
        case(
            "no-pt-dynamic-outside-every-load",
            x,
            false,
            "is not where a PT_LOAD maps it from the file",
        );
        let mut x = nodyn.clone();
        let len = e.dynamic.as_ref().unwrap().len as u64;
        put(&mut x, shdr(d.index) + 32, len * 16, 8);
        case(
            "no-pt-dynamic-without-null",
            x,
            false,
            "but no PT_DYNAMIC, and the section cannot be read soundly: it (",
        );
        let mut x = nodyn.clone();
        put(&mut x, shdr(comment.index) + 4, u64::from(SHT_DYNAMIC), 4);
        case(
            "no-pt-dynamic-two-sections",
            x,
            false,
            "there is more than one SHT_DYNAMIC section",
        );
        let mut x = nodyn.clone();
        put(&mut x, 58, 48, 2);
        case(
            "no-pt-dynamic-section-headers-unreadable",
            x,
            false,
            "no dynamic section (no PT_DYNAMIC)",
        );
    }

    // Section headers.
    let comment = s.elf.section_by_name(b".comment").unwrap();
    let mut x = b();
    let at = (s.elf.header.e_shoff + comment.index as u64 * 64 + 24) as usize;
    x[at..at + 8].copy_from_slice(&(s.bytes.len() as u64 + 100).to_le_bytes());
    case(
        "section-past-end-of-file",
        x,
        true,
        "lies outside the file or the address space",
    );
    // The file cut short inside its section header table (the last thing in it): the loader
    // reads no section header, patchelf refuses ("section header table out of bounds").
    assert!(
        s.elf.section_headers_end_file(),
        "the sample's table is not last"
    );
    case(
        "section-table-cut-short",
        b()[..s.bytes.len() - 1].to_vec(),
        true,
        "section header table out of bounds: ",
    );
    v
}

#[test]
fn each_refusal_reason_with_what_the_loader_does() {
    if !common::have("gcc") {
        common::skip("no gcc");
        return;
    }
    let s = sample();
    assert!(
        runs(&s.write("m", &s.bytes)),
        "the unchanged sample does not run"
    );
    let mut failures = Vec::new();
    for c in cases(&s) {
        let p = s.write(c.name, &c.bytes);
        let ran = runs(&p);
        if ran != c.loader_runs {
            failures.push(format!(
                "{}: the loader runs it: {ran}, the audit says {}",
                c.name, c.loader_runs
            ));
        }
        let msg = refusal(&p);
        if !msg.contains(c.message) {
            failures.push(format!("{}: message {msg:?} lacks {:?}", c.name, c.message));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where a refusal is about appending a segment, edits in place still go through.
#[test]
fn an_unusable_alignment_refuses_only_a_new_segment() {
    if !common::have("gcc") {
        common::skip("no gcc");
        return;
    }
    let s = sample();
    let c = cases(&s)
        .into_iter()
        .find(|c| c.name == "align-not-a-power-of-two")
        .unwrap();
    let p = s.write("align", &c.bytes);
    edit_in_place(
        &p,
        &[Edit::SetRunpath(b"/opt".to_vec())],
        &Options::default(),
    )
    .unwrap();
    assert!(runs(&p));
    assert_eq!(
        Elf::parse(&fs::read(&p).unwrap()).unwrap().runpath(),
        Some(&b"/opt"[..])
    );
}

/// What no longer is a reason: neither loader checks EI_VERSION or e_version of a program (the
/// kernel never, glibc only in the libraries it maps), so elfpatch edits such a file.
#[test]
fn version_fields_are_no_reason() {
    if !common::have("gcc") {
        common::skip("no gcc");
        return;
    }
    let s = sample();
    let mut x = s.bytes.clone();
    x[6] = 0;
    x[0x14..0x18].fill(0);
    let p = s.write("version0", &x);
    assert!(runs(&p));
    let long = b"/a/directory/much/longer/than/the/one/the/file/had/before".to_vec();
    edit_in_place(&p, &[Edit::SetRunpath(long.clone())], &Options::default()).unwrap();
    assert!(runs(&p));
    assert_eq!(
        Elf::parse(&fs::read(&p).unwrap()).unwrap().runpath(),
        Some(&long[..])
    );
}

/// A program whose `.dynamic` section no `PT_DYNAMIC` describes (patchelf's `phdr-corruption`,
/// here a program) is edited through its section header: the run path is the new one for every
/// reader of sections, the loader fails on it as it did before (it reads no dynamic array, and
/// cannot relocate the program), and nothing is added that it would read.
#[test]
fn a_dynamic_section_without_pt_dynamic_is_edited() {
    if !common::have("gcc") {
        common::skip("no gcc");
        return;
    }
    let s = sample();
    common::write_link_inputs(s.dir.path());
    let p = s.dir.path().join("m.nodyn");
    let built = Command::new(NO_PT_DYNAMIC[0])
        .args(&NO_PT_DYNAMIC[1..])
        .arg(&p)
        .current_dir(s.dir.path())
        .status()
        .is_ok_and(|st| st.success());
    if !built {
        common::skip(&format!("`{}` failed here", NO_PT_DYNAMIC.join(" ")));
        return;
    }
    let before = Elf::parse(&fs::read(&p).unwrap()).unwrap();
    assert!(!before.phdrs.iter().any(|x| x.p_type == PT_DYNAMIC));
    assert_eq!(before.dynamic.as_ref().unwrap().phdr_index, None);
    assert!(!runs(&p), "ld.so runs a program without PT_DYNAMIC");
    let long = b"/a/directory/much/longer/than/the/one/the/file/had/before".to_vec();
    edit_in_place(&p, &[Edit::SetRunpath(long.clone())], &Options::default()).unwrap();
    let after = Elf::parse(&fs::read(&p).unwrap()).unwrap();
    assert_eq!(after.runpath(), Some(&long[..]));
    assert!(!after.phdrs.iter().any(|x| x.p_type == PT_DYNAMIC));
    assert!(after
        .warnings
        .iter()
        .any(|w| w.problem == "no PT_DYNAMIC program header"));
    assert!(!runs(&p), "the edit made ld.so run it");
}

/// The kernel reads all of `PT_INTERP`'s bytes but uses only the path up to its NUL and checks
/// that the last byte is NUL (patchelf's `phdr-corruption` fixture has a `PT_INTERP` over a run of
/// sections). A table among the other bytes is no reason to refuse a run-path edit; an edit of
/// the interpreter, which rewrites them all, is refused and leaves the file as it was.
#[test]
fn a_table_inside_pt_interp_after_its_path_refuses_only_an_interpreter_edit() {
    if !common::have("gcc") {
        common::skip("no gcc");
        return;
    }
    let s = sample();
    let i = s.phdr_index(PT_INTERP);
    let dynstr = s.elf.section_by_name(b".dynstr").unwrap().shdr;
    let interp = ph_at(&s, i);
    assert!(
        interp.p_offset < dynstr.sh_offset,
        "a layout this test does not cover"
    );
    // PT_INTERP runs on over .dynstr to the padding byte after it, a NUL no section holds.
    let dynstr_end = dynstr.sh_offset + dynstr.sh_size;
    let next = s
        .elf
        .sections
        .iter()
        .filter(|x| x.shdr.sh_offset >= dynstr_end && x.shdr.sh_size > 0)
        .map(|x| x.shdr.sh_offset)
        .min();
    if next.is_none_or(|n| n <= dynstr_end) {
        eprintln!("NOTICE: skipped, no padding after .dynstr in this gcc's layout");
        return;
    }
    let mut x = s.bytes.clone();
    let filesz = dynstr_end + 1 - interp.p_offset;
    s.set_phdr(
        &mut x,
        i,
        Phdr {
            p_filesz: filesz,
            p_memsz: filesz,
            ..interp
        },
    );
    assert_eq!(
        x[(interp.p_offset + filesz - 1) as usize],
        0,
        "the last byte"
    );
    let p = s.write("wide-interp", &x);
    assert!(runs(&p), "the kernel runs it");
    let err = edit_in_place(
        &p,
        &[Edit::SetInterpreter(
            b"/lib64/ld-linux-x86-64.so.2.x".to_vec(),
        )],
        &Options::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("overlaps the interpreter path"), "{err}");
    assert_eq!(fs::read(&p).unwrap(), x, "changed by a refused edit");
    let long = b"/a/directory/much/longer/than/the/one/the/file/had/before".to_vec();
    edit_in_place(&p, &[Edit::SetRunpath(long.clone())], &Options::default()).unwrap();
    assert!(runs(&p), "the edit broke it");
    let after = Elf::parse(&fs::read(&p).unwrap()).unwrap();
    assert_eq!(after.runpath(), Some(&long[..]));
    assert_eq!(after.interpreter(), s.elf.interpreter());
}

fn ph_at(s: &Sample, i: usize) -> Phdr {
    s.elf.phdrs[i]
}
