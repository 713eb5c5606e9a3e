#!/usr/bin/env bash
# tests/gpu/torch.sh: the problem and the fix with PyTorch, on a real GPU.
#
# The users' report (ollama, llama.cpp, torch on non-NixOS machines): CUDA programs built by Nix
# carry the stubs output's lib directory in RUNPATH, find NVIDIA's stub libcuda there before the
# driver, and fail with "CUDA driver is a stub library". This reproduces it with an installed
# PyTorch (pip wheels: torch and NVIDIA's runtime wheels) and shows `stubstrip fix` curing it:
#
# 1. copies the site-packages directory that holds torch (hard links where the file system allows,
#    and real copies of the files that get edited, so the installed torch is never touched);
# 2. puts a Nix-store-shaped stubs directory (NVIDIA's stub libcuda.so and the libcuda.so.1 link
#    nixpkgs' cuda_cudart adds) at the front of RUNPATH of every library that loads libcuda.so.1
#    (NEEDED or dlopen, which searches the caller's RUNPATH: libcudart, libcublasLt, ...) and of
#    libtorch_cuda and libc10_cuda, as a Nix build leaves them;
# 3. imports torch from the copy (LD_LIBRARY_PATH unset: it is searched before RUNPATH and would
#    hide the problem) and shows CUDA failing with the stub error;
# 4. runs `stubstrip fix --driver-link DIR` over the whole copy (DIR links to the driver's
#    libraries, as /run/opengl-driver/lib does on NixOS) and `stubstrip check`;
# 5. imports torch again: the GPU is found and a matrix product on it matches the CPU's;
# 6. checks that the installed torch is unchanged; prints `N passed, M failed`.
#
# Before and after the fix, `stubstrip explain` of libtorch_cuda.so must show libcuda.so.1 as
# libcudart's dlopen (the model's NVIDIA table: libtorch_cuda never names libcuda.so.1 in
# DT_NEEDED), resolving to the stub before the fix and to the driver link after, and say so in
# its first 5 lines.
#
# Needs: a Python with torch built for CUDA (TORCH_PYTHON, default python3), NVIDIA's stub
# libcuda.so (CUDA_STUB, default: found under the CUDA toolkit), a driver, readelf, and release
# builds of stubstrip and elfpatch (STUBSTRIP / ELFPATCH, default target/release/*). The log is
# also written to $OUT/gpu-torch.log when OUT is set.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=torch
# shellcheck source=tests/gpu/lib.sh
. "$HERE/lib.sh"
PY=${TORCH_PYTHON:-python3}
# RUNPATH, or RPATH where the file has only that (the pip wheels' libraries have DT_RPATH).
runpath() { "$ELFPATCH" --print-rpath "$1"; }
tagOf() { readelf -d "$1" | grep -o '(R[UN]*PATH)' | tr -d '()' | paste -sd, -; }

######################################################################
# What this machine has.

find_cuda
site=$("$PY" -c 'import os, importlib.util as u; print(os.path.dirname(os.path.dirname(u.find_spec("torch").origin)))' 2>/dev/null) ||
  die "$PY cannot find torch (set TORCH_PYTHON)"

# The libraries a Nix build would leave with the stub directory in RUNPATH, and through which the
# stub would be found: those that load libcuda.so.1, by NEEDED or by dlopen (libcudart,
# libcublasLt, ... name it in their bytes; a dlopen searches the caller's RUNPATH), and torch's
# CUDA libraries. The first object to look for libcuda.so.1 decides which one the process gets.
mapfile -t targets < <(
  cd "$site" && find . -type f -name '*.so*' -print0 | xargs -0 -r -P 8 grep -l -a -F 'libcuda.so.1' 2>/dev/null
  cd "$site" && find . -type f \( -name 'libtorch_cuda.so' -o -name 'libc10_cuda.so' \)
)
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -u | while IFS= read -r t; do
  [[ $(head -c 4 "$site/$t" | od -An -c | tr -d ' ') == '177ELF' ]] && printf '%s\n' "$t"
