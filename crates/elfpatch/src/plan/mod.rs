//! Planning: from a parsed file and the requested edits to the exact bytes that change.
//!
//! This module does no I/O. [`plan`] returns a [`Plan`]: an ordered list of writes in three
//! phases. *Stage* writes go where nothing points yet (past the end of the file, or unreferenced
//! bytes); the *commit* writes switch the headers over to them (one write of the ELF header and
//! program header table whenever the layout changes; a string table that grows where it is takes
//! up to three more, each leaving the old file or the new one, see `appended/tail.rs`); *cleanup*
//! writes zero what is no longer referenced and bring the section headers and symbols along.
//! Interrupted after any write, the file is either the old file (possibly with unreferenced bytes
//! past its end) or the new one.
//!
//! Planning goes in stages, each a value the next is a function of:
//! 1. the input (`Input`, `input.rs`): the parsed file, its tables, its string table and
//!    the options, checked before anything is decided;
//! 2. the desired contents (`Desired`, `desired.rs`): what the dynamic array, the
//!    version needs, the interpreter, the symbols, the resolution-cache note and the program
//!    header table should become, from the input and the edits;
//! 3. the placement (`Placed`, `placed.rs`): where the new strings go, the version
//!    records that result, the final dynamic entries, and the strategy, in place or appended;
//! 4. the plan, made by that strategy (`in_place.rs`, `appended/`) from the input and the
//!    placement, its writes collected and ordered by `Writes`; `builder.rs` chooses.
//!
//! The files import only the ones below them, as the `layering` test at the end of this file
//! lists them.
//!
//! How the new bytes are placed:
//! - strings go over unreferenced bytes of the string table when they fit (see [`strings`]);
//! - otherwise the table grows where it is, over room after it (`appended/tail.rs`): bytes
//!   nothing describes, the read-only tables that follow it (version, hash and relocation tables,
//!   moved whole as one block into the rest of the segment's last page, else into the appended
//!   segment), a dynamic array or section header table in the way (moved), and the segment's
//!   page tail, or any length past the end of a segment that ends the file and the address space
//!   (one an earlier edit appended, ours or patchelf's). What the edit adds then scales with the
//!   strings and the small tables it moves, never with more than the string table; repeated
//!   edits find the room the previous one left (moved tables go as high as they fit);
//! - **the fallback, a grown copy of the whole table in the appended segment**, is taken when
//!   that is not possible: code, data or a table the planner cannot move right after the table
//!   with too little room before it (lld and mold put `.rodata` or `.eh_frame` right after the
//!   relocation tables), no usable section headers (nothing tells padding from data), a table
//!   that runs past its segment's `p_filesz`, a program header block that takes in the table,
//!   or an edit that must switch other things in the same write as the strings (the
//!   interpreter, the resolution-cache note, renamed symbols, added program headers), or a new
//!   string placed over bytes in use before the edit; and when it adds less: tables in the way
//!   larger than the table that do not fit in the rest of its page (they would go to the
//!   appended segment, adding their size rather than the table's). `bench/growth_bench.py`
//!   measures what is left: a library whose table and the tables after it fill their segment's
//!   last page, with code on the next, copies its table once the page's rest is used up;
//! - the dynamic array is rewritten in place when its entries fit, otherwise it moves;
//! - moved things go to the end of the file and of the address space: into the segment a previous
//!   edit appended when there is one (it is extended), else into a new `PT_LOAD`. A new `PT_LOAD`
//!   needs a program header slot: a `PT_NULL` entry, free bytes after the table, or room made by
//!   moving the non-code sections that follow the table (`.interp`, notes, hash tables, `.dynsym`,
//!   `.dynstr`, version tables) into the new segment; only when none of that works does the table
//!   itself move.

mod appended;
mod builder;
mod contents;
mod desired;
mod dynstr;
mod edits;
mod header;
mod in_place;
mod input;
mod note_edit;
mod note_writes;
mod placed;
pub mod strings;
mod symbols;
mod tags;
#[cfg(test)]
mod testing;
mod writes;

use object::elf;

use crate::error::Result;
use crate::format::Format;
use crate::read::Elf;
use crate::refs::Tables;
pub(crate) use dynstr::Dynstr;
use input::Input;

