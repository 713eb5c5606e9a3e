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

pub mod strings;

use object::elf;

use crate::error::{Error, Result};
use crate::format::{Dyn, Format, Phdr, Shdr};
use crate::read::{is_string_tag, Elf};
use crate::refs::{Region, Tables, VerneedEntry};
use strings::{Placement, Request};

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
            let table = bytes[fx.offset as usize..(fx.offset + fx.count * size) as usize].to_vec();
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

fn align_up(x: u64, a: u64) -> u64 {
    if a <= 1 {
        x
    } else {
        x.div_ceil(a) * a
    }
}

/// Plans `edits` on `elf`. `tables` must come from the same file ([`Tables::read`]).
pub fn plan(elf: &Elf, tables: &Tables, edits: &[Edit], opts: &Options) -> Result<Plan> {
    Planner::new(elf, tables, opts)?.run(edits)
}

struct Planner<'a> {
    elf: &'a Elf,
    t: &'a Tables,
    opts: &'a Options,
    f: Format,
}

/// A thing placed in the appended area.
#[derive(Clone, Debug)]
struct Item {
    kind: ItemKind,
    size: u64,
    align: u64,
    /// Keep `new_vaddr ≡ old_vaddr (mod align)` (for moved blocks with internal alignment).
    congruent_to: Option<u64>,
    offset: u64,
    vaddr: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemKind {
    PhdrTable,
    Block,
    StrTab,
    Interp,
    Dynamic,
}

/// Sections (or, without section headers, known regions) that follow the program header table.
#[derive(Clone, Debug)]
struct Occupant {
    start: u64,
    end: u64,
    movable: bool,
    align: u64,
}

/// A contiguous range right after the program header table moved to make room for it.
#[derive(Clone, Copy, Debug)]
struct Block {
    start: u64,
    end: u64,
    align: u64,
}

#[derive(Clone, Copy, Debug)]
enum Room {
    /// Reuse the `PT_NULL` entry with this index.
    NullSlot(usize),
    /// The bytes after the table are free.
    Slack,
    /// Move this block out of the way.
    Block(Block),
    /// Move the table itself.
    MoveTable,
}

impl<'a> Planner<'a> {
    fn new(elf: &'a Elf, t: &'a Tables, opts: &'a Options) -> Result<Self> {
        // Appending assumes the loader's view is sane: loadable segments sorted and disjoint.
        let loads: Vec<&Phdr> = elf.loads().collect();
        for (i, a) in loads.iter().enumerate() {
            for b in &loads[i + 1..] {
                if b.p_vaddr < a.p_vaddr {
                    return Err(Error::refused(format!(
                        "PT_LOAD at {:#x} follows one at {:#x}: segments are not sorted by address",
                        b.p_vaddr, a.p_vaddr
                    )));
                }
                if a.p_memsz > 0
                    && b.p_memsz > 0
                    && a.p_vaddr < b.vaddr_end()
                    && b.p_vaddr < a.vaddr_end()
                {
                    return Err(Error::refused(format!(
                        "PT_LOADs at {:#x} and {:#x} overlap in memory",
                        a.p_vaddr, b.p_vaddr
                    )));
                }
            }
        }
        Ok(Planner {
            elf,
            t,
            opts,
            f: elf.format,
        })
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
        )?
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
            .t
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

    fn check_dynamic_editable(&self) -> Result<()> {
        let e = self.elf;
        let d = e
            .dynamic
            .as_ref()
            .ok_or_else(|| Error::unsupported("the file has no dynamic section"))?;
        let size = (d.capacity() * self.f.dyn_size()) as u64;
        if e.vaddr_to_offset(d.vaddr, size) != Some(d.offset) {
            return Err(Error::refused(format!(
                "PT_DYNAMIC (offset {:#x}, address {:#x}) is not mapped by a PT_LOAD at the same place",
                d.offset, d.vaddr
            )));
        }
        if e.strtab.is_none() {
            return Err(Error::unsupported(
                "the dynamic section has no string table (DT_STRTAB)",
            ));
        }
        Ok(())
    }
}

/// Builds the plan once the desired contents are known.
struct Builder<'p, 'a> {
    p: &'p Planner<'a>,
    entries: Vec<Entry>,
    vn: VerneedEdits,
    interp: Option<Vec<u8>>,
    writes: Vec<Write>,
}

impl<'p, 'a> Builder<'p, 'a> {
    fn new(
        p: &'p Planner<'a>,
        entries: Vec<Entry>,
        vn: VerneedEdits,
        interp: Option<Vec<u8>>,
    ) -> Result<Self> {
        Ok(Builder {
            p,
            entries,
            vn,
            interp,
            writes: Vec::new(),
        })
    }

    fn push(&mut self, offset: u64, data: Data, len: u64, phase: Phase, what: impl Into<String>) {
        if len == 0 {
            return;
        }
        self.writes.push(Write {
            offset,
            len,
            data,
            phase,
            what: what.into(),
        });
    }

