"""What the import checks of the client suites share (tests/auditwheel/check_import.py,
tests/maturin/check_import.py): one line per check, and the files the loader mapped."""

import os

_failures = 0


def check(ok, what):
    """Prints one check's verdict (`ok ...` or `FAIL ...`) and counts the failures."""
    global _failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        _failures += 1


def failures():
    """How many checks failed so far."""
    return _failures


def mapped_files():
    """The paths of the files mapped into this process, from /proc/self/maps, symlinks resolved."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/"):
                paths.add(os.path.realpath(fields[5].strip()))
    return paths
