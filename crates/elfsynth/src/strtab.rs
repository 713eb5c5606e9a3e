//! String table construction with exact deduplication and optional linker
//! style suffix ("tail") merging.

use std::collections::HashMap;

/// A finished string table: the bytes (starting with the empty string at
/// offset 0) and the offset of every string that was added.
pub(crate) struct StrTab {
    pub bytes: Vec<u8>,
    offsets: HashMap<String, u64>,
}

impl StrTab {
    /// Builds a table holding `strings`. Identical strings share one copy.
    /// With `tail_merge`, a string that is a proper suffix of another one
    /// points into the longer string's bytes. Strings that are stored on
    /// their own appear in first-appearance order.
    pub fn build<'a>(strings: impl IntoIterator<Item = &'a str>, tail_merge: bool) -> StrTab {
        let mut order: Vec<&str> = Vec::new();
        let mut seen: HashMap<&str, ()> = HashMap::new();
        for s in strings {
            if !s.is_empty() && seen.insert(s, ()).is_none() {
                order.push(s);
            }
        }
        // parent[s] = a longer string that ends with s.
        let mut parent: HashMap<&str, &str> = HashMap::new();
        if tail_merge {
            let mut by_rev: Vec<&str> = order.clone();
            by_rev.sort_by(|a, b| a.bytes().rev().cmp(b.bytes().rev()));
            for w in by_rev.windows(2) {
                let (s, next) = (w[0], w[1]);
                if next.len() > s.len() && next.as_bytes().ends_with(s.as_bytes()) {
                    parent.insert(s, next);
                }
            }
        }
        let mut bytes = vec![0u8];
        let mut offsets: HashMap<String, u64> = HashMap::new();
        offsets.insert(String::new(), 0);
        for &s in &order {
            if !parent.contains_key(s) {
                offsets.insert(s.to_string(), bytes.len() as u64);
                bytes.extend_from_slice(s.as_bytes());
                bytes.push(0);
            }
        }
        for &s in &order {
            let mut root = s;
            while let Some(&p) = parent.get(root) {
                root = p;
            }
            if root != s {
                let off = offsets[root] + (root.len() - s.len()) as u64;
                offsets.insert(s.to_string(), off);
            }
        }
        StrTab { bytes, offsets }
    }

    /// Offset of a string that was added to the table.
    pub fn offset(&self, s: &str) -> u64 {
        self.offsets[s]
    }
}

#[cfg(test)]
mod tests {
    use super::StrTab;

    fn get(t: &StrTab, off: u64) -> &str {
        let b = &t.bytes[off as usize..];
        let end = b.iter().position(|&c| c == 0).unwrap();
        std::str::from_utf8(&b[..end]).unwrap()
    }

    #[test]
    fn dedup_and_merge() {
        let strs = [
            "libdep.so",
            "/opt/x/libdep.so",
            "",
            "dep.so",
            "libdep.so",
            "x",
        ];
        let t = StrTab::build(strs, true);
        for s in strs {
            assert_eq!(get(&t, t.offset(s)), s);
        }
        assert_eq!(t.bytes, b"\0/opt/x/libdep.so\0x\0");
        let u = StrTab::build(strs, false);
        for s in strs {
            assert_eq!(get(&u, u.offset(s)), s);
        }
        assert_eq!(u.bytes, b"\0libdep.so\0/opt/x/libdep.so\0dep.so\0x\0");
    }
}