done)
((${#targets[@]})) || die "no CUDA libraries under $site"

section "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(nvidia-smi unavailable)"
"$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
echo "site-packages: $site ($(du -sh "$site" 2>/dev/null | cut -f1))"
echo "NVIDIA stub:   $stub ($(stat -c %s "$stub") bytes)"
echo "driver:        $(readlink -f "$driverDir/libcuda.so.1")"
echo "stubstrip:     $("$STUBSTRIP" --version)"
check "the installed torch has no stub entry to begin with" "$STUBSTRIP" check "$site"

######################################################################
# The copy, shaped as a Nix build leaves it.

W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-torch.XXXXXX")
trap 'rm -rf "$W"' EXIT
stubDir=$W/nix/store/0k7c9m2xvq1dbz4h8s5pyj3wnf6rl0ga-cuda_cudart-13.0-stubs/lib
driverLink=$W/run/opengl-driver/lib
make_stub_dir "$stubDir"
make_driver_link "$driverLink"

section "copy of $site, stub directory in RUNPATH"
start=$SECONDS
if cp -al "$site" "$W/site" 2>/dev/null; then how="hard links"; else
  rm -rf "$W/site"
  cp -a --reflink=auto "$site" "$W/site" || die "cannot copy $site"
  how="a full copy"
fi
echo "copied with $how in $((SECONDS - start)) s"
declare -A stampBefore
for t in "${targets[@]}"; do
  stampBefore[$t]=$(stat -c '%i %s %Y' "$site/$t")
  # Edits happen in place: a file still linked to the installed one must become its own copy.
  cp --remove-destination -p "$site/$t" "$W/site/$t"
  old=$(runpath "$W/site/$t")
  # As autoPatchelfHook does with patchelf --set-rpath: the entries become DT_RUNPATH.
  "$ELFPATCH" --set-rpath "$stubDir${old:+:$old}" "$W/site/$t" || die "elfpatch could not set up $t"
  echo "$t: $(tagOf "$W/site/$t") [$(runpath "$W/site/$t")], was [$old]"
done
echo "${#targets[@]} libraries given the stub directory"
nlinked=$(for t in "${targets[@]}"; do stat -c %h "$W/site/$t"; done | sort -u)
check "the files to edit are not linked to the installed ones" test "$nlinked" = 1

probe='
import sys, torch
print("torch from", torch.__file__)
try:
    ok = torch.cuda.is_available()
    print("cuda available:", ok)
    x = torch.randn(512, 512, device="cuda")
    y = (x @ x).cpu()
    ref = x.cpu() @ x.cpu()
    err = float((y - ref).abs().max())
    print("device:", torch.cuda.get_device_name(0))
    print("matmul on the GPU vs the CPU, max abs difference:", err)
    sys.exit(0 if err < 1e-2 else 3)
except Exception as e:
    print("error:", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    sys.exit(2)
'
# -S: only the copy is on sys.path (plus the standard library), so torch and everything it loads
# through $ORIGIN come from the copy.
py_copy() { PYTHONPATH=$W/site "$PY" -S -c "$probe" 2>&1; }

# Where the loader found libcuda.so.1 (the first object that needed or opened it decides).
whence() {
  PYTHONPATH=$W/site LD_DEBUG=libs LD_DEBUG_OUTPUT=$W/ld "$PY" -S -c "$probe" >/dev/null 2>&1
  grep -h -A3 'find library=libcuda\.so' "$W"/ld.* | sed 's/^ *[0-9]*: *//' | head -12
  grep -h 'calling init: .*libcuda\.so' "$W"/ld.* | sed 's/^ *[0-9]*: *//' | sort -u
  rm -f "$W"/ld.*
}

# `stubstrip explain` of libtorch_cuda.so: the dlopen of libcuda.so.1 by libcudart (however it is
# resolved: found by libcudart's own RUNPATH, or the object an earlier dlopen of the same name
# loaded) must land under WANT. The text answers first: within its first 5 lines, the first line
# about libcuda.so.1 names the file under WANT (printed, with the whole text's length).
torchCuda=$(cd "$W/site" && find . -type f -name libtorch_cuda.so | head -1)
explainCuda() { # WANT
  "$STUBSTRIP" explain --ld-library-path '' "$W/site/$torchCuda" >"$W/explain.txt" 2>&1
  echo "    explain: $(wc -l <"$W/explain.txt") lines; the first 5:"
  head -5 "$W/explain.txt" | sed "s|$W|\$W|g; s/^/    | /" | cut -c1-300
  head -5 "$W/explain.txt" | grep -m1 'libcuda\.so\.1' | grep -qF "=> $1" || {
    echo "    the first lines do not say that libcuda.so.1 comes from $1"
    return 1
  }
  "$STUBSTRIP" explain --json --ld-library-path '' "$W/site/$torchCuda" >"$W/explain.json" 2>/dev/null
  "$PY" - "$W/explain.json" "$1" <<'PYEOF'
import json, sys
v = json.load(open(sys.argv[1]))
want = sys.argv[2]
hits = [l for l in v["lookups"]
        if l["name"] == "libcuda.so.1" and l.get("dlopen_known_from")
        and l["requested_by"].rsplit("/", 1)[-1].startswith("libcudart")]
for l in hits:
    print("    libcudart's dlopen(libcuda.so.1):", l["result"], l["path"], l.get("found_via"),
          "STUB" if l["stub"] else "")
# Some dlopen by libcudart loads it, found by libcudart's own RUNPATH; every one lands under want.
found = [l for l in hits if l["result"] == "loaded" and l.get("found_via") == "RUNPATH"
         and l["search_list_of"].rsplit("/", 1)[-1].startswith("libcudart")]
sys.exit(0 if found and all((l["path"] or "").startswith(want) for l in hits) else 1)
PYEOF
}
[[ -n $torchCuda ]] || die "no libtorch_cuda.so in the copy"

section "before: stubstrip explain $torchCuda"
check "explain shows libcudart's dlopen of libcuda.so.1 resolving to the stub" explainCuda "$stubDir/"

section "before: torch from the copy"
before=$(py_copy)
rc=$?
echo "$before"
echo "libcuda: $(whence)"
check "torch is imported from the copy" grep -q "torch from $W/site" <<<"$before"
check "CUDA fails before the fix" test "$rc" -ne 0
check "the failure is the stub library" grep -qi "stub" <<<"$before"

section "stubstrip fix --driver-link $driverLink $W/site"
start=$(date +%s.%N)
"$STUBSTRIP" fix --driver-link "$driverLink" "$W/site"
rcFix=$?
end=$(date +%s.%N)
nfiles=$(find "$W/site" -type f | wc -l)
echo "stubstrip fix: exit $rcFix, $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s over $nfiles files"
check "stubstrip fix succeeds" test "$rcFix" -eq 0
check "stubstrip check finds no stub entry" "$STUBSTRIP" check "$W/site"
ok=1
for t in "${targets[@]}"; do
  rp=$(runpath "$W/site/$t")
  echo "$t: $(tagOf "$W/site/$t") [$rp]"
  [[ $rp == "$driverLink"* && $rp != *stubs* ]] || ok=0
done
check "every edited RUNPATH starts with the driver link and holds no stub directory" test "$ok" = 1

section "after: stubstrip explain $torchCuda"
check "explain shows libcudart's dlopen of libcuda.so.1 resolving to the driver link" explainCuda "$driverLink/"

section "after: torch from the copy"
after=$(py_copy)
rc=$?
echo "$after"
echo "libcuda: $(whence)"
check "torch finds the GPU and the matrix product matches the CPU's" test "$rc" -eq 0
check "CUDA reports the device" grep -q "^device: " <<<"$after"

section "the installed torch"
same=1
for t in "${targets[@]}"; do
  [[ $(stat -c '%i %s %Y' "$site/$t") == "${stampBefore[$t]}" ]] || same=0
done
check "the installed libraries are unchanged (inode, size, mtime)" test "$same" = 1
check "the installed torch still has no stub entry" "$STUBSTRIP" check "$site"

echo
echo "$pass passed, $failed failed"
((failed == 0))
