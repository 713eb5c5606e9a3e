#!/usr/bin/env bash
# tests/gpu/consumers.sh: the consumers of a fixed package on a real GPU, with NVIDIA's own stub and
# the real driver.
#
# The chain of tests/nixpkgs and tests/nix, in tests/hook's emulation of stdenv (the device has no
# Nix): A is a Nix-store-shaped stubs output holding NVIDIA's stub libcuda.so; B a package fixed by
# the stubstrip hook: libvecadd.so (nvcc: a vector-add kernel and driver-API calls, linked against
# the stub) and a Python module over it, `cudaprobe` (a C extension, or a ctypes module where the
# Python has no headers), whose import loads libvecadd.so and so libcuda.so.1; C a pure-Python
# package propagating B whose checks (checkPhase, installCheck, a preDistPhases import check)
# import it and ask for the GPU; D a C program linking B's library only, run in installCheck.
#
#  1. on a GPU builder (the driver at B's driver link): the check hook leaves its check libraries
#     unused, C's checks and D reach CUDA and find the device, with LD_BIND_NOW=1;
#  2. control: the same import with B's check libraries forced onto LD_LIBRARY_PATH answers 34:
#     they hold NVIDIA's stub, which would shadow the driver, so not using them is what counts;
#  3. in a sandbox without a driver (B's driver link empty): C's checks and D's link and
#     installCheck work through the check libraries (a copy of NVIDIA's stub: every symbol bound,
#     LD_BIND_NOW=1), and CUDA answers 34;
#  4. at run time nothing of it is left: B's and D's RUNPATHs hold the driver link and no stub or
#     check-library entry; D from step 1 runs on the GPU, D from step 3 does not find libcuda.so.1.
#
# Needs: nvcc, NVIDIA's stubs, a driver, gcc, readelf, python3, and release builds of stubstrip
# and elfpatch (STUBSTRIP / ELFPATCH, default target/release/*; elfpatch stands in for patchelf
# where the machine has none). CONSUMERS_PYTHON picks the Python (default python3);
# CONSUMERS_PY_MODULE=extension|ctypes forces the kind of B's module (default: an extension when
# Python.h is there). Prints `N passed, M failed`; the log is also written to $OUT/gpu-consumers.log
# when OUT is set.

# Derivation attributes hold shell code in single quotes, to run in the build.
# shellcheck disable=SC2016
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=consumers
# shellcheck source=tests/gpu/lib.sh
. "$HERE/lib.sh"

PY=${CONSUMERS_PYTHON:-python3}
PY=$(command -v "$PY") || die "no python (${CONSUMERS_PYTHON:-python3})"
machine "python:      $("$PY" --version 2>&1) ($PY)"

W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-consumers.XXXXXX")
trap 'rm -rf "$W"' EXIT
stubPkg=$W/nix/store/0k7c9m2xvq1dbz4h8s5pyj3wnf6rl0ga-cuda_cudart-13.0-stubs
stubDir=$stubPkg/lib
driverLink=$W/run/opengl-driver/lib
noDriver=$W/run/no-driver/lib
make_stub_dir "$stubDir"
make_driver_link "$driverLink"
mkdir -p "$noDriver" "$W/tools" "$W/build/lib" "$W/build/site" "$W/pkgs"
# The autoPatchelf emulation calls patchelf; elfpatch takes the same command line.
command -v patchelf >/dev/null || ln -s "$ELFPATCH" "$W/tools/patchelf"
export PATH=$W/tools:$PATH
hide() { sed "s|$W|\$W|g; s/^/    | /"; }

######################################################################
section "B's files, built with nvcc and gcc against NVIDIA's stub (no RUNPATH, as before fixup)"
nvcc_arch_flags "$W"
check "nvcc builds libvecadd.so against the stub" \
  "$nvcc" "${archFlags[@]}" -shared -Xcompiler -fPIC -o "$W/build/lib/libvecadd.so" "$HERE/vecadd.cu" -L"$stubDir" -lcuda
pyInclude=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
pySuffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX") or ".so")')
pyModule=${CONSUMERS_PY_MODULE:-auto}
if [[ $pyModule == auto ]]; then
  if [[ -f $pyInclude/Python.h ]]; then pyModule=extension; else pyModule=ctypes; fi
fi
echo "B's Python module: $pyModule"
if [[ $pyModule == extension ]]; then
  check "gcc builds the cudaprobe extension, linked against libvecadd.so" \
    gcc -O2 -shared -fPIC -I"$pyInclude" -o "$W/build/site/cudaprobe$pySuffix" "$HERE/cudaprobe.c" \
    -L"$W/build/lib" -lvecadd -Wl,-rpath-link,"$stubDir"
