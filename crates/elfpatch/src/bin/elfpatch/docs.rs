//! `--help`, the man page and the shell completions, all written from [`OPTIONS`] (their exit
//! statuses from [`Exit`]).

use std::fmt::Write as _;

use crate::exit::Exit;
use crate::options::{Complete, Opt, Shell, OPTIONS, PATCHELF_VERSION};

const SUMMARY: &str = "Reads and edits the dynamic section of ELF files, patchelf-compatible.";

/// What a run does, in the order it does it (patchelf's, whatever the command line's order).
const ORDER: &str =
    "Every option applies to every FILE, in patchelf's order of operations whatever \
the order on the command line: print the interpreter, print and set the OS ABI, print and set the \
soname, set the interpreter, print the run path, print or edit the stack flag, edit the run path, \
print the needed libraries, then remove, replace and add needed libraries. Of --shrink-rpath, \
--remove-rpath, --set-rpath and --add-rpath one may be given, and of --print-execstack, \
--clear-execstack and --set-execstack one (patchelf would do the first and ignore the others). \
An argument `@FILE` to an option marked [@] stands for FILE's whole contents, as in patchelf. \
Every file is processed even after one fails, each failure one line on stderr.";

/// What a file must be for a request, the one rule for prints and edits.
const FILES: &str = "A request applies to an executable or a shared library. On any other ELF \
file (a relocatable object, a core) every option fails, as patchelf's do (\"wrong ELF type\"). \
A file without a dynamic section (a static program; a separate debug-info file, whose sections \
have no contents) fails every request of the dynamic section, printing included, and one \
without PT_INTERP every request of the interpreter; --print-os-abi and --print-execstack read \
only the headers, and --print-soname on a file that is not a library prints nothing, as in \
patchelf. On a separate debug-info file --print-rpath prints nothing and the run path edits \
leave it as it is, and succeed, as patchelf's do (nixpkgs' hooks take --print-rpath's success for \
a dynamic file, then edit its run path). A file whose section header table does not fit in it (cut short) \
is refused for every option, a print included, and left byte-identical (patchelf: \"section \
header table out of bounds\"); other damage to the section headers is worked around and said \
on stderr, and facts no loader cares about (section alignment) only with --debug. Messages are `PROG: FILE: what`, PROG the name elfpatch was run as.";

/// The command's forms, each naming its arguments.
const SYNOPSES: &[&str] = &[
    "[OPTIONS] FILE...",
    "--generate-man",
    "--generate-completion SHELL",
    "--help | -h",
    "--version | -V",
];

