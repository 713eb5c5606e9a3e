//! The properties every elfpatch edit must keep: what the fuzz targets (`fuzz/`) check, what
//! `tests/fuzz_corpus.rs` replays on the inputs fuzzing found (`regressions/`), and the loader's
//! view of a file (`Info`) that elfpatch's fault-injection tests compare. A crate of its own so
//! that the fuzz workspace and the main one share it without reaching across the tree. It depends
//! only on `elfpatch` and on `elfsynth`, whose oracle reads files independently of elfpatch.
//!
//! # Input format of `plan_apply`
//!
//! `[ELF file][edit script][script length: u16 little endian]`. The length sits at the end so that
//! the fuzzer's insertions and deletions inside the (much larger) ELF part keep the script intact.
//! A length larger than what precedes it is clamped; an input shorter than 2 bytes is all ELF.
//!
//! The script: one options byte (bit 7: `page_size = 4 KiB << (bits 0..2)`; bits 3..5:
//! `dynamic_spare`), then operations. An operation byte `op` selects by `op % 16`:
//!
//! | `op % 16` | edit | operands |
//! |---|---|---|
//! | 0 | `SetRunpath` | string |
//! | 1 | `SetRpath` | string |
//! | 2 | `RemoveRunpath` | |
//! | 3 | `RemoveRpath` | |
//! | 4 | `RpathToRunpath` | |
//! | 5 | `RunpathToRpath` | |
//! | 6 | `AddNeeded` | string |
//! | 7 | `RemoveNeeded` | existing name |
//! | 8 | `ReplaceNeeded` | existing name, string |
//! | 9 | `SetSoname` | string |
//! | 10 | `SetInterpreter` | string |
//! | 11..=13 | `SetRunpath` of a generated path of `64 << (op % 16 - 11)` + next byte bytes | byte |
//! | 14 | `AddNeeded` of a generated name of 8..263 bytes | byte |
//! | 15 | end of batch: the next operations form another batch, planned on the edited file | |
//!
//! A string operand is one byte `s`: below `0x40` an entry of [`DICT`]; `0x40..0x80` a generated
//! path of `(s & 0x3f) * 16 + next byte` bytes; from `0x80` the next `s & 0x7f` raw bytes of the
//! script (NUL bytes included, which the planner must refuse). An existing-name operand is one byte
//! `e`: below `0x80` the `e % n`-th `DT_NEEDED` name of the file being edited (or a dictionary
//! entry when there is none), otherwise a string operand follows.
//!
//! # Properties
//!
//! For every batch: parsing, loading tables, validating and planning return without panicking. If
//! planning fails nothing is applied. If it succeeds, `apply_to_vec` succeeds, the result has the
//! plan's length, re-parses with elfpatch and (when the input did) with `elfsynth::oracle`, says
//! exactly what the edits asked (NEEDED, RUNPATH, RPATH, SONAME, interpreter, through both readers),
//! and neither `validate::check` nor `oracle::check_layout` reports anything new.

use std::collections::BTreeSet;

use elfpatch::{validate, Edit, Elf, Layout, Options, Tables};
use elfsynth::oracle;

/// Strings the script can name with one byte.
pub const DICT: [&[u8]; 24] = [
    b"",
    b"/",
    b"libc.so.6",
    b"libm.so.6",
    b"libdep.so",
    b"libextra.so",
    b"$ORIGIN",
    b"$ORIGIN/../lib",
    b"/opt/x/libdep.so",
    b"/run/opengl-driver/lib",
    b"/lib64/ld-linux-x86-64.so.2",
    b"/lib/ld-linux.so.2",
    b"so.6",
    b"libc.so.6.1",
    b"/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda-stubs/lib/stubs",
    b"a",
    b"ab",
    b"/a:/b",
    b"libfoo.so.1",
    b"libfoo-with-a-rather-long-name.so.1",
    b"c.so.6",
    b"/usr/lib/x86_64-linux-gnu",
    b"lib",
    b"x",
];

/// Most batches and edits per batch a script may hold (bounds the time per input).
pub const MAX_BATCHES: usize = 6;
/// See [`MAX_BATCHES`].
pub const MAX_EDITS: usize = 12;

/// Splits a `plan_apply` input into the ELF bytes and the script.
pub fn split(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() < 2 {
        return (data, &[]);
    }
    let body = &data[..data.len() - 2];
    let n = usize::from(u16::from_le_bytes([
        data[data.len() - 2],
        data[data.len() - 1],
    ]));
    let n = n.min(body.len());
    body.split_at(body.len() - n)
}