else
  # What the extension does, through ctypes (which dlopens with RTLD_NOW): the import loads
  # libvecadd.so, and with it libcuda.so.1.
  cat >"$W/build/site/cudaprobe.py" <<'EOF'
import ctypes, os
_lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "libvecadd.so"))
def describe():
    name = ctypes.create_string_buffer(256)
    count = ctypes.c_int(0)
    r = _lib.gpu_describe(name, 256, ctypes.byref(count))
    return (r, count.value, name.value.decode())
def vecadd(n):
    return _lib.vecadd_check(n)
EOF
  check "cudaprobe as a ctypes module (the Python has no headers)" test -f "$W/build/site/cudaprobe.py"
fi

# C's pure-Python package.
mkdir -p "$W/build/c/usesprobe"
cat >"$W/build/c/usesprobe/__init__.py" <<'EOF'
import cudaprobe
def report():
    status, count, name = cudaprobe.describe()
    if status == 34:
        print("usesprobe: cuInit: CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library")
        return 34
    if status != 0:
        print("usesprobe: cuInit/cuDevice*: error %d" % status)
        return 1
    wrong = cudaprobe.vecadd(1 << 20)
    print("usesprobe: devices: %d, device 0: %s, vector add: %s" % (count, name, "OK" if wrong == 0 else "FAILED"))
    return 0 if wrong == 0 else 2
EOF

######################################################################
# The hooks as makeSetupHook makes them, and the derivations.
mkHookPkg() { # NAME FILE [SED-ARGS...]
  mkdir -p "$W/pkgs/$1/nix-support"
  sed "${@:3}" "$2" >"$W/pkgs/$1/nix-support/setup-hook"
  echo "$W/pkgs/$1"
}
checkHook=$(mkHookPkg stubstrip-check-hook "$ROOT/hooks/stubstrip-check-hook.sh" -e '')
hookFor() { # DRIVERLINK: stubstripHook with its substitutions (nix/hook.nix)
  mkHookPkg "stubstrip-hook-${1//\//_}" "$ROOT/hooks/stubstrip-hook.sh" \
    -e "s|@stubstrip@|$STUBSTRIP|g" -e "s|@driverLink@|$1|g" -e "s|@checkHook@|$checkHook|g"
}
autoPatchelfHook=$(mkHookPkg auto-patchelf-hook "$ROOT/tests/hook/hooks/auto-patchelf-hook.sh" -e '')

# drv NAME: starts $W/NAME/drv.sh (a derivation's attributes, as tests/hook writes them).
drv() {
  D=$W/$1
  mkdir -p "$D/tmp"
  cat >"$D/drv.sh" <<EOF
stdenvFlavour=new
__structuredAttrs=
outputs=out
out=$D/out
export out
export TMPDIR=$D/tmp
export NIX_STORE=$W/nix/store
export LD_BIND_NOW=1
EOF
  attr py "$PY"
}
attr() { printf '%s=%q\n' "$1" "$2" >>"$D/drv.sh"; }
# build: runs it in a clean environment (no LD_LIBRARY_PATH); the log in $D/log.
build() { (cd "$D" && env -i PATH="$PATH" HOME="$D" bash "$ROOT/tests/hook/lib/builder.sh" "$D/drv.sh" >"$D/log" 2>&1); }
logHas() { grep -qF -- "$2" "$W/$1/log"; }
logCount() { grep -cF -- "$2" "$W/$1/log"; }
showLog() { echo "    --- $1:" && hide <"$W/$1/log"; }

# What the checks run: the import (of C from $pysite), and what answered (0: the GPU, 34: the
# stub).
PYCHECK='rc=0
PYTHONPATH=$pysite:$bsite "$py" -c "import sys, usesprobe; sys.exit(usesprobe.report())" || rc=$?
echo "check: usesprobe.report() exited $rc"
[[ $rc == "$expect" ]]'

buildB() { # NAME DRIVERLINK EXPECT
  drv "$1"
  attr nativeBuildInputs "$(hookFor "$2") $autoPatchelfHook"
  attr buildInputs "$stubPkg"
  attr installPhase "mkdir -p \$out/lib/python3/site-packages
cp $W/build/lib/libvecadd.so \$out/lib/
cp $W/build/site/cudaprobe* \$out/lib/python3/site-packages/"
  attr doInstallCheck 1
  attr expect "$3"
  attr installCheckPhase 'runHook preInstallCheck
rc=0
PYTHONPATH=$out/lib/python3/site-packages "$py" -c "import sys, cudaprobe; s = cudaprobe.describe(); print(\"B: describe:\", s); sys.exit(s[0])" || rc=$?
[[ $rc == "$expect" ]]
runHook postInstallCheck'
  build
}

