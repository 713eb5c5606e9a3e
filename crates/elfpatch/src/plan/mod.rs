//! Planning: from a parsed file and the requested edits to the exact bytes that change.
//!
//! This module does no I/O. [`plan`] returns a [`Plan`]: an ordered list of writes in three
//! phases. *Stage* writes go where nothing points yet (past the end of the file, or unreferenced
//! bytes); the *commit* writes switch the headers over to them (one write of the ELF header and
//! program header table whenever the layout changes); *cleanup* writes zero what is no longer
//! referenced and bring the section headers and symbols along. Interrupted after any write, the file
//! is either the old file (possibly with unreferenced bytes past its end) or the new one.
//!
//! How the new bytes are placed:
//! - strings go over unreferenced bytes of the string table when they fit (see [`strings`]),
//!   otherwise the table grows into a copy;
//! - the dynamic array is rewritten in place when its entries fit, otherwise it moves;
//! - moved things go to the end of the file and of the address space: into the segment a previous
//!   edit appended when there is one (it is extended), else into a new `PT_LOAD`. A new `PT_LOAD`
//!   needs a program header slot: a `PT_NULL` entry, free bytes after the table, or room made by
//!   moving the non-code sections that follow the table (`.interp`, notes, hash tables, `.dynsym`,
//!   `.dynstr`, version tables) into the new segment; only when none of that works does the table
//!   itself move.

mod build;
mod layout;
mod preflight;
pub mod strings;
mod tags;

use object::elf;

use crate::error::{Error, Result};
use crate::format::{Dyn, Format};
use crate::read::{is_string_tag, Elf};
use crate::refs::{Tables, VerneedEntry};
use build::Builder;

/// `DT_MIPS_RLD_MAP_REL`: holds an address relative to its own slot in `.dynamic`.
pub const DT_MIPS_RLD_MAP_REL: u32 = 0x7000_0035;

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

    /// Applies the plan to a file held in memory (the same steps the file applier takes).
    pub fn apply_to_vec(&self, bytes: &mut Vec<u8>, format: Format) -> Result<()> {
        if bytes.len() as u64 != self.old_len {
            return Err(Error::Changed {
                path: Default::default(),
                what: format!(
                    "length is {} bytes, the plan was made for {}",
                    bytes.len(),
                    self.old_len
                ),
            });
        }
        let original = bytes.clone();
        if self.new_len > self.old_len {
            bytes.resize(self.new_len as usize, 0);
        }
        for w in &self.writes {
            let (o, l) = (w.offset as usize, w.len as usize);
            match &w.data {
                Data::Bytes(b) => bytes[o..o + l].copy_from_slice(b),
                Data::Copy(from) => {
                    bytes[o..o + l].copy_from_slice(&original[*from as usize..*from as usize + l])
                }
                Data::Zero => bytes[o..o + l].fill(0),
            }
        }
        for fx in &self.symbol_fixups {
            let size = format.sym_size() as u64;
            let range = fx
                .count
                .checked_mul(size)
                .and_then(|n| fx.offset.checked_add(n))
                .filter(|&end| end <= bytes.len() as u64)
                .map(|end| fx.offset as usize..end as usize)
                .ok_or_else(|| {
                    Error::malformed(fx.offset, "symbol table to fix up lies outside the file")
                })?;
            let table = bytes[range].to_vec();
            for (off, val) in symbol_fixup_writes(format, &table, &fx.moves) {
                let at = (fx.offset + off) as usize;
                bytes[at..at + val.len()].copy_from_slice(&val);
            }
        }
        Ok(())
    }
}

/// The symbol value writes for one symbol table: (offset within the table, new `st_value` bytes).
pub fn symbol_fixup_writes(f: Format, table: &[u8], moves: &[SectionMove]) -> Vec<(u64, Vec<u8>)> {
    let size = f.sym_size();
    let mut out = Vec::new();
    for (i, chunk) in table.chunks_exact(size).enumerate() {
        let s = f.decode_sym(chunk);
        let m = if s.st_shndx == elf::SHN_ABS {
            moves
                .iter()
                .find(|m| m.absolute_start && m.old_addr == s.st_value)
        } else {
            moves.iter().find(|m| m.shndx == s.st_shndx)
        };
        let Some(m) = m else {
            continue;
        };
        // Only values that pointed into (or just past) the old section move.
        if s.st_value < m.old_addr || s.st_value > m.old_addr + m.old_size {
            continue;
        }
        let v = s.st_value.wrapping_add(m.delta) & f.max_addr();
        out.push(((i * size + f.sym_value_offset()) as u64, f.put_word(v)));
    }
    out
}

