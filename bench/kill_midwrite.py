#!/usr/bin/env python3
"""What a SIGKILL in the middle of an edit leaves behind, per editor.

    python3 bench/kill_midwrite.py --editor elfpatch=target/release/elfpatch \\
        --editor patchelf=PATH --editor arwen=tests/cross/arwen_editor.py [--file LIB] [--kills 12]

Each editor gets the same growing edit (`--set-rpath` to a 300-byte value: the dynamic string
table must move) of a copy of a large library (default libLLVM-14, 105 MiB). First one run to
completion gives the edited result and the run's duration T; then, on a fresh copy each time, the
edit is started and killed with SIGKILL after k·T/(N+1) for k = 1..N. The copy is then compared
with the original and the completed result: `original` (nothing written yet), `edited` (the edit
had finished), or `DAMAGED` with its size, how many bytes differ from both, and whether readelf
can still read its dynamic section. An editor that keeps the file whole leaves only the first
two. Standard library only; prints a table and, with --json, every kill.

An editor is NAME=COMMAND; COMMAND takes patchelf's options (tests/cross/arwen_editor.py turns
them into arwen's subcommands, with arwen writing the file itself).
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LLVM = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
RUNPATH = "/opt/stubstrip-kill-test/" + "x" * 276


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def differing(a, b):
    """Bytes of a's length that differ from b (b's missing tail counts as differing)."""
    n = 0
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if not x:
                return n
            n += sum(1 for i in range(len(x)) if i >= len(y) or x[i] != y[i]) if x != y else 0


def readable(path):
    """Whether readelf reads the dynamic section without an error or a warning."""
    r = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True)
    return r.returncode == 0 and not r.stderr.strip() and "(NEEDED)" in r.stdout


def verdict(path, original, edited):
    """original / edited / DAMAGED (pure comparison of the file with the two known states)."""
    d = digest(path)
    if d == original[1]:
        return {"state": "original"}
    if d == edited[1]:
        return {"state": "edited"}
    return {"state": "DAMAGED", "size": os.path.getsize(path),
            "differs_from_original": differing(path, original[0]),
            "differs_from_edited": differing(path, edited[0]),
            "readelf_reads_dynamic": readable(path)}


def run_killed(cmd, delay):
    # A session of its own: the kill reaches the editor's children too (arwen_editor.py runs
    # arwen as one).
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    time.sleep(delay)
    finished = p.poll() is not None
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    # The group's other members are gone once the kill is delivered; wait until none is left.
    while subprocess.run(["pgrep", "-g", str(p.pid)], capture_output=True).returncode == 0:
        time.sleep(0.01)
    return finished


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--editor", action="append", required=True, help="NAME=COMMAND")
    ap.add_argument("--file", default=LLVM)
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--json")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kill-midwrite.")
    results = {}
    try:
        original = os.path.join(work, "original")
        shutil.copyfile(args.file, original)
        original_state = (original, digest(original))
        for spec in args.editor:
            name, command = spec.split("=", 1)
            edited = os.path.join(work, name + ".edited")
            shutil.copyfile(original, edited)
            start = time.monotonic()
            subprocess.run([command, "--set-rpath", RUNPATH, edited], check=True)
            took = time.monotonic() - start
            edited_state = (edited, digest(edited))
            kills = []
            for k in range(1, args.kills + 1):
                victim = os.path.join(work, name + ".victim")
                shutil.copyfile(original, victim)
                delay = took * k / (args.kills + 1)
                finished = run_killed([command, "--set-rpath", RUNPATH, victim], delay)
                v = verdict(victim, original_state, edited_state)
                v.update(delay_ms=round(delay * 1000, 1), finished_before_kill=finished)
                kills.append(v)
                print("%-9s kill at %8.1f ms: %s" % (name, delay * 1000, v), flush=True)
            results[name] = {"run_ms": round(took * 1000, 1),
                             "size_added": os.path.getsize(edited) - os.path.getsize(original),
                             "kills": kills}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| editor | one run | kills | original | edited | damaged |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        states = [k["state"] for k in r["kills"]]
        print("| %s | %.0f ms | %d | %d | %d | %d |" % (
            name, r["run_ms"], len(states), states.count("original"), states.count("edited"),
            states.count("DAMAGED")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"file": args.file, "runpath_len": len(RUNPATH), "editors": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
