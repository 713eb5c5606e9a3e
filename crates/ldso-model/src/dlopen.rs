//! The libraries an object loads with `dlopen()`, which no `DT_NEEDED` entry names.
//!
//! Two sources, in this order:
//!
//! - what the object declares in `.note.dlopen`: the FreeDesktop ELF dlopen metadata
//!   (<https://systemd.io/ELF_DLOPEN_METADATA/>): notes of owner `FDO` and type `0x407c0c0a`
//!   whose descriptor is a JSON array of objects with `soname` (an array of alternatives, the
//!   first one found being used), `feature`, `description` and `priority` (`required`,
//!   `recommended`, `suggested`);
//! - for NVIDIA's libraries, which declare nothing, the small table [`NVIDIA_TABLE`] of the
//!   `dlopen`s that decide which GPU driver library a process gets. Each entry names its source.
//!
//! Everything here is pure: [`parse_notes`] and [`scan_rodata`] read bytes the I/O layer
//! ([`crate::fsview::ElfInfo::read`]) hands them, and [`dlopen_edges`] decides from an object's
//! names and [`ElfInfo`].

use serde_json::Value;

use elfpatch::Format;

/// The owner of a dlopen-metadata note.
pub const FDO_OWNER: &[u8] = b"FDO";

/// The type of a dlopen-metadata note (`NT_FDO_DLOPEN_METADATA` in glibc's `elf.h`).
pub const NT_FDO_DLOPEN_METADATA: u32 = 0x407c_0c0a;

/// One dependency an object declares in `.note.dlopen`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DlopenDecl {
    /// The sonames, alternatives in order of preference.
    pub sonames: Vec<Vec<u8>>,
    /// `feature`, if given.
    pub feature: Option<String>,
    /// `priority`, if given (`required`, `recommended`, `suggested`).
    pub priority: Option<String>,
}

