//! The dynamic string references and symbol lookups of [`check_layout`](super::check_layout):
//! every name readable, every version hash right, every symbol found through the hash tables
//! (with the oracle's own hash functions).

use super::bytes::cstr;
use super::{err, k, Parsed, Res, Symbol, STRING_TAGS};

/// The System V ELF hash (`DT_HASH`, `vna_hash`, `vd_hash`), the oracle's own.
fn elf_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 4).wrapping_add(u32::from(c));
        let hi = h & 0xf000_0000;
        if hi != 0 {
            h ^= hi >> 24;
        }
        h &= 0x0fff_ffff;
    }
    h
}

/// The GNU hash (`DT_GNU_HASH`), the oracle's own.
fn dl_new_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 5381;
    for &c in name {
        h = (h << 5).wrapping_add(h).wrapping_add(u32::from(c));
    }
    h
}

/// Every string reference (string tags, version need and definition names) inside `.dynstr` and
/// NUL-terminated; the version hashes matching their names.
pub(super) fn check_string_refs(
    p: &Parsed<'_>,
    dynamic: &[(u64, u64)],
    strs: &[u8],
    v: &mut Vec<String>,
) {
    let check_str = |v: &mut Vec<String>, off: u64, what: String| {
        if let Err(e) = cstr(strs, off, &what) {
            v.push(e.0);
        }
    };
    for &(t, value) in dynamic {
        if STRING_TAGS.contains(&t) {
            check_str(v, value, format!("dynamic tag {t:#x}"));
        }
    }
    v.extend(p.version_count_issues(dynamic));
    match p.verneed_raw(dynamic) {
        Err(e) => v.push(format!("verneed: {e}")),
        Ok(vn) => {
            for (file, auxes) in vn {
                check_str(v, u64::from(file), "vn_file".into());
                for (name, hash, _) in auxes {
                    match cstr(strs, u64::from(name), "vna_name") {
                        Err(e) => v.push(e.0),
                        Ok(n) if elf_hash(n.as_bytes()) != hash => v.push(format!(
                            "vna_hash {hash:#x} does not match version name {n:?}"
                        )),
                        Ok(_) => {}
                    }
                }
            }
        }
    }
    match p.verdef_raw(dynamic) {
        Err(e) => v.push(format!("verdef: {e}")),
        Ok(vd) => {
            for (name, hash, _) in vd {
                match cstr(strs, u64::from(name), "vda_name") {
                    Err(e) => v.push(e.0),
                    Ok(n) if elf_hash(n.as_bytes()) != hash => v.push(format!(
                        "vd_hash {hash:#x} does not match version name {n:?}"
                    )),
                    Ok(_) => {}
                }
            }
        }
    }
}

/// Every dynamic symbol readable, and findable by its name through `DT_HASH` and `DT_GNU_HASH`.
pub(super) fn check_symbol_lookup(
    p: &Parsed<'_>,
    dynamic: &[(u64, u64)],
    strs: &[u8],
    v: &mut Vec<String>,
) {
    let tag = |t: u64| Parsed::tag(dynamic, t);
    let Some(symaddr) = tag(k::DT_SYMTAB) else {
        return;
    };
    let syms = (|| -> Res<Vec<Symbol>> {
        let count = p.dynsym_count(dynamic)?;
        let ent = tag(k::DT_SYMENT).unwrap_or(p.r.sym_size());
        let off = p.map_off(symaddr, "DT_SYMTAB")?;
        p.symbols(off, count, ent, strs, "dynsym")
    })();
    let syms = match syms {
        Ok(s) => s,
        Err(e) => {
            v.push(e.0);
            return;
        }
    };
    if let Some(hash) = tag(k::DT_HASH) {
        if let Err(e) = check_sysv(p, hash, &syms, v) {
            v.push(format!("DT_HASH: {e}"));
        }
    }
    if let Some(gh) = tag(k::DT_GNU_HASH) {
        if let Err(e) = check_gnu(p, gh, &syms, v) {
            v.push(format!("DT_GNU_HASH: {e}"));
        }
    }
}

fn check_sysv(p: &Parsed<'_>, addr: u64, syms: &[Symbol], v: &mut Vec<String>) -> Res<()> {
    let e = p.hash_entry_size();
    let off = p.map_off(addr, "DT_HASH")?;
    let get = |i: u64| -> Res<u64> {
        let o = off + e * i;
        if e == 8 {
            p.r.u64(o)
        } else {
            p.r.u32(o).map(u64::from)
        }
    };
    let nbucket = get(0)?;
    let nchain = get(1)?;
    if nbucket == 0 {
        return err("nbucket is 0");
    }
    p.r.slice(
        off,
        (2u64.saturating_add(nbucket).saturating_add(nchain)).saturating_mul(e),
    )?;
    if nchain != syms.len() as u64 + 1 {
        v.push(format!(
            "DT_HASH nchain {nchain} differs from the {} dynamic symbols",
            syms.len() + 1
        ));
    }
    for (i, s) in syms.iter().enumerate() {
        let want = i as u64 + 1;
        let mut at = get(2 + u64::from(elf_hash(s.name.as_bytes())) % nbucket)?;
        let mut steps = 0;
        while at != 0 && at != want && steps <= nchain {
            if at >= nchain {
                return err(format!("chain index {at} out of range"));
            }
            at = get(2 + nbucket + at)?;
            steps += 1;
        }
        if at != want {
            v.push(format!(
                "dynsym {want} {:?} is not reachable through DT_HASH",
                s.name
            ));
        }
    }
    Ok(())
}

fn check_gnu(p: &Parsed<'_>, addr: u64, syms: &[Symbol], v: &mut Vec<String>) -> Res<()> {
    let g = p.gnu_hash(addr)?;
    let nb = g.buckets.len() as u64;
    if nb == 0 {
        return err("nbuckets is 0");
    }
    if g.bloom_size == 0 {
        return err("bloom size is 0");
    }
    let bits = 8 * p.r.ws();
    for (i, s) in syms.iter().enumerate() {
        let idx = i as u64 + 1;
        if idx < u64::from(g.symoffset) {
            continue;
        }
        let h = dl_new_hash(s.name.as_bytes());
        let word =
            p.r.word(g.bloom_off + p.r.ws() * ((u64::from(h) / bits) % u64::from(g.bloom_size)))?;
        let b1 = u64::from(h) % bits;
        let b2 = u64::from(h.checked_shr(g.shift).unwrap_or(0)) % bits;
        if (word >> b1) & 1 == 0 || (word >> b2) & 1 == 0 {
            v.push(format!(
                "dynsym {idx} {:?} is rejected by the DT_GNU_HASH bloom filter",
                s.name
            ));
            continue;
        }
        let mut at = u64::from(g.buckets[(u64::from(h) % nb) as usize]);
        let mut found = false;
        if at >= u64::from(g.symoffset) {
            while at <= syms.len() as u64 {
                let c = p.r.u32(g.chain_off + 4 * (at - u64::from(g.symoffset)))?;
                if at == idx && (c | 1) == (h | 1) {
                    found = true;
                    break;
                }
                if c & 1 == 1 {
                    break;
                }
                at += 1;
            }
        }
        if !found {
            v.push(format!(
                "dynsym {idx} {:?} is not reachable through DT_GNU_HASH",
                s.name
            ));
        }
    }
    Ok(())
}
