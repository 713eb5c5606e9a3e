#!/usr/bin/env python3
"""Times elfpatch against patchelf on a big shared library, in the same run.

Builds a shared library of --size bytes (default 1 GiB) whose RUNPATH is a long directory, then
for each tool, on fresh copies of it: a shrinking RUNPATH edit, a growing one (a >300-byte path),
and, for reference, --print-rpath. Each measurement is the median of --repeat runs; peak RSS comes
from wait4() of that one process. Before each run the copy is synced and then read once, untimed,
for both tools alike (--cold: synced only; see warm()). Prints a Markdown table with the ratios
patchelf/elfpatch.

    python3 bench/elfpatch_bench.py [--size 1G] [--repeat 5] [--patchelf PATH] [--elfpatch PATH] [--cold]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

GNU_TIME = "/usr/bin/time"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def build_library(work, size):
    """A shared library with `size` bytes of read-only data and a long RUNPATH."""
    asm = os.path.join(work, "blob.S")
    with open(asm, "w") as f:
        f.write('.section .rodata.blob,"a"\n.globl big_blob\n.type big_blob,@object\nbig_blob:\n')
        f.write(f".zero {size}\n.size big_blob,{size}\n")
        f.write('.section .note.GNU-stack,"",@progbits\n')
    c = os.path.join(work, "lib.c")
    with open(c, "w") as f:
        f.write("extern const char big_blob[];\nint blob_byte(long i) { return big_blob[i]; }\n")
    out = os.path.join(work, "libbig.so")
    old = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib:" + "/opt/previous/runpath/entry" * 2
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", out, c, asm, f"-Wl,-rpath,{old}"], check=True)
    return out


def run_measured(cmd):
    """Runs cmd once; returns (wall seconds, peak RSS in KiB).

    GNU time measures both: its own child is forked from a small process, whereas a child forked
    from this Python process would report Python's pages in its ru_maxrss high-water mark."""
    p = subprocess.run([GNU_TIME, "-f", "%e %M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = p.stderr.strip().splitlines()[-1]
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr}")
    wall, rss = last.split()
    return float(wall), int(rss)


def wall_of(cmd):
    """Wall time of cmd, measured here with a finer clock than GNU time's 10 ms."""
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


COLD = False


def warm(path):
    """Reads path once, untimed, unless --cold.

    On the 2-core VM this was written on, a run of a few milliseconds takes several times longer
    after the machine sat idle (the sync of a 1 GiB copy is such a wait) than back to back; the
    read puts both tools in the state a build leaves a library in (the fixup hooks before this
    one read it whole). patchelf reads the whole file itself, so it gains nothing from it."""
    if COLD:
        return
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def bench(tool, args, lib, work, repeat, copy):
    walls, rss = [], []
    for i in range(repeat):
        target = lib
        if copy:
            target = os.path.join(work, f"copy-{os.path.basename(tool)}")
            shutil.copyfile(lib, target)
            # The copy is in the page cache for both tools alike; flush it so that writeback of
            # the copy does not land in the measurement.
            os.sync()
        # Wall time with a precise clock on this copy; peak RSS on a second fresh copy.
        warm(target)
        walls.append(wall_of([tool, *args, target]))
        if copy:
            shutil.copyfile(lib, target)
            os.sync()
        warm(target)
        rss.append(run_measured([tool, *args, target])[1])
        if copy:
            check = subprocess.run([tool_for_check, "--print-rpath", target], capture_output=True, text=True, check=True).stdout.strip()
            if args[0] == "--set-rpath" and check != args[1]:
                sys.exit(f"{tool} {args}: RUNPATH is {check!r}")
            os.unlink(target)
            # Freeing a 1 GiB file is work the file system does in the background; let it finish
            # before the next measurement starts.
            os.sync()
    return statistics.median(walls), max(rss)


def main():
    global tool_for_check, COLD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1G")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--patchelf", default=shutil.which("patchelf"))
    ap.add_argument("--elfpatch", default=os.path.join(ROOT, "target/release/elfpatch"))
    ap.add_argument("--dir", default=None, help="work directory (needs about 3x --size free)")
    ap.add_argument("--cold", action="store_true", help="time right after the sync, without reading the copy first")
    a = ap.parse_args()
    COLD = a.cold
    size = parse_size(a.size)
    if not os.path.exists(a.elfpatch):
        subprocess.run(["cargo", "build", "--release", "-p", "elfpatch"], cwd=ROOT, check=True)
    pv = subprocess.run([a.patchelf, "--version"], capture_output=True, text=True).stdout.strip()
    tool_for_check = a.elfpatch
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="elfpatch-bench-") as work:
        t0 = time.time()
        lib = build_library(work, size)
        built = time.time() - t0
        real = os.path.getsize(lib)
        short = "/run/opengl-driver/lib"
        grown = "/" + "/".join(f"a-long-directory-component-{i:02d}" for i in range(12))
        rows = []
        for name, args, copy in [
            ("print RUNPATH", ["--print-rpath"], False),
            ("shrink RUNPATH", ["--set-rpath", short], True),
            ("grow RUNPATH (%d bytes)" % len(grown), ["--set-rpath", grown], True),
        ]:
            ew, er = bench(a.elfpatch, args, lib, work, a.repeat, copy)
            pw, pr = bench(a.patchelf, args, lib, work, a.repeat, copy)
            rows.append((name, pw, pr, ew, er))
        # The floor under every wall time here: starting a process that does nothing, from this
        # same harness. elfpatch's own work is its wall time minus this.
        floor = statistics.median(wall_of(["/bin/true"]) for _ in range(50))
        print(f"library: {real / (1 << 20):.0f} MiB (built in {built:.1f} s); patchelf: {pv}; median of {a.repeat} runs; "
              + ("each run right after a sync (--cold)" if COLD else "each run after a sync and one untimed read of the copy"))
        print(f"process start-up floor (/bin/true from this harness, median of 50): {floor * 1000:.2f} ms")
        print()
        print("| operation | patchelf wall | patchelf peak RSS | elfpatch wall | elfpatch peak RSS | speed-up | RSS ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, pw, pr, ew, er in rows:
            print(f"| {name} | {pw * 1000:.1f} ms | {pr / 1024:.1f} MiB | {ew * 1000:.2f} ms | {er / 1024:.1f} MiB | {pw / ew:.0f}x | {pr / er:.0f}x |")


if __name__ == "__main__":
    main()
