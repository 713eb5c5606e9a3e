//! The name every message starts with: the one the program was run as.
//!
//! Each line `stubstrip` writes for people starts with `PROG: ` (then the file, when there is
//! one), where PROG is the file name of `argv[0]`: installed or linked under another name, the
//! messages carry that name, as Unix tools do. `main` sets it once, before anything is printed;
//! until then (unit tests) it is `stubstrip`.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::OnceLock;

/// The name when `argv[0]` gives none.
pub const DEFAULT: &str = "stubstrip";

static NAME: OnceLock<String> = OnceLock::new();

/// The program's name as `argv[0]` gives it: its file name, or [`DEFAULT`] when it has none.
pub fn name_of(argv0: Option<&OsStr>) -> String {
    argv0
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT.to_string())
}

/// Sets the name; only the first call counts.
pub fn set(name: String) {
    let _ = NAME.set(name);
}

/// The name messages start with.
pub fn name() -> &'static str {
    NAME.get().map_or(DEFAULT, String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_argv0s_file_name() {
        assert_eq!(
            name_of(Some(OsStr::new("/nix/store/x/bin/stubstrip"))),
            "stubstrip"
        );
        assert_eq!(name_of(Some(OsStr::new("./foo"))), "foo");
        assert_eq!(name_of(Some(OsStr::new("foo"))), "foo");
        assert_eq!(name_of(Some(OsStr::new(""))), DEFAULT);
        assert_eq!(name_of(Some(OsStr::new("/"))), DEFAULT);
        assert_eq!(name_of(None), DEFAULT);
    }
}
