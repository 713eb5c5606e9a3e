#!/usr/bin/env bash
# tests/gpu/driver-link.sh: `stubstrip driver-link` on the GPU machine, which is not NixOS (the
# driver under /usr/local/nvidia/lib64 and /usr/lib, no /run/opengl-driver). As root, inside a
# private mount namespace with a tmpfs on /run (the machine's /run is never touched; where the
# namespace cannot be made, the driver link is $W/run/opengl-driver/lib instead, through
# --driver-link):
#
# 1. builds, with this machine's gcc, the real-cuda chain's two consumers
#    (tests/nixpkgs/real-cuda/driver-api.c and runtime-api.c) as a Nix build leaves them after our
#    hook: linked against NVIDIA's stub, RUNPATH the driver link and store-shaped directories
#    ($W/nix/store/...-glibc, the host's libc; ...-cuda_cudart, a copy of libcudart), no stub
#    entry, and -z nodefaultlib (DF_1_NODEFLIB: the default directories are not searched for
#    their libraries). They run under the host's loader with --inhibit-cache, so that, as for Nix's
#    own loader, neither the host's ld.so.cache nor its default directories find libcuda.so.1 for
#    them (NODEFLIB alone still takes a cache entry outside the default directories, such as
#    /usr/local/nvidia/lib64). The Nix-built bundle of tests/gpu/real-cuda.sh is not at hand, and
#    the machine has no Nix;
# 2. before `driver-link`: both fail with the loader's "libcuda.so.1: cannot open shared object
#    file", `stubstrip explain` says the driver link is missing and which driver makes it, and a
#    Triton-style link at run time (`cc ... -L/run/opengl-driver/lib -lcuda`, with no default
#    directories, as Nix's linker has none of the host's) finds no libcuda.so;
# 3. `stubstrip driver-link --dry-run` changes nothing; `stubstrip driver-link` makes the links;
#    a second run changes nothing;
# 4. after: both consumers run on the GPU (the PTX kernel's result, the round trip), the loader
#    takes libcuda.so.1 from the driver link, the Triton-style link works and its library finds
#    the GPU, and explain finds libcuda.so.1 in the driver link;
# 5. refusals leave the driver link as it was: a foreign file in it; a driver/library version
#    mismatch (a fake /proc/driver/nvidia/version bind-mounted over the real one, in the
#    namespace only);
# 6. `--remove` takes the links away, and the consumers fail again.
#
# Every program runs with LD_LIBRARY_PATH unset. Needs gcc, NVIDIA's stub and CUDA headers (the
# toolkit), a driver, and a release build of stubstrip (STUBSTRIP, default target/release/stubstrip;
# build it elsewhere and carry it). Prints `N passed, M failed`; the log also goes to
# $OUT/gpu-driver-link.log when OUT is set.
set -uo pipefail
unset LD_LIBRARY_PATH

# Into a private mount namespace first (once): /run there is an empty tmpfs.
if [[ -z ${DRIVER_LINK_NS-} ]]; then
  if [[ $(id -u) == 0 ]] && unshare -m --propagation private true 2>/dev/null; then
    exec env DRIVER_LINK_NS=1 unshare -m --propagation private -- "$BASH" "$0" "$@"
  fi
  DRIVER_LINK_NS=0
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=driver-link
# This proof edits no ELF file: lib.sh's elfpatch is not needed.
ELFPATCH=${ELFPATCH:-/bin/true}
# shellcheck source=tests/gpu/lib.sh
. "$HERE/lib.sh"

W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-driver-link.XXXXXX")
trap 'rm -rf "$W"' EXIT
hide() { sed "s|$W|\$W|g; s/^/    | /"; }

if [[ $DRIVER_LINK_NS == 1 ]]; then
  mount -t tmpfs tmpfs /run || die "cannot mount a tmpfs on /run in the namespace"
  DL=/run/opengl-driver/lib
  dl=()
else
  DL=$W/run/opengl-driver/lib
  dl=(--driver-link "$DL" --driver-link-32 "$W/run/opengl-driver-32/lib")
fi

