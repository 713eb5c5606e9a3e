//! Synthetic ELF files for testing ELF editors, and an independent reader to
//! check them with.
//!
//! * [`Spec`] describes a dynamically linked ELF file (class, byte order,
//!   machine, file type, page size, dynamic strings, symbols, symbol
//!   versions, and layout quirks such as linker string-tail merging or a
//!   program header table that cannot grow in place).
//! * [`build`] / [`build_to`] turn a spec into the bytes of a loader-plausible
//!   file laid out the way GNU ld lays files out; [`layout`] tells where
//!   everything went without producing the bytes.
//! * [`oracle`] is a small, self-contained ELF reader (it shares no code
//!   with any editor, and with the builder only the plain section record
//!   [`PlacedSection`]: own decoding, own hash functions; the numbers are
//!   `object::elf`'s) with [`oracle::read`] returning a plain model and
//!   [`oracle::check_layout`] listing invariant violations.
//! * `strategy` (feature `proptest`, on by default) generates arbitrary
//!   specs for property tests.
//!
//! A spec fully determines the output: building the same spec twice gives
//! the same bytes.
//!
//! ```
//! // A NEEDED name that the linker merged into the tail of the RUNPATH.
//! let spec = elfsynth::Spec {
//!     runpath: Some("/opt/x/libdep.so".into()),
//!     needed: vec!["libdep.so".into()],
//!     verneed: vec![],
//!     tail_merge: true,
//!     ..Default::default()
//! };
//! let bytes = elfsynth::build(&spec);
//! assert!(elfsynth::oracle::check_layout(&bytes).is_empty());
//! let elf = elfsynth::oracle::read(&bytes).unwrap();
//! assert_eq!(elf.needed, ["libdep.so"]);
//! let runpath = elf.dyn_entry(29).unwrap().value; // DT_RUNPATH
//! let needed = elf.dyn_entry(1).unwrap().value; // DT_NEEDED
//! assert_eq!(needed, runpath + "/opt/x/".len() as u64);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod build;
mod section;
mod strtab;

pub mod oracle;
#[cfg(feature = "proptest")]
pub mod strategy;

pub use build::{build, build_to, layout, Layout, Segment, SpecError};
/// One section as the builder placed it (whether or not section headers are written): the
/// crate's one section type, which the oracle reads section headers into as well.
pub use section::Section as PlacedSection;

/// ELF file class (`EI_CLASS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// `ELFCLASS32`: 32-bit offsets, addresses and structures.
    Elf32,
    /// `ELFCLASS64`: 64-bit offsets, addresses and structures.
    Elf64,
}

impl Class {
    /// Both classes.
    pub const ALL: [Class; 2] = [Class::Elf32, Class::Elf64];

    /// Size in bytes of an address / `Elf_Addr` / `Elf_Off` for this class.
    pub fn word_size(self) -> u64 {
        match self {
            Class::Elf32 => 4,
            Class::Elf64 => 8,
        }
    }
}

/// Byte order of the file (`EI_DATA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// `ELFDATA2LSB`.
    Little,
    /// `ELFDATA2MSB`.
    Big,
}

impl Endian {
    /// Both byte orders.
    pub const ALL: [Endian; 2] = [Endian::Little, Endian::Big];
}

/// Object file type (`e_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// `ET_EXEC`: a position-dependent executable loaded at [`Spec::base`].
    Exec,
    /// `ET_DYN`: a shared object, or a PIE when [`Spec::interp`] is set.
    Dyn,
}

/// Target machine (`e_machine`). The machine also selects plausible
/// `e_flags`, and on 64-bit s390x the 8-byte `.hash` entries that its ABI
/// uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Machine {
    /// `EM_X86_64` (62).
    X86_64,
    /// `EM_386` (3).
    I386,
    /// `EM_AARCH64` (183).
    AArch64,
    /// `EM_ARM` (40).
    Arm,
    /// `EM_PPC64` (21).
    Ppc64,
    /// `EM_S390` (22), used for both s390 and s390x.
    S390x,
    /// `EM_RISCV` (243).
    RiscV,
    /// `EM_MIPS` (8). Executables get `DT_MIPS_RLD_MAP_REL` and `.rld_map`.
    Mips,
}

impl Machine {
    /// Every supported machine.
    pub const ALL: [Machine; 8] = [
        Machine::X86_64,
        Machine::I386,
        Machine::AArch64,
        Machine::Arm,
        Machine::Ppc64,
        Machine::S390x,
        Machine::RiscV,
        Machine::Mips,
    ];

    /// The `e_machine` value.
    pub fn e_machine(self) -> u16 {
        match self {
            Machine::X86_64 => 62,
            Machine::I386 => 3,
            Machine::AArch64 => 183,
            Machine::Arm => 40,
            Machine::Ppc64 => 21,
            Machine::S390x => 22,
            Machine::RiscV => 243,
            Machine::Mips => 8,
        }
    }

