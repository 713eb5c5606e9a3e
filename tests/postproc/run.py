#!/usr/bin/env python3
"""Every file elfpatch writes survives the tools that run after it (postproc.py beside this file
says which tools and what "survives" means).

  run.py sweep [--limit N]     the machine's shared libraries and programs: each gets a growing
                               RUNPATH edit, then every post-processor
  run.py large                 libLLVM (the largest library on the machine with a big .dynstr)
                               and a synthesized library with 100,000 symbols
  run.py files FILE...         the same checks on the given files

The cross matrix (every architecture, linker, edit) has its own driver, cross.py. Exit status 1
when any case is broken. README.md beside this file has the runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "sweep"))
sys.path.insert(0, os.path.join(REPO, "tests", "cross"))
import common  # noqa: E402
import editors  # noqa: E402
import elfmini  # noqa: E402
import postproc  # noqa: E402
from harness import clip, sh  # noqa: E402
from prior import find_prior  # noqa: E402

GROW = ":".join("/nix/store/%s-%s/lib" % (c * 32, n)
                for c, n in (("a", "gmp-6.3.0"), ("b", "libffi-3.4.6"), ("c", "ncurses-6.5")))


def dlopens(path: str):
    """dlopen (ctypes, RTLD_NOW) of path in a fresh python: None, or the loader's message."""
    code = ("import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\n"
            "except OSError as e:\n    sys.exit(str(e))")
    rc, _, err = sh([sys.executable, "-c", code, path], timeout=60,
                    env={"PATH": "/usr/bin:/bin", "LANG": "C"})
    if rc == 0:
        return None
    return clip(err.strip().splitlines()[-1].replace(path, "FILE") if err.strip() else "exit %d" % rc, 300)


def host_loads(reference: str):
    """What `reference` (the edited file) does in the loader: dlopen for a library, ld.so --list
    for anything with an interpreter or a library; a checker that compares a later file to it."""
    elf = elfmini.read(reference)
    is_lib = elf.e_type == 3 and elf.interp() is None
    loaded = dlopens(reference) is None if is_lib else None
    ok, lines = common.resolves(reference)
    resolved = lines if ok else None

    def loads(path):
        if loaded:
            err = dlopens(path)
            if err:
                return "no longer loads: " + err
        if resolved is not None:
            ok, lines = common.resolves(path)
            if not ok:
                return "no longer resolves: %s" % lines
            if lines != resolved:
                return "resolves differently: %s" % clip(str(lines), 200)
        return None

    return loads, (loaded, resolved is not None)


def check_file(task):
    """One file: copy, grow its RUNPATH with elfpatch, every post-processor. A result dict."""
    path, idx, workdir, tools, opts = task
    d = os.path.join(workdir, "case%06d" % idx)
    # The file sits in a directory of its own, so that no name of the file can collide with the
    # directories the checks make.
    src = os.path.join(d, "input", os.path.basename(path))
    res = {"file": path, "size": os.path.getsize(path)}
    try:
        os.makedirs(os.path.dirname(src))
        shutil.copy2(path, src)
        elf = elfmini.read(src)
        if elf.segment(elfmini.PT_DYNAMIC) is None or common.is_debug_info(elf):
            res["status"] = "SKIP"
            res["reason"] = "no dynamic section" if elf.segment(elfmini.PT_DYNAMIC) is None else "debug info"
            return res
    except (OSError, elfmini.ElfError) as e:
        res["status"] = "SKIP"
        res["reason"] = "unreadable: %s" % e
        shutil.rmtree(d, ignore_errors=True)
        return res
    edited = os.path.join(d, "grown", os.path.basename(path))
    os.makedirs(os.path.dirname(edited))
    shutil.copy2(src, edited)
    t0 = time.monotonic()
    rc, out, err = sh([tools.elfpatch, "--set-rpath", GROW, edited], timeout=600)
    res["edit_s"] = round(time.monotonic() - t0, 3)
    if rc != 0:
        res["status"] = "REFUSED"
        res["reason"] = clip(err or out, 200)
        shutil.rmtree(d, ignore_errors=True)
        return res
    loads, (lib, resolves) = host_loads(edited)

    def loads_unedited(path):
        # Only asked when a post-processor's output fails to load: the unedited file's own
        # loader results are worth two processes only then.
        return host_loads(src)[0](path)
    if opts["require_load"] and not (lib or resolves):
        res["status"] = "SKIP"
        res["reason"] = "the edited file neither loads nor resolves here"
        shutil.rmtree(d, ignore_errors=True)
        return res
    res["checked"] = {"dlopen": bool(lib), "ld.so --list": resolves}
    probs = []
    notes = []
    for i, pp in enumerate(tools.postprocessors()):
        if opts["only"] and not any(o in pp.name for o in opts["only"]):
            continue
        for kind, msg in postproc.check(pp, src, edited, os.path.join(d, "pp%02d" % i), loads, tools,
                                        elflint=opts["elflint"], loads_unedited=loads_unedited):
            (notes if kind in postproc.NOTES else probs).append((kind, msg))
    if notes:
        res["notes"] = [m for _, m in notes]
    if probs:
        res["status"] = "BROKEN"
        res["broken_by"] = sorted({k for k, _ in probs})
        res["problems"] = [m for _, m in probs]
    else:
        res["status"] = "PASS"
    if not (opts["keep"] and probs):
        shutil.rmtree(d, ignore_errors=True)
    else:
        res["kept"] = d
    return res