machine "namespace:   $([[ $DRIVER_LINK_NS == 1 ]] && echo "private, tmpfs on /run" || echo "none (unshare -m not permitted): driver link $DL")"
head -1 /proc/driver/nvidia/version 2>/dev/null || echo "(no /proc/driver/nvidia/version)"
echo "the driver's libcuda and libnvidia-ml in ld.so.cache:"
ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvidia-ml\.so' | sed 's/^/    /'
for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
  n=$(find "$d" -maxdepth 1 -name 'lib*.so.*[0-9].*[0-9]*' 2>/dev/null | grep -c '\.so\.[0-9]\{3,\}\.')
  ((n)) && echo "    $d: $n files named lib*.so.VERSION: $(find "$d" -maxdepth 1 -name 'lib*.so.[0-9][0-9][0-9]*.*' -printf '%f\n' | sort | head -8 | paste -sd ' ')"
done

######################################################################
section "the consumers, built as a Nix build with our hook leaves them"
glibc=$W/nix/store/0n5wq1y7y6kq0l4xgxyq7q5zgxw8ya7w-glibc-host/lib
cudart=$W/nix/store/1r7b6jr9q2vd6sx8rxmyk4h5zy4dmqxm-cuda_cudart/lib
stubDir=$W/nix/store/0k7c9m2xvq1dbz4h8s5pyj3wnf6rl0ga-cuda_cudart-stubs/lib
bin=$W/nix/store/2c9fnl8vz4x1pbw7yq3s5h6jk0r1m2nd-realcuda-ours/bin
mkdir -p "$glibc" "$cudart" "$bin"
make_stub_dir "$stubDir"
libc=$(gcc -print-file-name=libc.so.6)
[[ $libc == /* ]] || libc=/lib/x86_64-linux-gnu/libc.so.6
libc=$(readlink -f "$libc")
for l in libc.so.6 libm.so.6; do ln -s "$(dirname "$libc")/$l" "$glibc/$l"; done
cudaRoot=$(cd "$(dirname "$nvcc")/.." && pwd)
cp -P "$cudaRoot"/lib64/libcudart.so* "$cudart/" || die "no libcudart in $cudaRoot/lib64"
{
  echo 'static const char kernel_ptx[] ='
  sed 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&\\n"/' "$ROOT/tests/nixpkgs/real-cuda/kernel.ptx"
  echo ';'
} >"$W/kernel-ptx.h"
common=(-O2 -Wall -I"$W" -I"$cudaRoot/include" -z nodefaultlib -Xlinker --enable-new-dtags)
check "driver-api builds (-lcuda against NVIDIA's stub; RUNPATH the driver link and glibc)" \
  gcc "${common[@]}" -o "$bin/driver-api" "$ROOT/tests/nixpkgs/real-cuda/driver-api.c" \
  -L"$stubDir" -lcuda -Wl,-rpath,"$DL:$glibc"
check "runtime-api builds (-lcudart -lcuda; RUNPATH cuda_cudart, the driver link, glibc)" \
  gcc "${common[@]}" -o "$bin/runtime-api" "$ROOT/tests/nixpkgs/real-cuda/runtime-api.c" \
  -L"$cudart" -lcudart -L"$stubDir" -lcuda -Wl,-rpath,"$cudart:$DL:$glibc"
for p in driver-api runtime-api; do
  echo "    $p: $(readelf -d "$bin/$p" | grep -E 'RUNPATH|FLAGS_1' | sed 's/^ *0x[0-9a-f]* *//' | tr -s ' ' | paste -sd ';' | sed "s|$W|\$W|g")"
done

# The Triton-style library: compiled now, linked when "the program runs" (below), by a linker
# that, like Nix's, searches none of the host's directories (ld -nostdlib: only the -L given).
cat >"$W/probe.c" <<'EOF'
typedef int CUresult;
typedef int CUdevice;
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
/* The number of GPUs (device 0's name in NAME), or minus the CUDA error. */
int probe(char *name, int len) {
    int n = 0;
    CUdevice d;
    CUresult r = cuInit(0);
    if (r == 0) r = cuDeviceGetCount(&n);
    if (r == 0 && n > 0) r = cuDeviceGet(&d, 0);
    if (r == 0 && n > 0) r = cuDeviceGetName(name, len, d);
    return r ? -r : n;
}
EOF
cat >"$W/triton-run.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
/* Loads the library the "JIT" just linked, as Triton's Python does, and asks it for the GPU. */
int main(int argc, char **argv) {
    char name[256] = "";
    void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
    if (!h) { printf("dlopen: %s\n", dlerror()); return 127; }
    int (*probe)(char *, int) = (int (*)(char *, int))dlsym(h, "probe");
    int n = probe(name, sizeof name);
    if (n <= 0) { printf("probe: CUDA error %d\n", -n); return 1; }
    printf("count=%d, device 0: %s\n", n, name);
    return 0;
}
EOF
check "the Triton-style launcher compiles (probe.o) and its loader builds" \
  bash -c "gcc -O2 -fPIC -c -o '$W/probe.o' '$W/probe.c' && gcc -O2 -o '$W/triton-run' '$W/triton-run.c' -ldl"
# jit_link: the run-time link Triton makes: -L<driver link> -lcuda, rpath the driver link.
jit_link() {
  rm -f "$W/libprobe.so"
  ld -nostdlib -shared -o "$W/libprobe.so" "$W/probe.o" -L"$DL" -lcuda -z nodefaultlib \
    --enable-new-dtags -rpath "$DL" 2>&1
}

# run PROGRAM...: its output (indented) and the libcuda.so.1 the loader took; sets said, status.
# The host's loader, without its cache (as Nix's loader, which reads none of the host's).
LDSO=/lib64/ld-linux-x86-64.so.2
run() {
  status=0
  said=$(env -u LD_LIBRARY_PATH "$LDSO" --inhibit-cache "$@" 2>&1) || status=$?
  printf '%s\n' "$said" | hide
  echo "    | exit status $status; libcuda.so.1 from: $(env -u LD_LIBRARY_PATH LD_DEBUG=libs "$LDSO" --inhibit-cache "$@" 2>&1 |
    sed -n 's/.*calling init: \(.*libcuda\.so[^ ]*\).*/\1/p' | head -1 | sed "s|$W|\$W|g")"
}
loaderCannotOpen() { [[ $status == 127 && $said == *"libcuda.so.1: cannot open shared object file"* ]]; }
kernelRight() { [[ $status == 0 && $said == *"count=1"* && $said == *"scale_add (cuModuleLoadData of PTX): OK"* ]]; }
roundTripRight() { [[ $status == 0 && $said == *"count=1"* && $said == *"round trip"*": OK"* ]]; }
# The driver link as it is: every entry with its target.
listing() { find "$DL" -mindepth 1 -printf '%f %l\n' 2>/dev/null | sort; }

######################################################################
section "before: no driver link"
check "$DL does not exist" test ! -e "$DL"
# explain, with the host's cache hidden (in the namespace) as for the runs.
explain() {
  if [[ $DRIVER_LINK_NS == 1 ]]; then
    : >"$W/no-cache"
    mount --bind "$W/no-cache" /etc/ld.so.cache && "$STUBSTRIP" explain "$@" 2>&1
    umount /etc/ld.so.cache
  else
    "$STUBSTRIP" explain "$@" 2>&1
  fi
}
explained=$(explain "$bin/driver-api")
printf '%s\n' "$explained" | head -3 | hide
if [[ $DRIVER_LINK_NS == 1 ]]; then
  check "explain: the driver link is missing on this machine, and driver-link makes it from the driver" \
    grep -q "libcuda.so.1 for driver-api => NOT FOUND: the driver link is missing on this machine; \`stubstrip driver-link\` creates it from driver [0-9.]* found at /" <<<"$explained"
fi
for p in driver-api runtime-api; do
  run "$bin/$p"
  check "before, $p: the loader's 'libcuda.so.1: cannot open shared object file'" loaderCannotOpen
done
linked=$(jit_link) && linkStatus=0 || linkStatus=$?
printf '%s\n' "$linked" | hide
check "before, Triton-style link -L$DL -lcuda: no libcuda.so to link" \
  test "$linkStatus" != 0 -a ! -e "$W/libprobe.so"

######################################################################
section "stubstrip driver-link"
"$STUBSTRIP" driver-link "${dl[@]}" --dry-run 2>&1 | hide
check "--dry-run changes nothing" test ! -e "$DL"
out=$("$STUBSTRIP" driver-link "${dl[@]}" 2>&1) && st=0 || st=$?
printf '%s\n' "$out" | hide
check "driver-link: exit 0" test "$st" == 0
echo "    $(listing | wc -l) entries in $DL:"
listing | sed "s|$W|\$W|g; s/^/      /"
kver=$(sed -n 's/^NVRM version:.*  \([0-9]\{3,\}\.[0-9.]*\)  .*/\1/p' /proc/driver/nvidia/version 2>/dev/null)
real=$(readlink "$DL/libcuda.so.1")
check "libcuda.so.1 and libcuda.so both point at the running driver's file ($real; kernel module $kver)" \
  test -f "$real" -a "$real" == "${real%/*}/libcuda.so.$kver" -a "$(readlink "$DL/libcuda.so")" == "$real"
check "libnvidia-ml.so.1 and libnvidia-ptxjitcompiler.so.1 are linked too" \
  test -e "$DL/libnvidia-ml.so.1" -a -e "$DL/libnvidia-ptxjitcompiler.so.1"
before=$(listing)
again=$("$STUBSTRIP" driver-link "${dl[@]}" 2>&1) && st=0 || st=$?
printf '%s\n' "$again" | tail -1 | hide
check "a second run: exit 0, up to date, nothing changed" \
  test "$st" == 0 -a "$(listing)" == "$before" -a -n "$(grep 'up to date' <<<"$again")"

######################################################################
section "after: the programs on the GPU, LD_LIBRARY_PATH unset"
run "$bin/driver-api"
check "after, driver-api: count=1, the PTX kernel's result is right" kernelRight
check "after, driver-api: libcuda.so.1 from the driver link" grep -q "from: $DL/libcuda.so.1" <<<"$(run "$bin/driver-api")"
run "$bin/runtime-api"
check "after, runtime-api: count=1, the round trip is right" roundTripRight
linked=$(jit_link) && linkStatus=0 || linkStatus=$?
printf '%s\n' "$linked" | hide
check "after, Triton-style link -L$DL -lcuda: links (libcuda.so in the driver link)" test "$linkStatus" == 0 -a -e "$W/libprobe.so"
run "$W/triton-run" "$W/libprobe.so"
check "after, the run-time-linked library finds the GPU (count=1)" test "$status" == 0 -a -n "$(grep count=1 <<<"$said")"
explained=$(explain "$bin/driver-api")
printf '%s\n' "$explained" | head -2 | hide
check "explain: libcuda.so.1 found in the driver link" grep -q "=> $DL/libcuda.so.1: found in its RUNPATH" <<<"$explained"

######################################################################
section "refusals leave the driver link as it was"
touch "$DL/notes.txt"
before=$(listing)
out=$("$STUBSTRIP" driver-link "${dl[@]}" 2>&1) && st=0 || st=$?
printf '%s\n' "$out" | hide
check "a foreign file: exit 1, refused, nothing changed" \
  test "$st" == 1 -a "$(listing)" == "$before" -a -n "$(grep 'did not make: notes.txt' <<<"$out")"
rm "$DL/notes.txt"
if [[ $DRIVER_LINK_NS == 1 ]]; then
  sed 's/\([0-9]\{3,\}\)\.[0-9][0-9.]*/\1.0.1/' /proc/driver/nvidia/version >"$W/version"
  if mount --bind "$W/version" /proc/driver/nvidia/version; then
    before=$(listing)
    out=$("$STUBSTRIP" driver-link "${dl[@]}" 2>&1) && st=0 || st=$?
    umount /proc/driver/nvidia/version
    printf '%s\n' "$out" | hide
    check "a driver/library version mismatch: exit 1, refused, nothing changed" \
      test "$st" == 1 -a "$(listing)" == "$before" -a -n "$(grep 'version mismatch' <<<"$out")"
  else
    echo "    (cannot bind-mount over /proc/driver/nvidia/version: mismatch case not run)"
  fi
fi

######################################################################
section "--remove"
out=$("$STUBSTRIP" driver-link "${dl[@]}" --remove 2>&1) && st=0 || st=$?
printf '%s\n' "$out" | tail -2 | hide
check "--remove: exit 0, the driver link is gone" test "$st" == 0 -a ! -e "$DL"
run "$bin/driver-api"
check "after --remove, driver-api: the loader's 'cannot open shared object file' again" loaderCannotOpen

echo
echo "$pass passed, $failed failed"
((failed == 0))
