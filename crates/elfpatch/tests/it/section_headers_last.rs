//! A section header table that ends the file still ends it after an edit that appends data
//! (patchelf's `build-resolution-cache-no-pie` needs it: its `pad-to-page` helper refuses a
//! file whose table does not end it), on every toolchain here: the table is where `e_shoff`
//! says, `readelf -S` reads it, the program runs, eu-elflint and readelf find nothing new.
//! Repeated edits extend the appended segment rather than add one each time, and a table that
//! did not end the file (data after it) stays where it is.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{
    assert_no_new_complaints, copy, elfpatch, have, load_count, run_ok, run_program, skip,
    toolchains, Fixture, Toolchain, LIB_SRC,
};
use elfpatch::Elf;

/// The toolchains of `common`, and gcc with mold when it is installed.
fn all_toolchains() -> Vec<Toolchain> {
    let mut v = toolchains();
    if have("gcc") && have("mold") {
        v.push(Toolchain {
            name: "gcc-mold",
            cc: "gcc",
            flags: vec!["-fuse-ld=mold"],
            exe_flags: vec![],
        });
    } else {
        skip("no mold: the mold toolchain is left out");
    }
    v
}

/// Where the section header table is and how long it is, and the file's length.
struct TableAt {
    shoff: u64,
    size: u64,
    len: u64,
}

fn table_at(p: &Path) -> TableAt {
    let bytes = fs::read(p).unwrap();
    let elf = Elf::parse(&bytes).unwrap();
    let size = elf.sections.len() as u64 * u64::from(elf.header.e_shentsize);
    assert!(size > 0, "{}: no section headers", p.display());
    TableAt {
        shoff: elf.header.e_shoff,
        size,
        len: bytes.len() as u64,
    }
}