/// A string-valued or raw dynamic value while edits are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Val {
    Raw(u64),
    Old(u64),
    New(Vec<u8>),
}

#[derive(Clone, Debug)]
struct Entry {
    tag: u64,
    val: Val,
    orig: Option<usize>,
}

/// Changes to the version need records.
#[derive(Clone, Debug, Default)]
struct VerneedEdits {
    /// Entry index → new file name.
    retarget: Vec<(usize, Vec<u8>)>,
    /// Entry indices to drop.
    remove: Vec<usize>,
}

fn check_name(s: &[u8], what: &str) -> Result<()> {
    if s.contains(&0) {
        return Err(Error::invalid(format!("{what} contains a NUL byte")));
    }
    Ok(())
}

/// `x` rounded up to a multiple of `a`, or `None` on overflow.
fn checked_align_up(x: u64, a: u64) -> Option<u64> {
    if a <= 1 {
        Some(x)
    } else {
        x.checked_add(a - 1).map(|y| y / a * a)
    }
}

/// Plans `edits` on `elf`. `tables` must come from the same file ([`Tables::read`]).
pub fn plan(elf: &Elf, tables: &Tables, edits: &[Edit], opts: &Options) -> Result<Plan> {
    Planner::new(elf, tables, opts)?.run(edits)
}

/// The input of one plan: the parsed file, the tables that refer to its strings, the options.
struct Planner<'a> {
    elf: &'a Elf,
    tables: &'a Tables,
    opts: &'a Options,
    format: Format,
}

impl<'a> Planner<'a> {
    fn new(elf: &'a Elf, tables: &'a Tables, opts: &'a Options) -> Result<Self> {
        let planner = Planner {
            elf,
            tables,
            opts,
            format: elf.format,
        };
        planner.preflight()?;
        Ok(planner)
    }

    fn run(&self, edits: &[Edit]) -> Result<Plan> {
        let e = self.elf;
        let unchanged = Plan {
            writes: Vec::new(),
            old_len: e.file_len,
            new_len: e.file_len,
            symbol_fixups: Vec::new(),
            layout: Layout::Unchanged,
        };
        if edits.is_empty() {
            return Ok(unchanged);
        }
        if e.e_type() != elf::ET_EXEC && e.e_type() != elf::ET_DYN {
            return Err(Error::unsupported(format!(
                "e_type {} is not an executable or shared object",
                e.e_type()
            )));
        }

        // 1. What the dynamic array, version records and interpreter should say.
        let (entries, vn, interp) = self.apply_edits(edits)?;
        let dyn_changed = self.dynamic_changed(&entries);
        let interp_changed = interp
            .as_ref()
            .is_some_and(|p| Some(p.as_slice()) != e.interpreter());
        if !dyn_changed && vn.retarget.is_empty() && vn.remove.is_empty() && !interp_changed {
            return Ok(unchanged);
        }
        if dyn_changed || !vn.retarget.is_empty() || !vn.remove.is_empty() {
            self.check_dynamic_editable()?;
        }
        Builder::new(
            self,
            entries,
            vn,
            if interp_changed { interp } else { None },
        )
        .build()
    }