fn synopsis(o: &Opt) -> String {
    let mut s = o.name.to_string();
    for a in o.args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// The option's help with its other names (where its heading does not show them already) and
/// the `@FILE` mark.
fn help_line(o: &Opt) -> String {
    help_text(o, true)
}

fn help_text(o: &Opt, with_aliases: bool) -> String {
    let mut h = o.help.to_string();
    if with_aliases && !o.aliases.is_empty() {
        let _ = write!(h, " (also {})", o.aliases.join(", "));
    }
    if o.at_file {
        h.push_str(" [@]");
    }
    h
}

/// `text` broken into lines of at most `width` columns (longer words stay whole), each after
/// `indent` spaces but the first, which goes after `first`.
fn wrap(first: &str, indent: usize, text: &str, width: usize) -> String {
    let mut out = first.to_string();
    let mut col = first.rsplit('\n').next().unwrap_or("").len();
    // Nothing of `text` on the current line yet.
    let mut fresh = true;
    for word in text.split_whitespace() {
        if !fresh && col + 1 + word.len() > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        } else if !fresh {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += word.len();
        fresh = false;
    }
    out.push('\n');
    out
}

/// Which program answers: what `--debug` says on stderr, and `--help` and the man page say,
/// whatever name it was run as.
pub fn identity() -> String {
    format!(
        "elfpatch {}, with patchelf {PATCHELF_VERSION}'s command line",
        env!("CARGO_PKG_VERSION")
    )
}

/// The `--help` text, for the program run as `prog`.
pub fn help(prog: &str) -> String {
    let mut s = String::new();
    for (i, form) in SYNOPSES.iter().enumerate() {
        let lead = if i == 0 { "usage:" } else { "      " };
        let _ = writeln!(s, "{lead} {prog} {form}");
    }
    s.push('\n');
    s.push_str(&wrap("", 0, SUMMARY, 100));
    let _ = writeln!(s, "This is {}.", identity());
    s.push('\n');
    for o in OPTIONS {
        let syn = synopsis(o);
        let first = if syn.len() <= 30 {
            format!("  {syn:<31}")
        } else {
            format!("  {syn}\n{:33}", "")
        };
        s.push_str(&wrap(&first, 33, &help_line(o), 100));
    }
    s.push('\n');
    s.push_str(&wrap("", 0, ORDER, 100));
    s.push('\n');
    s.push_str(&wrap("", 0, FILES, 100));
    s.push_str("\nExit status:\n");
    for e in Exit::ALL {
        s.push_str(&wrap(&format!("  {}  ", e.code()), 5, e.meaning(), 100));
    }
    s
}

/// The `--version` line. Run under patchelf's name, exactly patchelf 0.19.3's (`patchelf
/// 0.19.3`): its clients parse it, some as a bare semantic version (maturin), so nothing may
/// follow; `--help` and `--debug` say which program answered. Else elfpatch's own.
pub fn version(program: &str) -> String {
    if program == "patchelf" {
        format!("patchelf {PATCHELF_VERSION}")
    } else {
        format!(
            "elfpatch {} (compatible with patchelf {PATCHELF_VERSION})",
            env!("CARGO_PKG_VERSION")
        )
    }
}

/// Text for roff: backslashes and dashes escaped, and no line starting with a control character.
fn roff(text: &str) -> String {
    let s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The man page, in roff (`man -l`).
pub fn man() -> String {
    let mut s = format!(
        ".TH ELFPATCH 1 \"\" \"elfpatch {}\" \"User Commands\"\n.SH NAME\nelfpatch \\- {}\n",
        env!("CARGO_PKG_VERSION"),
        roff("read and edit the dynamic section of ELF files (patchelf-compatible)")
    );
    s.push_str(".SH SYNOPSIS\n");
    for form in SYNOPSES {
        let words: Vec<String> = form
            .split(' ')
            .map(|w| match w {
                "|" => "|".to_string(),
                w if w.starts_with('-') => format!("\\fB{}\\fR", roff(w)),
                w if w.starts_with('[') => {
                    format!("[\\fI{}\\fR]", roff(w.trim_matches(['[', ']'])))
                }
                w => format!("\\fI{}\\fR", roff(w)),
            })
            .collect();
        let _ = writeln!(s, ".B elfpatch\n{}\n.br", words.join(" "));
    }
    let _ = writeln!(
        s,
        ".SH DESCRIPTION\n{}\n.PP\n{}\n.PP\n{}",
        roff(SUMMARY),
        roff(ORDER),
        roff(FILES)
    );
    let _ = writeln!(
        s,
        ".PP\n{}",
        roff(&format!(
            "Run under the name patchelf, --version prints exactly what patchelf \
             {PATCHELF_VERSION} prints (patchelf {PATCHELF_VERSION}), the release whose command \
             line elfpatch follows: clients such as auditwheel and maturin parse it. --help and \
             --debug say that elfpatch answered."
        ))
    );
    s.push_str(".SH OPTIONS\n");
    for o in OPTIONS {
        let mut head = format!("\\fB{}\\fR", roff(o.name));
        for a in o.args {
            let _ = write!(head, " \\fI{}\\fR", roff(a));
        }
        for a in o.aliases {
            let _ = write!(head, ", \\fB{}\\fR", roff(a));
        }
        let _ = writeln!(s, ".TP\n{head}\n{}", roff(&help_text(o, false)));
    }
    s.push_str(".SH \"EXIT STATUS\"\n");
    for e in Exit::ALL {
        let _ = writeln!(s, ".TP\n.B {}\n{}", e.code(), roff(e.meaning()));
    }
    s.push_str(".SH \"SEE ALSO\"\n.BR patchelf (1),\n.BR readelf (1)\n");
    s
}

fn words(f: impl Fn(&Opt) -> bool) -> Vec<&'static str> {
    OPTIONS
        .iter()
        .filter(|o| f(o))
        .flat_map(|o| std::iter::once(o.name).chain(o.aliases.iter().copied()))
        .collect()
}

fn bash() -> String {
    let mut cases = String::new();
    for o in OPTIONS.iter().filter(|o| !o.args.is_empty()) {
        let names = std::iter::once(o.name)
            .chain(o.aliases.iter().copied())
            .collect::<Vec<_>>()
            .join("|");
        let action = match o.complete {
            Complete::File => "mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")".to_string(),
            Complete::Text => "COMPREPLY=()".to_string(),
            // COMP_WORDBREAKS holds ':': $cur is already the part after the last colon.
            Complete::DirList => "mapfile -t COMPREPLY < <(compgen -d -- \"$cur\")".to_string(),
            Complete::Words(w) => format!(
                "mapfile -t COMPREPLY < <(compgen -W '{}' -- \"$cur\")",
                w.join(" ")
            ),
        };
        let _ = writeln!(
            cases,
            "        {names})\n            {action}\n            return ;;"
        );
    }
    format!(
        "# bash completion for elfpatch (generated by elfpatch --generate-completion bash)\n\
_elfpatch() {{\n\
    local cur=\"${{COMP_WORDS[COMP_CWORD]}}\"\n\
    local prev=\"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
    case \"$prev\" in\n{cases}    esac\n\
    if [[ \"$cur\" == -* ]]; then\n\
        mapfile -t COMPREPLY < <(compgen -W '{}' -- \"$cur\")\n\
    else\n\
        mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n\
    fi\n\
}}\n\
complete -o filenames -F _elfpatch elfpatch patchelf\n",
        words(|_| true).join(" ")
    )
}

