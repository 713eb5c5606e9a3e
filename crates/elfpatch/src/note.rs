//! The resolution-cache note that patchelf 0.19's `--build-resolution-cache` writes
//! (`.note.nixos.ldcache`, owner `NixOS`, type `0x63a86cb6`), read by the glibc patch of nixpkgs
//! PR #535735 after `LD_LIBRARY_PATH` and before the run path.
//!
//! The note's descriptor is a sequence of NUL-terminated pairs — a `DT_NEEDED` name, then a
//! `:`-separated list of hints — closed by one more NUL (an empty name). A hint is `=<path>`, the
//! library as resolved when the note was written, or `?<dir>`, a directory the loader must still
//! search itself (`$ORIGIN`-style tokens, directories holding `glibc-hwcaps`, directories absent
//! when the note was written, empty and relative run-path entries). Hints keep run-path order.
//!
//! This module is pure: [`ResolutionCache`] parses and serializes a descriptor exactly as
//! patchelf writes it, [`encode_note`] builds the whole note, and [`find`] locates the note in a
//! parsed [`Elf`], reading only the bytes of its note segments and sections.

use object::elf;

use crate::error::{Error, Result};
use crate::format::Format;
use crate::read::Elf;
use crate::source::{read_range, Source};

/// The note's owner (its name field, without the terminating NUL).
pub const OWNER: &[u8] = b"NixOS";

/// The note's type, `NT_NIXOS_LD_CACHE` in patchelf and in the glibc patch.
pub const NOTE_TYPE: u32 = 0x63a8_6cb6;

/// The name of the section patchelf gives the note.
pub const SECTION_NAME: &[u8] = b".note.nixos.ldcache";

/// Size of a note header (`Elf32_Nhdr` and `Elf64_Nhdr` alike: three 32-bit words).
pub const NOTE_HEADER_SIZE: u64 = 12;

/// The alignment patchelf gives the note (its section's `sh_addralign`, its `PT_NOTE`'s
/// `p_align`), which is also the padding of its name and descriptor.
pub const NOTE_ALIGN: u64 = 4;

/// One hint of an entry: where the loader finds, or must look for, a library.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Hint {
    /// `=<path>`: the library, resolved when the note was written (an absolute path).
    Exact(Vec<u8>),
    /// `?<dir>`: a run-path directory the loader searches itself, as written in the run path
    /// (it may be empty, relative, or hold `$ORIGIN`).
    Search(Vec<u8>),
}

impl Hint {
    /// The path or directory, without its `=` or `?` marker.
    pub fn path(&self) -> &[u8] {
        match self {
            Hint::Exact(p) | Hint::Search(p) => p,
        }
    }

    /// The marker byte that starts the hint in the descriptor.
    pub fn marker(&self) -> u8 {
        match self {
            Hint::Exact(_) => b'=',
            Hint::Search(_) => b'?',
        }
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.marker());
        out.extend_from_slice(self.path());
    }
}

/// One entry of the descriptor: a `DT_NEEDED` name and its hints, in run-path order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The `DT_NEEDED` name, as in the dynamic string table.
    pub needed: Vec<u8>,
    /// Its hints (never empty in a note patchelf wrote).
    pub hints: Vec<Hint>,
}

/// The decoded descriptor of a resolution-cache note: its entries, in descriptor order
/// (patchelf sorts them by name, byte-wise).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResolutionCache {
    /// The entries.
    pub entries: Vec<Entry>,
}

/// Why a descriptor does not parse, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("resolution-cache descriptor, byte {offset}: {problem}")]
pub struct DescriptorError {
    /// Offset of the offending byte from the start of the descriptor.
    pub offset: u64,
    /// What is wrong there.
    pub problem: DescriptorProblem,
}

/// What is wrong with a descriptor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorProblem {
    /// A name or a hint list has no terminating NUL, or the closing empty name is missing.
    #[error("not terminated: a name or hint list, or the closing empty name, is missing its NUL")]
    Unterminated,
    /// Bytes follow the closing empty name.
    #[error("{0} bytes follow the closing empty name")]
    TrailingBytes(u64),
    /// An entry's hint list is empty.
    #[error("the hint list is empty")]
    EmptyHintList,
    /// A hint starts with neither `=` nor `?` (the byte is given; `None` for an empty hint).
    #[error("a hint starts with {}, not '=' or '?'", describe_marker(*.0))]
    UnknownHint(Option<u8>),
    /// An `=` hint is not an absolute path.
    #[error("an '=' hint is not an absolute path")]
    RelativeExact,
    /// The same name has two entries.
    #[error("a second entry for the same name")]
    DuplicateName,
}

