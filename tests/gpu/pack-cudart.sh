#!/usr/bin/env bash
# tests/gpu/pack-cudart.sh: on the GPU machine, packs the redistributable parts of NVIDIA's
# installed CUDA toolkit that nixpkgs' buildRedist `cuda_cudart` (and the `cuda_crt` headers it
# propagates from CUDA 13.0) unpack, in the layout of NVIDIA's redistributable archives:
#
#   cuda_cudart-linux-x86_64-<version>-archive/{include,lib,lib/stubs,pkg-config,LICENSE}
#   cuda_crt-linux-x86_64-<version>-archive/{include/crt,LICENSE}
#
# as .tar.xz files into DEST (default $OUT), with `machine.txt` (GPU, driver, CUDA, the driver's
# libraries, the libc) and the PTX of tests/gpu/real-cuda/kernel.cu built by nvcc. The archives are
# NVIDIA's files: they are never committed (tests/nixpkgs/README.md, the real-cuda part, takes their
# directory from REAL_CUDA_ARCHIVES).
#
# Which file belongs to which component: the toolkit's own package lists (`dpkg -L` of the
# installed cuda-cudart-*, cuda-driver-dev-* packages); without them it stops rather than guess.
# Versions from $CUDA/version.json, else the file names (libcudart.so.X.Y.Z) and nvcc.
# Prints PASS/FAIL lines and `N passed, M failed`.
set -uo pipefail
unset LD_LIBRARY_PATH

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CUDA=${CUDA:-/usr/local/cuda}
DEST=${1:-${OUT:?set OUT or name a destination directory}}
T=$CUDA/targets/x86_64-linux
[[ -d $T ]] || T=$CUDA
mkdir -p "$DEST"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

passed=0 failed=0
check() { # DESCRIPTION COMMAND...
  local d=$1
  shift
  if "$@"; then passed=$((passed + 1)) && echo "PASS: $d"; else failed=$((failed + 1)) && echo "FAIL: $d"; fi
}

# The version of a component from the toolkit's version.json ("cuda_cudart": {"version": ...}).
componentVersion() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["version"])' "$CUDA/version.json" "$1" 2>/dev/null
}
# The files the toolkit's installed apt packages matching PATTERN (a dpkg name glob) hold, each
# relative to the target directory (include/..., lib/...) or as pkgconfig/NAME.pc.
packageFiles() {
  local pkgs
  pkgs=$(dpkg-query -W -f='${db:Status-Abbrev}|${Package}\n' "$1" 2>/dev/null | awk -F'|' '$1 ~ /^ii/ { print $2 }')
  [[ -n $pkgs ]] || return 1
  # shellcheck disable=SC2086 # one word per package
  dpkg -L $pkgs 2>/dev/null | grep -v '\.pc$' | sed -n -e 's|.*/targets/x86_64-linux/||p' -e 's|.*/cuda-[0-9.]*/\(pkgconfig/.*\.pc\)$|\1|p' | sort -u
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "nvidia-smi: $(nvidia-smi | sed -n 's/.*\(CUDA Version: [0-9.]*\).*/\1/p' | head -1)"
  "$CUDA/bin/nvcc" --version | tail -2
  echo "version.json: cuda $(python3 -c 'import json; print(json.load(open("'"$CUDA"'/version.json"))["cuda"]["version"])' 2>/dev/null)," \
    "cuda_cudart $(componentVersion cuda_cudart), cuda_crt $(componentVersion cuda_crt)"
  echo "libcudart: $(cd "$T/lib" && echo libcudart.so.*)"
  echo "stub: $(ls -l "$T/lib/stubs/libcuda.so" 2>/dev/null)"
  echo "ldconfig -p | grep libcuda:"
  ldconfig -p | grep -E 'libcuda\.so|libnvidia-ptxjitcompiler' | sed 's/^/  /'
  echo "the driver's libcuda: $(readlink -f /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null)"
  echo "libc: $(ldd --version | head -1)"
  echo "os: $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release)"
  echo "apt packages of the toolkit:"
  dpkg-query -W -f='  ${Package} ${Version}\n' 'cuda-cudart*' 'cuda-crt*' 'cuda-driver-dev*' 2>/dev/null
} >"$DEST/machine.txt" 2>&1
cat "$DEST/machine.txt"

