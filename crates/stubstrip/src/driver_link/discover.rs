//! Which driver runs, and where its libraries are. Pure: everything is read through a
//! [`DriverFs`].
//!
//! Two layouts:
//!
//! - **Versioned** (Debian, Ubuntu, Fedora, containers): the driver's files carry its version,
//!   `libcuda.so.550.54.14`. The version is the kernel module's, from `/proc/driver/nvidia/version`;
//!   the files are looked for in the directories the host's `ld.so.cache` names for the driver's
//!   libraries, then in [`LIBRARY_DIRS`]. Every `lib*.so.VERSION` file there is the driver's:
//!   the suffix is the driver's own (`.so.550.54.14`), so no list of names can fall behind a
//!   newer driver.
//! - **A directory of the driver's own** (WSL2's [`WSL_DIR`], which Windows fills and where no
//!   kernel module file exists; Jetson's [`TEGRA_DIRS`]): every library in it is the driver's,
//!   named without the version.
//!
//! Each library is linked under its `DT_SONAME` (its file name when that cannot be read), and
//! `libcuda.so.1` also as `libcuda.so` ([`DEV_NAMES`]).

use std::collections::BTreeMap;

use ldso_model::fsview::{dirname, Bytes, Probe};
use ldso_model::ldcache::LdCache;

use super::{base, lossy, DriverFs, Entry, Refusal};
use crate::driver::DRIVER_LIBRARIES;

/// `EI_CLASS` of a 32-bit ELF file (the `object` crate is only a test dependency here).
const ELFCLASS32: u8 = 1;

/// The kernel module's version file.
pub const PROC_VERSION: &str = "/proc/driver/nvidia/version";
/// The host's loader cache.
pub const LD_SO_CACHE: &str = "/etc/ld.so.cache";
/// NixOS's mark: there, the driver link is NixOS's.
pub const NIXOS_MARK: &str = "/etc/NIXOS";
/// Jetson's release file (L4T), whose release and revision are the driver's version.
pub const TEGRA_RELEASE: &str = "/etc/nv_tegra_release";
/// Where distributions and containers put the driver's libraries, after the cache's
/// directories: Debian and Ubuntu (multiarch), Fedora (`lib64`, 32-bit in `lib`), Arch (`lib`,
/// `lib32`), and the NVIDIA container toolkit (`/usr/local/nvidia`).
pub const LIBRARY_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/i386-linux-gnu",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
];
/// WSL2: the Windows driver's Linux libraries, mounted by WSL.
pub const WSL_DIR: &str = "/usr/lib/wsl/lib";
/// Jetson: the driver's libraries (L4T up to JetPack 5; JetPack 6's `nvidia`).
pub const TEGRA_DIRS: &[&str] = &[
    "/usr/lib/aarch64-linux-gnu/tegra",
    "/usr/lib/aarch64-linux-gnu/nvidia",
];
/// Development names programs link by at run time, for a SONAME: Triton compiles its launcher
/// when a program runs, with `-L/run/opengl-driver/lib -lcuda`, and the linker looks for
/// `libcuda.so`.
pub const DEV_NAMES: &[(&str, &str)] = &[("libcuda.so.1", "libcuda.so")];

/// Where the version came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionFrom {
    /// The loaded kernel module (`/proc/driver/nvidia/version`).
    KernelModule,
    /// No kernel module loaded; the only driver installed.
    OnlyInstalled,
    /// Jetson's release file.
    TegraRelease,
    /// WSL2: the Windows host's driver, whose version Linux does not see.
    WslHost,
}

/// One library of the driver, as it goes into a driver link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverLib {
    /// The file (symlinks resolved).
    pub file: Bytes,
    /// The names it is linked under: its SONAME, then its development name, if any.
    pub names: Vec<Bytes>,
    /// Whether it is a 32-bit library (for the 32-bit driver link).
    pub bits32: bool,
}

/// The running driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Driver {
    /// Its version, when known.
    pub version: Option<String>,
    /// Where the version came from.
    pub from: VersionFrom,
    /// Its libraries, in the order they were found.
    pub libs: Vec<DriverLib>,
    /// What the user should know (a module not loaded, a library left out).
    pub notes: Vec<String>,
}

