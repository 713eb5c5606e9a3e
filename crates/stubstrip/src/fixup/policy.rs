//! The hook's policy, decided without touching anything: the check-time fallback and the lines
//! of `fixup`'s reply.

use std::path::Path;

use super::facts::FileFacts;

/// The variable the check-time fallback extends.
const FALLBACK_VAR: &str = "LD_LIBRARY_PATH";

/// The decision about the check-time fallback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckFallback {
    /// Nothing to do and nothing to say: no stub directory was removed, the fallback is turned
    /// off, or every removed directory is already on `LD_LIBRARY_PATH` (or cannot go there).
    None,
    /// This directory provides `libcuda.so.1` here (a GPU-enabled sandbox, a compat package):
    /// the stub would shadow it, so `LD_LIBRARY_PATH` stays as it is.
    DriverPresent(String),
    /// `LD_LIBRARY_PATH` becomes `value`, with `added` appended.
    Append {
        /// The directories appended, in order.
        added: Vec<String>,
        /// The new value.
        value: Vec<u8>,
    },
}

/// Decides the check-time fallback.
///
/// `removed` are the stub directories the fix removed; `driver_dirs` the directories where the
/// driver's `libcuda.so.1` would be found at run time (the compat directory, then the driver
/// link). A removed directory is appended when it is absolute, exists, is not on
/// `ld_library_path` yet, and can be written there (no `:` and no newline in it).
pub fn fallback(
    removed: &[String],
    enabled: bool,
    driver_dirs: &[&[u8]],
    ld_library_path: &[u8],
    host: &dyn FileFacts,
) -> CheckFallback {
    if !enabled || removed.is_empty() {
        return CheckFallback::None;
    }
    for dir in driver_dirs {
        let dir = String::from_utf8_lossy(dir);
        if host.exists(&Path::new(dir.as_ref()).join("libcuda.so.1")) {
            return CheckFallback::DriverPresent(dir.into_owned());
        }
    }
    if ld_library_path.contains(&b'\n') {
        // It could not be handed back on one line; leaving it alone is the honest choice.
        return CheckFallback::None;
    }
    let mut value = ld_library_path.to_vec();
    let mut added = Vec::new();
    for dir in removed {
        let usable = dir.starts_with('/')
            && !dir.contains([':', '\n'])
            && host.is_dir(Path::new(dir))
            && !value.split(|&c| c == b':').any(|e| e == dir.as_bytes());
        if !usable {
            continue;
        }
        if !value.is_empty() {
            value.push(b':');
        }
        value.extend_from_slice(dir.as_bytes());
        added.push(dir.clone());
    }
    if added.is_empty() {
        CheckFallback::None
    } else {
        CheckFallback::Append { added, value }
    }
}

/// One line of `fixup`'s stdout, for the hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookInstruction {
    /// `log MESSAGE`: a line for the build log (the hook logs it with nixLog).
    Log(String),
    /// `export NAME=VALUE`: the hook runs `export -- "NAME=VALUE"` (no eval).
    Export {
        /// A shell variable name.
        name: &'static str,
        /// The value; never holds a newline ([`fallback`] sees to it).
        value: Vec<u8>,
    },
}

impl HookInstruction {
    /// The instruction as bytes for stdout: one line each (a message with newlines becomes
    /// several `log` lines).
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            HookInstruction::Log(m) => {
                for line in m.lines() {
                    out.extend_from_slice(b"log ");
                    out.extend_from_slice(line.as_bytes());
                    out.push(b'\n');
                }
            }
            HookInstruction::Export { name, value } => {
                debug_assert!(!value.contains(&b'\n'));
                out.extend_from_slice(b"export ");
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
                out.extend_from_slice(value);
                out.push(b'\n');
            }
        }
        out
    }
}

