//! What a newcomer reads is what the programs do: every command example with output
//! in the documents people read first is run, and the numbers their prose states are checked
//! against the one place each comes from.
//!
//! **Examples.** In the documents of [`DOCS`], a fenced block marked `console` is a session:
//! each line starting with `$ ` is a command (a trailing `\` continues it on the next line),
//! run by `sh` with stdout and stderr together, and the lines up to the next command are what it
//! must print, line for line. In an expected line `…` stands for any text within the line, and
//! a line that is only `…` for any number of lines (none included). Each block runs in a fresh
//! directory that plays `/`: the fixture of [`fixture`] (a program linked as nixpkgs links CUDA
//! programs, its stub in a Nix store path), with that directory's own path removed from what
//! the commands print, so `/nix/store/…` in the text is the fixture's store. It is also `HOME`;
//! `PATH` starts with `~/.local/bin` (empty: the examples link `patchelf` there themselves) and
//! the binaries under test, `stubstrip` and `elfpatch`.
//!
//! A block that needs what a test machine has not (a GPU, Nix, the network) says so in its info
//! string, ```` ```console not run: WHY ````, and is listed as not run; any other fence holding
//! a `$ ` line fails, so that an example with output cannot stay unchecked by being marked
//! `sh`. The man pages hold no examples: their text comes from the argument definitions
//! `--help` uses (`crates/stubstrip/src/docs.rs`, `crates/elfpatch/src/bin/elfpatch/docs.rs`).
//!
//! **Numbers.** How many argued layout exceptions the patchelf suite has is the `EXCEPTIONS`
//! table of `tests/patchelf-suite/run.sh`, which the suite itself runs by; the audit codes and
//! their severities are `stubstrip audit --codes`; elfpatch's exit statuses are its `--help`
//! table. Each prose statement of them must agree.
//!
//! The elfpatch binary is the one beside stubstrip's (`cargo build --workspace`, as CI's rust
//! suite does before `cargo test`); without it the test skips, which fails under
//! `STUBSTRIP_REQUIRE_TOOLS=1`.

use crate::common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// The documents whose examples are run: the README, the references, the release's and the
/// wheel's descriptions, the changelog.
const DOCS: &[&str] = &[
    "README.md",
    "docs/stubstrip.md",
    "docs/elfpatch.md",
    "docs/testing.md",
    "docs/figures.md",
    "release/README.md",
    "release/wheel/README.md",
    "CHANGELOG.md",
    "tests/patchelf-suite/README.md",
];

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether this is the repository, documents and suites included, rather than a package's
/// source (`nix/package.nix` takes the crates and the README only, and runs `cargo test` there):
/// the documents' tests have nothing to read in the latter, and say so.
fn repository() -> bool {
    let whole = root().join("tests/run-all.sh").exists();
    if !whole {
        eprintln!("docs_examples: SKIPPED: not the whole repository (no tests/run-all.sh): a package's source");
    }
    whole
}

fn read(doc: &str) -> String {
    fs::read_to_string(root().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"))
}

/// A fenced block of a document.
#[derive(Debug)]
struct Block {
    /// `DOC:LINE` of its opening fence.
    at: String,
    /// The info string after the fence (`console`, `sh`, `console not run: WHY`).
    info: String,
    /// Its lines.
    lines: Vec<String>,
}

/// The fenced blocks (```) of `text`.
fn blocks(doc: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    // The open block, and its fence's indentation (a block inside a list item), which its
    // lines share.
    let mut open: Option<(Block, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                let b = Block {
                    at: format!("{doc}:{}", i + 1),
                    info: info.trim().to_string(),
                    lines: Vec::new(),
                };
                open = Some((b, indent));
            }
            (Some(_), Some(_)) => out.push(open.take().unwrap().0),
            (Some((b, n)), None) => {
                let cut = (*n).min(indent);
                b.lines.push(line[cut..].to_string());
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "{doc}: a fenced block is not closed");
    out
}

/// One command of a session and what it must print.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
}

/// The commands of a `console` block.
fn steps(b: &Block) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut continued = false;
    for line in &b.lines {
        if continued {
            let s = out.last_mut().unwrap();
            s.command.push('\n');
            s.command.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Step {
                command: cmd.to_string(),
                expected: Vec::new(),
            });
            continued = cmd.ends_with('\\');
        } else {
            match out.last_mut() {
                Some(s) => s.expected.push(line.to_string()),
                None => panic!("{}: output before the first `$ ` command", b.at),
            }
        }
    }
    out
}