/// One entry of [`NVIDIA_TABLE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableEntry {
    /// What the entry recognises, in words.
    pub applies_to: &'static str,
    /// What the object `dlopen`s (a pattern for libnvrtc's builtins).
    pub dlopens: &'static str,
    /// Where the knowledge comes from.
    pub source: &'static str,
    trigger: Trigger,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// The object's file name or `DT_SONAME` starts with this.
    Named(&'static str),
    /// The object's read-only data holds the NUL-terminated string, and it does not `DT_NEEDED`
    /// it.
    StringInRodata(&'static str),
    /// libnvrtc: its builtins, named by version.
    NvrtcBuiltins,
}

/// The `dlopen`s of NVIDIA libraries that decide which driver library loads.
///
/// - libcudart (the CUDA runtime, shared) loads the driver with `dlopen("libcuda.so.1")` on its
///   first call and has no `DT_NEEDED` on it;
/// - a program or library linked with `libcudart_static.a` does the same from its own code: it is
///   recognised by the string `libcuda.so.1` in its `.rodata` (the static runtime embeds the name
///   it passes to `dlopen`) with no `DT_NEEDED` on `libcuda.so.1`. Other direct users of the driver
///   API that load it themselves (PyTorch's `libc10_cuda.so`, Triton) are recognised the same way;
/// - libnvrtc loads `libnvrtc-builtins.so.MAJOR.MINOR` of its own version;
/// - NVML users that do not link `libnvidia-ml` load `libnvidia-ml.so.1` (recognised by the string,
///   as for `libcuda.so.1`).
pub const NVIDIA_TABLE: &[TableEntry] = &[
    TableEntry {
        applies_to: "libcudart.so.* (the CUDA runtime)",
        dlopens: "libcuda.so.1",
        source: "NVIDIA CUDA Compatibility guide: the CUDA runtime loads the user-mode driver \
                 libcuda.so.1 at run time; libcudart.so has no DT_NEEDED on it",
        trigger: Trigger::Named("libcudart.so"),
    },
    TableEntry {
        applies_to: "objects holding the string libcuda.so.1 in .rodata without DT_NEEDED on it \
                     (libcudart_static-linked programs, PyTorch's libc10_cuda)",
        dlopens: "libcuda.so.1",
        source: "libcudart_static.a embeds the same dlopen(\"libcuda.so.1\") as libcudart.so \
                 (`strings` of a statically linked CUDA program shows it); PyTorch \
                 c10/cuda/driver_api.cpp dlopens it too",
        trigger: Trigger::StringInRodata("libcuda.so.1"),
    },
    TableEntry {
        applies_to: "libnvrtc.so.* (the runtime compiler)",
        dlopens: "libnvrtc-builtins.so.MAJOR.MINOR",
        source: "NVIDIA NVRTC User Guide: libnvrtc dynamically loads libnvrtc-builtins.so of \
                 the same major.minor version at run time",
        trigger: Trigger::NvrtcBuiltins,
    },
    TableEntry {
        applies_to: "objects holding the string libnvidia-ml.so.1 in .rodata without DT_NEEDED on \
                     it (NVML users that load it at run time)",
        dlopens: "libnvidia-ml.so.1",
        source: "NVIDIA NVML API reference: NVML ships only with the driver as \
                 libnvidia-ml.so.1; PyTorch c10/cuda/driver_api.cpp and pynvml dlopen it",
        trigger: Trigger::StringInRodata("libnvidia-ml.so.1"),
    },
];

/// The strings [`scan_rodata`] looks for (whole NUL-terminated strings).
const WATCHED: &[&str] = &["libcuda.so.1", "libnvidia-ml.so.1"];

/// The prefix of libnvrtc's builtins library (a version follows).
const NVRTC_BUILTINS: &str = "libnvrtc-builtins.so.";

/// Where the model knows a `dlopen` from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DlopenSource {
    /// The object's `.note.dlopen`.
    Declared {
        /// The declared feature.
        feature: Option<String>,
        /// The declared priority.
        priority: Option<String>,
    },
    /// An entry of [`NVIDIA_TABLE`].
    Table(&'static TableEntry),
}

impl DlopenSource {
    /// Whether the `dlopen` is only inferred from a string in the object's `.rodata` (weaker
    /// than a declaration or a named library's known behaviour: such objects may load the
    /// library later than the runtime does, or never).
    pub fn is_inferred(&self) -> bool {
        matches!(self, DlopenSource::Table(t) if matches!(t.trigger, Trigger::StringInRodata(_)))
    }

    /// Where the knowledge came from, in words.
    pub fn describe(&self) -> String {
        match self {
            DlopenSource::Declared { feature, priority } => format!(
                "declared in its .note.dlopen (feature {}, priority {})",
                feature.as_deref().unwrap_or("unnamed"),
                priority.as_deref().unwrap_or("unset")
            ),
            DlopenSource::Table(t) => format!(
                "stubstrip's NVIDIA table, entry for {}: {}",
                t.applies_to, t.source
            ),
        }
    }
}

/// One library an object `dlopen`s: alternatives in order (the first one found is used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DlopenEdge {
    /// The names, in order.
    pub names: Vec<Vec<u8>>,
    /// Where this is known from.
    pub source: DlopenSource,
}

/// Why `.note.dlopen` does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(".note.dlopen at byte {offset} of its section: {problem}")]
pub struct DlopenNoteError {
    /// Offset of the note within the bytes given.
    pub offset: usize,
    /// What is wrong.
    pub problem: String,
}

/// The notes in `bytes` (a note section or segment, notes aligned to 4): owner (without NULs),
/// type, descriptor and offset. Stops at the first note that does not fit.
pub fn notes(format: Format, bytes: &[u8]) -> Vec<(Vec<u8>, u32, Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let up = |v: usize| v.checked_add(3).map(|x| x & !3);
    while pos + 12 <= bytes.len() {
        let namesz = format.u32(&bytes[pos..]) as usize;
        let descsz = format.u32(&bytes[pos + 4..]) as usize;
        let ntype = format.u32(&bytes[pos + 8..]);
        let name_at = pos + 12;
        let Some(desc_at) = name_at.checked_add(namesz).and_then(up) else {
            break;
        };
        let Some(end) = desc_at.checked_add(descsz).filter(|&e| e <= bytes.len()) else {
            break;
        };
        let mut owner = bytes[name_at..name_at + namesz].to_vec();
        while owner.last() == Some(&0) {
            owner.pop();
        }
        out.push((owner, ntype, bytes[desc_at..end].to_vec(), pos));
        pos = up(end).unwrap_or(usize::MAX);
    }
    out
}