impl Driver {
    /// `driver 550.54.14`, or for WSL2 `the WSL2 host's driver`.
    pub fn name(&self) -> String {
        match &self.version {
            Some(v) => format!("driver {v}"),
            None => "the WSL2 host's driver".to_string(),
        }
    }

    /// Where its libcuda is, else its first library's directory.
    pub fn location(&self) -> String {
        let cuda = self
            .libs
            .iter()
            .find(|l| l.names.iter().any(|n| n == b"libcuda.so.1"))
            .or(self.libs.first());
        cuda.map(|l| lossy(&dirname(&l.file))).unwrap_or_default()
    }

    /// Where the version was read, in words.
    pub fn version_source(&self) -> String {
        match self.from {
            VersionFrom::KernelModule => format!("the kernel module's, {PROC_VERSION}"),
            VersionFrom::OnlyInstalled => "the only one installed; no kernel module loaded".into(),
            VersionFrom::TegraRelease => format!("Jetson's, {TEGRA_RELEASE}"),
            VersionFrom::WslHost => format!("WSL2, {WSL_DIR}"),
        }
    }
}

/// Whether `s` is an NVIDIA driver version: dot-separated numbers, at least two, the first of
/// three digits or more (`550.54.14`, `390.157`); `1.1` (WSL2's and Jetson's `libcuda.so.1.1`)
/// and library versions such as `6.0.30` are not.
pub fn is_driver_version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 2
        && parts[0].len() >= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
}

/// The version in `/proc/driver/nvidia/version`'s first line (`NVRM version: NVIDIA UNIX x86_64
/// Kernel Module  550.54.14  Thu Feb 22 …`, or `… Open Kernel Module for x86_64  550.54.14 …`).
pub fn kernel_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|w| is_driver_version(w))
        .map(str::to_string)
}

/// The version in Jetson's `/etc/nv_tegra_release` (`# R35 (release), REVISION: 4.1, …` is
/// `35.4.1`).
pub fn tegra_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    let release = line.split_whitespace().find_map(|w| {
        let n = w.strip_prefix('R')?;
        (!n.is_empty() && n.bytes().all(|c| c.is_ascii_digit())).then_some(n)
    })?;
    let revision = line.split("REVISION:").nth(1)?.split(',').next()?.trim();
    Some(format!("{release}.{revision}"))
}

/// The driver version in a file name `lib*.so.VERSION`, if it carries one.
pub fn file_version(name: &[u8]) -> Option<&str> {
    let name = std::str::from_utf8(name).ok()?;
    let (lib, version) = name.split_once(".so.")?;
    (lib.starts_with("lib") && is_driver_version(version)).then_some(version)
}

/// The directories to look in, in order and each once: those of the driver's libraries in the
/// host's `ld.so.cache` (as listed and with symlinks resolved: Debian's
/// `/usr/lib/x86_64-linux-gnu/nvidia/current`), then [`LIBRARY_DIRS`].
fn search_dirs(fs: &dyn DriverFs, notes: &mut Vec<String>) -> Vec<Bytes> {
    let mut dirs: Vec<Bytes> = Vec::new();
    let mut add = |d: Bytes| {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    };
    // A container or a minimal image may have no cache: the fixed places still count.
    if let Ok(bytes) = fs.read_small(LD_SO_CACHE.as_bytes()) {
        match LdCache::parse(&bytes, false) {
            Ok(cache) => {
                for e in cache.entries() {
                    let key = lossy(&e.key);
                    if !DRIVER_LIBRARIES.contains(&key.as_str()) {
                        continue;
                    }
                    add(dirname(&e.value));
                    if let Some(c) = fs.canonical(&e.value) {
                        add(dirname(&c));
                    }
                }
            }
            Err(e) => notes.push(format!("{LD_SO_CACHE} not read: {e}")),
        }
    }
    for d in LIBRARY_DIRS {
        add(d.as_bytes().to_vec());
    }
    dirs
}

