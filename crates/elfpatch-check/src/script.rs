//! The `plan_apply` input format: an ELF file followed by an edit script, and the script decoded
//! into batches of edits (and encoded, for seeds and tests). See the crate documentation for the
//! layout; the operations are the entries of [`OPS`].

use elfpatch::{Edit, Elf, Options};

/// Strings the script can name with one byte.
pub const DICT: [&[u8]; 24] = [
    b"",
    b"/",
    b"libc.so.6",
    b"libm.so.6",
    b"libdep.so",
    b"libextra.so",
    b"$ORIGIN",
    b"$ORIGIN/../lib",
    b"/opt/x/libdep.so",
    b"/run/opengl-driver/lib",
    b"/lib64/ld-linux-x86-64.so.2",
    b"/lib/ld-linux.so.2",
    b"so.6",
    b"libc.so.6.1",
    b"/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda-stubs/lib/stubs",
    b"a",
    b"ab",
    b"/a:/b",
    b"libfoo.so.1",
    b"libfoo-with-a-rather-long-name.so.1",
    b"c.so.6",
    b"/usr/lib/x86_64-linux-gnu",
    b"lib",
    b"x",
];

/// Most batches and edits per batch a script may hold (bounds the time per input).
pub const MAX_BATCHES: usize = 6;
/// See [`MAX_BATCHES`].
pub const MAX_EDITS: usize = 12;

/// What an operation byte's operands are, and the edit they make.
pub enum Op {
    /// No operands.
    Bare(Edit),
    /// A string operand.
    String(fn(Vec<u8>) -> Edit),
    /// An existing-name operand.
    Existing(fn(Vec<u8>) -> Edit),
    /// An existing-name operand, then a string operand.
    ExistingThenString(fn(Vec<u8>, Vec<u8>) -> Edit),
    /// A byte `n`: `SetRunpath` of a generated path of this many bytes plus `n`. Only the decoder
    /// makes these (a shortcut to long paths); the encoder writes long paths as string operands.
    LongRunpath(usize),
    /// A byte `n`: `AddNeeded` of a generated library name of `8 + n` bytes and the `lib` prefix.
    /// Decoder only, as [`Op::LongRunpath`].
    LongNeeded,
    /// No operands: the next operations form another batch, planned on the edited file.
    EndOfBatch,
}

/// The opcode table: an operation byte `op` selects `OPS[op % 16]`, whatever its high bits. A new
/// edit is one entry here: the decoder reads its operands by the entry's kind, and the encoder
/// finds the entry by decoding the edit's strings (`strings`, which names every edit) back.
///
/// The table is full, and every byte already means something: no code can be added, moved or
/// given another meaning without changing what existing scripts (`regressions/`, the fuzz
/// corpora) decode to. To add an edit, turn the last entry into an escape rather than reshuffle
/// codes: an `op` of 15 below `0x80` still ends the batch, one from `0x80` (`0x8f`, `0x9f`, …)
/// takes the next byte as an index into a second table like this one. That re-reads only scripts
/// holding such a byte, whose batch ended there until then: replay `regressions/` (`cargo test -p
/// elfpatch-check --test fuzz_corpus`) and re-record an input that no longer reproduces its
/// finding.
pub static OPS: [Op; 16] = [
    Op::String(Edit::SetRunpath),
    Op::String(Edit::SetRpath),
    Op::Bare(Edit::RemoveRunpath),
    Op::Bare(Edit::RemoveRpath),
    Op::Bare(Edit::RpathToRunpath),
    Op::Bare(Edit::RunpathToRpath),
    Op::String(Edit::AddNeeded),
    Op::Existing(Edit::RemoveNeeded),
    Op::ExistingThenString(|old, new| Edit::ReplaceNeeded { old, new }),
    Op::String(Edit::SetSoname),
    Op::String(Edit::SetInterpreter),
    Op::LongRunpath(64),
    Op::LongRunpath(128),
    Op::LongRunpath(256),
    Op::LongNeeded,
    Op::EndOfBatch,
];

/// Splits a `plan_apply` input into the ELF bytes and the script.
pub fn split(data: &[u8]) -> (&[u8], &[u8]) {
    if data.len() < 2 {
        return (data, &[]);
    }
    let body = &data[..data.len() - 2];
    let n = usize::from(u16::from_le_bytes([
        data[data.len() - 2],
        data[data.len() - 1],
    ]));
    let n = n.min(body.len());
    body.split_at(body.len() - n)
}