/// Builds a `plan_apply` input (the inverse of [`split`]).
pub fn join(elf: &[u8], script: &[u8]) -> Vec<u8> {
    assert!(script.len() <= usize::from(u16::MAX));
    let mut v = elf.to_vec();
    v.extend_from_slice(script);
    v.extend_from_slice(&(script.len() as u16).to_le_bytes());
    v
}

/// A path-like string of exactly `n` bytes.
pub fn generated_path(n: usize, salt: u8) -> Vec<u8> {
    let unit = format!("/dir-{salt:02x}-with-a-long-name");
    unit.bytes().cycle().take(n).collect()
}

struct Reader<'a> {
    s: &'a [u8],
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.s.split_first()?;
        self.s = rest;
        Some(b)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.s.len());
        let (a, b) = self.s.split_at(n);
        self.s = b;
        a.to_vec()
    }

    fn string(&mut self) -> Vec<u8> {
        let s = self.byte().unwrap_or(0);
        match s {
            0..0x40 => DICT[usize::from(s) % DICT.len()].to_vec(),
            0x40..0x80 => {
                let n = usize::from(s & 0x3f) * 16 + usize::from(self.byte().unwrap_or(0));
                generated_path(n, s)
            }
            _ => self.bytes(usize::from(s & 0x7f)),
        }
    }

    fn existing(&mut self, needed: &[Vec<u8>]) -> Vec<u8> {
        let e = self.byte().unwrap_or(0);
        if e < 0x80 {
            if needed.is_empty() {
                DICT[usize::from(e) % DICT.len()].to_vec()
            } else {
                needed[usize::from(e) % needed.len()].clone()
            }
        } else {
            self.string()
        }
    }
}

/// The options byte, decoded.
pub fn options(b: u8) -> Options {
    Options {
        page_size: (b & 0x80 != 0).then(|| 0x1000u64 << (b & 7)),
        dynamic_spare: usize::from((b >> 3) & 7),
    }
}

/// Decodes one batch from `r`, naming existing libraries from `needed`. `None` at the end.
fn batch(r: &mut Reader<'_>, needed: &[Vec<u8>]) -> Option<Vec<Edit>> {
    let mut edits = Vec::new();
    r.s.first()?;
    while let Some(op) = r.byte() {
        let e = match op % 16 {
            0 => Edit::SetRunpath(r.string()),
            1 => Edit::SetRpath(r.string()),
            2 => Edit::RemoveRunpath,
            3 => Edit::RemoveRpath,
            4 => Edit::RpathToRunpath,
            5 => Edit::RunpathToRpath,
            6 => Edit::AddNeeded(r.string()),
            7 => Edit::RemoveNeeded(r.existing(needed)),
            8 => {
                let old = r.existing(needed);
                Edit::ReplaceNeeded {
                    old,
                    new: r.string(),
                }
            }
            9 => Edit::SetSoname(r.string()),
            10 => Edit::SetInterpreter(r.string()),
            k @ 11..=13 => {
                let n = (64usize << (k - 11)) + usize::from(r.byte().unwrap_or(0));
                Edit::SetRunpath(generated_path(n, op))
            }
            14 => {
                let n = 8 + usize::from(r.byte().unwrap_or(0));
                let mut name = b"lib".to_vec();
                name.extend(
                    generated_path(n, op)
                        .iter()
                        .map(|&c| if c == b'/' { b'_' } else { c }),
                );
                Edit::AddNeeded(name)
            }
            _ => break,
        };
        if edits.len() < MAX_EDITS {
            edits.push(e);
        }
    }
    Some(edits)
}

/// The options and the first batch of a `plan_apply` input, decoded against its own ELF part
/// (for the on-disk replay in `fuzz_corpus.rs`).
pub fn first_batch(data: &[u8]) -> Option<(Options, Vec<Edit>)> {
    let (elf_bytes, script) = split(data);
    let needed: Vec<Vec<u8>> = Elf::parse(elf_bytes)
        .map(|e| e.needed().into_iter().map(<[u8]>::to_vec).collect())
        .unwrap_or_default();
    let mut r = Reader { s: script };
    let opts = options(r.byte()?);
    batch(&mut r, &needed).map(|b| (opts, b))
}