/// A file that is there (a regular file, or a symlink to one): its path with symlinks resolved
/// and whether it is 32-bit. `None` for anything else, or a file that is not ELF.
fn elf_file(fs: &dyn DriverFs, path: &[u8]) -> Option<(Bytes, bool)> {
    if !matches!(fs.lstat(path), Entry::File | Entry::Link(_)) {
        return None;
    }
    let real = fs.canonical(path)?;
    match fs.probe(&real) {
        Probe::File(_, h) if h.magic => Some((real, h.class == ELFCLASS32)),
        _ => None,
    }
}

/// The names a library is linked under: its SONAME (else `name`), and its development name.
fn names_of(fs: &dyn DriverFs, real: &[u8], name: &[u8]) -> Vec<Bytes> {
    let soname = fs.soname(real).unwrap_or_else(|| name.to_vec());
    let mut names = vec![soname.clone()];
    for (so, dev) in DEV_NAMES {
        if soname == so.as_bytes() {
            names.push(dev.as_bytes().to_vec());
        }
    }
    names
}

/// Every library of `version` (its files named `lib*.so.VERSION`) in `dirs`, each file once.
fn versioned_libs(fs: &dyn DriverFs, dirs: &[Bytes], version: &str) -> Vec<DriverLib> {
    let mut libs: Vec<DriverLib> = Vec::new();
    for d in dirs {
        for name in fs.list(d).unwrap_or_default() {
            if file_version(&name) != Some(version) {
                continue;
            }
            let path = join(d, &name);
            let Some((real, bits32)) = elf_file(fs, &path) else {
                continue;
            };
            if libs.iter().any(|l| l.file == real) {
                continue;
            }
            libs.push(DriverLib {
                names: names_of(fs, &real, &name),
                file: real,
                bits32,
            });
        }
    }
    libs
}

/// Every library in a directory of the driver's own (WSL2, Jetson): regular files named
/// `lib*.so*`; where several files have one SONAME (WSL2's copies `libcuda.so`, `libcuda.so.1`,
/// `libcuda.so.1.1`), the one named by it, else the first.
fn directory_libs(fs: &dyn DriverFs, dir: &[u8]) -> Vec<DriverLib> {
    let mut libs: Vec<DriverLib> = Vec::new();
    for name in fs.list(dir).unwrap_or_default() {
        if super::library_of(&name).is_none() || fs.lstat(&join(dir, &name)) != Entry::File {
            continue;
        }
        let Some((real, bits32)) = elf_file(fs, &join(dir, &name)) else {
            continue;
        };
        let lib = DriverLib {
            names: names_of(fs, &real, &name),
            file: real,
            bits32,
        };
        match libs.iter_mut().find(|l| l.names[0] == lib.names[0]) {
            Some(l) if base(&lib.file) == lib.names[0].as_slice() => *l = lib,
            Some(_) => {}
            None => libs.push(lib),
        }
    }
    libs
}