/// One requested change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Set `DT_RUNPATH` (added at the front of `.dynamic` when absent). `DT_RPATH` is untouched.
    SetRunpath(Vec<u8>),
    /// Set `DT_RPATH` (added at the front of `.dynamic` when absent). `DT_RUNPATH` is untouched.
    SetRpath(Vec<u8>),
    /// Remove every `DT_RUNPATH` entry.
    RemoveRunpath,
    /// Remove every `DT_RPATH` entry.
    RemoveRpath,
    /// Turn `DT_RPATH` into `DT_RUNPATH` (dropping it when a `DT_RUNPATH` exists, which already
    /// takes precedence at run time).
    RpathToRunpath,
    /// Turn `DT_RUNPATH` into `DT_RPATH`, replacing any existing `DT_RPATH`.
    RunpathToRpath,
    /// Add a `DT_NEEDED` entry before the existing ones, unless the name is already needed.
    AddNeeded(Vec<u8>),
    /// Remove every `DT_NEEDED` entry with this name, and its version requirements.
    RemoveNeeded(Vec<u8>),
    /// Rename a `DT_NEEDED` entry, and the version requirements that name it.
    ReplaceNeeded {
        /// The name to replace.
        old: Vec<u8>,
        /// The new name.
        new: Vec<u8>,
    },
    /// Set `DT_SONAME` (added at the front of `.dynamic` when absent).
    SetSoname(Vec<u8>),
    /// Set the `PT_INTERP` path.
    SetInterpreter(Vec<u8>),
    /// Give every dynamic symbol with this name the global version (`.gnu.version` index 1, as
    /// patchelf's `--clear-symbol-version`): an undefined symbol then binds to the default
    /// version of whatever defines it. Nothing moves.
    ClearSymbolVersion(Vec<u8>),
    /// Rename dynamic symbols, defined and undefined: each symbol whose current name is a first
    /// element gets the second. Symbols keep their indices (relocations and `.gnu.version` stay as
    /// they are); the new names go into the string table and the hash tables are rebuilt, all
    /// appended (see [`crate::hash`]).
    RenameDynamicSymbols(Vec<(Vec<u8>, Vec<u8>)>),
    /// Set the descriptor of the resolution-cache note ([`crate::note`]), adding the note (with a
    /// `PT_NOTE` and, when the file has section headers, a `.note.nixos.ldcache` section) when
    /// the file has none. The bytes must parse as a descriptor
    /// ([`crate::note::ResolutionCache::parse`]). Overrides the automatic removal below.
    SetResolutionCache(Vec<u8>),
    /// Remove the resolution-cache note: its bytes are zeroed, its `PT_NOTE` becomes `PT_NULL`
    /// and its section header an empty `SHT_NULL` entry.
    ///
    /// Without an explicit note edit, a plan that changes the `DT_NEEDED` list or the run path
    /// (`DT_RUNPATH`, else `DT_RPATH`) removes the note too, as patchelf 0.19.3 does: its entries
    /// would be stale.
    RemoveResolutionCache,
    /// Set `EI_OSABI`, the identification byte naming the OS ABI (`ELFOSABI_*`).
    SetOsAbi(u8),
    /// Ask for an executable stack (`true`) or not: `PF_X` of `PT_GNU_STACK`. A file without
    /// `PT_GNU_STACK` gets one (`PF_R | PF_W`, plus `PF_X` when asked): in a `PT_NULL` entry, in
    /// zeros after the program header table, or in a table grown the way a new `PT_LOAD` grows it.
    SetExecstack(bool),
    /// Set these bits in every `DT_FLAGS_1`, adding the entry at the front of `.dynamic` when
    /// absent (patchelf's `--no-default-lib` sets `DF_1_NODEFLIB` so; in the file's byte order,
    /// where patchelf 0.19.3 writes `0x8000000000000` into a big-endian 64-bit file).
    AddFlags1(u64),
    /// Add a `DT_DEBUG` entry (value 0) at the front of `.dynamic`, unless there is one.
    AddDebugTag,
}

/// Knobs for the planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Alignment for a new `PT_LOAD`; by default the largest `p_align` of the existing ones (and at
    /// least 4 KiB).
    pub page_size: Option<u64>,
    /// Spare `DT_NULL` slots to leave when the dynamic array moves, so later additions fit in place.
    pub dynamic_spare: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: None,
            dynamic_spare: 4,
        }
    }
}

