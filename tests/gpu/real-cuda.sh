#!/usr/bin/env bash
# tests/gpu/real-cuda.sh BUNDLE: the GPU end of the real-cuda chain. BUNDLE is what
# `tests/nixpkgs/run.sh real-cuda` left in $REAL_CUDA_OUT/bundle: closure.tar.xz (the runtime
# closures of the consumers that nixpkgs built from NVIDIA's cuda_cudart) and programs.txt
# ("VARIANT PROGRAM STORE-PATH" lines). As root on the GPU machine, it
#
# 1. unpacks the closures under /nix/store;
# 2. makes /run/opengl-driver/lib a directory of links to the driver's libraries, as NixOS does;
# 3. runs every program with LD_LIBRARY_PATH unset and asserts: without a hook NVIDIA's stub
#    answers CUDA_ERROR_STUB_LIBRARY / cudaErrorStubLibrary (34); with nixpkgs' hook (installCheck
#    off) and with ours the GPU is found (count=1) and the kernel's result / the round trip is
#    right; LD_DEBUG=libs names the libcuda.so.1 each one loaded;
# 4. removes the driver link and hides the driver from the loader's other places (its cache,
#    with --inhibit-cache; the default directories: any libcuda.so* there is moved aside and put
#    back), as on a machine without the driver or where Nix's loader does not read the host's:
#    ours fails with the loader's "libcuda.so.1: cannot open shared object file", never 34.
#
# Prints PASS/FAIL lines and `N passed, M failed`; the log also goes to $OUT/gpu-real-cuda.log.
set -uo pipefail
unset LD_LIBRARY_PATH

BUNDLE=$(cd "${1:?usage: real-cuda.sh BUNDLE}" && pwd)
if [[ -n ${OUT-} && -d ${OUT-} ]]; then
  exec > >(tee "$OUT/gpu-real-cuda.log") 2>&1
fi
passed=0 failed=0
check() { # DESCRIPTION COMMAND...
  local d=$1
  shift
  if "$@"; then passed=$((passed + 1)) && echo "PASS: $d"; else failed=$((failed + 1)) && echo "FAIL: $d"; fi
}
section() { printf '\n==== %s\n' "$*"; }

