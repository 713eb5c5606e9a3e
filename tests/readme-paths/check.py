#!/usr/bin/env python3
"""Every repository path a README names exists (CI: the readme_paths suite of tests/run-all.sh).

    python3 tests/readme-paths/check.py [FILE.md ...]      (default: README.md)

A path is a word in `code` or the target of a relative Markdown link. It is taken as naming a
file of this repository when it starts with a top-level entry git tracks (`crates/...`,
`tests/...`, `.ci/run`) or, holding a `/`, ends like a source file (`src/driver.rs`): those must
exist, as git tracks them (a file, or a directory holding tracked files). Absolute paths
(`/run/opengl-driver/lib`), globs, variables and paths under `target/` are not the repository's
and are left alone. Paths in other READMEs are taken relative to that README's directory when
they exist there. Prints each missing path with its line; exits 1 if any.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SOURCE_ENDINGS = (".rs", ".py", ".sh", ".nix", ".md", ".toml", ".json", ".c", ".lock")
CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def tracked() -> tuple[set[str], set[str]]:
    """The files git tracks, and every directory holding one."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    files = {f for f in out.decode().split("\0") if f}
    dirs = set()
    for f in files:
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return files, dirs


def candidates(line: str):
    """Words of a Markdown line that may be repository paths."""
    for m in CODE.finditer(line):
        for word in m.group(1).split():
            yield word
    for m in LINK.finditer(line):
        if "://" not in m.group(1) and not m.group(1).startswith("mailto:"):
            yield m.group(1)


def repository_path(word: str, top: set[str]) -> str | None:
    """The path `word` names in the repository, or None when it does not name one."""
    w = word.strip(".,;:()[]'\"")
    # A dot-directory (`.cargo/config.toml`) keeps its leading dot; `./x` and `../x` do not.
    if word[:1] == "." and word[1:2] not in (".", "/", "") and "/" in word:
        w = "." + w
    if w.startswith("./"):
        w = w[2:]
    if not w or w.startswith(("/", "~", "-", "$")) or any(c in w for c in "*?{}<>$=…|"):
        return None
    if "://" in w or w.startswith("target/") or w == "target":
        return None
    first = w.split("/", 1)[0]
    if first in top or ("/" in w and w.rstrip("/").endswith(SOURCE_ENDINGS)):
        return w.rstrip("/")
    return None


def check(md: str, files: set[str], dirs: set[str]) -> list[str]:
    top = {p.split("/", 1)[0] for p in files}
    base = os.path.relpath(os.path.dirname(os.path.abspath(md)), ROOT)
    missing = []
    with open(md, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for word in candidates(line):
                p = repository_path(word, top)
                if p is None:
                    continue
                local = os.path.normpath(os.path.join(base, p)) if base != "." else p
                if any(q in files or q in dirs for q in (p, local)):
                    continue
                missing.append("%s:%d: %s does not exist in the repository" % (os.path.relpath(md, ROOT), n, p))
    return missing


def main() -> int:
    files, dirs = tracked()
    mds = sys.argv[1:] or [os.path.join(ROOT, "README.md")]
    missing = [m for md in mds for m in check(md, files, dirs)]
    for m in missing:
        print(m)
    print("readme paths: %d file%s, %d missing path%s" % (
        len(mds), "" if len(mds) == 1 else "s", len(missing), "" if len(missing) == 1 else "s"))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