/// When a write happens, relative to the switch from the old layout to the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Into bytes nothing refers to yet.
    Stage,
    /// Headers and live data: these writes switch the file to the new contents.
    Commit,
    /// Zeroing unreferenced bytes, section headers, symbol values.
    Cleanup,
}

/// The bytes of one write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    /// Literal bytes.
    Bytes(Vec<u8>),
    /// Copy `len` bytes from this offset of the original file.
    Copy(u64),
    /// Zeros.
    Zero,
}

/// One write of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// File offset.
    pub offset: u64,
    /// Number of bytes.
    pub len: u64,
    /// What to write.
    pub data: Data,
    /// When.
    pub phase: Phase,
    /// What it is, for humans and tests.
    pub what: String,
}

/// A section that moved: symbols defined in it must follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionMove {
    /// Section index.
    pub shndx: u16,
    /// Its old address.
    pub old_addr: u64,
    /// Its old size.
    pub old_size: u64,
    /// New address minus old address (wrapping).
    pub delta: u64,
    /// Whether an absolute symbol (`SHN_ABS`) at exactly the old start follows too: some targets
    /// (riscv64, s390x) define `_DYNAMIC` that way rather than relative to `.dynamic`.
    pub absolute_start: bool,
}

/// Symbol values to adjust after sections moved (done by the applier, which must read the table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolFixup {
    /// Index of the symbol table section (`.symtab` or `.dynsym`).
    pub table: usize,
    /// Where the table's entries are now (its moved copy when it moved).
    pub offset: u64,
    /// Number of entries.
    pub count: u64,
    /// The moved sections.
    pub moves: Vec<SectionMove>,
}

/// How the plan changes the file's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Nothing to do.
    Unchanged,
    /// Only bytes inside the existing structures change.
    InPlace,
    /// Data was appended to the end of the file.
    Appended {
        /// Whether an existing last segment was extended (rather than a new `PT_LOAD` added).
        extended: bool,
        /// Whether the program header table moved to the new segment.
        moved_phdrs: bool,
        /// Names (or kinds) of what moved into the appended segment.
        moved: Vec<String>,
    },
    /// The string table grew where it is, over room made by moving what followed it into the
    /// rest of its segment's last page; no segment was added or appended to.
    Grown {
        /// Names (or kinds) of what moved out of the string table's way.
        moved: Vec<String>,
    },
}

/// The complete, ordered list of changes to make to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Writes in the order they must happen.
    pub writes: Vec<Write>,
    /// File length before.
    pub old_len: u64,
    /// File length after.
    pub new_len: u64,
    /// Symbol tables to bring along after the writes.
    pub symbol_fixups: Vec<SymbolFixup>,
    /// A summary of the layout change.
    pub layout: Layout,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.symbol_fixups.is_empty() && self.new_len == self.old_len
    }
}

/// The symbol value writes for one symbol table: (offset within the table, new `st_value` bytes).
pub fn symbol_fixup_writes(
    format: Format,
    table: &[u8],
    moves: &[SectionMove],
) -> Vec<(u64, Vec<u8>)> {
    let size = format.sym_size();
    let mut out = Vec::new();
    for (i, entry) in table.chunks_exact(size).enumerate() {
        let sym = format.decode_sym(entry);
        let moved = if sym.st_shndx == elf::SHN_ABS {
            moves
                .iter()
                .find(|m| m.absolute_start && m.old_addr == sym.st_value)
        } else {
            moves.iter().find(|m| m.shndx == sym.st_shndx)
        };
        let Some(moved) = moved else {
            continue;
        };
        // Only values that pointed into (or just past) the old section move.
        if sym.st_value < moved.old_addr || sym.st_value > moved.old_addr + moved.old_size {
            continue;
        }
        let value = sym.st_value.wrapping_add(moved.delta) & format.max_addr();
        out.push((
            (i * size + format.sym_value_offset()) as u64,
            format.put_word(value),
        ));
    }
    out
}

/// `x` rounded up to a multiple of `a`, or `None` on overflow.
fn checked_align_up(x: u64, a: u64) -> Option<u64> {
    if a <= 1 {
        Some(x)
    } else {
        x.checked_add(a - 1).map(|y| y / a * a)
    }
}

