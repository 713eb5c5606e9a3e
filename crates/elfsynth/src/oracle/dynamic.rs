//! The dynamic array through `PT_DYNAMIC`, and the tables it points at: the string table, the
//! symbols, the hash tables and the version records.

use super::bytes::{cstr, R};
use super::{err, k, Error, Parsed, Res, Symbol};

impl Parsed<'_> {
    /// Raw dynamic entries through PT_DYNAMIC: (entries up to DT_NULL, slots).
    pub(super) fn dynamic_raw(&self) -> Res<(Vec<(u64, u64)>, usize)> {
        let Some(p) = self.phdrs.iter().find(|p| p.p_type == k::PT_DYNAMIC) else {
            return Ok((Vec::new(), 0));
        };
        let ent = 2 * self.r.ws();
        self.r.slice(p.p_offset, p.p_filesz)?;
        let slots = (p.p_filesz / ent) as usize;
        let mut v = Vec::new();
        for i in 0..slots as u64 {
            let o = p.p_offset + i * ent;
            let tag = self.r.word(o)?;
            let val = self.r.word(o + self.r.ws())?;
            if tag == k::DT_NULL {
                return Ok((v, slots));
            }
            v.push((tag, val));
        }
        err("PT_DYNAMIC has no DT_NULL terminator")
    }

    pub(super) fn tag(dynamic: &[(u64, u64)], tag: u64) -> Option<u64> {
        dynamic.iter().find(|e| e.0 == tag).map(|e| e.1)
    }

    pub(super) fn dynstr(&self, dynamic: &[(u64, u64)]) -> Res<Option<&[u8]>> {
        match (
            Self::tag(dynamic, k::DT_STRTAB),
            Self::tag(dynamic, k::DT_STRSZ),
        ) {
            (Some(a), Some(n)) => self.map_slice(a, n, "DT_STRTAB/DT_STRSZ").map(Some),
            (None, None) => Ok(None),
            _ => err("only one of DT_STRTAB and DT_STRSZ is present"),
        }
    }

    pub(super) fn hash_entry_size(&self) -> u64 {
        if self.r.is64 && self.header.e_machine == k::EM_S390 {
            8
        } else {
            4
        }
    }

    /// Number of `.dynsym` entries (including symbol 0): from the section
    /// headers, else `DT_HASH`'s nchain, else by walking `DT_GNU_HASH`.
    pub(super) fn dynsym_count(&self, dynamic: &[(u64, u64)]) -> Res<u64> {
        if let Some(s) = self.shdrs.iter().find(|s| s.sh_type == k::SHT_DYNSYM) {
            let ent = if s.entsize == 0 {
                self.r.sym_size()
            } else {
                s.entsize
            };
            return Ok(s.size / ent);
        }
        if let Some(h) = Self::tag(dynamic, k::DT_HASH) {
            let e = self.hash_entry_size();
            let b = self.map_slice(h, 2 * e, "DT_HASH header")?;
            let nchain = if e == 8 {
                R { d: b, ..self.r }.u64(e)?
            } else {
                R { d: b, ..self.r }.u32(4)? as u64
            };
            return Ok(nchain);
        }
        if let Some(g) = Self::tag(dynamic, k::DT_GNU_HASH) {
            let gh = self.gnu_hash(g)?;
            let Some(&maxb) = gh.buckets.iter().max() else {
                return Ok(u64::from(gh.symoffset));
            };
            if maxb == 0 {
                return Ok(u64::from(gh.symoffset));
            }
            let mut i = u64::from(maxb);
            loop {
                let ci = i
                    .checked_sub(u64::from(gh.symoffset))
                    .ok_or_else(|| Error("DT_GNU_HASH bucket below symoffset".into()))?;
                let c = self.r.u32(gh.chain_off.saturating_add(4 * ci))?;
                if c & 1 == 1 {
                    return Ok(i + 1);
                }
                i += 1;
            }
        }
        Ok(0)
    }

    pub(super) fn gnu_hash(&self, addr: u64) -> Res<GnuHash> {
        let off = self.map_off(addr, "DT_GNU_HASH")?;
        let r = self.r;
        let nb = r.u32(off)?;
        let symoffset = r.u32(off + 4)?;
        let bloom_size = r.u32(off + 8)?;
        let shift = r.u32(off + 12)?;
        let bloom_off = off + 16;
        let bloom_bytes = u64::from(bloom_size) * r.ws();
        r.slice(bloom_off, bloom_bytes)?;
        let buckets_off = bloom_off + bloom_bytes;
        let bb = r.slice(buckets_off, 4 * u64::from(nb))?;
        let rb = R { d: bb, ..r };
        let buckets = (0..u64::from(nb))
            .map(|i| rb.u32(4 * i))
            .collect::<Res<Vec<u32>>>()?;
        Ok(GnuHash {
            symoffset,
            bloom_size,
            shift,
            bloom_off,
            buckets,
            chain_off: buckets_off + 4 * u64::from(nb),
        })
    }

    pub(super) fn symbols(
        &self,
        off: u64,
        count: u64,
        ent: u64,
        strs: &[u8],
        what: &str,
    ) -> Res<Vec<Symbol>> {
        if ent < self.r.sym_size() {
            return err(format!("{what}: entry size {ent} is too small"));
        }
        let total = count
            .checked_mul(ent)
            .ok_or_else(|| Error(format!("{what}: size overflows")))?;
        self.r.slice(off, total)?;
        let r = self.r;
        let mut v = Vec::new();
        for i in 1..count {
            let o = off + i * ent;
            let name_off = r.u32(o)?;
            let (info, shndx, value, size) = if r.is64 {
                (r.u8(o + 4)?, r.u16(o + 6)?, r.u64(o + 8)?, r.u64(o + 16)?)
            } else {
                (
                    r.u8(o + 12)?,
                    r.u16(o + 14)?,
                    r.u32(o + 4)? as u64,
                    r.u32(o + 8)? as u64,
                )
            };
            v.push(Symbol {
                name: cstr(
                    strs,
                    u64::from(name_off),
                    &format!("{what} symbol {i} name"),
                )?,
                value,
                size,
                info,
                shndx,
                version: None,
            });
        }
        Ok(v)
    }

    /// (file, [(name, vna_hash, vna_other)]) per verneed entry; names are
    /// dynstr offsets.
    pub(super) fn verneed_raw(&self, dynamic: &[(u64, u64)]) -> Res<Vec<RawVerneed>> {
        let Some(a) = Self::tag(dynamic, k::DT_VERNEED) else {
            return Ok(Vec::new());
        };
        let r = self.r;
        let mut off = self.map_off(a, "DT_VERNEED")?;
        let mut out = Vec::new();
        loop {
            let cnt = r.u16(off + 2)?;
            let file = r.u32(off + 4)?;
            let aux = r.u32(off + 8)?;
            let next = r.u32(off + 12)?;
            let mut auxes = Vec::new();
            let mut ao = off
                .checked_add(u64::from(aux))
                .ok_or_else(|| Error("vn_aux overflows".into()))?;
            for j in 0..cnt {
                let hash = r.u32(ao)?;
                let other = r.u16(ao + 6)?;
                let name = r.u32(ao + 8)?;
                let anext = r.u32(ao + 12)?;
                auxes.push((name, hash, other));
                if anext == 0 {
                    if j + 1 != cnt {
                        return err("vernaux chain ends before vn_cnt entries");
                    }
                    break;
                }
                ao = ao
                    .checked_add(u64::from(anext))
                    .ok_or_else(|| Error("vna_next overflows".into()))?;
            }
            out.push((file, auxes));
            if next == 0 {
                break;
            }
            if out.len() > 1 << 16 {
                return err("too many verneed entries");
            }
            off = off
                .checked_add(u64::from(next))
                .ok_or_else(|| Error("vn_next overflows".into()))?;
        }
        Ok(out)
    }

    /// (vda_name of the first aux, vd_hash, vd_ndx) per verdef entry.
    pub(super) fn verdef_raw(&self, dynamic: &[(u64, u64)]) -> Res<Vec<(u32, u32, u16)>> {
        let Some(a) = Self::tag(dynamic, k::DT_VERDEF) else {
            return Ok(Vec::new());
        };
        let r = self.r;
        let mut off = self.map_off(a, "DT_VERDEF")?;
        let mut out = Vec::new();
        loop {
            let ndx = r.u16(off + 4)?;
            let cnt = r.u16(off + 6)?;
            let hash = r.u32(off + 8)?;
            let aux = r.u32(off + 12)?;
            let next = r.u32(off + 16)?;
            if cnt == 0 {
                return err("verdef entry without verdaux");
            }
            let ao = off
                .checked_add(u64::from(aux))
                .ok_or_else(|| Error("vd_aux overflows".into()))?;
            out.push((r.u32(ao)?, hash, ndx));
            if next == 0 {
                break;
            }
            if out.len() > 1 << 16 {
                return err("too many verdef entries");
            }
            off = off
                .checked_add(u64::from(next))
                .ok_or_else(|| Error("vd_next overflows".into()))?;
        }
        Ok(out)
    }

    /// `DT_VERNEEDNUM` and `DT_VERDEFNUM` against the chains they count. The loader follows
    /// `vn_next`/`vd_next` to the end whatever the counts say, so the chains above are read that
    /// way and a wrong count is a finding of its own: reading only `num` records would hide the
    /// rest of the chain from every other check until an edit corrects the count.
    pub(super) fn version_count_issues(&self, dynamic: &[(u64, u64)]) -> Vec<String> {
        let mut v = Vec::new();
        let counted = [
            (
                k::DT_VERNEEDNUM,
                "DT_VERNEEDNUM",
                self.verneed_raw(dynamic).map(|c| c.len()),
            ),
            (
                k::DT_VERDEFNUM,
                "DT_VERDEFNUM",
                self.verdef_raw(dynamic).map(|c| c.len()),
            ),
        ];
        for (tag, name, chain) in counted {
            if let (Some(num), Ok(len)) = (Self::tag(dynamic, tag), chain) {
                if num != len as u64 {
                    v.push(format!("{name} is {num} but the chain has {len} entries"));
                }
            }
        }
        v
    }
}

/// `(vn_file, [(vna_name, vna_hash, vna_other)])`, names as `.dynstr` offsets.
pub(super) type RawVerneed = (u32, Vec<(u32, u32, u16)>);

/// A `DT_GNU_HASH` table's header and buckets, and where its bloom filter and chains are.
pub(super) struct GnuHash {
    pub(super) symoffset: u32,
    pub(super) bloom_size: u32,
    pub(super) shift: u32,
    pub(super) bloom_off: u64,
    pub(super) buckets: Vec<u32>,
    pub(super) chain_off: u64,
}
