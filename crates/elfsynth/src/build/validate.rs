//! What a [`Spec`] must satisfy to be built.

use super::SpecError;
use crate::Spec;

fn check_str(what: &str, s: &str) -> Result<(), SpecError> {
    if s.as_bytes().contains(&0) {
        Err(SpecError(format!("{what} {s:?} contains a NUL byte")))
    } else {
        Ok(())
    }
}

/// Checks `spec` before anything is laid out: its sizes, and strings without NUL bytes.
pub(super) fn validate(spec: &Spec) -> Result<(), SpecError> {
    let p = spec.page_size;
    if !p.is_power_of_two() || !(0x1000..=0x20_0000).contains(&p) {
        return Err(SpecError(format!(
            "page_size {p:#x} must be a power of two between 4 KiB and 2 MiB"
        )));
    }
    if spec.base % p != 0 {
        return Err(SpecError(format!(
            "base {:#x} is not a multiple of page_size {p:#x}",
            spec.base
        )));
    }
    if spec.base > 1 << 56 || spec.text_size > 1 << 48 || spec.bss_size > 1 << 48 {
        return Err(SpecError(
            "base, text_size or bss_size is absurdly large".into(),
        ));
    }
    if spec.undefined_dynsyms > spec.dynsyms.len() {
        return Err(SpecError(format!(
            "undefined_dynsyms {} exceeds the {} dynsyms",
            spec.undefined_dynsyms,
            spec.dynsyms.len()
        )));
    }
    if spec.phdr_slack > 1 << 20
        || spec.pt_null_slots > 1000
        || spec.spare_dynamic_slots > 1 << 16
        || spec.tail_bytes > 1 << 20
    {
        return Err(SpecError(
            "phdr_slack, pt_null_slots, spare_dynamic_slots or tail_bytes too large".into(),
        ));
    }
    if let Some(s) = &spec.interp {
        check_str("interp", s)?;
    }
    for s in &spec.needed {
        check_str("needed", s)?;
    }
    for (what, s) in [
        ("soname", &spec.soname),
        ("rpath", &spec.rpath),
        ("runpath", &spec.runpath),
    ] {
        if let Some(s) = s {
            check_str(what, s)?;
        }
    }
    for s in &spec.dynsyms {
        check_str("dynsym", s)?;
    }
    for (f, vs) in &spec.verneed {
        check_str("verneed file", f)?;
        if vs.is_empty() {
            return Err(SpecError(format!("verneed file {f:?} lists no versions")));
        }
        for v in vs {
            check_str("verneed version", v)?;
        }
    }
    for v in &spec.verdef {
        check_str("verdef", v)?;
    }
    Ok(())
}