    fn build(mut self) -> Result<Plan> {
        let e = self.p.elf;
        let f = self.p.f;
        let t = self.p.t;

        // 2. Strings.
        let verneed: Vec<VerneedEntry> = t
            .verneed
            .as_ref()
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let mut requests: Vec<Request> = Vec::new();
        let mut request_of = |bytes: &[u8], replaces: Option<u64>| -> usize {
            if let Some(i) = requests.iter().position(|r| r.bytes == bytes) {
                return i;
            }
            requests.push(Request {
                bytes: bytes.to_vec(),
                replaces,
            });
            requests.len() - 1
        };
        let entry_req: Vec<Option<usize>> = self
            .entries
            .iter()
            .map(|x| match &x.val {
                Val::New(s) => {
                    let replaces = x
                        .orig
                        .filter(|&i| is_string_tag(self.p.orig_tag(i)))
                        .map(|i| self.p.orig_val(i));
                    Some(request_of(s, replaces))
                }
                _ => None,
            })
            .collect();
        let vn_req: Vec<(usize, usize)> = self
            .vn
            .retarget
            .iter()
            .map(|(i, s)| (*i, request_of(s, Some(u64::from(verneed[*i].file)))))
            .collect();

        let empty = crate::read::StrTab {
            offset: 0,
            vaddr: 0,
            bytes: Vec::new(),
            section: None,
        };
        let st = e.strtab.as_ref().unwrap_or(&empty);
        let orig_dyn_refs = e.dynamic.iter().flat_map(|d| {
            d.entries()
                .iter()
                .filter(|x| is_string_tag(x.tag))
                .map(|x| x.val)
        });
        let before: Vec<u64> = orig_dyn_refs.chain(t.string_refs()).collect();
        let mut after: Vec<u64> = self
            .entries
            .iter()
            .filter_map(|x| {
                if let Val::Old(o) = x.val {
                    Some(o)
                } else {
                    None
                }
            })
            .collect();
        after.extend(
            t.dynsym
                .iter()
                .flat_map(|s| s.names.iter().map(|&n| u64::from(n))),
        );
        for (i, n) in verneed.iter().enumerate() {
            if self.vn.remove.contains(&i) {
                continue;
            }
            if !self.vn.retarget.iter().any(|(j, _)| *j == i) {
                after.push(u64::from(n.file));
            }
            after.extend(n.aux.iter().map(|a| u64::from(a.name)));
        }
        after.extend(
            t.verdef
                .iter()
                .flat_map(|(_, v)| v.iter().map(|&n| u64::from(n))),
        );
        let alloc = strings::allocate(&st.bytes, &before, &after, &requests, t.exact);
        let strtab_grows = alloc.grows();
        let new_strsz = st.bytes.len() as u64 + alloc.appended.len() as u64;

        // 3. Version records.
        let vn_region = t.verneed.as_ref().map(|(r, _)| *r);
        let verneed_bytes = if self.vn.remove.is_empty() {
            None
        } else {
            Some(self.serialize_verneed(&verneed, &vn_req, &alloc.placements))
        };
        let versym_new = self.versym_after_removal(&verneed);
        let kept_verneed = verneed.len() - self.vn.remove.len();
        if !self.vn.remove.is_empty() {
            if kept_verneed == 0 {
                self.entries.retain(|x| {
                    x.tag != u64::from(elf::DT_VERNEED) && x.tag != u64::from(elf::DT_VERNEEDNUM)
                });
            } else {
                for x in self
                    .entries
                    .iter_mut()
                    .filter(|x| x.tag == u64::from(elf::DT_VERNEEDNUM))
                {
                    x.val = Val::Raw(kept_verneed as u64);
                }
            }
        }

        // 4. Does the dynamic array fit where it is? Does the interpreter?
        let d = e.dynamic.as_ref();
        let capacity = d.map(|d| d.capacity()).unwrap_or(0);
        let dyn_fits = self.entries.len() < capacity;
        let interp_fits = match (&self.interp, &e.interp) {
            (Some(new), Some(old)) => (new.len() as u64) < old.capacity,
            _ => true,
        };
        let need_append =
            strtab_grows || (d.is_some() && !dyn_fits && self.dyn_will_change()) || !interp_fits;

        // 5. Layout of the appended area, if any.
        let layout = if need_append {
            Some(self.p.choose_layout()?)
        } else {
            None
        };
        let mut move_dynamic = d.is_some() && !dyn_fits && self.dyn_will_change();
        let block = match &layout {
            Some((Mode::New(Room::Block(b)), _)) => Some(*b),
            _ => None,
        };
        if let Some(b) = block {
            if self
                .p
                .dynamic_refs_in(b.start, b.start + self.p.phdr_growth(&layout))
            {
                move_dynamic = true;
            }
        }
        // The grown table may live in the moved block: it then goes separately.
        let mut items: Vec<Item> = Vec::new();
        let mode = layout.as_ref().map(|(m, _)| *m);
        let new_phnum = self.p.new_phnum(mode);
        if matches!(mode, Some(Mode::New(Room::MoveTable))) {
            items.push(Item::new(
                ItemKind::PhdrTable,
                (new_phnum * f.phdr_size()) as u64,
                f.word_size(),
            ));
        }
        if let Some(b) = block {
            let mut it = Item::new(ItemKind::Block, b.end - b.start, b.align);
            it.congruent_to = e.offset_to_vaddr(b.start, 1);
            items.push(it);
        }
        if strtab_grows {
            items.push(Item::new(ItemKind::StrTab, new_strsz, 1));
        }
        if !interp_fits {
            let n = self
                .interp
                .as_ref()
                .map(|s| s.len() as u64 + 1)
                .unwrap_or(0);
            items.push(Item::new(ItemKind::Interp, n, 1));
        }
        // Never smaller than before: a `_DYNAMIC` symbol's size (gold sets it) must still fit.
        let new_capacity = (self.entries.len() + 1 + self.p.opts.dynamic_spare).max(capacity);
        if move_dynamic {
            items.push(Item::new(
                ItemKind::Dynamic,
                (new_capacity * f.dyn_size()) as u64,
                f.word_size(),
            ));
        }
        let placed = match &layout {
            Some((_, base)) => Some(self.p.place(*base, &mut items)?),
            None => None,
        };
        let item = |k: ItemKind| items.iter().find(|i| i.kind == k).cloned();

        // Address/offset translation for things that moved with the block.
        let block_delta = block.zip(item(ItemKind::Block)).map(|(b, it)| {
            let old_vaddr = e.offset_to_vaddr(b.start, 1).unwrap_or(0);
            (
                b,
                it.offset.wrapping_sub(b.start),
                it.vaddr.wrapping_sub(old_vaddr),
            )
        });
        let in_block = |off: u64| block_delta.filter(|(b, _, _)| off >= b.start && off < b.end);
        let translate = |off: u64| {
            in_block(off)
                .map(|(_, d, _)| off.wrapping_add(d))
                .unwrap_or(off)
        };
        let relocate_vaddr = |v: u64| -> u64 {
            match block_delta {
                Some((b, _, dv)) => {
                    let lo = e.offset_to_vaddr(b.start, 1).unwrap_or(0);
                    if v >= lo && v < lo + (b.end - b.start) {
                        v.wrapping_add(dv)
                    } else {
                        v
                    }
                }
                None => v,
            }
        };

        // 6. The string table's final location.
        let (str_off, str_vaddr) = match item(ItemKind::StrTab) {
            Some(it) => (it.offset, it.vaddr),
            None => (translate(st.offset), relocate_vaddr(st.vaddr)),
        };

        // 7. Final dynamic entries.
        let mut final_dyn: Vec<Dyn> = Vec::with_capacity(self.entries.len());
        for (i, x) in self.entries.iter().enumerate() {
            let val = match &x.val {
                Val::Raw(v) => *v,
                Val::Old(o) => *o,
                Val::New(_) => {
                    alloc.placements[entry_req[i].expect("new value has a request")].offset()
                }
            };
            final_dyn.push(Dyn { tag: x.tag, val });
        }
        for x in final_dyn.iter_mut() {
            let tag = x.tag as u32;
            if tag == elf::DT_STRTAB {
                x.val = str_vaddr;
            } else if tag == elf::DT_STRSZ {
                x.val = new_strsz;
            } else if is_movable_pointer_tag(x.tag) {
                x.val = relocate_vaddr(x.val);
            }
        }
        let (_dyn_off, dyn_vaddr, dyn_cap) = match (item(ItemKind::Dynamic), d) {
            (Some(it), _) => (it.offset, it.vaddr, new_capacity),
            (None, Some(d)) => (d.offset, d.vaddr, d.capacity()),
            (None, None) => (0, 0, 0),
        };
        // DT_MIPS_RLD_MAP_REL is relative to its own slot: keep the target fixed as the slot moves.
        if let Some(d) = d {
            for (i, x) in self.entries.iter().enumerate() {
                if x.tag == u64::from(DT_MIPS_RLD_MAP_REL) {
                    if let Some(o) = x.orig {
                        let old_slot = d.vaddr + (o * f.dyn_size()) as u64;
                        let new_slot = dyn_vaddr + (i * f.dyn_size()) as u64;
                        final_dyn[i].val = final_dyn[i]
                            .val
                            .wrapping_add(old_slot)
                            .wrapping_sub(new_slot)
                            & f.max_addr();
                    }
                }
            }
        }

        // 8. Writes. Stage: the appended area and unreferenced bytes.
        if let Some(b) = block {
            let it = item(ItemKind::Block).expect("block item");
            self.push(
                it.offset,
                Data::Copy(b.start),
                b.end - b.start,
                Phase::Stage,
                "copy of the sections after the program headers",
            );
        }
        let str_live = |s: &Self| !strtab_grows && s.p.elf.strtab.is_some();
        if strtab_grows {
            let it = item(ItemKind::StrTab).expect("strtab item");
            let mut bytes = st.bytes.clone();
            for (o, w) in &alloc.writes {
                bytes[*o as usize..*o as usize + w.len()].copy_from_slice(w);
            }
            for (s, en) in &alloc.garbage {
                bytes[*s as usize..*en as usize].fill(0);
            }
            bytes.extend_from_slice(&alloc.appended);
            self.push(
                it.offset,
                Data::Bytes(bytes),
                new_strsz,
                Phase::Stage,
                "grown dynamic string table",
            );
            // The old copy inside a moved block is dead from the start.
            if in_block(st.offset).is_some() {
                self.push(
                    translate(st.offset),
                    Data::Zero,
                    st.bytes.len() as u64,
                    Phase::Stage,
                    "stale string table in the moved block",
                );
            }
        } else if str_live(&self) {
            let cov_before = strings::coverage(&st.bytes, before.iter().copied());
            for (o, w) in alloc.writes.clone() {
                // Over bytes something referenced before: part of the switch. Otherwise staging.
                let live = cov_before
                    .iter()
                    .any(|&(s, en)| s < o + w.len() as u64 && o < en);
                let phase = if live && in_block(st.offset).is_none() {
                    Phase::Commit
                } else {
                    Phase::Stage
                };
                self.push(
                    translate(st.offset + o),
                    Data::Bytes(w.clone()),
                    w.len() as u64,
                    phase,
                    "string",
                );
            }
        }
        if let Some(it) = item(ItemKind::Interp) {
            let mut b = self.interp.clone().unwrap_or_default();
            b.push(0);
            self.push(
                it.offset,
                Data::Bytes(b),
                it.size,
                Phase::Stage,
                "interpreter path",
            );
        }
        if let Some(it) = item(ItemKind::Dynamic) {
            let bytes = encode_dynamic(f, &final_dyn, dyn_cap);
            self.push(
                it.offset,
                Data::Bytes(bytes),
                it.size,
                Phase::Stage,
                "dynamic section",
            );
        }

        // New program headers, section headers and file header.
        let old_phdrs = &e.phdrs;
        let mut phdrs = old_phdrs.clone();
        for p in phdrs.iter_mut() {
            if p.p_type != elf::PT_LOAD && p.p_type != elf::PT_PHDR {
                if let Some((b, doff, dv)) = block_delta {
                    if p.p_filesz > 0 && p.p_offset >= b.start && p.p_offset + p.p_filesz <= b.end {
                        p.p_offset = p.p_offset.wrapping_add(doff);
                        p.p_vaddr = p.p_vaddr.wrapping_add(dv);
                        p.p_paddr = p.p_paddr.wrapping_add(dv);
                    }
                }
            }
        }
        if let Some(ip) = e.interp.as_ref() {
            if let Some(it) = item(ItemKind::Interp) {
                let p = &mut phdrs[ip.phdr_index];
                p.p_offset = it.offset;
                p.p_vaddr = it.vaddr;
                p.p_paddr = it.vaddr;
                p.p_filesz = it.size;
                p.p_memsz = it.size;
            }
        }
        if let (Some(d), Some(it)) = (d, item(ItemKind::Dynamic)) {
            let p = &mut phdrs[d.phdr_index];
            let shift = p.p_paddr.wrapping_sub(p.p_vaddr);
            p.p_offset = it.offset;
            p.p_vaddr = it.vaddr;
            p.p_paddr = it.vaddr.wrapping_add(shift);
            p.p_filesz = it.size;
            p.p_memsz = it.size;
        }
        let mut header = e.header.clone();
        let mut moved_names: Vec<String> = Vec::new();
        if let (Some((mode, _)), Some(seg)) = (&layout, &placed) {
            let writable = item(ItemKind::Dynamic).is_some();
            match mode {
                Mode::Extend(i) => {
                    let p = &mut phdrs[*i];
                    p.p_filesz = seg.end_offset - p.p_offset;
                    p.p_memsz = p.p_filesz;
                    if writable {
                        p.p_flags |= elf::PF_W;
                    }
                }
                Mode::New(room) => {
                    let new_load = Phdr {
                        p_type: elf::PT_LOAD,
                        p_flags: elf::PF_R | if writable { elf::PF_W } else { 0 },
                        p_offset: seg.offset,
                        p_vaddr: seg.vaddr,
                        p_paddr: seg.vaddr,
                        p_filesz: seg.end_offset - seg.offset,
                        p_memsz: seg.end_offset - seg.offset,
                        p_align: seg.align,
                    };
                    if let Room::NullSlot(i) = room {
                        phdrs.remove(*i);
                    }
                    let at = phdrs
                        .iter()
                        .rposition(|p| p.p_type == elf::PT_LOAD)
                        .map(|i| i + 1)
                        .unwrap_or(phdrs.len());
                    phdrs.insert(at, new_load);
                    let table_size = (phdrs.len() * f.phdr_size()) as u64;
                    match room {
                        Room::MoveTable => {
                            let it = item(ItemKind::PhdrTable).expect("table item");
                            header.e_phoff = it.offset;
                            for p in phdrs.iter_mut().filter(|p| p.p_type == elf::PT_PHDR) {
                                p.p_offset = it.offset;
                                p.p_vaddr = it.vaddr;
                                p.p_paddr = it.vaddr;
                                p.p_filesz = table_size;
                                p.p_memsz = table_size;
                            }
                            moved_names.push("program headers".into());
                        }
                        _ => {
                            for p in phdrs.iter_mut().filter(|p| p.p_type == elf::PT_PHDR) {
                                p.p_filesz = table_size;
                                p.p_memsz = table_size;
                            }
                        }
                    }
                    header.e_phnum = phdrs.len() as u16;
                }
            }
        }

        // Sections follow their contents.
        let mut shdrs: Vec<Shdr> = e.sections.iter().map(|s| s.shdr).collect();
        let mut moves: Vec<SectionMove> = Vec::new();
        // A section can move twice in one plan (with the block, then on its own): symbols follow
        // the composition, from the original address.
        let note_move = |shdrs: &mut Vec<Shdr>,
                         i: usize,
                         off: u64,
                         addr: u64,
                         size: u64,
                         moves: &mut Vec<SectionMove>| {
            let orig = e.sections[i].shdr;
            moves.retain(|m| m.shndx != i as u16);
            if orig.sh_addr != addr {
                moves.push(SectionMove {
                    shndx: i as u16,
                    old_addr: orig.sh_addr,
                    old_size: orig.sh_size,
                    delta: addr.wrapping_sub(orig.sh_addr),
                    absolute_start: orig.sh_type == elf::SHT_DYNAMIC,
                });
            }
            shdrs[i].sh_offset = off;
            shdrs[i].sh_addr = addr;
            shdrs[i].sh_size = size;
        };
        if let Some((b, doff, dv)) = block_delta {
            for s in e.sections.iter() {
                let sh = s.shdr;
                if sh.is_alloc()
                    && sh.has_file_bytes()
                    && sh.sh_offset >= b.start
                    && sh.sh_offset + sh.sh_size <= b.end
                {
                    note_move(
                        &mut shdrs,
                        s.index,
                        sh.sh_offset.wrapping_add(doff),
                        sh.sh_addr.wrapping_add(dv),
                        sh.sh_size,
                        &mut moves,
                    );
                    moved_names.push(String::from_utf8_lossy(&s.name).into_owned());
                }
            }
            if e.sections.is_empty() {
                moved_names.push(format!(
                    "{} bytes after the program headers",
                    b.end - b.start
                ));
            }
        }
        if let Some(i) = st.section {
            if strtab_grows {
                note_move(&mut shdrs, i, str_off, str_vaddr, new_strsz, &mut moves);
                moved_names.push(".dynstr".into());
            }
        } else if strtab_grows {
            moved_names.push("dynamic string table".into());
        }
        if let (Some(d), Some(it)) = (d, item(ItemKind::Dynamic)) {
            if let Some(i) = d.section {
                note_move(&mut shdrs, i, it.offset, it.vaddr, it.size, &mut moves);
            }
            moved_names.push(".dynamic".into());
        }
        if let (Some(ip), Some(it)) = (e.interp.as_ref(), item(ItemKind::Interp)) {
            if let Some(i) = ip.section {
                note_move(&mut shdrs, i, it.offset, it.vaddr, it.size, &mut moves);
            }
            moved_names.push(".interp".into());
        }
        if kept_verneed != verneed.len() {
            if let Some(s) = e
                .sections
                .iter()
                .find(|s| s.shdr.sh_type == elf::SHT_GNU_VERNEED)
            {
                shdrs[s.index].sh_info = kept_verneed as u32;
            }
        }
        moved_names.dedup();

        // Commit: program headers (with the file header when adjacent), then live data.
        let table_moved = matches!(mode, Some(Mode::New(Room::MoveTable)));
        let phdr_bytes: Vec<u8> = phdrs.iter().flat_map(|p| f.encode_phdr(p)).collect();
        if phdrs != *old_phdrs || header != e.header {
            if table_moved {
                let it = item(ItemKind::PhdrTable).expect("table item");
                self.push(
                    it.offset,
                    Data::Bytes(phdr_bytes),
                    it.size,
                    Phase::Stage,
                    "program header table",
                );
                let hb = f.encode_header(&header);
                self.push(
                    0,
                    Data::Bytes(hb.clone()),
                    hb.len() as u64,
                    Phase::Commit,
                    "ELF header",
                );
            } else {
                let eh = f.encode_header(&header);
                if header.e_phoff == eh.len() as u64 && header != e.header {
                    let mut b = eh;
                    b.extend_from_slice(&phdr_bytes);
                    let n = b.len() as u64;
                    self.push(
                        0,
                        Data::Bytes(b),
                        n,
                        Phase::Commit,
                        "ELF and program headers",
                    );
                } else {
                    let n = phdr_bytes.len() as u64;
                    self.push(
                        header.e_phoff,
                        Data::Bytes(phdr_bytes),
                        n,
                        Phase::Commit,
                        "program headers",
                    );
                    if header != e.header {
                        let n = eh.len() as u64;
                        self.push(0, Data::Bytes(eh), n, Phase::Commit, "ELF header");
                    }
                }
            }
        }
        if let (Some(new), Some(ip), true) = (&self.interp, e.interp.as_ref(), interp_fits) {
            let mut b = new.clone();
            b.resize(ip.capacity as usize, 0);
            self.push(
                translate(ip.offset),
                Data::Bytes(b),
                ip.capacity,
                if in_block(ip.offset).is_some() {
                    Phase::Stage
                } else {
                    Phase::Commit
                },
                "interpreter path",
            );
        }
        // Version records: written in place (inside a moved block: into the copy).
        if let Some(r) = vn_region {
            let phase = if in_block(r.offset).is_some() {
                Phase::Stage
            } else {
                Phase::Commit
            };
            if let Some(b) = verneed_bytes {
                self.push(
                    translate(r.offset),
                    Data::Bytes(b),
                    r.size,
                    phase,
                    "version needs",
                );
            } else {
                for (i, req) in &vn_req {
                    let off = verneed[*i].offset + 4;
                    let v = alloc.placements[*req].offset() as u32;
                    self.push(
                        translate(off),
                        Data::Bytes(f.put_u32(v).to_vec()),
                        4,
                        phase,
                        "version need file name",
                    );
                }
            }
        }
        if let (Some(new), Some((r, old))) = (versym_new, t.versym.as_ref()) {
            if let Some((lo, hi)) = diff_span(old, &new) {
                let bytes: Vec<u8> = new[lo..hi].iter().flat_map(|&v| f.put_u16(v)).collect();
                let phase = if in_block(r.offset).is_some() {
                    Phase::Stage
                } else {
                    Phase::Commit
                };
                self.push(
                    translate(r.offset + 2 * lo as u64),
                    Data::Bytes(bytes),
                    2 * (hi - lo) as u64,
                    phase,
                    "symbol versions",
                );
            }
        }
        if let (Some(d), None) = (d, item(ItemKind::Dynamic)) {
            let new = encode_dynamic(f, &final_dyn, dyn_cap);
            let old = encode_dynamic(f, &d.slots, dyn_cap);
            if let Some((lo, hi)) = diff_span(&old, &new) {
                let phase = if in_block(d.offset).is_some() {
                    Phase::Stage
                } else {
                    Phase::Commit
                };
                self.push(
                    translate(d.offset + lo as u64),
                    Data::Bytes(new[lo..hi].to_vec()),
                    (hi - lo) as u64,
                    phase,
                    "dynamic entries",
                );
            }
        }

        // Cleanup: zero what nothing refers to any more.
        let mut live_new: Vec<(u64, u64)> = Vec::new();
        if !table_moved && (header.e_phnum != e.header.e_phnum) {
            live_new.push((header.e_phoff, header.e_phoff + phdr_bytes_len(f, &phdrs)));
        }
        let mut dead: Vec<(u64, u64)> = Vec::new();
        if let Some(b) = block {
            dead.push((b.start, b.end));
        }
        if strtab_grows && e.strtab.is_some() {
            dead.push((st.offset, st.offset + st.bytes.len() as u64));
        } else if e.strtab.is_some() && in_block(st.offset).is_none() {
            for (s, en) in &alloc.garbage {
                dead.push((st.offset + s, st.offset + en));
            }
        }
        if let (Some(ip), Some(_)) = (e.interp.as_ref(), item(ItemKind::Interp)) {
            dead.push((ip.offset, ip.offset + ip.capacity));
        }
        let dead = strings::subtract(&strings::merge(&mut dead), &strings::merge(&mut live_new));
        for (s, en) in dead {
            self.push(s, Data::Zero, en - s, Phase::Cleanup, "unreferenced bytes");
        }
        if block.is_some() {
            // Garbage strings inside the moved copy were zeroed before the commit.
            if !strtab_grows && e.strtab.is_some() && in_block(st.offset).is_some() {
                for (s, en) in &alloc.garbage {
                    let o = translate(st.offset + s);
                    self.writes.push(Write {
                        offset: o,
                        len: en - s,
                        data: Data::Zero,
                        phase: Phase::Stage,
                        what: "unreferenced strings in the moved copy".into(),
                    });
                }
            }
        }
        if !e.sections.is_empty() {
            let shoff = e.header.e_shoff;
            for (i, (new, old)) in shdrs.iter().zip(e.sections.iter()).enumerate() {
                if *new != old.shdr {
                    let b = f.encode_shdr(new);
                    let n = b.len() as u64;
                    self.push(
                        shoff + (i * f.shdr_size()) as u64,
                        Data::Bytes(b),
                        n,
                        Phase::Cleanup,
                        "section header",
                    );
                }
            }
        }
        let mut fixups = Vec::new();
        if !moves.is_empty() {
            for s in e
                .sections
                .iter()
                .filter(|s| matches!(s.shdr.sh_type, elf::SHT_SYMTAB | elf::SHT_DYNSYM))
            {
                let count = s.shdr.sh_size / f.sym_size() as u64;
                let offset = shdrs[s.index].sh_offset;
                fixups.push(SymbolFixup {
                    table: s.index,
                    offset,
                    count,
                    moves: moves.clone(),
                });
            }
        }

        // Stage writes first, then commit, then cleanup; stable within a phase.
        // Within cleanup, section headers first: right after the commit they are the only thing
        // still describing the old layout; zeroing dead bytes can wait.
        self.writes
            .sort_by_key(|w| (w.phase, w.phase == Phase::Cleanup && w.data == Data::Zero));
        let new_len = placed
            .as_ref()
            .map(|s| s.end_offset.max(e.file_len))
            .unwrap_or(e.file_len);
        let layout = match &layout {
            None => Layout::InPlace,
            Some((mode, _)) => Layout::Appended {
                extended: matches!(mode, Mode::Extend(_)),
                moved_phdrs: table_moved,
                moved: moved_names,
            },
        };
        // Bounds: every write must land inside the new file.
        for w in &self.writes {
            if w.offset + w.len > new_len {
                return Err(Error::refused(format!(
                    "internal: write {} at {:#x}+{:#x} past the end",
                    w.what, w.offset, w.len
                )));
            }
        }
        Ok(Plan {
            writes: self.writes,
            old_len: e.file_len,
            new_len,
            symbol_fixups: fixups,
            layout,
        })
    }

