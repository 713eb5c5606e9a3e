//! `/etc/ld.so.cache`: glibc's `glibc-ld.so.cache1.1` format (alone, or appended to the old
//! `ld.so-1.7.0` format as glibc before 2.32 wrote it), and the loader's lookup in it.
//!
//! Layout (all integers in the byte order given by the header's flags): a 48-byte header
//! (`magic[17] version[3] nlibs len_strings flags pad[3] extension_offset unused[3]`), then
//! `nlibs` 24-byte entries (`flags:i32 key:u32 value:u32 osversion:u32 hwcap:u64`) sorted by key,
//! then the strings. `key` and `value` are offsets from the start of the new-format header.

use std::collections::HashMap;

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
const NEW_HEADER: usize = 48;
const NEW_ENTRY: usize = 24;
const OLD_HEADER: usize = 16;
const OLD_ENTRY: usize = 12;

/// `DL_CACHE_HWCAP_EXTENSION`: the entry describes a `glibc-hwcaps` subdirectory.
const HWCAP_EXTENSION: u64 = 1 << 62;
/// The ISA level bits that may accompany [`HWCAP_EXTENSION`] in the upper half.
const HWCAP_ISA_LEVEL_MASK: u64 = (1 << 10) - 1;

/// One cache entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// `FLAG_ELF_LIBC6` combined with an architecture flag (`0x303` for x86-64, ...).
    pub flags: i32,
    /// The library name (its SONAME, or file name).
    pub key: Vec<u8>,
    /// The file's path.
    pub value: Vec<u8>,
    /// Required OS version (unused by current glibc).
    pub osversion: u32,
    /// Legacy hwcap bits, or a `glibc-hwcaps` subdirectory reference.
    pub hwcap: u64,
}

impl CacheEntry {
    /// Whether the entry is for a library in a `glibc-hwcaps` subdirectory.
    pub fn is_hwcaps_subdir(&self) -> bool {
        (self.hwcap >> 32) & !HWCAP_ISA_LEVEL_MASK == HWCAP_EXTENSION >> 32
    }
}

/// A parsed cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LdCache {
    /// The entries, in file order (sorted by key the way ldconfig sorts them).
    entries: Vec<CacheEntry>,
    /// For each key as [`lib_key`] gives it, its entries' positions in file order: a lookup
    /// visits the entries [`libcmp_eq`] matches without comparing the name with every entry
    /// (`audit` looks up tens of thousands of names in a cache of thousands of entries). Built
    /// with the entries, which cannot change afterwards.
    index: HashMap<Vec<u8>, Vec<usize>>,
}

/// Why the cache could not be used (the loader then silently goes on without it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The file ends inside a header.
    #[error("truncated header")]
    TruncatedHeader,
    /// Only the `ld.so-1.7.0` format, which current loaders do not read.
    #[error("old libc5-era format without the glibc-ld.so.cache1.1 part")]
    OldFormatOnly,
    /// Neither magic.
    #[error("not an ld.so.cache file")]
    NotACache,
    /// The header's byte-order field holds the value ldconfig writes for a broken cache.
    #[error("header marks the cache as invalid")]
    MarkedInvalid,
    /// Written for a loader of the other byte order.
    #[error("written for the other byte order; the loader ignores it")]
    OtherByteOrder,
    /// The header counts more entries than the file holds.
    #[error("{0} entries do not fit in the file")]
    TooManyEntries(usize),
}

/// What a lookup found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheLookup {
    /// The path the loader takes, if any.
    pub chosen: Option<Vec<u8>>,
    /// Entries for the same name that the loader does not take, with the reason.
    pub passed_over: Vec<(Vec<u8>, String)>,
}

fn u32_at(b: &[u8], at: usize, big: bool) -> Option<u32> {
    let s: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if big {
        u32::from_be_bytes(s)
    } else {
        u32::from_le_bytes(s)
    })
}

fn u64_at(b: &[u8], at: usize, big: bool) -> Option<u64> {
    let s: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(if big {
        u64::from_be_bytes(s)
    } else {
        u64::from_le_bytes(s)
    })
}

fn cstr(b: &[u8], at: usize) -> Option<Vec<u8>> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some(rest[..end].to_vec())
}