/// `dir/name`.
pub fn join(dir: &[u8], name: &[u8]) -> Bytes {
    let mut p = dir.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// The first directory of `dirs` that holds a `libcuda.so*` file.
fn with_libcuda(fs: &dyn DriverFs, dirs: &[&str]) -> Option<Bytes> {
    dirs.iter().map(|d| d.as_bytes().to_vec()).find(|d| {
        fs.list(d)
            .unwrap_or_default()
            .iter()
            .any(|n| n.starts_with(b"libcuda.so") && elf_file(fs, &join(d, n)).is_some())
    })
}

/// The running driver: its version and libraries; or why none can be linked.
pub fn discover(fs: &dyn DriverFs) -> Result<Driver, Refusal> {
    if fs.lstat(NIXOS_MARK.as_bytes()) != Entry::Missing {
        return Err(Refusal::NixOs(NIXOS_MARK.into()));
    }
    let mut notes = Vec::new();
    let kernel = fs
        .read_small(PROC_VERSION.as_bytes())
        .ok()
        .and_then(|b| kernel_version(&String::from_utf8_lossy(&b)));
    let dirs = search_dirs(fs, &mut notes);
    // Each version with a libcuda file, and the first place it is.
    let mut versions: BTreeMap<String, Bytes> = BTreeMap::new();
    for d in &dirs {
        for name in fs.list(d).unwrap_or_default() {
            if !name.starts_with(b"libcuda.so.") {
                continue;
            }
            if let Some(v) = file_version(&name) {
                if elf_file(fs, &join(d, &name)).is_some() {
                    versions
                        .entry(v.to_string())
                        .or_insert_with(|| join(d, &name));
                }
            }
        }
    }
    let found = |versions: &BTreeMap<String, Bytes>| {
        versions
            .iter()
            .map(|(v, p)| format!("{v} at {}", lossy(p)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let tegra = with_libcuda(fs, TEGRA_DIRS);
    let versioned = |version: String, from: VersionFrom, notes: Vec<String>| Driver {
        libs: versioned_libs(fs, &dirs, &version),
        version: Some(version),
        from,
        notes,
    };
    let own_dir =
        |dir: &[u8], version: Option<String>, from: VersionFrom, notes: Vec<String>| Driver {
            libs: directory_libs(fs, dir),
            version,
            from,
            notes,
        };
    match kernel {
        Some(k) if versions.contains_key(&k) => Ok(versioned(k, VersionFrom::KernelModule, notes)),
        // Jetson with NVIDIA's open kernel module: the module's version, the tegra directory.
        Some(k) if versions.is_empty() && tegra.is_some() => Ok(own_dir(
            &tegra.unwrap_or_default(),
            Some(k),
            VersionFrom::KernelModule,
            notes,
        )),
        Some(k) if !versions.is_empty() => Err(Refusal::Mismatch {
            libraries: versions.keys().cloned().collect::<Vec<_>>().join(", "),
            found: found(&versions),
            kernel: k,
            proc: PROC_VERSION.into(),
        }),
        None if with_libcuda(fs, &[WSL_DIR]).is_some() => Ok(own_dir(
            WSL_DIR.as_bytes(),
            None,
            VersionFrom::WslHost,
            notes,
        )),
        None if tegra.is_some() => {
            let version = fs
                .read_small(TEGRA_RELEASE.as_bytes())
                .ok()
                .and_then(|b| tegra_version(&String::from_utf8_lossy(&b)));
            if version.is_none() {
                notes.push(format!("{TEGRA_RELEASE} does not give the version"));
            }
            Ok(own_dir(
                &tegra.unwrap_or_default(),
                version,
                VersionFrom::TegraRelease,
                notes,
            ))
        }
        None if versions.len() == 1 => {
            let v = versions.keys().next().cloned().unwrap_or_default();
            notes.push(format!(
                "no kernel module is loaded ({PROC_VERSION} is missing): linked the one driver \
                 installed; CUDA needs the module loaded"
            ));
            Ok(versioned(v, VersionFrom::OnlyInstalled, notes))
        }
        None if versions.len() > 1 => Err(Refusal::TwoVersions {
            found: found(&versions),
            proc: PROC_VERSION.into(),
        }),
        _ => Err(Refusal::NoDriver {
            searched: LIBRARY_DIRS.join(", "),
            special: std::iter::once(WSL_DIR)
                .chain(TEGRA_DIRS.iter().copied())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use ldso_model::fsview::ElfInfo;
    use ldso_model::memfs::MemFs;
    use object::elf::{EM_386, EM_AARCH64};
    const _: () = assert!(ELFCLASS32 == object::elf::ELFCLASS32);

    /// The first line of `/proc/driver/nvidia/version` for `version`.
    pub fn proc_line(version: &str) -> String {
        format!(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Thu Feb 22 01:44:30 UTC 2024\n\
             GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
        )
    }

    fn so(soname: &str) -> ElfInfo {
        ElfInfo {
            soname: Some(soname.as_bytes().to_vec()),
            dynamic: true,
            ..ElfInfo::default()
        }
    }

    /// The driver's files as its installer lays them out in `dir` (`lib*.so.VERSION`, and the
    /// SONAME links ldconfig makes).
    pub fn install(fs: &mut MemFs, dir: &str, version: &str) {
        for (file, soname) in [
            ("libcuda", "libcuda.so.1"),
            ("libnvidia-ml", "libnvidia-ml.so.1"),
            ("libnvidia-ptxjitcompiler", "libnvidia-ptxjitcompiler.so.1"),
            ("libnvidia-nvvm", "libnvidia-nvvm.so.4"),
        ] {
            let path = format!("{dir}/{file}.so.{version}");
            fs.lib(&path, so(soname));
            fs.link(&format!("{dir}/{soname}"), &format!("{file}.so.{version}"));
        }
        // A library named by the version (needed by the GL ones), and one that is not the
        // driver's at all.
        let glcore = format!("libnvidia-glcore.so.{version}");
        fs.lib(&format!("{dir}/{glcore}"), so(&glcore));
        fs.lib(&format!("{dir}/libz.so.1.2.13"), so("libz.so.1"));
    }

    /// A 32-bit copy of the driver's libcuda in `dir`.
    pub fn install32(fs: &mut MemFs, dir: &str, version: &str) {
        fs.elf(
            &format!("{dir}/libcuda.so.{version}"),
            ELFCLASS32,
            EM_386,
            so("libcuda.so.1"),
        );
    }

    fn names(d: &Driver) -> Vec<(String, String, bool)> {
        let mut v: Vec<(String, String, bool)> = d
            .libs
            .iter()
            .flat_map(|l| {
                l.names
                    .iter()
                    .map(|n| (lossy(n), lossy(&l.file), l.bits32))
                    .collect::<Vec<_>>()
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn versions_are_the_drivers() {
        assert!(is_driver_version("550.54.14"));
        assert!(is_driver_version("390.157"));
        assert!(!is_driver_version("1.1"));
        assert!(!is_driver_version("6.0.30"));
        assert!(!is_driver_version("550"));
        assert!(!is_driver_version("550.54.x"));
        assert_eq!(
            kernel_version(&proc_line("550.54.14")).as_deref(),
            Some("550.54.14")
        );
        assert_eq!(
            kernel_version(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Nov 11 2025\n"
            )
            .as_deref(),
            Some("580.159.04")
        );
        assert_eq!(kernel_version("garbage"), None);
        assert_eq!(
            tegra_version("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023\n").as_deref(),
            Some("35.4.1")
        );
        assert_eq!(file_version(b"libcuda.so.550.54.14"), Some("550.54.14"));
        assert_eq!(file_version(b"libcuda.so.1"), None);
        assert_eq!(file_version(b"libz.so.1.2.13"), None);
    }

    #[test]
    fn debian_and_ubuntu_multiarch_with_the_32_bit_set() {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib/x86_64-linux-gnu", "550.54.14");
        install32(&mut fs, "/usr/lib/i386-linux-gnu", "550.54.14");
        fs.data(PROC_VERSION, proc_line("550.54.14").as_bytes());
        let d = discover(&fs).unwrap();
        assert_eq!(d.version.as_deref(), Some("550.54.14"));
        assert_eq!(d.from, VersionFrom::KernelModule);
        assert_eq!(d.location(), "/usr/lib/x86_64-linux-gnu");
        let x = "/usr/lib/x86_64-linux-gnu";
        let want: Vec<(String, String, bool)> = vec![
            (
                "libcuda.so",
                "/usr/lib/i386-linux-gnu/libcuda.so.550.54.14".into(),
                true,
            ),
            ("libcuda.so", format!("{x}/libcuda.so.550.54.14"), false),
            (
                "libcuda.so.1",
                "/usr/lib/i386-linux-gnu/libcuda.so.550.54.14".into(),
                true,
            ),
            ("libcuda.so.1", format!("{x}/libcuda.so.550.54.14"), false),
            (
                "libnvidia-glcore.so.550.54.14",
                format!("{x}/libnvidia-glcore.so.550.54.14"),
                false,
            ),
            (
                "libnvidia-ml.so.1",
                format!("{x}/libnvidia-ml.so.550.54.14"),
                false,
            ),
            (
                "libnvidia-nvvm.so.4",
                format!("{x}/libnvidia-nvvm.so.550.54.14"),
                false,
            ),
            (
                "libnvidia-ptxjitcompiler.so.1",
                format!("{x}/libnvidia-ptxjitcompiler.so.550.54.14"),
                false,
            ),
        ]
        .into_iter()
        .map(|(a, b, c)| (a.to_string(), b, c))
        .collect();
        assert_eq!(names(&d), want);
    }

    #[test]
    fn debian_through_the_cache_into_nvidia_current() {
        // Debian's packages: the files in nvidia/current, the SONAME links in the multiarch
        // directory through /etc/alternatives; ld.so.cache lists the links.
        let mut fs = MemFs::default();
        let cur = "/usr/lib/x86_64-linux-gnu/nvidia/current";
        install(&mut fs, cur, "535.183.01");
        fs.link(
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu",
        );
        fs.link(
            "/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu",
            &format!("{cur}/libcuda.so.1"),
        );
        let cache = ldso_model::ldcache::build(&[(
            0x303,
            "libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            0,
        )]);
        fs.data(LD_SO_CACHE, &cache);
        fs.data(PROC_VERSION, proc_line("535.183.01").as_bytes());
        let d = discover(&fs).unwrap();
        assert_eq!(d.location(), cur);
        assert_eq!(d.libs.len(), 5, "{:?}", d.libs);
    }

    #[test]
    fn fedora_lib64_and_32_bit_lib() {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib64", "565.57.01");
        install32(&mut fs, "/usr/lib", "565.57.01");
        fs.data(PROC_VERSION, proc_line("565.57.01").as_bytes());
        let d = discover(&fs).unwrap();
        assert_eq!(d.location(), "/usr/lib64");
        let bits32: Vec<_> = d.libs.iter().filter(|l| l.bits32).collect();
        assert_eq!(bits32.len(), 1);
        assert_eq!(bits32[0].file, b"/usr/lib/libcuda.so.565.57.01");
    }

    #[test]
    fn a_container_with_the_toolkits_mounts() {
        // The NVIDIA container toolkit mounts the host's files into /usr/local/nvidia/lib64 (and
        // often /usr/lib/x86_64-linux-gnu too: the same files, taken once).
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/local/nvidia/lib64", "580.159.04");
        fs.data(PROC_VERSION, proc_line("580.159.04").as_bytes());
        let d = discover(&fs).unwrap();
        assert_eq!(d.location(), "/usr/local/nvidia/lib64");
        assert_eq!(d.libs.len(), 5);
        assert!(d.libs.iter().all(|l| !l.bits32));
    }

    #[test]
    fn wsl2_has_no_kernel_module_and_copies_under_each_name() {
        let mut fs = MemFs::default();
        for n in ["libcuda.so", "libcuda.so.1", "libcuda.so.1.1"] {
            fs.lib(&format!("{WSL_DIR}/{n}"), so("libcuda.so.1"));
        }
        fs.lib(
            &format!("{WSL_DIR}/libnvidia-ml.so.1"),
            so("libnvidia-ml.so.1"),
        );
        fs.lib(&format!("{WSL_DIR}/libdxcore.so"), ElfInfo::default());
        fs.data(&format!("{WSL_DIR}/nvidia-smi"), b"\x7fELF");
        let d = discover(&fs).unwrap();
        assert_eq!(d.version, None);
        assert_eq!(d.from, VersionFrom::WslHost);
        assert_eq!(d.name(), "the WSL2 host's driver");
        let w = WSL_DIR;
        assert_eq!(
            names(&d),
            vec![
                ("libcuda.so".into(), format!("{w}/libcuda.so.1"), false),
                ("libcuda.so.1".into(), format!("{w}/libcuda.so.1"), false),
                ("libdxcore.so".into(), format!("{w}/libdxcore.so"), false),
                (
                    "libnvidia-ml.so.1".into(),
                    format!("{w}/libnvidia-ml.so.1"),
                    false
                ),
            ]
        );
    }

    #[test]
    fn jetson_tegra_directory_and_its_release_file() {
        let mut fs = MemFs::default();
        let t = TEGRA_DIRS[0];
        fs.elf(
            &format!("{t}/libcuda.so.1.1"),
            2,
            EM_AARCH64,
            so("libcuda.so.1"),
        );
        fs.link(&format!("{t}/libcuda.so.1"), "libcuda.so.1.1");
        fs.elf(
            &format!("{t}/libnvidia-ptxjitcompiler.so.35.4.1"),
            2,
            EM_AARCH64,
            so("libnvidia-ptxjitcompiler.so.1"),
        );
        fs.elf(
            &format!("{t}/libnvrm_gpu.so"),
            2,
            EM_AARCH64,
            so("libnvrm_gpu.so"),
        );
        fs.data(
            TEGRA_RELEASE,
            b"# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64\n",
        );
        let d = discover(&fs).unwrap();
        assert_eq!(d.version.as_deref(), Some("35.4.1"));
        assert_eq!(d.from, VersionFrom::TegraRelease);
        assert_eq!(d.location(), t);
        let n: Vec<String> = names(&d).into_iter().map(|x| x.0).collect();
        assert_eq!(
            n,
            [
                "libcuda.so",
                "libcuda.so.1",
                "libnvidia-ptxjitcompiler.so.1",
                "libnvrm_gpu.so"
            ]
        );
    }

    #[test]
    fn two_versions_the_kernel_module_chooses() {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib/x86_64-linux-gnu", "550.54.14");
        install(&mut fs, "/usr/local/nvidia/lib64", "535.183.01");
        fs.data(PROC_VERSION, proc_line("535.183.01").as_bytes());
        let d = discover(&fs).unwrap();
        assert_eq!(d.version.as_deref(), Some("535.183.01"));
        assert!(d.libs.iter().all(|l| l.file.ends_with(b".so.535.183.01")));
    }

    #[test]
    fn two_versions_and_no_kernel_module_is_refused() {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib/x86_64-linux-gnu", "550.54.14");
        install(&mut fs, "/usr/lib64", "535.183.01");
        let e = discover(&fs).unwrap_err();
        assert!(matches!(e, Refusal::TwoVersions { .. }), "{e}");
        assert!(
            e.to_string().contains(
                "535.183.01 at /usr/lib64/libcuda.so.535.183.01, 550.54.14 at \
                 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14"
            ),
            "{e}"
        );
    }

    #[test]
    fn one_version_and_no_kernel_module_is_linked_with_a_note() {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib64", "535.183.01");
        let d = discover(&fs).unwrap();
        assert_eq!(d.from, VersionFrom::OnlyInstalled);
        assert!(
            d.notes[0].contains("no kernel module is loaded"),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn a_version_mismatch_is_refused() {
        let mut fs = MemFs::default();
        install(&mut fs, "/usr/lib/x86_64-linux-gnu", "550.67");
        fs.data(PROC_VERSION, proc_line("550.54.14").as_bytes());
        let e = discover(&fs).unwrap_err();
        assert_eq!(
            e.to_string(),
            "driver/library version mismatch: the kernel module is 550.54.14 \
             (/proc/driver/nvidia/version) but the libraries are 550.67 (550.67 at \
             /usr/lib/x86_64-linux-gnu/libcuda.so.550.67); reboot (or reload the nvidia module) \
             after a driver upgrade, then run this again"
        );
    }

    #[test]
    fn no_driver_and_nixos_are_refused() {
        let mut fs = MemFs::default();
        fs.lib("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", so("libz.so.1"));
        assert!(matches!(discover(&fs), Err(Refusal::NoDriver { .. })));
        install(&mut fs, "/usr/lib64", "535.183.01");
        fs.data(NIXOS_MARK, b"");
        assert!(matches!(discover(&fs), Err(Refusal::NixOs(_))));
    }
}
