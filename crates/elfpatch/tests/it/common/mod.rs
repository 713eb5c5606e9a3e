//! Shared helpers for tests that build real binaries with the host's compilers.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::m32_works;
#[allow(unused_imports)] // each test binary uses its own subset
pub use testkit::{have, patchelf_0193, run_ok, skip};

/// A way to build binaries: compiler and extra flags.
#[derive(Clone, Debug)]
pub struct Toolchain {
    pub name: &'static str,
    pub cc: &'static str,
    pub flags: Vec<&'static str>,
    pub exe_flags: Vec<&'static str>,
}

/// Every toolchain available here: gcc (PIE, non-PIE, -m32 when multilib works), gold, clang+lld.
pub fn toolchains() -> Vec<Toolchain> {
    let mut v = Vec::new();
    if have("gcc") {
        v.push(Toolchain {
            name: "gcc-pie",
            cc: "gcc",
            flags: vec![],
            exe_flags: vec!["-pie", "-fPIE"],
        });
        v.push(Toolchain {
            name: "gcc-nopie",
            cc: "gcc",
            flags: vec![],
            exe_flags: vec!["-no-pie", "-fno-PIE"],
        });
        v.push(Toolchain {
            name: "gcc-noseparate",
            cc: "gcc",
            flags: vec!["-Wl,-z,noseparate-code", "-Wl,--hash-style=sysv"],
            exe_flags: vec![],
        });
        if !have("ld.gold") {
            skip("no ld.gold (binutils-gold): the gold toolchain is left out");
        } else {
            v.push(Toolchain {
                name: "gcc-gold",
                cc: "gcc",
                flags: vec!["-fuse-ld=gold"],
                exe_flags: vec![],
            });
        }
        if !m32_works() {
            skip("gcc -m32 does not build and run a program (gcc-12-multilib)");
        } else {
            v.push(Toolchain {
                name: "gcc-m32",
                cc: "gcc",
                flags: vec!["-m32"],
                exe_flags: vec![],
            });
        }
    } else {
        skip("no gcc");
    }
    if !(have("clang") && have("ld.lld")) {
        skip("no clang and ld.lld: the clang+lld toolchain is left out");
    } else {
        v.push(Toolchain {
            name: "clang-lld",
            cc: "clang",
            flags: vec!["-fuse-ld=lld"],
            exe_flags: vec![],
        });
    }
    v
}

/// A library, an executable linked against it, in a temporary directory.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub tc: Toolchain,
}

pub const LIB_SRC: &str = r#"
#include <stdio.h>
const char *dep_marker(void) { return "DEP:" MARK; }
"#;

pub const EXTRA_SRC: &str = r#"
#include <stdio.h>
__attribute__((constructor)) static void init(void) { puts("EXTRA-LOADED"); fflush(stdout); }
int extra_unused(void) { return 7; }
"#;

pub const MAIN_SRC: &str = r#"
#include <stdio.h>
#include <math.h>
const char *dep_marker(void);
int main(int argc, char **argv) {
    volatile double x = argc;
    printf("%s %d\n", dep_marker(), (int)cos(x - 1.0));
    return 0;
}
"#;

impl Fixture {
    pub fn new(tc: &Toolchain) -> Fixture {
        Fixture {
            dir: tempfile::Builder::new()
                .prefix("elfpatch-real-")
                .tempdir()
                .unwrap(),
            tc: tc.clone(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Compiles `src` into a shared library `dir/name` with SONAME `soname`.
    pub fn shared_lib(
        &self,
        dir: &Path,
        name: &str,
        soname: &str,
        src: &str,
        mark: &str,
    ) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        let c = self.path(&format!("{name}.c"));
        fs::write(&c, src).unwrap();
        let out = dir.join(name);
        let mut cmd = Command::new(self.tc.cc);
        cmd.args(&self.tc.flags)
            .args(["-shared", "-fPIC", "-O1"])
            .arg(format!("-DMARK=\"{mark}\""))
            .arg(format!("-Wl,-soname,{soname}"))
            .arg("-o")
            .arg(&out)
            .arg(&c);
        run_ok(&mut cmd);
        out
    }

    /// Compiles the test program linked against `libdep.so` in `libdir`, with `extra` link flags.
    pub fn program(&self, name: &str, libdir: &Path, extra: &[&str]) -> PathBuf {
        let c = self.path("main.c");
        fs::write(&c, MAIN_SRC).unwrap();
        let out = self.path(name);
        let mut cmd = Command::new(self.tc.cc);
        cmd.args(&self.tc.flags)
            .args(&self.tc.exe_flags)
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .arg(format!("-L{}", libdir.display()))
            .arg("-ldep")
            .arg("-lm")
            .args(extra);
        run_ok(&mut cmd);
        out
    }
}

/// Runs a program with a clean loader environment; returns (success, stdout+stderr).
pub fn run_program(p: &Path) -> (bool, String) {
    let mut attempt = 0;
    let out = loop {
        match Command::new(p)
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("LD_PRELOAD")
            .output()
        {
            Ok(o) => break o,
            // Another test thread's fork may briefly hold a write descriptor to a file this process
            // just wrote (ETXTBSY): a property of parallel tests, not of the file. Retry.
            Err(e) if e.raw_os_error() == Some(26) && attempt < 50 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // exec itself fails when the interpreter is missing.
            Err(e) => return (false, e.to_string()),
        }
    };
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), s)
}

