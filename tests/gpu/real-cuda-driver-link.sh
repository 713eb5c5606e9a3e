#!/usr/bin/env bash
# tests/gpu/real-cuda-driver-link.sh BUNDLE: `stubstrip driver-link` with the Nix-built programs of
# the real-cuda chain (tests/nixpkgs/README.md, real-cuda; BUNDLE is the `bundle/` that `run.sh
# real-cuda` left: closure.tar.xz, programs.txt). On the GPU machine, which is not NixOS, as root,
# inside a private mount namespace (`unshare -m`) with a tmpfs on /run (the machine's /run is never
# touched):
#
# 1. unpacks the closures under /nix/store and takes the programs of our hook's variants (`ours`,
#    `oursNoPropagate`): nixpkgs' fixup with our hook left /run/opengl-driver/lib in their RUNPATH;
# 2. before: no driver link; they fail with the loader's "libcuda.so.1: cannot open shared object
#    file". Their interpreter is the host's loader (nixpkgs' native stdenv), which would also look
#    in the host's ld.so.cache and default directories; a loader of Nix's reads neither, so during
#    each run both are hidden, in the namespace only: an empty file bind-mounted over
#    /etc/ld.so.cache, and an overlay (on a tmpfs) over each default directory that holds
#    libcuda.so*, with those entries removed in the overlay (whiteouts), nothing moved on the host;
# 3. one `stubstrip driver-link` (no options) makes /run/opengl-driver/lib from the host's driver;
# 4. after: the same programs, run the same way, find the GPU (count=1), the PTX kernel's result and
#    the round trip are right, and libcuda.so.1 comes from /run/opengl-driver/lib.
#
# LD_LIBRARY_PATH is unset for everything. STUBSTRIP: the stubstrip binary (default
# target/x86_64-unknown-linux-musl/release/stubstrip: a static build, carried to the machine).
# Prints PASS/FAIL lines and `N passed, M failed`; the log also goes to
# $OUT/gpu-real-cuda-driver-link.log when OUT is set.
set -uo pipefail
unset LD_LIBRARY_PATH

if [[ -z ${REAL_CUDA_DL_NS-} ]]; then
  [[ $(id -u) == 0 ]] || {
    echo "real-cuda-driver-link: needs root (unshare -m, /nix/store)"
    exit 2
  }
  exec env REAL_CUDA_DL_NS=1 unshare -m --propagation private -- "$BASH" "$0" "$@"
fi