impl LdCache {
    /// Parses a cache file. `big_endian_target` is the byte order of the loader that would read
    /// it, used when the header does not record one (caches written by ldconfig before 2.33).
    pub fn parse(bytes: &[u8], big_endian_target: bool) -> Result<LdCache, CacheError> {
        let new_at = if bytes.starts_with(NEW_MAGIC) {
            0
        } else if bytes.starts_with(OLD_MAGIC) {
            let n =
                u32_at(bytes, 12, big_endian_target).ok_or(CacheError::TruncatedHeader)? as usize;
            // The new format follows the old entries, aligned like `struct cache_file_new` (8).
            let end = OLD_HEADER.saturating_add(n.saturating_mul(OLD_ENTRY));
            let aligned = end.checked_add(7).map(|e| e & !7).unwrap_or(usize::MAX);
            match bytes.get(aligned..) {
                Some(rest) if rest.starts_with(NEW_MAGIC) => aligned,
                _ => return Err(CacheError::OldFormatOnly),
            }
        } else {
            return Err(CacheError::NotACache);
        };
        let cache = &bytes[new_at..];
        if cache.len() < NEW_HEADER {
            return Err(CacheError::TruncatedHeader);
        }
        let big = match cache[28] & 3 {
            0 => big_endian_target,
            2 => false,
            3 => true,
            _ => return Err(CacheError::MarkedInvalid),
        };
        if big != big_endian_target {
            return Err(CacheError::OtherByteOrder);
        }
        let nlibs = u32_at(cache, 20, big).unwrap_or(0) as usize;
        if (cache.len() - NEW_HEADER) / NEW_ENTRY < nlibs {
            return Err(CacheError::TooManyEntries(nlibs));
        }
        let mut entries = Vec::with_capacity(nlibs);
        for i in 0..nlibs {
            let at = NEW_HEADER + i * NEW_ENTRY;
            let flags = u32_at(cache, at, big).unwrap_or(0) as i32;
            let key = u32_at(cache, at + 4, big).unwrap_or(u32::MAX) as usize;
            let value = u32_at(cache, at + 8, big).unwrap_or(u32::MAX) as usize;
            let (Some(key), Some(value)) = (cstr(cache, key), cstr(cache, value)) else {
                // The loader verifies offsets per entry and skips bad ones.
                continue;
            };
            entries.push(CacheEntry {
                flags,
                key,
                value,
                osversion: u32_at(cache, at + 12, big).unwrap_or(0),
                hwcap: u64_at(cache, at + 16, big).unwrap_or(0),
            });
        }
        Ok(LdCache::new(entries))
    }

    /// A cache of these entries, in this order.
    pub fn new(entries: Vec<CacheEntry>) -> LdCache {
        let mut index: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            index.entry(lib_key(&e.key)).or_default().push(i);
        }
        LdCache { entries, index }
    }

    /// The entries, in file order.
    pub fn entries(&self) -> &[CacheEntry] {
        &self.entries
    }

    /// The loader's lookup (`search_cache` in `elf/dl-cache.c`) for a loader accepting entries
    /// with `accepted` flags. Among the entries whose key equals `name` (compared like
    /// `_dl_cache_libcmp`: digit runs numerically), the first acceptable plain entry wins.
    /// Entries for `glibc-hwcaps` subdirectories and entries with legacy hwcap or platform bits
    /// depend on the CPU that runs the program: they are never chosen here, only reported.
    pub fn lookup(&self, name: &[u8], accepted: &[i32]) -> CacheLookup {
        let at = self
            .index
            .get(&lib_key(name))
            .map_or(&[][..], Vec::as_slice);
        lookup_among(at.iter().map(|&i| &self.entries[i]), accepted)
    }

    /// How many entries a loader accepting `accepted` flags can use.
    pub fn count_for(&self, accepted: &[i32]) -> usize {
        self.entries
            .iter()
            .filter(|e| accepted.contains(&e.flags))
            .count()
    }
}

/// The architecture of a cache entry's flags, as `ldconfig -p` prints it.
pub fn flags_name(flags: i32) -> String {
    let abi = match flags & 0xff00 {
        0x0000 => "",
        0x0100 => ",64bit",
        0x0200 => ",IA-64",
        0x0300 => ",x86-64",
        0x0400 => ",64bit",
        0x0500 => ",64bit",
        0x0600 => ",N32",
        0x0700 => ",64bit",
        0x0800 => ",x32",
        0x0900 => ",hard-float",
        0x0a00 => ",AArch64",
        0x0b00 => ",soft-float",
        0x0c00 => ",nan2008",
        0x0d00 => ",N32,nan2008",
        0x0e00 => ",64bit,nan2008",
        0x0f00 => ",soft-float",
        0x1000 => ",double-float",
        0x1100 => ",soft-float",
        0x1200 => ",double-float",
        _ => ",unknown",
    };
    let kind = match flags & 0xff {
        0 => "libc4",
        1 => "ELF",
        2 => "libc5",
        3 => "libc6",
        _ => "unknown",
    };
    format!("{kind}{abi}")
}