fn describe_marker(b: Option<u8>) -> String {
    match b {
        None => "nothing (an empty hint)".to_string(),
        Some(b) if b.is_ascii_graphic() => format!("'{}'", b as char),
        Some(b) => format!("byte {b:#04x}"),
    }
}

impl ResolutionCache {
    /// Parses a descriptor strictly: every pair terminated, every hint list non-empty, every
    /// hint `=<absolute path>` or `?<dir>`, no name twice, the closing empty name present and
    /// nothing after it.
    pub fn parse(desc: &[u8]) -> std::result::Result<Self, DescriptorError> {
        let err = |offset: usize, problem| DescriptorError {
            offset: offset as u64,
            problem,
        };
        let mut entries: Vec<Entry> = Vec::new();
        let mut pos = 0usize;
        loop {
            let name_len = desc[pos..]
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| err(desc.len(), DescriptorProblem::Unterminated))?;
            if name_len == 0 {
                let rest = desc.len() - pos - 1;
                if rest != 0 {
                    return Err(err(pos + 1, DescriptorProblem::TrailingBytes(rest as u64)));
                }
                return Ok(ResolutionCache { entries });
            }
            let needed = desc[pos..pos + name_len].to_vec();
            if entries.iter().any(|e| e.needed == needed) {
                return Err(err(pos, DescriptorProblem::DuplicateName));
            }
            pos += name_len + 1;
            let list_len = desc[pos..]
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| err(desc.len(), DescriptorProblem::Unterminated))?;
            if list_len == 0 {
                return Err(err(pos, DescriptorProblem::EmptyHintList));
            }
            let hints = parse_hints(&desc[pos..pos + list_len])
                .map_err(|(at, problem)| err(pos + at, problem))?;
            entries.push(Entry { needed, hints });
            pos += list_len + 1;
        }
    }

    /// The descriptor bytes, exactly as patchelf writes them (entries in this order, each hint
    /// list `:`-separated, one closing NUL). Only a descriptor whose names and hints hold no
    /// NUL, and whose hints hold no `:`, parses back to the same cache.
    pub fn to_descriptor(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for entry in &self.entries {
            out.extend_from_slice(&entry.needed);
            out.push(0);
            for (i, hint) in entry.hints.iter().enumerate() {
                if i > 0 {
                    out.push(b':');
                }
                hint.encode_into(&mut out);
            }
            out.push(0);
        }
        out.push(0);
        out
    }

    /// The entry for a `DT_NEEDED` name.
    pub fn get(&self, needed: &[u8]) -> Option<&Entry> {
        self.entries.iter().find(|e| e.needed == needed)
    }

    /// Whether the cache has no entry (patchelf never writes such a note).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Parses a non-empty `:`-separated hint list; errors carry the offset within `list`.
fn parse_hints(list: &[u8]) -> std::result::Result<Vec<Hint>, (usize, DescriptorProblem)> {
    let mut hints = Vec::new();
    let mut start = 0usize;
    for part in list.split(|&b| b == b':') {
        let hint = match part.split_first() {
            Some((b'=', path)) if path.first() == Some(&b'/') => Hint::Exact(path.to_vec()),
            Some((b'=', _)) => return Err((start, DescriptorProblem::RelativeExact)),
            Some((b'?', dir)) => Hint::Search(dir.to_vec()),
            Some((&b, _)) => return Err((start, DescriptorProblem::UnknownHint(Some(b)))),
            None => return Err((start, DescriptorProblem::UnknownHint(None))),
        };
        hints.push(hint);
        start += part.len() + 1;
    }
    Ok(hints)
}

fn align_up(v: u64, align: u64) -> Option<u64> {
    v.checked_add(align - 1).map(|x| x & !(align - 1))
}

