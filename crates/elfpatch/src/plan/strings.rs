//! Where new strings go in the dynamic string table, and which old bytes become garbage.
//!
//! The rule: a byte of the table may be overwritten or zeroed only if no reference that survives
//! the edit covers it. A reference at offset `o` covers `[o, nul(o)]`: the string and its NUL, so a
//! name merged into the tail of a longer string (`libdep.so` inside `/opt/x/libdep.so`) protects
//! those bytes too. Strings that fit nowhere make the table grow into a copy.

use super::dynstr::{Dynstr, Scan};
use crate::error::Result;

/// A half-open byte range `[start, end)` of the table.
pub type Range = (u64, u64);

/// Where one requested string ended up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Already present, NUL-terminated, at this offset in bytes that stay referenced.
    Existing(u64),
    /// Written into unreferenced bytes of the current table at this offset.
    InPlace(u64),
    /// Appended to a grown copy of the table, at this offset of the copy.
    Appended(u64),
}

impl Placement {
    /// The string table offset the referring entry will hold.
    pub fn offset(self) -> u64 {
        match self {
            Placement::Existing(o) | Placement::InPlace(o) | Placement::Appended(o) => o,
        }
    }
}

/// A request: the string, and the offset of the value it replaces (to prefer reusing that spot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The string, without NUL.
    pub bytes: Vec<u8>,
    /// The offset of the string this one replaces, if any.
    pub replaces: Option<u64>,
}

/// The outcome of placing all requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// One placement per request, in request order.
    pub placements: Vec<Placement>,
    /// Bytes to write into the current table (offset, bytes), for `InPlace` placements, already
    /// including zeros for the rest of a replaced string when placed over it.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// Ranges of the current table that were referenced before the edit and no longer are: their
    /// bytes must be zeroed (old store paths must not linger, see the pitfalls).
    pub garbage: Vec<Range>,
    /// When some string did not fit: the bytes appended after the current table's end (the table
    /// grows to `table_len + appended.len()`).
    pub appended: Vec<u8>,
    /// The bytes of the table that references covered before the edit (sorted, merged).
    pub covered_before: Vec<Range>,
}

impl Allocation {
    /// Whether the table must grow (and so move).
    pub fn grows(&self) -> bool {
        !self.appended.is_empty()
    }
}

/// Coverage of the table by references: sorted, merged ranges.
pub fn coverage(table: &[u8], refs: impl IntoIterator<Item = u64>) -> Vec<Range> {
    let table = Dynstr::whole(table);
    in_memory(cover(&mut table.scan(0), refs, |_, _, _| Ok(())))
}

/// The result of a pass over a table held in memory, which cannot fail to be read.
fn in_memory<T>(result: Result<T>) -> T {
    match result {
        Ok(t) => t,
        Err(e) => unreachable!("a string table in memory is read without error: {e}"),
    }
}

/// [`coverage`]: a reference covers its string and the NUL that ends it. The references (one
/// per dynamic symbol: a hundred thousand in a big library) are marked in a bitmap of the
/// table's bytes and read back in order, which sorts them without a sort; each NUL is found once,
/// the table scanned once, in order (a window at a time when it is read from the file).
/// `at_end(scan, nul, from)` hears of the NUL that ends each reference's string, with the start
/// of the covered range it lies in so far.
fn cover(
    scan: &mut Scan<'_, '_>,
    refs: impl IntoIterator<Item = u64>,
    mut at_end: impl FnMut(&Scan<'_, '_>, u64, u64) -> Result<()>,
) -> Result<Vec<Range>> {
    let len = scan.len();
    let mut starts = vec![0u64; len.div_ceil(64) as usize];
    for o in refs.into_iter().filter(|&o| o < len) {
        starts[(o / 64) as usize] |= 1 << (o % 64);
    }
    let mut out: Vec<Range> = Vec::new();
    let mut nul: Option<u64> = None;
    for (w, &word) in starts.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let o = w as u64 * 64 + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            let end = match nul {
                Some(n) if n >= o => n,
                _ => {
                    let n = scan.nul_at_or_after(o)?;
                    nul = Some(n);
                    n
                }
            };
            let covered_to = (end + 1).min(len);
            match out.last_mut() {
                Some(last) if o <= last.1 => last.1 = last.1.max(covered_to),
                _ => out.push((o, covered_to)),
            }
            if end < len {
                at_end(scan, end, out.last().map_or(o, |r| r.0))?;
            }
        }
    }
    Ok(out)
}