    fn string(&self, off: u64) -> &'a [u8] {
        self.elf
            .strtab
            .as_ref()
            .and_then(|s| s.get(off))
            .unwrap_or(b"")
    }

    fn apply_edits(&self, edits: &[Edit]) -> Result<(Vec<Entry>, VerneedEdits, Option<Vec<u8>>)> {
        let e = self.elf;
        let mut entries: Vec<Entry> = match &e.dynamic {
            Some(d) => d
                .entries()
                .iter()
                .enumerate()
                .map(|(i, x)| Entry {
                    tag: x.tag,
                    val: if is_string_tag(x.tag) {
                        Val::Old(x.val)
                    } else {
                        Val::Raw(x.val)
                    },
                    orig: Some(i),
                })
                .collect(),
            None => Vec::new(),
        };
        let mut vn = VerneedEdits::default();
        let mut interp: Option<Vec<u8>> = None;
        let verneed: &[VerneedEntry] = self
            .tables
            .verneed
            .as_ref()
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[]);

        let value_of = |v: &Val| -> Vec<u8> {
            match v {
                Val::Old(o) => self.string(*o).to_vec(),
                Val::New(s) => s.clone(),
                Val::Raw(_) => Vec::new(),
            }
        };
        let set = |entries: &mut Vec<Entry>, tag: u32, s: &[u8]| {
            let tag = u64::from(tag);
            let mut found = false;
            for x in entries.iter_mut().filter(|x| x.tag == tag) {
                found = true;
                if value_of(&x.val) != s {
                    x.val = Val::New(s.to_vec());
                }
            }
            if !found {
                entries.insert(
                    0,
                    Entry {
                        tag,
                        val: Val::New(s.to_vec()),
                        orig: None,
                    },
                );
            }
        };

        for edit in edits {
            if !matches!(edit, Edit::SetInterpreter(_)) && e.dynamic.is_none() {
                return Err(Error::unsupported(
                    "the file has no dynamic section (PT_DYNAMIC)",
                ));
            }
            match edit {
                Edit::SetRunpath(s) => {
                    check_name(s, "RUNPATH")?;
                    set(&mut entries, elf::DT_RUNPATH, s);
                }
                Edit::SetRpath(s) => {
                    check_name(s, "RPATH")?;
                    set(&mut entries, elf::DT_RPATH, s);
                }
                Edit::RemoveRunpath => entries.retain(|x| x.tag != u64::from(elf::DT_RUNPATH)),
                Edit::RemoveRpath => entries.retain(|x| x.tag != u64::from(elf::DT_RPATH)),
                Edit::RpathToRunpath => {
                    if entries.iter().any(|x| x.tag == u64::from(elf::DT_RUNPATH)) {
                        entries.retain(|x| x.tag != u64::from(elf::DT_RPATH));
                    } else {
                        for x in entries
                            .iter_mut()
                            .filter(|x| x.tag == u64::from(elf::DT_RPATH))
                        {
                            x.tag = u64::from(elf::DT_RUNPATH);
                        }
                    }
                }
                Edit::RunpathToRpath => {
                    if entries.iter().any(|x| x.tag == u64::from(elf::DT_RUNPATH)) {
                        entries.retain(|x| x.tag != u64::from(elf::DT_RPATH));
                        for x in entries
                            .iter_mut()
                            .filter(|x| x.tag == u64::from(elf::DT_RUNPATH))
                        {
                            x.tag = u64::from(elf::DT_RPATH);
                        }
                    }
                }
                Edit::AddNeeded(s) => {
                    check_name(s, "NEEDED name")?;
                    if s.is_empty() {
                        return Err(Error::invalid("empty NEEDED name"));
                    }
                    let present = entries
                        .iter()
                        .any(|x| x.tag == u64::from(elf::DT_NEEDED) && value_of(&x.val) == *s);
                    if !present {
                        // After the NEEDED entries this plan added, before everything else.
                        let at = entries
                            .iter()
                            .rposition(|x| x.orig.is_none() && x.tag == u64::from(elf::DT_NEEDED))
                            .map_or(0, |i| i + 1);
                        entries.insert(
                            at,
                            Entry {
                                tag: u64::from(elf::DT_NEEDED),
                                val: Val::New(s.clone()),
                                orig: None,
                            },
                        );
                    }
                }
                Edit::RemoveNeeded(s) => {
                    entries.retain(|x| {
                        !(x.tag == u64::from(elf::DT_NEEDED) && value_of(&x.val) == *s)
                    });
                    for (i, n) in verneed.iter().enumerate() {
                        let current = vn
                            .retarget
                            .iter()
                            .rev()
                            .find(|(j, _)| *j == i)
                            .map(|(_, v)| v.clone())
                            .unwrap_or_else(|| self.string(u64::from(n.file)).to_vec());
                        if current == *s && !vn.remove.contains(&i) {
                            vn.remove.push(i);
                        }
                    }
                }
                Edit::ReplaceNeeded { old, new } => {
                    check_name(new, "NEEDED name")?;
                    if new.is_empty() {
                        return Err(Error::invalid("empty NEEDED name"));
                    }
                    for x in entries
                        .iter_mut()
                        .filter(|x| x.tag == u64::from(elf::DT_NEEDED))
                    {
                        if value_of(&x.val) == *old && old != new {
                            x.val = if x.orig.is_some_and(|i| self.orig_string(i) == *new) {
                                Val::Old(self.orig_val(x.orig.unwrap_or(0)))
                            } else {
                                Val::New(new.clone())
                            };
                        }
                    }
                    for (i, n) in verneed.iter().enumerate() {
                        if vn.remove.contains(&i) {
                            continue;
                        }
                        let current = vn
                            .retarget
                            .iter()
                            .rev()
                            .find(|(j, _)| *j == i)
                            .map(|(_, v)| v.clone())
                            .unwrap_or_else(|| self.string(u64::from(n.file)).to_vec());
                        if current == *old && old != new {
                            vn.retarget.retain(|(j, _)| *j != i);
                            if self.string(u64::from(n.file)) != new.as_slice() {
                                vn.retarget.push((i, new.clone()));
                            }
                        }
                    }
                }
                Edit::SetSoname(s) => {
                    check_name(s, "SONAME")?;
                    set(&mut entries, elf::DT_SONAME, s);
                }
                Edit::SetInterpreter(s) => {
                    check_name(s, "interpreter")?;
                    if e.interp.is_none() {
                        return Err(Error::unsupported("the file has no PT_INTERP to set"));
                    }
                    if s.is_empty() {
                        return Err(Error::invalid("empty interpreter path"));
                    }
                    interp = Some(s.clone());
                }
            }
        }
        // A value set back to what it was is not a change.
        for x in entries.iter_mut() {
            if let (Val::New(s), Some(i)) = (&x.val, x.orig) {
                if self.orig_string(i) == *s && is_string_tag(self.orig_tag(i)) {
                    x.val = Val::Old(self.orig_val(i));
                }
            }
        }
        // A run path or SONAME removed and set again to the same value in one plan is the original
        // entry, where it was (their position means nothing; NEEDED order does, so not those).
        let d_len = e.dynamic.as_ref().map_or(0, |d| d.len);
        for i in 0..d_len {
            let tag = self.orig_tag(i);
            let movable = [elf::DT_RUNPATH, elf::DT_RPATH, elf::DT_SONAME]
                .iter()
                .any(|&t| u64::from(t) == tag);
            if !movable || entries.iter().any(|x| x.orig == Some(i)) {
                continue;
            }
            let same = |x: &Entry| {
                x.orig.is_none()
                    && x.tag == tag
                    && matches!(&x.val, Val::New(v) if *v == self.orig_string(i))
            };
            if let Some(j) = entries.iter().position(same) {
                entries.remove(j);
                let at = entries
                    .iter()
                    .position(|x| x.orig.is_some_and(|o| o > i))
                    .unwrap_or(entries.len());
                entries.insert(
                    at,
                    Entry {
                        tag,
                        val: Val::Old(self.orig_val(i)),
                        orig: Some(i),
                    },
                );
            }
        }
        vn.retarget.retain(|(i, _)| !vn.remove.contains(i));
        Ok((entries, vn, interp))
    }

    fn orig(&self, i: usize) -> Dyn {
        self.elf
            .dynamic
            .as_ref()
            .map(|d| d.entries()[i])
            .unwrap_or(Dyn { tag: 0, val: 0 })
    }
    fn orig_tag(&self, i: usize) -> u64 {
        self.orig(i).tag
    }
    fn orig_val(&self, i: usize) -> u64 {
        self.orig(i).val
    }
    fn orig_string(&self, i: usize) -> Vec<u8> {
        if is_string_tag(self.orig_tag(i)) {
            self.string(self.orig_val(i)).to_vec()
        } else {
            Vec::new()
        }
    }

    fn dynamic_changed(&self, entries: &[Entry]) -> bool {
        let Some(d) = &self.elf.dynamic else {
            return false;
        };
        entries.len() != d.len
            || entries.iter().enumerate().any(|(i, x)| {
                x.orig != Some(i)
                    || x.tag != d.entries()[i].tag
                    || !matches!(x.val, Val::Raw(v) | Val::Old(v) if v == d.entries()[i].val)
            })
    }
}