/// Encodes edits as a script (for seeds and tests); strings longer than 127 bytes are generated
/// paths, so only [`generated_path`] strings of those lengths round-trip.
pub fn encode(opts: u8, batches: &[Vec<Edit>]) -> Vec<u8> {
    let mut s = vec![opts];
    let string = |s: &mut Vec<u8>, v: &[u8]| {
        if let Some(i) = DICT.iter().position(|d| *d == v) {
            s.push(i as u8);
        } else if v.len() < 0x80 {
            s.push(0x80 | v.len() as u8);
            s.extend_from_slice(v);
        } else {
            // Generated: (s & 0x3f) * 16 + next byte.
            let n = v.len().min(0x3f * 16 + 255);
            let hi = (n / 16).min(0x3f);
            s.push(0x40 | hi as u8);
            s.push((n - hi * 16) as u8);
        }
    };
    for (bi, b) in batches.iter().enumerate() {
        if bi > 0 {
            s.push(15);
        }
        for e in b {
            match e {
                Edit::SetRunpath(v) => {
                    s.push(0);
                    string(&mut s, v)
                }
                Edit::SetRpath(v) => {
                    s.push(1);
                    string(&mut s, v)
                }
                Edit::RemoveRunpath => s.push(2),
                Edit::RemoveRpath => s.push(3),
                Edit::RpathToRunpath => s.push(4),
                Edit::RunpathToRpath => s.push(5),
                Edit::AddNeeded(v) => {
                    s.push(6);
                    string(&mut s, v)
                }
                Edit::RemoveNeeded(v) => {
                    s.push(7);
                    s.push(0x80);
                    string(&mut s, v)
                }
                Edit::ReplaceNeeded { old, new } => {
                    s.push(8);
                    s.push(0x80);
                    string(&mut s, old);
                    string(&mut s, new)
                }
                Edit::SetSoname(v) => {
                    s.push(9);
                    string(&mut s, v)
                }
                Edit::SetInterpreter(v) => {
                    s.push(10);
                    string(&mut s, v)
                }
                // Symbol edits are not generated by the fuzzer: nothing to encode.
                Edit::ClearSymbolVersion(_) | Edit::RenameDynamicSymbols(_) => {}
                // The input language has no note edits: `batch` never decodes one.
                Edit::SetResolutionCache(_) | Edit::RemoveResolutionCache => {}
                // The script format has no code left for them (`batch` decodes 0 to 15).
                other => panic!("{other:?} has no code in the fuzz script format"),
            }
        }
    }
    s
}

/// The `parse` target: never panics, whatever the bytes.
pub fn parse_only(data: &[u8]) {
    let _ = oracle::read(data);
    let _ = oracle::check_layout(data);
    let Ok(elf) = Elf::parse(data) else { return };
    let _ = validate_issues(&elf, Known::TOLERATED);
    let _ = (
        elf.needed(),
        elf.runpath(),
        elf.rpath(),
        elf.soname(),
        elf.interpreter(),
        elf.flags(),
        elf.flags_1(),
    );
    let _ = Tables::read(data, &elf).map(|t| t.string_refs().count());
}

/// The loader-visible dynamic information, as a comparable value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    /// `DT_NEEDED` names, in order.
    pub needed: Vec<Vec<u8>>,
    /// First `DT_RUNPATH`.
    pub runpath: Option<Vec<u8>>,
    /// First `DT_RPATH`.
    pub rpath: Option<Vec<u8>>,
    /// First `DT_SONAME`.
    pub soname: Option<Vec<u8>>,
    /// `PT_INTERP`.
    pub interp: Option<Vec<u8>>,
}

impl Info {
    /// What elfpatch reads.
    pub fn of(e: &Elf) -> Info {
        Info {
            needed: e.needed().into_iter().map(<[u8]>::to_vec).collect(),
            runpath: e.runpath().map(<[u8]>::to_vec),
            rpath: e.rpath().map(<[u8]>::to_vec),
            soname: e.soname().map(<[u8]>::to_vec),
            interp: e.interpreter().map(<[u8]>::to_vec),
        }
    }

    /// What the oracle reads, in the oracle's (lossy UTF-8) terms.
    pub fn lossy(&self) -> (Vec<String>, [Option<String>; 4]) {
        let l = |v: &Option<Vec<u8>>| {
            v.as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        };
        (
            self.needed
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect(),
            [
                l(&self.runpath),
                l(&self.rpath),
                l(&self.soname),
                l(&self.interp),
            ],
        )
    }

    /// The oracle's reading.
    pub fn of_oracle(o: &oracle::Elf) -> (Vec<String>, [Option<String>; 4]) {
        (
            o.needed.clone(),
            [
                o.runpath.clone(),
                o.rpath.clone(),
                o.soname.clone(),
                o.interpreter.clone(),
            ],
        )
    }