cudartVersion=$(componentVersion cuda_cudart)
if [[ -z $cudartVersion ]]; then
  for f in "$T"/lib/libcudart.so.*.*.*; do cudartVersion=${f##*/libcudart.so.} && break; done
fi
crtVersion=$(componentVersion cuda_crt)
[[ -n $crtVersion ]] || crtVersion=$("$CUDA/bin/nvcc" --version | sed -n 's/.*, V\([0-9.]*\)$/\1/p')
# NVIDIA's archives carry the EULA as LICENSE; the apt packages install it in the toolkit's root
# or as the package's copyright file.
license=
for f in "$CUDA/EULA.txt" "$CUDA/doc/EULA.txt" "$(readlink -f "$CUDA")/EULA.txt" /usr/share/doc/cuda-cudart-[0-9]*/copyright; do
  if [[ -s $f ]]; then license=$f && break; fi
done
echo "license: ${license:-none found}"

# cuda_cudart: the runtime, its headers, the driver API's headers (cuda.h: NVIDIA's archive has
# it), the static libraries, the stub under lib/stubs, the pkg-config files.
a=$W/cuda_cudart-linux-x86_64-$cudartVersion-archive
mkdir -p "$a/include" "$a/lib/stubs"
# The runtime's packages (cuda-cudart-13-0, cuda-cudart-dev-13-0) and the driver API's headers and
# stub (cuda-driver-dev-13-0), as NVIDIA's cuda_cudart archive holds them. No guessing without them.
files=$(packageFiles 'cuda-cudart*')$'\n'$(packageFiles 'cuda-driver-dev*')
if ! grep -q '^lib/libcudart\.so' <<<"$files"; then
  echo "pack-cudart: no installed cuda-cudart apt package lists the runtime's files"
  echo "$passed passed, $((failed + 1)) failed"
  exit 1
fi
while IFS= read -r f; do
  [[ -n $f && ! ( -d $T/$f && ! -L $T/$f ) ]] || continue # the package lists name directories too
  case $f in
    include/crt/* | include/cccl/* | include/cub/* | include/thrust/* | include/cuda/* | include/nv/*) ;; # other components
    include/* | lib/* | lib64/*)
      rel=${f/#lib64\//lib/}
      mkdir -p "$a/$(dirname "$rel")"
      cp -P "$T/$f" "$a/$rel"
      ;;
  esac
done <<<"$files"
# The stub and cuda.h where the package lists do not name them.
[[ -f $a/lib/stubs/libcuda.so ]] || cp "$T/lib/stubs/libcuda.so" "$a/lib/stubs/"
[[ -f $a/include/cuda.h ]] || cp "$T/include/cuda.h" "$a/include/"
# NVIDIA's archive has pkg-config/cudart-<major.minor>.pc and cuda-<major.minor>.pc; the apt
# packages put them elsewhere. No empty directory: buildRedist's hook moves pkg-config/* and fails
# on an empty one.
while IFS= read -r pc; do
  mkdir -p "$a/pkg-config"
  cp "$pc" "$a/pkg-config/"
done < <(find "$CUDA/" "$(readlink -f "$CUDA")/" /usr/lib/pkgconfig /usr/share/pkgconfig /usr/lib/x86_64-linux-gnu/pkgconfig \
  -maxdepth 2 \( -name 'cudart-[0-9]*.pc' -o -name 'cuda-[0-9]*.pc' \) 2>/dev/null | sort -u)
cp "$license" "$a/LICENSE" 2>/dev/null || echo "NVIDIA CUDA Toolkit EULA: https://docs.nvidia.com/cuda/eula/" >"$a/LICENSE"
echo "cuda_cudart $cudartVersion from the apt packages' file lists: $(find "$a" -type f -o -type l | wc -l) files"
find "$a" \( -type f -o -type l \) -printf '%P %s\n' | sort | tee "$DEST/cuda_cudart-files.txt" | sed 's/^/  /'

# cuda_crt: include/crt (host_config.h, host_defines.h ...), which cuda_runtime_api.h includes.
c=$W/cuda_crt-linux-x86_64-$crtVersion-archive
mkdir -p "$c/include"
cp -r "$T/include/crt" "$c/include/"
cp "$a/LICENSE" "$c/LICENSE"
echo "cuda_crt $crtVersion: $(find "$c" -type f | wc -l) files"

# Names, timestamps and owners fixed, so the same files give the same archive.
for d in "$a" "$c"; do
  tar -C "$W" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cJf "$DEST/$(basename "$d").tar.xz" "$(basename "$d")"
done
ls -l "$DEST"
check "cuda_cudart archive: libcudart.so.13, cuda.h, cuda_runtime_api.h and the stub lib/stubs/libcuda.so" \
  test -f "$a/lib/libcudart.so.13" -a -f "$a/include/cuda.h" -a -f "$a/include/cuda_runtime_api.h" -a -f "$a/lib/stubs/libcuda.so"
check "cuda_crt archive: include/crt/host_defines.h" test -f "$c/include/crt/host_defines.h"
for f in "$DEST"/*.tar.xz; do
  check "$(basename "$f") is under 16 MiB ($(stat -c %s "$f") bytes)" test "$(stat -c %s "$f")" -lt $((16 << 20))
done

# The kernel the driver-API consumer loads (cuModuleLoadData), as PTX for a virtual architecture
# old enough for any GPU this driver runs (the driver compiles it for the one it finds).
if "$CUDA/bin/nvcc" -ptx -arch=compute_75 -o "$DEST/kernel.ptx" "$HERE/real-cuda/kernel.cu"; then
  check "nvcc -ptx builds the kernel ($(grep -m1 '^.version' "$DEST/kernel.ptx"))" grep -q '.entry scale_add' "$DEST/kernel.ptx"
else
  check "nvcc -ptx builds the kernel" false
fi
echo "$passed passed, $failed failed"
((failed == 0))
