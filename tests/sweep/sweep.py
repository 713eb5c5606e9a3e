#!/usr/bin/env python3
"""Sweep an ELF editor over the ELF files of this machine.

Every ELF file (by magic) under the roots is copied to a temporary
directory and, on fresh copies, put through two round trips with the editor
under test:

  rpath:  --set-rpath <long path>, then --set-rpath <original value>
          (--remove-rpath if there was none; --force-rpath throughout when
          the file has DT_RPATH and no DT_RUNPATH)
  needed: --add-needed libstubstrip-sweep.so, then --remove-needed it

After each round trip the result must: carry the same dynamic entries as
the original (strings resolved, addresses of movable tables ignored), give
no new readelf -a warnings, no new eu-elflint --gnu-ld complaints, no new
loader-layout problems, still load with dlopen (if the original copy did)
and still resolve with ld.so --list to the same libraries (if the original
copy did).  See README.md beside this file.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from common import clip, elfmini, sh, sha256  # noqa: E402

LONG_RPATH = "/nonexistent/stubstrip-sweep/" + "/".join(["long-runpath-component-%02d" % i + "-" * 20
                                                         for i in range(8)])
SWEEP_NEEDED = "libstubstrip-sweep.so"
SEQS = ["rpath", "needed"]


def run_editor(ed_path, args, target, timeout):
    h0 = sha256(target)
    t0 = time.monotonic()
    rc, out, err = sh([ed_path] + args + [target], timeout=timeout)
    dt = time.monotonic() - t0
    if rc == 0:
        return None, dt
    msg = (err.strip() or out.strip()).replace(target, "FILE")
    msg = msg.replace(os.path.basename(target), "FILE")
    if sha256(target) != h0:
        return ("LOST", "exit %d and the file changed: %s" % (rc, clip(msg, 200))), dt
    if rc < 0 or rc == 124:
        return ("FAIL", "crashed or hung (exit %d): %s" % (rc, clip(msg, 200))), dt
    if not msg:
        return ("FAIL", "exit %d without a message" % rc), dt
    return ("REFUSED", clip(msg.splitlines()[0], 200)), dt


def seq_steps(seq, orig_elf):
    if seq == "needed":
        return [["--add-needed", SWEEP_NEEDED], ["--remove-needed", SWEEP_NEEDED]]
    runpath = rpath = None
    if orig_elf is not None:
        try:
            runpath = orig_elf.dyn_str("RUNPATH")
            rpath = orig_elf.dyn_str("RPATH")
        except elfmini.ElfError:
            pass
    if runpath is not None:
        return [["--set-rpath", LONG_RPATH], ["--set-rpath", runpath]]
    if rpath is not None:
        return [["--force-rpath", "--set-rpath", LONG_RPATH], ["--force-rpath", "--set-rpath", rpath]]
    return [["--set-rpath", LONG_RPATH], ["--remove-rpath"]]


def intermediate_problem(seq, path):
    try:
        e = elfmini.read(path)
        if seq == "rpath":
            v = e.dyn_str("RUNPATH")
            if v is None:
                v = e.dyn_str("RPATH")
            if v != LONG_RPATH:
                return "after --set-rpath the RUNPATH/RPATH is %r" % (v if v is None else v[:60])
        elif SWEEP_NEEDED not in e.needed():
            return "after --add-needed NEEDED is %s" % e.needed()
    except elfmini.ElfError as ex:
        return "own ELF reader after the first step: %s" % ex
    return None


def sweep_file(task):
    """Both round trips on one file, for every editor.  By default on copies in a directory of
    their own; with opts["beside"] (wheels.py) the original is the baseline and the copies are
    hidden files next to it, so that libraries found through $ORIGIN are found from the copies
    too."""
    path, idx, workdir, eds, opts = task
    beside = opts.get("beside", False)
    d = os.path.dirname(path) if beside else os.path.join(workdir, "f%06d" % idx)
    name = os.path.basename(path)
    res = {"file": path, "size": os.path.getsize(path), "results": {}}
    if beside:
        orig = path
    else:
        try:
            os.makedirs(os.path.join(d, "orig"))
            orig = os.path.join(d, "orig", name)
            shutil.copy2(path, orig)
        except OSError as e:
            res["error"] = "cannot copy: %s" % e
            shutil.rmtree(d, ignore_errors=True)
            return res
    try:
        elf = elfmini.read(orig)
        res["type"] = elf.type_name
        res["dynamic"] = elf.segment(elfmini.PT_DYNAMIC) is not None
        sig0 = common.dyn_signature(elf) if res["dynamic"] else None
        layout0 = elfmini.layout_problems(elf)
        has_interp = elf.interp() is not None
        debug_info = common.is_debug_info(elf)
    except elfmini.ElfError as e:
        res["reader_error"] = str(e)
        elf = sig0 = None
        layout0 = set()
        has_interp = debug_info = False
    warn0 = common.readelf_warnings(orig)
    lint0 = common.elflint_messages(orig) if opts["elflint"] else None
    loaded0 = resolved0 = None
    if elf is not None and elf.e_type == 3 and opts["load"]:
        ok, _ = common.loads(orig)
        loaded0 = ok
        res["loads_before"] = ok
    if (has_interp or (opts.get("resolve_all") and elf is not None and elf.e_type == 3)) and opts["load"]:
        ok, lines = common.resolves(orig)
        resolved0 = lines if ok else None
        res["resolves_before"] = ok

    for ed_name, ed_path in eds:
        for seq in SEQS:
            r = {}
            res["results"].setdefault(ed_name, {})[seq] = r
            if beside:
                sd = None
                target = os.path.join(d, ".stubstrip-%06d-%s-%s-%s" % (idx, ed_name, seq, name))
            else:
                sd = os.path.join(d, "%s-%s" % (ed_name, seq))
                os.makedirs(sd)
                target = os.path.join(sd, name)
            shutil.copy2(orig, target)

            def drop():
                if sd is None:
                    os.unlink(target)
                else:
                    shutil.rmtree(sd, ignore_errors=True)
            steps = seq_steps(seq, elf)
            r["commands"] = [" ".join(s) for s in steps]
            bad = None
            t_ed = 0.0
            for i, args in enumerate(steps):
                bad, dt = run_editor(ed_path, args, target, opts["timeout"])
                t_ed += dt
                if bad:
                    if i:
                        bad = (bad[0], "step %d (%s): %s" % (i + 1, args[0], bad[1]))
                    break
                if i == 0 and debug_info and sha256(target) == sha256(orig):
                    # patchelf's behaviour, and elfpatch's: nothing to round-trip.
                    bad = ("NOOP", "a separate debug-info file: the edit succeeded changing nothing")
                    break
                if i == 0:
                    p = intermediate_problem(seq, target)
                    if p:
                        bad = ("BROKEN", p)
                        r["broken_by"] = ["intermediate"]
                        break
            r["editor_s"] = round(t_ed, 3)
            if bad:
                r["status"], r["reason"] = bad
                if not (opts["keep"] and bad[0] in ("BROKEN", "LOST")):
                    drop()
                continue
            probs = []
            try:
                e2 = elfmini.read(target)
                if sig0 is not None:
                    diff = common.diff_signatures(sig0, common.dyn_signature(e2))
                    if diff:
                        probs.append(("roundtrip", "dynamic entries differ from the original: " + diff))
                for p in sorted(elfmini.layout_problems(e2) - layout0):
                    probs.append(("layout", "layout: " + p))
            except elfmini.ElfError as ex:
                if elf is not None:
                    probs.append(("reader", "own ELF reader: %s" % ex))
            new_warn = sorted(common.readelf_warnings(target) - warn0)
            if new_warn:
                probs.append(("readelf", "readelf -a warns: " + clip(" | ".join(new_warn), 300)))
            if opts["elflint"]:
                lint = common.new_elflint(lint0, common.elflint_messages(target))
                if lint:
                    probs.append(("elflint", "eu-elflint: " + clip(" | ".join(lint), 300)))
            if loaded0:
                ok, err = common.loads(target)
                if not ok:
                    probs.append(("load", "no longer loads: " + err))
            if resolved0 is not None:
                ok, lines = common.resolves(target)
                if not ok:
                    probs.append(("resolve", "no longer resolves: %s" % lines))
                elif lines != resolved0:
                    probs.append(("resolve", "resolves differently: %s vs %s"
                                  % (clip(str(lines), 150), clip(str(resolved0), 150))))
            if probs:
                r["status"] = "BROKEN"
                r["broken_by"] = sorted(set(c for c, _ in probs))
                r["reason"] = "; ".join(p for _, p in probs)
            else:
                r["status"] = "PASS"
            if not (opts["keep"] and probs):
                drop()
            else:
                r["kept"] = target
    if not opts["keep"] and not beside:
        shutil.rmtree(d, ignore_errors=True)
    return res


def report(ed_name, ed_path, ed_ver, files, log, show):
    per_seq = {s: Counter() for s in SEQS}
    refusals = Counter()
    broken = []
    for f in files:
        for seq, r in f["results"].get(ed_name, {}).items():
            per_seq[seq][r["status"]] += 1
            if r["status"] == "REFUSED":
                # group by the message with its numbers (offsets, sizes) blanked
                refusals[(re.sub(r"0x[0-9a-fA-F]+|\b\d+\b", "#", r["reason"]), seq)] += 1
            elif r["status"] in ("BROKEN", "LOST", "FAIL"):
                broken.append((f["file"], seq, r))
    log("")
    log("=== %s: %s (%s)" % (ed_name, ed_ver, ed_path))
    log("%-22s %8s %8s" % ("", "rpath", "needed"))
    tot = {}
    for label, keys in (("tried", None), ("edited (exit 0)", ("PASS", "BROKEN")), ("  passed", ("PASS",)),
                        ("  broken", ("BROKEN",)), ("no-op (debug info)", ("NOOP",)), ("refused", ("REFUSED",)),
                        ("lost", ("LOST",)), ("failed", ("FAIL",))):
        vals = [sum(per_seq[s].values()) if keys is None else sum(per_seq[s][k] for k in keys) for s in SEQS]
        tot[label.strip()] = vals
        log("%-22s %8d %8d" % (label, vals[0], vals[1]))
    if refusals:
        log("-- refusals by message, numbers shown as # (count, round trip, message)")
        for (msg, seq), n in sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0])):
            log("%6d  %-6s  %s" % (n, seq, msg))
    secondary = sum(1 for _, _, r in broken if r["status"] == "BROKEN" and r.get("broken_by") == ["elflint"])
    if broken:
        groups = Counter()
        example = {}
        for path, seq, r in broken:
            k = (r["status"], seq, "+".join(r.get("broken_by", [])))
            groups[k] += 1
            example.setdefault(k, (path, r.get("reason", "")))
        log("-- broken / lost / failed, grouped by which checks failed (count, status, round trip, checks;"
            " one example)")
        for k, n in groups.most_common():
            log("%6d  %-7s %-6s %-22s e.g. %s: %s" % (n, k[0], k[1], k[2] or "-", example[k][0],
                                                     clip(example[k][1], 300)))
        log("-- broken / lost / failed (first %d of %d; all in --json)" % (min(show, len(broken)), len(broken)))
        for path, seq, r in broken[:show]:
            log("%s %s [%s]: %s" % (r["status"], path, seq, clip(r.get("reason", ""), 500)))
    totals = {"tried": sum(tot["tried"]), "edited": sum(tot["edited (exit 0)"]), "passed": sum(tot["passed"]),
              "broken": sum(tot["broken"]), "noop": sum(tot["no-op (debug info)"]),
              "refused": sum(tot["refused"]), "lost": sum(tot["lost"]),
              "failed": sum(tot["failed"]), "broken_elflint_only": secondary,
              "by_seq": {s: dict(per_seq[s]) for s in SEQS},
              "refusals": [{"message": m, "seq": s, "count": n} for (m, s), n in refusals.most_common()]}
    log("%s: %d round trips tried, %d edited: %d passed, %d broken (%d of them eu-elflint only);"
        " %d no-ops on debug-info files, %d refused, %d lost, %d failed"
        % (ed_name, totals["tried"], totals["edited"], totals["passed"], totals["broken"], secondary,
           totals["noop"], totals["refused"], totals["lost"], totals["failed"]))
    return totals


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--editor", default="auto", help="patchelf | elfpatch | both | auto | NAME=PATH")
    ap.add_argument("--patchelf", help="path to patchelf 0.19.x")
    ap.add_argument("--elfpatch", help="path to elfpatch (default target/release/elfpatch)")
    ap.add_argument("--roots", nargs="+", default=common.DEFAULT_ROOTS, help="directories to sweep")
    ap.add_argument("--limit", type=int, help="sample at most N files (sorted, evenly spaced)")
    ap.add_argument("--max-size", type=int, default=0,
                    help="skip files larger than this many MiB (default: no limit)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--workdir", help="temporary directory (default: a new one under $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep copies of broken results")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per editor call")
    ap.add_argument("--no-elflint", action="store_true")
    ap.add_argument("--lenient-elflint", action="store_true",
                    help="elfpatch round trips broken only by new eu-elflint complaints are reported but do "
                         "not make the exit status non-zero")
    ap.add_argument("--show", type=int, default=40, help="print at most this many broken cases (all in --json)")
    ap.add_argument("--no-load", action="store_true", help="skip the dlopen / ld.so --list checks")
    args = ap.parse_args(argv)

    def log(s=""):
        print(s, flush=True)

    t_start = time.monotonic()
    eds, rc = editors_or_exit(args, log, elflint=not args.no_elflint)
    if rc is not None:
        return rc

    found = common.find_elf_files(args.roots)
    files = found
    skipped_big = []
    if args.max_size:
        files = [f for f in found if os.path.getsize(f) <= args.max_size << 20]
        skipped_big = sorted(set(found) - set(files))
    files = common.sample(files, args.limit)
    log("%d ELF files under %s; sweeping %d%s" % (len(found), " ".join(args.roots), len(files),
                                                  " (--limit %d)" % args.limit if args.limit else ""))
    if skipped_big:
        log("skipped %d files over %d MiB" % (len(skipped_big), args.max_size))

    workdir = args.workdir or tempfile.mkdtemp(prefix="stubstrip-sweep-")
    os.makedirs(workdir, exist_ok=True)
    opts = {"elflint": bool(common.harness.ELFLINT) and not args.no_elflint, "load": not args.no_load,
            "keep": args.keep, "timeout": args.timeout}
    tasks = [(f, i, workdir, [(n, p) for n, p, _ in eds], opts) for i, f in enumerate(files)]
    results, base = run_and_report_baselines(tasks, args.jobs, log, every=200)
    summary = {}
    for n, p, v in eds:
        summary[n] = {"path": p, "version": v, "totals": report(n, p, v, results, log, args.show)}
    total_s = time.monotonic() - t_start
    log("")
    log("total time %.0fs" % total_s)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "stubstrip sweep", "roots": args.roots, "found": len(found),
                       "limit": args.limit, "swept": len(results), "duration_s": round(total_s, 1),
                       "jobs": args.jobs, "baseline": dict(base), "editors": summary,
                       "long_rpath": LONG_RPATH, "files": results}, f, indent=1)
        log("wrote %s" % args.json)
    if not args.workdir and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return elfpatch_status(summary, args.lenient_elflint, log)


def editors_or_exit(args, log, elflint=True):
    """The editors asked for, logged; (editors, None), or (None, exit status) when one is missing,
    or eu-elflint is missing where STUBSTRIP_REQUIRE_TOOLS=1 (CI) says every tool must be there."""
    eds, problems = common.editors.resolve_editors(args.editor, args.patchelf, args.elfpatch, log=log)
    for p in problems:
        log("EDITOR UNAVAILABLE: %s" % p)
    if not eds:
        return None, 2
    for n, p, v in eds:
        log("editor %s: %s (%s)" % (n, p, v))
    if not common.harness.ELFLINT and elflint:
        log("NOTE: eu-elflint not installed (apt-get install elfutils): that check is skipped")
        if os.environ.get("STUBSTRIP_REQUIRE_TOOLS") == "1":
            log("FAILED: STUBSTRIP_REQUIRE_TOOLS=1 and eu-elflint is missing")
            return None, 1
    return eds, None


def run_and_report_baselines(tasks, jobs, log, every):
    """sweep_file over the tasks in parallel; logs and returns (results, what the unedited files did)."""
    results = []
    t0 = time.monotonic()
    with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for i, r in enumerate(pool.map(sweep_file, tasks, chunksize=1)):
            results.append(r)
            if (i + 1) % every == 0:
                log("  %d/%d files, %.0fs" % (i + 1, len(tasks), time.monotonic() - t0))
    base = Counter()
    for r in results:
        base["dynamic"] += bool(r.get("dynamic"))
        base["loads_before"] += bool(r.get("loads_before"))
        base["resolves_before"] += bool(r.get("resolves_before"))
        base["reader_error"] += "reader_error" in r
        base["not_copied"] += "error" in r
    log("")
    log("files: %d swept in %.0fs (%d jobs); %d with PT_DYNAMIC, %d loaded with dlopen before editing,"
        " %d resolved with ld.so --list before editing, %d our reader could not parse, %d not copied"
        % (len(results), time.monotonic() - t0, jobs, base["dynamic"], base["loads_before"],
           base["resolves_before"], base["reader_error"], base["not_copied"]))
    return results, base


def elfpatch_status(summary, lenient_elflint, log):
    """Exit status: 1 when elfpatch has a broken or lost round trip (with lenient_elflint, one
    broken only by new eu-elflint complaints does not count)."""
    if "elfpatch" not in summary:
        return 0
    t = summary["elfpatch"]["totals"]
    broken = t["broken"] - (t["broken_elflint_only"] if lenient_elflint else 0)
    if lenient_elflint and t["broken_elflint_only"]:
        log("--lenient-elflint: %d elfpatch round trips broken only by eu-elflint do not fail the run"
            % t["broken_elflint_only"])
    if broken or t["lost"] or t["failed"]:
        log("FAILED: elfpatch has %d broken, %d lost, %d failed round trips" % (broken, t["lost"], t["failed"]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