/// The instructions for a fallback decision.
pub fn fallback_instructions(f: &CheckFallback) -> Vec<HookInstruction> {
    match f {
        CheckFallback::None => Vec::new(),
        CheckFallback::DriverPresent(dir) => vec![HookInstruction::Log(format!(
            "{dir} provides libcuda.so.1 here: {FALLBACK_VAR} left as it is"
        ))],
        CheckFallback::Append { added, value } => vec![
            HookInstruction::Export {
                name: FALLBACK_VAR,
                value: value.clone(),
            },
            HookInstruction::Log(format!(
                "appended to {FALLBACK_VAR} for the checks after fixup: {}",
                added.join(" ")
            )),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::PathBuf;

    /// A host where exactly these paths exist (directories end in `/`).
    struct Fake(HashSet<&'static str>);

    impl FileFacts for Fake {
        fn exists(&self, p: &Path) -> bool {
            let p = p.to_str().unwrap();
            self.0.contains(p) || self.0.contains(format!("{p}/").as_str())
        }
        fn is_dir(&self, p: &Path) -> bool {
            self.0
                .contains(format!("{}/", p.to_str().unwrap()).as_str())
        }
        fn canonical(&self, _: &Path) -> Option<PathBuf> {
            unreachable!("the fallback never resolves symlinks")
        }
        fn size(&self, _: &Path) -> Option<u64> {
            unreachable!("the fallback never asks for sizes")
        }
    }

    const STUBS: &str = "/nix/store/h-cuda/lib/stubs";
    const DRIVER: &[u8] = b"/run/opengl-driver/lib";

    fn removed(dirs: &[&str]) -> Vec<String> {
        dirs.iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn removed_stub_directories_are_appended_once() {
        let host = Fake(["/nix/store/h-cuda/lib/stubs/", "/other/"].into());
        let got = fallback(
            &removed(&[STUBS, "/other"]),
            true,
            &[DRIVER],
            b"/a:/other",
            &host,
        );
        assert_eq!(
            got,
            CheckFallback::Append {
                added: removed(&[STUBS]),
                value: format!("/a:/other:{STUBS}").into_bytes()
            }
        );
        let empty = fallback(&removed(&[STUBS]), true, &[DRIVER], b"", &host);
        assert_eq!(
            empty,
            CheckFallback::Append {
                added: removed(&[STUBS]),
                value: STUBS.as_bytes().to_vec()
            }
        );
    }

    #[test]
    fn nothing_is_appended_when_off_or_nothing_was_removed() {
        let host = Fake([STUBS].into());
        assert_eq!(
            fallback(&removed(&[STUBS]), false, &[DRIVER], b"", &host),
            CheckFallback::None
        );
        assert_eq!(
            fallback(&[], true, &[DRIVER], b"", &host),
            CheckFallback::None
        );
    }

    #[test]
    fn relative_missing_or_unwritable_directories_are_not_appended() {
        let host = Fake(["stubs/", "/a:b/stubs/", "/x\ny/stubs/"].into());
        let dirs = removed(&["stubs", "/missing/stubs", "/a:b/stubs", "/x\ny/stubs"]);
        assert_eq!(
            fallback(&dirs, true, &[DRIVER], b"", &host),
            CheckFallback::None
        );
        // An LD_LIBRARY_PATH holding a newline cannot be handed back on one line.
        let host = Fake(["/nix/store/h-cuda/lib/stubs/"].into());
        assert_eq!(
            fallback(&removed(&[STUBS]), true, &[DRIVER], b"/a\n/b", &host),
            CheckFallback::None
        );
    }

    #[test]
    fn a_driver_or_compat_libcuda_here_keeps_the_stub_off_the_path() {
        let compat: &[u8] = b"/nix/store/c-cuda_compat/compat";
        let host = Fake(
            [
                "/nix/store/h-cuda/lib/stubs/",
                "/nix/store/c-cuda_compat/compat/libcuda.so.1",
                "/run/opengl-driver/lib/libcuda.so.1",
            ]
            .into(),
        );
        assert_eq!(
            fallback(&removed(&[STUBS]), true, &[compat, DRIVER], b"", &host),
            CheckFallback::DriverPresent("/nix/store/c-cuda_compat/compat".into())
        );
        assert_eq!(
            fallback(&removed(&[STUBS]), true, &[DRIVER], b"", &host),
            CheckFallback::DriverPresent("/run/opengl-driver/lib".into())
        );
    }

    #[test]
    fn instructions_are_one_line_each() {
        assert_eq!(
            HookInstruction::Log("a\nb".into()).render(),
            b"log a\nlog b\n".to_vec()
        );
        let export = HookInstruction::Export {
            name: "LD_LIBRARY_PATH",
            value: b"/a b:/c'd".to_vec(),
        };
        assert_eq!(
            export.render(),
            b"export LD_LIBRARY_PATH=/a b:/c'd\n".to_vec()
        );
        let f = CheckFallback::Append {
            added: removed(&["/x", "/y"]),
            value: b"/x:/y".to_vec(),
        };
        let lines: Vec<u8> = fallback_instructions(&f)
            .iter()
            .flat_map(HookInstruction::render)
            .collect();
        assert_eq!(
            String::from_utf8(lines).unwrap(),
            "export LD_LIBRARY_PATH=/x:/y\nlog appended to LD_LIBRARY_PATH for the checks after fixup: /x /y\n"
        );
    }
}