    fn dyn_will_change(&self) -> bool {
        self.p.dynamic_changed(&self.entries)
    }

    /// Serializes the version need records that remain, in the same place.
    fn serialize_verneed(
        &self,
        verneed: &[VerneedEntry],
        vn_req: &[(usize, usize)],
        placements: &[Placement],
    ) -> Vec<u8> {
        let f = self.p.f;
        let size = self.p.t.verneed.as_ref().map(|(r, _)| r.size).unwrap_or(0) as usize;
        let kept: Vec<(usize, &VerneedEntry)> = verneed
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.vn.remove.contains(i))
            .collect();
        let mut out = Vec::with_capacity(size);
        for (k, (i, n)) in kept.iter().enumerate() {
            let file = vn_req
                .iter()
                .find(|(j, _)| j == i)
                .map(|(_, r)| placements[*r].offset() as u32)
                .unwrap_or(n.file);
            let next = if k + 1 == kept.len() {
                0
            } else {
                16 + 16 * n.aux.len() as u32
            };
            out.extend_from_slice(&f.put_u16(n.version));
            out.extend_from_slice(&f.put_u16(n.aux.len() as u16));
            out.extend_from_slice(&f.put_u32(file));
            out.extend_from_slice(&f.put_u32(if n.aux.is_empty() { 0 } else { 16 }));
            out.extend_from_slice(&f.put_u32(next));
            for (j, a) in n.aux.iter().enumerate() {
                out.extend_from_slice(&f.put_u32(a.hash));
                out.extend_from_slice(&f.put_u16(a.flags));
                out.extend_from_slice(&f.put_u16(a.other));
                out.extend_from_slice(&f.put_u32(a.name));
                out.extend_from_slice(&f.put_u32(if j + 1 == n.aux.len() { 0 } else { 16 }));
            }
        }
        out.resize(size.max(out.len()), 0);
        out
    }