/// [`LdCache::lookup`] among `entries`, the cache's entries whose key matches the name, in file
/// order.
fn lookup_among<'a>(
    entries: impl Iterator<Item = &'a CacheEntry>,
    accepted: &[i32],
) -> CacheLookup {
    let mut out = CacheLookup::default();
    for e in entries {
        let why = if !accepted.contains(&e.flags) {
            Some(format!(
                "for another architecture ({})",
                flags_name(e.flags)
            ))
        } else if e.is_hwcaps_subdir() {
            Some("glibc-hwcaps subdirectory: taken only on CPUs that support it".into())
        } else if e.hwcap != 0 {
            Some(format!(
                "legacy hwcap entry ({:#x}): depends on the CPU",
                e.hwcap
            ))
        } else if out.chosen.is_some() {
            Some("an earlier entry is taken".into())
        } else {
            None
        };
        match why {
            Some(w) => out.passed_over.push((e.value.clone(), w)),
            None => out.chosen = Some(e.value.clone()),
        }
    }
    out
}

/// A name as [`libcmp_eq`] sees it: two names compare equal exactly when their keys are equal.
/// `libcmp_eq` compares byte by byte, except that two runs of digits compare by value; so the
/// key is the sequence of those tokens: `[0, byte]` for a byte that is not a digit, `[1]` and
/// the run's value (saturated as `libcmp_eq` saturates it, 8 bytes) for a run of digits.
pub fn lib_key(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() * 2);
    let mut i = 0;
    while i < name.len() {
        if name[i].is_ascii_digit() {
            let mut v = 0u64;
            while let Some(d) = name.get(i).filter(|d| d.is_ascii_digit()) {
                v = v.saturating_mul(10).saturating_add(u64::from(d - b'0'));
                i += 1;
            }
            out.push(1);
            out.extend_from_slice(&v.to_be_bytes());
        } else {
            out.extend_from_slice(&[0, name[i]]);
            i += 1;
        }
    }
    out
}

/// Whether `_dl_cache_libcmp(a, b) == 0`: equal, with runs of digits compared as numbers.
pub fn libcmp_eq(a: &[u8], b: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    loop {
        match (a.get(i), b.get(j)) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (mut v1, mut v2) = (0u64, 0u64);
                while let Some(d) = a.get(i).filter(|d| d.is_ascii_digit()) {
                    v1 = v1.saturating_mul(10).saturating_add(u64::from(d - b'0'));
                    i += 1;
                }
                while let Some(d) = b.get(j).filter(|d| d.is_ascii_digit()) {
                    v2 = v2.saturating_mul(10).saturating_add(u64::from(d - b'0'));
                    j += 1;
                }
                if v1 != v2 {
                    return false;
                }
            }
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            _ => return false,
        }
    }
}