/// Builds a `plan_apply` input (the inverse of [`split`]).
pub fn join(elf: &[u8], script: &[u8]) -> Vec<u8> {
    assert!(script.len() <= usize::from(u16::MAX));
    let mut v = elf.to_vec();
    v.extend_from_slice(script);
    v.extend_from_slice(&(script.len() as u16).to_le_bytes());
    v
}

/// A path-like string of exactly `n` bytes.
pub fn generated_path(n: usize, salt: u8) -> Vec<u8> {
    let unit = format!("/dir-{salt:02x}-with-a-long-name");
    unit.bytes().cycle().take(n).collect()
}

/// The rest of a script; a missing byte reads as 0.
pub(crate) struct Reader<'a> {
    s: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(s: &'a [u8]) -> Self {
        Reader { s }
    }

    pub(crate) fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.s.split_first()?;
        self.s = rest;
        Some(b)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.s.len());
        let (a, b) = self.s.split_at(n);
        self.s = b;
        a.to_vec()
    }

    fn string(&mut self) -> Vec<u8> {
        let s = self.byte().unwrap_or(0);
        match s {
            0..0x40 => DICT[usize::from(s) % DICT.len()].to_vec(),
            0x40..0x80 => {
                let n = usize::from(s & 0x3f) * 16 + usize::from(self.byte().unwrap_or(0));
                generated_path(n, s)
            }
            _ => self.bytes(usize::from(s & 0x7f)),
        }
    }

    fn existing(&mut self, needed: &[Vec<u8>]) -> Vec<u8> {
        let e = self.byte().unwrap_or(0);
        if e < 0x80 {
            if needed.is_empty() {
                DICT[usize::from(e) % DICT.len()].to_vec()
            } else {
                needed[usize::from(e) % needed.len()].clone()
            }
        } else {
            self.string()
        }
    }

    /// The operands of operation byte `op` and the edit they make; `None` at the end of a batch.
    fn operation(&mut self, op: u8, needed: &[Vec<u8>]) -> Option<Edit> {
        let length = |r: &mut Self| usize::from(r.byte().unwrap_or(0));
        Some(match &OPS[usize::from(op % 16)] {
            Op::Bare(e) => e.clone(),
            Op::String(make) => make(self.string()),
            Op::Existing(make) => make(self.existing(needed)),
            Op::ExistingThenString(make) => {
                let old = self.existing(needed);
                make(old, self.string())
            }
            Op::LongRunpath(base) => Edit::SetRunpath(generated_path(base + length(self), op)),
            Op::LongNeeded => {
                let n = 8 + length(self);
                let mut name = b"lib".to_vec();
                name.extend(
                    generated_path(n, op)
                        .iter()
                        .map(|&c| if c == b'/' { b'_' } else { c }),
                );
                Edit::AddNeeded(name)
            }
            Op::EndOfBatch => return None,
        })
    }
}

/// The options byte, decoded.
pub fn options(b: u8) -> Options {
    Options {
        page_size: (b & 0x80 != 0).then(|| 0x1000u64 << (b & 7)),
        dynamic_spare: usize::from((b >> 3) & 7),
    }
}

/// Decodes one batch from `r`, naming existing libraries from `needed`. `None` at the end.
pub(crate) fn batch(r: &mut Reader<'_>, needed: &[Vec<u8>]) -> Option<Vec<Edit>> {
    let mut edits = Vec::new();
    r.s.first()?;
    while let Some(op) = r.byte() {
        let Some(e) = r.operation(op, needed) else {
            break;
        };
        if edits.len() < MAX_EDITS {
            edits.push(e);
        }
    }
    Some(edits)
}

/// The options and the first batch of a `plan_apply` input, decoded against its own ELF part
/// (for the on-disk replay in `fuzz_corpus.rs`).
pub fn first_batch(data: &[u8]) -> Option<(Options, Vec<Edit>)> {
    let (elf_bytes, script) = split(data);
    let needed: Vec<Vec<u8>> = Elf::parse(elf_bytes)
        .map(|e| e.needed().into_iter().map(<[u8]>::to_vec).collect())
        .unwrap_or_default();
    let mut r = Reader::new(script);
    let opts = options(r.byte()?);
    batch(&mut r, &needed).map(|b| (opts, b))
}

/// Encodes edits as a script (for seeds and tests): each edit as the first entry of [`OPS`] that
/// decodes its operands back into it. Strings longer than 127 bytes are generated paths, so only
/// [`generated_path`] strings of those lengths round-trip. Panics on an edit no entry makes.
pub fn encode(opts: u8, batches: &[Vec<Edit>]) -> Vec<u8> {
    let mut s = vec![opts];
    for (bi, b) in batches.iter().enumerate() {
        if bi > 0 {
            s.push(end_of_batch());
        }
        for e in b {
            let (code, operands) = OPS
                .iter()
                .enumerate()
                .find_map(|(code, op)| Some((code as u8, operands(op, e)?)))
                .unwrap_or_else(|| panic!("{e:?} has no code in the fuzz script format"));
            s.push(code);
            s.extend(operands);
        }
    }
    s
}

