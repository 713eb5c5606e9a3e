#!/usr/bin/env python3
"""Sweep an ELF editor over the shared libraries of real Python wheels.

Wheels on PyPI carry libraries that auditwheel repaired with whatever patchelf release it had
then (renamed SONAMEs and NEEDED entries, $ORIGIN run paths), and NVIDIA's CUDA runtime wheels
carry CUDA's own.  This script pip-installs a fixed set of widely used manylinux wheels with C or
C++ extensions and NVIDIA's CUDA 12 runtime wheels into a scratch directory, then puts every ELF
file in it through sweep.py's two round trips (RUNPATH grow and shrink back, NEEDED add and
remove) and checks (dynamic entries, layout, readelf, eu-elflint, dlopen, ld.so --list).  The
edited copies are hidden files next to the originals, so that the libraries each one finds
through $ORIGIN are found from the copy too; `ld.so --list` runs on every shared library, not
only on programs.  See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import sweep  # noqa: E402
from common import sh  # noqa: E402

# Pinned, so that a rerun sweeps the same files: widely used wheels with C/C++ extensions, most
# with libraries auditwheel bundled into <name>.libs/, and NVIDIA's CUDA 12 runtime wheels.
WHEELS = [
    "numpy==2.4.6",
    "scipy==1.17.1",
    "pillow==13.0.0",
    "lxml==6.1.3",
    "cryptography==50.0.2",
    "grpcio==1.85.1",
    "pandas==3.1.1",
    "psycopg2-binary==2.9.13",
    "shapely==2.2.0",
    "h5py==3.16.0",
    "opencv-python-headless==5.0.0.93",
    "pyzmq==27.3.0",
]
CUDA_WHEELS = [
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-cuda-nvrtc-cu12==12.9.86",
    "nvidia-cublas-cu12==12.9.3.13",
]


def install(wheels, target, log):
    """pip install the wheels (binary only, no dependencies) into target; returns an error or None."""
    os.makedirs(target, exist_ok=True)
    log("pip install --target %s %s" % (target, " ".join(wheels)))
    rc, out, err = sh([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                       "--no-deps", "--only-binary=:all:", "--upgrade", "--target", target] + wheels,
                      timeout=3600)
    if rc != 0:
        return "pip install failed: %s" % common.clip(err or out, 400)
    return None


def package_of(path, root):
    """The top-level directory under root a file belongs to (numpy, numpy.libs, nvidia, ...)."""
    rel = os.path.relpath(path, root)
    return rel.split(os.sep, 1)[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--editor", default="elfpatch", help="patchelf | elfpatch | both | NAME=PATH")
    ap.add_argument("--patchelf", help="path to patchelf 0.19.x")
    ap.add_argument("--elfpatch", help="path to elfpatch (default target/release/elfpatch)")
    ap.add_argument("--dir", help="scratch directory the wheels go into (default: a new temporary one, "
                    "removed after; an existing one is reused, its wheels upgraded to the pins)")
    ap.add_argument("--wheels", nargs="+", help="requirements to install instead of the default set")
    ap.add_argument("--no-cuda", action="store_true", help="leave out NVIDIA's CUDA wheels (~700 MB)")
    ap.add_argument("--no-install", action="store_true", help="sweep --dir as it is")
    ap.add_argument("--limit", type=int, help="sweep at most N files (sorted, evenly spaced)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--keep", action="store_true", help="keep broken copies (next to their originals)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per editor call")
    ap.add_argument("--show", type=int, default=40)
    ap.add_argument("--lenient-elflint", action="store_true",
                    help="elfpatch round trips broken only by new eu-elflint complaints are reported but do "
                         "not make the exit status non-zero")
    args = ap.parse_args(argv)

    def log(s=""):
        print(s, flush=True)

    t_start = time.monotonic()
    eds, rc = sweep.editors_or_exit(args, log)
    if rc is not None:
        return rc

    root = args.dir or tempfile.mkdtemp(prefix="stubstrip-wheels-")
    wheels = args.wheels or (WHEELS + ([] if args.no_cuda else CUDA_WHEELS))
    t0 = time.monotonic()
    if not args.no_install:
        err = install(wheels, root, log)
        if err:
            log("FAILED: " + err)
            return 2
    installed = sorted(d[: -len(".dist-info")] for d in os.listdir(root) if d.endswith(".dist-info"))
    log("installed in %.0fs: %s" % (time.monotonic() - t0, ", ".join(installed)))

    found = common.find_elf_files([root])
    files = common.sample(found, args.limit)
    size = sum(os.path.getsize(f) for f in files)
    per_pkg = Counter(package_of(f, root) for f in files)
    log("%d ELF files (%.0f MiB) under %s; sweeping %d" % (len(found), size / 2**20, root, len(files)))
    log("  " + ", ".join("%s %d" % kv for kv in sorted(per_pkg.items())))
    opts = {"elflint": bool(common.harness.ELFLINT), "load": True, "keep": args.keep, "timeout": args.timeout,
            "beside": True, "resolve_all": True}
    tasks = [(f, i, root, [(n, p) for n, p, _ in eds], opts) for i, f in enumerate(files)]
    results, base = sweep.run_and_report_baselines(tasks, args.jobs, log, every=50)
    not_loading = [r["file"] for r in results if r.get("dynamic") and r.get("loads_before") is False]
    if not_loading:
        log("did not load before editing (their load check is left out): %s"
            % ", ".join(os.path.relpath(f, root) for f in not_loading[:20]))
    summary = {}
    for n, p, v in eds:
        summary[n] = {"path": p, "version": v, "totals": sweep.report(n, p, v, results, log, args.show)}
    total_s = time.monotonic() - t_start
    log("")
    log("total time %.0fs" % total_s)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "stubstrip wheel sweep", "wheels": wheels, "installed": installed,
                       "found": len(found), "swept": len(results), "limit": args.limit,
                       "duration_s": round(total_s, 1), "jobs": args.jobs, "baseline": dict(base),
                       "editors": summary, "files": results}, f, indent=1)
        log("wrote %s" % args.json)
    if not args.dir and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return sweep.elfpatch_status(summary, args.lenient_elflint, log)


if __name__ == "__main__":
    sys.exit(main())