/// What applying `plan` to `elf` drops of the file beyond what was asked, as warnings the caller
/// must show (never silently): today one thing, a section header table that cannot be read (an
/// entry size that is not the class's), which an edit that appends data removes (`e_shoff`,
/// `e_shnum` and `e_shstrndx` set to 0) so that no tool reads the appended bytes as section
/// headers.
pub fn dropped(elf: &Elf, plan: &Plan) -> Vec<crate::Warning> {
    let appended = matches!(plan.layout, Layout::Appended { .. });
    if !(appended && elf.section_headers_unusable()) {
        return Vec::new();
    }
    vec![crate::Warning {
        kind: crate::WarningKind::Damage,
        part: "section header table".into(),
        problem: "section header table dropped",
        detail: format!(
            "e_shoff {:#x}, e_shentsize {}: a table that cannot be read is removed by an edit that \
             appends data (e_shoff, e_shnum and e_shstrndx set to 0), so that no tool reads the \
             new bytes as section headers",
            elf.header.e_shoff, elf.header.e_shentsize
        ),
    }]
}

/// Plans `edits` on `elf`. `tables` must come from the same file ([`Tables::read`]), and `elf`
/// must hold its whole string table, as [`Elf::read`] and [`Elf::parse`] read it; a file opened
/// as an [`crate::ElfFile`] is planned with [`crate::ElfFile::plan`], which reads the table as
/// it goes.
pub fn plan(elf: &Elf, tables: &Tables, edits: &[Edit], opts: &Options) -> Result<Plan> {
    let whole = match &elf.strtab {
        None => &[][..],
        Some(strtab) => strtab.bytes().ok_or_else(|| {
            crate::error::Error::unsupported(
                "planning a file whose string table was not read whole (Elf::read_file); \
                 plan it through ElfFile::plan",
            )
        })?,
    };
    plan_with(elf, tables, &Dynstr::whole(whole), edits, opts)
}

/// [`plan`], the string table read through `dynstr`.
pub(crate) fn plan_with(
    elf: &Elf,
    tables: &Tables,
    dynstr: &Dynstr<'_>,
    edits: &[Edit],
    opts: &Options,
) -> Result<Plan> {
    run(&Input::new(elf, tables, dynstr, opts)?, edits)
}

/// The plan of `edits` on a checked input.
fn run(input: &Input<'_>, edits: &[Edit]) -> Result<Plan> {
    let elf = input.elf;
    let unchanged = Plan {
        writes: Vec::new(),
        old_len: elf.file_len,
        new_len: elf.file_len,
        symbol_fixups: Vec::new(),
        layout: Layout::Unchanged,
    };
    if edits.is_empty() {
        return Ok(unchanged);
    }
    elf.require(crate::need::Need::Image)?;
    match desired::desired(input, edits)? {
        None => Ok(unchanged),
        Some(desired) => builder::build(input, desired),
    }
}

#[cfg(test)]
mod layering {
    /// Every file of the planner but the root (this file), lowest first: its module path below
    /// `plan` and its source. Each may import only those before it, and the root.
    const ORDER: [(&str, &str); 24] = [
        ("dynstr", include_str!("dynstr.rs")),
        ("strings", include_str!("strings.rs")),
        ("tags", include_str!("tags.rs")),
        ("header", include_str!("header.rs")),
        // The accumulator the strategies write through.
        ("writes", include_str!("writes.rs")),
        // Stage 1: the input.
        ("input", include_str!("input.rs")),
        ("testing", include_str!("testing.rs")),
        ("edits", include_str!("edits.rs")),
        ("note_edit", include_str!("note_edit.rs")),
        ("contents", include_str!("contents.rs")),
        // Stage 2: the desired contents.
        ("desired", include_str!("desired.rs")),
        // Where the appended segment can go: the placement asks whether added program headers
        // fit in the table's room.
        ("appended::room", include_str!("appended/room.rs")),
        ("appended::site", include_str!("appended/site.rs")),
        // Stage 3: the placement, and the strategy it chooses.
        ("placed", include_str!("placed.rs")),
        ("symbols", include_str!("symbols.rs")),
        ("note_writes", include_str!("note_writes.rs")),
        // Stage 4: the strategies, each a function of the input and the placement.
        ("in_place", include_str!("in_place.rs")),
        ("appended::tail", include_str!("appended/tail.rs")),
        ("appended::segment", include_str!("appended/segment.rs")),
        ("appended::headers", include_str!("appended/headers.rs")),
        (
            "appended::section_table",
            include_str!("appended/section_table.rs"),
        ),
        ("appended::commit", include_str!("appended/commit.rs")),
        ("appended", include_str!("appended/mod.rs")),
        // The choice between them.
        ("builder", include_str!("builder.rs")),
    ];