section machine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "CUDA (the toolkit's nvcc): $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -1)"
driverDir=
for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib; do
  if [[ -e $d/libcuda.so.1 && $(readlink -f "$d/libcuda.so.1") != */stubs/* ]]; then driverDir=$d && break; fi
done
echo "driver: $(readlink -f "$driverDir/libcuda.so.1")"

section "the runtime closures under /nix/store"
mkdir -p /nix/store
check "closure.tar.xz unpacks under /nix/store ($(tar -tJf "$BUNDLE/closure.tar.xz" | grep -c '^nix/store/[^/]*/\?$') store paths)" \
  tar -C / -xJf "$BUNDLE/closure.tar.xz"
cat "$BUNDLE/programs.txt"

section "/run/opengl-driver/lib: links to the driver's libraries"
mkdir -p /run/opengl-driver/lib
for f in "$driverDir"/libcuda.so* "$driverDir"/libnvidia*.so*; do
  [[ -e $f ]] && ln -sf "$f" /run/opengl-driver/lib/
done
echo "$(find /run/opengl-driver/lib -maxdepth 1 | wc -l) links, libcuda.so.1 -> $(readlink /run/opengl-driver/lib/libcuda.so.1)"

# run PROGRAM [LOADER-ARGS...]: prints its output (indented) and the libcuda.so.1 the loader
# took; sets said and status.
run() {
  local prog=$1
  shift
  status=0
  said=$(env -u LD_LIBRARY_PATH "$@" "$prog" 2>&1) || status=$?
  printf '%s\n' "$said" | sed 's/^/    | /'
  echo "    | exit status $status; libcuda.so.1 loaded from: $(env -u LD_LIBRARY_PATH LD_DEBUG=libs "$@" "$prog" 2>&1 |
    sed -n 's/.*calling init: \(.*libcuda\.so[^ ]*\).*/\1/p' | head -1)"
}

# What each run must show (status and said from run).
stubAnswered() { [[ $status == 34 && $said == *"$1"* ]]; }
kernelRight() { [[ $status == 0 && $said == *"count=1"* && $said == *"scale_add (cuModuleLoadData of PTX): OK"* ]]; }
roundTripRight() { [[ $status == 0 && $said == *"count=1"* && $said != *"(34)"* && $said == *"round trip"*": OK"* ]]; }
loaderCannotOpen() { [[ $status != 0 && $said == *"libcuda.so.1: cannot open shared object file"* && $said != *"(34)"* ]]; }

section "running each program, LD_LIBRARY_PATH unset"
while read -r variant program path; do
  exe=$path/bin/$program
  echo "$variant $program: $exe"
  echo "    RUNPATH: $(readelf -d "$exe" 2>/dev/null | sed -n 's/.*(RUNPATH) *//p')"
  run "$exe"
  if [[ $variant == nohook ]]; then
    [[ $program == driver-api ]] && want="cuInit: CUDA_ERROR_STUB_LIBRARY (34)" || want="cudaErrorStubLibrary (34)"
    check "no hook, $program: NVIDIA's stub answers: $want" stubAnswered "$want"
  else
    label=$variant
    [[ $variant == nixpkgsNoCheck ]] && label="nixpkgs' hook (installCheck off)"
    if [[ $program == driver-api ]]; then
      check "$label, $program: count=1 on the GPU, the PTX kernel's result is right" kernelRight
    else
      check "$label, $program: cudaGetDeviceCount count=1, not the stub error, the round trip is right" roundTripRight
    fi
  fi
done <"$BUNDLE/programs.txt"

section "without the driver link (and the driver hidden from the loader's cache and default directories)"
mv /run/opengl-driver /run/opengl-driver.real-cuda-away
moved=()
# Puts back what was moved aside (and the driver link); fails if anything is not back.
restore() {
  local f ok=0
  for f in "${moved[@]}"; do mv "$f.real-cuda-away" "$f" && [[ -e $f || -L $f ]] || ok=1; done
  moved=()
  if [[ -e /run/opengl-driver.real-cuda-away ]]; then mv /run/opengl-driver.real-cuda-away /run/opengl-driver || ok=1; fi
  [[ -e /run/opengl-driver/lib/libcuda.so.1 ]] || ok=1
  return $ok
}
trap restore EXIT
# The loader's default directories (LD_DEBUG names them as "system search path").
sysdirs=$(env -u LD_LIBRARY_PATH LD_DEBUG=libs /lib64/ld-linux-x86-64.so.2 --inhibit-cache /bin/true 2>&1 |
  sed -n 's/.*search path=\([^[:space:]]*\).*(system search path).*/\1/p' | head -1)
echo "system search path: $sysdirs"
IFS=: read -r -a dirs <<<"$sysdirs"
declare -A seen=()
for d in "${dirs[@]}"; do
  [[ -d $d ]] || continue
  d=$(readlink -f "$d") # /lib is /usr/lib on a merged-/usr system: each file once
  for f in "$d"/libcuda.so "$d"/libcuda.so.*; do
    [[ (-e $f || -L $f) && $f != *.real-cuda-away && -z ${seen[$f]-} ]] || continue
    seen[$f]=1
    if mv "$f" "$f.real-cuda-away"; then moved+=("$f"); else echo "could not move $f aside"; fi
  done
done
echo "moved aside: ${moved[*]:-nothing}"
while read -r variant program path; do
  [[ $variant == ours* ]] || continue
  echo "$variant $program (the host's loader, --inhibit-cache)"
  run "$path/bin/$program" /lib64/ld-linux-x86-64.so.2 --inhibit-cache
  check "$variant, $program, no driver: the loader's 'libcuda.so.1: cannot open shared object file', never 34" loaderCannotOpen
done <"$BUNDLE/programs.txt"
check "the driver's files and the driver link are back where they were (${moved[*]:-nothing moved})" restore

echo
echo "$passed passed, $failed failed"
((failed == 0))