/// The elfpatch CLI built for these tests.
pub fn elfpatch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_elfpatch"))
}

/// readelf's complaints (stderr) for a file, one per line, sorted.
pub fn readelf_warnings(p: &Path) -> Vec<String> {
    let out = Command::new("readelf")
        .args(["-aW"])
        .arg(p)
        .output()
        .unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(|l| l.replace(&p.display().to_string(), "FILE"))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// eu-elflint's complaints for a file, sorted (empty when the tool is missing).
pub fn elflint(p: &Path) -> Vec<String> {
    if !have("eu-elflint") {
        skip("no eu-elflint (elfutils): its checks are left out");
        return Vec::new();
    }
    let out = Command::new("eu-elflint")
        .args(["--gnu-ld", "-q"])
        .arg(p)
        .output()
        .unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
        .map(|l| l.replace(&p.display().to_string(), "FILE"))
        .filter(|l| !l.trim().is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Asserts that `after` has no readelf warning or eu-elflint complaint that `before` lacks.
pub fn assert_no_new_complaints(before: &Path, after: &Path) {
    let (rb, ra) = (readelf_warnings(before), readelf_warnings(after));
    let new: Vec<_> = ra.iter().filter(|l| !rb.contains(l)).collect();
    assert!(
        new.is_empty(),
        "new readelf warnings on {}: {new:?}",
        after.display()
    );
    // eu-elflint numbers entries and sections: an edit that adds a dynamic entry renumbers the
    // complaints the input already drew, and one that moves a table changes the addresses they
    // name. Compare kinds, counted: digits masked, and every hexadecimal number (`0x3e78`).
    let kinds = |v: Vec<String>| -> std::collections::BTreeMap<String, usize> {
        let mut m = std::collections::BTreeMap::new();
        for l in v {
            let mut k = String::new();
            let mut hex = false;
            for c in l.chars() {
                hex = hex && c.is_ascii_hexdigit();
                if hex {
                    continue;
                }
                k.push(if c.is_ascii_digit() { '#' } else { c });
                hex = k.ends_with("#x");
            }
            *m.entry(k).or_insert(0) += 1;
        }
        m
    };
    let (lb, la) = (kinds(elflint(before)), kinds(elflint(after)));
    let new: Vec<_> = la
        .iter()
        .filter(|(k, n)| lb.get(*k).is_none_or(|m| m < n))
        .collect();
    assert!(
        new.is_empty(),
        "new eu-elflint complaints on {}: {new:?}",
        after.display()
    );
}

/// `readelf -d` string entries as (tag, value) pairs, in order.
pub fn dynamic_strings(p: &Path) -> Vec<(String, String)> {
    let out = run_ok(Command::new("readelf").args(["-dW"]).arg(p));
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(open) = line.find('[') else { continue };
        let Some(tag_start) = line.find('(') else {
            continue;
        };
        let Some(tag_end) = line.find(')') else {
            continue;
        };
        if let Some(close) = line.rfind(']') {
            v.push((
                line[tag_start + 1..tag_end].to_string(),
                line[open + 1..close].to_string(),
            ));
        }
    }
    v
}

/// Copies a file, returning the copy's path.
pub fn copy(from: &Path, to: &Path) -> PathBuf {
    fs::copy(from, to).unwrap();
    to.to_path_buf()
}

/// Removes the section header table, as `sstrip` does: the file keeps only what the loader reads.
pub fn strip_section_headers(p: &Path) {
    let mut b = fs::read(p).unwrap();
    let is64 = b[4] == 2;
    let le = b[5] == 1;
    let put = |b: &mut Vec<u8>, off: usize, size: usize, v: u64| {
        for i in 0..size {
            let byte = if le {
                (v >> (8 * i)) as u8
            } else {
                (v >> (8 * (size - 1 - i))) as u8
            };
            b[off + i] = byte;
        }
    };
    let get = |b: &[u8], off: usize, size: usize| -> u64 {
        (0..size).fold(0u64, |acc, i| {
            let byte = u64::from(b[off + if le { size - 1 - i } else { i }]);
            (acc << 8) | byte
        })
    };
    let (shoff_at, shoff_size, shnum_at, shstrndx_at) = if is64 {
        (0x28, 8, 0x3c, 0x3e)
    } else {
        (0x20, 4, 0x30, 0x32)
    };
    // Keep everything up to the end of the last segment, drop what only sections describe.
    let (phoff, phnum, phent) = if is64 {
        (
            get(&b, 0x20, 8) as usize,
            get(&b, 0x38, 2) as usize,
            get(&b, 0x36, 2) as usize,
        )
    } else {
        (
            get(&b, 0x1c, 4) as usize,
            get(&b, 0x2c, 2) as usize,
            get(&b, 0x2a, 2) as usize,
        )
    };
    let mut end = 0usize;
    for i in 0..phnum {
        let at = phoff + i * phent;
        let (off, filesz) = if is64 {
            (get(&b, at + 8, 8) as usize, get(&b, at + 32, 8) as usize)
        } else {
            (get(&b, at + 4, 4) as usize, get(&b, at + 16, 4) as usize)
        };
        end = end.max(off + filesz);
    }
    put(&mut b, shoff_at, shoff_size, 0);
    put(&mut b, shnum_at, 2, 0);
    put(&mut b, shstrndx_at, 2, 0);
    b.truncate(end.max(phoff + phnum * phent));
    fs::write(p, b).unwrap();
}

/// Number of PT_LOAD segments.
pub fn load_count(p: &Path) -> usize {
    let out = run_ok(Command::new("readelf").args(["-lW"]).arg(p));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .count()
}

/// A directory path longer than `min` bytes under `base`, created.
pub fn long_dir(base: &Path, min: usize) -> PathBuf {
    let mut p = base.to_path_buf();
    let mut i = 0;
    while p.as_os_str().len() <= min {
        p = p.join(format!("a-rather-long-directory-name-number-{i}"));
        i += 1;
    }
    fs::create_dir_all(&p).unwrap();
    p
}

/// Inputs for files whose program headers a linker script chooses, as patchelf's tests build
/// theirs: a program with no `PT_DYNAMIC` (its `.dynamic` section lies in the text segment, as in
/// `phdr-corruption`), and one whose `PT_DYNAMIC` is listed with nothing in it (as in
/// `empty-note`, `contiguous-note-sections`), an assembly `_start` that prints "x" by system
/// call and exits.
pub fn write_link_inputs(dir: &Path) {
    fs::write(
        dir.join("no-pt-dynamic.ld"),
        "PHDRS { headers PT_PHDR PHDRS; interp PT_INTERP; text PT_LOAD FILEHDR PHDRS; }\n\
         SECTIONS { . = SIZEOF_HEADERS; .interp : { *(.interp) } :text :interp }\n\
         INSERT BEFORE .note.gnu.build-id;\n",
    )
    .unwrap();
    fs::write(
        dir.join("empty-pt-dynamic.ld"),
        "PHDRS { headers PT_PHDR PHDRS; interp PT_INTERP; text PT_LOAD FILEHDR PHDRS;\n\
         dynamic PT_DYNAMIC; }\n\
         SECTIONS { . = SIZEOF_HEADERS; .interp : { *(.interp) } :text :interp\n\
         .text : { *(.text) } :text .rodata : { *(.rodata) } :text }\n",
    )
    .unwrap();
    let start = syscall_program(Some("/lib64/ld-linux-x86-64.so.2"), "x");
    fs::write(dir.join("start.s"), start).unwrap();
}

/// A program without the C library (x86_64 Linux system calls): writes `message` and a newline,
/// exits 0; with `interp`, a `.interp` section naming it.
pub fn syscall_program(interp: Option<&str>, message: &str) -> String {
    let interp = interp
        .map(|i| format!(".section .interp, \"a\"\n.asciz \"{i}\"\n"))
        .unwrap_or_default();
    format!(
        "{interp}.text\n.globl _start\n_start:\n\
         mov $1, %eax\nmov $1, %edi\nlea msg(%rip), %rsi\nmov ${len}, %edx\nsyscall\n\
         mov $60, %eax\nxor %edi, %edi\nsyscall\n\
         .section .rodata\nmsg: .ascii \"{message}\\n\"\n",
        len = message.len() + 1
    )
}
