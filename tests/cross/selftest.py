#!/usr/bin/env python3
"""Prove that run.py can fail: run it against deliberately bad editors
(fake_editor.py) on a few inputs and check that every kind of failure is
caught and classified.  Takes about 10-20 seconds once inputs are cached."""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402

SUBSET = ["--arch", "x86_64", "--arch", "ppc64", "--variant", "default", "--variant", "tailshare"]


def fake(tmp, mode):
    path = os.path.join(tmp, "fake-" + mode)
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec python3 %s %s "$@"\n' % (os.path.join(HERE, "fake_editor.py"), mode))
    os.chmod(path, 0o755)
    return path


def main():
    checks = []

    def check(name, ok, detail=""):
        checks.append(ok)
        print("%s  %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else ": " + detail), flush=True)

    with tempfile.TemporaryDirectory(prefix="stubstrip-selftest-") as tmp:
        def harness(mode, name="elfpatch"):
            out = os.path.join(tmp, mode + ".json")
            with open(os.devnull, "w") as devnull:
                old = sys.stdout
                sys.stdout = devnull
                try:
                    rc = run.main(["--editor", "%s=%s" % (name, fake(tmp, mode)), "--json", out,
                                   "--no-install"] + SUBSET)
                finally:
                    sys.stdout = old
            with open(out) as f:
                return rc, json.load(f)["editors"][name]["cases"]

        rc, cases = harness("noop")
        statuses = {c["status"] for c in cases}
        check("noop editor: every case BROKEN", statuses == {"BROKEN"}, str(statuses))
        check("noop editor named elfpatch: exit code 1", rc == 1, str(rc))
        ran = [c for c in cases if c["op"] != "print"]
        # The symbol operations change no dynamic entry: their own check (readelf's symbol list,
        # where readelf can list them) and the program's output catch them.
        symbol_ops = ("clear-symbol-version", "rename-dynamic-symbols")
        check("noop editor: edits caught by semantic+readelf checks",
              all({"semantic", "readelf"} <= set(c["broken_by"]) for c in ran if c["op"] not in symbol_ops))
        check("noop editor: symbol edits caught by the symbol check",
              all("symbols" in c["broken_by"] for c in ran
                  if c["op"] in symbol_ops and c["copy"] != "noshdr"))
        # A SONAME, the stack's PF_X or a DT_DEBUG entry changes nothing the program prints.
        check("noop editor: runpath/needed/interp edits caught by running the program",
              all("run" in c["broken_by"] for c in ran
                  if c["op"] not in ("set-soname", "execstack", "add-debug-tag")))

        rc, cases = harness("refuse")
        check("refusing editor: every case REFUSED", {c["status"] for c in cases} == {"REFUSED"})
        check("refusing editor: exit code 0", rc == 0, str(rc))

        rc, cases = harness("silent")
        check("silent failing editor: every case FAIL", {c["status"] for c in cases} == {"FAIL"})

        rc, cases = harness("clobber")
        check("clobbering editor: every case LOST", {c["status"] for c in cases} == {"LOST"})
        check("clobbering editor named elfpatch: exit code 1", rc == 1, str(rc))

        rc, cases = harness("naive-rpath")
        shrink = [c for c in cases if c["op"] == "shrink-runpath"]
        good = [c for c in shrink if c["variant"] == "default"]
        bad = [c for c in shrink if c["variant"] == "tailshare"]
        check("naive in-place shrink passes where no string shares the RUNPATH's bytes (incl. big-endian, "
              "no section headers)", good and all(c["status"] == "PASS" for c in good),
              str([(c["arch"], c["kind"], c["copy"], c["status"], c.get("reason")) for c in good
                   if c["status"] != "PASS"])[:800])
        check("naive in-place shrink is BROKEN when the NEEDED shares the RUNPATH's tail",
              bad and all(c["status"] == "BROKEN" and {"semantic", "run"} <= set(c["broken_by"]) for c in bad),
              str([(c["arch"], c["kind"], c["copy"], c["status"]) for c in bad])[:800])
        check("naive editor: growing refused",
              all(c["status"] == "REFUSED" for c in cases if c["op"].startswith("grow")))

    failed = checks.count(False)
    print("%d passed, %d failed" % (len(checks) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