/// Whether `actual` matches the expected line `want`, where `…` stands for any text.
fn line_matches(want: &str, actual: &str) -> bool {
    let parts: Vec<&str> = want.split('…').collect();
    if parts.len() == 1 {
        return want == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the lines `actual` match `want`, where a line `…` stands for any number of lines.
fn lines_match(want: &[String], actual: &[&str]) -> bool {
    match want.split_first() {
        None => actual.is_empty(),
        Some((w, rest)) if w == "…" => {
            (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..]))
        }
        Some((w, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| line_matches(w, a) && lines_match(rest, more)),
    }
}

/// The directory a block runs in, playing `/`: a program linked as nixpkgs links CUDA programs
/// (`result/bin/app`, needing `libcuda.so.1`, its RUNPATH the stub directory of
/// `nix/store/…-cuda_cudart-12.8.90-stubs/lib`), `bin/` with the binaries under test, and an
/// empty `.local/bin`.
fn fixture(elfpatch: &Path) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let stubs = cuda_stub(d);
    program(
        &d.join("result/bin/app"),
        "int cuInit(unsigned); int main(void) { return cuInit(0); }\n",
        &[
            "-Wl,--no-as-needed",
            "-Wl,--enable-new-dtags",
            &format!("-Wl,-rpath,{}", stubs.display()),
            &format!("{}/libcuda.so", stubs.display()),
        ],
    );
    let bin = d.join("bin");
    fs::create_dir_all(&bin).unwrap();
    symlink(env!("CARGO_BIN_EXE_stubstrip"), bin.join("stubstrip")).unwrap();
    symlink(elfpatch, bin.join("elfpatch")).unwrap();
    // Where the README links `patchelf` (the examples make the link themselves).
    fs::create_dir_all(d.join(".local/bin")).unwrap();
    t
}

/// Runs `command` in `dir` as a reader would in a shell; what it prints, stdout and stderr
/// together, with `dir`'s own path taken out (it plays `/`).
fn run_in(dir: &Path, command: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(dir)
        .env_clear()
        .env(
            "PATH",
            format!("{0}/.local/bin:{0}/bin:/usr/bin:/bin", dir.display()),
        )
        .env("HOME", dir)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let real = fs::canonicalize(dir).unwrap();
    text.replace(&real.display().to_string(), "")
        .replace(&dir.display().to_string(), "")
}

/// The elfpatch binary beside stubstrip's; when it is not built, a skip (a failure under
/// `STUBSTRIP_REQUIRE_TOOLS=1`) and `None`.
fn elfpatch_binary() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_BIN_EXE_stubstrip")).with_file_name("elfpatch");
    if !p.exists() {
        skip("no elfpatch beside stubstrip's binary: cargo build -p elfpatch (the same profile)");
        return None;
    }
    Some(p)
}

