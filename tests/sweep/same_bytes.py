#!/usr/bin/env python3
"""Two builds of elfpatch, the same results: exit status, stdout, stderr and the bytes of the file.

    python3 tests/sweep/same_bytes.py --old OLD_ELFPATCH [--new NEW_ELFPATCH] [--limit N] [-j J]

For a restructuring that must not change behaviour: every sampled ELF file of the machine (see
common.py) gets every kind of edit, and every print option, through both binaries, each on its own
fresh copy. Messages are compared with the copy's path replaced by FILE. Any difference is
printed; the exit status is 1 if there was one. `--new` defaults to target/release/elfpatch.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from common import elfmini  # noqa: E402

LONG = "/nonexistent/same-bytes/" + "/".join("component-%02d-%s" % (i, "x" * 20) for i in range(10))
PRINTS = ["--print-rpath", "--print-needed", "--print-soname", "--print-interpreter",
          "--print-os-abi", "--print-execstack"]


def commands(elf):
    """The edits to try on this file: every kind the CLI has, growing and shrinking."""
    needed = elf.needed() if elf is not None else []
    cmds = [
        ["--set-rpath", LONG],
        ["--set-rpath", "/x"],
        ["--force-rpath", "--set-rpath", LONG],
        ["--remove-rpath"],
        ["--shrink-rpath"],
        ["--add-rpath", LONG],
        ["--add-needed", "libsame-bytes-added.so.1"],
        ["--set-soname", "libsame-bytes-" + "s" * 100 + ".so"],
        ["--set-interpreter", LONG + "/ld.so"],
        ["--set-interpreter", "/l"],
        ["--add-debug-tag"],
        ["--no-default-lib"],
        ["--set-execstack"],
        ["--clear-execstack"],
        ["--set-os-abi", "freebsd"],
        ["--clear-symbol-version", "malloc"],
        ["--set-rpath", LONG, "--add-needed", "libx.so", "--set-interpreter", "/lib/ld-x.so"],
    ]
    if needed:
        cmds.append(["--replace-needed", needed[0], "libsame-bytes-" + "r" * 80 + ".so"])
        cmds.append(["--remove-needed", needed[-1]])
    return cmds


def run(binary, args, target):
    p = subprocess.run([binary] + args + [target], capture_output=True, timeout=300)
    digest = None
    if os.path.exists(target):
        with open(target, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    def norm(b):
        return b.decode("utf-8", "replace").replace(target, "FILE")

    return (p.returncode, norm(p.stdout), norm(p.stderr), digest)


def compare(task):
    path, idx, work, old, new = task
    d = os.path.join(work, "f%06d" % idx)
    os.makedirs(os.path.join(d, "input"))
    orig = os.path.join(d, "input", os.path.basename(path))
    diffs, cases = [], 0
    try:
        shutil.copy2(path, orig)
        try:
            elf = elfmini.read(orig)
        except elfmini.ElfError:
            elf = None
        for args in [[p] for p in PRINTS] + commands(elf):
            results = []
            for tag, binary in (("old", old), ("new", new)):
                t = os.path.join(d, tag)
                os.makedirs(t, exist_ok=True)
                target = os.path.join(t, os.path.basename(path))
                shutil.copy2(orig, target)
                results.append(run(binary, args, target))
            cases += 1
            old_r, new_r = results
            if old_r != new_r:
                fields = ["exit status", "stdout", "stderr", "bytes"]
                what = [f for f, a, b in zip(fields, old_r, new_r) if a != b]
                diffs.append("%s %s: %s differ (old %r, new %r)" % (
                    path, " ".join(args), ", ".join(what), old_r[:3], new_r[:3]))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return cases, diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the elfpatch binary before the change")
    ap.add_argument("--new", default=os.path.join(HERE, "..", "..", "target", "release", "elfpatch"))
    ap.add_argument("--roots", nargs="+", default=common.DEFAULT_ROOTS)
    ap.add_argument("--limit", type=int, default=150, help="sample at most N files (sorted, evenly spaced)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    files = common.sample(common.find_elf_files(a.roots), a.limit)
    work = tempfile.mkdtemp(prefix="same-bytes-")
    total, diffs = 0, []
    try:
        with cf.ThreadPoolExecutor(a.jobs) as ex:
            tasks = [(f, i, work, os.path.abspath(a.old), os.path.abspath(a.new)) for i, f in enumerate(files)]
            for cases, d in ex.map(compare, tasks):
                total += cases
                diffs += d
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for d in diffs[:100]:
        print(d)
    print("same_bytes: %d files, %d cases, %d identical, %d differ" % (
        len(files), total, total - len(diffs), len(diffs)))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
