#!/usr/bin/env bash
# tests/gpu/run.sh: the proof on a real GPU, with NVIDIA's own stub.
#
# 1. builds with nvcc a shared library with a CUDA kernel (a vector add checked on the host) and an
#    executable linking it, both linked against the driver API through NVIDIA's stub libcuda, the
#    stub copied into a directory shaped like a Nix store stubs output (with the libcuda.so.1 link
#    nixpkgs' cuda_cudart adds), that directory in RUNPATH as a Nix build leaves it;
# 2. runs it (LD_LIBRARY_PATH unset for every run: it is searched before RUNPATH and would hide the
#    problem) and shows cuInit failing with CUDA_ERROR_STUB_LIBRARY (34);
# 3. runs `stubstrip fix --driver-link DIR` (DIR links to the real libcuda.so.1, as
#    /run/opengl-driver/lib does on NixOS), shows readelf -d before and after, `stubstrip check`,
#    and the program finding the GPU and computing the right answer;
# 4. does the same through the setup hook itself: a derivation built by the tests/hook emulation
#    of stdenv, with an autoPatchelf-like hook that writes the stub directory into RUNPATH and the
#    stubstrip hook (substituted as makeSetupHook would) replacing it;
# 5. gives a third build a resolution-cache note (patchelf 0.19.3's --build-resolution-cache:
#    PATCHELF, else a patchelf 0.19.3 on PATH, else elfpatch's byte-identical one) that pins
#    NVIDIA's stub, and shows `stubstrip check` failing on it, `explain` and `audit` finding the
#    stub through the note, `stubstrip fix` rewriting it (no stub bytes left in the note or
#    .dynstr; nvcc's own copy of its link command line keeps `-L<stub dir>`), idempotent, and the
#    program running. This machine's glibc ignores the note (only nixpkgs PR #535735's patched
#    glibc reads it), so the run proves the rewrite and the checks, not a load through the note;
# 6. prints `N passed, M failed` (exit status 1 if any failed).
#
# Needs: nvcc, NVIDIA's stubs, a driver, readelf, and release builds of stubstrip and elfpatch
# (STUBSTRIP / ELFPATCH, default target/release/*: build them elsewhere and carry them; nothing is
# installed). elfpatch also stands in for patchelf where the machine has none (it takes patchelf's
# command line). The log is also written to $OUT/gpu-run.log when OUT is set.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=run
# shellcheck source=tests/gpu/lib.sh
. "$HERE/lib.sh"

######################################################################
# What this machine has.

# shellcheck disable=SC2119 # no extra lines
machine

######################################################################
# A Nix-store-shaped stubs output with NVIDIA's stub, and a driver link.

W=$(mktemp -d "${TMPDIR:-/tmp}/gpu-proof.XXXXXX")
trap 'rm -rf "$W"' EXIT
stubPkg=$W/nix/store/0k7c9m2xvq1dbz4h8s5pyj3wnf6rl0ga-cuda_cudart-13.0-stubs
stubDir=$stubPkg/lib
driverLink=$W/run/opengl-driver/lib
mkdir -p "$W/build" "$W/cli/bin" "$W/cli/lib" "$W/tools"
make_stub_dir "$stubDir"
make_driver_link "$driverLink"
# The autoPatchelf emulation calls patchelf; elfpatch takes the same command line.
command -v patchelf >/dev/null || ln -s "$ELFPATCH" "$W/tools/patchelf"
export PATH=$W/tools:$PATH

######################################################################
# Build.

