"""Run by tests/auditwheel/run.sh in a fresh venv holding a repaired chainwheel, in a fresh process.

    python check_import.py HIDDEN_PREFIX

Imports chainpkg.chainmod, calls through libouter into libinner, and checks that the copies of
the two libraries that the loader mapped are the ones auditwheel grafted into the wheel's .libs
directory (next to the package in site-packages), by /proc/self/maps and by the extension's own
dl_iterate_phdr, and that nothing was loaded from HIDDEN_PREFIX (where the libraries were built;
the caller has moved it away). Prints `ok ...` or `FAIL ...` per check; exits 1 if any failed.
"""

import os
import sys

# Run with -I: the shared helpers are found by this file's path.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from client_check import check, failures, mapped_files  # noqa: E402


def chain_libs(paths):
    """{libouter: [paths], libinner: [paths]} among PATHS, by file name."""
    found = {"libouter": [], "libinner": []}
    for path in paths:
        for stem in found:
            if os.path.basename(path).startswith(stem):
                found[stem].append(os.path.realpath(path))
    return found


def main():
    hidden = os.path.realpath(sys.argv[1])
    try:
        import chainpkg
        import chainpkg.chainmod as chainmod
    except ImportError as err:
        check(False, f"import chainpkg.chainmod: {err}")
        return 1
    check(True, "import chainpkg.chainmod")

    for x in (0, 5, -4, 1000):
        want = 2 * (3 * x + 1) + 7
        got = chainmod.outer_value(x)
        check(got == want, f"outer_value({x}) through libouter and libinner = {got} (want {want})")

    site = os.path.realpath(os.path.dirname(os.path.dirname(chainpkg.__file__)))
    by_maps = chain_libs(mapped_files())
    by_loader = chain_libs(chainmod.loaded_objects())
    for stem in ("libouter", "libinner"):
        maps = by_maps[stem]
        check(len(maps) == 1, f"{stem}: one copy mapped (/proc/self/maps: {maps})")
        for path in maps:
            libs_dir = os.path.dirname(path)
            check(
                os.path.dirname(libs_dir) == site and libs_dir.endswith(".libs"),
                f"{stem}: {path} is the grafted copy in {site}/*.libs",
            )
            check(not path.startswith(hidden + os.sep), f"{stem}: not loaded from the hidden prefix {hidden}")
        check(
            sorted(by_loader[stem]) == sorted(maps),
            f"{stem}: dl_iterate_phdr agrees with /proc/self/maps ({by_loader[stem]})",
        )
    return 1 if failures() else 0


if __name__ == "__main__":
    sys.exit(main())
