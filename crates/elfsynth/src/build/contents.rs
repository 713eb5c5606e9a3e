//! The bytes of each section.

use std::collections::HashMap;

use object::elf;

use super::place::Placement;
use super::sections::Id;
use super::symbols::{gnu_hash, sysv_hash};
use super::{Draft, COMMENT, DATA_SIZE, INIT_SIZE, TEXT_PATTERN_LEN};
use crate::Spec;

/// The build ID note's bytes: a hash of the spec, so the same spec gives the same file.
fn build_id(spec: &Spec) -> [u8; 20] {
    // FNV-1a over the spec's debug representation: deterministic per spec.
    let text = format!("{spec:?}");
    let mut out = [0u8; 20];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        for &c in text.as_bytes().iter().chain(&[i as u8]) {
            h ^= c as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        let bytes = h.to_be_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    out
}

/// Deterministic stand-in bytes for code and data sections.
fn code(salt: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(salt) | 1)
        .collect()
}

/// The contents of each section, by concept.
impl Draft<'_> {
    fn note(&self) -> Vec<u8> {
        let enc = self.enc;
        let mut b = Vec::new();
        enc.u32(&mut b, 4);
        enc.u32(&mut b, 20);
        enc.u32(&mut b, 3); // NT_GNU_BUILD_ID
        b.extend_from_slice(b"GNU\0");
        b.extend_from_slice(&build_id(self.spec));
        b
    }

    /// `.hash`: every dynamic symbol in its bucket's chain.
    fn sysv_hash_table(&self) -> Vec<u8> {
        let (enc, syms) = (self.enc, &self.syms);
        let nbucket = syms.sysv_buckets;
        let mut bucket = vec![0u32; nbucket as usize];
        let mut chain = vec![0u32; syms.entries];
        for (i, n) in syms.names.iter().enumerate() {
            let si = i + 1;
            let b = (sysv_hash(n.as_bytes()) % nbucket) as usize;
            chain[si] = bucket[b];
            bucket[b] = si as u32;
        }
        let mut b = Vec::new();
        let put = |b: &mut Vec<u8>, v: u32| {
            if syms.hash_entry == 8 {
                enc.u64(b, v as u64)
            } else {
                enc.u32(b, v)
            }
        };
        put(&mut b, nbucket);
        put(&mut b, syms.entries as u32);
        for v in bucket.into_iter().chain(chain) {
            put(&mut b, v);
        }
        b
    }

    /// `.gnu.hash`: the bloom filter, the buckets and the chains over the defined symbols.
    fn gnu_hash_table(&self) -> Vec<u8> {
        let (enc, syms) = (self.enc, &self.syms);
        let (nb, ndef, bloom_bits) = (syms.gnu_buckets, syms.defined, syms.bloom_bits);
        let symoffset = (syms.undefined + 1) as u32;
        let hashes: Vec<u32> = syms.names[syms.undefined..]
            .iter()
            .map(|n| gnu_hash(n.as_bytes()))
            .collect();
        let mut bloom = vec![0u64; syms.bloom_words as usize];
        let mut buckets = vec![0u32; nb as usize];
        let mut chain = vec![0u32; ndef];
        for (k, &h) in hashes.iter().enumerate() {
            let word = ((h as u64 / bloom_bits) % syms.bloom_words) as usize;
            bloom[word] |= 1u64 << (h as u64 % bloom_bits);
            bloom[word] |= 1u64 << ((h >> syms.bloom_shift) as u64 % bloom_bits);
            let bk = (h % nb) as usize;
            if buckets[bk] == 0 {
                buckets[bk] = symoffset + k as u32;
            }
            let last = k + 1 == ndef || hashes[k + 1] % nb != h % nb;
            chain[k] = (h & !1) | last as u32;
        }
        let mut b = Vec::new();
        enc.u32(&mut b, nb);
        let first = if ndef == 0 {
            syms.entries as u32
        } else {
            symoffset
        };
        enc.u32(&mut b, first);
        enc.u32(&mut b, syms.bloom_words as u32);
        enc.u32(&mut b, syms.bloom_shift);
        for w in bloom {
            enc.word(&mut b, w);
        }
        for v in buckets.into_iter().chain(chain) {
            enc.u32(&mut b, v);
        }
        b
    }

    /// The value and size of the `k`-th defined symbol: 16-byte functions through `.text`,
    /// wrapping around.
    fn symbol_place(&self, text_addr: u64, k: usize) -> (u64, u64) {
        let text_size = self.spec.text_size;
        if text_size == 0 {
            (text_addr, 0)
        } else {
            let pos = (16 * k as u64) % text_size;
            (text_addr + pos, (text_size - pos).min(16))
        }
    }

    fn dynsym_table(&self, p: &Placement) -> Vec<u8> {
        let (enc, syms) = (self.enc, &self.syms);
        let text_idx = self.sections.idx(Id::Text);
        let mut b = Vec::new();
        enc.sym(&mut b, 0, 0, 0, 0, 0);
        for (i, n) in syms.names.iter().enumerate() {
            let info = (elf::STB_GLOBAL << 4) | elf::STT_FUNC;
            let name = self.dynstr.offset(n) as u32;
            if i < syms.undefined {
                enc.sym(&mut b, name, info, 0, 0, 0);
            } else {
                let (v, sz) = self.symbol_place(p.addr(Id::Text), i - syms.undefined);
                enc.sym(&mut b, name, info, text_idx, v, sz);
            }
        }
        b
    }

    fn versym_table(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.enc.u16(&mut b, 0);
        for &i in &self.syms.order {
            self.enc.u16(&mut b, self.versions.of_symbol[i]);
        }
        b
    }

    fn verdef_table(&self) -> Vec<u8> {
        let (enc, verdef) = (self.enc, &self.spec.verdef);
        let mut b = Vec::new();
        let n = verdef.len();
        for (i, v) in verdef.iter().enumerate() {
            enc.u16(&mut b, 1); // vd_version
            enc.u16(&mut b, if i == 0 { 1 } else { 0 }); // VER_FLG_BASE
            enc.u16(&mut b, i as u16 + 1); // vd_ndx
            enc.u16(&mut b, 1); // vd_cnt
            enc.u32(&mut b, sysv_hash(v.as_bytes()));
            enc.u32(&mut b, 20); // vd_aux
            enc.u32(&mut b, if i + 1 == n { 0 } else { 28 }); // vd_next
            enc.u32(&mut b, self.dynstr.offset(v) as u32); // vda_name
            enc.u32(&mut b, 0); // vda_next
        }
        b
    }

    fn verneed_table(&self) -> Vec<u8> {
        let (enc, verneed) = (self.enc, &self.spec.verneed);
        let mut b = Vec::new();
        let n = verneed.len();
        let mut k = 0;
        for (i, (f, vs)) in verneed.iter().enumerate() {
            enc.u16(&mut b, 1); // vn_version
            enc.u16(&mut b, vs.len() as u16); // vn_cnt
            enc.u32(&mut b, self.dynstr.offset(f) as u32); // vn_file
            enc.u32(&mut b, 16); // vn_aux
            let next = if i + 1 == n {
                0
            } else {
                16 + 16 * vs.len() as u32
            };
            enc.u32(&mut b, next); // vn_next
            for (j, v) in vs.iter().enumerate() {
                enc.u32(&mut b, sysv_hash(v.as_bytes())); // vna_hash
                enc.u16(&mut b, 0); // vna_flags
                enc.u16(&mut b, self.versions.need_indices[k]); // vna_other
                enc.u32(&mut b, self.dynstr.offset(v) as u32); // vna_name
                enc.u32(&mut b, if j + 1 == vs.len() { 0 } else { 16 }); // vna_next
                k += 1;
            }
        }
        b
    }

    fn dynamic_table(&self, dynamic: &[(u64, u64)]) -> Vec<u8> {
        let mut b = Vec::new();
        for &(t, v) in dynamic {
            self.enc.word(&mut b, t);
            self.enc.word(&mut b, v);
        }
        b
    }

    /// `.symtab`: a section symbol per allocated section, `_DYNAMIC`, `_init`, `_fini`,
    /// `_start` in executables, and the dynamic symbols again.
    fn symtab_table(&self, p: &Placement) -> Vec<u8> {
        let (enc, order) = (self.enc, &self.sections);
        let idx = |id: Id| order.idx(id);
        let so = |n: &str| self.strtab.offset(n) as u32;
        let local = |kind: u8| (elf::STB_LOCAL << 4) | kind;
        let mut b = Vec::new();
        enc.sym(&mut b, 0, 0, 0, 0, 0);
        for s in &p.secs[..order.alloc_count()] {
            enc.sym(&mut b, 0, local(elf::STT_SECTION), idx(s.id), s.addr, 0);
        }
        let dynsec = p.sec(Id::Dynamic);
        let (init, fini) = (idx(Id::Init), idx(Id::Fini));
        enc.sym(
            &mut b,
            so("_DYNAMIC"),
            local(elf::STT_OBJECT),
            idx(Id::Dynamic),
            dynsec.addr,
            dynsec.size,
        );
        let init_addr = p.addr(Id::Init);
        enc.sym(
            &mut b,
            so("_init"),
            local(elf::STT_FUNC),
            init,
            init_addr,
            INIT_SIZE,
        );
        let fini_addr = p.addr(Id::Fini);
        enc.sym(
            &mut b,
            so("_fini"),
            local(elf::STT_FUNC),
            fini,
            fini_addr,
            INIT_SIZE,
        );
        let g = (elf::STB_GLOBAL << 4) | elf::STT_FUNC;
        let (text_idx, text_addr) = (idx(Id::Text), p.addr(Id::Text));
        if self.spec.is_executable() {
            enc.sym(&mut b, so("_start"), g, text_idx, text_addr, 0);
        }
        for (i, n) in self.syms.names.iter().enumerate() {
            if i < self.syms.undefined {
                enc.sym(&mut b, so(n), g, 0, 0, 0);
            } else {
                let (v, sz) = self.symbol_place(text_addr, i - self.syms.undefined);
                enc.sym(&mut b, so(n), g, text_idx, v, sz);
            }
        }
        debug_assert_eq!(b.len() as u64, p.sec(Id::Symtab).size);
        b
    }

    /// The bytes of every section that has any, at its offset, in section order.
    pub(super) fn section_chunks(
        &self,
        p: &Placement,
        dynamic: &[(u64, u64)],
    ) -> Vec<(u64, Vec<u8>)> {
        let spec = self.spec;
        let mut contents: HashMap<Id, Vec<u8>> = HashMap::new();
        if let Some(s) = &spec.interp {
            let mut b = s.as_bytes().to_vec();
            b.push(0);
            contents.insert(Id::Interp, b);
        }
        contents.insert(Id::Note, self.note());
        if spec.hash.sysv() {
            contents.insert(Id::Hash, self.sysv_hash_table());
        }
        if spec.hash.gnu() {
            contents.insert(Id::GnuHash, self.gnu_hash_table());
        }
        contents.insert(Id::Dynsym, self.dynsym_table(p));
        contents.insert(Id::Dynstr, self.dynstr.bytes.clone());
        if self.versions.present {
            contents.insert(Id::Versym, self.versym_table());
        }
        if !spec.verdef.is_empty() {
            contents.insert(Id::Verdef, self.verdef_table());
        }
        if !spec.verneed.is_empty() {
            contents.insert(Id::Verneed, self.verneed_table());
        }
        contents.insert(Id::Init, code(0x10, INIT_SIZE));
        contents.insert(Id::Fini, code(0x20, INIT_SIZE));
        contents.insert(Id::Text, code(0x30, spec.text_size.min(TEXT_PATTERN_LEN)));
        contents.insert(Id::Data, code(0x40, DATA_SIZE));
        if spec.has_rld_map() {
            contents.insert(Id::RldMap, vec![0; self.enc.ws() as usize]);
        }
        contents.insert(Id::Dynamic, self.dynamic_table(dynamic));
        if spec.with_section_headers {
            contents.insert(Id::Comment, COMMENT.to_vec());
            if spec.symtab {
                contents.insert(Id::Symtab, self.symtab_table(p));
                contents.insert(Id::Strtab, self.strtab.bytes.clone());
            }
            contents.insert(Id::Shstrtab, self.shstrtab.bytes.clone());
        }
        let mut chunks = Vec::new();
        for s in &p.secs {
            if let Some(b) = contents.remove(&s.id) {
                debug_assert!(b.len() as u64 <= s.size, "{:?}", s.id);
                if !b.is_empty() {
                    chunks.push((s.offset, b));
                }
            }
        }
        chunks
    }
}
