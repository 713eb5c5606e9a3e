//! The I/O of `explain`: read the program and the loader's settings, resolve, print.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use ldso_model::fsview::{dirname, Bytes};
use ldso_model::hostfs::HostFs;
use ldso_model::resolve::{self, Program};
use ldso_model::settings;
use ldso_model::target::Target;

use super::report::ExplainReport;
use super::{ExplainConfig, EXIT_PROBLEMS, EXIT_UNREADABLE};
use crate::elf_input;

/// The program's path in the modelled system and its `$ORIGIN`.
fn locate_program(file: &Path, fs: &HostFs) -> (Bytes, Bytes) {
    let canonical = std::fs::canonicalize(file)
        .map(|p| p.into_os_string().into_vec())
        .unwrap_or_else(|_| file.as_os_str().as_bytes().to_vec());
    match &fs.root {
        Some(root) => {
            let root = std::fs::canonicalize(root)
                .map(|p| p.into_os_string().into_vec())
                .unwrap_or_default();
            match canonical.strip_prefix(root.as_slice()) {
                Some(rest) if rest.starts_with(b"/") => (rest.to_vec(), dirname(rest)),
                // Outside the root: as if installed at the same path inside it.
                _ => (canonical.clone(), dirname(&canonical)),
            }
        }
        None => (file.as_os_str().as_bytes().to_vec(), dirname(&canonical)),
    }
}

/// Runs `explain`; returns the exit status.
pub fn run(c: &ExplainConfig) -> u8 {
    let (header, info) = match elf_input::read(&c.file, true) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("stubstrip: {}: {e}", c.file.display());
            return EXIT_UNREADABLE;
        }
    };
    let target = Target::of(&header);
    if !info.dynamic {
        if c.json {
            println!(
                "{}",
                serde_json::json!({"command": "explain", "file": c.file.display().to_string(),
                    "architecture": target.name(), "static": true, "lookups": []})
            );
        } else {
            println!(
                "{}: statically linked: no libraries to find",
                c.file.display()
            );
        }
        return 0;
    }
    let fs = HostFs {
        root: c.root.clone(),
    };
    let (path, origin) = locate_program(&c.file, &fs);
    let (settings, prov) =
        settings::read_settings(target, info.interpreter.as_deref(), &fs, &c.overrides);
    let program = Program { path, origin, info };
    let res = resolve::resolve(program, &c.libnames, &settings, &fs);
    let report = ExplainReport::new(&res, &settings, &prov, &c.libnames, &c.stubs, &fs);
    report.render(c.json).emit();
    if report.has_problems() {
        EXIT_PROBLEMS
    } else {
        0
    }
}
