//! What the loader of a program knows before it starts, read from the disk without running
//! anything: its built-in directories and cache path (read out of the interpreter binary itself),
//! the cache, `$LIB`, `$PLATFORM` and `LD_LIBRARY_PATH`.
//!
//! glibc's `ld.so` keeps its default directories as one string constant (`SYSTEM_DIRS` from
//! `trusted-dirs.h`: `"/lib/x86_64-linux-gnu/\0/usr/lib/x86_64-linux-gnu/\0/lib/\0/usr/lib/"` on
//! Debian, `"/lib64/\0/usr/lib64/"` upstream, the glibc output's own `lib/` on Nix) and its
//! cache path as another (`/etc/ld.so.cache`, patched elsewhere by Nix); `$LIB` is the first
//! directory without its slashes. When the interpreter cannot be read, upstream's or Debian's
//! defaults for the architecture stand in.

use crate::fsview::{dirname, Bytes, FsView};
use crate::hostfs::HostFs;
use crate::ldcache::LdCache;
use crate::target::{RawHeader, Target};
use object::elf::{ELFCLASS64, ELFDATA2MSB, EM_X86_64};

/// The program interpreter, which is loaded before anything else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    /// Its path as `PT_INTERP` names it.
    pub path: Bytes,
    /// Its `DT_SONAME` (`ld-linux-x86-64.so.2`), if it could be read.
    pub soname: Option<Bytes>,
}

/// Everything the loader knows before it looks at the program's dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoaderSettings {
    /// The loader's architecture (the program's).
    pub target: Target,
    /// The default directories, each ending in `/`.
    pub system_dirs: Vec<Bytes>,
    /// What `$LIB` expands to.
    pub lib: Bytes,
    /// What `$PLATFORM` expands to; `None` drops entries that use it, like the loader does.
    pub platform: Option<Bytes>,
    /// The cache's path, for messages.
    pub cache_path: Bytes,
    /// The cache, when there is a usable one.
    pub cache: Option<LdCache>,
    /// `LD_LIBRARY_PATH`, when set and not empty.
    pub ld_library_path: Option<Bytes>,
    /// The program interpreter, if there is one.
    pub interpreter: Option<Interpreter>,
    /// Whether the loader reads the resolution-cache note (nixpkgs PR #535735's patched glibc)
    /// or ignores it (upstream glibc).
    pub read_ld_cache_note: bool,
    /// Whether the libraries loaded objects `dlopen` are followed.
    pub follow_dlopen: bool,
}

/// Values given on the command line, overriding what is read or guessed.
#[derive(Clone, Debug, Default)]
pub struct SettingsOverrides {
    /// `--ld-library-path` (`Some(empty)`: unset).
    pub ld_library_path: Option<Bytes>,
    /// `--platform`.
    pub platform: Option<Bytes>,
    /// `--interpreter`.
    pub interpreter: Option<Bytes>,
    /// Take `LD_LIBRARY_PATH` from the environment when not overridden.
    pub use_environment: bool,
    /// Model an upstream glibc, which ignores the resolution-cache note (the default models
    /// nixpkgs PR #535735's patched glibc, which reads it).
    pub unpatched_glibc: bool,
    /// Do not follow the libraries loaded objects `dlopen`.
    pub no_dlopen: bool,
}

/// Where each setting came from, for the report.
#[derive(Clone, Debug, Default)]
pub struct SettingsProvenance {
    /// How the default directories were found.
    pub system_dirs: String,
    /// What happened with the cache.
    pub cache: String,
    /// How `$PLATFORM` was chosen.
    pub platform: String,
}

/// The run of NUL-separated absolute directories (each ending in `/`) that is glibc's
/// `SYSTEM_DIRS`: the first run of two or more that mention `lib`, or a single one equal to the
/// interpreter's own directory (`interp_dir`, as Nix's glibc has).
pub fn system_dirs_in(binary: &[u8], interp_dir: &[u8]) -> Option<Vec<Bytes>> {
    let is_dir = |s: &[u8]| {
        s.len() >= 2
            && s.starts_with(b"/")
            && s.ends_with(b"/")
            && s.iter().all(|c| (0x21..0x7f).contains(c))
            && s.windows(3).any(|w| w == b"lib")
    };
    let mut own = interp_dir.to_vec();
    own.push(b'/');
    let mut single: Option<Vec<Bytes>> = None;
    let mut run: Vec<Bytes> = Vec::new();
    for s in binary.split(|&c| c == 0).chain(std::iter::once(&b""[..])) {
        if is_dir(s) {
            run.push(s.to_vec());
            continue;
        }
        if run.len() >= 2 {
            return Some(run);
        }
        if run.len() == 1 && run[0] == own && single.is_none() {
            single = Some(std::mem::take(&mut run));
        }
        run.clear();
    }
    single
}

