#!/usr/bin/env bash
# The main job on an example: a program built the way Nix builds CUDA programs loads NVIDIA's stub
# libcuda and fails; `stubstrip fix` replaces the stub RUNPATH entry with the driver link, and the
# same program then loads the driver.
#
# The "driver" and the "stub" here are two tiny libraries with cuInit(): the stub returns 34
# (CUDA_ERROR_STUB_LIBRARY), the driver returns 0. tests/gpu/ does the same with NVIDIA's real stub
# on a real GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

# A fresh Debian has no compiler: as root, install what the demo needs (waiting for another
# apt-get's dpkg lock rather than failing at once).
if ! command -v gcc >/dev/null || ! command -v readelf >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "demo: installing gcc, libc6-dev and binutils"
    apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >/dev/null &&
      DEBIAN_FRONTEND=noninteractive "${apt[@]}" install gcc libc6-dev binutils >/dev/null
  fi
fi
command -v gcc >/dev/null || { echo "demo: needs gcc (run as root on Debian to install it)" >&2; exit 1; }
command -v readelf >/dev/null || { echo "demo: needs readelf (binutils)" >&2; exit 1; }
cargo build --release --quiet -p stubstrip -p elfpatch
stubstrip=$PWD/target/release/stubstrip

work=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
stubs=$work/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_cudart-12.8.90-stubs/lib
driver=$work/run/opengl-driver/lib
mkdir -p "$stubs" "$driver" "$work/out/bin" "$work/out/lib"

cat >"$work/cuda.c" <<'C'
int cuInit(unsigned flags) { (void)flags; return RESULT; }
C
# NVIDIA ships the stub as libcuda.so; nixpkgs adds the libcuda.so.1 link that lets it load.
gcc -shared -fPIC -DRESULT=34 -Wl,-soname,libcuda.so.1 -o "$stubs/libcuda.so" "$work/cuda.c"
ln -s libcuda.so "$stubs/libcuda.so.1"
gcc -shared -fPIC -DRESULT=0 -Wl,-soname,libcuda.so.1 -o "$driver/libcuda.so.1" "$work/cuda.c"

cat >"$work/kernel.c" <<'C'
int cuInit(unsigned);
int start_gpu(void) { return cuInit(0); }
C
cat >"$work/main.c" <<'C'
#include <stdio.h>
int start_gpu(void);
int main(void) {
    int r = start_gpu();
    printf("cuInit() = %d%s\n", r, r == 34 ? "  (CUDA_ERROR_STUB_LIBRARY: CUDA driver is a stub library)" : "  (driver loaded)");
    return r != 0;
}
C
# As autoPatchelfHook leaves them: the stub directory in RUNPATH, next to other store paths.
gcc -shared -fPIC -o "$work/out/lib/libkernels.so" "$work/kernel.c" -L"$stubs" -lcuda \
  -Wl,--enable-new-dtags,-rpath,"$stubs:/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-glibc-2.40/lib"
gcc -o "$work/out/bin/app" "$work/main.c" -L"$work/out/lib" -lkernels -Wl,--enable-new-dtags,-rpath,"$work/out/lib:$stubs"

show() { readelf -d "$1" | sed -n 's/.*(RUNPATH) *//p'; }
echo "== before"
echo "bin/app            $(show "$work/out/bin/app")"
echo "lib/libkernels.so  $(show "$work/out/lib/libkernels.so")"
env -u LD_LIBRARY_PATH "$work/out/bin/app" || true

echo "== stubstrip fix --driver-link $driver out/"
"$stubstrip" fix -v --driver-link "$driver" "$work/out"

echo "== after"
echo "bin/app            $(show "$work/out/bin/app")"
echo "lib/libkernels.so  $(show "$work/out/lib/libkernels.so")"
env -u LD_LIBRARY_PATH "$work/out/bin/app"
"$stubstrip" check "$work/out"
echo "== a second run changes nothing"
"$stubstrip" fix --driver-link "$driver" "$work/out"
