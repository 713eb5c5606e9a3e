//! What glibc's dynamic loader knows about its own architecture: which files it accepts, which
//! `ld.so.cache` entries are its own, and its built-in defaults.
//!
//! Pure data derived from an ELF header. The facts come from glibc: `open_verify` in
//! `elf/dl-load.c` (which header mismatches skip a file and which stop the load),
//! `elf_machine_matches_host` in each `sysdeps/*/dl-machine.h`, and `_dl_cache_check_flags` /
//! `_DL_CACHE_DEFAULT_ID` in each `sysdeps/unix/sysv/linux/*/dl-cache.h`.

use object::elf::{
    EF_ARM_ABI_FLOAT_HARD, EF_ARM_ABI_FLOAT_SOFT, EF_LARCH_ABI_DOUBLE_FLOAT,
    EF_LARCH_ABI_MODIFIER_MASK, EF_MIPS_ABI2, EF_MIPS_NAN2008, EF_RISCV_FLOAT_ABI,
    EF_RISCV_FLOAT_ABI_DOUBLE, ELFCLASS32, ELFCLASS64, ELFDATA2LSB, ELFDATA2MSB, ELFOSABI_GNU,
    ELFOSABI_SYSV, EM_386, EM_AARCH64, EM_ARM, EM_IA_64, EM_LOONGARCH, EM_MIPS, EM_PPC, EM_PPC64,
    EM_RISCV, EM_S390, EM_SPARC, EM_SPARC32PLUS, EM_SPARCV9, EM_X86_64, ET_DYN, ET_EXEC,
    EV_CURRENT,
};

/// The fields of an ELF file header the loader checks, decoded from its first bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawHeader {
    /// How many bytes were available (the loader needs a whole header of its own class).
    pub len: usize,
    /// Whether the file starts with `\x7fELF`.
    pub magic: bool,
    /// `EI_CLASS`.
    pub class: u8,
    /// `EI_DATA`.
    pub data: u8,
    /// `EI_VERSION`.
    pub ident_version: u8,
    /// `EI_OSABI`.
    pub osabi: u8,
    /// `EI_ABIVERSION`.
    pub abiversion: u8,
    /// Whether `EI_PAD` is all zero.
    pub pad_zero: bool,
    /// `e_type`.
    pub e_type: u16,
    /// `e_machine`.
    pub machine: u16,
    /// `e_version`.
    pub version: u32,
    /// `e_flags`.
    pub flags: u32,
    /// `e_phentsize`.
    pub phentsize: u16,
}

impl RawHeader {
    /// Whether `e_type` is one the loader maps: `ET_EXEC` or `ET_DYN`.
    pub fn is_loadable(&self) -> bool {
        matches!(self.e_type, ET_EXEC | ET_DYN)
    }

    /// Decodes the first bytes of a file (64 are enough for both classes). Fields that lie past
    /// the end of `head` read as zero.
    pub fn parse(head: &[u8]) -> RawHeader {
        let b = |i: usize| head.get(i).copied().unwrap_or(0);
        let class = b(4);
        let data = b(5);
        let u16_at = |i: usize| {
            let (x, y) = (b(i) as u16, b(i + 1) as u16);
            if data == ELFDATA2MSB {
                x << 8 | y
            } else {
                y << 8 | x
            }
        };
        let u32_at = |i: usize| {
            let v = [b(i), b(i + 1), b(i + 2), b(i + 3)];
            if data == ELFDATA2MSB {
                u32::from_be_bytes(v)
            } else {
                u32::from_le_bytes(v)
            }
        };
        let (flags_at, phentsize_at) = if class == ELFCLASS64 {
            (48, 54)
        } else {
            (36, 42)
        };
        RawHeader {
            len: head.len(),
            magic: head.starts_with(b"\x7fELF"),
            class,
            data,
            ident_version: b(6),
            osabi: b(7),
            abiversion: b(8),
            pad_zero: (9..16).all(|i| b(i) == 0),
            e_type: u16_at(16),
            machine: u16_at(18),
            version: u32_at(20),
            flags: u32_at(flags_at),
            phentsize: u16_at(phentsize_at),
        }
    }
}

/// Why the loader passes over a candidate file and goes on searching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// `ELFCLASS32` where `ELFCLASS64` is wanted or the reverse.
    WrongClass(u8),
    /// Another `e_machine` (or another float ABI of the same machine).
    WrongMachine(u16),
}

