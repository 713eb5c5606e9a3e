//! The dynamic symbol hash tables (`DT_GNU_HASH`, `DT_HASH`): their hash functions, and building
//! them for a symbol table whose order is fixed.
//!
//! Renaming a dynamic symbol changes its hash, so the tables must be rebuilt. patchelf sorts the
//! hashed symbols by GNU bucket and then renumbers them everywhere (relocations, `.gnu.version`),
//! which is where its `--rename-dynamic-symbols` bugs came from (#540, #503, #594), and which MIPS
//! cannot allow at all: its global GOT follows `.dynsym`'s order. Here every symbol keeps its
//! index, so nothing that refers to symbols by index changes, and the GNU table is built for the
//! order as it is:
//!
//! - A GNU chain is a run of consecutive symbol indices, from the bucket's start to the next
//!   entry whose low bit is set; entries of other buckets inside a run are skipped by the hash
//!   comparison (glibc, musl, elfutils all compare the full hash before the name). So a bucket's
//!   symbols need not be adjacent: its chain starts at its first symbol, and the stop bits are put
//!   only where no bucket's symbols span across. Every symbol is then reached from its bucket.
//! - For a table in the linker's order (sorted by bucket), that gives exactly the linker's table:
//!   every run ends where a bucket ends. A renamed symbol whose new bucket lies elsewhere only
//!   merges the runs between its position and its bucket's other symbols into one longer chain.
//! - The bloom filter is rebuilt with the same size and shift; the bucket count is kept, so the
//!   table keeps its size.
//! - `DT_HASH` has no order constraint: chains link through `chain[]`; rebuilt like the linkers
//!   do, each bucket's list in descending index order.

/// The GNU hash of a symbol name (`dl_new_hash`).
pub fn gnu_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| {
        h.wrapping_mul(33).wrapping_add(u32::from(c))
    })
}

/// The System V (ELF) hash of a symbol name.
pub fn sysv_hash(name: &[u8]) -> u32 {
    let mut h = 0u32;
    for &c in name {
        h = (h << 4).wrapping_add(u32::from(c));
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}

/// The parameters of a GNU hash table that a rebuild keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GnuParams {
    /// Number of buckets (not zero).
    pub nbuckets: u32,
    /// Index of the first hashed symbol.
    pub symoffset: u32,
    /// Number of bloom filter words (a power of two for glibc).
    pub bloom_size: u32,
    /// Bloom filter shift.
    pub bloom_shift: u32,
}

/// A GNU hash table's contents, before encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GnuTable {
    /// The kept parameters.
    pub params: GnuParams,
    /// Bloom filter words (only the low 32 bits are used in ELF32).
    pub bloom: Vec<u64>,
    /// First symbol index of each bucket, 0 for an empty one.
    pub buckets: Vec<u32>,
    /// One word per hashed symbol: its hash with the low bit marking the end of a chain.
    pub chains: Vec<u32>,
}

/// Builds the GNU hash table for symbols `symoffset..` whose name hashes are `hashes`, in that
/// fixed order. `word_bits` is 32 or 64 (the bloom word of the ELF class).
pub fn build_gnu(params: GnuParams, word_bits: u32, hashes: &[u32]) -> GnuTable {
    let nb = params.nbuckets.max(1) as usize;
    let mut bloom = vec![0u64; params.bloom_size as usize];
    if !bloom.is_empty() {
        for &h in hashes {
            let word = (h / word_bits) as usize % bloom.len();
            bloom[word] |= 1u64 << (h % word_bits);
            bloom[word] |= 1u64 << ((h >> params.bloom_shift) % word_bits);
        }
    }
    let mut first: Vec<Option<usize>> = vec![None; nb];
    let mut last = vec![0usize; nb];
    for (i, &h) in hashes.iter().enumerate() {
        let b = h as usize % nb;
        first[b].get_or_insert(i);
        last[b] = i;
    }
    let mut chains: Vec<u32> = hashes.iter().map(|&h| h & !1).collect();
    // A chain may end after position i only when no bucket has symbols on both sides of it.
    let mut reach = 0usize;
    for (i, &h) in hashes.iter().enumerate() {
        reach = reach.max(last[h as usize % nb]);
        if reach == i {
            chains[i] |= 1;
        }
    }
    let buckets = first
        .iter()
        .map(|f| f.map_or(0, |i| i as u32 + params.symoffset))
        .collect();
    GnuTable {
        params,
        bloom,
        buckets,
        chains,
    }
}

impl GnuTable {
    /// The symbol indices a lookup of a name with GNU hash `h` compares against, in order,
    /// after the bloom filter let it through (`None` when the filter rejects it).
    pub fn candidates(&self, h: u32, word_bits: u32) -> Option<Vec<u32>> {
        if !self.bloom.is_empty() {
            let word = self.bloom[(h / word_bits) as usize % self.bloom.len()];
            let bits =
                (1u64 << (h % word_bits)) | (1u64 << ((h >> self.params.bloom_shift) % word_bits));
            if word & bits != bits {
                return None;
            }
        }
        let nb = self.buckets.len().max(1);
        let start = self.buckets.get(h as usize % nb).copied().unwrap_or(0);
        let mut out = Vec::new();
        if start < self.params.symoffset {
            return Some(out);
        }
        let mut i = (start - self.params.symoffset) as usize;
        while let Some(&word) = self.chains.get(i) {
            if (word ^ h) >> 1 == 0 {
                out.push(i as u32 + self.params.symoffset);
            }
            if word & 1 == 1 {
                break;
            }
            i += 1;
        }
        Some(out)
    }
}