/// The dependencies declared by the dlopen-metadata notes among `bytes` (see [`notes`]).
pub fn parse_notes(format: Format, bytes: &[u8]) -> Result<Vec<DlopenDecl>, DlopenNoteError> {
    let mut out = Vec::new();
    for (owner, ntype, desc, offset) in notes(format, bytes) {
        if owner != FDO_OWNER || ntype != NT_FDO_DLOPEN_METADATA {
            continue;
        }
        let problem = |problem: String| DlopenNoteError { offset, problem };
        let end = desc.iter().position(|&b| b == 0).unwrap_or(desc.len());
        let json: Value =
            serde_json::from_slice(&desc[..end]).map_err(|e| problem(format!("not JSON: {e}")))?;
        let Value::Array(items) = json else {
            return Err(problem("not a JSON array".into()));
        };
        for item in items {
            out.push(decl(&item).map_err(problem)?);
        }
    }
    Ok(out)
}

fn decl(item: &Value) -> Result<DlopenDecl, String> {
    let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
    let sonames = match item.get("soname") {
        Some(Value::Array(v)) if !v.is_empty() => v
            .iter()
            .map(|s| s.as_str().map(|s| s.as_bytes().to_vec()))
            .collect::<Option<Vec<_>>>()
            .ok_or("a soname is not a string")?,
        _ => return Err("an object without a non-empty \"soname\" array".into()),
    };
    Ok(DlopenDecl {
        sonames,
        feature: text("feature"),
        priority: text("priority"),
    })
}

/// The strings of `rodata` the table watches for: each of the watched names that occurs as a
/// NUL-terminated string, and every `libnvrtc-builtins.so.<version>` string.
pub fn scan_rodata(rodata: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for w in WATCHED {
        let mut needle = w.as_bytes().to_vec();
        needle.push(0);
        if memchr::memmem::find(rodata, &needle).is_some() {
            out.push(w.as_bytes().to_vec());
        }
    }
    for at in memchr::memmem::find_iter(rodata, NVRTC_BUILTINS.as_bytes()) {
        let rest = &rodata[at..];
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let s = &rest[..end];
        let version = &s[NVRTC_BUILTINS.len()..];
        if !version.is_empty()
            && version.iter().all(|c| c.is_ascii_digit() || *c == b'.')
            && !out.iter().any(|o| o == s)
        {
            out.push(s.to_vec());
        }
    }
    out
}

/// How many bytes each window given to [`RodataScan::window`] must repeat from the end of the one
/// before: the longest pattern it looks for, less one, so that no occurrence is cut in two.
pub const RODATA_OVERLAP: usize = {
    let mut longest = NVRTC_BUILTINS.len();
    let mut i = 0;
    while i < WATCHED.len() {
        // The watched names are looked for with their NUL.
        if WATCHED[i].len() + 1 > longest {
            longest = WATCHED[i].len() + 1;
        }
        i += 1;
    }
    longest - 1
};

/// [`scan_rodata`] over `.rodata` read window by window (consecutive windows overlapping by
/// [`RODATA_OVERLAP`] bytes), so that a big section is never held whole: which watched names
/// occur is known from the windows. A `libnvrtc-builtins.so.` string can be of any length, so
/// when one occurs [`RodataScan::needs_whole`] says so and the caller scans the whole section
/// with [`scan_rodata`] (only libnvrtc has one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RodataScan {
    found: [bool; WATCHED.len()],
    nvrtc: bool,
}

impl RodataScan {
    /// Looks at one window.
    pub fn window(&mut self, bytes: &[u8]) {
        for (w, found) in WATCHED.iter().zip(self.found.iter_mut()) {
            if !*found {
                let mut needle = w.as_bytes().to_vec();
                needle.push(0);
                *found = memchr::memmem::find(bytes, &needle).is_some();
            }
        }
        self.nvrtc |= memchr::memmem::find(bytes, NVRTC_BUILTINS.as_bytes()).is_some();
    }

    /// Whether the windows held the start of a `libnvrtc-builtins.so.` string: then only
    /// [`scan_rodata`] over the whole section gives the names.
    pub fn needs_whole(&self) -> bool {
        self.nvrtc
    }

    /// What [`scan_rodata`] gives for the section whose windows were looked at, when
    /// [`RodataScan::needs_whole`] is false.
    pub fn names(&self) -> Vec<Vec<u8>> {
        WATCHED
            .iter()
            .zip(self.found)
            .filter(|(_, f)| *f)
            .map(|(w, _)| w.as_bytes().to_vec())
            .collect()
    }
}

