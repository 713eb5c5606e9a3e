#!/usr/bin/env python3
"""patchelf parity: elfpatch and patchelf 0.19.3 on the machine's own ELF files.

Two parts (README.md beside this file, "parity.py"):

print  every ELF file under --roots x every print option (--print-interpreter,
       --print-os-abi, --print-soname, --print-rpath, --print-needed,
       --print-execstack): the same stdout, byte for byte, and the same success
       or failure. Where patchelf's failure says that the file lacks what was
       asked (its "wrong ELF type", "cannot find section '.interp'" ...),
       elfpatch's status must be 1, patchelf's own.
edit   --edit-limit files (evenly spaced over the dynamically linked ones) x
       seven edits (set-rpath, long add-rpath, add-needed, longer
       replace-needed, remove-needed, shrink-rpath, set-interpreter), each on a
       fresh copy for each tool: the same success or failure; where both
       succeed, the same dynamic entries and PT_INTERP; no eu-elflint message
       on elfpatch's result that the original did not draw; and a program whose
       original printed `--version` still prints the same after elfpatch's edit
       whenever it does after patchelf's (run in a read-only sandbox, bwrap).

A difference passes only where patchelf is wrong: ALLOWED below names each
kind with the reason, and the report lists every difference it allowed, file
by file. Any other difference fails the run (exit 1).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from common import elfmini  # noqa: E402

ROOTS = ["/usr/lib", "/usr/bin", "/usr/sbin", "/usr/libexec"]
PRINTS = ["--print-interpreter", "--print-os-abi", "--print-soname", "--print-rpath",
          "--print-needed", "--print-execstack"]
EDITS = ["set-rpath", "add-rpath-long", "add-needed", "replace-needed-longer", "remove-needed",
         "shrink-rpath", "set-interpreter"]
LONG_RPATH = "/opt/stubstrip-parity/" + "/".join("run-path-component-%02d" % i for i in range(12))
# A library of glibc that every file may need without effect (an empty stub since glibc 2.34, on
# every Debian machine), and that few files already need.
ADD_NEEDED = "libanl.so.1"
# glibc's libraries that are empty stubs since 2.34: removing one never breaks a program.
STUBS = ["libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libanl.so.1"]
# patchelf's words for "the file lacks what was asked": elfpatch answers these with status 1.
LACKS = re.compile(r"wrong ELF type|cannot find section '\.(interp|dynamic|dynstr)'")
SANDBOX = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
           "--unshare-all", "--die-with-parent", "--new-session", "--setenv", "LANG", "C"]


def run(cmd, timeout=120, stdin=subprocess.DEVNULL):
    """(status, stdout bytes, stderr text); 124 on timeout, 127 when it cannot start."""
    try:
        r = subprocess.run(cmd, stdin=stdin, capture_output=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, b"", "timed out after %ss" % timeout
    except OSError as e:
        return 127, b"", str(e)


def first_line(text, path):
    lines = [ln for ln in text.replace(path, "FILE").splitlines() if ln.strip()]
    return lines[-1][:240] if lines else ""


# -- facts about a file ------------------------------------------------------------------------

def facts_of(path):
    """What the rules below ask of a file: its type, whether it is a separate debug-info file
    (.dynamic is SHT_NOBITS), whether it has section headers, PT_DYNAMIC, PT_INTERP."""
    try:
        e = elfmini.read(path)
    except (OSError, elfmini.ElfError) as ex:
        return {"unreadable": str(ex)}
    f = {"type": e.e_type, "machine": e.e_machine, "shnum": e.e_shnum, "shoff": e.e_shoff}
    dyn = e.segment(elfmini.PT_DYNAMIC)
    f["dynamic"] = dyn is not None and dyn["filesz"] > 0
    f["interp"] = e.segment(elfmini.PT_INTERP) is not None
    f["debug_info"] = common.is_debug_info(e)
    return f


# -- the allowed differences: each where patchelf is wrong -------------------------------------

def _nobits_read(d):
    return d["facts"].get("debug_info") and d["patchelf"]["ok"] and d["what"] in (
        "--print-interpreter", "--print-needed", "--print-soname")


def _no_section_headers(d):
    return "no section headers" in d["patchelf"]["message"] and d["elfpatch"]["ok"]


def _debug_info_runpath(d):
    return d["facts"].get("debug_info") and d["what"] in (
        "set-rpath", "add-rpath-long", "shrink-rpath") and not d["patchelf"].get("changed")


def _doubled_needed(d):
    return d["what"] == "add-needed" and d.get("already_needed")


VERSION_TAGS = ("VERNEED", "VERNEEDNUM", "VERSYM")


def _stale_version_needs(d):
    """patchelf's result differs from elfpatch's only in the version need records (and, once none
    is left, DT_VERSYM), which patchelf keeps for the library it removed."""
    if d["what"] != "remove-needed" or not (d["patchelf"]["ok"] and d["elfpatch"]["ok"]):
        return False
    rest = [[e for e in d[t].get("dyn") or [] if e[0] not in VERSION_TAGS] for t in ("patchelf", "elfpatch")]
    kept = [sum(1 for e in d[t].get("dyn") or [] if e[0] == "VERNEED") for t in ("patchelf", "elfpatch")]
    return rest[0] == rest[1] and kept[0] >= kept[1] and not d["elfpatch"].get("new_elflint")


ALLOWED = [
    ("nobits-read", _nobits_read,
     "a separate debug-info file: patchelf reads .interp, .dynamic or .dynstr where their "
     "SHT_NOBITS headers point, bytes of some other section, and succeeds by luck (it fails on "
     "most such files); the file has no dynamic section contents, and elfpatch says so (status 1)"),
    ("no-section-headers", _no_section_headers,
     "patchelf refuses any file without section headers ('no section headers'); no loader reads "
     "them, and elfpatch finds everything through the program headers"),
    ("debug-info-runpath", _debug_info_runpath,
     "a separate debug-info file: patchelf's run path edit succeeds without changing a byte, and "
     "so does elfpatch's (nixpkgs' hooks rely on it); listed for the record"),
    ("stale-version-needs", _stale_version_needs,
     "--remove-needed: patchelf keeps the removed library's version need records (.gnu.version_r, "
     "DT_VERNEEDNUM), so ld.so looks for a library that is no longer needed and stops on "
     "`dl-version.c: _dl_check_map_versions: Assertion 'needed != NULL' failed` when no loaded "
     "object answers to its name; elfpatch removes them, and DT_VERSYM with the last one "
     "(tests/elfpatch versions.rs)"),
    ("doubled-needed", _doubled_needed,
     "the file already needs the library: patchelf 0.19.3 adds a second DT_NEEDED naming it, "
     "elfpatch keeps the one entry (and says so): the loader uses only the first"),
]


def allowed(d):
    for name, pred, reason in ALLOWED:
        if pred(d):
            return name, reason
    return None


# -- print part --------------------------------------------------------------------------------

def print_task(task):
    path, tools = task
    facts = None
    out = []
    for opt in PRINTS:
        res = {}
        for name, exe in tools:
            rc, so, se = run([exe, opt, path])
            res[name] = {"ok": rc == 0, "rc": rc, "stdout": so, "message": first_line(se, path)}
        pe, ep = res["patchelf"], res["elfpatch"]
        problems = []
        if pe["ok"] != ep["ok"]:
            problems.append("patchelf %s, elfpatch %s" % ("succeeds" if pe["ok"] else "fails",
                                                          "succeeds" if ep["ok"] else "fails"))
        if pe["stdout"] != ep["stdout"]:
            problems.append("stdout %r vs %r" % (pe["stdout"][:80], ep["stdout"][:80]))
        if not pe["ok"] and LACKS.search(pe["message"]) and ep["rc"] != 1:
            problems.append("patchelf says the file lacks it, elfpatch's status is %d, not 1" % ep["rc"])
        rec = {"file": path, "what": opt, "pe_rc": pe["rc"], "ep_rc": ep["rc"]}
        if not pe["ok"]:
            rec["pe_message"] = pe["message"]
        if not ep["ok"]:
            rec["ep_message"] = ep["message"]
        if problems:
            if facts is None:
                facts = facts_of(path)
            d = {"what": opt, "facts": facts, "patchelf": pe, "elfpatch": ep}
            rec["problems"] = problems
            rec["allowed"] = allowed(d)
        out.append(rec)
    return out


# -- edit part ---------------------------------------------------------------------------------

def library_path(original, name):
    """Where the host loader finds NEEDED `name` of `original` (ld.so --list), or None."""
    rc, so, _ = run([common.HOST_LDSO, "--list", original], timeout=20)
    if rc != 0:
        return None
    for line in so.decode("utf-8", "replace").splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m and m.group(1) == name:
            return m.group(2)
    return None


def op_args(op, e, original, runnable):
    """The command line of `op` for this file, and whether the edited program should still run
    as the original does (an edit that keeps every library it loads); None: not applicable."""
    needed = e.needed()
    rpath = e.dyn_str("RUNPATH") or e.dyn_str("RPATH")
    if op == "set-rpath":
        new = (rpath + ":" if rpath else "") + "/opt/stubstrip-parity/lib"
        return ["--set-rpath", new], True
    if op == "add-rpath-long":
        return ["--add-rpath", LONG_RPATH], True
    if op == "add-needed":
        return ["--add-needed", ADD_NEEDED], True
    if op == "replace-needed-longer":
        if not needed:
            return None
        old = needed[0]
        path = library_path(original, old) if runnable else None
        if path and len(path) > len(old):
            return ["--replace-needed", old, path], True
        return ["--replace-needed", old, old + ".stubstrip-parity-longer-name"], False
    if op == "remove-needed":
        if not needed:
            return None
        stub = [n for n in needed if n in STUBS]
        return ["--remove-needed", (stub or needed)[-1]], bool(stub)
    if op == "shrink-rpath":
        return (["--shrink-rpath"], True) if rpath else None
    if op == "set-interpreter":
        interp = e.interp()
        if not interp or not interp.startswith("/"):
            return None
        # The same file by a longer path: the interpreter grows, the program still runs.
        return ["--set-interpreter", "/./././." + interp], True
    raise ValueError(op)


def version_of(prog, workdir):
    """What `prog --version` prints in a read-only sandbox: (status, stdout), or None."""
    rc, so, _ = run(SANDBOX + ["--ro-bind", workdir, workdir, prog, "--version"], timeout=10)
    return rc, so.replace(os.path.basename(prog).encode(), b"PROG")


def edit_outcome(exe, args, target, timeout):
    before = common.sha256(target)
    rc, so, se = run([exe] + args + [target], timeout=timeout)
    res = {"ok": rc == 0, "rc": rc, "message": first_line(se, target),
           "changed": common.sha256(target) != before, "size": os.path.getsize(target)}
    if rc == 0:
        try:
            e = elfmini.read(target)
            res["dyn"] = e.dynamic_normalized()
            res["interp"] = e.interp()
        except elfmini.ElfError as ex:
            res["unreadable"] = str(ex)
    return res


def edit_task(task):
    path, idx, workdir, tools, timeout, native = task
    d = os.path.join(workdir, "e%05d" % idx)
    # The sampled file and each tool's copy live one directory down, in directories named by
    # the harness: a file called `patchelf` or `elfpatch` can never collide with them.
    os.makedirs(os.path.join(d, "input"))
    original = os.path.join(d, "input", os.path.basename(path))
    shutil.copy2(path, original)
    recs = []
    try:
        e = elfmini.read(original)
        facts = facts_of(original)
        runnable = (facts.get("interp") and e.e_machine == native and os.access(original, os.X_OK)
                    and e.e_type in (2, 3))
        version = version_of(original, d) if runnable else None
        if version is not None and (version[0] != 0 or not version[1].strip()):
            version = None
        lint = common.elflint_messages(original)
        for op in EDITS:
            got = op_args(op, e, original, runnable)
            if got is None:
                continue
            args, keeps_running = got
            rec = {"file": path, "what": op, "command": " ".join(args)}
            outs = {}
            for name, exe in tools:
                target = os.path.join(d, "out-" + name, os.path.basename(path))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(original, target)
                outs[name] = edit_outcome(exe, args, target, timeout)
                if name == "elfpatch" and outs[name]["ok"] and lint is not None:
                    outs[name]["new_elflint"] = common.new_elflint(lint, common.elflint_messages(target))
                if version is not None and keeps_running and outs[name]["ok"]:
                    outs[name]["version"] = version_of(target, d) == version
            pe, ep = outs["patchelf"], outs["elfpatch"]
            problems = []
            if pe["ok"] != ep["ok"]:
                problems.append("patchelf %s, elfpatch %s" % (
                    "succeeds" if pe["ok"] else "fails (%s)" % pe["message"],
                    "succeeds" if ep["ok"] else "fails (%s)" % ep["message"]))
            if pe["ok"] and ep["ok"]:
                if pe.get("dyn") != ep.get("dyn"):
                    a, b = Counter(pe.get("dyn") or []), Counter(ep.get("dyn") or [])
                    problems.append("dynamic entries: only patchelf %s; only elfpatch %s" % (
                        common.fmt_entries(a - b), common.fmt_entries(b - a)))
                if pe.get("interp") != ep.get("interp"):
                    problems.append("PT_INTERP %r vs %r" % (pe.get("interp"), ep.get("interp")))
            if ep.get("unreadable"):
                problems.append("elfpatch's result unreadable: %s" % ep["unreadable"])
            if ep.get("new_elflint"):
                problems.append("new eu-elflint messages on elfpatch's result: %s"
                                % "; ".join(ep["new_elflint"][:3]))
            if ep.get("version") is False and pe.get("version") is not False:
                problems.append("the program no longer prints --version after elfpatch's edit")
            rec["version_checked"] = "version" in ep
            if pe["ok"] and ep["ok"]:
                # Bytes each tool added (elfpatch aims at no more than patchelf's): reported only.
                size = os.path.getsize(original)
                rec["growth"] = {"patchelf": pe["size"] - size, "elfpatch": ep["size"] - size}
            rec["result"] = ("both-ok" if pe["ok"] and ep["ok"] else
                             "both-failed" if not (pe["ok"] or ep["ok"]) else "one-failed")
            if not pe["ok"]:
                rec["pe_message"] = pe["message"]
            if not ep["ok"]:
                rec["ep_message"] = ep["message"]
            if pe.get("version") is False and "version" in pe:
                rec["patchelf_breaks_version"] = True
            if problems:
                info = {"what": op, "facts": facts, "patchelf": pe, "elfpatch": ep,
                        "already_needed": op == "add-needed" and ADD_NEEDED in e.needed()}
                rec["problems"] = problems
                rec["allowed"] = allowed(info)
            recs.append(rec)
    except (OSError, elfmini.ElfError) as ex:
        recs.append({"file": path, "what": "read", "problems": ["unreadable: %s" % ex], "allowed": None})
    shutil.rmtree(d, ignore_errors=True)
    return recs


def edit_candidates(files, max_size):
    """The dynamically linked executables and libraries among files (no debug-info files)."""
    out = []
    for f in files:
        try:
            if os.path.getsize(f) > max_size:
                continue
        except OSError:
            continue
        facts = facts_of(f)
        if facts.get("type") in (2, 3) and facts.get("dynamic") and not facts.get("debug_info"):
            out.append(f)
    return out


# -- report ------------------------------------------------------------------------------------

def report(part, recs, log, show):
    """Prints the part's table, every allowed difference and every other; returns how many
    differences were not allowed."""
    per = {}
    for r in recs:
        c = per.setdefault(r["what"], Counter())
        c["compared"] += 1
        if r.get("problems"):
            c["allowed" if r.get("allowed") else "DIFFERENT"] += 1
        else:
            c["same"] += 1
            if r.get("pe_rc", 0) != 0 or r.get("result") == "both-failed":
                c["both fail"] += 1
        if r.get("version_checked"):
            c["--version run"] += 1
    cols = ["compared", "same", "both fail", "allowed", "DIFFERENT"] + (
        ["--version run"] if part == "edit" else [])
    log("%-24s" % part + "".join("%14s" % c for c in cols))
    tot = Counter()
    for what, c in per.items():
        log("%-24s" % what + "".join("%14d" % c[k] for k in cols))
        tot.update(c)
    log("%-24s" % "total" + "".join("%14d" % tot[k] for k in cols))
    allowed_recs = [r for r in recs if r.get("problems") and r.get("allowed")]
    if allowed_recs:
        log("")
        log("-- %s: %d allowed differences (patchelf is wrong), each named:" % (part, len(allowed_recs)))
        reasons = {}
        for r in allowed_recs:
            name, reason = r["allowed"]
            reasons[name] = reason
            log("   [%s] %s %s: %s" % (name, r["what"], r["file"], "; ".join(r["problems"])[:300]))
        for name, reason in sorted(reasons.items()):
            log("   [%s] %s" % (name, reason))
    grown = [r for r in recs if "growth" in r]
    if grown:
        log("")
        log("bytes added where both succeed (reported, not judged):")
        log("%-24s%10s%16s%14s%16s%14s%10s" % ("", "edits", "patchelf total", "largest",
                                              "elfpatch total", "largest", "more"))
        for what in [w for w in per if any(r["what"] == w for r in grown)] + ["total"]:
            rs = [r for r in grown if what in ("total", r["what"])]
            pe = [r["growth"]["patchelf"] for r in rs]
            ep = [r["growth"]["elfpatch"] for r in rs]
            more = sum(1 for a, b in zip(pe, ep) if b > a)
            log("%-24s%10d%16d%14d%16d%14d%10d" % (what, len(rs), sum(pe), max(pe), sum(ep), max(ep), more))
    bad = [r for r in recs if r.get("problems") and not r.get("allowed")]
    if bad:
        log("")
        log("-- %s: %d DIFFERENCES NOT EXPLAINED (first %d):" % (part, len(bad), min(show, len(bad))))
        for r in bad[:show]:
            log("   %s %s: %s" % (r["what"], r["file"], "; ".join(r["problems"])[:400]))
    return len(bad), tot


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patchelf", help="patchelf 0.19.3 (default: found as the other suites find it)")
    ap.add_argument("--elfpatch", help="elfpatch (default target/release/elfpatch)")
    ap.add_argument("--roots", nargs="+", default=ROOTS)
    ap.add_argument("--parts", default="print,edit", help="print, edit or both (default)")
    ap.add_argument("--print-limit", type=int, help="at most N files for the print part (default all)")
    ap.add_argument("--edit-limit", type=int, default=300, help="files for the edit part (default 300)")
    ap.add_argument("--max-size", type=int, default=64, help="MiB: larger files are left out of the edit part")
    ap.add_argument("--min-files", type=int, default=0,
                    help="fail when the print part has fewer files (CI: 2000) or the edit part fewer "
                         "than --edit-limit")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--show", type=int, default=80)
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    def log(s=""):
        print(s, flush=True)

    t0 = time.monotonic()
    tools = []
    for name, explicit in (("patchelf", args.patchelf), ("elfpatch", args.elfpatch)):
        got, problems = common.editors.resolve_editors(name, args.patchelf, args.elfpatch, log=log)
        if problems or not got:
            log("EDITOR UNAVAILABLE: %s" % "; ".join(problems))
            return 2
        tools.append((name, got[0][1]))
        log("%s: %s (%s)" % (name, got[0][1], got[0][2]))
    parts = set(args.parts.split(","))
    if "edit" in parts:
        # The --version check must run, or fail here: a sandbox that cannot start would make every
        # program look as if it printed nothing, and the check would silently not happen.
        rc, out, err = run(SANDBOX + ["/bin/echo", "sandbox"], timeout=30)
        if rc != 0 or out != b"sandbox\n":
            log("bwrap (bubblewrap) cannot run a program read-only here (status %d: %s); "
                "apt-get install bubblewrap, and run as root or with user namespaces" % (rc, err.strip()))
            return 2
    files = common.find_elf_files(args.roots)
    log("%d ELF files under %s" % (len(files), " ".join(args.roots)))
    failed = 0
    doc = {"suite": "stubstrip parity", "roots": args.roots, "found": len(files)}
    if "print" in parts:
        sample = common.sample(files, args.print_limit)
        if len(sample) < args.min_files:
            log("FAIL: %d files for the print part, fewer than --min-files %d" % (len(sample), args.min_files))
            failed += 1
        t = time.monotonic()
        with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            recs = [r for rs in pool.map(print_task, [(f, tools) for f in sample]) for r in rs]
        log("")
        bad, tot = report("print", recs, log, args.show)
        failed += bad
        log("print: %d files x %d options = %d comparisons, %d the same, %d allowed, %d not; %.0f s"
            % (len(sample), len(PRINTS), tot["compared"], tot["same"], tot["allowed"], bad,
               time.monotonic() - t))
        doc["print"] = recs
    if "edit" in parts:
        t = time.monotonic()
        candidates = edit_candidates(files, args.max_size << 20)
        sample = common.sample(candidates, args.edit_limit)
        if len(sample) < min(args.edit_limit, args.min_files or 0):
            log("FAIL: %d files for the edit part, fewer than %d" % (len(sample), args.edit_limit))
            failed += 1
        native = elfmini.read(sys.executable if os.path.isfile(sys.executable) else "/bin/sh").e_machine
        workdir = tempfile.mkdtemp(prefix="stubstrip-parity-", dir=os.environ.get("TMPDIR", "/var/tmp"))
        tasks = [(f, i, workdir, tools, args.timeout, native) for i, f in enumerate(sample)]
        with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            recs = [r for rs in pool.map(edit_task, tasks, chunksize=1) for r in rs]
        shutil.rmtree(workdir, ignore_errors=True)
        log("")
        bad, tot = report("edit", recs, log, args.show)
        failed += bad
        if tot["--version run"] == 0:
            log("FAIL: no edited program was run with --version: the check did not happen")
            failed += 1
        log("edit: %d files (of %d dynamically linked, up to %d MiB) x %d edits = %d comparisons, "
            "%d the same, %d allowed, %d not; --version run on %d results; %.0f s"
            % (len(sample), len(candidates), args.max_size, len(EDITS), tot["compared"], tot["same"],
               tot["allowed"], bad, tot["--version run"], time.monotonic() - t))
        doc["edit"] = recs
    log("")
    log("total time %.0f s; %s" % (time.monotonic() - t0, "FAILED" if failed else "passed"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=lambda b: b.decode("utf-8", "replace"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