    /// Version indices that belonged to removed needs become `VER_NDX_GLOBAL`.
    fn versym_after_removal(&self, verneed: &[VerneedEntry]) -> Option<Vec<u16>> {
        if self.vn.remove.is_empty() {
            return None;
        }
        let (_, old) = self.p.t.versym.as_ref()?;
        let gone: Vec<u16> = self
            .vn
            .remove
            .iter()
            .flat_map(|&i| verneed[i].aux.iter().map(|a| a.other & 0x7fff))
            .collect();
        let new: Vec<u16> = old
            .iter()
            .map(|&v| if gone.contains(&(v & 0x7fff)) { 1 } else { v })
            .collect();
        (new != *old).then_some(new)
    }
}

fn phdr_bytes_len(f: Format, phdrs: &[Phdr]) -> u64 {
    (phdrs.len() * f.phdr_size()) as u64
}

fn encode_dynamic(f: Format, entries: &[Dyn], capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity * f.dyn_size());
    for d in entries.iter().take(capacity) {
        out.extend_from_slice(&f.encode_dyn(d));
    }
    while out.len() < capacity * f.dyn_size() {
        out.extend_from_slice(&f.encode_dyn(&Dyn { tag: 0, val: 0 }));
    }
    out
}

/// The smallest `[lo, hi)` outside which `a` and `b` agree (`None` when equal).
fn diff_span<T: PartialEq>(a: &[T], b: &[T]) -> Option<(usize, usize)> {
    let n = a.len().min(b.len());
    let lo = (0..n).find(|&i| a[i] != b[i]).unwrap_or(n);
    if lo == n && a.len() == b.len() {
        return None;
    }
    let mut hi = b.len();
    while hi > lo && hi <= a.len() && a[hi - 1] == b[hi - 1] {
        hi -= 1;
    }
    Some((lo, hi))
}

