#!/usr/bin/env python3
"""One growing RUNPATH edit of every shared library of PyTorch and NVIDIA's wheels: elfpatch
against patchelf 0.19.3, timed in the same run (tests/gpu/README.md, "Editing torch's libraries").

    python3 tests/gpu/edit_bench.py --elfpatch PATH --patchelf PATH [--rounds 3] [--dir DIR]
                                    [--libs DIR ...] [--require-speedup 60] [--require-max-ms 10]

The libraries: every ELF shared object in torch/lib and nvidia/*/lib of the site-packages that
holds torch (found without importing it), or in the --libs directories. For each library, in each
round: a fresh copy (read once, untimed, as a build leaves a library it just wrote), then one edit
by each tool, in alternating order from round to round, each on its own fresh copy: the RUNPATH
gets a CUDA stub directory in front, as autoPatchelfHook leaves it (`--set-rpath STUBS:OLD`, a
growing edit). Timed: the wall time of the process, from this script. Checked: both results read
back with the new RUNPATH (`elfpatch --print-rpath`), and the bytes each tool added.

Prints one line per library (the median over the rounds of each tool's time, the bytes added),
then each round's totals and the ratio patchelf/elfpatch, and libtorch_cpu's times. Exits 1 when a
result does not read back, or when a --require-* goal fails: the smallest round ratio below
--require-speedup, or libtorch_cpu's elfpatch edit (the median of its rounds) above
--require-max-ms.
"""
import argparse
import glob
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STUBS = "/nix/store/0k7c9m2xvq1dbz4h8s5pyj3wnf6rl0ga-cuda_cudart-13.0-stubs/lib"


def torch_dirs():
    """torch/lib and nvidia/*/lib of the site-packages that holds torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("edit_bench: no torch here (give --libs)")
    site = os.path.dirname(list(spec.submodule_search_locations)[0])
    return [os.path.join(site, "torch", "lib"), *sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))]


def is_shared_object(path):
    """An ELF file of type ET_DYN with a program header of type PT_DYNAMIC, 64-bit little-endian."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return False
            if int.from_bytes(head[16:18], "little") != 3:
                return False
            phoff = int.from_bytes(head[32:40], "little")
            phentsize = int.from_bytes(head[54:56], "little")
            phnum = int.from_bytes(head[56:58], "little")
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    return any(int.from_bytes(table[i:i + 4], "little") == 2 for i in range(0, len(table), phentsize))


def libraries(dirs):
    out = []
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "*.so*"))):
            if os.path.isfile(p) and not os.path.islink(p) and is_shared_object(p):
                out.append(p)
    return out


def read_rpath(elfpatch, path):
    p = subprocess.run([elfpatch, "--print-rpath", path], capture_output=True, text=True)
    return p.stdout.rstrip("\n") if p.returncode == 0 else None


def fresh_copy(src, dst):
    shutil.copyfile(src, dst)
    with open(dst, "rb") as f:
        while f.read(1 << 24):
            pass


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elfpatch", required=True)
    ap.add_argument("--patchelf", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work directory (room for the largest library twice)")
    ap.add_argument("--libs", nargs="*", help="directories of libraries (default: torch's and NVIDIA's)")
    ap.add_argument("--require-speedup", type=float, default=None)
    ap.add_argument("--require-max-ms", type=float, default=None,
                    help="for libtorch_cpu's edit: its median over the rounds")
    a = ap.parse_args()
    tools = [("elfpatch", a.elfpatch), ("patchelf", a.patchelf)]
    for name, tool in tools:
        v = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"{name}: {tool}: {v}")
    libs = libraries(a.libs or torch_dirs())
    total = sum(os.path.getsize(p) for p in libs)
    print(f"{len(libs)} shared libraries, {total / (1 << 30):.2f} GiB; {a.rounds} rounds")
    floor = statistics.median(timed(["/bin/true"]) for _ in range(50))
    print(f"process start-up floor (/bin/true from this script, median of 50): {floor * 1000:.2f} ms")
    failures = []
    # times[name][lib] = [seconds per round]; added[name][lib] = bytes
    times = {n: {p: [] for p in libs} for n, _ in tools}
    added = {n: {} for n, _ in tools}
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="edit-bench-") as work:
        for r in range(a.rounds):
            order = tools if r % 2 == 0 else tools[::-1]
            for lib in libs:
                old = read_rpath(a.elfpatch, lib)
                new = STUBS + (":" + old if old else "")
                for name, tool in order:
                    copy = os.path.join(work, name + "-" + os.path.basename(lib))
                    fresh_copy(lib, copy)
                    try:
                        times[name][lib].append(timed([tool, "--set-rpath", new, copy]))
                    except RuntimeError as e:
                        failures.append(f"{name}: {e}")
                        continue
                    added[name][lib] = os.path.getsize(copy) - os.path.getsize(lib)
                    if read_rpath(a.elfpatch, copy) != new:
                        failures.append(f"{name}: {lib}: the RUNPATH does not read back as set")
                    os.unlink(copy)
    med = lambda v: statistics.median(v) if v else float("nan")
    print()
    print("| library | size | elfpatch (median) | patchelf (median) | ratio | elfpatch adds | patchelf adds |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for lib in libs:
        e, p = med(times["elfpatch"][lib]), med(times["patchelf"][lib])
        print(f"| {os.path.relpath(lib, os.path.dirname(os.path.dirname(lib)))} | {os.path.getsize(lib) / (1 << 20):.1f} MiB "
              f"| {e * 1000:.2f} ms | {p * 1000:.1f} ms | {p / e:.0f}x | {added['elfpatch'].get(lib, 0):,} "
              f"| {added['patchelf'].get(lib, 0):,} |")
    print()
    ratios = []
    for r in range(a.rounds):
        e = sum(v[r] for v in times["elfpatch"].values() if len(v) > r)
        p = sum(v[r] for v in times["patchelf"].values() if len(v) > r)
        ratios.append(p / e)
        print(f"round {r + 1}: elfpatch {e:.3f} s, patchelf {p:.3f} s: {p / e:.1f}x")
    ea, pa = sum(added["elfpatch"].values()), sum(added["patchelf"].values())
    print(f"bytes added over the {len(libs)} libraries: elfpatch {ea:,}, patchelf {pa:,}")
    cpu = [lib for lib in libs if os.path.basename(lib).startswith("libtorch_cpu.so")]
    for lib in cpu:
        e, p = times["elfpatch"][lib], times["patchelf"][lib]
        print(f"libtorch_cpu ({os.path.getsize(lib) / (1 << 20):.0f} MiB): elfpatch "
              f"{', '.join(f'{x * 1000:.2f}' for x in e)} ms; patchelf {', '.join(f'{x * 1000:.0f}' for x in p)} ms")
        reads = [timed([a.elfpatch, "--print-rpath", lib]) for _ in range(5)]
        print(f"libtorch_cpu: elfpatch --print-rpath (the headers and the dynamic array's strings): "
              f"{statistics.median(reads) * 1000:.2f} ms (median of 5)")
        if a.require_max_ms is not None and med(e) * 1000 > a.require_max_ms:
            failures.append(f"libtorch_cpu: elfpatch took {med(e) * 1000:.2f} ms (median), over {a.require_max_ms} ms")
    if a.require_speedup is not None and min(ratios) < a.require_speedup:
        failures.append(f"speed-up {min(ratios):.1f}x in the slowest round, under {a.require_speedup}x")
    for f in failures:
        print(f"FAIL: {f}")
    print(f"edit_bench: {len(failures)} failure(s)" if failures else "edit_bench: every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