/// What the loader does with a file it opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The file is loaded.
    Accept,
    /// The file is silently passed over.
    Skip(SkipReason),
    /// The load fails.
    Fatal(LoadError),
}

/// Why the loader stops at a file it opened (`open_verify`); the messages are glibc's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Shorter than an ELF header of the loader's class.
    #[error("file too short")]
    TooShort,
    /// No `\x7fELF` magic (a linker script, a text file).
    #[error("invalid ELF header")]
    NotElf,
    /// Little-endian where the loader is big-endian.
    #[error("ELF file data encoding not big-endian")]
    NotBigEndian,
    /// Big-endian where the loader is little-endian.
    #[error("ELF file data encoding not little-endian")]
    NotLittleEndian,
    /// `EI_VERSION` is not `EV_CURRENT`.
    #[error("ELF file version ident does not match current one")]
    IdentVersion,
    /// `ELFOSABI_SYSV` with a non-zero `EI_ABIVERSION`.
    #[error("ELF file ABI version invalid")]
    AbiVersion,
    /// An OS ABI other than `ELFOSABI_SYSV` or `ELFOSABI_GNU`.
    #[error("ELF file OS ABI invalid")]
    OsAbi,
    /// `EI_PAD` is not all zero.
    #[error("nonzero padding in e_ident")]
    Padding,
    /// `e_version` is not `EV_CURRENT`.
    #[error("ELF file version does not match current one")]
    Version,
    /// Neither `ET_EXEC` nor `ET_DYN`.
    #[error("only ET_DYN and ET_EXEC can be loaded")]
    FileType,
    /// `e_phentsize` is not the size of a program header of the class.
    #[error("ELF file's phentsize not the expected size")]
    PhentSize,
}

/// The architecture a loader was built for, as far as library search cares: taken from the
/// program being explained (the loader must match it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// `ELFCLASS32` or `ELFCLASS64`.
    pub class: u8,
    /// `ELFDATA2LSB` or `ELFDATA2MSB`.
    pub data: u8,
    /// `e_machine`.
    pub machine: u16,
    /// The ABI bits of `e_flags` that select a loader (ARM float ABI, MIPS ABI and NaN mode,
    /// RISC-V and LoongArch float ABI); other bits are zero.
    pub abi_flags: u32,
}

impl Target {
    /// The target of a program with this header.
    pub fn of(h: &RawHeader) -> Target {
        let abi_flags = match h.machine {
            EM_ARM => {
                if h.flags & EF_ARM_ABI_FLOAT_SOFT != 0 && h.flags & EF_ARM_ABI_FLOAT_HARD == 0 {
                    EF_ARM_ABI_FLOAT_SOFT
                } else {
                    EF_ARM_ABI_FLOAT_HARD
                }
            }
            EM_MIPS => h.flags & (EF_MIPS_ABI2 | EF_MIPS_NAN2008),
            EM_RISCV => h.flags & EF_RISCV_FLOAT_ABI,
            EM_LOONGARCH => h.flags & EF_LARCH_ABI_MODIFIER_MASK,
            _ => 0,
        };
        Target {
            class: h.class,
            data: h.data,
            machine: h.machine,
            abi_flags,
        }
    }

    /// A short name: `x86_64`, `i386`, `aarch64`, `armhf`, ...
    pub fn name(&self) -> String {
        let le = self.data == ELFDATA2LSB;
        let s = match (self.machine, self.class) {
            (EM_X86_64, ELFCLASS64) => "x86_64",
            (EM_X86_64, _) => "x32",
            (EM_386, _) => "i386",
            (EM_AARCH64, ELFCLASS64) if le => "aarch64",
            (EM_AARCH64, ELFCLASS64) => "aarch64_be",
            (EM_AARCH64, _) => "aarch64_ilp32",
            (EM_ARM, _) if self.abi_flags == EF_ARM_ABI_FLOAT_SOFT => "armel",
            (EM_ARM, _) => "armhf",
            (EM_PPC64, _) if le => "ppc64le",
            (EM_PPC64, _) => "ppc64",
            (EM_PPC, _) => "ppc",
            (EM_S390, ELFCLASS64) => "s390x",
            (EM_S390, _) => "s390",
            (EM_RISCV, ELFCLASS64) => "riscv64",
            (EM_RISCV, _) => "riscv32",
            (EM_MIPS, ELFCLASS64) => "mips64",
            (EM_MIPS, _) if self.abi_flags & EF_MIPS_ABI2 != 0 => "mipsn32",
            (EM_MIPS, _) => "mips",
            (EM_LOONGARCH, _) => "loongarch64",
            (EM_SPARCV9, _) => "sparc64",
            (EM_SPARC | EM_SPARC32PLUS, _) => "sparc",
            (EM_IA_64, _) => "ia64",
            (m, c) => {
                return format!(
                    "machine {m} ELFCLASS{}",
                    if c == ELFCLASS64 { 64 } else { 32 }
                )
            }
        };
        s.to_string()
    }