    /// The `e_flags` value written for this machine (a plausible ABI
    /// selection: ARM EABI5 hard-float, ppc64 ELFv1 on big endian and ELFv2
    /// on little endian, RISC-V RVC + double-float ABI, MIPS
    /// 32r2/o32 or 64r2 PIC).
    pub fn e_flags(self, class: Class, endian: Endian) -> u32 {
        match self {
            Machine::Arm => 0x0500_0400,
            Machine::Ppc64 => match endian {
                Endian::Big => 1,
                Endian::Little => 2,
            },
            Machine::RiscV => 0x5,
            Machine::Mips => match class {
                Class::Elf32 => 0x7000_1007,
                Class::Elf64 => 0x8000_0007,
            },
            _ => 0,
        }
    }

    /// Size in bytes of a `.hash` (`DT_HASH`) table entry: 8 for 64-bit
    /// s390x, 4 everywhere else.
    pub fn hash_entry_size(self, class: Class) -> u64 {
        if self == Machine::S390x && class == Class::Elf64 {
            8
        } else {
            4
        }
    }
}

/// Which symbol hash tables to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashStyle {
    /// Only `.hash` (`DT_HASH`).
    Sysv,
    /// Only `.gnu.hash` (`DT_GNU_HASH`).
    Gnu,
    /// Both tables.
    Both,
}

impl HashStyle {
    /// Whether a `.hash` table is emitted.
    pub fn sysv(self) -> bool {
        matches!(self, HashStyle::Sysv | HashStyle::Both)
    }
    /// Whether a `.gnu.hash` table is emitted.
    pub fn gnu(self) -> bool {
        matches!(self, HashStyle::Gnu | HashStyle::Both)
    }
}

/// What directly follows the program header table (after
/// [`Spec::phdr_slack`] zero bytes) in the first `PT_LOAD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AfterPhdrs {
    /// The usual GNU ld order: `.interp` (when there is an interpreter),
    /// notes, hash tables, `.dynsym`, `.dynstr`, version sections.
    Interp,
    /// A code section (`.init`, `SHT_PROGBITS`, `SHF_ALLOC|SHF_EXECINSTR`)
    /// sits directly after the table, and the first `PT_LOAD` becomes R+X.
    /// Code cannot be moved, so an editor that must grow the program header
    /// table has to move the table instead.
    Text,
    /// `.dynsym` directly follows the table, then the usual order.
    Dynsym,
}

/// Everything that determines a synthesized file. See [`build`].
///
/// String fields must not contain NUL bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// 32- or 64-bit.
    pub class: Class,
    /// Byte order.
    pub endian: Endian,
    /// `ET_EXEC` or `ET_DYN`.
    pub e_type: FileType,
    /// Target machine.
    pub machine: Machine,
    /// `p_align` of the `PT_LOAD`s; a power of two, at least 4 KiB.
    pub page_size: u64,
    /// Virtual address of the first `PT_LOAD` (file offset 0); a multiple of
    /// `page_size`. Typically 0 for `ET_DYN` and e.g. `0x400000` or
    /// `0x10000000` for `ET_EXEC`.
    pub base: u64,
    /// Program interpreter (`PT_INTERP`, `.interp`). An `ET_EXEC` without
    /// one is a static executable that nonetheless has a `.dynamic`, which
    /// `eu-elflint` rejects; `strategy::arb_spec` never produces that.
    pub interp: Option<String>,
    /// `DT_NEEDED` entries, in order.
    pub needed: Vec<String>,
    /// `DT_SONAME`.
    pub soname: Option<String>,
    /// `DT_RPATH`. See also [`Spec::shared_rpath_runpath`].
    pub rpath: Option<String>,
    /// `DT_RUNPATH`.
    pub runpath: Option<String>,
    /// When both `rpath` and `runpath` are set, `DT_RPATH` points at the
    /// very same `.dynstr` offset as `DT_RUNPATH` (so it reads back as the
    /// RUNPATH string; the `rpath` text is then not used). See
    /// [`Spec::effective_rpath`].
    pub shared_rpath_runpath: bool,
    /// Dynamic symbol names. The first [`Spec::undefined_dynsyms`] are
    /// undefined function symbols (imports); the rest are global functions
    /// defined in `.text`. `.dynsym` holds the undefined ones first, in
    /// order, then the defined ones (reordered by GNU hash bucket when a
    /// `.gnu.hash` is emitted; [`Layout::dynsym_order`] gives the order).
    pub dynsyms: Vec<String>,
    /// How many of `dynsyms` (from the front) are undefined.
    pub undefined_dynsyms: usize,
    /// `.gnu.version_r`: (file name, version names) per needed file. File
    /// names equal to a `DT_NEEDED` name share its `.dynstr` offset.
    /// Undefined symbols get these versions round-robin in `.gnu.version`.
    /// Each file must list at least one version.
    pub verneed: Vec<(String, Vec<String>)>,
    /// `.gnu.version_d` version names; the first is the base definition
    /// (`VER_FLG_BASE`, index 1, conventionally the SONAME). Defined symbols
    /// get the non-base versions round-robin. Empty: no `.gnu.version_d`.
    pub verdef: Vec<String>,
    /// Which hash tables to emit.
    pub hash: HashStyle,
    /// Linker string-tail merging in `.dynstr` (and `.strtab`): a string
    /// that is a suffix of another string is not stored separately but
    /// points into the tail of the longer one (e.g. `DT_NEEDED
    /// "libdep.so"` inside `DT_RUNPATH "/opt/x/libdep.so"`). Identical
    /// strings always share one copy, as with real linkers.
    pub tail_merge: bool,
    /// Extra `DT_NULL` entries after the terminating one.
    pub spare_dynamic_slots: usize,
    /// Free zero bytes after the program header table before the next
    /// section.
    pub phdr_slack: usize,
    /// What follows the program header table.
    pub first_after_phdrs: AfterPhdrs,
    /// Whether a `PT_PHDR` entry (always the first program header) is
    /// emitted. GNU ld omits it in plain shared libraries.
    pub pt_phdr: bool,
    /// `PT_NULL` entries at the end of the program header table.
    pub pt_null_slots: usize,
    /// Size of `.text`. Only a short prefix holds nonzero bytes, so
    /// [`build_to`] can create huge files cheaply by seeking.
    pub text_size: u64,
    /// Size of `.bss` (`p_memsz > p_filesz` of the RW `PT_LOAD`); 0 means no
    /// `.bss`.
    pub bss_size: u64,
    /// Whether to emit section headers (and the non-alloc sections
    /// `.comment`, `.symtab`, `.strtab`, `.shstrtab`). Without them
    /// `e_shoff`, `e_shnum` and `e_shstrndx` are 0.
    pub with_section_headers: bool,
    /// Whether to emit `.symtab`/`.strtab` (only with section headers).
    pub symtab: bool,
    /// How many bytes of its last tables (`.dynstr` and what follows it: version tables, or
    /// more) the first `PT_LOAD` leaves out of its `p_filesz`/`p_memsz`: they stay in the rest
    /// of the segment's last 4 KiB page, which the loader maps from the file all the same (as
    /// patchelf 0.17.2 leaves a non-PIE executable it grew). 0: none. The cut stays inside that
    /// page and after the program header table, so fewer bytes may be left out.
    pub tail_bytes: u64,
}

