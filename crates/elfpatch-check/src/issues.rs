//! Comparing the issues `validate::check` and `oracle::check_layout` report before and after an
//! edit: what counts as new.

use std::collections::BTreeSet;

use elfpatch::{validate, Elf};

/// `validate::check`'s issues, as strings.
pub fn validate_issues(e: &Elf) -> Vec<String> {
    validate::check(e).into_iter().map(|i| i.0).collect()
}

/// Replaces every number in an issue by `#`, so that the same kind of issue about a moved thing
/// compares equal.
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            // A quoted section name: read from a name table that may itself have been garbage.
            match b[i + 1..].iter().position(|&c| c == b'\'') {
                Some(n) => {
                    out.push_str("'_'");
                    i += n + 2;
                    continue;
                }
                None => {
                    out.push('\'');
                    i += 1;
                    continue;
                }
            }
        }
        if b[i].is_ascii_digit() {
            if b[i] == b'0' && b.get(i + 1) == Some(&b'x') {
                i += 2;
            }
            while i < b.len() && b[i].is_ascii_hexdigit() {
                i += 1;
            }
            out.push('#');
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// Issues in `after` that `before` lacks: exactly when `before` is clean, by kind otherwise (a
/// pre-existing issue about something that moved reads differently afterwards).
///
/// Garbage in: when a header of the input already claims bytes past the end of the file or
/// outside every segment, the appended data may land in that range, so new overlaps are not
/// counted then; likewise new `PT_PHDR` issues when its `PT_PHDR` was already inconsistent, and
/// new section-level issues when the input's section headers already were (the loader never
/// reads them: keeping garbage consistent means nothing; the loader's view stays strict).
/// Section names are compared as `'_'`: with a garbage `e_shstrndx` they are read
/// from bytes (the ELF header, say) that an edit legitimately changes.
pub fn new_issues(before: &[String], after: &[String]) -> Vec<String> {
    if before.is_empty() {
        return after.to_vec();
    }
    let past_eof = before.iter().any(|s| {
        s.contains("outside the")
            || s.contains("past the end of the file")
            || s.contains("inside 0 PT_LOADs")
            || s.contains("not inside a PT_LOAD")
    });
    let bad_phdr = before.iter().any(|s| s.contains("PT_PHDR"));
    let bad_sections = before.iter().any(|s| s.contains("section"));
    // The oracle takes the symbol count from a `.dynsym` section when there is one: a garbage one
    // hides symbols from its hash checks until an edit drops the unusable section headers, and
    // then what the input already had shows up as new.
    let hidden_symbols = before
        .iter()
        .any(|s| s.starts_with("DT_HASH nchain") && s.contains("differs from the"));
    let symbol_lookup = |s: &str| {
        s.starts_with("dynsym ")
            && (s.contains("is not reachable through DT_")
                || s.contains("is rejected by the DT_GNU_HASH bloom filter"))
    };
    let kinds: BTreeSet<String> = before.iter().map(|s| normalize(s)).collect();
    after
        .iter()
        .filter(|s| !kinds.contains(&normalize(s)))
        .filter(|s| !(past_eof && s.contains("overlap")))
        .filter(|s| !(bad_phdr && s.contains("PT_PHDR")))
        .filter(|s| !(bad_sections && s.contains("section")))
        .filter(|s| !(hidden_symbols && symbol_lookup(s)))
        .cloned()
        .collect()
}