fn basename(p: &[u8]) -> &[u8] {
    p.rsplit(|&c| c == b'/').next().unwrap_or(p)
}

/// `libnvrtc-builtins.so.X.Y` for a libnvrtc file named `libnvrtc.so.X.Y[.Z]`.
fn builtins_from_name(name: &[u8]) -> Option<Vec<u8>> {
    let version = name.strip_prefix(b"libnvrtc.so.")?;
    let mut parts = version.split(|&c| c == b'.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let digits = |p: &[u8]| !p.is_empty() && p.iter().all(u8::is_ascii_digit);
    if !digits(major) || !digits(minor) {
        return None;
    }
    let mut out = NVRTC_BUILTINS.as_bytes().to_vec();
    out.extend_from_slice(major);
    out.push(b'.');
    out.extend_from_slice(minor);
    Some(out)
}

/// What [`dlopen_edges`] reads of an object: a view of its `ElfInfo`
/// ([`crate::fsview::ElfInfo::dlopen_facts`]). This module decides from these facts alone, below
/// the file reading that gathers them.
#[derive(Clone, Copy, Debug, Default)]
pub struct DlopenFacts<'a> {
    /// What it declares in `.note.dlopen`.
    pub declared: &'a [DlopenDecl],
    /// The watched strings of its `.rodata`.
    pub rodata_names: &'a [Vec<u8>],
    /// Its `DT_NEEDED` names.
    pub needed: &'a [Vec<u8>],
    /// Its `DT_SONAME`.
    pub soname: Option<&'a [u8]>,
}

