"""The sweeps' own shared pieces (sweep.py, wheels.py, differential.py):
finding ELF files, sampling them, loading and resolving them, comparing
dynamic entries.  What they share with the cross suite (running tools,
hashing, eu-elflint) is ../cross/harness.py, re-exported here."""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cross"))
import editors  # noqa: E402,F401  (re-exported)
import elfmini  # noqa: E402
import harness  # noqa: E402
from harness import clip, elflint_messages, fmt_entries, new_elflint, sh, sha256  # noqa: E402,F401  (re-exported)

DEFAULT_ROOTS = ["/usr/bin", "/usr/lib", "/usr/libexec"]
HOST_LDSO = "/lib64/ld-linux-x86-64.so.2"


def find_elf_files(roots):
    """Sorted list of regular ELF files (by magic) under roots, symlinks
    skipped, hard links counted once."""
    seen = set()
    out = []
    for root in roots:
        for dp, dns, fns in os.walk(root):
            dns.sort()
            for fn in fns:
                p = os.path.join(dp, fn)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                if not os.path.stat.S_ISREG(st.st_mode) or st.st_size < 52:
                    continue
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                if elfmini.is_elf(p):
                    seen.add(key)
                    out.append(p)
    return sorted(out)


def is_debug_info(elf):
    """Whether elf is a separate debug-info file (`objcopy --only-keep-debug`): its `.dynamic`
    section is SHT_NOBITS. patchelf and elfpatch answer `--print-rpath` on it with nothing and
    make its run path edits succeed changing nothing (nixpkgs' hooks rely on that)."""
    try:
        return any(s["type"] == 8 and elfmini.section_name(elf, i) == ".dynamic"
                   for i, s in enumerate(elf.shdrs))
    except (elfmini.ElfError, KeyError, IndexError):
        return False


def sample(files, limit):
    """Deterministic, evenly spaced sample of at most limit files."""
    if not limit or limit >= len(files):
        return list(files)
    n = len(files)
    return [files[(i * n) // limit] for i in range(limit)]


def readelf_warnings(path):
    """Set of readelf -a stderr lines (stdout discarded), file name replaced."""
    rc, _, err = sh(["readelf", "-a", "-W", path], timeout=300, stdout=False)
    lines = {line.replace(path, "FILE").strip() for line in err.splitlines() if line.strip()}
    if rc not in (0, 1) and not lines:
        lines.add("readelf exited %d" % rc)
    return lines


def loads(path, timeout=20):
    """Does dlopen (through ctypes, RTLD_NOW) of path succeed in a fresh python?"""
    rc, _, err = sh([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", path],
                    timeout=timeout, env={"PATH": "/usr/bin:/bin", "LANG": "C"})
    return rc == 0, clip(err, 200)


_ADDR = re.compile(r"\s*\(0x[0-9a-f]+\)\s*$")


def resolves(path, timeout=20):
    """ld.so --list: (ok, sorted resolved lines without load addresses)."""
    rc, out, err = sh([HOST_LDSO, "--list", path], timeout=timeout,
                      env={"PATH": "/usr/bin:/bin", "LANG": "C"})
    lines = sorted(_ADDR.sub("", line).strip().replace(path, "FILE") for line in out.splitlines()
                   if line.strip() and "linux-vdso" not in line)
    ok = rc == 0 and not any("not found" in line for line in lines)
    return ok, lines if ok else clip(err or out, 200)


def dyn_signature(elf):
    """Normalized dynamic entries: (ordered NEEDED list, Counter of the rest)."""
    d = elf.dynamic_normalized() or []
    needed = [v for k, v in d if k == "NEEDED"]
    rest = Counter((k, v) for k, v in d if k != "NEEDED")
    return needed, rest


def diff_signatures(a, b):
    """Human-readable differences between two dyn_signature()s ('' if same)."""
    (na, ra), (nb, rb) = a, b
    parts = []
    if na != nb:
        parts.append("NEEDED %s vs %s" % (na, nb))
    if ra != rb:
        parts.append("only first: %s; only second: %s" % (fmt_entries(ra - rb), fmt_entries(rb - ra)))
    return "; ".join(parts)
