"""Run by tests/maturin/run.sh in a fresh venv holding a repaired xmlwheel, in a fresh process.

    python -I check_import.py

Imports xmlwheel, parses a document through libxml2, and checks by /proc/self/maps that the
libraries maturin grafted (libxml2 and what it needs that no manylinux policy allows: liblzma,
ICU) are mapped once each, from the wheel's xmlwheel.libs directory in site-packages, and never
from the system's directories. Prints `ok ...` or `FAIL ...` per check; exits 1 if any failed.
"""

import os
import sys

# Run with -I: the shared helpers are found by this file's path.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from client_check import check, failures, mapped_files  # noqa: E402

# The libraries the wheel must carry: libxml2 and its dependencies outside every manylinux policy.
GRAFTED = ("libxml2", "liblzma", "libicuuc", "libicudata")


def main():
    try:
        import xmlwheel
    except ImportError as err:
        check(False, f"import xmlwheel: {err}")
        return 1
    check(True, f"import xmlwheel ({xmlwheel.__file__})")
    got = xmlwheel.root_name("<library><grafted/></library>")
    check(got == "library", f"root_name through libxml2 = {got!r} (want 'library')")
    # maturin installs a package (xmlwheel/__init__.py beside the extension) or a bare module;
    # the grafted libraries go next to it in site-packages.
    here = os.path.realpath(os.path.dirname(xmlwheel.__file__))
    site = os.path.dirname(here) if os.path.basename(xmlwheel.__file__) == "__init__.py" else here
    libs = os.path.join(site, "xmlwheel.libs")
    check(os.path.isdir(libs), f"the wheel installed {libs}")
    mapped = mapped_files()
    for stem in GRAFTED:
        copies = sorted(p for p in mapped if os.path.basename(p).startswith((stem + "-", stem + ".")))
        check(len(copies) == 1, f"{stem}: one copy mapped ({copies})")
        for path in copies:
            check(os.path.dirname(path) == libs, f"{stem}: {path} is the grafted copy in {libs}")
    return 1 if failures() else 0


if __name__ == "__main__":
    sys.exit(main())