/// The code of [`Op::EndOfBatch`].
fn end_of_batch() -> u8 {
    let end = OPS.iter().position(|op| matches!(op, Op::EndOfBatch));
    end.expect("OPS has an end of batch") as u8
}

/// The operand bytes with which `op` decodes into `e`, if it can.
fn operands(op: &Op, e: &Edit) -> Option<Vec<u8>> {
    let mut s = Vec::new();
    match (op, strings(e).as_slice()) {
        (Op::Bare(x), []) if x == e => {}
        (Op::String(make), [v]) if make(v.to_vec()) == *e => string(&mut s, v),
        (Op::Existing(make), [v]) if make(v.to_vec()) == *e => {
            // An existing-name byte from 0x80 up: a string operand follows.
            s.push(0x80);
            string(&mut s, v)
        }
        (Op::ExistingThenString(make), [old, new]) if make(old.to_vec(), new.to_vec()) == *e => {
            s.push(0x80);
            string(&mut s, old);
            string(&mut s, new)
        }
        _ => return None,
    }
    Some(s)
}

/// Appends the string operand for `v`.
fn string(s: &mut Vec<u8>, v: &[u8]) {
    if let Some(i) = DICT.iter().position(|d| *d == v) {
        s.push(i as u8);
    } else if v.len() < 0x80 {
        s.push(0x80 | v.len() as u8);
        s.extend_from_slice(v);
    } else {
        // Generated: (s & 0x3f) * 16 + next byte.
        let n = v.len().min(0x3f * 16 + 255);
        let hi = (n / 16).min(0x3f);
        s.push(0x40 | hi as u8);
        s.push((n - hi * 16) as u8);
    }
}

/// The byte strings an edit carries, in the order a script gives them.
fn strings(e: &Edit) -> Vec<&[u8]> {
    match e {
        Edit::SetRunpath(v)
        | Edit::SetRpath(v)
        | Edit::AddNeeded(v)
        | Edit::RemoveNeeded(v)
        | Edit::SetSoname(v)
        | Edit::SetInterpreter(v)
        | Edit::ClearSymbolVersion(v)
        | Edit::SetResolutionCache(v) => vec![v],
        Edit::ReplaceNeeded { old, new } => vec![old, new],
        Edit::RemoveRunpath
        | Edit::RemoveRpath
        | Edit::RpathToRunpath
        | Edit::RunpathToRpath
        | Edit::RemoveResolutionCache
        | Edit::RenameDynamicSymbols(_)
        | Edit::SetOsAbi(_)
        | Edit::SetExecstack(_)
        | Edit::AddFlags1(_)
        | Edit::AddDebugTag => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoder is derived from the table: every edit it accepts decodes back to itself, and
    /// batches stay apart.
    #[test]
    fn encoded_edits_decode_to_themselves() {
        let edits = vec![
            Edit::SetRunpath(generated_path(300, 0x52)),
            Edit::SetRpath(b"$ORIGIN".to_vec()),
            Edit::RemoveRunpath,
            Edit::RemoveRpath,
            Edit::RpathToRunpath,
            Edit::RunpathToRpath,
            Edit::AddNeeded(b"libnew.so".to_vec()),
            Edit::RemoveNeeded(b"libc.so.6".to_vec()),
            Edit::ReplaceNeeded {
                old: b"libm.so.6".to_vec(),
                new: b"libm.so.7".to_vec(),
            },
            Edit::SetSoname(b"libx.so.1".to_vec()),
            Edit::SetInterpreter(b"/lib/ld.so".to_vec()),
        ];
        let second = vec![Edit::AddNeeded(b"a".to_vec())];
        let script = encode(0x88, &[edits.clone(), second.clone()]);
        let mut r = Reader::new(&script);
        assert_eq!(options(r.byte().unwrap()), options(0x88));
        assert_eq!(batch(&mut r, &[]), Some(edits));
        assert_eq!(batch(&mut r, &[]), Some(second));
        assert_eq!(batch(&mut r, &[]), None);
    }

    #[test]
    #[should_panic(expected = "has no code")]
    fn an_edit_without_an_entry_is_refused() {
        encode(0, &[vec![Edit::AddDebugTag]]);
    }
}