section "build with nvcc, against NVIDIA's stub"
nvcc_arch_flags "$W"
buildAll() { # DIR LIBRPATH EXERPATH (empty: no RUNPATH, as a build leaves files before fixup)
  local dir=$1 librp=() exerp=()
  [[ -n $2 ]] && librp=(-Xlinker --enable-new-dtags -Xlinker "-rpath=$2")
  [[ -n $3 ]] && exerp=(-Xlinker --enable-new-dtags -Xlinker "-rpath=$3")
  "$nvcc" "${archFlags[@]}" -shared -Xcompiler -fPIC -o "$dir/lib/libvecadd.so" "$HERE/vecadd.cu" \
    -L"$stubDir" -lcuda "${librp[@]}" &&
    "$nvcc" "${archFlags[@]}" -o "$dir/bin/app" "$HERE/app.c" -L"$dir/lib" -lvecadd -L"$stubDir" -lcuda "${exerp[@]}"
}
mkdir -p "$W/build/bin" "$W/build/lib"
check "nvcc builds the library and the executable (no RUNPATH, as before fixup)" buildAll "$W/build" "" ""
check "nvcc builds them with the stub directory in RUNPATH, as a Nix build leaves them" \
  buildAll "$W/cli" "$stubDir:/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-gcc-14-lib/lib" "$W/cli/lib:$stubDir"

runApp() { # FILE EXPECTED-STATUS PATTERN: runs FILE without LD_LIBRARY_PATH
  local out status=0
  out=$(env -u LD_LIBRARY_PATH "$1" 2>&1) || status=$?
  printf '%s\n' "$out" | sed 's/^/    | /'
  [[ $status == "$2" ]] && grep -q -- "$3" <<<"$out"
}
runpaths() { for f in "$@"; do printf '    %-28s %s\n' "${f#"$W"/}" "$(readelf -d "$f" | sed -n 's/.*(RUNPATH) *//p')"; done; }
noStubs() {
  local f
  for f in "$@"; do
    if readelf -d "$f" | grep -Eq '(R|RUN)PATH.*(-stubs/|/stubs([]:/]|$))'; then return 1; fi
  done
}
hasDriverLink() {
  local f
  for f in "$@"; do
    readelf -d "$f" | grep -q "RUNPATH.*$driverLink" || return 1
  done
}

######################################################################
section "through the CLI"
cliFiles=("$W/cli/bin/app" "$W/cli/lib/libvecadd.so")
echo "readelf -d, before:"
runpaths "${cliFiles[@]}"
check "before: the program loads NVIDIA's stub and cuInit fails with CUDA_ERROR_STUB_LIBRARY (34)" \
  runApp "$W/cli/bin/app" 34 "CUDA_ERROR_STUB_LIBRARY"
fixOut=$("$STUBSTRIP" fix -v --driver-link "$driverLink" "$W/cli" 2>&1)
printf '%s\n' "$fixOut" | sed "s|$W|\$W|g; s/^/    | /"
check "stubstrip fix rewrites the library and the executable" grep -q "2 of 2 ELF files rewritten, 2 stub entries replaced" <<<"$fixOut"
echo "readelf -d, after:"
runpaths "${cliFiles[@]}"
fixedOk() { noStubs "$@" && hasDriverLink "$@"; }
check "after: no stub entry, the driver link in its place" fixedOk "${cliFiles[@]}"
check "stubstrip check passes" "$STUBSTRIP" check "$W/cli"
check "after: the program finds the GPU and computes the right answer" \
  runApp "$W/cli/bin/app" 0 "vector add: OK"
again=$("$STUBSTRIP" fix --driver-link "$driverLink" "$W/cli" 2>&1)
check "a second stubstrip fix rewrites nothing" grep -q "0 of 2 ELF files rewritten" <<<"$again"

######################################################################
section "a resolution-cache note that pins NVIDIA's stub"
if [[ -n ${PATCHELF:-} ]]; then notePatchelf=$PATCHELF
elif command -v patchelf >/dev/null && patchelf --version | grep -q '0\.19\.3'; then notePatchelf=patchelf
else notePatchelf=$ELFPATCH; fi
echo "note written by: $notePatchelf ($("$notePatchelf" --version 2>&1 | head -1))"
mkdir -p "$W/note/bin" "$W/note/lib"
noteFiles=("$W/note/bin/app" "$W/note/lib/libvecadd.so")
check "nvcc builds the note case with the stub directory in RUNPATH" \
  buildAll "$W/note" "$stubDir" "$W/note/lib:$stubDir"
