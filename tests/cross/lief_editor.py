#!/usr/bin/env python3
"""A patchelf-style command line over LIEF's ELF builder, for the cross suite's comparison.

LIEF's own `lief-patchelf` is a Rust program over LIEF's C++ library; its build downloads LIEF's
prebuilt SDK, which this machine cannot reach. This script drives the same library through the
Python bindings from PyPI (`pip install lief`). Each option makes the library calls
lief-patchelf makes for it (as read in tools/lief-patchelf/src/main.rs at LIEF commit 7fce274: edit the
existing entry in place, or add one; turn DT_RPATH into DT_RUNPATH unless --force-rpath; the
symbol version made global), and the result is written by LIEF's builder in its default
configuration, as lief-patchelf writes it. So the cross suite measures LIEF's engine, as
lief-patchelf uses it, on the same cases as elfpatch and patchelf:

    tests/cross/run.sh --editor lief=tests/cross/lief_editor.py

(run by whichever python3 is first on PATH; when that one lacks lief, LIEF_PYTHON names one
that has it, and the script runs itself again with it). It is a test tool, not a product: each option does what the
library call does, and an option with no library equivalent exits 2, which the suite counts
as refused. The file is replaced only after LIEF wrote the whole result; on any error it is
left as it was.
"""

import os
import sys

try:
    import lief