buildC() { # NAME B EXPECT
  drv "$1"
  attr buildInputs "$2/out"
  attr bsite "$2/out/lib/python3/site-packages"
  attr expect "$3"
  # As buildPythonPackage: the package, and B in nix-support/propagated-build-inputs.
  attr installPhase "mkdir -p \$out/lib/python3/site-packages \$out/nix-support
cp -r $W/build/c/usesprobe \$out/lib/python3/site-packages/
printf '%s ' $2/out >\$out/nix-support/propagated-build-inputs
echo \"LD_LIBRARY_PATH during install: [\${LD_LIBRARY_PATH-}]\""
  attr doCheck 1
  # checkPhase runs before installation: C from its source.
  attr checkPhase "runHook preCheck
pysite=$W/build/c
$PYCHECK
runHook postCheck"
  attr doInstallCheck 1
  attr installCheckPhase "runHook preInstallCheck
pysite=\$out/lib/python3/site-packages
$PYCHECK
runHook postInstallCheck"
  attr preDistPhases importsCheckPhase
  attr importsCheckPhase "pysite=\$out/lib/python3/site-packages
$PYCHECK"
  build
}

buildD() { # NAME C B EXPECT
  drv "$1"
  attr buildInputs "$2/out"
  attr blib "$3/out/lib"
  attr expect "$4"
  # NIX_LDFLAGS reaches ld as cc-wrapper passes it; -rpath names the -L store directory, as
  # ld-wrapper adds it.
  attr buildPhase "ldflags=()
for f in \${NIX_LDFLAGS-}; do ldflags+=(\"-Wl,\$f\"); done
echo \"NIX_LDFLAGS: [\${NIX_LDFLAGS-}]\"
gcc -O2 -o d $HERE/consumer.c -L\$blib -lvecadd -Wl,--enable-new-dtags,-rpath,\$blib \${ldflags[@]+\"\${ldflags[@]}\"}"
  attr installPhase 'mkdir -p $out/bin && cp d $out/bin/'
  attr doInstallCheck 1
  attr installCheckPhase 'runHook preInstallCheck
rc=0
$out/bin/d || rc=$?
echo "installCheck: d exited $rc"
[[ $rc == "$expect" ]]
runHook postInstallCheck'
  build
}

runpathOf() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
cleanRunpath() { # FILE: the driver link in it, no stub entry, no check libraries
  local rp
  rp=$(runpathOf "$1")
  printf '    %-52s %s\n' "${1#"$W"/}" "$rp" | hide
  [[ :$rp: == *":$2:"* && :$rp: != *-stubs/* && :$rp: != */stubs:* && $rp != *stubstrip-check-libs* ]]
}

######################################################################
section "1. a GPU builder: the driver at B's driver link"
if buildB b-gpu "$driverLink" 0; then bOk=true; else bOk=false; fi
hide <"$W/b-gpu/log" | grep -E 'stubstrip|B: describe|consumers' || true
check "B builds; its own installCheck imports cudaprobe and finds the GPU" $bOk
leftForConsumers() { # B
  cmp -s "$1/out/nix-support/stubstrip-check-libs/libcuda.so.1" "$stub" &&
    grep -qF "$checkHook " "$1/out/nix-support/propagated-build-inputs"
}
check "B leaves its check libraries (a copy of NVIDIA's stub) and propagates the check hook" leftForConsumers "$W/b-gpu"
if buildC c-gpu "$W/b-gpu" 0; then cOk=true; else cOk=false; fi
hide <"$W/c-gpu/log" | grep -E 'usesprobe|check:|stubstripCheckHook|LD_LIBRARY_PATH' || true
check "C builds: checkPhase, installCheck and the import check reach CUDA and find the GPU (LD_BIND_NOW=1)" $cOk
check "... three times" test "$(logCount c-gpu "usesprobe: devices: ")" = 3
check "the check hook saw the driver and left the check libraries unused" \
  logHas c-gpu "stubstripCheckHook: $driverLink/libcuda.so.1 is here: $W/b-gpu/out/nix-support/stubstrip-check-libs not used"
if buildD d-gpu "$W/c-gpu" "$W/b-gpu" 0; then dOk=true; else dOk=false; fi
hide <"$W/d-gpu/log" | grep -E '^d:|installCheck|NIX_LDFLAGS' || true
check "D links B's library and its installCheck runs on the GPU" $dOk
check "... with no -rpath-link to the stub" logHas d-gpu "NIX_LDFLAGS: []"
if ! { $bOk && $cOk && $dOk; }; then showLog b-gpu && showLog c-gpu && showLog d-gpu; fi

######################################################################
section "2. control: B's check libraries forced onto LD_LIBRARY_PATH would shadow the driver"
forced=$(env -i PATH="$PATH" LD_LIBRARY_PATH="$W/b-gpu/out/nix-support/stubstrip-check-libs" \
  PYTHONPATH="$W/c-gpu/out/lib/python3/site-packages:$W/b-gpu/out/lib/python3/site-packages" \
  "$PY" -c 'import sys, usesprobe; sys.exit(usesprobe.report())' 2>&1)
printf '%s\n' "$forced" | hide
check "with them on LD_LIBRARY_PATH NVIDIA's stub answers (34): not using them is what let the GPU be found" \
  grep -q "CUDA_ERROR_STUB_LIBRARY (34)" <<<"$forced"

######################################################################
section "3. a sandbox without a driver (B's driver link empty)"
if buildB b-nodriver "$noDriver" 34; then bOk=true; else bOk=false; fi
check "B builds; its own check gets NVIDIA's stub through its fallback (34)" $bOk
check "B leaves its check libraries and propagates the check hook" leftForConsumers "$W/b-nodriver"
if buildC c-nodriver "$W/b-nodriver" 34; then cOk=true; else cOk=false; fi
hide <"$W/c-nodriver/log" | grep -E 'usesprobe|check:|stubstripCheckHook|LD_LIBRARY_PATH' || true
check "C builds: its three imports load B's library with every symbol bound and NVIDIA's stub answers 34" $cOk
check "... three times" test "$(logCount c-nodriver "CUDA_ERROR_STUB_LIBRARY (34)")" = 3
check "LD_LIBRARY_PATH is left alone outside the checks" logHas c-nodriver "LD_LIBRARY_PATH during install: []"
if buildD d-nodriver "$W/c-nodriver" "$W/b-nodriver" 34; then dOk=true; else dOk=false; fi
hide <"$W/d-nodriver/log" | grep -E '^d:|installCheck|NIX_LDFLAGS' || true
check "D links B's library through the check libraries (-rpath-link) and its installCheck gets 34" $dOk
if ! { $bOk && $cOk && $dOk; }; then showLog b-nodriver && showLog c-nodriver && showLog d-nodriver; fi

######################################################################
section "4. run time"
check "B's RUNPATH: the driver link, no stub entry, no check libraries" \
  cleanRunpath "$W/b-gpu/out/lib/libvecadd.so" "$driverLink"
check "... (sandbox build)" cleanRunpath "$W/b-nodriver/out/lib/libvecadd.so" "$noDriver"
dRunpath() { # D B: exactly B's lib, as linked
  printf '    %-52s %s\n' "${1#"$W"/}" "$(runpathOf "$1")" | hide
  [[ $(runpathOf "$1") == "$2/out/lib" ]]
}
check "D's RUNPATH is B's lib only, no check libraries" dRunpath "$W/d-gpu/out/bin/d" "$W/b-gpu"
check "... (sandbox build)" dRunpath "$W/d-nodriver/out/bin/d" "$W/b-nodriver"
runD() { # FILE EXPECTED-STATUS PATTERN
  local out status=0
  out=$(env -i "$1" 2>&1) || status=$?
  printf '%s\n' "$out" | hide
  [[ $status == "$2" ]] && grep -q -- "$3" <<<"$out"
}
check "D from the GPU builder runs on the GPU" runD "$W/d-gpu/out/bin/d" 0 "d: vector add: OK"
# D from the driverless sandbox has an empty driver link; what the loader does next is the host's
# business: a host whose ld.so.cache names a driver (this device's does) loads it, one without
# fails to open libcuda.so.1. Either way the check libraries (NVIDIA's stub) never load.
noCheckLibs() { # FILE: run it with LD_DEBUG=libs; no library comes from stubstrip-check-libs
  local out
  out=$(env -i LD_DEBUG=libs "$1" 2>&1) || true
  grep -E 'trying file=.*libcuda|calling init:.*libcuda' <<<"$out" | hide
  ! grep -q 'stubstrip-check-libs' <<<"$out"
}
check "D from the driverless sandbox never loads the check libraries at run time" \
  noCheckLibs "$W/d-nodriver/out/bin/d"
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  check "... and finds the host's driver through ld.so.cache (its own driver link is empty)" \
    runD "$W/d-nodriver/out/bin/d" 0 "d: vector add: OK"
else
  check "... and finds no libcuda.so.1 (its driver link is empty, the host has no driver)" \
    runD "$W/d-nodriver/out/bin/d" 127 "libcuda.so.1: cannot open shared object file"
fi

echo
echo "$pass passed, $failed failed"
((failed == 0))