impl Default for Spec {
    /// A typical x86_64 PIE: interpreter, `libm.so.6` and `libc.so.6`
    /// needed with glibc symbol versions, a `$ORIGIN` RUNPATH, GNU hash,
    /// section headers and a `.symtab`.
    fn default() -> Self {
        Spec {
            class: Class::Elf64,
            endian: Endian::Little,
            e_type: FileType::Dyn,
            machine: Machine::X86_64,
            page_size: 0x1000,
            base: 0,
            interp: Some("/lib64/ld-linux-x86-64.so.2".into()),
            needed: vec!["libm.so.6".into(), "libc.so.6".into()],
            soname: None,
            rpath: None,
            runpath: Some("$ORIGIN/../lib".into()),
            shared_rpath_runpath: false,
            dynsyms: vec![
                "__libc_start_main".into(),
                "printf".into(),
                "cos".into(),
                "stubstrip_main".into(),
            ],
            undefined_dynsyms: 3,
            verneed: vec![
                (
                    "libc.so.6".into(),
                    vec!["GLIBC_2.34".into(), "GLIBC_2.2.5".into()],
                ),
                ("libm.so.6".into(), vec!["GLIBC_2.2.5".into()]),
            ],
            verdef: vec![],
            hash: HashStyle::Gnu,
            tail_merge: false,
            spare_dynamic_slots: 0,
            phdr_slack: 0,
            first_after_phdrs: AfterPhdrs::Interp,
            pt_phdr: true,
            pt_null_slots: 0,
            text_size: 0x100,
            bss_size: 0x10,
            with_section_headers: true,
            symtab: true,
            tail_bytes: 0,
        }
    }
}

impl Spec {
    /// What `DT_RPATH` reads back as: `runpath` when
    /// [`Spec::shared_rpath_runpath`] applies, else `rpath`.
    pub fn effective_rpath(&self) -> Option<&str> {
        match (&self.rpath, &self.runpath) {
            (Some(_), Some(rp)) if self.shared_rpath_runpath => Some(rp),
            (r, _) => r.as_deref(),
        }
    }

    /// Whether the file gets `DT_DEBUG` (executables: `ET_EXEC`, or any file
    /// with an interpreter).
    pub fn is_executable(&self) -> bool {
        self.e_type == FileType::Exec || self.interp.is_some()
    }

    /// Whether the file gets `DT_MIPS_RLD_MAP_REL` and a `.rld_map` word
    /// (MIPS executables).
    pub fn has_rld_map(&self) -> bool {
        self.machine == Machine::Mips && self.is_executable()
    }

    /// The `.dynsym` symbol names in table order (without the null symbol
    /// at index 0).
    pub fn dynsym_names_in_order(&self) -> Result<Vec<String>, SpecError> {
        let l = layout(self)?;
        Ok(l.dynsym_order
            .iter()
            .map(|&i| self.dynsyms[i].clone())
            .collect())
    }

    /// Checks the spec without building anything.
    pub fn validate(&self) -> Result<(), SpecError> {
        layout(self).map(|_| ())
    }
}