    /// What `open_verify` does with a file whose header is `h`, for a loader of this target.
    pub fn verify(&self, h: &RawHeader) -> Verdict {
        let ehdr_size = if self.class == ELFCLASS64 { 64 } else { 52 };
        if h.len < ehdr_size {
            return Verdict::Fatal(LoadError::TooShort);
        }
        if !h.magic {
            return Verdict::Fatal(LoadError::NotElf);
        }
        if h.class != self.class {
            return Verdict::Skip(SkipReason::WrongClass(h.class));
        }
        if h.data != self.data {
            return Verdict::Fatal(if self.data == ELFDATA2MSB {
                LoadError::NotBigEndian
            } else {
                LoadError::NotLittleEndian
            });
        }
        if h.ident_version != EV_CURRENT {
            return Verdict::Fatal(LoadError::IdentVersion);
        }
        // Linux accepts ELFOSABI_SYSV and ELFOSABI_GNU; SYSV requires ABI version 0.
        match h.osabi {
            ELFOSABI_SYSV if h.abiversion != 0 => return Verdict::Fatal(LoadError::AbiVersion),
            ELFOSABI_SYSV | ELFOSABI_GNU => {}
            _ => return Verdict::Fatal(LoadError::OsAbi),
        }
        if !h.pad_zero {
            return Verdict::Fatal(LoadError::Padding);
        }
        if h.version != u32::from(EV_CURRENT) {
            return Verdict::Fatal(LoadError::Version);
        }
        if !self.machine_matches(h) {
            return Verdict::Skip(SkipReason::WrongMachine(h.machine));
        }
        if !h.is_loadable() {
            return Verdict::Fatal(LoadError::FileType);
        }
        let phent = if self.class == ELFCLASS64 { 56 } else { 32 };
        if h.phentsize != phent {
            return Verdict::Fatal(LoadError::PhentSize);
        }
        Verdict::Accept
    }

    /// `elf_machine_matches_host`: the machine, and where the loader cares, the ABI in `e_flags`.
    fn machine_matches(&self, h: &RawHeader) -> bool {
        let other = Target::of(h);
        match self.machine {
            EM_SPARC | EM_SPARC32PLUS => matches!(h.machine, EM_SPARC | EM_SPARC32PLUS),
            // An ARM loader accepts objects of its float ABI and unmarked ones.
            EM_ARM => {
                h.machine == EM_ARM
                    && (h.flags & (EF_ARM_ABI_FLOAT_SOFT | EF_ARM_ABI_FLOAT_HARD) == 0
                        || other.abi_flags == self.abi_flags)
            }
            EM_MIPS => h.machine == EM_MIPS && other.abi_flags == self.abi_flags,
            EM_RISCV | EM_LOONGARCH => {
                h.machine == self.machine && other.abi_flags == self.abi_flags
            }
            m => h.machine == m,
        }
    }

