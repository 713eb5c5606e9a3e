//! The dynamic symbols: their `.dynsym` order, their versions, and the builder's own hash
//! functions (the oracle has independent ones).

use super::encode::Enc;
use crate::Spec;

/// The System V ELF hash (`.hash`, `vna_hash`, `vd_hash`).
pub(super) fn sysv_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 4).wrapping_add(c as u32);
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}

/// The GNU hash (`.gnu.hash`).
pub(super) fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

/// Bucket counts in the spirit of GNU ld's table.
fn bucket_count(nsyms: usize) -> u32 {
    const SIZES: [u32; 12] = [1, 3, 17, 37, 67, 97, 131, 197, 263, 521, 1031, 2053];
    let mut best = 1;
    for &s in &SIZES {
        if s as usize <= nsyms {
            best = s;
        }
    }
    best
}

/// The dynamic symbols in `.dynsym` order, and the parameters of the hash tables over them.
pub(super) struct DynSymbols<'a> {
    /// Entry `i + 1` of `.dynsym` is `spec.dynsyms[order[i]]`.
    pub(super) order: Vec<usize>,
    /// The names in that order.
    pub(super) names: Vec<&'a str>,
    /// How many come first, undefined.
    pub(super) undefined: usize,
    /// How many are defined (the ones `.gnu.hash` covers).
    pub(super) defined: usize,
    /// Entries of `.dynsym`, the null symbol included.
    pub(super) entries: usize,
    /// `.hash` buckets.
    pub(super) sysv_buckets: u32,
    /// Size of a `.hash` word (8 on 64-bit s390x, else 4).
    pub(super) hash_entry: u64,
    /// `.gnu.hash` buckets.
    pub(super) gnu_buckets: u32,
    /// Bits in one bloom filter word.
    pub(super) bloom_bits: u64,
    /// Words of the bloom filter.
    pub(super) bloom_words: u64,
    /// The bloom filter's second hash shift.
    pub(super) bloom_shift: u32,
}

impl<'a> DynSymbols<'a> {
    pub(super) fn of(spec: &'a Spec, enc: Enc) -> DynSymbols<'a> {
        let undefined = spec.undefined_dynsyms;
        let total = spec.dynsyms.len();
        let defined = total - undefined;
        let gnu_buckets = bucket_count(defined);
        // GNU ld sorts the defined symbols by their GNU hash bucket, as the table requires.
        let mut order: Vec<usize> = (0..total).collect();
        if spec.hash.gnu() {
            order[undefined..].sort_by_key(|&i| gnu_hash(spec.dynsyms[i].as_bytes()) % gnu_buckets);
        }
        let names = order.iter().map(|&i| spec.dynsyms[i].as_str()).collect();
        let bloom_bits = enc.ws() * 8;
        DynSymbols {
            order,
            names,
            undefined,
            defined,
            entries: total + 1,
            sysv_buckets: bucket_count(total + 1),
            hash_entry: spec.machine.hash_entry_size(spec.class),
            gnu_buckets,
            bloom_bits,
            bloom_words: (((2 * defined as u64).div_ceil(bloom_bits)).max(1)).next_power_of_two(),
            bloom_shift: if enc.is64 { 6 } else { 5 },
        }
    }
}

/// The version indices: of every needed version, and of every dynamic symbol.
pub(super) struct Versions {
    /// Whether `.gnu.version` is written (some version is needed or defined).
    pub(super) present: bool,
    /// `vna_other` of every needed version, in `spec.verneed` order, flattened.
    pub(super) need_indices: Vec<u16>,
    /// The version index of each of `spec.dynsyms` (in the spec's order): undefined symbols take
    /// the needed versions in turn, defined ones the non-base definitions.
    pub(super) of_symbol: Vec<u16>,
}

impl Versions {
    pub(super) fn of(spec: &Spec) -> Versions {
        let first_need_index = spec.verdef.len().max(1) as u16 + 1;
        let mut need_indices: Vec<u16> = Vec::new();
        let mut index = first_need_index;
        for (_, versions) in &spec.verneed {
            for _ in versions {
                need_indices.push(index);
                index += 1;
            }
        }
        let undefined = spec.undefined_dynsyms;
        let of_symbol = (0..spec.dynsyms.len())
            .map(|k| {
                if k < undefined {
                    if need_indices.is_empty() {
                        1
                    } else {
                        need_indices[k % need_indices.len()]
                    }
                } else if spec.verdef.len() > 1 {
                    2 + ((k - undefined) % (spec.verdef.len() - 1)) as u16
                } else {
                    1
                }
            })
            .collect();
        Versions {
            present: !spec.verneed.is_empty() || !spec.verdef.is_empty(),
            need_indices,
            of_symbol,
        }
    }
}