/// The whole note as patchelf writes it: header (in the file's byte order), the owner with its
/// NUL padded to 4 bytes, the descriptor padded to 4 bytes with zeros.
pub fn encode_note(format: Format, desc: &[u8]) -> Vec<u8> {
    let name_size = OWNER.len() as u32 + 1;
    let mut out = Vec::with_capacity(note_size(desc.len() as u64) as usize);
    out.extend_from_slice(&format.put_u32(name_size));
    out.extend_from_slice(&format.put_u32(desc.len() as u32));
    out.extend_from_slice(&format.put_u32(NOTE_TYPE));
    out.extend_from_slice(OWNER);
    out.push(0);
    out.resize(NOTE_HEADER_SIZE as usize + 8, 0);
    out.extend_from_slice(desc);
    out.resize(note_size(desc.len() as u64) as usize, 0);
    out
}

/// Bytes the note takes with a descriptor of `desc_len` bytes (header, padded owner, padded
/// descriptor), as [`encode_note`] lays it out.
pub fn note_size(desc_len: u64) -> u64 {
    NOTE_HEADER_SIZE + 8 + desc_len.next_multiple_of(NOTE_ALIGN)
}

/// The largest note segment or section [`find`] reads (the section named [`SECTION_NAME`]
/// excepted): resolution caches are a few KiB, other notes smaller still.
pub const MAX_CONTAINER: u64 = 1 << 20;

/// Where a resolution-cache note lies in a file, and its descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocatedNote {
    /// File offset of the note header.
    pub offset: u64,
    /// Bytes the note takes from `offset`: header, padded owner, padded descriptor (padding by
    /// `align`).
    pub size: u64,
    /// File offset of the descriptor.
    pub desc_offset: u64,
    /// The descriptor (`n_descsz` bytes).
    pub desc: Vec<u8>,
    /// The padding unit of the container the note was found in (4, or 8 for a container aligned
    /// to 8).
    pub align: u64,
    /// Indices of the `PT_NOTE` program headers whose bytes hold the note.
    pub segments: Vec<usize>,
    /// Index of the section that holds the note (a `SHT_NOTE` one, or the one named
    /// [`SECTION_NAME`]), if any.
    pub section: Option<usize>,
    /// Whether the note is the last one of every container it was found in: only then can its
    /// size change without moving other notes.
    pub last_in_container: bool,
}

impl LocatedNote {
    /// Parses the descriptor; a [`DescriptorError`] becomes a malformed-file error at the file
    /// offset of the offending byte.
    pub fn cache(&self) -> Result<ResolutionCache> {
        ResolutionCache::parse(&self.desc).map_err(|e| {
            Error::malformed(
                self.desc_offset + e.offset,
                format!("resolution-cache note: {}", e.problem),
            )
        })
    }
}

/// A container to search: a `PT_NOTE` segment or a section.
struct Container {
    offset: u64,
    size: u64,
    align: u64,
    segment: Option<usize>,
    section: Option<usize>,
    /// Whether the container is the section named [`SECTION_NAME`], which must hold the note.
    named: bool,
}

fn containers(elf: &Elf) -> Vec<Container> {
    let note_align = |a: u64| if a == 8 { 8 } else { 4 };
    let mut out: Vec<Container> = elf
        .phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type == elf::PT_NOTE && p.p_filesz > 0)
        .map(|(i, p)| Container {
            offset: p.p_offset,
            size: p.p_filesz,
            align: note_align(p.p_align),
            segment: Some(i),
            section: None,
            named: false,
        })
        .collect();
    if !elf.section_headers_unusable() {
        for s in &elf.sections {
            let named = s.name == SECTION_NAME;
            if s.shdr.sh_type == elf::SHT_NOTE && s.shdr.sh_size > 0 || named {
                out.push(Container {
                    offset: s.shdr.sh_offset,
                    size: if s.shdr.sh_type == elf::SHT_NOBITS {
                        0
                    } else {
                        s.shdr.sh_size
                    },
                    align: note_align(s.shdr.sh_addralign),
                    segment: None,
                    section: Some(s.index),
                    named,
                });
            }
        }
    }
    out
}

/// One note found in a container.
#[derive(Debug)]
struct Found {
    offset: u64,
    size: u64,
    desc_offset: u64,
    desc_len: u64,
    last: bool,
}

