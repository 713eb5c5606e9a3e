#!/usr/bin/env python3
"""Times `stubstrip audit` with the loader model following dlopen()s against without (--no-dlopen),
in the same run, on one tree.

`audit` resolves every loadable object of the tree as if it were the program started: with
dlopen()s followed it reads every library each file loads (its dynamic section, notes and
.rodata, for the NVIDIA table), which without a cache meant once per file that loads it. This
prints what following costs on top of the audit without it.

The tree (under a fresh work directory):

  sys/        a copy (`cp -a`) of --system-libs (default /usr/lib/x86_64-linux-gnu; --small: its
              first --sys-files ELF files by name), audited as it is: its libraries load the
              system's own copies;
  nix/store/  a CUDA-shaped part built with gcc: the stub libcuda.so.1 in cuda_cudart's stubs
              output, a libcudart.so.12 that dlopen()s libcuda.so.1 with the stubs in its
              RUNPATH (as a leaked stub would leave it), --libs libraries needing it, and
              --apps copies of a program needing all of them plus --apps copies of a program
              holding "libcuda.so.1" in .rodata (a libcudart_static one), all through absolute
              RUNPATHs into the tree.

Each run is preceded by one untimed read of every file of the tree; the variants alternate
within each of --repeat rounds; wall time (Python's clock around the process) and peak RSS (GNU
time's %M). Checked (exit 1 when a check fails): the dlopen-following run reports SS012 (a stub
loaded only through a dlopen) for libcudart, every library needing it and every CUDA program,
the run without reports none; with
--baseline BIN (e.g. a stubstrip built before the cache), its JSON reports equal this
binary's, mode by mode.

    python3 bench/audit_bench.py                   # the whole /usr/lib/x86_64-linux-gnu, 5 rounds
    python3 bench/audit_bench.py --small --repeat 1
    python3 bench/audit_bench.py --baseline /tmp/stubstrip-before --jobs 1

Python 3.11 standard library only; needs gcc, GNU time and target/release/stubstrip.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GNU_TIME = "/usr/bin/time"
NIX32 = "0123456789abcdfghijklmnpqrsvwxyz"

STUB = "int cuInit(unsigned f) { (void)f; return 34; }\n"
CUDART = ('#include <dlfcn.h>\n'
          'int cudart_probe(void) { return dlopen("libcuda.so.1", RTLD_NOW) != 0; }\n')
LIB = "int cudart_probe(void);\nint lib{k}_fn(void) {{ return cudart_probe() + {k}; }}\n"
STATIC_APP = ('#include <dlfcn.h>\n'
              'static const char cuda[] = "libcuda.so.1";\n'
              'int main(void) { return dlopen(cuda, RTLD_NOW) ? 0 : 1; }\n')


def store(tree, n, name):
    return os.path.join(tree, "nix/store", f"{NIX32[n:] + NIX32[:n]}-{name}")


def gcc(out, src, args):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    c = out + ".c"
    with open(c, "w") as f:
        f.write(src)
    subprocess.run(["gcc", "-o", out, c, *args], check=True)
    os.remove(c)


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def build_tree(tree, system_libs, sys_files, n_libs, n_apps):
    """Builds the tree; returns the number of its objects that load the stub only through a dlopen
    (each must get SS012): libcudart, every library needing it and every program."""
    sys_dir = os.path.join(tree, "sys")
    if sys_files is None:
        subprocess.run(["cp", "-a", system_libs, sys_dir], check=True)
    else:
        os.makedirs(sys_dir)
        names = sorted(n for n in os.listdir(system_libs)
                       if os.path.isfile(os.path.join(system_libs, n))
                       and not os.path.islink(os.path.join(system_libs, n))
                       and is_elf(os.path.join(system_libs, n)))
        for n in names[:sys_files]:
            shutil.copy2(os.path.join(system_libs, n), os.path.join(sys_dir, n))
    stubs = os.path.join(store(tree, 0, "cuda_cudart-12.8.90-stubs"), "lib")
    cudart = os.path.join(store(tree, 1, "cuda_cudart-12.8.90"), "lib")
    libs = os.path.join(store(tree, 2, "libfoo-1.0"), "lib")
    bins = os.path.join(store(tree, 3, "app-1.0"), "bin")
    so = lambda name: ["-shared", "-fPIC", f"-Wl,-soname,{name}"]
    gcc(os.path.join(stubs, "libcuda.so.1"), STUB, so("libcuda.so.1"))
    gcc(os.path.join(cudart, "libcudart.so.12"), CUDART,
        so("libcudart.so.12") + ["-ldl", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{stubs}"])
    needed = []
    for k in range(n_libs):
        name = f"libfoo{k}.so.1"
        gcc(os.path.join(libs, name), LIB.format(k=k),
            so(name) + [f"-L{cudart}", "-l:libcudart.so.12", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{cudart}"])
        needed.append(f"-l:{name}")
    calls = " + ".join(f"lib{k}_fn()" for k in range(n_libs)) or "0"
    protos = "".join(f"int lib{k}_fn(void);\n" for k in range(n_libs))
    app = os.path.join(bins, "app-0")
    gcc(app, f"{protos}int main(void) {{ return {calls}; }}\n",
        [f"-L{libs}", *needed, "-Wl,--enable-new-dtags", f"-Wl,-rpath,{libs}:{cudart}"])
    static_app = os.path.join(bins, "static-app-0")
    gcc(static_app, STATIC_APP, ["-ldl", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{stubs}"])
    for i in range(1, n_apps):
        shutil.copy2(app, os.path.join(bins, f"app-{i}"))
        shutil.copy2(static_app, os.path.join(bins, f"static-app-{i}"))
    return 1 + n_libs + 2 * n_apps


def read_every_file(tree):
    for d, _, names in os.walk(tree):
        for n in names:
            p = os.path.join(d, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                while f.read(1 << 20):
                    pass


def measured(cmd, tree):
    """(wall s, peak RSS KiB, stdout, rc) of cmd, after an untimed read of the whole tree."""
    read_every_file(tree)
    t0 = time.perf_counter()
    p = subprocess.run([GNU_TIME, "-f", "%e %M", *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss = int(p.stderr.rstrip("\n").splitlines()[-1].split()[1])
    return wall, rss, p.stdout, p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system-libs", default="/usr/lib/x86_64-linux-gnu")
    ap.add_argument("--sys-files", type=int, default=None,
                    help="copy only the first N ELF files of --system-libs (default: cp -a all of it)")
    ap.add_argument("--libs", type=int, default=10, help="libraries needing libcudart (default 10)")
    ap.add_argument("--apps", type=int, default=100, help="copies of each CUDA program (default 100)")
    ap.add_argument("--small", action="store_true", help="smoke size: 100 system files, 5 libraries, 20 apps")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=None, help="passed to stubstrip audit --jobs")
    ap.add_argument("--stubstrip", default=os.path.join(ROOT, "target/release/stubstrip"))
    ap.add_argument("--baseline", default=None, help="another stubstrip binary, timed the same way")
    ap.add_argument("--dir", default=None, help="where to make the work directory")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    if a.small:
        a.sys_files, a.libs, a.apps = 100 if a.sys_files is None else a.sys_files, 5, 20
    for tool in [a.stubstrip, GNU_TIME] + ([a.baseline] if a.baseline else []):
        if not os.access(tool, os.X_OK):
            sys.exit(f"audit_bench: {tool} is missing (cargo build --release -p stubstrip)")

    work = tempfile.mkdtemp(prefix="audit-bench-", dir=a.dir)
    try:
        tree = os.path.join(work, "tree")
        os.makedirs(tree)
        t0 = time.perf_counter()
        cuda_programs = build_tree(tree, a.system_libs, a.sys_files, a.libs, a.apps)
        files = sum(len(n) for _, _, n in os.walk(tree))
        print(f"tree: {files} files ({cuda_programs} CUDA objects), built in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)

        jobs = ["--jobs", str(a.jobs)] if a.jobs else []
        binaries = [("this", a.stubstrip)] + ([("baseline", a.baseline)] if a.baseline else [])
        modes = [("dlopen followed", []), ("--no-dlopen", ["--no-dlopen"])]
        runs = {}
        outputs = {}
        for r in range(a.repeat):
            for bname, binary in binaries:
                for mname, extra in modes:
                    cmd = [binary, "audit", "--json", "--deny", "never", *jobs, *extra, tree]
                    wall, rss, out, rc = measured(cmd, tree)
                    if rc != 0:
                        sys.exit(f"audit_bench: {' '.join(cmd)} exited {rc}")
                    runs.setdefault((bname, mname), []).append((wall, rss))
                    outputs[(bname, mname)] = out

        problems = []
        for bname, _ in binaries:
            followed = json.loads(outputs[(bname, "dlopen followed")])
            not_followed = json.loads(outputs[(bname, "--no-dlopen")])
            count = lambda v: len({x["file"] for x in v["findings"] if x["code"] == "SS012"})
            if count(followed) != cuda_programs:
                problems.append(f"{bname}: {count(followed)} SS012 findings with dlopen followed, "
                                f"want one per CUDA object ({cuda_programs})")
            if count(not_followed) != 0:
                problems.append(f"{bname}: {count(not_followed)} SS012 findings with --no-dlopen")
        if a.baseline:
            for mname, _ in modes:
                if outputs[("this", mname)] != outputs[("baseline", mname)]:
                    problems.append(f"{mname}: the JSON reports of this binary and the baseline differ")

        print(f"\n`stubstrip audit --json --deny never{' --jobs ' + str(a.jobs) if a.jobs else ''} TREE`, "
              f"{files} files, median of {a.repeat} (min-max):\n")
        print("| binary | mode | wall | peak RSS |")
        print("|---|---|---:|---:|")
        med = {}
        for (bname, mname), rs in runs.items():
            walls = [w for w, _ in rs]
            med[(bname, mname)] = statistics.median(walls)
            print(f"| {bname} | {mname} | {med[(bname, mname)]:.3f} s ({min(walls):.3f}-{max(walls):.3f}) "
                  f"| {max(r for _, r in rs) / 1024:.1f} MiB |")
        print()
        for bname, _ in binaries:
            ratio = med[(bname, "dlopen followed")] / med[(bname, "--no-dlopen")]
            print(f"- {bname}: dlopen followed / --no-dlopen = {ratio:.2f}x")
        if a.baseline:
            print(f"- dlopen followed, baseline / this = "
                  f"{med[('baseline', 'dlopen followed')] / med[('this', 'dlopen followed')]:.2f}x")
        for p in problems:
            print(f"- CHECK FAILED: {p}")
        if not problems:
            print(f"- checks: SS012 for each of the {cuda_programs} CUDA objects with dlopen followed, "
                  f"none without" + ("; same JSON reports as the baseline" if a.baseline else ""))
        return 1 if problems else 0
    finally:
        if a.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
