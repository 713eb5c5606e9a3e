//! The manual page and the shell completions, written from the parser's own definitions
//! ([`crate::cli`]): what packages install (nix/package.nix), never hand-written copies that
//! drift. One page, `stubstrip.1`, holds every subcommand, as elfpatch's one page holds all of
//! elfpatch; both are printed on stdout by `--generate-man`.

use std::fmt::Write as _;

use clap::builder::PossibleValue;
use clap::{Arg, ArgAction, Command};

use crate::cli::{self, CompletionShell, STREAMS};
use crate::exit::Exit;

/// The name the page and the scripts are written for (the installed binary's).
const NAME: &str = "stubstrip";

/// One piece of a synopsis: a literal word (bold in roff), a placeholder (italic), or
/// punctuation (`[`, `]`, `...`, a space).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Lit(String),
    Var(String),
    Punct(&'static str),
}

fn shown(a: &Arg) -> bool {
    !a.is_hide_set()
        && !matches!(
            a.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
}

fn repeats(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Append | ArgAction::Count)
        || a.get_num_args().is_some_and(|n| n.max_values() > 1)
}

fn value_names(a: &Arg) -> Vec<String> {
    let takes = a.get_action().takes_values() && a.get_num_args().is_none_or(|n| n.takes_values());
    if !takes {
        return Vec::new();
    }
    match a.get_value_names() {
        Some(v) => v.iter().map(ToString::to_string).collect(),
        None => vec![a.get_id().as_str().to_uppercase()],
    }
}

