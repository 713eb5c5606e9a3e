//! `check` and `audit` name a file a post-processor left inconsistent: a
//! library built with gcc, its `DT_GNU_HASH` pointed outside every segment the way a broken
//! re-layout leaves it. A clean library and a stripped one raise nothing.

use std::path::Path;
use std::process::Command;

fn stubstrip(args: &[&str], dir: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_stubstrip"))
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

/// Points `DT_GNU_HASH` of a little-endian ELF64 file at an address no segment maps.
fn break_gnu_hash(b: &mut [u8]) {
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let phoff = u64_at(b, 0x20) as usize;
    let phnum = u16::from_le_bytes([b[0x38], b[0x39]]) as usize;
    let dynamic = (0..phnum)
        .map(|i| phoff + i * 56)
        .find(|&o| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) == 2)
        .expect("PT_DYNAMIC");
    let mut k = u64_at(b, dynamic + 8) as usize;
    loop {
        match u64_at(b, k) {
            0 => panic!("no DT_GNU_HASH"),
            0x6fff_fef5 => {
                b[k + 8..k + 16].copy_from_slice(&0x7fff_0000u64.to_le_bytes());
                return;
            }
            _ => k += 16,
        }
    }
}

#[test]
fn an_inconsistent_layout_is_named_by_check_and_audit() {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("a.c");
    std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
    let (clean, stripped, bad) = (
        t.path().join("clean"),
        t.path().join("strip"),
        t.path().join("bad"),
    );
    for d in [&clean, &stripped, &bad] {
        std::fs::create_dir(d).unwrap();
    }
    let lib = clean.join("liba.so");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status();
    if !built.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no gcc");
        return;
    }
    std::fs::copy(&lib, stripped.join("liba.so")).unwrap();
    let _ = Command::new("strip").arg(stripped.join("liba.so")).status();
    let mut bytes = std::fs::read(&lib).unwrap();
    break_gnu_hash(&mut bytes);
    std::fs::write(bad.join("liba.so"), bytes).unwrap();

    for d in [&clean, &stripped] {
        for cmd in ["check", "audit"] {
            let (rc, out) = stubstrip(&[cmd], d);
            assert_eq!(rc, 0, "{cmd} {}: {out}", d.display());
            assert!(!out.contains("layout is inconsistent"), "{out}");
        }
    }
    for cmd in ["check", "audit"] {
        let (rc, out) = stubstrip(&[cmd], &bad);
        assert_ne!(rc, 0, "{cmd}: {out}");
        assert!(
            out.contains("liba.so") && out.contains("DT_GNU_HASH at address 0x7fff0000"),
            "{cmd}: {out}"
        );
    }
    let (_, out) = stubstrip(&["audit"], &bad);
    assert!(out.contains("SS015"), "{out}");
}