/// Walks the notes of one container (its bytes in `bytes`, starting at file offset `base`) and
/// returns the resolution-cache note in it. A container whose notes stop making sense is walked
/// no further, unless what does not fit is a resolution-cache note (then the file is malformed).
fn scan(format: Format, bytes: &[u8], base: u64, align: u64) -> Result<Option<Found>> {
    let len = bytes.len() as u64;
    let mut pos = 0u64;
    let mut found: Option<Found> = None;
    while pos + NOTE_HEADER_SIZE <= len {
        let at = pos as usize;
        let namesz = u64::from(format.u32(&bytes[at..]));
        let descsz = u64::from(format.u32(&bytes[at + 4..]));
        let ntype = format.u32(&bytes[at + 8..]);
        let name_start = pos + NOTE_HEADER_SIZE;
        let is_ours = ntype == NOTE_TYPE
            && namesz <= len - name_start
            && trim_nul(&bytes[name_start as usize..(name_start + namesz) as usize]) == OWNER;
        let desc_start = align_up(name_start + namesz, align);
        let desc_end = desc_start.and_then(|d| d.checked_add(descsz));
        let Some((desc_start, desc_end)) = desc_start.zip(desc_end).filter(|&(_, e)| e <= len)
        else {
            if is_ours {
                return Err(Error::malformed(
                    base + pos,
                    format!(
                        "resolution-cache note: its {descsz}-byte descriptor runs past the end of \
                         its note segment or section"
                    ),
                ));
            }
            break;
        };
        if let Some(f) = found.as_mut() {
            f.last = false;
            if is_ours {
                return Err(Error::malformed(
                    base + pos,
                    "a second resolution-cache note",
                ));
            }
        }
        let next = align_up(desc_end, align).unwrap_or(u64::MAX).min(len);
        if is_ours {
            found = Some(Found {
                offset: base + pos,
                size: next - pos,
                desc_offset: base + desc_start,
                desc_len: descsz,
                last: true,
            });
        }
        pos = next;
    }
    Ok(found)
}

/// A name field without its terminating NUL bytes.
fn trim_nul(name: &[u8]) -> &[u8] {
    let end = name.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &name[..end]
}