    /// The documented effect of `batch` (see `elfpatch::Edit`).
    pub fn apply(&self, batch: &[Edit]) -> Info {
        let mut m = self.clone();
        // (name, added by this batch)
        let mut needed: Vec<(Vec<u8>, bool)> =
            m.needed.iter().map(|n| (n.clone(), false)).collect();
        for e in batch {
            match e {
                Edit::SetRunpath(v) => m.runpath = Some(v.clone()),
                Edit::SetRpath(v) => m.rpath = Some(v.clone()),
                Edit::RemoveRunpath => m.runpath = None,
                Edit::RemoveRpath => m.rpath = None,
                Edit::RpathToRunpath => {
                    if m.runpath.is_some() {
                        m.rpath = None;
                    } else {
                        m.runpath = m.rpath.take();
                    }
                }
                Edit::RunpathToRpath => {
                    if m.runpath.is_some() {
                        m.rpath = m.runpath.take();
                    }
                }
                Edit::AddNeeded(n) => {
                    if !needed.iter().any(|(x, _)| x == n) {
                        let at = needed.iter().rposition(|(_, a)| *a).map_or(0, |i| i + 1);
                        needed.insert(at, (n.clone(), true));
                    }
                }
                Edit::RemoveNeeded(n) => needed.retain(|(x, _)| x != n),
                Edit::ReplaceNeeded { old, new } => {
                    for (x, _) in needed.iter_mut() {
                        if x == old {
                            x.clone_from(new);
                        }
                    }
                }
                Edit::SetSoname(v) => m.soname = Some(v.clone()),
                Edit::SetInterpreter(v) => m.interp = Some(v.clone()),
                // Symbol edits change nothing the dynamic model describes.
                Edit::ClearSymbolVersion(_) | Edit::RenameDynamicSymbols(_) => {}
                // The note is none of what this model follows.
                Edit::SetResolutionCache(_) | Edit::RemoveResolutionCache => {}
                // Header and flag edits: nothing the model holds.
                Edit::SetOsAbi(_)
                | Edit::SetExecstack(_)
                | Edit::AddFlags1(_)
                | Edit::AddDebugTag => {}
            }
        }
        m.needed = needed.into_iter().map(|(n, _)| n).collect();
        m
    }
}