BUNDLE=$(cd "${1:?usage: real-cuda-driver-link.sh BUNDLE}" && pwd)
STUBSTRIP=${STUBSTRIP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/x86_64-unknown-linux-musl/release/stubstrip}
NAME=real-cuda-driver-link
# check, die, section, ROOT and the log in $OUT: what the GPU scripts share.
# shellcheck source=tests/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-real-cuda-dl.XXXXXX")
cleanup() {
  unhide
  umount -l "$W/ovl" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

section machine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
head -1 /proc/driver/nvidia/version 2>/dev/null
echo "stubstrip: $("$STUBSTRIP" --version 2>&1) ($(file -b "$STUBSTRIP" | cut -d, -f1-2))"
mount -t tmpfs tmpfs /run || die "cannot mount a tmpfs on /run in the namespace"
echo "namespace: private, tmpfs on /run (empty: $(find /run -mindepth 1 | wc -l) entries)"
DL=/run/opengl-driver/lib

section "the runtime closures under /nix/store"
mkdir -p /nix/store
check "closure.tar.xz unpacks under /nix/store ($(tar -tJf "$BUNDLE/closure.tar.xz" | grep -c '^nix/store/[^/]*/\?$') store paths)" \
  tar -C / -xJf "$BUNDLE/closure.tar.xz"
progs=()
while read -r variant program path; do
  [[ $variant == ours* ]] || continue
  exe=$path/bin/$program
  progs+=("$variant $program $exe")
  echo "$variant $program: $exe"
  echo "    interpreter: $(readelf -l "$exe" | sed -n 's/.*interpreter: \(.*\)]/\1/p'); RUNPATH: $(readelf -d "$exe" | sed -n 's/.*(RUNPATH) *//p')"
done <"$BUNDLE/programs.txt"
allHaveDriverLink() {
  local p variant program exe
  ((${#progs[@]})) || return 1
  for p in "${progs[@]}"; do
    read -r variant program exe <<<"$p"
    readelf -d "$exe" | grep -q "RUNPATH.*$DL" || return 1
  done
}
check "programs.txt names our hook's programs (${#progs[@]}), each with $DL in its RUNPATH" allHaveDriverLink

# The host's driver, hidden from the programs' loader during each run (namespace only).
sysdirs=$(env -u LD_LIBRARY_PATH LD_DEBUG=libs /lib64/ld-linux-x86-64.so.2 --inhibit-cache /bin/true 2>&1 |
  sed -n 's/.*search path=\([^[:space:]]*\).*(system search path).*/\1/p' | head -1)
echo "the loader's default directories: $sysdirs"
hideDirs=()
declare -A seen=()
IFS=: read -r -a dirs <<<"$sysdirs"
for d in "${dirs[@]}"; do
  [[ -d $d ]] || continue
  d=$(readlink -f "$d")
  [[ -z ${seen[$d]-} ]] || continue
  seen[$d]=1
  compgen -G "$d/libcuda.so*" >/dev/null && hideDirs+=("$d")
done
echo "default directories with libcuda.so*: ${hideDirs[*]:-none}"
: >"$W/empty-cache"
mkdir -p "$W/ovl"
mount -t tmpfs tmpfs "$W/ovl" || die "cannot mount a tmpfs for the overlays"
hidden=0 n=0
hide() {
  local d
  mount --bind "$W/empty-cache" /etc/ld.so.cache || return 1
  for d in "${hideDirs[@]}"; do
    n=$((n + 1)) # a fresh upper directory each time: the last overlay may still be detaching
    mkdir -p "$W/ovl/up$n" "$W/ovl/work$n"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$W/ovl/up$n,workdir=$W/ovl/work$n" "$d" || return 1
    rm -f "$d"/libcuda.so* || return 1
  done
  hidden=1
}
unhide() {
  local d
  ((hidden)) || return 0
  # Lazily (-l): a program that ran from the overlay can keep it busy for a moment.
  for d in "${hideDirs[@]}"; do umount -l "$d" || return 1; done
  umount -l /etc/ld.so.cache || return 1
  hidden=0
}

# run PROGRAM: runs it (its own interpreter) with the driver hidden; prints its output (indented)
# and the libcuda.so.1 the loader took; sets said and status.
run() {
  status=0
  hide || die "cannot hide the driver from the loader (bind mount / overlay)"
  said=$(env -u LD_LIBRARY_PATH "$1" 2>&1) || status=$?
  from=$(env -u LD_LIBRARY_PATH LD_DEBUG=libs "$1" 2>&1 | sed -n 's/.*calling init: \(.*libcuda\.so[^ ]*\).*/\1/p' | head -1)
  unhide || die "cannot undo the hiding"
  printf '%s\n' "$said" | sed 's/^/    | /'
  echo "    | exit status $status; libcuda.so.1 loaded from: ${from:-none}"
}
loaderCannotOpen() { [[ $status != 0 && $said == *"libcuda.so.1: cannot open shared object file"* && $said != *"(34)"* ]]; }
kernelRight() { [[ $status == 0 && $said == *"count=1"* && $said == *"scale_add (cuModuleLoadData of PTX): OK"* && $from == "$DL/libcuda.so.1" ]]; }
roundTripRight() { [[ $status == 0 && $said == *"count=1"* && $said != *"(34)"* && $said == *"round trip"*": OK"* && $from == "$DL/libcuda.so.1" ]]; }

section "before: no driver link, LD_LIBRARY_PATH unset"
check "$DL does not exist" test ! -e "$DL"
for p in "${progs[@]}"; do
  read -r variant program exe <<<"$p"
  echo "$variant $program"
  run "$exe"
  check "before, $variant $program: the loader's 'libcuda.so.1: cannot open shared object file'" loaderCannotOpen
done
unhidden() {
  local d
  [[ -s /etc/ld.so.cache ]] || return 1
  for d in "${hideDirs[@]}"; do compgen -G "$d/libcuda.so*" >/dev/null || return 1; done
}
check "between runs the host's ld.so.cache and libcuda.so* in ${hideDirs[*]:-no directory} are seen again" unhidden

section "one command: stubstrip driver-link"
echo "+ $STUBSTRIP driver-link"
out=$("$STUBSTRIP" driver-link 2>&1) && st=0 || st=$?
printf '%s\n' "$out" | sed 's/^/    | /'
check "stubstrip driver-link: exit 0, $DL/libcuda.so.1 -> $(readlink "$DL/libcuda.so.1")" \
  test "$st" == 0 -a -e "$DL/libcuda.so.1"

section "after: the same programs on the GPU, LD_LIBRARY_PATH unset"
for p in "${progs[@]}"; do
  read -r variant program exe <<<"$p"
  echo "$variant $program"
  run "$exe"
  if [[ $program == driver-api ]]; then
    check "after, $variant $program: count=1, the PTX kernel's result is right, libcuda.so.1 from $DL" kernelRight
  else
    check "after, $variant $program: count=1, the round trip is right, libcuda.so.1 from $DL" roundTripRight
  fi
done

echo
echo "$pass passed, $failed failed"
((failed == 0))