#[test]
fn every_documented_example_prints_what_the_document_says() {
    if !repository() {
        return;
    }
    if !can_build() {
        return;
    }
    let Some(elfpatch) = elfpatch_binary() else {
        return;
    };
    if Path::new("/run/opengl-driver/lib").exists() {
        skip("this machine has the driver link /run/opengl-driver/lib: the examples show one without");
        return;
    }
    let mut failures = Vec::new();
    let (mut ran, mut not_run) = (0, Vec::new());
    for doc in DOCS {
        for b in blocks(doc, &read(doc)) {
            let has_command = b.lines.iter().any(|l| l.starts_with("$ "));
            let kind = b.info.split_whitespace().next().unwrap_or("");
            if kind != "console" {
                if has_command {
                    failures.push(format!(
                        "{}: a `$ ` command in a ```{} block: make it ```console (run by this \
                         test), or ```console not run: WHY",
                        b.at, b.info
                    ));
                }
                continue;
            }
            if let Some(why) = b.info.strip_prefix("console not run:") {
                not_run.push(format!("{}: {}", b.at, why.trim()));
                continue;
            }
            assert!(
                b.info == "console",
                "{}: unknown info string {:?}",
                b.at,
                b.info
            );
            let dir = fixture(&elfpatch);
            for s in steps(&b) {
                ran += 1;
                let got = run_in(dir.path(), &s.command);
                let got_lines: Vec<&str> = got.lines().map(str::trim_end).collect();
                let want: Vec<String> = s
                    .expected
                    .iter()
                    .map(|l| l.trim_end().to_string())
                    .collect();
                if !lines_match(&want, &got_lines) {
                    failures.push(format!(
                        "{}: `{}` printed:\n{}\n--- the document says:\n{}",
                        b.at,
                        s.command,
                        got.trim_end(),
                        want.join("\n")
                    ));
                }
            }
        }
    }
    for n in &not_run {
        eprintln!("not run: {n}");
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
    // The README's own examples are among them: a parser that found nothing proves nothing.
    assert!(ran >= 8, "only {ran} commands found in {DOCS:?}");
}

/// The number words prose uses for small counts.
const WORDS: &[&str] = &[
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
];

/// Every count `[word] PHRASE` (`four argued layout exceptions`) or `the [word] PHRASE` in the
/// documents, with where it is: the number and `DOC:LINE`.
fn counts_before(phrase: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for doc in DOCS {
        for (i, line) in read(doc).lines().enumerate() {
            let lower = line.to_lowercase();
            let mut from = 0;
            while let Some(k) = lower[from..].find(phrase) {
                let at = from + k;
                let before = lower[..at].trim_end();
                let word = before.rsplit(' ').next().unwrap_or("");
                if let Some(n) = WORDS.iter().position(|w| *w == word) {
                    out.push((n, format!("{doc}:{}", i + 1)));
                }
                from = at + phrase.len();
            }
        }
    }
    out
}

/// The patchelf suite's exceptions, as its `run.sh` declares them (`[name]="reason"` lines of
/// `declare -A EXCEPTIONS=(...)`).
fn suite_exceptions() -> Vec<String> {
    let run = read("tests/patchelf-suite/run.sh");
    let table = run
        .split("declare -A EXCEPTIONS=(")
        .nth(1)
        .and_then(|t| t.split("\n)").next())
        .expect("tests/patchelf-suite/run.sh declares EXCEPTIONS");
    table
        .lines()
        .filter_map(|l| l.trim().strip_prefix('[')?.split(']').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_number_of_patchelf_suite_exceptions_is_the_suites_own() {
    if !repository() {
        return;
    }
    let exceptions = suite_exceptions();
    assert!(exceptions.len() >= 2, "{exceptions:?}");
    let mut stated = counts_before(" argued layout exceptions");
    stated.extend(counts_before(" exceptions"));
    stated.extend(counts_before(" the issue names"));
    let wrong: Vec<String> = stated
        .iter()
        .filter(|(n, _)| *n != exceptions.len())
        .map(|(n, at)| format!("{at}: says {}", WORDS[*n]))
        .collect();
    assert!(
        wrong.is_empty(),
        "tests/patchelf-suite/run.sh has {} exceptions ({exceptions:?}):\n{}",
        exceptions.len(),
        wrong.join("\n")
    );
    // The README states it, and so do the suite's own README and the reference.
    for doc in [
        "README.md",
        "tests/patchelf-suite/README.md",
        "docs/elfpatch.md",
    ] {
        assert!(
            stated
                .iter()
                .any(|(_, at)| at.starts_with(&format!("{doc}:"))),
            "{doc} no longer states the count: {stated:?}"
        );
    }
}

#[test]
fn the_audit_codes_table_is_audit_codes() {
    if !repository() {
        return;
    }
    let out = stubstrip().args(["audit", "--codes"]).output().unwrap();
    assert!(out.status.success());
    let rows = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let code = cells.get(1)?;
                (code.starts_with("SS") && code.len() == 5)
                    .then(|| (code.to_string(), cells[2].to_lowercase()))
            })
            .collect()
    };
    let program = rows(&String::from_utf8_lossy(&out.stdout));
    assert!(program.len() >= 12, "{program:?}");
    assert_eq!(
        rows(&read("docs/stubstrip.md")),
        program,
        "docs/stubstrip.md's audit table (code, severity) is not `stubstrip audit --codes`"
    );
}

#[test]
fn the_readmes_exit_statuses_are_elfpatchs() {
    if !repository() {
        return;
    }
    let Some(elfpatch) = elfpatch_binary() else {
        return;
    };
    let help = Command::new(elfpatch).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let table: Vec<String> = help
        .split("\nExit status")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let code = l.strip_prefix("  ")?.split("  ").next()?;
            code.parse::<u8>().ok().map(|c| c.to_string())
        })
        .collect();
    assert!(table.len() >= 8, "{help}");
    // The README's sentence: "**Exit statuses say what failed** (...): 0 done; 1 ...; 8 ...".
    let readme = read("README.md");
    let sentence = readme
        .split("**Exit statuses say what failed**")
        .nth(1)
        .and_then(|t| t.split("\n- ").next())
        .expect("the README's exit statuses");
    let said: Vec<String> = sentence
        .split(';')
        .filter_map(|part| {
            let part = part.split("):").last()?.trim();
            let code = part.split_whitespace().next()?;
            code.parse::<u8>().ok().map(|c| c.to_string())
        })
        .collect();
    assert_eq!(
        said, table,
        "the README's exit statuses are not elfpatch --help's"
    );
}

#[test]
fn the_matcher_takes_ellipses_for_text_and_for_lines() {
    assert!(line_matches("a … c", "a b b c"));
    assert!(line_matches("…/lib", "/nix/store/x/lib"));
    assert!(!line_matches("a … c", "a b d"));
    assert!(!line_matches("abc", "abcd"));
    let want: Vec<String> = ["x", "…", "z"].map(String::from).to_vec();
    assert!(lines_match(&want, &["x", "z"]));
    assert!(lines_match(&want, &["x", "y", "y", "z"]));
    assert!(!lines_match(&want, &["x", "y"]));
}