    /// The `ld.so.cache` entry flags this loader accepts (`_dl_cache_check_flags`).
    pub fn cache_flags(&self) -> Vec<i32> {
        const LIBC6: i32 = 0x0003;
        let only = |id: i32| vec![id];
        let c64 = self.class == ELFCLASS64;
        match self.machine {
            EM_X86_64 if c64 => only(0x0300 | LIBC6),
            EM_X86_64 => only(0x0800 | LIBC6),
            EM_AARCH64 if c64 => only(0x0a00 | LIBC6),
            EM_PPC64 => only(0x0500 | LIBC6),
            EM_S390 if c64 => only(0x0400 | LIBC6),
            EM_SPARCV9 => only(0x0100 | LIBC6),
            EM_IA_64 => only(0x0200 | LIBC6),
            EM_ARM if self.abi_flags == EF_ARM_ABI_FLOAT_SOFT => vec![0x0b00 | LIBC6, LIBC6],
            EM_ARM => vec![0x0900 | LIBC6, LIBC6],
            EM_RISCV if self.abi_flags == EF_RISCV_FLOAT_ABI_DOUBLE => only(0x1000 | LIBC6),
            EM_RISCV => only(0x0f00 | LIBC6),
            EM_LOONGARCH if self.abi_flags == EF_LARCH_ABI_DOUBLE_FLOAT => only(0x1200 | LIBC6),
            EM_LOONGARCH => only(0x1100 | LIBC6),
            EM_MIPS => {
                let nan2008 = self.abi_flags & EF_MIPS_NAN2008 != 0;
                let n32 = self.abi_flags & EF_MIPS_ABI2 != 0;
                match (c64, n32, nan2008) {
                    (true, _, false) => only(0x0700 | LIBC6),
                    (true, _, true) => only(0x0e00 | LIBC6),
                    (false, true, false) => only(0x0600 | LIBC6),
                    (false, true, true) => only(0x0d00 | LIBC6),
                    (false, false, true) => only(0x0c00 | LIBC6),
                    (false, false, false) => vec![1, LIBC6],
                }
            }
            _ => vec![1, LIBC6],
        }
    }