/// Asserts that the table ends the file, and that readelf finds it at `e_shoff` with every
/// section and without a complaint.
fn assert_table_last(p: &Path, what: &str) {
    let t = table_at(p);
    assert_eq!(
        t.shoff + t.size,
        t.len,
        "{what}: the section header table ({:#x}, {:#x} bytes) does not end the file ({:#x} bytes)",
        t.shoff,
        t.size,
        t.len
    );
    let header = run_ok(Command::new("readelf").args(["-hW"]).arg(p));
    let text = String::from_utf8_lossy(&header.stdout);
    let start = format!("Start of section headers:          {} (bytes", t.shoff);
    assert!(text.contains(&start), "{what}: readelf -h: {text}");
    let out = run_ok(Command::new("readelf").args(["-SW"]).arg(p));
    let text = String::from_utf8_lossy(&out.stdout);
    let count = t.size
        / u64::from(
            Elf::parse(&fs::read(p).unwrap())
                .unwrap()
                .header
                .e_shentsize,
        );
    let listed = format!(
        "There are {count} section headers, starting at offset {:#x}",
        t.shoff
    );
    assert!(text.contains(&listed), "{what}: readelf -S: {text}");
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with('[') && !l.contains("[Nr]"))
        .count() as u64;
    assert_eq!(rows, count, "{what}: readelf -S: {text}");
    assert!(
        out.stderr.is_empty() && header.stderr.is_empty(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn edit(p: &Path, args: &[&str]) {
    run_ok(elfpatch().args(args).arg(p));
}

fn assert_runs(p: &Path, what: &str) {
    let (ok, out) = run_program(p);
    assert!(ok && out.contains("DEP:x"), "{what}: {out}");
}

/// A program linked against `libdep.so` with a short run path, its table last as linked.
fn program(fx: &Fixture) -> std::path::PathBuf {
    let a = fx.path("a");
    fx.shared_lib(&a, "libdep.so", "libdep.so", LIB_SRC, "x");
    let exe = fx.program("main", &a, &[&format!("-Wl,-rpath,{}", a.display())]);
    assert_table_last(&exe, &format!("{}: as linked", fx.tc.name));
    exe
}

#[test]
fn the_table_ends_the_file_after_appended_edits_on_every_toolchain() {
    for tc in all_toolchains() {
        let fx = Fixture::new(&tc);
        let exe = program(&fx);
        let a = fx.path("a").display().to_string();
        let name = tc.name;
        // 1. A run path that cannot fit, not even where .dynstr could grow (the rest of its
        // segment's page): a new segment, the table after it.
        let once = copy(&exe, &fx.path("once"));
        let dir = common::long_dir(&fx.path("x"), 200).display().to_string();
        let long = format!("{}:{a}", vec![dir; 25].join(":"));
        edit(&once, &["--set-rpath", &long]);
        assert_table_last(&once, &format!("{name}: once"));
        assert!(
            table_at(&once).shoff > table_at(&exe).len,
            "{name}: table not moved"
        );
        assert_eq!(load_count(&once), load_count(&exe) + 1, "{name}");
        assert_runs(&once, name);
        assert_no_new_complaints(&exe, &once);
        // --output writes the same file as an edit in place.
        let out = fx.path("once-output");
        run_ok(
            elfpatch()
                .args(["--set-rpath", &long, "--output"])
                .arg(&out)
                .arg(&exe),
        );
        assert_eq!(fs::read(&out).unwrap(), fs::read(&once).unwrap(), "{name}");
        // 2. Again, longer, and a needed library: the appended segment grows over the old table
        // (no new PT_LOAD), the new table ends the file, and the file grows by the new copies
        // and one table, not by a page or a segment.
        let mut before = once.clone();
        for round in 2..5 {
            let next = copy(&before, &fx.path(&format!("round{round}")));
            let longer = format!(
                "{}:{a}",
                common::long_dir(&fx.path("y"), 200 + 40 * round).display()
            );
            edit(&next, &["--set-rpath", &longer]);
            let what = format!("{name}: round {round}");
            assert_table_last(&next, &what);
            assert_eq!(
                load_count(&next),
                load_count(&once),
                "{what}: a segment was added"
            );
            let (t0, t1) = (table_at(&before), table_at(&next));
            assert!(
                t1.len - t0.len <= t0.size + 4 * longer.len() as u64 + 1024,
                "{what}: grew {} bytes",
                t1.len - t0.len
            );
            assert_runs(&next, &what);
            assert_no_new_complaints(&exe, &next);
            before = next;
        }
        // 3. strip after the edits, then edit again: the table strip leaves last stays last.
        if have("strip") {
            let stripped = copy(&before, &fx.path("stripped"));
            run_ok(Command::new("strip").arg(&stripped));
            assert_runs(&stripped, &format!("{name}: stripped"));
            let again = copy(&stripped, &fx.path("stripped-edited"));
            let longest = format!("{}:{a}", common::long_dir(&fx.path("z"), 600).display());
            edit(&again, &["--set-rpath", &longest]);
            assert_table_last(&again, &format!("{name}: stripped, edited"));
            assert_runs(&again, &format!("{name}: stripped, edited"));
            assert_no_new_complaints(&stripped, &again);
        }
    }
}

#[test]
fn a_table_followed_by_data_stays_where_it_is_and_padding_is_not_data() {
    let Some(tc) = toolchains().into_iter().next() else {
        return;
    };
    let fx = Fixture::new(&tc);
    let exe = program(&fx);
    // Longer than a page, three times one 2,000-byte directory: a shorter run path may fit in the
    // room after `.dynstr` (which grows in place), as it does in nixpkgs' builds of this program,
    // and the file would not grow at all; this test is about a file that must.
    let dir = common::long_dir(&fx.path("x"), 2000);
    let long = format!("{d}:{d}:{d}:{}", fx.path("a").display(), d = dir.display());
    // A signature after the table: the data stays last-but-the-segment, the table where it was.
    let signed = copy(&exe, &fx.path("signed"));
    let signature = b"SIGNATURE-0123456789abcdef".to_vec();
    let mut bytes = fs::read(&signed).unwrap();
    bytes.extend_from_slice(&signature);
    fs::write(&signed, &bytes).unwrap();
    let before = table_at(&signed);
    edit(&signed, &["--set-rpath", &long]);
    let after = table_at(&signed);
    let edited = fs::read(&signed).unwrap();
    assert_eq!(
        after.shoff, before.shoff,
        "the table moved past the data after it"
    );
    assert!(after.len > before.len);
    let at = (before.shoff + before.size) as usize;
    assert_eq!(&edited[at..at + signature.len()], &signature[..]);
    assert_runs(&signed, "signed");
    // Zeros that pad the file to 16 bytes are no data: the table still ends the file after.
    let padded = copy(&exe, &fx.path("padded"));
    let mut bytes = fs::read(&padded).unwrap();
    let len = bytes.len().next_multiple_of(16) + 16;
    bytes.resize(len, 0);
    fs::write(&padded, &bytes).unwrap();
    edit(&padded, &["--set-rpath", &long]);
    assert_table_last(&padded, "padded");
    assert_runs(&padded, "padded");
}