/// Replaces every number in an issue by `#`, so that the same kind of issue about a moved thing
/// compares equal.
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            // A quoted section name: read from a name table that may itself have been garbage.
            match b[i + 1..].iter().position(|&c| c == b'\'') {
                Some(n) => {
                    out.push_str("'_'");
                    i += n + 2;
                    continue;
                }
                None => {
                    out.push('\'');
                    i += 1;
                    continue;
                }
            }
        }
        if b[i].is_ascii_digit() {
            if b[i] == b'0' && b.get(i + 1) == Some(&b'x') {
                i += 2;
            }
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
            out.push('#');
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// Issues in `after` that `before` lacks: exactly when `before` is clean, by kind otherwise (a
/// pre-existing issue about something that moved reads differently afterwards).
///
/// Garbage in: when a header of the input already claims bytes past the end of the file or
/// outside every segment, the appended data may land in that range, so new overlaps are not
/// counted then; likewise new `PT_PHDR` issues when its `PT_PHDR` was already inconsistent, and
/// new section-level issues when the input's section headers already were (the loader never
/// reads them: keeping garbage consistent means nothing; the loader's view stays strict).
/// Section names are compared as `'_'`: with a garbage `e_shstrndx` they are read
/// from bytes (the ELF header, say) that an edit legitimately changes.
pub fn new_issues(before: &[String], after: &[String]) -> Vec<String> {
    if before.is_empty() {
        return after.to_vec();
    }
    let past_eof = before.iter().any(|s| {
        s.contains("outside the")
            || s.contains("past the end of the file")
            || s.contains("inside 0 PT_LOADs")
            || s.contains("not inside a PT_LOAD")
    });
    let bad_phdr = before.iter().any(|s| s.contains("PT_PHDR"));
    let bad_sections = before.iter().any(|s| s.contains("section"));
    // The oracle takes the symbol count from a `.dynsym` section when there is one: a garbage one
    // hides symbols from its hash checks until an edit drops the unusable section headers, and
    // then what the input already had shows up as new.
    let hidden_symbols = before
        .iter()
        .any(|s| s.starts_with("DT_HASH nchain") && s.contains("differs from the"));
    let symbol_lookup = |s: &str| {
        s.starts_with("dynsym ")
            && (s.contains("is not reachable through DT_")
                || s.contains("is rejected by the DT_GNU_HASH bloom filter"))
    };
    let kinds: BTreeSet<String> = before.iter().map(|s| normalize(s)).collect();
    after
        .iter()
        .filter(|s| !kinds.contains(&normalize(s)))
        .filter(|s| !(past_eof && s.contains("overlap")))
        .filter(|s| !(bad_phdr && s.contains("PT_PHDR")))
        .filter(|s| !(bad_sections && s.contains("section")))
        .filter(|s| !(hidden_symbols && symbol_lookup(s)))
        .cloned()
        .collect()
}

/// Why an input violates a property.
#[derive(Debug)]
pub struct Failure(pub String);

/// Findings of the fuzz targets, each of which can be tolerated so that the fuzzer keeps looking
/// for new ones while it is open. Each has a regression input in `regressions/` and a test in
/// `tests/fuzz_corpus.rs` (`#[ignore]`d while open); [`Known::NONE`] checks
/// strictly, [`Known::TOLERATED`] tolerates the open ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    /// The new `PT_LOAD` gets a `p_align` larger than every existing one (`Options::page_size`
    /// above them, or an existing `p_align` that is not a power of two, which the planner rounds
    /// up), so the existing segments are no longer congruent modulo the file's largest `p_align`
    /// (pitfall 2: glibc < 2.35 checks that). `oracle::check_layout` reports it.
    pub new_load_align_above_existing: bool,
    /// `validate::check` adds `sh_addr + sh_size` unchecked (validate.rs, the overlap scan of
    /// allocated sections): with overflow checks on (debug builds, `cargo test`) a section whose
    /// end wraps the address space panics.
    pub validate_section_end_overflow: bool,
    /// The planner adds `sh_offset + sh_size` unchecked (plan/layout.rs, `occupants`, reached when a
    /// growing edit needs a new `PT_LOAD`): a section whose file range wraps panics with overflow
    /// checks on, and wraps silently without them.
    pub plan_section_offset_overflow: bool,
    /// The planner rounds the largest `p_align` up with `next_power_of_two` (plan/layout.rs,
    /// `max_load_align`): above 2^63 that overflows (a panic with overflow checks), and without
    /// them gives 0, so `offset % align` in `choose_layout` divides by zero: a growing edit of a
    /// file with such a `PT_LOAD` panics in release builds too.
    pub load_align_overflow: bool,
    /// A plan's symbol fixups can name a symbol table (`.symtab`/`.dynsym` by section header)
    /// that lies outside the file; `Plan::apply_to_vec` then slices out of bounds and panics
    /// (on disk the applier's read fails and it rolls back).
    pub symbol_fixup_out_of_file: bool,
    /// elfpatch and the loader (and the oracle) disagree on how many dynamic symbols or version
    /// records there are: elfpatch trusts `DT_VERNEEDNUM`/`DT_VERDEFNUM` (absent: 0) and the
    /// `.dynsym` section size, glibc follows `vn_next`/`vd_next` and the hash tables. Names only
    /// the loader sees are then not known to be referenced and may be overwritten or zeroed
    /// (pitfall 9).
    pub reference_counts_disagree: bool,
    /// With section headers present, the planner's search for room after the program header
    /// table (plan/layout.rs, `find_room`/`occupants`) trusts the sections alone: a table `.dynamic`
    /// points to (`DT_HASH`, `DT_GNU_HASH`, `.dynsym`, version tables, `.dynstr`) that no section
    /// describes is taken for free space and overwritten by the grown table.
    pub room_ignores_dynamic_tables: bool,
    /// plan/layout.rs `choose_layout`: the new segment's base is
    /// `align_up(top + reach, align) + align` where only `top + reach` is checked: with the image
    /// (or the largest dynamic symbol's `st_size`) near the top of the address space, or a huge
    /// `p_align` (2^63 itself passes `next_power_of_two`), the rest overflows (debug: panic; release: wraps to a low address, then filtered by `< max_addr`
    /// only).
    pub new_segment_base_overflow: bool,
    /// A non-`PT_LOAD` segment with an absurd `p_memsz` (garbage the parser accepts because its
    /// `p_vaddr + p_memsz` still fits) is relocated by a growing edit, after which it wraps the
    /// address space and elfpatch refuses to read its own output.
    pub relocated_segment_wraps: bool,
    /// read.rs recognizes the section of a table it may move by strict criteria: `.interp` by
    /// name only, `.dynstr` only with `sh_type == SHT_STRTAB`. When they do not hold (a section
    /// name table whose `sh_type` is not `SHT_STRTAB`, a `.dynstr` of unknown type; the oracle
    /// goes by name), moving the interpreter or the string table leaves that section header stale
    /// ("PT_INTERP does not match the .interp section", "DT_STRTAB/DT_STRSZ … differ from section
    /// '.dynstr'").
    pub moved_table_section_unrecognized: bool,
    /// plan/layout.rs `occupants`/`find_room`: the block moved to make room after the program
    /// header table takes the largest alignment of what it holds, including a non-`PT_LOAD`
    /// segment's garbage `p_align` (0x3ff on a `PT_INTERP` here); placed congruent modulo a
    /// non-power-of-two, the moved notes lose their 4-byte alignment.
    pub block_align_not_power_of_two: bool,
}

