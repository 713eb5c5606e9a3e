//! The man page and the shell completions that `elfpatch --generate-man` and
//! `--generate-completion SHELL` write: the page renders without warnings and documents every
//! option `--help` lists, and each shell loads its script and completes options and their words.

use crate::common;

use std::fs;
use std::process::{Command, Output};

use common::elfpatch;
use testkit::{have, run_ok, skip};

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

fn script(shell: &str, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let out = run(elfpatch().args(["--generate-completion", shell]));
    assert!(out.status.success(), "{out:?}");
    let p = dir.join(name);
    fs::write(&p, &out.stdout).unwrap();
    p
}

#[test]
fn the_man_page_renders_and_the_bash_completion_completes() {
    let man = run(elfpatch().arg("--generate-man"));
    assert!(man.status.success());
    let page = String::from_utf8(man.stdout).unwrap();
    let help = String::from_utf8(run(elfpatch().arg("--help")).stdout).unwrap();
    for opt in help.split_whitespace().filter(|w| w.starts_with("--")) {
        let opt = opt.trim_end_matches([',', ')', '.']);
        assert!(
            page.contains(&opt.replace('-', "\\-")),
            "man page lacks {opt}"
        );
    }
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("elfpatch.1");
    fs::write(&file, &page).unwrap();
    if have("groff") {
        let out = run(Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&file));
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        skip("no groff: the man page is not rendered");
    }
    let script = script("bash", d.path(), "elfpatch.bash");
    run_ok(Command::new("bash").arg("-n").arg(&script));
    // Loaded, it completes options and their words.
    let probe = format!(
        "source {}; COMP_WORDS=(elfpatch --generate-completion z); COMP_CWORD=2; _elfpatch; \
         echo \"${{COMPREPLY[@]}}\"; COMP_WORDS=(elfpatch --print-r); COMP_CWORD=1; _elfpatch; \
         echo \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = run_ok(Command::new("bash").args(["-c", &probe]));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "zsh\n--print-rpath\n");
}

#[test]
fn fish_loads_its_completion_and_completes() {
    if !have("fish") {
        skip("no fish: its completion is not tried");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let script = script("fish", d.path(), "elfpatch.fish");
    run_ok(Command::new("fish").arg("-n").arg(&script));
    let probe = format!(
        "source {}; complete -C 'elfpatch --print-r'; complete -C 'elfpatch --generate-completion z'",
        script.display()
    );
    let out = run_ok(Command::new("fish").args(["-c", &probe]));
    let words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect();
    assert_eq!(words, ["--print-rpath", "zsh"]);
}

#[test]
fn zsh_loads_its_completion_and_completes() {
    if !have("zsh") {
        skip("no zsh: its completion is not tried");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let comp = d.path().join("comp");
    let bin = d.path().join("bin");
    fs::create_dir_all(&comp).unwrap();
    fs::create_dir_all(&bin).unwrap();
    let script = script("zsh", &comp, "_elfpatch");
    run_ok(Command::new("zsh").arg("-n").arg(&script));
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_elfpatch"), bin.join("elfpatch")).unwrap();
    // An interactive zsh in a pseudo-terminal: type, press Tab, and a widget bound to ^T saves
    // the line the completion left.
    fs::write(
        d.path().join("rc"),
        "path=($PWD/bin $path)\nfpath=($PWD/comp $fpath)\nautoload -Uz compinit && compinit -u -D\n\
         bindkey -e\nsave() { print -r -- \"$BUFFER\" > line; BUFFER=; : > saved }\nzle -N save\n\
         bindkey '^T' save\n: > ready\n",
    )
    .unwrap();
    let driver = r#"
zmodload zsh/zpty || exit 3
zpty sh TERM=dumb zsh -f -i
zpty -w sh "source $PWD/rc"
await() { local n=0; until [[ -e $1 ]]; do zpty -r -t sh x; sleep 0.1; (( ++n < 300 )) || exit 4; done }
await ready
for input in 'elfpatch --print-r' 'elfpatch --generate-completion z' 'elfpatch --replace-need'; do
  rm -f saved line
  zpty -w -n sh "$input"$'\t\C-t'
  await saved
  print -r -- "$(<line)"
done
"#;
    let out = run_ok(
        Command::new("zsh")
            .args(["-f", "-c", driver])
            .current_dir(d.path()),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "elfpatch --print-rpath \nelfpatch --generate-completion zsh \nelfpatch --replace-needed \n"
    );
}