check "--build-resolution-cache writes a note into both files" "$notePatchelf" --build-resolution-cache "${noteFiles[@]}"
noteOf() { readelf -x .note.nixos.ldcache "$1" 2>/dev/null | sed -n 's/^  0x[0-9a-f]* \(.\{35\}\) *//p' | tr -d '\n'; echo; }
noStubBytes() { ! grep -a -q -- "-cuda_cudart-13.0-stubs" "$@"; }
checkFails() { ! "$STUBSTRIP" check "$@" >/dev/null 2>&1; }
haveNote() { local f; for f in "$@"; do readelf -n "$f" | grep -q NixOS || return 1; done; }
auditClean() { ! "$STUBSTRIP" audit "$@" 2>&1 | grep -Eq "SS0(01|09)"; }
pinsStub() { local f; for f in "$@"; do grep -a -q -- "=$stubDir/libcuda.so.1" "$f" || return 1; done; }
for f in "${noteFiles[@]}"; do echo "    ${f#"$W"/} note: $(noteOf "$f" | sed "s|$W|\$W|g")"; done
check "the note pins the stub: =$stubDir/libcuda.so.1" pinsStub "${noteFiles[@]}"
# nvcc keeps its device-link command line (`-L<stub dir>` included) in the files' bytes, which no
# run-path tool touches: the check is on the note and the dynamic string table, and what is
# left elsewhere is printed.
noStubInNoteOrDynstr() {
  local f
  for f in "$@"; do
    objcopy --dump-section .note.nixos.ldcache="$W/sec.note" --dump-section .dynstr="$W/sec.dynstr" \
      "$f" "$W/sec.elf" || return 2
    noStubBytes "$W/sec.note" "$W/sec.dynstr" || return 1
  done
}
stubBytesInNote() { # (1: stub bytes found; 2, objcopy failing, is no proof)
  noStubInNoteOrDynstr "$@"
  [[ $? == 1 ]]
}
check "before: the note and .dynstr hold the stub's bytes" stubBytesInNote "${noteFiles[@]}"
# What a fix that forgets the note leaves: RUNPATH fixed, the note still pinning the stub.
explainNote() { # FILE WANT-PREFIX [ARGS...]: libcuda.so.1 resolves under WANT-PREFIX
  local f=$1 want=$2
  shift 2
  "$STUBSTRIP" explain --json --ld-library-path '' "$@" "$f" >"$W/note.json" 2>/dev/null
  python3 - "$W/note.json" "$want" <<'PYEOF'
import json, sys
v = json.load(open(sys.argv[1]))
l = next(l for l in v["lookups"] if l["name"] == "libcuda.so.1" and l["result"] == "loaded")
print("    libcuda.so.1 =>", l["path"], "via", l["found_via"], "STUB" if l["stub"] else "")
sys.exit(0 if l["path"].startswith(sys.argv[2]) else 1)
PYEOF
}
check "explain (patched glibc) finds the stub through the note" explainNote "$W/note/bin/app" "$stubDir/"
check "before: stubstrip check fails on the note" checkFails "$W/note"
auditOut=$("$STUBSTRIP" audit "$W/note" 2>&1)
printf '%s\n' "$auditOut" | sed "s|$W|\$W|g; s/^/    | /" | grep -E 'SS0(01|09)' | cut -c1-200
check "before: audit reports the note pinning the stub (SS009)" grep -q 'SS009' <<<"$auditOut"
fixOut=$("$STUBSTRIP" fix -v --driver-link "$driverLink" "$W/note" 2>&1)
printf '%s\n' "$fixOut" | sed "s|$W|\$W|g; s/^/    | /"
for f in "${noteFiles[@]}"; do echo "    ${f#"$W"/} note: $(noteOf "$f" | sed "s|$W|\$W|g")"; done
runpaths "${noteFiles[@]}"
check "after: no stub bytes in the note or .dynstr" noStubInNoteOrDynstr "${noteFiles[@]}"
for f in "${noteFiles[@]}"; do # where any are left, by section
  grep -a -b -o -- "[^[:cntrl:]]*-cuda_cudart-13.0-stubs[^[:cntrl:]]*" "$f" | cut -c1-160 | sed "s|$W|\$W|g; s|^|    ${f#"$W"/} at byte |"