/// The synopsis of one argument: `[--exclude GLOB]...`, `[-v]`, `PATH...`, `[LIBNAME...]`;
/// `alone` on a line of its own (an exclusive option, which is then what the line requires).
fn arg_synopsis(a: &Arg, alone: bool) -> Vec<Tok> {
    let mut t = Vec::new();
    let optional = !a.is_required_set() && !alone;
    if optional {
        t.push(Tok::Punct("["));
    }
    if a.is_positional() {
        t.extend(value_names(a).into_iter().map(Tok::Var));
        if repeats(a) {
            t.push(Tok::Punct("..."));
        }
        if optional {
            t.push(Tok::Punct("]"));
        }
        return t;
    }
    let flag = match (a.get_short(), a.get_long()) {
        (Some(s), _) => format!("-{s}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) => String::new(),
    };
    t.push(Tok::Lit(flag));
    for v in value_names(a) {
        t.push(Tok::Punct(" "));
        t.push(Tok::Var(v));
    }
    if optional {
        t.push(Tok::Punct("]"));
    }
    if repeats(a) {
        t.push(Tok::Punct("..."));
    }
    t
}

/// The subcommands a reader is told about (not clap's `help`).
fn subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// Every synopsis line of the program: one per subcommand (its exclusive options on lines of
/// their own, as `stubstrip audit --codes`), then the top level's exclusive options. Each line
/// is the command's words and its arguments' pieces.
fn synopses(cmd: &Command) -> Vec<(String, Vec<Vec<Tok>>)> {
    let mut out = Vec::new();
    for sub in subcommands(cmd) {
        let name = format!("{NAME} {}", sub.get_name());
        let args: Vec<&Arg> = sub.get_arguments().filter(|a| shown(a)).collect();
        // Options first, in their order, then the positional arguments, as people write them.
        let line: Vec<Vec<Tok>> = args
            .iter()
            .filter(|a| !a.is_exclusive_set() && !a.is_positional())
            .chain(args.iter().filter(|a| a.is_positional()))
            .map(|a| arg_synopsis(a, false))
            .collect();
        out.push((name.clone(), line));
        for a in args.iter().filter(|a| a.is_exclusive_set()) {
            out.push((name.clone(), vec![arg_synopsis(a, true)]));
        }
    }
    for a in cmd
        .get_arguments()
        .filter(|a| shown(a) && a.is_exclusive_set())
    {
        out.push((NAME.to_string(), vec![arg_synopsis(a, true)]));
    }
    out
}

#[cfg(test)]
fn plain(toks: &[Tok]) -> String {
    toks.iter()
        .map(|t| match t {
            Tok::Lit(s) | Tok::Var(s) => s.as_str(),
            Tok::Punct(p) => p,
        })
        .collect()
}

/// The synopsis lines as plain text, e.g. `stubstrip check [--exclude GLOB]... [-v] PATH...`
/// (what the README's usage block shows).
#[cfg(test)]
pub fn synopsis_text(cmd: &Command) -> Vec<String> {
    synopses(cmd)
        .into_iter()
        .map(|(name, args)| {
            std::iter::once(name)
                .chain(args.iter().map(|a| plain(a)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
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

/// One argument's synopsis as roff: kept on one line (`\\ `, an unbreakable space, between an
/// option and its value) and never hyphenated (`\\%`).
fn roff_toks(toks: &[Tok]) -> String {
    let mut out = String::from("\\%");
    for t in toks {
        match t {
            Tok::Lit(s) => out.push_str(&format!("\\fB{}\\fR", roff(s))),
            Tok::Var(s) => out.push_str(&format!("\\fI{}\\fR", roff(s))),
            Tok::Punct(" ") => out.push_str("\\ "),
            // `\&` after the dots: roff would take them for a sentence's end and put two
            // spaces after them.
            Tok::Punct("...") => out.push_str("...\\&"),
            Tok::Punct(p) => out.push_str(p),
        }
    }
    out
}

/// A help text as roff: its lines as lines (`.br` between), paragraphs (blank lines) as `.PP`.
fn roff_text(text: &str) -> String {
    let mut out = String::new();
    for (i, para) in text.trim().split("\n\n").enumerate() {
        if i > 0 {
            out.push_str(".PP\n");
        }
        for (j, line) in para.lines().map(str::trim).enumerate() {
            if j > 0 {
                out.push_str(".br\n");
            }
            out.push_str(&roff(line));
            out.push('\n');
        }
    }
    out
}

fn value_list(values: &[PossibleValue]) -> String {
    let values: Vec<&PossibleValue> = values.iter().filter(|v| !v.is_hide_set()).collect();
    let helped = values.iter().any(|v| v.get_help().is_some());
    values
        .iter()
        .map(|v| match v.get_help() {
            Some(h) => format!("{} ({})", v.get_name(), h.to_string().trim_end_matches('.')),
            None => v.get_name().to_string(),
        })
        .collect::<Vec<_>>()
        .join(if helped { "; " } else { ", " })
}

/// `text` as a sentence: with a full stop unless it ends in one (`PATH...`).
fn sentence(text: &str) -> String {
    if text.ends_with('.') {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

/// One option or argument as a `.TP` item: its names and value, then its help, its values and
/// its default.
fn roff_arg(a: &Arg) -> String {
    let mut head = Vec::new();
    if let Some(s) = a.get_short() {
        head.push(format!("\\fB\\-{s}\\fR"));
    }
    if let Some(l) = a.get_long() {
        head.push(format!("\\fB{}\\fR", roff(&format!("--{l}"))));
    }
    let mut head = head.join(", ");
    let values = value_names(a);
    for v in &values {
        if !head.is_empty() {
            head.push(' ');
        }
        let _ = write!(head, "\\fI{}\\fR", roff(v));
    }
    if a.is_positional() && repeats(a) {
        head.push_str("...");
    }
    let mut help = sentence(
        &a.get_long_help()
            .or(a.get_help())
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    if !values.is_empty() {
        let possible = a.get_possible_values();
        if !possible.is_empty() {
            let _ = write!(help, " Values: {}.", value_list(&possible));
        }
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() {
            let _ = write!(help, " Default: {}.", defaults.join(", "));
        }
    }
    format!(".TP\n{head}\n{}", roff_text(&help))
}

/// `text` with its first letter in lower case (for the NAME line: `stubstrip \- replace ...`).
fn lower_first(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

/// The man page, in roff (`man -l`): every subcommand with its options, the exit statuses.
pub fn man(cmd: &Command) -> String {
    let mut s = format!(
        ".TH STUBSTRIP 1 \"\" \"{NAME} {}\" \"User Commands\"\n.SH NAME\n{NAME} \\- {}\n",
        env!("CARGO_PKG_VERSION"),
        roff(&lower_first(
            &cmd.get_about().map(ToString::to_string).unwrap_or_default()
        ))
    );
    // .SY/.YS (groff's man extensions, which man-db loads): the command in bold, its
    // arguments filled with a hanging indent.
    s.push_str(".SH SYNOPSIS\n");
    for (name, args) in synopses(cmd) {
        let _ = writeln!(s, ".SY \"{}\"", roff(&name));
        for a in &args {
            let _ = writeln!(s, "{}", roff_toks(a));
        }
        s.push_str(".YS\n");
    }
    let _ = write!(
        s,
        ".SH DESCRIPTION\n{}.PP\n{}",
        roff_text(
            &cmd.get_about()
                .map(|a| sentence(&a.to_string()))
                .unwrap_or_default()
        ),
        roff_text(STREAMS)
    );
    s.push_str(".SH OPTIONS\n");
    for a in cmd.get_arguments().filter(|a| shown(a)) {
        s.push_str(&roff_arg(a));
    }
    s.push_str(
        ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nPrint help (of a subcommand: after it).\n\
         .TP\n\\fB\\-V\\fR, \\fB\\-\\-version\\fR\nPrint the version.\n",
    );
    s.push_str(".SH COMMANDS\n");
    for sub in subcommands(cmd) {
        let _ = writeln!(s, ".SS \"{}\"", roff(&format!("{NAME} {}", sub.get_name())));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            s.push_str(&roff_text(&sentence(&about.to_string())));
        }
        for a in sub.get_arguments().filter(|a| shown(a)) {
            s.push_str(&roff_arg(a));
        }
        if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
            s.push_str(".PP\n");
            s.push_str(&roff_text(&after.to_string()));
        }
    }
    s.push_str(".SH \"EXIT STATUS\"\n");
    for e in Exit::ALL {
        let _ = write!(s, ".TP\n.B {}\n{}", e.code(), roff_text(&e.meaning()));
    }
    s.push_str(".SH \"SEE ALSO\"\n.BR elfpatch (1),\n.BR ld.so (8)\n");
    s
}

/// The parser as the page and the scripts describe it (the installed name, built so that
/// clap's own arguments are there).
pub fn documented_command() -> Command {
    let mut cmd = cli::command(NAME);
    cmd.build();
    cmd
}

/// The completion script for `shell`.
pub fn completion(shell: CompletionShell) -> Vec<u8> {
    let mut cmd = cli::command(NAME);
    let mut out = Vec::new();
    clap_complete::generate(shell.shell(), &mut cmd, NAME, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synopses_name_every_options_value_and_the_exclusive_ones_stand_alone() {
        let lines = synopsis_text(&documented_command());
        let find = |start: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no {start}: {lines:#?}"))
                .clone()
        };
        let check = find("stubstrip check ");
        assert_eq!(
            check,
            "stubstrip check [--exclude GLOB]... [--stub-pattern GLOB]... [--json] [--jobs N] \
             [-v] PATH..."
        );
        let explain = find("stubstrip explain ");
        for want in [
            "[--stub-pattern GLOB]...",
            "[--glibc GLIBC]",
            "[--no-dlopen]",
            "[--why]",
            "FILE [LIBNAME...]",
        ] {
            assert!(explain.contains(want), "{want}: {explain}");
        }
        let audit = find("stubstrip audit [");
        for want in [
            "[--stub-pattern GLOB]...",
            "[--glibc GLIBC]",
            "[--no-dlopen]",
        ] {
            assert!(audit.contains(want), "{want}: {audit}");
        }
        assert!(!audit.contains("--codes"), "{audit}");
        assert!(lines.contains(&"stubstrip audit --codes".to_string()));
        assert!(lines.contains(&"stubstrip --generate-man".to_string()));
        assert!(lines.contains(&"stubstrip --generate-completion SHELL".to_string()));
        // Hidden options stay hidden.
        assert!(!find("stubstrip fixup ").contains("--json"));
    }

    #[test]
    fn the_page_names_every_subcommand_option_and_exit_status() {
        let cmd = documented_command();
        let page = man(&cmd);
        for sub in subcommands(&cmd) {
            assert!(page.contains(&format!(".SS \"stubstrip {}\"", roff(sub.get_name()))));
            for a in sub.get_arguments().filter(|a| shown(a)) {
                if let Some(l) = a.get_long() {
                    assert!(page.contains(&roff(&format!("--{l}"))), "--{l}");
                }
            }
        }
        assert!(page.contains(".SH \"EXIT STATUS\"\n.TP\n.B 0\n"));
        for e in Exit::ALL {
            let code = e.code();
            assert!(page.contains(&format!(".B {code}\n")), "{code}");
        }
        assert!(
            page.contains("\\fB\\-\\-exclude\\fR \\fIGLOB\\fR"),
            "{page}"
        );
        assert!(
            page.contains("Values: info (Every finding); warning"),
            "{page}"
        );
        // No line a roff reader would take for a request it does not know.
        for line in page.lines() {
            assert!(!line.starts_with('\'') && !line.starts_with(". "), "{line}");
        }
    }

    #[test]
    fn every_completion_names_the_subcommands_and_the_packagers_options() {
        for shell in [
            CompletionShell::Bash,
            CompletionShell::Zsh,
            CompletionShell::Fish,
        ] {
            let s = String::from_utf8(completion(shell)).unwrap();
            for word in [
                "fixup",
                "explain",
                "generate-man",
                "generate-completion",
                "stub-pattern",
            ] {
                assert!(s.contains(word), "{shell:?} lacks {word}");
            }
        }
    }
}