impl Known {
    /// Tolerate nothing.
    pub const NONE: Known = Known {
        new_load_align_above_existing: false,
        validate_section_end_overflow: false,
        plan_section_offset_overflow: false,
        load_align_overflow: false,
        symbol_fixup_out_of_file: false,
        reference_counts_disagree: false,
        room_ignores_dynamic_tables: false,
        new_segment_base_overflow: false,
        relocated_segment_wraps: false,
        moved_table_section_unrecognized: false,
        block_align_not_power_of_two: false,
    };
    /// What the fuzz targets tolerate: the findings still open. None is: the last two were
    /// fixed after 3226a7d, so every finding is checked strictly again. When a new one is found,
    /// tolerate it here (a field set to `true`) while it is open.
    pub const TOLERATED: Known = Known::NONE;
}

/// Whether `validate::check` would hit the known overflow ([`Known::validate_section_end_overflow`]).
pub fn section_end_wraps(e: &Elf) -> bool {
    e.sections.iter().any(|s| {
        s.shdr.is_alloc()
            && s.shdr.has_file_bytes()
            && s.shdr.sh_addr.checked_add(s.shdr.sh_size).is_none()
    })
}

/// Whether planning could hit the known overflow ([`Known::plan_section_offset_overflow`]).
pub fn section_range_wraps(e: &Elf) -> bool {
    e.sections
        .iter()
        .any(|s| s.shdr.has_file_bytes() && s.shdr.sh_offset.checked_add(s.shdr.sh_size).is_none())
}

/// Whether planning could hit the known overflow ([`Known::load_align_overflow`]).
pub fn load_align_wraps(e: &Elf) -> bool {
    e.loads().any(|p| p.p_align > 1 << 63)
}

/// Whether planning could hit [`Known::new_segment_base_overflow`].
pub fn segment_base_wraps(e: &Elf, t: &Tables) -> bool {
    let top = e.loads().map(|p| p.vaddr_end()).max().unwrap_or(0);
    let reach = t.dynsym.as_ref().map_or(0, |s| s.max_size);
    let align = e.loads().map(|p| p.p_align).max().unwrap_or(0);
    top.saturating_add(reach) >= 1 << 62 || align >= 1 << 61
}

/// Whether a segment has a `p_memsz` that only garbage has ([`Known::relocated_segment_wraps`]).
pub fn absurd_memsz(e: &Elf) -> bool {
    e.phdrs.iter().any(|p| p.p_memsz >= 1 << 40)
}

/// Whether applying `plan` in memory hits [`Known::symbol_fixup_out_of_file`].
pub fn fixup_out_of_file(plan: &elfpatch::Plan, e: &Elf) -> bool {
    let size = e.format.sym_size() as u64;
    plan.symbol_fixups.iter().any(|fx| {
        fx.count
            .checked_mul(size)
            .and_then(|n| n.checked_add(fx.offset))
            .is_none_or(|end| end > plan.new_len)
    })
}

/// Whether elfpatch's and the oracle's readings of the referrers disagree
/// ([`Known::reference_counts_disagree`]).
pub fn counts_disagree(t: &Tables, o: &oracle::Elf) -> bool {
    let dynsyms = t
        .dynsym
        .as_ref()
        .map_or(0, |d| d.names.len().saturating_sub(1));
    let verneed = t.verneed.as_ref().map_or(0, |(_, v)| v.len());
    let vernaux = t
        .verneed
        .as_ref()
        .map_or(0, |(_, v)| v.iter().map(|n| n.aux.len()).sum::<usize>());
    let verdef = t.verdef.as_ref().map_or(0, |(_, v)| v.len());
    dynsyms != o.dynsyms.len()
        || verneed != o.verneed.len()
        || vernaux != o.verneed.iter().map(|(_, a)| a.len()).sum::<usize>()
        || verdef < o.verdef.len()
}