/// A new-format cache (`glibc-ld.so.cache1.1`, little-endian) of (flags, key, value, hwcap)
/// entries, in the order given: what ldconfig writes, for tests of tools that read one from a
/// model file system.
pub fn build(entries: &[(i32, &str, &str, u64)]) -> Vec<u8> {
    let mut strings = Vec::new();
    let base = NEW_HEADER + entries.len() * NEW_ENTRY;
    let mut offs = Vec::new();
    for (_, k, v, _) in entries {
        let ko = base + strings.len();
        strings.extend_from_slice(k.as_bytes());
        strings.push(0);
        let vo = base + strings.len();
        strings.extend_from_slice(v.as_bytes());
        strings.push(0);
        offs.push((ko as u32, vo as u32));
    }
    let mut b = Vec::new();
    b.extend_from_slice(NEW_MAGIC);
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    b.extend_from_slice(&[2, 0, 0, 0]);
    b.extend_from_slice(&[0; 16]);
    for ((f, _, _, h), (ko, vo)) in entries.iter().zip(&offs) {
        b.extend_from_slice(&f.to_le_bytes());
        b.extend_from_slice(&ko.to_le_bytes());
        b.extend_from_slice(&vo.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&h.to_le_bytes());
    }
    b.extend_from_slice(&strings);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names over an alphabet of digits (leading zeros, long runs that saturate) and a few other
    /// bytes: two names have equal keys exactly when `libcmp_eq` calls them equal, and the
    /// indexed lookup visits the entries a comparison with every entry would.
    #[test]
    fn the_index_matches_the_names_libcmp_matches() {
        let parts: [&[u8]; 9] = [
            b"0",
            b"1",
            b"01",
            b"10",
            b"a",
            b".",
            b"99999999999999999999",
            b"99999999999999999998",
            b"",
        ];
        let mut names: Vec<Vec<u8>> = Vec::new();
        for a in parts {
            for b in parts {
                for c in parts {
                    names.push([b"lib" as &[u8], a, b".so", b, c].concat());
                }
            }
        }
        for x in &names {
            for y in &names {
                assert_eq!(lib_key(x) == lib_key(y), libcmp_eq(x, y), "{x:?} {y:?}");
            }
        }
        let entries: Vec<CacheEntry> = names
            .iter()
            .enumerate()
            .map(|(i, k)| CacheEntry {
                flags: [0x303, 0x303, 3, 0x303][i % 4],
                key: k.clone(),
                value: [b"/l/" as &[u8], k].concat(),
                osversion: 0,
                hwcap: if i % 7 == 0 { 1 } else { 0 },
            })
            .collect();
        let c = LdCache::new(entries.clone());
        for name in &names {
            let matching = entries.iter().filter(|e| libcmp_eq(name, &e.key));
            let want = lookup_among(matching, &[0x303]);
            assert_eq!(c.lookup(name, &[0x303]), want, "{name:?}");
        }
    }

    #[test]
    fn lookup_takes_the_first_entry_for_this_architecture() {
        let c = LdCache::parse(
            &build(&[
                (0x803, "libfoo.so.1", "/libx32/libfoo.so.1", 0),
                (
                    0x303,
                    "libfoo.so.1",
                    "/hwcaps/libfoo.so.1",
                    HWCAP_EXTENSION | 1,
                ),
                (0x303, "libfoo.so.1", "/lib64/libfoo.so.1", 0),
                (0x303, "libfoo.so.1", "/usr/lib64/libfoo.so.1", 0),
                (3, "libfoo.so.1", "/lib32/libfoo.so.1", 0),
            ]),
            false,
        )
        .unwrap();
        let l = c.lookup(b"libfoo.so.1", &[0x303]);
        assert_eq!(l.chosen.as_deref(), Some(&b"/lib64/libfoo.so.1"[..]));
        assert_eq!(l.passed_over.len(), 4);
        let l = c.lookup(b"libfoo.so.1", &[1, 3]);
        assert_eq!(l.chosen.as_deref(), Some(&b"/lib32/libfoo.so.1"[..]));
        assert_eq!(c.lookup(b"libbar.so.1", &[0x303]), CacheLookup::default());
    }

    #[test]
    fn names_compare_like_the_loader() {
        assert!(libcmp_eq(b"libfoo.so.1", b"libfoo.so.1"));
        assert!(libcmp_eq(b"libfoo.so.01", b"libfoo.so.1"));
        assert!(!libcmp_eq(b"libfoo.so.1", b"libfoo.so.10"));
        assert!(!libcmp_eq(b"libfoo.so", b"libfoo.so.1"));
    }

    #[test]
    fn rejects_other_byte_orders_and_garbage() {
        let mut b = build(&[(0x303, "a", "/a", 0)]);
        assert!(LdCache::parse(&b, true).is_err());
        b[28] = 1;
        assert!(LdCache::parse(&b, false).is_err());
        assert!(LdCache::parse(b"hello", false).is_err());
        let mut short = build(&[(0x303, "a", "/a", 0)]);
        short[20] = 200;
        assert!(LdCache::parse(&short, false).is_err());
    }

    #[test]
    fn compat_format_is_found_after_the_old_entries() {
        let new = build(&[(0x303, "libz.so.1", "/lib/libz.so.1", 0)]);
        let mut b = OLD_MAGIC.to_vec();
        b.push(0);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&[0; 12]); // one old entry
        while b.len() % 8 != 0 {
            b.push(0);
        }
        b.extend_from_slice(&new);
        let c = LdCache::parse(&b, false).unwrap();
        assert_eq!(c.entries().len(), 1);
        assert_eq!(c.entries()[0].value, b"/lib/libz.so.1");
    }

    /// The host's real cache parses, and agrees with `ldconfig -p` where that is available.
    #[test]
    fn parses_the_real_cache_like_ldconfig() {
        let Ok(bytes) = std::fs::read("/etc/ld.so.cache") else {
            testkit::skip("no /etc/ld.so.cache to compare with ldconfig -p");
            return;
        };
        let c = LdCache::parse(&bytes, cfg!(target_endian = "big")).unwrap();
        assert!(!c.entries().is_empty());
        let Ok(out) = std::process::Command::new("ldconfig").arg("-p").output() else {
            testkit::skip("no ldconfig to compare the parsed cache with");
            return;
        };
        if !out.status.success() {
            testkit::skip("ldconfig -p failed here");
            return;
        }
        // Lines: "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1"
        let text = String::from_utf8_lossy(&out.stdout);
        let listed: Vec<(String, String)> = text
            .lines()
            .filter_map(|l| {
                let (left, path) = l.trim().split_once(" => ")?;
                let name = left.split(" (").next()?;
                Some((name.to_string(), path.to_string()))
            })
            .collect();
        let ours: Vec<(String, String)> = c
            .entries()
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(&e.key).into_owned(),
                    String::from_utf8_lossy(&e.value).into_owned(),
                )
            })
            .collect();
        assert_eq!(ours, listed);
    }
}
