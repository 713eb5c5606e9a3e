#!/usr/bin/env python3
"""Deliberately bad "editors" used by selftest.py to prove that the harness
catches each kind of failure.  Usage: fake_editor.py MODE [patchelf args] FILE

noop         exit 0, change nothing (every edit must come out BROKEN)
refuse       print a message, exit 1, change nothing (REFUSED)
silent       exit 1 without a message, change nothing (FAIL)
clobber      truncate the file, print a message, exit 1 (LOST)
naive-rpath  --set-rpath by overwriting the old string in place, ignoring
             strings that share its bytes; refuses to grow and every other
             option (tailshare inputs must come out BROKEN)
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import elfmini  # noqa: E402


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if args == ["--version"]:
        print("fake-editor %s" % mode)
        return 0
    path = args[-1]
    if mode == "noop":
        return 0
    if mode == "refuse":
        print("fake: refusing to edit %s" % path, file=sys.stderr)
        return 1
    if mode == "silent":
        return 1
    if mode == "clobber":
        with open(path, "r+b") as f:
            f.truncate(100)
        print("fake: something went wrong", file=sys.stderr)
        return 1
    if mode == "naive-rpath":
        if len(args) != 3 or args[0] != "--set-rpath":
            print("fake: only --set-rpath", file=sys.stderr)
            return 1
        new = args[1].encode()
        with open(path, "rb") as f:
            data = bytearray(f.read())
        elf = elfmini.Elf(bytes(data))
        stroff, _ = elf.strtab()
        for tag, val, _ in elf.dynamic_raw():
            if elfmini.tag_name(tag, elf.e_machine) in ("RUNPATH", "RPATH"):
                old = elf.cstr(stroff + val)
                if len(new) > len(old):
                    print("fake: cannot grow", file=sys.stderr)
                    return 1
                at = stroff + val
                data[at:at + len(old)] = new + b"\0" * (len(old) - len(new))
                with open(path, "wb") as f:
                    f.write(data)
                return 0
        print("fake: no RUNPATH", file=sys.stderr)
        return 1
    print("fake: unknown mode", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