def synthesize_large(workdir: str, symbols: int) -> str:
    """A shared library with `symbols` exported data symbols of C++-like length (a large
    .dynstr, .dynsym and hash tables), linked by the host's gcc and GNU ld."""
    src = os.path.join(workdir, "big.c")
    with open(src, "w") as f:
        for i in range(symbols):
            f.write("int _ZN9stubstrip8postproc5large%08dEv_data_symbol = %d;\n" % (i, i))
    out = os.path.join(workdir, "libbig%d.so" % symbols)
    subprocess.run(["cc", "-shared", "-fPIC", "-O0", "-o", out, src], check=True)
    return out


def large_files(workdir: str, symbols: int):
    files = []
    for name in ("libLLVM-14.so.1", "libLLVM-15.so.1", "libLLVM.so.1"):
        for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                files.append(os.path.realpath(p))
    files = sorted(set(files))
    files.append(synthesize_large(workdir, symbols))
    return files


def make_tools(args, workdir, log):
    elfpatch = args.elfpatch or os.path.join(REPO, "target", "release", "elfpatch")
    if not os.path.exists(elfpatch):
        sys.exit("run.py: %s missing (cargo build --release -p elfpatch)" % elfpatch)
    pe019, why = editors.find_patchelf(None, log=log)
    if pe019 is None:
        log("patchelf 0.19.3: %s" % why)
    cache = args.cache or os.path.join(REPO, "target", "postproc-cache")
    pe015, why = find_prior("0.15.2", cache, True, log)
    if pe015 is None:
        log("patchelf 0.15.2: %s" % why)
    return postproc.Tools(elfpatch=os.path.abspath(elfpatch), patchelf019=pe019, patchelf015=pe015)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["sweep", "large", "files"])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--limit", type=int, default=1000, help="sweep: files sampled (0: all)")
    ap.add_argument("--roots", nargs="*", default=common.DEFAULT_ROOTS)
    ap.add_argument("--symbols", type=int, default=100000, help="large: the synthesized library's")
    ap.add_argument("--only", action="append", default=[], help="post-processors whose name holds this")
    ap.add_argument("--elfpatch")
    ap.add_argument("--cache")
    ap.add_argument("--no-elflint", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", action="store_true", help="keep broken cases")
    ap.add_argument("--json")
    ap.add_argument("--workdir")
    ap.add_argument("--require-all", action="store_true",
                    help="fail when a post-processor's tool is missing")
    args = ap.parse_args(argv)

    def log(s=""):
        print(s, flush=True)

    workdir = args.workdir or tempfile.mkdtemp(prefix="stubstrip-postproc-")
    os.makedirs(workdir, exist_ok=True)
    tools = make_tools(args, workdir, log)
    pps = tools.postprocessors()
    if tools.missing or not tools.patchelf019 or not tools.patchelf015:
        msg = "missing: %s" % ", ".join(tools.missing + [n for n, p in (("patchelf 0.19.3", tools.patchelf019),
                                                                       ("patchelf 0.15.2", tools.patchelf015)) if not p])
        log(msg)
        if args.require_all:
            return 2
    log("post-processors (%d): %s" % (len(pps), "; ".join(p.name for p in pps)))
    t0 = time.monotonic()
    if args.what == "sweep":
        files = common.sample(common.find_elf_files(args.roots), args.limit)
        require_load = True
    elif args.what == "large":
        files = large_files(workdir, args.symbols)
        require_load = False
    else:
        files = [os.path.abspath(f) for f in args.files]
        require_load = False
    opts = {"keep": args.keep, "elflint": not args.no_elflint, "only": args.only,
            "require_load": require_load}
    tasks = [(f, i, workdir, tools, opts) for i, f in enumerate(files)]
    results = []
    with cf.ProcessPoolExecutor(max_workers=args.jobs) as ex:
        for r in ex.map(check_file, tasks):
            results.append(r)
            if r["status"] == "BROKEN" or args.what != "sweep":
                log("%-7s %s%s" % (r["status"], r["file"],
                                   "".join("\n        " + p for p in r.get("problems", []))
                                   or ("  (%s)" % r["reason"] if r.get("reason") else "")))
    counts = Counter(r["status"] for r in results)
    kinds = Counter(k for r in results for k in r.get("broken_by", []))
    log("")
    log("%d files in %.0f s: %s" % (len(results), time.monotonic() - t0,
                                     ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    if kinds:
        log("broken by: %s" % ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    checked = sum(1 for r in results if r["status"] in ("PASS", "BROKEN"))
    log("%d passed, %d failed" % (counts.get("PASS", 0), counts.get("BROKEN", 0) + counts.get("REFUSED", 0)
                                   * (args.what != "sweep")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"postprocessors": [p.name for p in pps], "results": results}, f, indent=1)
    if not args.workdir and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    if checked == 0:
        log("run.py: no file was checked")
        return 1
    return 1 if counts.get("BROKEN") or (args.what != "sweep" and counts.get("REFUSED")) else 0


if __name__ == "__main__":
    sys.exit(main())
