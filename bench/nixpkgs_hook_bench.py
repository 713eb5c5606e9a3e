#!/usr/bin/env python3
"""The stub step of a real nixpkgs consumer build: nixpkgs' removeStubsFromRunpathHook alone vs
ours (nix/upstream) in its place.

The consumer (tests/nixpkgs/builds.nix, `bench`) links a library against buildRedist's
cuda_cudart stub and installs --files copies of it; nixpkgs' native stdenv builds it twice with
Nix 2.8, once without nix/upstream (nixpkgs' bash hook: patchelf --print-rpath and --set-rpath per
ELF file) and once with it (one stubstrip process), with a fresh salt so both really build. Every
postFixupHooks entry is timed inside the build; this prints those times, the stub step of each
build, their ratio, and autoPatchelf's time in each as the anchor measured in the same builds.
Both outputs must have no stub entry left. Not a timed test: it asserts results, not speed.

    NIXPKGS=/path/to/nixpkgs python3 bench/nixpkgs_hook_bench.py [--files 2000]
"""

import argparse
import os
import re
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDS = os.path.join(REPO, "tests", "nixpkgs", "builds.nix")
NIX_OPTS = ["--option", "sandbox", "false", "--option", "substituters", "", "--option", "build-users-group", ""]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def build(prebuilt, files, salt, upstream):
    """Builds the bench consumer; returns (out path, {hook entry: seconds}, wall seconds)."""
    args = [
        BUILDS, "--arg", "prebuilt", prebuilt, "--arg", "upstream", "true" if upstream else "false",
        "-A", "bench", "--arg", "files", str(files), "--argstr", "salt", salt,
    ]
    drv = run(["nix-instantiate", *NIX_OPTS, *args]).stdout.strip()
    if not drv:
        sys.exit("nix-instantiate failed: " + run(["nix-instantiate", *NIX_OPTS, *args]).stderr[-800:])
    start = time.monotonic()
    proc = run(["nix-build", *NIX_OPTS, "--no-out-link", drv])
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("build failed:\n" + proc.stderr[-2000:])
    log = run(["nix-store", "-l", drv]).stdout
    times = {}
    for m in re.finditer(r"^stubstrip-bench: ([0-9.]+) s: (.*)$", log, re.M):
        times[m.group(2)] = times.get(m.group(2), 0.0) + float(m.group(1))
    return proc.stdout.strip().splitlines()[-1], times, wall


def pick(times, pattern):
    return sum(t for entry, t in times.items() if re.search(pattern, entry))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--prebuilt", default=os.path.join(REPO, "target", "release"))
    args = ap.parse_args()
    if not os.environ.get("NIXPKGS"):
        print("bench/nixpkgs_hook_bench.py: skipped: NIXPKGS is not set (see tests/nixpkgs/README.md)")
        return 0
    stubstrip = os.path.join(args.prebuilt, "stubstrip")
    if not os.access(stubstrip, os.X_OK):
        sys.exit(f"no {stubstrip}: cargo build --release -p stubstrip")
    setup = run(["bash", os.path.join(REPO, "tests", "nixpkgs", "setup.sh")])
    if setup.returncode != 0:
        sys.exit("tests/nixpkgs/setup.sh failed: " + setup.stderr[-500:])
    os.environ.setdefault("STUBSTRIP_HOST_GCC_VERSION", run(["gcc", "-dumpversion"]).stdout.strip())

    salt = str(time.time_ns())
    results = {}
    for upstream in (False, True):
        out, times, wall = build(args.prebuilt, args.files, salt, upstream)
        elf = int(run(["bash", "-c", f"find {out} -type f -name '*.so' | wc -l"]).stdout)
        left = run([stubstrip, "check", out])
        if elf < args.files or left.returncode != 0:
            sys.exit(f"{out}: {elf} ELF files, stubstrip check: {left.stdout[-500:]}{left.stderr[-500:]}")
        results[upstream] = (out, times, wall, elf)

    print(f"nixpkgs: {os.environ['NIXPKGS']}; {results[True][3]} ELF files per build")
    for upstream in (False, True):
        out, times, wall, _ = results[upstream]
        print(f"\n{'ours (nix/upstream)' if upstream else 'nixpkgs hook alone'}: {out} (build {wall:.1f} s)")
        for entry, t in times.items():
            print(f"  {t:9.3f} s  {entry}")
    theirs = pick(results[False][1], r"removeStubsFromRunpath")
    ours = pick(results[True][1], r"[Ss]tubstrip")
    anchor_theirs = pick(results[False][1], r"autoPatchelf")
    anchor_ours = pick(results[True][1], r"autoPatchelf")
    if not (theirs and ours):
        sys.exit(f"stub step not found in the logs (theirs {theirs}, ours {ours})")
    print(f"\nstub step: nixpkgs' hook {theirs:.3f} s, ours {ours:.3f} s: {theirs / ours:.1f}x")
    print(f"anchor, autoPatchelf in the same builds: {anchor_theirs:.3f} s and {anchor_ours:.3f} s")
    print(f"stub step / autoPatchelf: nixpkgs' hook {theirs / anchor_theirs:.3f}, ours {ours / anchor_ours:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