/// Dynamic tags that point into sections the planner may move (all others stay fixed).
fn is_movable_pointer_tag(tag: u64) -> bool {
    [
        elf::DT_HASH,
        elf::DT_GNU_HASH,
        elf::DT_SYMTAB,
        elf::DT_VERSYM,
        elf::DT_VERDEF,
        elf::DT_VERNEED,
    ]
    .iter()
    .any(|&t| u64::from(t) == tag)
}

/// Dynamic tags whose value is an address (`d_ptr`), per the gABI and GNU extensions.
fn is_address_tag(tag: u64) -> bool {
    let t = tag as u32;
    matches!(
        t,
        elf::DT_PLTGOT
            | elf::DT_HASH
            | elf::DT_STRTAB
            | elf::DT_SYMTAB
            | elf::DT_RELA
            | elf::DT_INIT
            | elf::DT_FINI
            | elf::DT_REL
            | elf::DT_JMPREL
            | elf::DT_INIT_ARRAY
            | elf::DT_FINI_ARRAY
            | elf::DT_PREINIT_ARRAY
            | elf::DT_SYMTAB_SHNDX
            | elf::DT_VERSYM
            | elf::DT_VERDEF
            | elf::DT_VERNEED
    ) || (0x6fff_fe00..=0x6fff_feff).contains(&t)
        || t == 0x24 // DT_RELR
}

