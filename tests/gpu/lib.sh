# shellcheck shell=bash
# tests/gpu/lib.sh: what tests/gpu/run.sh and tests/gpu/torch.sh share. Source it with NAME set to
# the script's name (for messages and the log $OUT/gpu-NAME.log).
#
# Sets ROOT, STUBSTRIP, ELFPATCH; check/die/section; machine (nvcc, then find_cuda and the machine
# section) and nvcc_arch_flags; and, through find_cuda: stub (NVIDIA's stub
# libcuda.so, CUDA_STUB to choose), driverDir (the directory of the driver's libcuda.so.1, found
# in LD_LIBRARY_PATH as it was, then the usual places). LD_LIBRARY_PATH is unset afterwards: it is
# searched before RUNPATH and would hide the problem these scripts show.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STUBSTRIP=${STUBSTRIP:-$ROOT/target/release/stubstrip}
ELFPATCH=${ELFPATCH:-$ROOT/target/release/elfpatch}
if [[ -n ${OUT-} && -d ${OUT-} ]]; then
  exec > >(tee "$OUT/gpu-$NAME.log") 2>&1
fi

pass=0 failed=0
check() { # DESCRIPTION COMMAND...
  local desc=$1
  shift
  if "$@"; then
    pass=$((pass + 1))
    echo "PASS: $desc"
  else
    failed=$((failed + 1))
    echo "FAIL: $desc"
  fi
}
die() {
  echo "gpu/$NAME.sh: $*"
  echo "$pass passed, $((failed + 1)) failed"
  exit 1
}
section() { printf '\n==== %s\n' "$*"; }

find_cuda() {
  local origLdPath=${LD_LIBRARY_PATH-} d nvcc cudaRoot
  unset LD_LIBRARY_PATH
  [[ -x $STUBSTRIP ]] || die "no stubstrip binary at $STUBSTRIP (set STUBSTRIP)"
  [[ -x $ELFPATCH ]] || die "no elfpatch binary at $ELFPATCH (set ELFPATCH)"
  stub=${CUDA_STUB-}
  if [[ -z $stub ]]; then
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    cudaRoot=$(cd "$(dirname "$nvcc")/.." 2>/dev/null && pwd)
    for d in "$cudaRoot/lib64/stubs" "$cudaRoot/targets/x86_64-linux/lib/stubs" "$cudaRoot/lib/stubs"; do
      if [[ -f $d/libcuda.so ]]; then stub=$d/libcuda.so && break; fi
    done
  fi
  [[ -f $stub ]] || die "no NVIDIA stub libcuda.so (set CUDA_STUB)"
  driverDir=
  local -a ldDirs
  IFS=: read -r -a ldDirs <<<"$origLdPath"
  for d in "${ldDirs[@]}" /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    [[ -n $d && $d != *stubs* && -e $d/libcuda.so.1 ]] || continue
    driverDir=$d
    break
  done
  [[ -n $driverDir ]] || die "no directory with the driver's libcuda.so.1"
}

# nvcc, the stub and the driver (find_cuda), then the "machine" section: GPU, nvcc, stub,
# driver, stubstrip, and the extra lines given.
machine() { # [LINE]...
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [[ -x $nvcc ]] || die "no nvcc"
  find_cuda
  section "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(nvidia-smi unavailable)"
  "$nvcc" --version | tail -n 2
  echo "NVIDIA stub: $stub ($(stat -c %s "$stub") bytes, SONAME $(readelf -d "$stub" | sed -n 's/.*soname: \[\(.*\)\]/\1/p'))"
  echo "driver:      $(readlink -f "$driverDir/libcuda.so.1")"
  echo "stubstrip:   $("$STUBSTRIP" --version)"
  if (($#)); then printf '%s\n' "$@"; fi
}

# archFlags for nvcc: this GPU's (-arch=native) where nvcc can, else sm_90 (H100/H200). DIR is a
# scratch directory.
nvcc_arch_flags() { # DIR
  archFlags=(-arch=native)
  if ! "$nvcc" "${archFlags[@]}" -o "$1/probe" -x cu - <<<'int main(){return 0;}' 2>/dev/null; then
    archFlags=(-gencode "arch=compute_90,code=sm_90" -gencode "arch=compute_90,code=compute_90")
  fi
  echo "arch flags: ${archFlags[*]}"
}

# A directory of links to the driver's libraries, as /run/opengl-driver/lib is on NixOS.
make_driver_link() { # DIR
  local f
  mkdir -p "$1"
  for f in "$driverDir"/libcuda.so* "$driverDir"/libnvidia*.so*; do
    [[ -e $f ]] && ln -s "$f" "$1/"
  done
}

# A Nix-store-shaped stubs output with NVIDIA's stub and the libcuda.so.1 link nixpkgs'
# cuda_cudart adds (NVIDIA ships the stub without it; the link is what lets it load at run time).
make_stub_dir() { # DIR
  mkdir -p "$1"
  cp "$stub" "$1/libcuda.so"
  ln -s libcuda.so "$1/libcuda.so.1"
}