    /// The root: the shared types, and the entry point.
    const ROOT: &str = include_str!("mod.rs");

    fn files() -> Vec<(&'static str, &'static str)> {
        ORDER.to_vec()
    }

    /// The position of module `name` among the files.
    fn rank(name: &str) -> Option<usize> {
        files().iter().position(|(n, _)| *n == name)
    }

    /// The `use` declarations of `src`, each as the full paths it names (braces expanded).
    fn use_paths(src: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = src;
        while let Some(at) = find_use(rest) {
            let body = &rest[at..];
            let end = body.find(';').expect("a use declaration ends");
            expand("", &body[..end], &mut out);
            rest = &body[end..];
        }
        out
    }

    /// Where the next `use` declaration's path starts (after `use ` at the start of a line).
    fn find_use(src: &str) -> Option<usize> {
        let mut offset = 0;
        for line in src.split_inclusive('\n') {
            let trimmed = line.trim_start();
            let body = trimmed
                .strip_prefix("use ")
                .or_else(|| trimmed.strip_prefix("pub(super) use "))
                .or_else(|| trimmed.strip_prefix("pub(crate) use "))
                .or_else(|| trimmed.strip_prefix("pub(in crate::plan) use "));
            if let Some(body) = body {
                return Some(offset + line.len() - body.len());
            }
            offset += line.len();
        }
        None
    }

