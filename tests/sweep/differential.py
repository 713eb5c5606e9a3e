#!/usr/bin/env python3
"""Differential test: the same command line through two editors (default
patchelf 0.19 and elfpatch), on fresh copies of every ELF file of the sweep;
where both succeed, compare the resulting dynamic entries.

Entries are compared as (tag, value) in order, string values resolved, and
the values of tags that point into tables an editor may move (DT_STRTAB,
DT_STRSZ, DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_VERSYM, DT_VERNEED,
DT_VERDEF, DT_REL/RELA/JMPREL/RELR) ignored; DT_MIPS_RLD_MAP_REL is compared
as the absolute address it designates.  PT_INTERP is compared too.  See
README.md beside this file.
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

LONG_RPATH = "/nonexistent/stubstrip-differential/" + "/".join(
    ["runpath-component-%02d" % i + "-" * 24 for i in range(8)])
SHORT_RPATH = "/x"
ADD_NEEDED = "libstubstrip-diff.so"
NEW_NEEDED = "libstubstrip-replaced.so"
LONG_SONAME = "libstubstrip-differential-" + "s" * 120 + ".so.1"
OPS = ["set-rpath-long", "set-rpath-short", "remove-rpath", "add-needed", "replace-needed", "set-soname"]


def op_args(op, elf):
    """Editor arguments for op on this file, or None when it does not apply."""
    needed = elf.needed() if elf is not None else []
    has_rpath = elf is not None and (elf.dyn_str("RUNPATH") is not None or elf.dyn_str("RPATH") is not None)
    if op == "set-rpath-long":
        return ["--set-rpath", LONG_RPATH]
    if op == "set-rpath-short":
        return ["--set-rpath", SHORT_RPATH] if has_rpath else None
    if op == "remove-rpath":
        return ["--remove-rpath"] if has_rpath else None
    if op == "add-needed":
        return ["--add-needed", ADD_NEEDED]
    if op == "replace-needed":
        return ["--replace-needed", needed[0], NEW_NEEDED] if needed else None
    if op == "set-soname":
        return ["--set-soname", LONG_SONAME]
    raise ValueError(op)


def outcome(ed_path, args, target, timeout):
    h0 = sha256(target)
    rc, out, err = sh([ed_path] + args + [target], timeout=timeout)
    if rc == 0:
        try:
            e = elfmini.read(target)
            return {"ok": True, "dyn": e.dynamic_normalized(), "interp": e.interp(),
                    "verneed": e.verneed(), "changed": sha256(target) != h0}
        except elfmini.ElfError as ex:
            return {"ok": True, "dyn": None, "error": "unreadable result: %s" % ex}
    msg = (err.strip() or out.strip()).replace(target, "FILE")
    return {"ok": False, "rc": rc, "message": clip(msg.splitlines()[0] if msg else "", 200),
            "changed": sha256(target) != h0}


def describe(a, b, name_a, name_b):
    if a.get("error") or b.get("error"):
        return "%s: %s / %s: %s" % (name_a, a.get("error", "ok"), name_b, b.get("error", "ok"))
    parts = []
    if a["interp"] != b["interp"]:
        parts.append("PT_INTERP %r vs %r" % (a["interp"], b["interp"]))
    if a["verneed"] != b["verneed"]:
        parts.append("version needs %s vs %s" % (clip(str(a["verneed"]), 150), clip(str(b["verneed"]), 150)))
    da, db = a["dyn"] or [], b["dyn"] or []
    if da != db:
        ca, cb = Counter(da), Counter(db)
        if ca == cb:
            parts.append("same entries, different order")
        else:
            parts.append("only %s: %s; only %s: %s" % (name_a, common.fmt_entries(ca - cb), name_b,
                                                     common.fmt_entries(cb - ca)))
    return "; ".join(parts)


def diff_file(task):
    path, idx, workdir, (na, pa), (nb, pb), timeout = task
    d = os.path.join(workdir, "f%06d" % idx)
    # The file one directory down (input/), so that no file name collides with the
    # directories made for each tool's copies.
    os.makedirs(os.path.join(d, "input"))
    name = os.path.basename(path)
    res = {"file": path, "ops": {}}
    orig = os.path.join(d, "input", name)
    try:
        shutil.copy2(path, orig)
        elf = elfmini.read(orig)
        if elf.segment(elfmini.PT_DYNAMIC) is None:
            res["skip"] = "no PT_DYNAMIC"
    except (OSError, elfmini.ElfError) as e:
        res["skip"] = "unreadable: %s" % e
        elf = None
    if "skip" not in res:
        for op in OPS:
            args = op_args(op, elf)
            if args is None:
                continue
            outs = {}
            for n, p in ((na, pa), (nb, pb)):
                t = os.path.join(d, "%s-%s" % (n, op))
                os.makedirs(t)
                tf = os.path.join(t, name)
                shutil.copy2(orig, tf)
                outs[n] = outcome(p, args, tf, timeout)
                shutil.rmtree(t, ignore_errors=True)
            a, b = outs[na], outs[nb]
            r = {"command": " ".join(args)}
            if a["ok"] and b["ok"]:
                diff = describe(a, b, na, nb)
                if diff:
                    r["result"] = "differ"
                elif not a.get("changed") and not b.get("changed"):
                    r["result"] = "agree-noop"  # both exited 0 and left the file as it was
                else:
                    r["result"] = "agree"
                if diff:
                    r["difference"] = diff
            elif a["ok"]:
                r["result"] = "only-" + na
                r["message_" + nb] = b["message"]
                r["noop"] = not a.get("changed")
            elif b["ok"]:
                r["result"] = "only-" + nb
                r["message_" + na] = a["message"]
                r["noop"] = not b.get("changed")
            else:
                r["result"] = "both-failed"
                r["message_" + na] = a["message"]
                r["message_" + nb] = b["message"]
            res["ops"][op] = r
    shutil.rmtree(d, ignore_errors=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="patchelf", help="first editor: patchelf | elfpatch | NAME=PATH")
    ap.add_argument("--b", default="elfpatch", help="second editor: patchelf | elfpatch | NAME=PATH")
    ap.add_argument("--patchelf", help="path to patchelf 0.19.x")
    ap.add_argument("--elfpatch", help="path to elfpatch (default target/release/elfpatch)")
    ap.add_argument("--roots", nargs="+", default=common.DEFAULT_ROOTS)
    ap.add_argument("--limit", type=int, help="sample at most N files (sorted, evenly spaced)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--show", type=int, default=60, help="print at most this many differences (all in --json)")
    ap.add_argument("--timeout", type=int, default=300)
    args = ap.parse_args(argv)

    def log(s=""):
        print(s, flush=True)

    t_start = time.monotonic()
    eds = []
    for spec in (args.a, args.b):
        got, problems = common.editors.resolve_editors(spec, args.patchelf, args.elfpatch, log=log)
        if problems or len(got) != 1:
            log("EDITOR UNAVAILABLE: %s" % "; ".join(problems or ["%s names %d editors" % (spec, len(got))]))
            return 2
        eds.append(got[0])
    (na, pa, va), (nb, pb, vb) = eds
    if na == nb:
        nb = nb + "-2"
    log("A = %s: %s (%s)" % (na, pa, va))
    log("B = %s: %s (%s)" % (nb, pb, vb))
    found = common.find_elf_files(args.roots)
    files = common.sample(found, args.limit)
    log("%d ELF files under %s; comparing on %d" % (len(found), " ".join(args.roots), len(files)))
    workdir = tempfile.mkdtemp(prefix="stubstrip-diff-")
    tasks = [(f, i, workdir, (na, pa), (nb, pb), args.timeout) for i, f in enumerate(files)]
    with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(diff_file, tasks, chunksize=1))
    shutil.rmtree(workdir, ignore_errors=True)

    per_op = {op: Counter() for op in OPS}
    diffs = []
    only = Counter()
    for r in results:
        for op, o in r["ops"].items():
            per_op[op][o["result"]] += 1
            if o["result"] == "differ":
                diffs.append((r["file"], op, o["difference"]))
            elif o["result"].startswith("only-"):
                other = nb if o["result"] == "only-" + na else na
                msg = re.sub(r"0x[0-9a-fA-F]+|\b\d+\b", "#", o.get("message_" + other, ""))
                who = o["result"] + (" (no-op)" if o.get("noop") else "")
                only[(who, op, msg)] += 1
    skipped = Counter(r["skip"].split(":")[0] for r in results if "skip" in r)
    cols = ["agree", "agree-noop", "differ", "only-" + na, "only-" + nb, "both-failed"]
    log("")
    log("%-16s" % "operation" + "".join("%14s" % c[:14] for c in cols))
    tot = Counter()
    for op in OPS:
        log("%-16s" % op + "".join("%14d" % per_op[op][c] for c in cols))
        tot.update(per_op[op])
    log("%-16s" % "total" + "".join("%14d" % tot[c] for c in cols))
    if skipped:
        log("files skipped: " + ", ".join("%d %s" % (n, k) for k, n in skipped.items()))
    if only:
        log("")
        log("-- one editor succeeded, the other did not (count, who succeeded — '(no-op)': exit 0 but the file"
            " is unchanged —, op, the other's message with numbers as #)")
        for (who, op, msg), n in only.most_common():
            log("%6d  %-24s %-16s %s" % (n, who, op, msg))
    if diffs:
        log("")
        log("-- differences (%d; first %d)" % (len(diffs), min(len(diffs), args.show)))
        for f, op, d in diffs[:args.show]:
            log("%s [%s]: %s" % (f, op, clip(d, 400)))
    log("")
    log("%d comparisons: %d agree (%d of them: both left the file unchanged), %d differ;"
        " %d only %s succeeded, %d only %s succeeded, %d both failed"
        % (tot["agree"] + tot["agree-noop"] + tot["differ"], tot["agree"] + tot["agree-noop"], tot["agree-noop"],
           tot["differ"], tot["only-" + na], na,
           tot["only-" + nb], nb, tot["both-failed"]))
    log("total time %.0fs" % (time.monotonic() - t_start))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "stubstrip differential", "a": {"name": na, "path": pa, "version": va},
                       "b": {"name": nb, "path": pb, "version": vb}, "roots": args.roots,
                       "found": len(found), "limit": args.limit,
                       "totals": dict(tot), "per_op": {op: dict(c) for op, c in per_op.items()},
                       "files": results}, f, indent=1)
        log("wrote %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
