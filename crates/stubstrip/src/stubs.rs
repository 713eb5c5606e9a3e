//! What several subcommands know about stub directories and the resolution-cache note's
//! entries: kept here, so that no subcommand reaches into another's internals for them.

use elfpatch::note::Hint;
use ldso_model::fsview::{dirname, Bytes};

use crate::rule::StubMatcher;

/// The stub directory holding `path` (or the file it links to), if any: a directory that
/// [`StubMatcher::is_stub`] accepts, or one inside it.
pub fn stub_dir(path: &[u8], canonical: Option<&[u8]>, m: &StubMatcher) -> Option<Bytes> {
    for p in std::iter::once(path).chain(canonical) {
        let mut d = dirname(p);
        while d.len() > 1 {
            if m.is_stub(&d) {
                return Some(d);
            }
            d = dirname(&d);
        }
    }
    None
}

/// The first string in `bytes` that could be read as a stub run path entry, if any: what a
/// file that cannot be parsed as ELF must be free of before it may be left as it is.
///
/// A run path entry ends at `:` or NUL, and `DT_RUNPATH` may point into the middle of a string,
/// so every `:`/NUL-delimited part counts, and so do its tails. The built-in rules need the
/// bytes `stubs` in the entry, so a part holding them counts as a stub entry whatever comes
/// before (an over-approximation: a file that merely mentions them is not tolerated); a
/// `--stub-pattern` glob is tried on the part and on each tail that starts at `/` or after a
/// byte that is not printable.
pub fn stub_string(bytes: &[u8], stubs: &StubMatcher) -> Option<String> {
    let named = |part: &[u8]| {
        if part.windows(5).any(|w| w == b"stubs") {
            return true;
        }
        (0..part.len())
            .filter(|&i| i == 0 || part[i] == b'/' || !part[i - 1].is_ascii_graphic())
            .any(|i| stubs.patterns.iter().any(|g| g.matches(&part[i..])))
    };
    bytes
        .split(|&b| b == 0 || b == b':')
        .find(|part| !part.is_empty() && named(part))
        .map(|part| {
            let shown = &part[..part.len().min(200)];
            String::from_utf8_lossy(shown).into_owned()
        })
}

/// A note entry as text: `<needed> <hints>`, the hints as in the descriptor (`=a:?b`).
pub fn note_entry_text(needed: &[u8], hints: &[Hint]) -> String {
    let mut list = Vec::new();
    for (i, h) in hints.iter().enumerate() {
        if i > 0 {
            list.push(b':');
        }
        list.push(h.marker());
        list.extend_from_slice(h.path());
    }
    format!(
        "{} {}",
        String::from_utf8_lossy(needed),
        String::from_utf8_lossy(&list)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Glob;

    #[test]
    fn stubs_are_recognised_by_directory_or_link_target() {
        let m = StubMatcher::default();
        let store = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs";
        assert!(stub_dir(format!("{store}/lib/libcuda.so.1").as_bytes(), None, &m).is_some());
        assert!(stub_dir(b"/usr/local/cuda/lib64/stubs/libcuda.so", None, &m).is_some());
        assert!(stub_dir(b"/usr/lib/x86_64-linux-gnu/libcuda.so.1", None, &m).is_none());
        assert!(stub_dir(
            b"/opt/x/libcuda.so.1",
            Some(b"/usr/local/cuda/lib64/stubs/libcuda.so"),
            &m
        )
        .is_some());
    }

    #[test]
    fn stub_strings_are_found_wherever_a_run_path_could_start() {
        let plain = StubMatcher::default();
        let none = b"\x7fELF\x02\x01/usr/lib:/opt/cuda/lib64\0libm.so.6\0";
        assert_eq!(stub_string(none, &plain), None);
        let runpath = b"junk\x00/a:/nix/store/x/lib/stubs:/b\x00";
        assert_eq!(
            stub_string(runpath, &plain).as_deref(),
            Some("/nix/store/x/lib/stubs")
        );
        // A string whose tail is a relative stub entry, as a shared string tail would be.
        assert_eq!(
            stub_string(b"\x00libstubs\x00", &plain).as_deref(),
            Some("libstubs")
        );
        let vendor = StubMatcher {
            patterns: vec![Glob::new("/opt/vendor-cuda/lib")],
        };
        assert_eq!(stub_string(b"\x00/opt/vendor-cuda/lib\x00", &plain), None);
        assert_eq!(
            stub_string(b"\x00\x03\x01/opt/vendor-cuda/lib:/x\x00", &vendor).as_deref(),
            Some("\u{3}\u{1}/opt/vendor-cuda/lib")
        );
        assert_eq!(
            stub_string(b"\x00prefix/opt/vendor-cuda/lib\x00", &vendor).as_deref(),
            Some("prefix/opt/vendor-cuda/lib")
        );
        assert_eq!(stub_string(b"", &vendor), None);
    }
}
