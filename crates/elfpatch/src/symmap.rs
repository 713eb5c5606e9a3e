//! The map file of `--rename-dynamic-symbols`, read with patchelf 0.19.3's rules.
//!
//! Each line holds two whitespace-separated names, old then new; anything after them on the line
//! is ignored. There is no comment syntax: `# x` is the pair `#` → `x`, as in patchelf. The first
//! line without any name (an empty or blank line) ends the map: patchelf stops reading there, and
//! a map that means the same must behave the same. A line with one name, a name given twice as
//! old name (in this file or an earlier one), or a name with `@` (a version) is an error.

use std::fmt;

/// The (old name, new name) pairs of a map, in file order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Why a map file is refused, with its 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapError {
    /// Line number, from 1.
    pub line: usize,
    /// What is wrong.
    pub kind: MapErrorKind,
}

/// The kinds of map file errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapErrorKind {
    /// A line with an old name and no new one.
    MissingNewName,
    /// The old name appeared on an earlier line.
    Duplicate(Vec<u8>),
    /// A name carries a version (`name@VERSION`).
    VersionTag(Vec<u8>, Vec<u8>),
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = self.line;
        match &self.kind {
            MapErrorKind::MissingNewName => {
                write!(f, "{line}: map file line is missing the second element")
            }
            MapErrorKind::Duplicate(name) => write!(
                f,
                "{line}: name '{}' appears twice in the map file",
                String::from_utf8_lossy(name)
            ),
            MapErrorKind::VersionTag(old, new) => write!(
                f,
                "{line}: name pair contains version tag: {} {}",
                String::from_utf8_lossy(old),
                String::from_utf8_lossy(new)
            ),
        }
    }
}

impl std::error::Error for MapError {}

/// Whitespace as C's `isspace` in the "C" locale, which patchelf's stream extraction uses.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Parses `text` and appends its pairs to `map`, which may hold the pairs of earlier map files
/// (an old name repeated across files is an error too, as in patchelf).
pub fn parse_into(text: &[u8], map: &mut Pairs) -> Result<(), MapError> {
    if text.is_empty() {
        return Ok(());
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let mut words = line.split(|&b| is_space(b)).filter(|w| !w.is_empty());
        let Some(old) = words.next() else {
            break;
        };
        let err = |kind| MapError { line: i + 1, kind };
        let Some(new) = words.next() else {
            return Err(err(MapErrorKind::MissingNewName));
        };
        if map.iter().any(|(o, _)| o == old) {
            return Err(err(MapErrorKind::Duplicate(old.to_vec())));
        }
        if old.contains(&b'@') || new.contains(&b'@') {
            return Err(err(MapErrorKind::VersionTag(old.to_vec(), new.to_vec())));
        }
        map.push((old.to_vec(), new.to_vec()));
    }
    Ok(())
}

/// Parses one map file's contents.
pub fn parse(text: &[u8]) -> Result<Pairs, MapError> {
    let mut map = Vec::new();
    parse_into(text, &mut map)?;
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        v.iter()
            .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn whitespace_extra_words_and_no_final_newline() {
        let text = b"  foo\t bar  ignored words\r\nbaz\x0bqux";
        assert_eq!(
            parse(text).unwrap(),
            pairs(&[("foo", "bar"), ("baz", "qux")])
        );
    }

    #[test]
    fn a_blank_line_ends_the_map_and_hash_is_a_name() {
        let text = b"# comment\na b\n \t\nc d\n";
        assert_eq!(parse(text).unwrap(), pairs(&[("#", "comment"), ("a", "b")]));
        assert_eq!(parse(b"").unwrap(), pairs(&[]));
        assert_eq!(parse(b"\na b\n").unwrap(), pairs(&[]));
    }

    #[test]
    fn errors_name_their_line() {
        let e = parse(b"a b\nc\n").unwrap_err();
        assert_eq!((e.line, e.kind), (2, MapErrorKind::MissingNewName));
        let e = parse(b"a b\nb c\na d\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.kind, MapErrorKind::Duplicate(b"a".to_vec()));
        let e = parse(b"a b@V1\n").unwrap_err();
        assert!(matches!(e.kind, MapErrorKind::VersionTag(..)), "{e}");
        // Across files.
        let mut map = parse(b"a b\n").unwrap();
        assert!(parse_into(b"x y\na c\n", &mut map).is_err());
    }

    proptest! {
        /// Any list of distinct pairs written one per line, with any whitespace around, reads back.
        #[test]
        fn written_maps_read_back(
            names in prop::collection::btree_map("[a-zA-Z_.][a-zA-Z0-9_.#]{0,10}", "[a-zA-Z_.][a-zA-Z0-9_.]{0,10}", 0..20),
            pad in prop::collection::vec("[ \t]{0,3}", 3),
        ) {
            let mut text = Vec::new();
            for (a, b) in &names {
                text.extend_from_slice(format!("{}{a}{} {}{b}{}\n", pad[0], pad[1], pad[2], pad[0]).as_bytes());
            }
            let expected: Vec<(Vec<u8>, Vec<u8>)> =
                names.iter().map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec())).collect();
            prop_assert_eq!(parse(&text).unwrap(), expected);
        }
    }
}