/// The cache path compiled into the interpreter (`/etc/ld.so.cache` unless patched).
pub fn cache_path_in(binary: &[u8]) -> Option<Bytes> {
    binary
        .split(|&c| c == 0)
        .find(|s| {
            s.starts_with(b"/")
                && s.ends_with(b"/ld.so.cache")
                && s.iter().all(|c| (0x21..0x7f).contains(c))
        })
        .map(<[u8]>::to_vec)
}

/// The target this program itself runs on (from `/proc/self/exe`), if it can be read.
fn host_target() -> Option<Target> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open("/proc/self/exe")
        .ok()?
        .take(64)
        .read_to_end(&mut head)
        .ok()?;
    Some(Target::of(&RawHeader::parse(&head)))
}

/// `$PLATFORM` of glibc (2.26 and later) on this x86-64 machine: the kernel says `x86_64`, and on
/// Intel CPUs glibc replaces it with `haswell` (AVX2, FMA, BMI1/2, LZCNT, MOVBE, POPCNT) or
/// `xeon_phi` (AVX512CD, AVX512ER, AVX512PF).
fn host_x86_64_platform() -> Option<(&'static str, &'static str)> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    if field("vendor_id") != "GenuineIntel" {
        return Some(("x86_64", "AT_PLATFORM of this machine"));
    }
    let flags = field("flags");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    if has("avx512cd") && has("avx512er") && has("avx512pf") {
        return Some(("xeon_phi", "glibc's choice for this Intel CPU"));
    }
    let haswell = ["avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt"];
    if haswell.iter().all(|f| has(f)) {
        Some(("haswell", "glibc's choice for this Intel CPU"))
    } else {
        Some(("x86_64", "AT_PLATFORM of this machine"))
    }
}