/// Sorts and merges overlapping or touching ranges.
pub fn merge(spans: &mut [Range]) -> Vec<Range> {
    spans.sort_unstable();
    let mut out: Vec<Range> = Vec::with_capacity(spans.len());
    for &(s, e) in spans.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// `a` minus `b`, both sorted and merged: one pass over both.
pub fn subtract(a: &[Range], b: &[Range]) -> Vec<Range> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(mut s, e) in a {
        // Ranges of `b` that end before this one cannot touch the ones after it either.
        while j < b.len() && b[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < e {
            let (bs, be) = b[k];
            if bs > s {
                out.push((s, bs));
            }
            s = s.max(be);
            if s >= e {
                break;
            }
            k += 1;
        }
        if s < e {
            out.push((s, e));
        }
    }
    out
}

/// Where the string at `o` ends: past its NUL, or at the end of the table.
fn nul_end(table: &Dynstr<'_>, o: u64) -> Result<u64> {
    Ok((table.nul_at_or_after(o)? + 1).min(table.len()))
}

/// How far a new string may reach when written over the one at `o` that it replaces: over that
/// string's own bytes while nothing keeps them (`free`: unreferenced after the edit), then over
/// bytes nothing referenced before either (`spare`). `o` itself when its spot is not free.
fn own_spot_end(table: &Dynstr<'_>, free: &[Range], spare: &[Range], o: u64) -> Result<u64> {
    let Some(&(_, free_end)) = free.iter().find(|&&(s, e)| s <= o && o < e) else {
        return Ok(o);
    };
    let mut end = nul_end(table, o)?.min(free_end);
    while let Some(&(_, e)) = spare.iter().find(|&&(s, e)| s <= end && end < e) {
        end = e;
    }
    Ok(end)
}

/// Places `requests` in `table`.
///
/// `before` are the offsets referenced before the edit, `after` those that stay referenced
/// (excluding the requests themselves). With `exact == false` some referrers are unknown, so no
/// byte is reused or zeroed and every new string is appended.
pub fn allocate(
    table: &[u8],
    before: &[u64],
    after: &[u64],
    requests: &[Request],
    exact: bool,
) -> Allocation {
    let refs = References {
        common: Vec::new(),
        before: before.to_vec(),
        after: after.to_vec(),
    };
    allocate_split(table, refs, requests, exact)
}

/// The references to a string table, split by when they hold: most (a library's symbol names)
/// both before and after an edit, read once.
#[derive(Clone, Debug, Default)]
pub struct References<C> {
    /// Referenced before the edit and after it.
    pub common: C,
    /// Only before (the strings the edit replaces or removes).
    pub before: Vec<u64>,
    /// Only after (the entries that keep an old string).
    pub after: Vec<u64>,
}

/// [`allocate`], with the references split ([`References`]).
pub fn allocate_split<C: IntoIterator<Item = u64>>(
    table: &[u8],
    refs: References<C>,
    requests: &[Request],
    exact: bool,
) -> Allocation {
    in_memory(allocate_in(&Dynstr::whole(table), refs, requests, exact))
}

/// [`allocate_split`] over a table in memory or read from the file as it goes.
pub(crate) fn allocate_in<C: IntoIterator<Item = u64>>(
    table: &Dynstr<'_>,
    refs: References<C>,
    requests: &[Request],
    exact: bool,
) -> Result<Allocation> {
    let len = table.len();
    // Strings already present, in bytes that stay referenced, are reused (free, and what linkers
    // do): a request matches the bytes before a NUL that ends a referenced string, all covered.
    let mut found: Vec<Option<u64>> = vec![None; requests.len()];
    let offer = |scan: &Scan<'_, '_>, nul: u64, from: u64, found: &mut Vec<Option<u64>>| {
        for (i, request) in requests.iter().enumerate() {
            let size = request.bytes.len() as u64;
            if found[i].is_some() || nul < size || nul - size < from {
                continue;
            }
            // The last byte first: most strings end elsewhere.
            if let Some(&b) = request.bytes.last() {
                if scan.before(nul, 1)?[0] != b {
                    continue;
                }
            }
            if *scan.before(nul, size)? == request.bytes[..] {
                found[i] = Some(nul - size);
            }
        }
        Ok(())
    };
    let longest = requests.iter().map(|r| r.bytes.len() as u64).max();
    let mut scan = table.scan(longest.unwrap_or(0));
    let common = cover(&mut scan, refs.common, |scan, nul, from| {
        offer(scan, nul, from, &mut found)
    })?;
    let end_of = |o: u64| nul_end(table, o);
    let with = |extra: &[u64]| -> Result<Vec<Range>> {
        let mut spans = common.clone();
        for &o in extra.iter().filter(|&&o| o < len) {
            spans.push((o, end_of(o)?));
        }
        Ok(merge(&mut spans))
    };
    let cov_before = with(&refs.before)?;
    let mut cov_after = with(&refs.after)?;
    // The strings only entries after the edit name (few) are candidates too.
    for &o in refs.after.iter().filter(|&&o| o < len) {
        let nul = end_of(o)? - 1;
        if *table.read(nul, 1)? == [0] {
            let from = cov_after
                .iter()
                .find(|r| r.0 <= nul && nul < r.1)
                .map_or(nul, |r| r.0);
            offer(&scan, nul, from, &mut found)?;
        }
    }

    let mut placements = vec![Placement::Existing(0); requests.len()];
    let mut pending = Vec::new();
    for (i, at) in found.into_iter().enumerate() {
        match at {
            Some(at) => placements[i] = Placement::Existing(at),
            None => pending.push(i),
        }
    }

    // Then: unreferenced bytes of the table, preferring the spot of the string being replaced.
    // Bytes something referenced before the edit are written only at the spot of the string they
    // held, from its start: that one write switches whoever names it from the old string to the
    // new one. Anywhere else they would be overwritten while the old entries still name them (a
    // new run path over the end of the old one, another entry not yet switched to its new
    // offset): an interrupted edit would leave a string that is neither.
    let mut writes = Vec::new();
    let mut claimed: Vec<Range> = Vec::new();
    let mut appended = Vec::new();
    // Offset 0 is the empty string every table starts with; never hand it out.
    let (mut free, mut spare) = if exact {
        let free = subtract(&[(1.min(len), len)], &cov_after);
        let spare = subtract(&free, &cov_before);
        (free, spare)
    } else {
        (Vec::new(), Vec::new())
    };
    for &i in &pending {
        let request = &requests[i];
        let need = request.bytes.len() as u64 + 1;
        let at = request
            .replaces
            .map(|o| Ok::<_, crate::error::Error>((o, own_spot_end(table, &free, &spare, o)?)))
            .transpose()?
            .filter(|&(o, end)| end >= o + need)
            .map(|(o, _)| o)
            .or_else(|| {
                spare
                    .iter()
                    .filter(|(s, e)| e - s >= need)
                    .min_by_key(|(s, e)| (e - s, *s))
                    .map(|&(s, _)| s)
            });
        match at {
            Some(o) => {
                let mut bytes = request.bytes.clone();
                bytes.push(0);
                // Over the string it replaces: zero its tail in the same write.
                if request.replaces == Some(o) {
                    let old_end = nul_end(table, o)?;
                    let free_end = free
                        .iter()
                        .find(|&&(s, e)| s <= o && o < e)
                        .map(|r| r.1)
                        .unwrap_or(o + need);
                    let end = old_end.min(free_end).max(o + need);
                    bytes.resize((end - o) as usize, 0);
                }
                let end = o + bytes.len() as u64;
                claimed.push((o, end));
                free = subtract(&free, &[(o, end)]);
                spare = subtract(&spare, &[(o, end)]);
                writes.push((o, bytes));
                placements[i] = Placement::InPlace(o);
            }
            None => {
                let off = len + appended.len() as u64;
                appended.extend_from_slice(&request.bytes);
                appended.push(0);
                placements[i] = Placement::Appended(off);
            }
        }
    }
    claimed.extend(cov_after.iter().copied());
    cov_after = merge(&mut claimed);
    let garbage = if exact {
        subtract(&cov_before, &cov_after)
    } else {
        Vec::new()
    };
    Ok(Allocation {
        placements,
        writes,
        garbage,
        appended,
        covered_before: cov_before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(strings: &[&str]) -> (Vec<u8>, Vec<u64>) {
        let mut t = vec![0u8];
        let mut offs = Vec::new();
        for s in strings {
            offs.push(t.len() as u64);
            t.extend_from_slice(s.as_bytes());
            t.push(0);
        }
        (t, offs)
    }

    fn req(s: &str, replaces: Option<u64>) -> Request {
        Request {
            bytes: s.as_bytes().to_vec(),
            replaces,
        }
    }

    #[test]
    fn shorter_string_goes_over_the_one_it_replaces_and_zeroes_its_tail() {
        let (t, o) = table(&["libc.so.6", "/nix/store/aaaa-stubs/lib"]);
        let a = allocate(&t, &o, &o[..1], &[req("/run/x", Some(o[1]))], true);
        assert_eq!(a.placements, vec![Placement::InPlace(o[1])]);
        assert!(!a.grows());
        let (off, bytes) = &a.writes[0];
        assert_eq!(*off, o[1]);
        assert_eq!(bytes.len(), "/nix/store/aaaa-stubs/lib".len() + 1);
        assert!(bytes.starts_with(b"/run/x\0"));
        assert!(bytes[7..].iter().all(|&b| b == 0));
        assert!(
            a.garbage.is_empty(),
            "the write itself clears the old string: {:?}",
            a.garbage
        );
    }

    #[test]
    fn a_tail_shared_with_a_surviving_reference_is_never_overwritten() {
        // NEEDED "libdep.so" points into the tail of RUNPATH "/opt/x/libdep.so".
        let (t, o) = table(&["/opt/x/libdep.so"]);
        let needed = o[0] + 7;
        let a = allocate(
            &t,
            &[o[0], needed],
            &[needed],
            &[req("/short", Some(o[0]))],
            true,
        );
        // Only "/opt/x/" (7 bytes) is free: "/short\0" fits exactly there.
        assert_eq!(a.placements, vec![Placement::InPlace(o[0])]);
        assert_eq!(a.writes, vec![(o[0], b"/short\0".to_vec())]);
        let a = allocate(
            &t,
            &[o[0], needed],
            &[needed],
            &[req("/longer", Some(o[0]))],
            true,
        );
        assert!(a.grows());
        assert_eq!(&t[needed as usize..needed as usize + 10], b"libdep.so\0");
    }

    #[test]
    fn a_new_string_goes_over_live_bytes_only_at_the_spot_of_the_one_it_replaces() {
        // "dead" is garbage an earlier edit left; the run path after it is live until the edit
        // switches to the new one.
        let (t, o) = table(&["libc.so.6", "dead-garbage-bytes", "/old/run/path", "tail"]);
        let before = [o[0], o[2], o[3]];
        let after = [o[0], o[3]];
        // Longer than the garbage, shorter than the garbage and the old run path together: not
        // over the old run path's bytes from the garbage's start (they are in use until the
        // switch), so appended.
        let longer = "/a/new/run/path/longer";
        let a = allocate(&t, &before, &after, &[req(longer, Some(o[2]))], true);
        assert_eq!(a.placements, vec![Placement::Appended(t.len() as u64)]);
        assert!(a.writes.is_empty());
        // Into the garbage alone when it fits there.
        let a = allocate(&t, &before, &after, &[req("/short", Some(o[2]))], true);
        assert_eq!(a.placements, vec![Placement::InPlace(o[2])]);
        let a = allocate(&t, &before, &after, &[req("/x/y/z/w/v/u", None)], true);
        assert_eq!(a.placements, vec![Placement::InPlace(o[1])]);
        // At the old string's own spot it may reach into garbage after it.
        let (t, o) = table(&["libc.so.6", "/old/run/path", "dead-garbage-bytes"]);
        let a = allocate(&t, &[o[0], o[1]], &[o[0]], &[req(longer, Some(o[1]))], true);
        assert_eq!(a.placements, vec![Placement::InPlace(o[1])]);
    }

    #[test]
    fn strings_already_present_are_reused() {
        let (t, o) = table(&["libfoo.so", "/a"]);
        let a = allocate(&t, &o, &o, &[req("foo.so", None)], true);
        assert_eq!(a.placements, vec![Placement::Existing(o[0] + 3)]);
        assert!(a.writes.is_empty() && !a.grows());
    }

    #[test]
    fn unknown_referrers_forbid_reuse_and_zeroing() {
        let (t, o) = table(&["/nix/store/aaaa-stubs/lib"]);
        let a = allocate(&t, &o, &[], &[req("/x", Some(o[0]))], false);
        assert_eq!(a.placements, vec![Placement::Appended(t.len() as u64)]);
        assert!(a.garbage.is_empty());
        assert_eq!(a.appended, b"/x\0");
    }

    /// The same table read from a "file" a few bytes at a time: every allocation is the one the
    /// table in memory gives, whatever window the strings and the lookback cross.
    #[test]
    fn a_table_read_in_windows_allocates_as_one_in_memory() {
        use crate::read::{StrContents, StrTab};
        let words = [
            "",
            "lib",
            "libc.so.6",
            "/opt/x/lib",
            "b",
            "/run/opengl-driver/lib",
            "x",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for round in 0..400 {
            let mut t = vec![0u8];
            let mut offs = Vec::new();
            for _ in 0..1 + next(12) {
                let w = words[next(words.len())];
                offs.push(t.len() as u64 + next(w.len() + 1) as u64);
                t.extend_from_slice(w.as_bytes());
                t.push(0);
                if next(4) == 0 {
                    t.extend(std::iter::repeat_n(0, next(9)));
                }
            }
            let pick = |next: &mut dyn FnMut(usize) -> usize| -> Vec<u64> {
                offs.iter().copied().filter(|_| next(2) == 0).collect()
            };
            let common = pick(&mut next);
            let before = pick(&mut next);
            let after = pick(&mut next);
            let requests: Vec<Request> = (0..next(4))
                .map(|_| {
                    let w = words[next(words.len())];
                    let replaces = (next(2) == 0).then(|| offs[next(offs.len())]);
                    req(w, replaces)
                })
                .collect();
            let exact = next(5) != 0;
            let refs = || References {
                common: common.clone(),
                before: before.clone(),
                after: after.clone(),
            };
            let expected = allocate_split(&t, refs(), &requests, exact);
            let strtab = StrTab {
                offset: 0,
                vaddr: 0,
                size: t.len() as u64,
                contents: StrContents::Strings(Vec::new()),
                section: None,
            };
            for window in 1..12 {
                let file = Dynstr::file(&t, &strtab, []).unwrap().with_window(window);
                let got = allocate_in(&file, refs(), &requests, exact).unwrap();
                assert_eq!(got, expected, "round {round}, window {window}, table {t:?}");
            }
        }
    }

    #[test]
    fn coverage_is_each_reference_to_its_nul_merged() {
        // Tables of every length around the eight-byte words the NULs are found in.
        for n in 0..24 {
            let table: Vec<u8> = (0..n).map(|i| if i % 5 == 0 { 0 } else { b'a' }).collect();
            let refs: Vec<u64> = (0..n as u64 + 2).filter(|o| o % 3 == 1).collect();
            let mut slow: Vec<Range> = refs
                .iter()
                .filter(|&&o| o < n as u64)
                .map(|&o| {
                    let end = table[o as usize..]
                        .iter()
                        .position(|&b| b == 0)
                        .map_or(n as u64, |p| o + p as u64 + 1);
                    (o, end)
                })
                .collect();
            assert_eq!(coverage(&table, refs), merge(&mut slow), "{n}");
        }
    }

    #[test]
    fn removed_strings_become_garbage() {
        let (t, o) = table(&["a", "bb", "ccc"]);
        let a = allocate(&t, &o, &[o[0], o[2]], &[], true);
        assert_eq!(a.garbage, vec![(o[1], o[1] + 3)]);
    }

    #[test]
    fn subtract_splits_ranges() {
        assert_eq!(
            subtract(&[(0, 10)], &[(2, 3), (5, 7)]),
            vec![(0, 2), (3, 5), (7, 10)]
        );
        assert_eq!(subtract(&[(0, 10)], &[(0, 10)]), vec![]);
        assert_eq!(
            subtract(
                &[(0, 4), (6, 12), (20, 30), (40, 41)],
                &[(1, 2), (3, 7), (8, 9), (11, 21), (25, 26), (50, 60)]
            ),
            vec![
                (0, 1),
                (2, 3),
                (7, 8),
                (9, 11),
                (21, 25),
                (26, 30),
                (40, 41)
            ]
        );
    }
}