    /// Appends the paths `tree` names, each after `prefix`.
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
        let Some(open) = tree.find('{') else {
            out.push(format!("{prefix}{tree}"));
            return;
        };
        let head = format!("{prefix}{}", &tree[..open]);
        let inner = &tree[open + 1..tree.rfind('}').expect("braces match")];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&head, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if start < inner.len() {
            expand(&head, &inner[start..], out);
        }
    }

    /// The listed file that `path`, imported by module `from`, comes from: the longest listed
    /// module the path starts with (`None` for the root and for anything outside the planner).
    fn target(from: &str, path: &str) -> Option<&'static str> {
        let mut here: Vec<&str> = from.split("::").filter(|s| !s.is_empty()).collect();
        let mut segments: Vec<&str> = path.split("::").collect();
        match segments[0] {
            "crate" if segments.get(1) == Some(&"plan") => {
                here.clear();
                segments.drain(..2);
            }
            "super" => {
                while segments.first() == Some(&"super") {
                    segments.remove(0);
                    here.pop();
                }
            }
            "self" => {
                segments.remove(0);
            }
            // A child module (`use room::Block;` in `appended/mod.rs`), or another crate.
            first if rank(&child(&here, first)).is_some() => {}
            _ => return None,
        }
        let full: Vec<&str> = here.into_iter().chain(segments).collect();
        (1..=full.len())
            .rev()
            .find_map(|n| {
                files()
                    .into_iter()
                    .find(|(name, _)| *name == full[..n].join("::"))
            })
            .map(|(name, _)| name)
            .filter(|name| *name != from)
    }

    fn child(here: &[&str], name: &str) -> String {
        here.iter()
            .chain([&name])
            .copied()
            .collect::<Vec<_>>()
            .join("::")
    }

    /// The files each listed file imports (its unit tests, a module of their own, aside).
    fn imports(name: &str, src: &str) -> Vec<&'static str> {
        let src = src.split("\n#[cfg(test)]\nmod ").next().unwrap_or(src);
        use_paths(src)
            .iter()
            .filter_map(|p| target(name, p))
            .collect()
    }

    /// The types declared at the top level of `src`.
    fn declared(src: &str) -> Vec<String> {
        src.lines()
            .filter_map(|l| {
                let l = l
                    .strip_prefix("pub(super) ")
                    .or_else(|| l.strip_prefix("pub(crate) "))
                    .or_else(|| l.strip_prefix("pub(in crate::plan) "))
                    .or_else(|| l.strip_prefix("pub "))
                    .unwrap_or(l);
                let rest = l
                    .strip_prefix("struct ")
                    .or_else(|| l.strip_prefix("enum "))?;
                Some(type_name(rest))
            })
            .collect()
    }

    /// The types given inherent methods (`impl T`, not `impl Trait for T`) in `src`.
    fn inherent_impls(src: &str) -> Vec<String> {
        src.lines()
            .filter(|l| l.starts_with("impl") && !l.contains(" for "))
            .filter_map(|l| {
                let l = l.strip_prefix("impl")?;
                // Skip the impl's own generics.
                let l = match l.strip_prefix('<') {
                    Some(g) => &g[g.find('>')? + 1..],
                    None => l,
                };
                Some(type_name(l.trim_start()))
            })
            .collect()
    }

    fn type_name(s: &str) -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    }

    #[test]
    fn every_file_is_listed() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/plan");
        let mut on_disk = Vec::new();
        for (sub, prefix) in [("", ""), ("/appended", "appended::")] {
            for entry in std::fs::read_dir(format!("{dir}{sub}")).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                if let Some(stem) = name.strip_suffix(".rs") {
                    on_disk.push(match (prefix, stem) {
                        ("", "mod") => String::new(),
                        ("appended::", "mod") => "appended".to_string(),
                        _ => format!("{prefix}{stem}"),
                    });
                }
            }
        }
        on_disk.retain(|n| !n.is_empty());
        on_disk.sort();
        let mut listed: Vec<String> = files()
            .iter()
            .map(|(n, _)| n.to_string())
            .filter(|n| !n.is_empty())
            .collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    #[test]
    fn each_file_imports_only_those_below_it() {
        for (i, (name, src)) in files().iter().enumerate() {
            for imported in imports(name, src) {
                let at = rank(imported).expect("a listed file");
                assert!(at < i, "{name} imports {imported}, which is above it");
            }
        }
    }

    #[test]
    fn methods_stay_with_their_type() {
        let declared_in = |ty: &str| {
            files()
                .into_iter()
                .chain([("", ROOT)])
                .find(|(_, src)| declared(src).iter().any(|d| d == ty))
                .map(|(name, _)| name)
        };
        let mut files_of: Vec<(String, Vec<&str>)> = Vec::new();
        for (name, src) in files() {
            for ty in inherent_impls(src) {
                match files_of.iter_mut().find(|(t, _)| *t == ty) {
                    Some((_, v)) if !v.contains(&name) => v.push(name),
                    Some(_) => {}
                    None => files_of.push((ty.clone(), vec![name])),
                }
                let Some(home) = declared_in(&ty) else {
                    continue;
                };
                // Methods away from their type, in a file that imports the type's file: the
                // type's file uses them with no `use` line to show it, a tie both ways.
                let ties = home != name && (home.is_empty() || imports(name, src).contains(&home));
                assert!(
                    !ties,
                    "{name} holds methods of {ty}, declared in {home}, which it imports"
                );
            }
        }
        for (ty, in_files) in files_of {
            assert!(in_files.len() <= 2, "{ty} has methods in {in_files:?}");
        }
    }

    #[test]
    fn the_checks_see_what_they_check() {
        // The parsing above, on the shapes the sources use.
        let mut paths = Vec::new();
        expand("", "super::contents::{a, b::{c, D}}", &mut paths);
        assert_eq!(
            paths,
            [
                "super::contents::a",
                "super::contents::b::c",
                "super::contents::b::D"
            ]
        );
        assert_eq!(
            target("appended::site", "super::room::Room"),
            Some("appended::room")
        );
        assert_eq!(target("appended", "super::input::Input"), Some("input"));
        assert_eq!(
            target("appended", "room::described"),
            Some("appended::room")
        );
        assert_eq!(
            target("placed", "super::appended::room::x"),
            Some("appended::room")
        );
        assert_eq!(target("edits", "crate::plan::input::Input"), Some("input"));
        assert_eq!(target("edits", "super::Edit"), None);
        assert_eq!(target("edits", "crate::read::Elf"), None);
        assert_eq!(
            inherent_impls("impl<'a> Input<'a> {\nimpl Default for Options {"),
            ["Input"]
        );
        assert_eq!(declared("pub(super) struct Writes<'e> {"), ["Writes"]);
        assert!(imports("builder", include_str!("builder.rs")).contains(&"in_place"));
    }
}