/// Builds the loader's settings for a program of `target` whose `PT_INTERP` is `interp`.
pub fn read_settings(
    target: Target,
    interp: Option<&[u8]>,
    fs: &HostFs,
    o: &SettingsOverrides,
) -> (LoaderSettings, SettingsProvenance) {
    let mut prov = SettingsProvenance::default();
    let interp_path: Option<Bytes> = o
        .interpreter
        .clone()
        .or_else(|| interp.map(<[u8]>::to_vec))
        .or_else(|| target.default_interpreter().map(|s| s.as_bytes().to_vec()));
    let interp_bytes = interp_path.as_ref().and_then(|p| fs.read(p).ok());
    let interp_soname = interp_bytes
        .as_ref()
        .and_then(|b| elfpatch::Elf::parse(b).ok())
        .and_then(|e| e.soname().map(<[u8]>::to_vec));
    let interp_dir = interp_path
        .as_ref()
        .and_then(|p| fs.canonical(p))
        .map(|p| dirname(&p))
        .unwrap_or_default();
    let from_interp = interp_bytes
        .as_ref()
        .and_then(|b| system_dirs_in(b, &interp_dir));
    let system_dirs = match from_interp {
        Some(d) => {
            prov.system_dirs = format!(
                "built into {}",
                String::from_utf8_lossy(interp_path.as_deref().unwrap_or_default())
            );
            d
        }
        None => {
            let multiarch = target.triplet().is_some_and(|t| {
                fs.is_dir(format!("/lib/{t}").as_bytes())
                    || fs.is_dir(format!("/usr/lib/{t}").as_bytes())
            });
            prov.system_dirs = format!(
                "{} defaults for {} (the interpreter could not be read)",
                if multiarch {
                    "Debian multiarch"
                } else {
                    "glibc"
                },
                target.name()
            );
            target.fallback_system_dirs(multiarch)
        }
    };
    let lib: Bytes = system_dirs
        .first()
        .map(|d| {
            let mut s: &[u8] = d;
            while let Some(r) = s.strip_prefix(b"/") {
                s = r;
            }
            while let Some(r) = s.strip_suffix(b"/") {
                s = r;
            }
            s.to_vec()
        })
        .unwrap_or_else(|| b"lib".to_vec());
    let cache_path = interp_bytes
        .as_ref()
        .and_then(|b| cache_path_in(b))
        .unwrap_or_else(|| b"/etc/ld.so.cache".to_vec());
    let cache = match fs.read(&cache_path) {
        Err(e) => {
            prov.cache = if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "none ({} does not exist)",
                    String::from_utf8_lossy(&cache_path)
                )
            } else {
                format!(
                    "{}: {}",
                    String::from_utf8_lossy(&cache_path),
                    elfpatch::error::os_words(&e)
                )
            };
            None
        }
        Ok(bytes) => match LdCache::parse(&bytes, target.data == ELFDATA2MSB) {
            Ok(c) => {
                prov.cache = format!(
                    "{} ({} of {} entries for {})",
                    String::from_utf8_lossy(&cache_path),
                    c.count_for(&target.cache_flags()),
                    c.entries().len(),
                    target.name()
                );
                Some(c)
            }
            Err(e) => {
                prov.cache = format!("{}: not used: {}", String::from_utf8_lossy(&cache_path), e);
                None
            }
        },
    };
    let native = fs.root.is_none() && host_target() == Some(target);
    let platform: Option<Bytes> = if let Some(p) = &o.platform {
        prov.platform = "--platform".into();
        Some(p.clone())
    } else if native && target.machine == EM_X86_64 && target.class == ELFCLASS64 {
        let (p, why) = host_x86_64_platform().unwrap_or(("x86_64", "kernel default"));
        prov.platform = why.into();
        Some(p.as_bytes().to_vec())
    } else if let Some(p) = target.default_platform() {
        prov.platform = format!("kernel default for {}", target.name());
        Some(p.as_bytes().to_vec())
    } else {
        prov.platform = format!(
            "unknown for {}: entries using it are dropped (pass --platform)",
            target.name()
        );
        None
    };
    let ld_library_path = match &o.ld_library_path {
        Some(p) => Some(p.clone()),
        None if o.use_environment && fs.root.is_none() => {
            std::env::var_os("LD_LIBRARY_PATH").map(|v| {
                use std::os::unix::ffi::OsStringExt;
                v.into_vec()
            })
        }
        None => None,
    }
    .filter(|p| !p.is_empty());
    let interpreter = interp_path.map(|path| Interpreter {
        soname: interp_soname.or_else(|| path.rsplit(|&c| c == b'/').next().map(<[u8]>::to_vec)),
        path,
    });
    (
        LoaderSettings {
            target,
            system_dirs,
            lib,
            platform,
            cache_path,
            cache,
            ld_library_path,
            interpreter,
            read_ld_cache_note: !o.unpatched_glibc,
            follow_dlopen: !o.no_dlopen,
        },
        prov,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_system_dirs_string() {
        let bin = b"\x00junk\x00/etc/ld.so.cache\x00/lib/x86_64-linux-gnu/\x00/usr/lib/x86_64-linux-gnu/\x00/lib/\x00/usr/lib/\x00more\x00";
        assert_eq!(
            system_dirs_in(bin, b"/lib64").unwrap(),
            vec![
                b"/lib/x86_64-linux-gnu/".to_vec(),
                b"/usr/lib/x86_64-linux-gnu/".to_vec(),
                b"/lib/".to_vec(),
                b"/usr/lib/".to_vec()
            ]
        );
        assert_eq!(cache_path_in(bin).unwrap(), b"/etc/ld.so.cache");
        // Nix's glibc: one directory, its own.
        let nix = b"x\x00/nix/store/abc-glibc-2.40/lib/\x00y\x00";
        assert_eq!(
            system_dirs_in(nix, b"/nix/store/abc-glibc-2.40/lib").unwrap(),
            vec![b"/nix/store/abc-glibc-2.40/lib/".to_vec()]
        );
        assert_eq!(system_dirs_in(nix, b"/lib64"), None);
    }

    /// The real interpreters on this machine (host and cross sysroots) agree with what they
    /// print about themselves.
    #[test]
    fn reads_the_real_interpreter() {
        let Ok(bin) = std::fs::read("/lib64/ld-linux-x86-64.so.2") else {
            testkit::skip("no /lib64/ld-linux-x86-64.so.2 to read the built-in directories of");
            return;
        };
        let dirs = system_dirs_in(&bin, b"/usr/lib64").expect("system dirs");
        let Ok(out) = std::process::Command::new("/lib64/ld-linux-x86-64.so.2")
            .arg("--list-diagnostics")
            .output()
        else {
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let listed: Vec<Bytes> = text
            .lines()
            .filter(|l| l.starts_with("path.system_dirs["))
            .filter_map(|l| {
                l.split_once('=')
                    .map(|(_, v)| v.trim_matches('"').as_bytes().to_vec())
            })
            .collect();
        if !listed.is_empty() {
            assert_eq!(dirs, listed);
        }
        assert_eq!(cache_path_in(&bin).unwrap(), b"/etc/ld.so.cache");
    }
}