    /// Debian's multiarch triplet for this target, if it has one.
    pub fn triplet(&self) -> Option<&'static str> {
        let le = self.data == ELFDATA2LSB;
        Some(match (self.machine, self.class) {
            (EM_X86_64, ELFCLASS64) => "x86_64-linux-gnu",
            (EM_X86_64, _) => "x86_64-linux-gnux32",
            (EM_386, _) => "i386-linux-gnu",
            (EM_AARCH64, ELFCLASS64) if le => "aarch64-linux-gnu",
            (EM_ARM, _) if self.abi_flags == EF_ARM_ABI_FLOAT_SOFT => "arm-linux-gnueabi",
            (EM_ARM, _) => "arm-linux-gnueabihf",
            (EM_PPC64, _) if le => "powerpc64le-linux-gnu",
            (EM_PPC64, _) => "powerpc64-linux-gnu",
            (EM_PPC, _) => "powerpc-linux-gnu",
            (EM_S390, ELFCLASS64) => "s390x-linux-gnu",
            (EM_RISCV, ELFCLASS64) => "riscv64-linux-gnu",
            (EM_MIPS, ELFCLASS64) if le => "mips64el-linux-gnuabi64",
            (EM_MIPS, ELFCLASS32) if le && self.abi_flags & EF_MIPS_ABI2 == 0 => "mipsel-linux-gnu",
            (EM_MIPS, ELFCLASS32) if self.abi_flags & EF_MIPS_ABI2 == 0 => "mips-linux-gnu",
            (EM_LOONGARCH, ELFCLASS64) => "loongarch64-linux-gnu",
            (EM_SPARCV9, _) => "sparc64-linux-gnu",
            _ => return None,
        })
    }

    /// Upstream glibc's `slibdir` for this target (`libdir` is the same under `/usr`).
    fn upstream_slibdir(&self) -> &'static str {
        let c64 = self.class == ELFCLASS64;
        match self.machine {
            EM_X86_64 if c64 => "/lib64",
            EM_X86_64 => "/libx32",
            EM_AARCH64 | EM_PPC64 | EM_SPARCV9 | EM_LOONGARCH if c64 => "/lib64",
            EM_S390 if c64 => "/lib64",
            EM_RISCV if c64 && self.abi_flags == EF_RISCV_FLOAT_ABI_DOUBLE => "/lib64/lp64d",
            EM_RISCV if c64 => "/lib64/lp64",
            EM_RISCV if self.abi_flags == EF_RISCV_FLOAT_ABI_DOUBLE => "/lib32/ilp32d",
            EM_RISCV => "/lib32/ilp32",
            EM_MIPS if c64 => "/lib64",
            EM_MIPS if self.abi_flags & EF_MIPS_ABI2 != 0 => "/lib32",
            _ => "/lib",
        }
    }

    /// The loader's built-in directories when they cannot be read from the loader itself:
    /// Debian's multiarch layout (`/lib/<triplet>/`, `/usr/lib/<triplet>/`, `/lib/`, `/usr/lib/`)
    /// when `multiarch`, else upstream glibc's `slibdir` and `libdir`. Each ends in `/`.
    pub fn fallback_system_dirs(&self, multiarch: bool) -> Vec<Vec<u8>> {
        match self.triplet().filter(|_| multiarch) {
            Some(t) => vec![
                format!("/lib/{t}/").into_bytes(),
                format!("/usr/lib/{t}/").into_bytes(),
                b"/lib/".to_vec(),
                b"/usr/lib/".to_vec(),
            ],
            None => {
                let s = self.upstream_slibdir();
                vec![
                    format!("{s}/").into_bytes(),
                    format!("/usr{s}/").into_bytes(),
                ]
            }
        }
    }

    /// The usual `PT_INTERP` of programs for this target (used for files that have none).
    pub fn default_interpreter(&self) -> Option<&'static str> {
        let le = self.data == ELFDATA2LSB;
        let c64 = self.class == ELFCLASS64;
        Some(match self.machine {
            EM_X86_64 if c64 => "/lib64/ld-linux-x86-64.so.2",
            EM_X86_64 => "/libx32/ld-linux-x32.so.2",
            EM_386 => "/lib/ld-linux.so.2",
            EM_AARCH64 if c64 && le => "/lib/ld-linux-aarch64.so.1",
            EM_AARCH64 if c64 => "/lib/ld-linux-aarch64_be.so.1",
            EM_ARM if self.abi_flags == EF_ARM_ABI_FLOAT_SOFT => "/lib/ld-linux.so.3",
            EM_ARM => "/lib/ld-linux-armhf.so.3",
            EM_PPC64 if le => "/lib64/ld64.so.2",
            EM_PPC64 => "/lib64/ld64.so.1",
            EM_PPC => "/lib/ld.so.1",
            EM_S390 if c64 => "/lib/ld64.so.1",
            EM_RISCV if c64 && self.abi_flags == EF_RISCV_FLOAT_ABI_DOUBLE => {
                "/lib/ld-linux-riscv64-lp64d.so.1"
            }
            EM_RISCV if c64 => "/lib/ld-linux-riscv64-lp64.so.1",
            EM_MIPS if c64 => "/lib64/ld.so.1",
            EM_MIPS if self.abi_flags & EF_MIPS_ABI2 != 0 => "/lib32/ld.so.1",
            EM_MIPS => "/lib/ld.so.1",
            EM_LOONGARCH => "/lib64/ld-linux-loongarch-lp64d.so.1",
            EM_SPARCV9 => "/lib64/ld-linux.so.2",
            _ => return None,
        })
    }

    /// The value of `$PLATFORM` the kernel usually passes (`AT_PLATFORM`) where it does not depend
    /// on the CPU model; `None` where it does or the kernel passes none.
    pub fn default_platform(&self) -> Option<&'static str> {
        match (self.machine, self.class) {
            (EM_X86_64, _) => Some("x86_64"),
            (EM_386, _) => Some("i686"),
            (EM_AARCH64, ELFCLASS64) if self.data == ELFDATA2LSB => Some("aarch64"),
            (EM_AARCH64, ELFCLASS64) => Some("aarch64_be"),
            (EM_ARM, _) => Some("v7l"),
            _ => None,
        }
    }

    /// The `glibc-hwcaps` subdirectories a loader of this target may search first, depending on
    /// the CPU (not modelled; `explain` notes files found there).
    pub fn hwcaps_subdirs(&self) -> &'static [&'static str] {
        match (self.machine, self.class) {
            (EM_X86_64, ELFCLASS64) => &["x86-64-v4", "x86-64-v3", "x86-64-v2"],
            (EM_PPC64, _) if self.data == ELFDATA2LSB => &["power10", "power9"],
            (EM_S390, ELFCLASS64) => &["z16", "z15", "z14", "z13"],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(class: u8, data: u8, machine: u16, flags: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = data;
        h[6] = 1;
        let put16 = |h: &mut Vec<u8>, at: usize, v: u16| {
            let b = if data == ELFDATA2MSB {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            };
            h[at..at + 2].copy_from_slice(&b);
        };
        let put32 = |h: &mut Vec<u8>, at: usize, v: u32| {
            let b = if data == ELFDATA2MSB {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            };
            h[at..at + 4].copy_from_slice(&b);
        };
        put16(&mut h, 16, 3);
        put16(&mut h, 18, machine);
        put32(&mut h, 20, 1);
        if class == ELFCLASS64 {
            put32(&mut h, 48, flags);
            put16(&mut h, 54, 56);
        } else {
            put32(&mut h, 36, flags);
            put16(&mut h, 42, 32);
        }
        h
    }

    fn target(class: u8, data: u8, machine: u16, flags: u32) -> Target {
        Target::of(&RawHeader::parse(&header(class, data, machine, flags)))
    }

    #[test]
    fn the_loader_skips_other_classes_and_machines_and_stops_on_garbage() {
        let t = target(ELFCLASS64, ELFDATA2LSB, EM_X86_64, 0);
        let v = |b: Vec<u8>| t.verify(&RawHeader::parse(&b));
        assert_eq!(
            v(header(ELFCLASS64, ELFDATA2LSB, EM_X86_64, 0)),
            Verdict::Accept
        );
        assert_eq!(
            v(header(ELFCLASS32, ELFDATA2LSB, EM_386, 0)),
            Verdict::Skip(SkipReason::WrongClass(ELFCLASS32))
        );
        assert_eq!(
            v(header(ELFCLASS64, ELFDATA2LSB, EM_AARCH64, 0)),
            Verdict::Skip(SkipReason::WrongMachine(EM_AARCH64))
        );
        assert!(
            matches!(v(b"/* GNU ld script */ INPUT(libfoo.so.1) ...................................".to_vec()), Verdict::Fatal(e) if e == LoadError::NotElf && e.to_string() == "invalid ELF header")
        );
        assert!(
            matches!(v(b"\x7fELF".to_vec()), Verdict::Fatal(e) if e.to_string() == "file too short")
        );
        assert!(matches!(
            v(header(ELFCLASS64, ELFDATA2MSB, EM_X86_64, 0)),
            Verdict::Fatal(_)
        ));
    }

    #[test]
    fn arm_float_abis_do_not_mix_but_unmarked_objects_do() {
        let hf = target(ELFCLASS32, ELFDATA2LSB, EM_ARM, 0x0500_0400);
        assert_eq!(hf.name(), "armhf");
        let v = |f| {
            hf.verify(&RawHeader::parse(&header(
                ELFCLASS32,
                ELFDATA2LSB,
                EM_ARM,
                f,
            )))
        };
        assert_eq!(v(0x0500_0400), Verdict::Accept);
        assert_eq!(v(0x0500_0000), Verdict::Accept);
        assert_eq!(
            v(0x0500_0200),
            Verdict::Skip(SkipReason::WrongMachine(EM_ARM))
        );
        assert_eq!(hf.cache_flags(), vec![0x903, 3]);
    }

    #[test]
    fn cache_flags_follow_glibc() {
        assert_eq!(
            target(ELFCLASS64, ELFDATA2LSB, EM_X86_64, 0).cache_flags(),
            vec![0x303]
        );
        assert_eq!(
            target(ELFCLASS32, ELFDATA2LSB, EM_X86_64, 0).cache_flags(),
            vec![0x803]
        );
        assert_eq!(
            target(ELFCLASS32, ELFDATA2LSB, EM_386, 0).cache_flags(),
            vec![1, 3]
        );
        assert_eq!(
            target(ELFCLASS64, ELFDATA2LSB, EM_AARCH64, 0).cache_flags(),
            vec![0xa03]
        );
        assert_eq!(
            target(ELFCLASS64, ELFDATA2LSB, EM_RISCV, 5).cache_flags(),
            vec![0x1003]
        );
    }

    #[test]
    fn fallback_directories() {
        let t = target(ELFCLASS64, ELFDATA2LSB, EM_X86_64, 0);
        assert_eq!(
            t.fallback_system_dirs(true),
            vec![
                b"/lib/x86_64-linux-gnu/".to_vec(),
                b"/usr/lib/x86_64-linux-gnu/".to_vec(),
                b"/lib/".to_vec(),
                b"/usr/lib/".to_vec()
            ]
        );
        assert_eq!(
            t.fallback_system_dirs(false),
            vec![b"/lib64/".to_vec(), b"/usr/lib64/".to_vec()]
        );
    }
}