/// Where appended data goes.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Extend the last `PT_LOAD` (with this index): it ends the file and the address space.
    Extend(usize),
    /// Add a `PT_LOAD`, making room in the program header table this way.
    New(Room),
}

/// Base of the appended area: (file offset, vaddr, p_align).
type Base = (u64, u64, u64);

/// The placed segment.
#[derive(Clone, Copy, Debug)]
struct Placed {
    offset: u64,
    vaddr: u64,
    end_offset: u64,
    align: u64,
}

impl Item {
    fn new(kind: ItemKind, size: u64, align: u64) -> Item {
        Item {
            kind,
            size,
            align: align.max(1),
            congruent_to: None,
            offset: 0,
            vaddr: 0,
        }
    }
}

impl Planner<'_> {
    fn max_load_align(&self) -> u64 {
        let existing = self
            .elf
            .loads()
            .map(|p| p.p_align)
            .max()
            .unwrap_or(1)
            .max(1);
        let a = self.opts.page_size.unwrap_or(0).max(existing).max(4096);
        if a.is_power_of_two() {
            a
        } else {
            a.next_power_of_two()
        }
    }

    /// The last `PT_LOAD`, if appended data can simply extend it.
    fn extendable_tail(&self) -> Option<usize> {
        let e = self.elf;
        let (i, last) = e
            .phdrs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.p_type == elf::PT_LOAD)
            .max_by_key(|(_, p)| p.p_vaddr)?;
        let highest_offset = e.loads().all(|p| p.offset_end() <= last.offset_end());
        let at_eof = last.offset_end() == e.file_len;
        let plain =
            last.p_filesz == last.p_memsz && last.p_flags & elf::PF_X == 0 && last.p_filesz > 0;
        let shdrs_before = e.header.e_shoff == 0 || e.header.e_shoff < last.p_offset;
        (highest_offset && at_eof && plain && shdrs_before).then_some(i)
    }

    fn choose_layout(&self) -> Result<(Mode, Base)> {
        let e = self.elf;
        if let Some(i) = self.extendable_tail() {
            let p = &e.phdrs[i];
            return Ok((
                Mode::Extend(i),
                (p.offset_end(), p.p_vaddr + p.p_filesz, p.p_align),
            ));
        }
        if e.loads().next().is_none() {
            return Err(Error::refused(
                "the file has no PT_LOAD segment to place data after",
            ));
        }
        let room = self.find_room()?;
        let align = self.max_load_align();
        let top = e.loads().map(|p| p.vaddr_end()).max().unwrap_or(0);
        let mut offset = align_up(e.file_len, 16);
        // Keep the new segment clear of the old image by a page, and by the largest dynamic
        // symbol: eu-elflint takes a relocation at r_offset against a symbol of size n to touch
        // [r_offset, r_offset + n], and calls a read-only segment in that range "modified".
        let reach = self.t.dynsym.as_ref().map_or(0, |s| s.max_size);
        let base = top
            .checked_add(reach)
            .map(|x| align_up(x, align) + align)
            .filter(|&b| b < self.f.max_addr())
            .ok_or_else(|| {
                Error::refused("no address space left above the image for a new segment")
            })?;
        let mut vaddr = base + offset % align;
        if matches!(room, Room::MoveTable) && e.interp.is_some() {
            // Kernels before 5.18 compute AT_PHDR as (first PT_LOAD's vaddr - offset) + e_phoff:
            // keep that bias for the new segment so the moved table is still found there.
            let first = e.loads().min_by_key(|p| p.p_vaddr).expect("has loads");
            let bias = first.p_vaddr.wrapping_sub(first.p_offset);
            if bias <= base {
                // The file offset that lands at `base` with that bias, unless the file is already
                // longer; a hole of more than 1 MiB in the file is not worth it.
                let biased = offset.max(align_up(base - bias, 16));
                if biased - offset <= 1 << 20 && biased.checked_add(bias).is_some() {
                    offset = biased;
                    vaddr = offset + bias;
                }
            }
        }
        Ok((Mode::New(room), (offset, vaddr, align)))
    }

    /// Lays out the items from `base`, filling in their offsets and addresses.
    fn place(&self, base: Base, items: &mut [Item]) -> Result<Placed> {
        let (o0, v0, align) = base;
        let bias = v0.wrapping_sub(o0);
        let mut cur = o0;
        for it in items.iter_mut() {
            let mut off = align_up(cur, it.align);
            if let Some(old) = it.congruent_to {
                while off.wrapping_add(bias) % it.align != old % it.align {
                    off += 1;
                }
            }
            it.offset = off;
            it.vaddr = off.wrapping_add(bias);
            cur = off + it.size;
        }
        let end_vaddr = cur.wrapping_add(bias);
        if end_vaddr > self.f.max_addr() || end_vaddr < v0 {
            return Err(Error::refused(
                "the appended segment would not fit in the address space",
            ));
        }
        Ok(Placed {
            offset: o0,
            vaddr: v0,
            end_offset: cur,
            align,
        })
    }

    fn new_phnum(&self, mode: Option<Mode>) -> usize {
        let n = self.elf.phdrs.len();
        match mode {
            Some(Mode::New(Room::NullSlot(_))) | Some(Mode::Extend(_)) | None => n,
            Some(Mode::New(_)) => n + 1,
        }
    }

    fn phdr_growth(&self, layout: &Option<(Mode, Base)>) -> u64 {
        match layout {
            Some((Mode::New(Room::Slack), _)) | Some((Mode::New(Room::Block(_)), _)) => {
                self.f.phdr_size() as u64
            }
            _ => 0,
        }
    }

    /// Whether a table the dynamic array points to overlaps `[start, end)` of the file.
    fn dynamic_refs_in(&self, start: u64, end: u64) -> bool {
        self.dynamic_regions()
            .iter()
            .any(|r| r.offset < end && start < r.end())
    }

    /// The tables `.dynamic` points to, with their extents.
    fn dynamic_regions(&self) -> Vec<Region> {
        let mut out = Vec::new();
        if let Some(s) = &self.elf.strtab {
            out.push(Region {
                offset: s.offset,
                vaddr: s.vaddr,
                size: s.bytes.len() as u64,
            });
        }
        let t = self.t;
        out.extend(t.dynsym.as_ref().map(|s| s.region));
        out.extend(t.hash);
        out.extend(t.gnu_hash);
        out.extend(t.versym.as_ref().map(|(r, _)| *r));
        out.extend(t.verneed.as_ref().map(|(r, _)| *r));
        out.extend(t.verdef.as_ref().map(|(r, _)| *r));
        out
    }

    /// How to make room for one more program header.
    fn find_room(&self) -> Result<Room> {
        let e = self.elf;
        let f = self.f;
        if let Some(i) = e.phdrs.iter().position(|p| p.p_type == elf::PT_NULL) {
            return Ok(Room::NullSlot(i));
        }
        if e.phdrs.len() + 1 >= usize::from(elf::PN_XNUM) {
            return Err(Error::unsupported("too many program headers to add one"));
        }
        let need = f.phdr_size() as u64;
        let table_start = e.header.e_phoff;
        let table_end = table_start + (e.phdrs.len() * f.phdr_size()) as u64;
        let Some(load) = e
            .loads()
            .find(|p| p.contains_offset(table_start, table_end - table_start))
        else {
            return Ok(Room::MoveTable);
        };
        let load_end = load.offset_end();
        let occupants = self.occupants(table_end);
        if occupants
            .iter()
            .any(|o| o.start < table_end && o.end > table_start)
        {
            return Ok(Room::MoveTable);
        }
        let next = occupants
            .iter()
            .map(|o| o.start)
            .filter(|&s| s >= table_end)
            .min()
            .unwrap_or(load_end)
            .min(load_end);
        if next >= table_end + need && (!e.sections.is_empty() || next < load_end) {
            return Ok(Room::Slack);
        }
        // Move the shortest run of movable things that frees `need` bytes.
        let mut end = table_end;
        let mut align = f.word_size();
        let mut sorted: Vec<&Occupant> =
            occupants.iter().filter(|o| o.start >= table_end).collect();
        sorted.sort_by_key(|o| (o.start, o.end));
        let mut iter = sorted.iter().peekable();
        while end < table_end + need {
            let Some(o) = iter.next() else { break };
            if o.start > end && e.sections.is_empty() && o.start - end >= 16 {
                // Unknown bytes between known regions: they may be anything.
                return Ok(Room::MoveTable);
            }
            if !o.movable || o.end > load_end {
                return Ok(Room::MoveTable);
            }
            end = end.max(o.end);
            align = align.max(o.align);
        }
        // Anything overlapping the block must lie inside it entirely, and be movable.
        loop {
            let mut grew = false;
            for o in &occupants {
                if o.start < end && o.end > end && o.start >= table_end {
                    if !o.movable || o.end > load_end {
                        return Ok(Room::MoveTable);
                    }
                    end = o.end;
                    align = align.max(o.align);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        if end < table_end + need {
            return Ok(Room::MoveTable);
        }
        // Nothing we cannot update may point into the block: the entry point, or address tags
        // other than the table pointers we relocate.
        let lo = e.offset_to_vaddr(table_end, 1).unwrap_or(0);
        let hi = lo + (end - table_end);
        if e.header.e_entry >= lo && e.header.e_entry < hi {
            return Ok(Room::MoveTable);
        }
        if let Some(d) = &e.dynamic {
            for x in d.entries() {
                if is_address_tag(x.tag)
                    && !is_movable_pointer_tag(x.tag)
                    && x.tag != u64::from(elf::DT_STRTAB)
                    && x.val >= lo
                    && x.val < hi
                {
                    return Ok(Room::MoveTable);
                }
            }
        }
        Ok(Room::Block(Block {
            start: table_end,
            end,
            align: align.min(4096),
        }))
    }

    /// What occupies the file after the program header table: sections when there are section
    /// headers, otherwise every region the program headers and dynamic tags describe.
    fn occupants(&self, _from: u64) -> Vec<Occupant> {
        let e = self.elf;
        let mut out = Vec::new();
        let movable_phdr =
            |t: u32| matches!(t, elf::PT_INTERP | elf::PT_NOTE | elf::PT_GNU_PROPERTY);
        for p in e.phdrs.iter() {
            if p.p_type == elf::PT_LOAD || p.p_type == elf::PT_PHDR || p.p_filesz == 0 {
                continue;
            }
            out.push(Occupant {
                start: p.p_offset,
                end: p.offset_end(),
                movable: movable_phdr(p.p_type),
                align: p.p_align.max(1),
            });
        }
        if !e.sections.is_empty() {
            let strtab_vaddr = e.strtab.as_ref().map(|s| s.vaddr);
            for s in e.sections.iter() {
                let sh = s.shdr;
                if !sh.has_file_bytes() {
                    continue;
                }
                let movable = sh.is_alloc()
                    && sh.sh_flags & u64::from(elf::SHF_WRITE | elf::SHF_EXECINSTR) == 0
                    && (matches!(
                        sh.sh_type,
                        elf::SHT_NOTE
                            | elf::SHT_HASH
                            | elf::SHT_GNU_HASH
                            | elf::SHT_DYNSYM
                            | elf::SHT_GNU_VERSYM
                            | elf::SHT_GNU_VERNEED
                            | elf::SHT_GNU_VERDEF
                    ) || (sh.sh_type == elf::SHT_STRTAB && Some(sh.sh_addr) == strtab_vaddr)
                        || (sh.sh_type == elf::SHT_PROGBITS && s.name == b".interp"));
                out.push(Occupant {
                    start: sh.sh_offset,
                    end: sh.sh_offset + sh.sh_size,
                    movable,
                    align: sh.sh_addralign.max(1),
                });
            }
            if e.header.e_shoff != 0 {
                let end = e.header.e_shoff + (e.sections.len() * self.f.shdr_size()) as u64;
                out.push(Occupant {
                    start: e.header.e_shoff,
                    end,
                    movable: false,
                    align: 1,
                });
            }
        } else {
            for r in self.dynamic_regions() {
                out.push(Occupant {
                    start: r.offset,
                    end: r.end(),
                    movable: true,
                    align: self.f.word_size(),
                });
            }
            if let Some(d) = &e.dynamic {
                let size = (d.capacity() * self.f.dyn_size()) as u64;
                out.push(Occupant {
                    start: d.offset,
                    end: d.offset + size,
                    movable: false,
                    align: 1,
                });
                let pairs = [
                    (elf::DT_RELA, elf::DT_RELASZ),
                    (elf::DT_REL, elf::DT_RELSZ),
                    (elf::DT_JMPREL, elf::DT_PLTRELSZ),
                    (0x24, 0x23), // DT_RELR, DT_RELRSZ
                    (elf::DT_INIT_ARRAY, elf::DT_INIT_ARRAYSZ),
                    (elf::DT_FINI_ARRAY, elf::DT_FINI_ARRAYSZ),
                ];
                for (a, s) in pairs {
                    if let (Some(v), Some(n)) = (d.get(a), d.get(s)) {
                        if let Some(o) = e.vaddr_to_offset(v, n) {
                            out.push(Occupant {
                                start: o,
                                end: o + n.max(1),
                                movable: false,
                                align: 1,
                            });
                        }
                    }
                }
                for x in d.entries() {
                    if is_address_tag(x.tag)
                        && !is_movable_pointer_tag(x.tag)
                        && x.tag != u64::from(elf::DT_STRTAB)
                    {
                        if let Some(o) = e.vaddr_to_offset(x.val, 1) {
                            out.push(Occupant {
                                start: o,
                                end: o + 1,
                                movable: false,
                                align: 1,
                            });
                        }
                    }
                }
            }
            if let Some(o) = e.vaddr_to_offset(e.header.e_entry, 1) {
                out.push(Occupant {
                    start: o,
                    end: o + 1,
                    movable: false,
                    align: 1,
                });
            }
        }
        out
    }
}