/// Finds the resolution-cache note of a parsed file: in its `PT_NOTE` segments and its note
/// sections (and the section named [`SECTION_NAME`], whatever its type), reading only their
/// bytes from `src`. `Ok(None)` when there is none. A note that does not fit its container, a
/// second such note, or a section named [`SECTION_NAME`] that holds none, is an error with the
/// file offset.
pub fn find<S: Source + ?Sized>(src: &S, elf: &Elf) -> Result<Option<LocatedNote>> {
    let mut located: Option<LocatedNote> = None;
    for c in containers(elf) {
        if c.size > MAX_CONTAINER && !c.named {
            // Not a note segment anyone wrote for this: reading it would cost what the file's
            // size says, and the cache is a few KiB.
            continue;
        }
        let bytes = read_range(src, c.offset, c.size, "note segment or section")?;
        let Some(f) = scan(elf.format, &bytes, c.offset, c.align)? else {
            if c.named {
                return Err(Error::malformed(
                    c.offset,
                    "section .note.nixos.ldcache holds no resolution-cache note",
                ));
            }
            continue;
        };
        match located.as_mut() {
            Some(l) if l.offset == f.offset => {
                l.segments.extend(c.segment);
                l.section = l.section.or(c.section);
                l.last_in_container &= f.last;
            }
            Some(_) => {
                return Err(Error::malformed(f.offset, "a second resolution-cache note"));
            }
            None => {
                let desc =
                    bytes[(f.desc_offset - c.offset) as usize..][..f.desc_len as usize].to_vec();
                located = Some(LocatedNote {
                    offset: f.offset,
                    size: f.size,
                    desc_offset: f.desc_offset,
                    desc,
                    align: c.align,
                    segments: c.segment.into_iter().collect(),
                    section: c.section,
                    last_in_container: f.last,
                });
            }
        }
    }
    Ok(located)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Class, Endian};

    fn cache(entries: &[(&str, &[&str])]) -> ResolutionCache {
        let hint = |h: &str| match h.as_bytes().split_first() {
            Some((b'=', p)) => Hint::Exact(p.to_vec()),
            Some((b'?', d)) => Hint::Search(d.to_vec()),
            _ => panic!("bad test hint {h}"),
        };
        ResolutionCache {
            entries: entries
                .iter()
                .map(|(n, hs)| Entry {
                    needed: n.as_bytes().to_vec(),
                    hints: hs.iter().map(|h| hint(h)).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn descriptor_round_trips_in_patchelf_layout() {
        let c = cache(&[
            ("libbar.so", &["?$ORIGIN/lib", "=/x/libbar.so", "?"]),
            ("libfoo.so", &["=/a/libfoo.so"]),
        ]);
        let d = c.to_descriptor();
        assert_eq!(
            d,
            b"libbar.so\0?$ORIGIN/lib:=/x/libbar.so:?\0libfoo.so\0=/a/libfoo.so\0\0".to_vec()
        );
        assert_eq!(ResolutionCache::parse(&d).unwrap(), c);
        assert_eq!(
            ResolutionCache::parse(b"\0").unwrap(),
            ResolutionCache::default()
        );
    }

    #[test]
    fn strict_parse_says_what_and_where() {
        let problem = |d: &[u8]| ResolutionCache::parse(d).unwrap_err();
        let e = problem(b"libfoo.so\0=/a/libfoo.so\0");
        assert_eq!((e.offset, e.problem), (24, DescriptorProblem::Unterminated));
        let e = problem(b"libfoo.so\0=/a/libfoo.so");
        assert_eq!(e.problem, DescriptorProblem::Unterminated);
        let e = problem(b"libfoo.so\0=/a/libfoo.so\0\0\0\0");
        assert_eq!(
            (e.offset, e.problem),
            (25, DescriptorProblem::TrailingBytes(2))
        );
        let e = problem(b"libfoo.so\0\0\0");
        assert_eq!(
            (e.offset, e.problem),
            (10, DescriptorProblem::EmptyHintList)
        );
        let e = problem(b"libfoo.so\0=/a:/b\0\0");
        assert_eq!(
            (e.offset, e.problem),
            (14, DescriptorProblem::UnknownHint(Some(b'/')))
        );
        let e = problem(b"libfoo.so\0=/a::?b\0\0");
        assert_eq!(
            (e.offset, e.problem),
            (14, DescriptorProblem::UnknownHint(None))
        );
        let e = problem(b"libfoo.so\0=rel/libfoo.so\0\0");
        assert_eq!(
            (e.offset, e.problem),
            (10, DescriptorProblem::RelativeExact)
        );
        let e = problem(b"a\0?x\0a\0?y\0\0");
        assert_eq!((e.offset, e.problem), (5, DescriptorProblem::DuplicateName));
        assert_eq!(problem(b"").problem, DescriptorProblem::Unterminated);
    }

    #[test]
    fn note_layout_matches_patchelf() {
        let le = Format {
            class: Class::Elf64,
            endian: Endian::Little,
        };
        let n = encode_note(le, b"a\0?\0\0");
        assert_eq!(
            n,
            b"\x06\0\0\0\x05\0\0\0\xb6\x6c\xa8\x63NixOS\0\0\0a\0?\0\0\0\0\0".to_vec()
        );
        assert_eq!(n.len() as u64, note_size(5));
        let be = Format {
            class: Class::Elf32,
            endian: Endian::Big,
        };
        assert_eq!(
            &encode_note(be, b"\0")[..12],
            b"\0\0\0\x06\0\0\0\x01\x63\xa8\x6c\xb6"
        );
    }

    #[test]
    fn scan_finds_the_note_among_others_and_rejects_a_truncated_one() {
        let le = Format {
            class: Class::Elf64,
            endian: Endian::Little,
        };
        // A GNU build-id note first, then ours.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&le.put_u32(4));
        bytes.extend_from_slice(&le.put_u32(3));
        bytes.extend_from_slice(&le.put_u32(3));
        bytes.extend_from_slice(b"GNU\0abc\0");
        let ours = encode_note(le, b"x\0?\0\0");
        bytes.extend_from_slice(&ours);
        let f = scan(le, &bytes, 100, 4).unwrap().unwrap();
        assert_eq!(
            (f.offset, f.size, f.desc_offset, f.desc_len, f.last),
            (120, 28, 140, 5, true)
        );
        // Ours, then another note: not last.
        let mut two = ours.clone();
        two.extend_from_slice(&bytes[..20]);
        assert!(!scan(le, &two, 0, 4).unwrap().unwrap().last);
        // Ours, cut short.
        let err = scan(le, &ours[..22], 64, 4).unwrap_err();
        assert_eq!(err.offset(), Some(64));
        // No note of ours.
        assert!(scan(le, &bytes[..20], 0, 4).unwrap().is_none());
    }
}