/// Whether some table `.dynamic` points to lies outside every section while the file has section
/// headers ([`Known::room_ignores_dynamic_tables`]).
pub fn tables_outside_sections(e: &Elf, t: &Tables) -> bool {
    if e.sections.is_empty() {
        return false;
    }
    let mut regions: Vec<(u64, u64)> = Vec::new();
    if let Some(s) = &e.strtab {
        regions.push((s.offset, s.size));
    }
    let rs = [
        t.dynsym.as_ref().map(|s| s.region),
        t.hash,
        t.gnu_hash,
        t.versym.as_ref().map(|(r, _)| *r),
        t.verneed.as_ref().map(|(r, _)| *r),
        t.verdef.as_ref().map(|(r, _)| *r),
    ];
    regions.extend(rs.into_iter().flatten().map(|r| (r.offset, r.size)));
    regions.iter().filter(|r| r.1 > 0).any(|&(o, n)| {
        !e.sections.iter().any(|s| {
            s.shdr.has_file_bytes()
                && s.shdr.sh_offset <= o
                && s.shdr
                    .sh_offset
                    .checked_add(s.shdr.sh_size)
                    .is_some_and(|end| o + n <= end)
        })
    })
}

/// `validate::check`, skipped (empty) where a tolerated known finding would panic.
pub fn validate_issues(e: &Elf, known: Known) -> Vec<String> {
    if known.validate_section_end_overflow && section_end_wraps(e) {
        return Vec::new();
    }
    validate::check(e).into_iter().map(|i| i.0).collect()
}

/// A short, readable form of an edit list for failure messages.
pub fn show(edits: &[Edit]) -> String {
    let s = |b: &[u8]| {
        let t = String::from_utf8_lossy(b);
        if t.len() > 40 {
            format!(
                "{:?}…({} bytes)",
                &t[..t.char_indices().nth(40).map_or(t.len(), |(i, _)| i)],
                b.len()
            )
        } else {
            format!("{t:?}")
        }
    };
    let v: Vec<String> = edits
        .iter()
        .map(|e| match e {
            Edit::SetRunpath(v) => format!("SetRunpath({})", s(v)),
            Edit::SetRpath(v) => format!("SetRpath({})", s(v)),
            Edit::AddNeeded(v) => format!("AddNeeded({})", s(v)),
            Edit::RemoveNeeded(v) => format!("RemoveNeeded({})", s(v)),
            Edit::ReplaceNeeded { old, new } => format!("ReplaceNeeded({} -> {})", s(old), s(new)),
            Edit::SetSoname(v) => format!("SetSoname({})", s(v)),
            Edit::SetInterpreter(v) => format!("SetInterpreter({})", s(v)),
            other => format!("{other:?}"),
        })
        .collect();
    format!("[{}]", v.join(", "))
}

/// Runs the `plan_apply` properties, tolerating the [`Known::TOLERATED`] findings.
pub fn plan_apply_checked(data: &[u8]) -> Result<Stats, Failure> {
    plan_apply_checked_with(data, Known::TOLERATED)
}

