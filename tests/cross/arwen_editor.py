#!/usr/bin/env python3
"""A patchelf-style command line over arwen's ELF commands, for the suites that compare editors.

arwen (crates.io `arwen` 0.0.5, `cargo install arwen --version 0.0.5 --locked`) has a command
line of its own, one subcommand per edit (`arwen elf set-rpath NEW FILE`, `arwen elf
replace-needed FILE OLD=NEW`, ...). Each subcommand reads the whole file, edits it with
`object`'s ELF builder and writes the result over the original path (truncated, then written).
This script maps each patchelf option to that subcommand and runs them in the order given, on
the file itself, as a build script calling arwen would:

    tests/cross/run.sh --editor arwen=tests/cross/arwen_editor.py
    ARWEN=/path/to/arwen tests/cross/run.sh --editor arwen=tests/cross/arwen_editor.py

ARWEN names the arwen binary (default: target/arwen/bin/arwen, where
`cargo install arwen --version 0.0.5 --locked --root target/arwen` puts it). It is a test tool, not a product: an option arwen has
no subcommand for (--output, --add-rpath with --force-rpath, ...) exits 2 with the file untouched,
which the suites count as refused. `--force-rpath` runs arwen's `force-rpath` (DT_RUNPATH
becomes DT_RPATH) after the run path edit, as maturin's arwen branch does.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ARWEN = os.environ.get("ARWEN") or os.path.join(HERE, "..", "..", "target", "arwen", "bin", "arwen")

# patchelf option -> (arwen subcommand, how many values it takes, where the file goes).
# "last": `SUB VALUE FILE`; "first": `SUB FILE VALUE...`.
ONE_VALUE = {
    "--set-rpath": "set-rpath",
    "--add-rpath": "add-rpath",
    "--set-interpreter": "set-interpreter",
    "--set-soname": "set-soname",
    "--clear-symbol-version": "clear-symbol-version",
}
FILE_FIRST = {"--add-needed": "add-needed", "--remove-needed": "remove-needed"}
NO_VALUE = {
    "--remove-rpath": "remove-rpath",
    "--shrink-rpath": "shrink-rpath",
    "--set-execstack": "set-exec-stack",
    "--clear-execstack": "clear-exec-stack",
    "--add-debug-tag": "add-debug-tag",
    "--no-default-lib": "no-default-lib",
    "--print-rpath": "print-rpath",
    "--print-needed": "print-needed",
    "--print-soname": "print-soname",
    "--print-interpreter": "print-interpreter",
    "--print-execstack": "print-exec-stack",
}


def fail(msg, code=2):
    print("arwen_editor.py: " + msg, file=sys.stderr)
    sys.exit(code)


def commands(argv):
    """The arwen command lines for a patchelf command line (pure: no file is read)."""
    steps, files, force_rpath, i = [], [], False, 0
    while i < len(argv):
        a = argv[i]
        if a == "--replace-needed":
            if i + 2 >= len(argv):
                fail("--replace-needed needs two values")
            steps.append(("replace-needed", "first", [argv[i + 1] + "=" + argv[i + 2]]))
            i += 3
            continue
        if a == "--rename-dynamic-symbols":
            if i + 1 >= len(argv):
                fail(a + " needs a value")
            with open(argv[i + 1]) as f:
                pairs = [line.split() for line in f if line.strip()]
            steps.append(("rename-dynamic-symbols", "first", [p[0] + "=" + p[1] for p in pairs]))
            i += 2
            continue
        if a in ONE_VALUE or a in FILE_FIRST:
            if i + 1 >= len(argv):
                fail(a + " needs a value")
            if a in ONE_VALUE:
                steps.append((ONE_VALUE[a], "last", [argv[i + 1]]))
            else:
                steps.append((FILE_FIRST[a], "first", [argv[i + 1]]))
            i += 2
            continue
        if a == "--force-rpath":
            force_rpath = True
        elif a in NO_VALUE:
            steps.append((NO_VALUE[a], "last", []))
        elif a.startswith("-"):
            fail("no arwen equivalent for " + a)
        else:
            files.append(a)
        i += 1
    if len(files) != 1:
        fail("exactly one file, please")
    if force_rpath:
        if not any(s[0] in ("set-rpath", "add-rpath", "shrink-rpath") for s in steps):
            fail("--force-rpath without a run path edit")
        steps.append(("force-rpath", "last", []))
    out = []
    for sub, where, values in steps:
        args = values + [files[0]] if where == "last" else [files[0]] + values
        out.append([ARWEN, "elf", sub] + args)
    return out


def main():
    if sys.argv[1:] == ["--version"]:
        print("arwen_editor.py (arwen 0.0.5)")
        return 0
    for cmd in commands(sys.argv[1:]):
        r = subprocess.run(cmd)
        if r.returncode != 0:
            return r.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