/// The libraries an object `dlopen`s, as far as the model knows: what it declares, then what
/// [`NVIDIA_TABLE`] says of it (names it already declares, has in `DT_NEEDED`, or is itself are
/// left out). `paths` are the object's path and its canonical path, for its file names.
pub fn dlopen_edges(paths: &[&[u8]], info: &DlopenFacts<'_>) -> Vec<DlopenEdge> {
    let mut out: Vec<DlopenEdge> = info
        .declared
        .iter()
        .map(|d| DlopenEdge {
            names: d.sonames.clone(),
            source: DlopenSource::Declared {
                feature: d.feature.clone(),
                priority: d.priority.clone(),
            },
        })
        .collect();
    let mut own: Vec<&[u8]> = paths.iter().map(|p| basename(p)).collect();
    own.extend(info.soname);
    for t in NVIDIA_TABLE {
        let name: Option<Vec<u8>> = match t.trigger {
            Trigger::Named(prefix) => own
                .iter()
                .any(|n| n.starts_with(prefix.as_bytes()))
                .then(|| t.dlopens.as_bytes().to_vec()),
            Trigger::StringInRodata(s) => info
                .rodata_names
                .iter()
                .any(|n| n == s.as_bytes())
                .then(|| s.as_bytes().to_vec()),
            Trigger::NvrtcBuiltins => own
                .iter()
                .any(|n| n.starts_with(b"libnvrtc.so"))
                .then(|| {
                    info.rodata_names
                        .iter()
                        .find(|n| n.starts_with(NVRTC_BUILTINS.as_bytes()))
                        .cloned()
                        .or_else(|| own.iter().find_map(|n| builtins_from_name(n)))
                })
                .flatten(),
        };
        let Some(name) = name else { continue };
        let known = out.iter().any(|e| e.names.contains(&name))
            || info.needed.contains(&name)
            || own.contains(&name.as_slice());
        if !known {
            out.push(DlopenEdge {
                names: vec![name],
                source: DlopenSource::Table(t),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use elfpatch::{Class, Endian};

    fn le() -> Format {
        Format {
            class: Class::Elf64,
            endian: Endian::Little,
        }
    }

    /// A note as a linker lays it out (little-endian, 4-aligned).
    pub(crate) fn note(owner: &[u8], ntype: u32, desc: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        n.extend_from_slice(&(owner.len() as u32 + 1).to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&ntype.to_le_bytes());
        n.extend_from_slice(owner);
        n.push(0);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n.extend_from_slice(desc);
        while n.len() % 4 != 0 {
            n.push(0);
        }
        n
    }

    #[test]
    fn dlopen_notes_are_read_by_owner_and_type_and_json_is_checked() {
        let json = br#"[{"feature":"gpu","description":"d","priority":"recommended","soname":["libcuda.so.1","libcuda.so"]}]"#;
        let mut desc = json.to_vec();
        desc.push(0);
        let mut bytes = note(b"GNU", 3, b"build-id");
        bytes.extend(note(FDO_OWNER, 0x1234, b"[]\0"));
        bytes.extend(note(FDO_OWNER, NT_FDO_DLOPEN_METADATA, &desc));
        let d = parse_notes(le(), &bytes).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].sonames,
            vec![b"libcuda.so.1".to_vec(), b"libcuda.so".to_vec()]
        );
        assert_eq!(d[0].priority.as_deref(), Some("recommended"));
        let bad = note(FDO_OWNER, NT_FDO_DLOPEN_METADATA, br#"[{"feature":"x"}]"#);
        let e = parse_notes(le(), &bad).unwrap_err();
        assert!(e.problem.contains("soname"), "{e}");
        let bad = note(FDO_OWNER, NT_FDO_DLOPEN_METADATA, b"{not json");
        assert!(parse_notes(le(), &bad).is_err());
    }

    #[test]
    fn rodata_strings_must_be_whole_and_builtins_carry_a_version() {
        let ro = b"xx\0/usr/lib/libcuda.so.1\0libnvidia-ml.so.1x\0libnvrtc-builtins.so.12.8\0libnvrtc-builtins.so.%s\0";
        let found = scan_rodata(ro);
        assert_eq!(
            found,
            vec![
                b"libcuda.so.1".to_vec(),
                b"libnvrtc-builtins.so.12.8".to_vec()
            ]
        );
    }

    #[test]
    fn the_table_recognises_cudart_static_users_nvrtc_and_nvml_users() {
        let cudart = DlopenFacts {
            soname: Some(b"libcudart.so.12"),
            ..DlopenFacts::default()
        };
        let e = dlopen_edges(&[b"/x/lib/libcudart.so.12"], &cudart);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].names, vec![b"libcuda.so.1".to_vec()]);
        assert!(
            matches!(e[0].source, DlopenSource::Table(t) if t.applies_to.starts_with("libcudart"))
        );

        let static_user = DlopenFacts {
            rodata_names: &[b"libcuda.so.1".to_vec(), b"libnvidia-ml.so.1".to_vec()],
            ..DlopenFacts::default()
        };
        let e = dlopen_edges(&[b"/x/bin/app"], &static_user);
        let names: Vec<_> = e.iter().map(|e| e.names[0].clone()).collect();
        assert_eq!(
            names,
            vec![b"libcuda.so.1".to_vec(), b"libnvidia-ml.so.1".to_vec()]
        );
        // Linked against it: a DT_NEEDED edge, not a dlopen.
        let linked = DlopenFacts {
            needed: &[b"libcuda.so.1".to_vec()],
            ..static_user
        };
        assert_eq!(dlopen_edges(&[b"/x/bin/app"], &linked).len(), 1);
        // The driver library itself holds its name.
        assert_eq!(dlopen_edges(&[b"/drv/libcuda.so.1"], &static_user).len(), 1);

        let nvrtc = DlopenFacts::default();
        let e = dlopen_edges(&[b"/x/libnvrtc.so.12", b"/x/libnvrtc.so.12.8.93"], &nvrtc);
        assert_eq!(e[0].names, vec![b"libnvrtc-builtins.so.12.8".to_vec()]);
        let nvrtc = DlopenFacts {
            rodata_names: &[b"libnvrtc-builtins.so.12.9".to_vec()],
            ..DlopenFacts::default()
        };
        let e = dlopen_edges(&[b"/x/libnvrtc.so.12"], &nvrtc);
        assert_eq!(e[0].names, vec![b"libnvrtc-builtins.so.12.9".to_vec()]);
    }

    #[test]
    fn declared_dlopens_come_first_and_are_not_repeated_by_the_table() {
        let info = DlopenFacts {
            soname: Some(b"libcudart.so.12"),
            declared: &[DlopenDecl {
                sonames: vec![b"libcuda.so.1".to_vec()],
                feature: Some("driver".into()),
                priority: Some("required".into()),
            }],
            ..DlopenFacts::default()
        };
        let e = dlopen_edges(&[b"/x/libcudart.so.12"], &info);
        assert_eq!(e.len(), 1);
        assert!(e[0].source.describe().contains("feature driver"));
    }
}