/// Runs the `plan_apply` properties; `Err` describes the first violation. Panics inside elfpatch
/// propagate (they are findings too).
pub fn plan_apply_checked_with(data: &[u8], known: Known) -> Result<Stats, Failure> {
    let (elf_bytes, script) = split(data);
    let mut stats = Stats::default();
    let mut r = Reader { s: script };
    let opts = options(r.byte().unwrap_or(0));
    let mut bytes = elf_bytes.to_vec();
    for _ in 0..MAX_BATCHES {
        let Ok(elf) = Elf::parse(&bytes) else {
            return Ok(stats);
        };
        let needed: Vec<Vec<u8>> = elf.needed().into_iter().map(<[u8]>::to_vec).collect();
        let Some(edits) = batch(&mut r, &needed) else {
            break;
        };
        let shown = show(&edits);
        let issues_before = validate_issues(&elf, known);
        let Ok(tables) = Tables::read(bytes.as_slice(), &elf) else {
            return Ok(stats);
        };
        if known.new_segment_base_overflow && segment_base_wraps(&elf, &tables) {
            stats.known += 1;
            return Ok(stats);
        }
        stats.batches += 1;
        if (known.plan_section_offset_overflow && section_range_wraps(&elf))
            || (known.load_align_overflow && load_align_wraps(&elf))
        {
            stats.known += 1;
            return Ok(stats);
        }
        let plan = match elfpatch::plan(&elf, &tables, &edits, &opts) {
            Ok(p) => p,
            Err(_) => {
                stats.refused += 1;
                continue;
            }
        };
        stats.planned += 1;
        if known.symbol_fixup_out_of_file && fixup_out_of_file(&plan, &elf) {
            stats.known += 1;
            return Ok(stats);
        }
        let mut next = bytes.clone();
        plan.apply_to_vec(&mut next, elf.format)
            .map_err(|e| Failure(format!("apply_to_vec failed on its own plan: {e}")))?;
        if next.len() as u64 != plan.new_len {
            return Err(Failure(format!(
                "result is {} bytes, the plan said {}",
                next.len(),
                plan.new_len
            )));
        }
        match plan.layout {
            Layout::Unchanged if next != bytes => {
                return Err(Failure("an unchanged plan changed bytes".into()))
            }
            Layout::InPlace if next.len() != bytes.len() => {
                return Err(Failure("an in-place plan changed the length".into()))
            }
            _ => {}
        }
        if known.relocated_segment_wraps && absurd_memsz(&elf) && Elf::parse(&next).is_err() {
            stats.known += 1;
            return Ok(stats);
        }
        let after = Elf::parse(&next).map_err(|e| {
            Failure(format!(
                "elfpatch cannot re-read its output of {shown}: {e}"
            ))
        })?;
        let expect = Info::of(&elf).apply(&edits);
        let got = Info::of(&after);
        if got != expect {
            return Err(Failure(format!(
                "edits {shown}: elfpatch reads {got:?}, expected {expect:?}"
            )));
        }
        let issues_after = validate_issues(&after, known);
        let new = new_issues(&issues_before, &issues_after);
        if !new.is_empty() {
            return Err(Failure(format!(
                "edits {shown}: new validate issues {new:?} (before: {issues_before:?})"
            )));
        }
        // A section header table elfpatch cannot use (a garbage entry size) is still read by the
        // oracle, which then counts symbols and version records from garbage; elfpatch drops such
        // a table when it moves things, and the oracle's view of the output is a different one.
        // Its before/after comparison means nothing there when the counts already disagree.
        let garbage_count =
            |o: &oracle::Elf| elf.section_headers_unusable() && counts_disagree(&tables, o);
        let oracle_before = oracle::read(&bytes)
            .ok()
            .filter(|o| !(known.reference_counts_disagree && counts_disagree(&tables, o)))
            .filter(|o| !garbage_count(o))
            .filter(|_| {
                !(known.room_ignores_dynamic_tables && tables_outside_sections(&elf, &tables))
            });
        if let Some(ob) = oracle_before {
            let oa = oracle::read(&next).map_err(|e| {
                Failure(format!(
                    "the oracle reads the input but not the output of {shown}: {e}"
                ))
            })?;
            // The oracle reads its own way; compare it with what it read before, edited.
            let before_oracle = Info::of_oracle(&ob);
            if before_oracle == Info::of(&elf).lossy() && Info::of_oracle(&oa) != expect.lossy() {
                return Err(Failure(format!(
                    "edits {shown}: the oracle reads {:?}, expected {:?}",
                    Info::of_oracle(&oa),
                    expect.lossy()
                )));
            }
            let vb = oracle::check_layout(&bytes);
            let mut new = new_issues(&vb, &oracle::check_layout(&next));
            let max_align = |e: &Elf| e.loads().map(|p| p.p_align).max().unwrap_or(0);
            if known.block_align_not_power_of_two
                && elf
                    .phdrs
                    .iter()
                    .any(|p| p.p_align > 1 && !p.p_align.is_power_of_two())
            {
                new.retain(|v| !v.contains("not aligned to"));
            }
            if known.moved_table_section_unrecognized && !elf.sections.is_empty() {
                if elf.interp.as_ref().is_some_and(|i| i.section.is_none()) {
                    new.retain(|v| !v.contains("PT_INTERP does not match the .interp section"));
                }
                if elf.strtab.as_ref().is_some_and(|s| s.section.is_none()) {
                    new.retain(|v| !v.contains("differ from section '.dynstr'"));
                }
                if elf.dynamic.as_ref().is_some_and(|d| d.section.is_none()) {
                    new.retain(|v| !(v.contains("PT_DYNAMIC") && v.contains(".dynamic")));
                }
            }
            if known.new_load_align_above_existing && max_align(&after) > max_align(&elf) {
                new.retain(|v| !v.contains("modulo the largest PT_LOAD p_align"));
            }
            if !new.is_empty() {
                return Err(Failure(format!(
                    "edits {shown}: new oracle layout violations {new:?} (before: {vb:?})"
                )));
            }
            stats.oracle_checked += 1;
        }
        bytes = next;
    }
    Ok(stats)
}

/// What one input exercised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Batches decoded on a parseable file.
    pub batches: usize,
    /// Batches the planner refused.
    pub refused: usize,
    /// Batches planned and applied.
    pub planned: usize,
    /// Batches whose result the oracle checked too.
    pub oracle_checked: usize,
    /// Batches skipped for a tolerated known finding.
    pub known: usize,
}

/// The `plan_apply` target: panics (so libFuzzer records a crash) on any violated property.
pub fn plan_apply(data: &[u8]) {
    if let Err(Failure(f)) = plan_apply_checked(data) {
        panic!("property violated: {f}");
    }
}