/// Text inside a zsh `_arguments` spec, itself inside single quotes.
fn zsh_quote(text: &str) -> String {
    text.replace('\'', "'\\''")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
}

fn zsh() -> String {
    let mut specs = String::new();
    for o in OPTIONS {
        let mut tail = String::new();
        for a in o.args {
            let action = match o.complete {
                Complete::File => "_files".to_string(),
                Complete::Text => " ".to_string(),
                Complete::DirList => "_dir_list".to_string(),
                Complete::Words(w) => format!("({})", w.join(" ")),
            };
            let _ = write!(tail, ":{}:{action}", a.to_lowercase());
        }
        let rep = if o.repeats { "*" } else { "" };
        for n in std::iter::once(o.name).chain(o.aliases.iter().copied()) {
            let _ = writeln!(specs, "  '{rep}{n}[{}]{tail}' \\", zsh_quote(&help_line(o)));
        }
    }
    format!(
        "#compdef elfpatch patchelf\n# zsh completion for elfpatch (generated by elfpatch --generate-completion zsh)\n\
_arguments -S \\\n{specs}  '*:ELF file:_files'\n"
    )
}

fn fish() -> String {
    let mut s = String::from(
        "# fish completion for elfpatch (generated by elfpatch --generate-completion fish)\n",
    );
    for o in OPTIONS {
        for n in std::iter::once(o.name).chain(o.aliases.iter().copied()) {
            let flag = match n.strip_prefix("--") {
                Some(long) => format!("-l {long}"),
                None => format!("-s {}", n.trim_start_matches('-')),
            };
            let arg = match (o.args.is_empty(), o.complete) {
                (true, _) => String::new(),
                (false, Complete::File) => " -r -F".into(),
                (false, Complete::Text) => " -x".into(),
                (false, Complete::DirList) => " -x -a '(__fish_complete_directories)'".into(),
                (false, Complete::Words(w)) => format!(" -x -a '{}'", w.join(" ")),
            };
            let _ = writeln!(
                s,
                "complete -c elfpatch {flag}{arg} -d '{}'",
                help_line(o).replace('\\', "\\\\").replace('\'', "\\'")
            );
        }
    }
    s.push_str("complete -c elfpatch -F\n");
    // Under the name people link (README: "Replacing patchelf"), the same completions.
    s.push_str("complete -c patchelf --wraps elfpatch\n");
    s
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> String {
    match shell {
        Shell::Bash => bash(),
        Shell::Zsh => zsh(),
        Shell::Fish => fish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_man_and_completions_name_every_option() {
        let (h, m) = (help("elfpatch"), man());
        let scripts = [Shell::Bash, Shell::Zsh, Shell::Fish].map(completion);
        for o in OPTIONS {
            for n in std::iter::once(o.name).chain(o.aliases.iter().copied()) {
                assert!(h.contains(n), "--help lacks {n}");
                assert!(m.contains(&roff(n)), "man page lacks {n}");
                let bare = n.trim_start_matches('-');
                for s in &scripts {
                    assert!(s.contains(bare), "a completion lacks {n}");
                }
            }
        }
    }

    #[test]
    fn the_version_under_patchelfs_name_is_patchelfs_and_the_help_says_who_answered() {
        assert_eq!(version("patchelf"), format!("patchelf {PATCHELF_VERSION}"));
        assert!(version("elfpatch").starts_with("elfpatch "));
        let h = help("patchelf");
        assert!(h.starts_with("usage: patchelf [OPTIONS] FILE...\n"), "{h}");
        assert!(h.contains(&identity()), "{h}");
        assert!(identity().starts_with("elfpatch "));
    }

    #[test]
    fn help_and_man_page_carry_the_exit_status_table() {
        let (h, m) = (help("elfpatch"), man());
        for e in Exit::ALL {
            let (code, what) = (e.code(), e.meaning());
            let first = what
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                h.contains(&format!("  {code}  {first}")),
                "--help lacks {code}"
            );
            assert!(
                m.contains(&format!(".B {code}\n{}", roff(&first))),
                "man lacks {code}"
            );
        }
        for form in SYNOPSES {
            assert!(
                h.contains(&format!("elfpatch {form}")),
                "--help lacks {form}"
            );
        }
        for line in h.lines() {
            assert!(
                line.chars().count() <= 100,
                "--help line over 100 columns: {line}"
            );
        }
    }
}