except ImportError:
    other = os.environ.get("LIEF_PYTHON")
    # A venv's python is a link to the same interpreter: a marker, not the path, stops a loop.
    if other and not os.environ.get("LIEF_EDITOR_AGAIN"):
        os.environ["LIEF_EDITOR_AGAIN"] = "1"
        os.execv(other, [other, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit("lief_editor.py: the lief module is not installed (pip install lief, or LIEF_PYTHON)")

TAG = lief.ELF.DynamicEntry.TAG
# Options that take one value, and those that take none, as patchelf spells them.
WITH_VALUE = {"--set-rpath", "--add-rpath", "--add-needed", "--remove-needed", "--set-interpreter",
              "--set-soname", "--clear-symbol-version", "--rename-dynamic-symbols", "--output"}
FLAGS = {"--remove-rpath", "--shrink-rpath", "--set-execstack", "--clear-execstack", "--add-debug-tag",
         "--print-rpath", "--print-needed", "--print-soname", "--print-interpreter"}


def fail(msg, code=1):
    print("lief_editor.py: " + msg, file=sys.stderr)
    sys.exit(code)


def parse_args(argv):
    ops, files, output, force_rpath = [], [], None, False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--version":
            print("lief_editor.py (LIEF %s)" % lief.__version__)
            sys.exit(0)
        if a == "--replace-needed":
            if i + 2 >= len(argv):
                fail("--replace-needed needs two values", 2)
            ops.append((a, (argv[i + 1], argv[i + 2])))
            i += 3
            continue
        if a in WITH_VALUE:
            if i + 1 >= len(argv):
                fail(a + " needs a value", 2)
            if a == "--output":
                output = argv[i + 1]
            else:
                ops.append((a, argv[i + 1]))
            i += 2
            continue
        if a == "--force-rpath":
            force_rpath = True
        elif a in FLAGS:
            ops.append((a, None))
        elif a.startswith("-"):
            fail("unsupported option " + a, 2)
        else:
            files.append(a)
        i += 1
    if len(files) != 1:
        fail("exactly one file, please", 2)
    return ops, files[0], output, force_rpath


def path_text(entry):
    return entry.runpath if entry.tag == TAG.RUNPATH else entry.rpath


def path_entry(value, force_rpath):
    return lief.ELF.DynamicEntryRpath(value) if force_rpath else lief.ELF.DynamicEntryRunPath(value)


def run_path(binary):
    for tag in (TAG.RUNPATH, TAG.RPATH):
        e = binary.get(tag)
        if e is not None:
            return path_text(e)
    return ""


def set_run_path(binary, value, force_rpath):
    # The entry there is changed in place; only a file with neither gets a new one. Then the one
    # kind patchelf keeps: DT_RUNPATH, or DT_RPATH with --force-rpath.
    runpath, rpath = binary.get(TAG.RUNPATH), binary.get(TAG.RPATH)
    if runpath is not None:
        runpath.runpath = value
    elif rpath is not None:
        rpath.rpath = value
    elif value:
        binary.add(path_entry(value, force_rpath))
    keep_not = TAG.RUNPATH if force_rpath else TAG.RPATH
    other = binary.get(keep_not)
    if other is not None:
        text = path_text(other)
        binary.remove(keep_not)
        binary.add(path_entry(text, force_rpath))


def replace_needed(binary, old, new):
    lib = binary.get_library(old)
    if lib is None:
        return
    lib.name = new
    req = binary.find_version_requirement(old)
    if req is not None:
        req.name = new


def apply(binary, op, value, force_rpath):
    """Applies one option; returns True when it changed the binary."""
    if op == "--print-rpath":
        # Every entry, DT_RPATH marked, as lief-patchelf prints them.
        for e in binary.dynamic_entries:
            if e.tag == TAG.RUNPATH:
                print(e.runpath)
            elif e.tag == TAG.RPATH:
                print(e.rpath + " (legacy)")
    elif op == "--print-needed":
        for lib in binary.libraries:
            print(lib)
    elif op == "--print-soname":
        e = binary.get(TAG.SONAME)
        if e is None:
            fail("no DT_SONAME")
        print(e.name)
    elif op == "--print-interpreter":
        print(binary.interpreter if binary.has_interpreter else "")
    elif op == "--set-rpath":
        set_run_path(binary, value, force_rpath)
        return True
    elif op == "--add-rpath":
        old = run_path(binary)
        set_run_path(binary, old + ":" + value if old else value, force_rpath)
        return True
    elif op == "--shrink-rpath":
        # patchelf's rule: keep a directory when it holds a DT_NEEDED library not found earlier.
        needed, old = list(binary.libraries), run_path(binary)
        found, kept = set(), []
        for d in old.split(":"):
            hits = [n for n in needed if n not in found and os.path.exists(os.path.join(d, n))]
            if hits:
                found.update(hits)
                kept.append(d)
        new = ":".join(kept)
        if new == old:
            return False
        set_run_path(binary, new, force_rpath)
        return True
    elif op == "--remove-rpath":
        binary.remove(TAG.RPATH)
        binary.remove(TAG.RUNPATH)
        return True
    elif op == "--add-needed":
        binary.add_library(value)
        return True
    elif op == "--remove-needed":
        binary.remove_library(value)
        binary.remove_version_requirement(value)
        return True
    elif op == "--replace-needed":
        replace_needed(binary, *value)
        return True
    elif op == "--set-interpreter":
        if not binary.has_interpreter:
            fail("no interpreter to set")
        binary.interpreter = value
        return True
    elif op == "--set-soname":
        e = binary.get(TAG.SONAME)
        if e is not None:
            e.name = value
        else:
            binary.add(lief.ELF.DynamicSharedObject(value))
        return True
    elif op in ("--set-execstack", "--clear-execstack"):
        s = binary.get(lief.ELF.Segment.TYPE.GNU_STACK)
        x = lief.ELF.Segment.FLAGS.X
        if s is None:
            if op == "--clear-execstack":
                return False
            s = lief.ELF.Segment()
            s.type = lief.ELF.Segment.TYPE.GNU_STACK
            s.flags = lief.ELF.Segment.FLAGS.R | lief.ELF.Segment.FLAGS.W | x
            s.alignment = 1
            binary.add(s)
            return True
        before = int(s.flags)
        s.flags = (s.flags | x) if op == "--set-execstack" else lief.ELF.Segment.FLAGS(before & ~int(x))
        return int(s.flags) != before
    elif op == "--add-debug-tag":
        if binary.get(TAG.DEBUG_TAG) is None:
            binary.add(lief.ELF.DynamicEntry(TAG.DEBUG_TAG, 0))
        return True
    elif op == "--clear-symbol-version":
        sym = binary.get_dynamic_symbol(value)
        if sym is not None and sym.has_version:
            sym.symbol_version.as_global()
            return True
        return False
    elif op == "--rename-dynamic-symbols":
        with open(value) as fh:
            renames = dict(line.split(" ", 1) for line in fh.read().splitlines() if line)
        changed = False
        for old, new in renames.items():
            sym = binary.get_dynamic_symbol(old)
            if sym is not None:
                sym.name = new
                changed = True
        return changed
    else:
        fail("unsupported option " + op, 2)
    return False


def main(argv):
    ops, path, output, force_rpath = parse_args(argv)
    lief.logging.disable()
    binary = lief.ELF.parse(path)
    if binary is None:
        fail("%s: LIEF cannot parse it" % path)
    changed = False
    for op, value in ops:
        changed |= apply(binary, op, value, force_rpath)
    target = output or path
    if not changed:
        if output and output != path:
            with open(path, "rb") as src, open(output, "wb") as dst:
                dst.write(src.read())
        return 0
    tmp = target + ".lief-editor.tmp"
    try:
        binary.write(tmp)
        if not os.path.exists(tmp):
            fail("%s: LIEF wrote nothing" % path)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