/// A System V hash table's contents, before encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysvTable {
    /// First symbol index of each bucket's list.
    pub buckets: Vec<u32>,
    /// The next symbol index of each symbol's list, 0 at the end.
    pub chains: Vec<u32>,
}

/// Builds a System V hash table with `nbucket` buckets over symbols `0..hashes.len()`: symbol
/// `i` is in the list of its hash's bucket when `hashes[i]` is `Some` (symbol 0, the null
/// symbol, never is). `None` leaves a symbol out of every list, as the linkers leave the local
/// ones (section symbols in `.dynsym` on sparc, m68k, hppa): lookups skip them anyway.
pub fn build_sysv(nbucket: u32, hashes: &[Option<u32>]) -> SysvTable {
    let nb = nbucket.max(1) as usize;
    let mut buckets = vec![0u32; nbucket as usize];
    let mut chains = vec![0u32; hashes.len()];
    if nbucket > 0 {
        for (i, h) in hashes.iter().enumerate().skip(1) {
            let Some(h) = *h else { continue };
            let b = h as usize % nb;
            chains[i] = buckets[b];
            buckets[b] = i as u32;
        }
    }
    SysvTable { buckets, chains }
}

impl SysvTable {
    /// The symbol indices of the list a name with System V hash `h` is looked up in.
    pub fn candidates(&self, h: u32) -> Vec<u32> {
        if self.buckets.is_empty() {
            return Vec::new();
        }
        self.bucket_list(h as usize % self.buckets.len())
    }

    /// The symbol indices of bucket `b`'s list, in chain order.
    pub fn bucket_list(&self, b: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = self.buckets.get(b).copied().unwrap_or(0);
        // Bounded: a malformed table read from a file may loop.
        while i != 0 && out.len() <= self.chains.len() {
            out.push(i);
            i = self.chains.get(i as usize).copied().unwrap_or(0);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hash_functions_match_the_reference_values() {
        // Values from the gABI / glibc documentation.
        assert_eq!(gnu_hash(b""), 0x0000_1505);
        assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(gnu_hash(b"exit"), 0x7c96_7e3f);
        assert_eq!(sysv_hash(b""), 0);
        assert_eq!(sysv_hash(b"printf"), 0x0779_05a6);
        assert_eq!(sysv_hash(b"exit"), 0x0006_cf04);
    }

    fn names_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::btree_set(prop::collection::vec(b'a'..=b'z', 1..12), 0..60)
            .prop_map(|s| s.into_iter().collect())
    }

    proptest! {
        /// Whatever the order, every hashed symbol is found from its bucket, and only the symbols
        /// whose hash matches are compared.
        #[test]
        fn every_symbol_is_found_in_any_order(
            names in names_strategy(),
            nbuckets in 1u32..17,
            symoffset in 0u32..4,
            bloom_log in 0u32..3,
        ) {
            let hashes: Vec<u32> = names.iter().map(|n| gnu_hash(n)).collect();
            let params = GnuParams { nbuckets, symoffset, bloom_size: 1 << bloom_log, bloom_shift: 6 };
            for bits in [32, 64] {
                let t = build_gnu(params, bits, &hashes);
                for (i, &h) in hashes.iter().enumerate() {
                    let found = t.candidates(h, bits).expect("the bloom filter lets it through");
                    prop_assert!(found.contains(&(i as u32 + symoffset)));
                }
            }
            let sysv_hashes: Vec<u32> = std::iter::once(0).chain(names.iter().map(|n| sysv_hash(n))).collect();
            // Every third symbol left out, as a local one would be.
            let listed: Vec<Option<u32>> = sysv_hashes.iter().enumerate().map(|(i, &h)| (i % 3 != 2).then_some(h)).collect();
            let s = build_sysv(nbuckets, &listed);
            for (i, &h) in sysv_hashes.iter().enumerate().skip(1) {
                prop_assert_eq!(s.candidates(h).contains(&(i as u32)), i % 3 != 2);
            }
        }

        /// For symbols sorted by bucket (the linkers' order), the chains end exactly where each
        /// bucket's run ends: the linker's table.
        #[test]
        fn sorted_input_gives_one_run_per_bucket(names in names_strategy(), nbuckets in 1u32..17) {
            let mut hashes: Vec<u32> = names.iter().map(|n| gnu_hash(n)).collect();
            hashes.sort_by_key(|h| h % nbuckets);
            let params = GnuParams { nbuckets, symoffset: 1, bloom_size: 2, bloom_shift: 5 };
            let t = build_gnu(params, 64, &hashes);
            for i in 0..hashes.len() {
                let ends_bucket = i + 1 == hashes.len() || hashes[i] % nbuckets != hashes[i + 1] % nbuckets;
                prop_assert_eq!(t.chains[i] & 1 == 1, ends_bucket);
            }
        }
    }
}