done
for f in "$W/cli/bin/app" "$W/cli/lib/libvecadd.so"; do # the same without a note, fixed above
  n=$(grep -a -c -- "-cuda_cudart-13.0-stubs" "$f")
  echo "    ${f#"$W"/} (no note, fixed above): $n lines with stub bytes"
done
check "after: the note is still there" haveNote "${noteFiles[@]}"
check "after: RUNPATH has the driver link and no stub entry" fixedOk "${noteFiles[@]}"
check "after: stubstrip check passes" "$STUBSTRIP" check "$W/note"
check "after: explain (patched glibc) finds the driver link" explainNote "$W/note/bin/app" "$driverLink/"
check "after: audit has no SS009 and no SS001" auditClean "$W/note"
check "after: the program finds the GPU (this glibc ignores the note: RUNPATH decides)" \
  runApp "$W/note/bin/app" 0 "vector add: OK"
again=$("$STUBSTRIP" fix --driver-link "$driverLink" "$W/note" 2>&1)
check "a second stubstrip fix rewrites nothing" grep -q "0 of 2 ELF files rewritten" <<<"$again"

######################################################################
section "through the setup hook (tests/hook's stdenv emulation)"
pkgs=$W/pkgs
mkdir -p "$pkgs/stubstrip-hook/nix-support" "$pkgs/auto-patchelf-hook/nix-support"
# What makeSetupHook does with nix/hook.nix's substitutions.
sed -e "s|@stubstrip@|$STUBSTRIP|g" -e "s|@driverLink@|$driverLink|g" \
  "$ROOT/hooks/stubstrip-hook.sh" >"$pkgs/stubstrip-hook/nix-support/setup-hook"
cp "$ROOT/tests/hook/hooks/auto-patchelf-hook.sh" "$pkgs/auto-patchelf-hook/nix-support/setup-hook"
drvDir=$W/drv
out=$drvDir/out
mkdir -p "$drvDir/tmp"
cat >"$drvDir/drv.sh" <<EOF
stdenvFlavour=new
__structuredAttrs=
outputs=out
out=$out
export out
# The stubstrip hook is listed BEFORE autoPatchelfHook: it must still run after it.
nativeBuildInputs="$pkgs/stubstrip-hook $pkgs/auto-patchelf-hook"
buildInputs=$stubPkg
installPhase='mkdir -p \$out/bin \$out/lib && cp $W/build/bin/app \$out/bin/ && cp $W/build/lib/libvecadd.so \$out/lib/'
doInstallCheck=1
postInstallCheck='echo "installCheck: running \$out/bin/app" && \$out/bin/app'
export TMPDIR=$drvDir/tmp
EOF
buildLog=$drvDir/log
if (cd "$drvDir" && env -i PATH="$PATH" HOME="$drvDir" bash "$ROOT/tests/hook/lib/builder.sh" "$drvDir/drv.sh" >"$buildLog" 2>&1); then
  built=true
else
  built=false
fi
sed "s|$W|\$W|g; s/^/    | /" "$buildLog"
check "the derivation builds" $built
check "autoPatchelf wrote the stub directory into RUNPATH" grep -q "autoPatchelf: setting RUNPATH of .*$stubDir" "$buildLog"
check "the hook ran stubstrip after it" grep -q "2 of 2 ELF files rewritten, 2 stub entries replaced" "$buildLog"
echo "readelf -d of the output:"
runpaths "$out/bin/app" "$out/lib/libvecadd.so"
check "the output has the driver link and no stub entry" fixedOk "$out/bin/app" "$out/lib/libvecadd.so"
check "installCheck inside the build ran on the GPU" grep -q "vector add: OK" "$buildLog"
check "the hook-built program finds the GPU and computes the right answer" runApp "$out/bin/app" 0 "vector add: OK"

echo
echo "$pass passed, $failed failed"
((failed == 0))
