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
    /// The planner's modules, lowest first, with their sources: each may import only those
    /// before it (the root, this file, holds the shared types and the entry point).
    const ORDER: [(&str, &str); 13] = [
        ("dynstr", include_str!("dynstr.rs")),
        ("strings", include_str!("strings.rs")),
        ("tags", include_str!("tags.rs")),
        ("header", include_str!("header.rs")),
        ("input", include_str!("input.rs")),
        ("edits", include_str!("edits.rs")),
        ("note_edit", include_str!("note_edit.rs")),
        ("contents", include_str!("contents.rs")),
        ("builder", include_str!("builder.rs")),
        ("note_writes", include_str!("note_writes.rs")),
        ("symbols", include_str!("symbols.rs")),
        ("in_place", include_str!("in_place.rs")),
        (
            "appended",
            concat!(
                include_str!("appended/mod.rs"),
                include_str!("appended/headers.rs"),
                include_str!("appended/room.rs"),
                include_str!("appended/site.rs")
            ),
        ),
    ];

    #[test]
    fn each_module_imports_only_those_below_it() {
        for (i, (name, src)) in ORDER.iter().enumerate() {
            for (above, _) in &ORDER[i + 1..] {
                for path in [format!("super::{above}"), format!("crate::plan::{above}")] {
                    let imports = src.lines().any(|l| {
                        l.trim_start().starts_with("use ")
                            && (l.contains(&format!("{path}::")) || l.contains(&format!("{path};")))
                    });
                    assert!(!imports, "{name} imports {above}, which is above it");
                }
            }
        }
    }
}
