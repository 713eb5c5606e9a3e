#!/usr/bin/env bash
# tests/hook/run.sh [FILTER]
#
# Tests hooks/stubstrip-hook.sh inside an emulated stdenv (lib/builder.sh, with
# the mock stdenv of tests/nix) with an autoPatchelf-like hook, on ELF files built here with gcc, against
# the real stubstrip binary: $STUBSTRIP if set, else the one
# `cargo build --release -p stubstrip` produces. FILTER (a substring)
# runs only the tests whose names contain it. Prints `N passed, M failed`
# and exits non-zero if any test failed. KEEP=1 keeps the work directory.

# Derivation attributes hold shell code in single quotes, to run in the build.
# shellcheck disable=SC2016
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
HOOK=$ROOT/hooks/stubstrip-hook.sh
FILTER=${1-}

die() {
  echo "run.sh: $*" >&2
  exit 2
}

######################################################################
# Tools.

declare -A aptPackage=([gcc]=gcc [patchelf]=patchelf [readelf]=binutils [shellcheck]=shellcheck)
missing=()
for tool in gcc patchelf readelf shellcheck; do
  command -v "$tool" >/dev/null || missing+=("${aptPackage[$tool]}")
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "run.sh: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >/dev/null ||
      { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >/dev/null; } ||
      die "could not install ${missing[*]}"
  else
    die "missing tools (packages: ${missing[*]}); install them or run as root with apt-get"
  fi
fi

if [[ -n ${STUBSTRIP-} ]]; then
  BIN=$STUBSTRIP
else
  (cd "$ROOT" && cargo build --release -p stubstrip) || die "cargo build --release -p stubstrip failed"
  targetDir=${CARGO_TARGET_DIR:-target}
  [[ $targetDir == /* ]] || targetDir=$ROOT/$targetDir
  BIN=$targetDir/release/stubstrip
fi
[[ -x $BIN ]] || die "no stubstrip binary at $BIN"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-hook-tests.XXXXXX") || die "mktemp failed"
cleanup() {
  if [[ -n ${KEEP-} ]]; then
    echo "run.sh: kept $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

######################################################################
# Fixtures: a fake CUDA stub package shaped like nixpkgs' cuda_cudart stubs
# output, a fake driver, and ELF files without RUNPATH, as a build leaves
# them before fixup.

STORE=$WORK/nix/store
STUBPKG=$STORE/0k7c9m2xvq1dbz4h8s5pyj3wnf6rl0ga-cuda_cudart-12.8.90-stubs
STUBDIR=$STUBPKG/lib
DRIVER=$WORK/run/opengl-driver/lib
NODRIVER=$WORK/run/no-driver/lib
FIX=$WORK/fixtures
SRC=$HERE/fixtures

buildFixtures() {
  mkdir -p "$STUBDIR" "$DRIVER" "$FIX" || return 1
  # NVIDIA's stub has SONAME libcuda.so.1 but only the libcuda.so name;
  # nixpkgs adds the .so.1 symlink, which is what makes it loadable.
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$STUBDIR/libcuda.so" "$SRC/cuda_stub.c" &&
    ln -s libcuda.so "$STUBDIR/libcuda.so.1" &&
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$DRIVER/libcuda.so.1" "$SRC/cuda_driver.c" &&
    gcc -shared -fPIC -o "$FIX/libcudafake.so" "$SRC/cudafake.c" -L"$STUBDIR" -lcuda &&
    gcc -o "$FIX/app" "$SRC/app.c" -L"$FIX" -lcudafake -Wl,-rpath-link,"$STUBDIR" &&
    gcc -o "$FIX/import-check" "$SRC/import_check.c" -ldl &&
    gcc -shared -fPIC -o "$FIX/libplain.so" "$SRC/plain.c" &&
    gcc -o "$FIX/server" "$SRC/server.c" -L"$STUBDIR" -lcuda -Wl,-rpath,"$STUBDIR"
}
buildFixtures || die "building the fixtures failed"
for f in "$FIX/libcudafake.so" "$FIX/app"; do
  [[ $(readelf -d "$f") != *R*PATH* ]] || die "$f was linked with a RUNPATH"
done

# Setup-hook packages, as makeSetupHook would make them.
PKGS=$WORK/pkgs
mkHookPkg() { # NAME FILE [SED-ARGS...]
  mkdir -p "$PKGS/$1/nix-support"
  sed "${@:3}" "$2" >"$PKGS/$1/nix-support/setup-hook"
  echo "$PKGS/$1"
}
# The unsubstituted hook: it falls back to STUBSTRIP_BIN and STUBSTRIP_DRIVER_LINK.
SSH=$(mkHookPkg stubstrip-hook "$HOOK" -e '')
APH=$(mkHookPkg auto-patchelf-hook "$HERE/hooks/auto-patchelf-hook.sh" -e '')
ICH=$(mkHookPkg imports-check-hook "$HERE/hooks/imports-check-hook.sh" -e "s|@importCheck@|$FIX/import-check|g")
# The check hook the fixed outputs propagate (the unsubstituted hook gets it from
# STUBSTRIP_CHECK_HOOK).
SCH=$(mkHookPkg stubstrip-check-hook "$ROOT/hooks/stubstrip-check-hook.sh" -e '')

# The binary the hook runs: the real one, behind a wrapper that records
# each invocation in $STUBSTRIP_CALLS.
WRAP=$WORK/bin/stubstrip
mkdir -p "${WRAP%/*}"
cat >"$WRAP" <<EOF
#!/usr/bin/env bash
printf '%s\n' "\$*" >>"\${STUBSTRIP_CALLS:-/dev/null}"
exec $(printf '%q' "$BIN") "\$@"
EOF
chmod +x "$WRAP"

######################################################################
# Derivations. newDrv NAME MODE starts $WORK/NAME/drv.sh; MODE is
#   old         a stdenv without appendToVar/concatTo/getAllOutputNames/nixLog
#   new         a current stdenv, without structured attrs
#   structured  a current stdenv with __structuredAttrs
# Three outputs: out (libexec/libcudafake.so), lib (lib/libcudafake.so) and
# bin (bin/app); the stub package is a build input.

INSTALL='runHook preInstall
mkdir -p "$out/libexec" "$lib/lib" "$bin/bin"
cp "$fixtures/libcudafake.so" "$out/libexec/"
cp "$fixtures/libcudafake.so" "$lib/lib/"
cp "$fixtures/app" "$bin/bin/"
runHook postInstall'

newDrv() {
  startDrv "$1" "$2" || return 1
  setOutputs out lib bin
  list buildInputs "$STUBPKG"
  list nativeBuildInputs "$APH" "$SSH"
  str installPhase "$INSTALL"
}
# startDrv NAME MODE: a derivation file with the stdenv flavour, the
# fixtures and the settings every build gets, and nothing else.
startDrv() {
  D=$WORK/$1 MODE=$2 DRV=$WORK/$1/drv.sh
  rm -rf "$D" && mkdir -p "$D/tmp" && : >"$DRV"
  case $MODE in
    old) str stdenvFlavour old && str __structuredAttrs '' ;;
    new) str stdenvFlavour new && str __structuredAttrs '' ;;
    structured) str stdenvFlavour new && str __structuredAttrs 1 ;;
    *) return 1 ;;
  esac
  str fixtures "$FIX"
  envAttr STUBSTRIP_BIN "$WRAP"
  envAttr STUBSTRIP_DRIVER_LINK "$DRIVER"
  envAttr STUBSTRIP_CHECK_HOOK "$SCH"
  envAttr STUBSTRIP_CALLS "$D/calls"
  envAttr NIX_STORE "$STORE"
  envAttr NIX_LOG_FD 3
  envAttr TMPDIR "$D/tmp"
}
# str NAME VALUE: a string attribute (exported, as Nix does without
# structured attrs).
str() {
  printf '%s=%q\n' "$1" "$2" >>"$DRV"
  if [[ $MODE != structured ]]; then printf 'export %s\n' "$1" >>"$DRV"; fi
}
flag() { str "$1" 1; }
# envAttr NAME VALUE: exported in every mode (with structured attrs, what the
# derivation's `env` attribute holds).
envAttr() { printf 'export %s=%q\n' "$1" "$2" >>"$DRV"; }
# list NAME VALUE...: an array with structured attrs, else a string.
list() {
  local name=$1
  shift
  if [[ $MODE == structured ]]; then
    { printf '%s=(' "$name" && printf '%q ' "$@" && printf ')\n'; } >>"$DRV"
  else
    str "$name" "$*"
  fi
}
setOutputs() {
  local o
  if [[ $MODE == structured ]]; then
    printf 'declare -A outputs=(' >>"$DRV"
    for o; do printf '[%s]=%q ' "$o" "$D/$o" >>"$DRV"; done
    printf ')\n' >>"$DRV"
  else
    str outputs "$*"
    for o; do str "$o" "$D/$o"; done
  fi
}

# build: runs the derivation in a clean environment; output in $D/log, what
# went to NIX_LOG_FD in $D/nixlog.
build() {
  (cd "$D" && env -i PATH="$PATH" HOME="$D" bash "$HERE/lib/builder.sh" "$DRV" 3>"$D/nixlog" >"$D/log" 2>&1)
}

######################################################################
# Assertions: each prints why it failed and returns 1.

fail() {
  echo "    $*" >&2
  return 1
}
showLog() {
  echo "    --- $D/log (last 25 lines):" >&2
  tail -n 25 "$D/log" | sed 's/^/    | /' >&2
  if [[ -s $D/nixlog ]]; then
    echo "    --- $D/nixlog:" >&2
    sed 's/^/    | /' "$D/nixlog" >&2
  fi
}
buildOk() { build || { showLog && fail "the build failed"; }; }
buildFails() { ! build || { showLog && fail "the build succeeded but should have failed"; }; }
runpathOf() { readelf -d "$1" | sed -n 's/.*Library \(runpath\|rpath\): \[\(.*\)\]$/\2/p'; }
runpathIs() { # FILE EXPECTED
  local got
  got=$(runpathOf "$1")
  [[ $got == "$2" ]] || fail "RUNPATH of $1 is [$got], expected [$2]"
}
# Every ELF file under the outputs has no stub entry left.
noStubsIn() {
  local f rp bad=0
  while IFS= read -r -d '' f; do
    [[ $(head -c 4 "$f" | od -An -c | tr -d ' ') == '177ELF' ]] || continue
    rp=$(runpathOf "$f")
    case ":$rp:" in
      *stubs:* | *stubs/*) fail "stub entry left in $f: [$rp]" || bad=1 ;;
    esac
  done < <(find "$@" -type f -print0)
  return "$bad"
}
# runs FILE STATUS: runs FILE outside the build and checks its exit status
# (0: the driver's libcuda answered, 34: the stub's).
runs() {
  local out status=0
  out=$(env -i "$1" 2>&1) || status=$?
  [[ $status == "$2" ]] || fail "$1 exited $status, expected $2; output: $out"
}
# logHas / logLacks: in the build output or what went to NIX_LOG_FD.
logHas() { grep -qF -- "$1" "$D/log" "$D/nixlog" || { showLog && fail "log lacks: $1"; }; }
logLacks() { ! grep -qF -- "$1" "$D/log" "$D/nixlog" || fail "log has: $1"; }
nixlogHas() { grep -qF -- "$1" "$D/nixlog" || { showLog && fail "NIX_LOG_FD output lacks: $1"; }; }
countIs() { # DESCRIPTION GOT EXPECTED
  [[ $2 == "$3" ]] || fail "$1: $2, expected $3"
}
calls() { # PATTERN: how many stubstrip invocations match
  if [[ -f $D/calls ]]; then grep -c -- "$1" "$D/calls"; else echo 0; fi
}
fixupCalls() { calls '^fixup '; }
# A hook package made from the real hook with a sed edit (to show that a
# test fails when the hook misbehaves).
mutantHook() { mkHookPkg "stubstrip-hook-$1" "$HOOK" "${@:2}"; }

######################################################################
# Tests. Each runs in a subshell with errexit; any failing assertion fails it.

# The hook fixes every output whatever its position among the hooks and
# whatever doInstallCheck says; installCheck already sees the fixed RUNPATH.
fixupCase() { # MODE ORDER(before|after) INSTALLCHECK(on|off)
  newDrv "fixup-$1-$2-installcheck-$3" "$1"
  if [[ $2 == before ]]; then
    list nativeBuildInputs "$SSH" "$APH"
    # a prePhases value of the derivation's own is kept
    list prePhases ownPrePhase
    str ownPrePhase 'echo "ownPrePhase ran"'
  fi
  if [[ $3 == on ]]; then
    flag doInstallCheck
    str installCheckPhase 'runHook preInstallCheck; readelf -d "$lib/lib/libcudafake.so" >"$TMPDIR/installcheck"; runHook postInstallCheck'
  fi
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  runpathIs "$D/out/libexec/libcudafake.so" "$DRIVER"
  noStubsIn "$D/out" "$D/lib" "$D/bin"
  runs "$D/bin/bin/app" 0
  # one stubstrip process over the three outputs
  countIs "stubstrip runs" "$(calls .)" 1
  countIs "stubstrip fixup runs" "$(fixupCalls)" 1
  local o
  for o in out lib bin; do
    grep -q "^fixup .* $D/$o\( \|$\)" "$D/calls" || fail "fixup was not given output $o: $(cat "$D/calls")"
  done
  if [[ $2 == before ]]; then logHas "ownPrePhase ran"; fi
  if [[ $3 == on ]]; then
    grep -qF "Library runpath: [$DRIVER]" "$D/tmp/installcheck" || fail "installCheck saw: $(cat "$D/tmp/installcheck")"
  else
    [[ ! -e $D/tmp/installcheck ]] || fail "installCheck ran without doInstallCheck"
  fi
}

# The problem itself, reproduced by the harness: without the hook the stub
# directory is in RUNPATH and the stub answers.
test_control_without_hook() {
  newDrv control-without-hook new
  list nativeBuildInputs "$APH"
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$STUBDIR"
  runs "$D/bin/bin/app" 34
}

# Why the hook registers late: a copy that appends itself to postFixupHooks
# at source time, sourced before the autoPatchelf-like hook, loses its edit.
test_control_source_time_registration_loses() {
  local mutant
  mutant=$(mutantHook source-time -e 's/^  appendToVar prePhases stubstripRegisterPhase$/  postFixupHooks+=(stubstripPostFixup)/' -e 's/^preFixupHooks+=(stubstripRegisterPhase)$//')
  grep -q '^  postFixupHooks+=(stubstripPostFixup)$' "$mutant/nix-support/setup-hook" || fail "mutation did not apply"
  newDrv control-source-time new
  list nativeBuildInputs "$mutant" "$APH"
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$STUBDIR"
}

# dontStubstrip: nothing runs, the stub stays, one log line says so (through
# nixLog where the stdenv has it, else on stderr).
dontStubstripCase() { # MODE
  newDrv "dontStubstrip-$1" "$1"
  flag dontStubstrip
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$STUBDIR"
  runs "$D/bin/bin/app" 34
  countIs "stubstrip runs" "$(calls .)" 0
  local line="stubstripPostFixup: skipped: dontStubstrip is set"
  if [[ $1 == old ]]; then
    countIs "skip lines on stderr" "$(grep -cxF "$line" "$D/log")" 1
  else
    countIs "skip lines on NIX_LOG_FD" "$(grep -cxF "$line" "$D/nixlog")" 1
    countIs "skip lines on stderr" "$(grep -cxF "$line" "$D/log")" 0
  fi
}

# Sourced twice (in nativeBuildInputs and buildInputs, as when propagated
# into both lists): registered once, run once.
onceCase() { # MODE
  newDrv "sourced-twice-$1" "$1"
  list buildInputs "$STUBPKG" "$SSH"
  list postPhases dumpHooksPhase
  str dumpHooksPhase 'echo "${prePhases[*]}" >"$TMPDIR/prePhases"; echo "${postFixupHooks[*]}" >"$TMPDIR/postFixupHooks"'
  buildOk
  countIs "stubstripRegisterPhase in prePhases" "$(grep -o stubstripRegisterPhase "$D/tmp/prePhases" | wc -l)" 1
  countIs "stubstripPostFixup in postFixupHooks" "$(grep -o stubstripPostFixup "$D/tmp/postFixupHooks" | wc -l)" 1
  countIs "stubstrip fixup runs" "$(fixupCalls)" 1
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
}

# A failing `stubstrip fixup` fails the build: here the binary refuses a
# driver link that is itself a stub directory (a usage error), before
# writing anything.
fixFailsCase() { # MODE
  newDrv "fix-fails-$1" "$1"
  list stubstripFlags --driver-link "$STUBDIR"
  buildFails
  logHas "the driver link $STUBDIR itself matches the stub rule"
  logHas "fixup' failed with exit status 2"
  runpathIs "$D/lib/lib/libcudafake.so" "$STUBDIR"
}

# The check fails the build, naming the file, on a stub entry that the fix
# cannot remove: a prebuilt vendor daemon, started from the output during
# the build and still running, cannot be opened for writing (ETXTBSY), not
# even by root. The fix rewrites the other files and reports the busy one;
# the check after it names it. With a second argument, the stub directory is
# a vendor directory that only stubstripFlags' --stub-pattern names: the
# pattern reaches the check as well as the fix.
checkCase() { # MODE [pattern]
  local stubs=$STUBDIR
  if [[ ${2-} == pattern ]]; then
    stubs=$WORK/opt/vendor-cuda/lib
    mkdir -p "$stubs" && cp -P "$STUBDIR"/libcuda.so* "$stubs/"
  fi
  newDrv "check-fails-$1${2:+-$2}" "$1"
  flag dontAutoPatchelf
  str postInstall 'cp "$fixtures/server" "$bin/bin/"
patchelf --set-rpath "$vendorRunpath" "$lib/lib/libcudafake.so" "$bin/bin/server"
"$bin/bin/server" 60 "$TMPDIR/server.ready" >/dev/null 2>&1 &
echo $! >"$TMPDIR/server.pid"
while [[ ! -e $TMPDIR/server.ready ]]; do sleep 0.01; done'
  str vendorRunpath "$stubs"
  if [[ ${2-} == pattern ]]; then list stubstripFlags --stub-pattern '*/vendor-cuda/lib'; fi
  local status=0
  build || status=$?
  if [[ -f $D/tmp/server.pid ]]; then kill "$(cat "$D/tmp/server.pid")" 2>/dev/null || true; fi
  ((status != 0)) || { showLog && fail "the build succeeded but should have failed"; }
  logHas "stub paths still present"
  logHas "$D/bin/bin/server: RUNPATH entry $stubs"
  logHas "could not rewrite some files"
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  runpathIs "$D/bin/bin/server" "$stubs"
}

# A package that ships an ELF file nobody can parse (a test fixture: the
# magic, then garbage) builds, as it does with nixpkgs' own hook, which skips
# what patchelf cannot read: the hook leaves it byte-identical and says so.
# With the stub directory's path among its bytes it fails the check instead:
# a loader may read what elfpatch cannot.
fixtureCase() { # MODE [stub]
  newDrv "fixture-$1${2:+-$2}" "$1"
  flag dontAutoPatchelf
  str postInstall 'patchelf --set-rpath "$stubdir" "$lib/lib/libcudafake.so"
mkdir -p "$out/share/testdata"
{ printf "\177ELF\002\001\001"; head -c 20 /dev/zero; printf "%s" "$fixtureText"; } >"$out/share/testdata/corrupt.elf"
cp "$out/share/testdata/corrupt.elf" "$TMPDIR/corrupt.orig"'
  str stubdir "$STUBDIR"
  if [[ ${2-} == stub ]]; then
    str fixtureText ":$STUBDIR:"
    buildFails
    logHas "could not read every file, so it cannot say that no stub entry is left"
    logHas "$D/out/share/testdata/corrupt.elf: inconsistent headers"
  else
    str fixtureText "no paths here"
    buildOk
    logHas "$D/out/share/testdata/corrupt.elf: truncated"
    logHas "not read as ELF, but no string in it names a stub directory: left as it is"
    runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  fi
  cmp -s "$D/out/share/testdata/corrupt.elf" "$D/tmp/corrupt.orig" || fail "the fixture changed"
}

# A package's own postInstall notes its library with patchelf 0.19's
# --build-resolution-cache while the stub directory is its run path: the note
# (.note.nixos.ldcache) pins libcuda.so.1 in the stubs, and a loader that reads
# it would load the stub whatever RUNPATH says. The hook rewrites the note with
# the run path: libcuda.so.1 is searched in the driver link, and no stub store
# path is left in the file.
noteCase() { # MODE
  if ! patchelf --version | grep -q '^patchelf 0\.19\.'; then
    echo "needs patchelf 0.19 (--build-resolution-cache) on PATH" >&2
    exit 77
  fi
  newDrv "note-$1" "$1"
  flag dontAutoPatchelf
  str postInstall 'patchelf --set-rpath "$stubdir" "$lib/lib/libcudafake.so"
patchelf --build-resolution-cache "$lib/lib/libcudafake.so"
readelf -p .note.nixos.ldcache "$lib/lib/libcudafake.so" >"$TMPDIR/note.before"'
  str stubdir "$STUBDIR"
  buildOk
  grep -qF "=$STUBDIR/libcuda.so.1" "$D/tmp/note.before" || fail "patchelf's note does not pin the stub"
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  local note
  note=$(readelf -p .note.nixos.ldcache "$D/lib/lib/libcudafake.so")
  [[ $note == *"?$DRIVER"* ]] || fail "the note does not search the driver link: $note"
  ! grep -qaF "${STUBPKG##*/}" "$D/lib/lib/libcudafake.so" || fail "a stub store path is left in the file"
}

# The check fallback: in a sandbox without a driver, the checks after fixup
# (installCheck, and an import check in preDistPhases) can still load the
# library, because the removed stub directory is on LD_LIBRARY_PATH; outside
# the build the library loads only with a driver.
fallbackCase() { # MODE
  newDrv "fallback-$1" "$1"
  envAttr STUBSTRIP_DRIVER_LINK "$NODRIVER"
  list nativeBuildInputs "$APH" "$SSH" "$ICH"
  list importsCheck "$D/lib/lib/libcudafake.so"
  flag doInstallCheck
  str installCheckPhase 'runHook preInstallCheck; "$fixtures/import-check" "$lib/lib/libcudafake.so"; runHook postInstallCheck'
  str postInstall 'echo "LD_LIBRARY_PATH during install: [${LD_LIBRARY_PATH-}]"'
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$NODRIVER"
  countIs "successful imports" "$(grep -cF "import-check: loaded $D/lib/lib/libcudafake.so, cuInit=34" "$D/log")" 2
  logHas "LD_LIBRARY_PATH during install: []"
  if [[ $1 == old ]]; then
    logHas "stubstripFixup: appended to LD_LIBRARY_PATH for the checks after fixup: $STUBDIR"
  else
    nixlogHas "stubstripFixup: appended to LD_LIBRARY_PATH for the checks after fixup: $STUBDIR"
  fi
  local status=0
  env -i "$FIX/import-check" "$D/lib/lib/libcudafake.so" >/dev/null 2>&1 || status=$?
  countIs "import outside the build, without a driver, exit status" "$status" 1
}

# Where the build can see a driver (a GPU-enabled sandbox), the fallback
# stays off: the stub would shadow the driver the fixed RUNPATH finds.
fallbackDriverCase() { # MODE
  newDrv "fallback-driver-present-$1" "$1"
  list nativeBuildInputs "$APH" "$SSH" "$ICH"
  list importsCheck "$D/lib/lib/libcudafake.so"
  buildOk
  countIs "imports answered by the driver" "$(grep -cF "import-check: loaded $D/lib/lib/libcudafake.so, cuInit=0" "$D/log")" 1
  logHas "$DRIVER provides libcuda.so.1 here: LD_LIBRARY_PATH left as it is"
  logLacks "appended to LD_LIBRARY_PATH"
}

# The same with a cuda_compat directory (--compat in stubstripFlags) that
# holds libcuda.so.1 and no driver: it replaces the stub in place, before
# the driver link, and answers the import.
test_fallback_compat_present() {
  local compat=$WORK/nix/store/5x2kq9r8m1vwd5zj3hf6n0bsp4lgcy8a-cuda_compat-12.8/compat
  mkdir -p "$compat" && cp "$DRIVER/libcuda.so.1" "$compat/"
  newDrv fallback-compat-present new
  envAttr STUBSTRIP_DRIVER_LINK "$NODRIVER"
  list nativeBuildInputs "$APH" "$SSH" "$ICH"
  list importsCheck "$D/lib/lib/libcudafake.so"
  list stubstripFlags --compat "$compat"
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$compat:$NODRIVER"
  countIs "imports answered by compat" "$(grep -cF "import-check: loaded $D/lib/lib/libcudafake.so, cuInit=0" "$D/log")" 1
  logHas "$compat provides libcuda.so.1 here"
  logLacks "appended to LD_LIBRARY_PATH"
}

# The hook applies stubstrip's reply without eval: an LD_LIBRARY_PATH with
# spaces, quotes, globs and a command substitution comes back literally, with
# the stub directory appended, and nothing in it runs.
test_fallback_keeps_an_odd_ld_library_path() {
  local odd='/opt/a b:/opt/$(touch "$TMPDIR/ran"):/opt/*:/opt/it'"'"'s'
  newDrv fallback-odd-ld-library-path structured
  envAttr STUBSTRIP_DRIVER_LINK "$NODRIVER"
  envAttr LD_LIBRARY_PATH "$odd"
  flag doInstallCheck
  str installCheckPhase 'printf "%s\n" "$LD_LIBRARY_PATH" >"$TMPDIR/ld_library_path"'
  buildOk
  [[ $(cat "$D/tmp/ld_library_path") == "$odd:$STUBDIR" ]] || fail "LD_LIBRARY_PATH in installCheck: $(cat "$D/tmp/ld_library_path")"
  [[ ! -e $D/tmp/ran ]] || fail "a command substitution in LD_LIBRARY_PATH ran"
}

# dontStubstripCheckFallback: the same import check fails.
fallbackOffCase() { # MODE
  newDrv "fallback-off-$1" "$1"
  envAttr STUBSTRIP_DRIVER_LINK "$NODRIVER"
  list nativeBuildInputs "$APH" "$SSH" "$ICH"
  list importsCheck "$D/lib/lib/libcudafake.so"
  flag dontStubstripCheckFallback
  buildFails
  logHas "libcuda.so.1: cannot open shared object file"
  logLacks "appended to LD_LIBRARY_PATH"
  runpathIs "$D/lib/lib/libcudafake.so" "$NODRIVER"
}

# Running the hook again changes nothing: same inode, mtime, RUNPATH, and
# LD_LIBRARY_PATH; stubstrip did run twice.
idempotentCase() { # MODE
  newDrv "idempotent-$1" "$1"
  list postPhases rerunPhase
  # shellcheck disable=SC2016
  str rerunPhase 'snap() {
  local f
  for f in "$out/libexec/libcudafake.so" "$lib/lib/libcudafake.so" "$bin/bin/app"; do
    stat -c "%n %i %y %s" "$f"
    readelf -d "$f" | grep -E "RUNPATH|RPATH" || true
  done
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}"
}
snap >"$TMPDIR/before"
sleep 0.1
stubstripPostFixup
snap >"$TMPDIR/after"'
  buildOk
  countIs "stubstrip fixup runs" "$(fixupCalls)" 2
  diff -u "$D/tmp/before" "$D/tmp/after" >&2 || fail "the second run changed something"
  grep -qF "Library runpath: [$DRIVER]" "$D/tmp/after" || fail "snapshot lacks the fixed RUNPATH"
}

# stubstripFixup PATH... by hand, after a manual autoPatchelf: fixes the
# given paths only; without arguments it is a usage error.
handCase() { # MODE
  newDrv "hand-callable-$1" "$1"
  flag dontAutoPatchelf
  flag dontStubstrip
  str postInstall 'autoPatchelf "$out" "$lib" "$bin"
stubstripFixup "$lib"
if stubstripFixup; then echo "stubstripFixup without paths succeeded"; exit 1; else echo "no-path status $?"; fi'
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  runpathIs "$D/out/libexec/libcudafake.so" "$STUBDIR"
  logHas "no-path status 2"
  logHas "usage: stubstripFixup PATH..."
  countIs "stubstrip fixup runs" "$(fixupCalls)" 1
}

# A derivation that sets `phases` (without prePhases) is still fixed: the
# hook registers from preFixupHooks too.
phasesCase() { # MODE
  newDrv "phases-override-$1" "$1"
  list phases installPhase fixupPhase
  buildOk
  logLacks "Running phase: stubstripRegisterPhase"
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  runs "$D/bin/bin/app" 0
}
test_control_phases_override_needs_preFixup_registration() {
  local mutant
  mutant=$(mutantHook no-prefixup -e 's/^preFixupHooks+=(stubstripRegisterPhase)$//')
  newDrv control-phases-override new
  list nativeBuildInputs "$APH" "$mutant"
  list phases installPhase fixupPhase
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$STUBDIR"
}

# The hook as makeSetupHook makes it: substituted values are used (not the
# test fallbacks), and no @name@ is left.
test_substituted_hook() {
  local subst=$WORK/run/opengl-driver-substituted/lib pkg
  mkdir -p "$subst" && cp "$DRIVER/libcuda.so.1" "$subst/"
  pkg=$(mkHookPkg stubstrip-hook-substituted "$HOOK" -e "s|@stubstrip@|$WRAP|g" -e "s|@driverLink@|$subst|g" \
    -e "s|@checkHook@|$SCH|g")
  ! grep -nE '@[A-Za-z_][A-Za-z0-9_]*@' "$pkg/nix-support/setup-hook" >&2 || fail "unsubstituted names left"
  newDrv substituted new
  list nativeBuildInputs "$APH" "$pkg"
  envAttr STUBSTRIP_BIN /nonexistent/stubstrip
  envAttr STUBSTRIP_DRIVER_LINK /nonexistent/driver
  envAttr STUBSTRIP_CHECK_HOOK /nonexistent/check-hook
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$subst"
  runs "$D/bin/bin/app" 0
  grep -qF "$SCH " "$D/lib/nix-support/propagated-build-inputs" || fail "the substituted check hook is not propagated"
}

# stubstripFlags, a string or an array, reach stubstrip once and as given:
# --stub-pattern is a glob, not expanded by the hook even with nullglob on
# (that it reaches the check too: checkCase MODE pattern).
flagsCase() { # MODE
  local vendor=$WORK/opt/vendor-cuda
  if [[ ! -d $vendor/lib ]]; then
    mkdir -p "$vendor/lib" && cp -P "$STUBDIR"/libcuda.so* "$vendor/lib/"
  fi
  newDrv "flags-$1" "$1"
  list buildInputs "$vendor"
  # A glob that, expanded by the shell, would match nothing (nullglob is on).
  # --print-removed, a `fix` flag of no use to fixup, is accepted and ignored.
  list stubstripFlags --stub-pattern '*/vendor-cuda/lib' -v --print-removed
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$DRIVER"
  grep -qF -- "--stub-pattern */vendor-cuda/lib -v --print-removed -- " "$D/calls" || fail "the flags did not reach fixup as given: $(cat "$D/calls")"
  logHas "stubstrip: $D/lib/lib/libcudafake.so: RUNPATH $WORK/opt/vendor-cuda/lib -> $DRIVER"
}
test_control_flags_vendor_dir_is_not_a_stub() {
  local vendor=$WORK/opt/vendor-cuda
  mkdir -p "$vendor/lib" && cp -P "$STUBDIR"/libcuda.so* "$vendor/lib/"
  newDrv control-flags new
  list buildInputs "$vendor"
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$vendor/lib"
}

# A --driver-link in stubstripFlags replaces the hook's default.
test_flags_driver_link_override() {
  local custom=$WORK/run/custom-driver/lib
  mkdir -p "$custom" && cp "$DRIVER/libcuda.so.1" "$custom/"
  newDrv flags-driver-link new
  list stubstripFlags "--driver-link=$custom"
  buildOk
  runpathIs "$D/lib/lib/libcudafake.so" "$custom"
  countIs "--driver-link flags given to fixup" "$(grep '^fixup ' "$D/calls" | grep -o -- '--driver-link' | wc -l)" 1
  runs "$D/bin/bin/app" 0
}

# --json would mix a report into the hook's instructions: refused, before
# anything is written.
test_flags_json_refused() {
  newDrv flags-json old
  str stubstripFlags --json
  buildFails
  logHas "--json cannot be used by the hook"
  runpathIs "$D/lib/lib/libcudafake.so" "$STUBDIR"
}

# Nothing to do: stubstrip's summary is the only line.
quietCase() { # MODE
  newDrv "quiet-$1" "$1"
  str installPhase 'runHook preInstall; mkdir -p "$out/lib" "$lib" "$bin"; cp "$fixtures/libplain.so" "$out/lib/"; runHook postInstall'
  buildOk
  local lines
  lines=$(cat "$D/log" "$D/nixlog" | grep -v '^Running phase: ')
  countIs "lines logged (${lines//$'\n'/ | })" "$(grep -c . <<<"$lines")" 1
  [[ $lines == stubstrip:* ]] || fail "the only line is not stubstrip's summary: $lines"
}

######################################################################
# The consumers of a fixed package. B is the fixed package (the
# derivation above, its lib output holding libcudafake.so, which needs
# libcuda.so.1); a consumer C has no CUDA input of its own, only B (directly or
# through a package P that propagates it). C links a program d against B's
# library in its build (as a D would), "imports" B's library in checkPhase and
# in a preDistPhases import check, and runs d in installCheck.

# buildB NAME MODE DRIVERLINK [ATTR VALUE]...: builds B; BLIB is its lib output.
buildB() {
  newDrv "$1" "$2"
  envAttr STUBSTRIP_DRIVER_LINK "$3"
  shift 3
  while (($#)); do str "$1" "$2" && shift 2; done
  buildOk
  BLIB=$D/lib
}

# consumerDrv NAME MODE LINK(link|nolink) INPUTLIST INPUT...: starts C.
consumerDrv() {
  startDrv "$1" "$2"
  local link=$3 inputList=$4
  shift 4
  setOutputs out
  list "$inputList" "$@"
  if [[ $inputList == buildInputs ]]; then list nativeBuildInputs "$ICH"; else list nativeBuildInputs "$@" "$ICH"; fi
  str sources "$SRC"
  str blib "$BLIB"
  list importsCheck "$BLIB/lib/libcudafake.so"
  flag doCheck
  str checkPhase 'runHook preCheck
"$fixtures/import-check" "$blib/lib/libcudafake.so"
runHook postCheck'
  str postInstall 'echo "LD_LIBRARY_PATH during install: [${LD_LIBRARY_PATH-}]"'
  if [[ $link == link ]]; then
    # NIX_LDFLAGS reaches ld as cc-wrapper passes it; -rpath for the -L store
    # directory, as ld-wrapper adds it.
    str buildPhase 'runHook preBuild
ldflags=()
for f in ${NIX_LDFLAGS-}; do ldflags+=("-Wl,$f"); done
echo "NIX_LDFLAGS: [${NIX_LDFLAGS-}]"
gcc -o d "$sources/app.c" -L"$blib/lib" -lcudafake -Wl,--enable-new-dtags,-rpath,"$blib/lib" ${ldflags[@]+"${ldflags[@]}"}
runHook postBuild'
    str installPhase 'runHook preInstall
mkdir -p "$out/bin" && cp d "$out/bin/"
runHook postInstall'
    flag doInstallCheck
    str installCheckPhase 'runHook preInstallCheck
rc=0
"$out/bin/d" || rc=$?
echo "installCheck: d exited $rc"
runHook postInstallCheck'
  fi
}

# The log line of the check hook, through nixLog where the stdenv has it.
checkHookLogHas() {
  if [[ $MODE == old ]]; then logHas "stubstripCheckHook: $1"; else nixlogHas "stubstripCheckHook: $1"; fi
}

# B leaves its stub library for the consumers and propagates the check hook;
# C, which never saw a CUDA stub, links against B and its checks load B's
# library in a sandbox without a driver, LD_LIBRARY_PATH untouched outside
# the checks, nothing in any RUNPATH, nothing at run time.
consumerCase() { # MODE INPUTLIST(buildInputs|nativeBuildInputs)
  buildB "consumer-b-$1-$2" "$1" "$NODRIVER"
  local b=$D checkLibs=$BLIB/nix-support/stubstrip-check-libs
  # The stub lives in a separate stubs output that B does not reference: a copy.
  [[ -f $checkLibs/libcuda.so.1 && ! -L $checkLibs/libcuda.so.1 ]] || fail "no copied libcuda.so.1 in $checkLibs: $(ls -l "$checkLibs" 2>&1)"
  cmp -s "$checkLibs/libcuda.so.1" "$STUBDIR/libcuda.so" || fail "the check library is not the stub B was linked against"
  [[ $(cat "$BLIB/nix-support/stubstrip-driver-dirs") == "$NODRIVER" ]] || fail "driver dirs: $(cat "$BLIB/nix-support/stubstrip-driver-dirs")"
  grep -qF "$SCH " "$BLIB/nix-support/propagated-build-inputs" || fail "B's lib output does not propagate the check hook"
  [[ -d $b/out/nix-support/stubstrip-check-libs ]] || fail "B's out output (libexec/libcudafake.so) has no check libraries"
  [[ ! -e $b/bin/nix-support ]] || fail "B's bin output (app needs no stub) got nix-support: $(ls -R "$b/bin/nix-support")"
  consumerDrv "consumer-c-$1-$2" "$1" link "$2" "$BLIB"
  buildOk
  countIs "imports of B's library answered by the stub" "$(grep -cF "import-check: loaded $BLIB/lib/libcudafake.so, cuInit=34" "$D/log")" 2
  logHas "installCheck: d exited 34"
  logHas "NIX_LDFLAGS: [-rpath-link=$checkLibs]"
  logHas "LD_LIBRARY_PATH during install: []"
  checkHookLogHas "for the link (-rpath-link) and the checks (LD_LIBRARY_PATH): $checkLibs"
  runpathIs "$D/out/bin/d" "$BLIB/lib"
  noStubsIn "$D/out"
  local out status=0
  out=$(env -i "$D/out/bin/d" 2>&1) || status=$?
  [[ $status != 0 && $out == *"libcuda.so.1: cannot open shared object file"* ]] || fail "d ran outside the build without a driver: $status $out"
}

# C only through P, a package that propagates B (as a pure-Python package
# propagates its dependencies), like outlines through llama-cpp-python.
test_consumer_through_propagation() {
  buildB consumer-b-propagated new "$NODRIVER"
  local p=$PKGS/pure-python-p
  mkdir -p "$p/nix-support" && printf '%s ' "$BLIB" >"$p/nix-support/propagated-build-inputs"
  consumerDrv consumer-c-propagated structured nolink buildInputs "$p"
  buildOk
  countIs "imports answered by the stub" "$(grep -cF "import-check: loaded $BLIB/lib/libcudafake.so, cuInit=34" "$D/log")" 2
}

# The negatives: nixpkgs#471697 as the harness reproduces it. Without check
# libraries (B opted out) the import fails, and so does D's link; with the
# consumer's own opt-out too.
test_consumer_control_b_opted_out() {
  buildB consumer-b-opted-out new "$NODRIVER" dontStubstripPropagateCheckFallback 1
  [[ ! -e $BLIB/nix-support ]] || fail "B opted out but wrote $(ls "$BLIB/nix-support")"
  consumerDrv consumer-c-b-opted-out new nolink buildInputs "$BLIB"
  buildFails
  logHas "libcuda.so.1: cannot open shared object file"
  consumerDrv consumer-d-b-opted-out new link buildInputs "$BLIB"
  buildFails
  logHas "undefined reference to \`cuInit'"
}
consumerOptOutCase() { # MODE
  buildB "consumer-b-for-opt-out-$1" "$1" "$NODRIVER"
  consumerDrv "consumer-c-opted-out-$1" "$1" nolink buildInputs "$BLIB"
  flag dontStubstripCheckFallback
  buildFails
  logHas "libcuda.so.1: cannot open shared object file"
  logLacks "stubstripCheckHook: for the link"
}

# A driver at B's driver link wins: the check libraries stay unused, the
# link and the checks find the driver through B's RUNPATH.
consumerDriverCase() { # MODE
  buildB "consumer-b-driver-$1" "$1" "$DRIVER"
  consumerDrv "consumer-c-driver-$1" "$1" link buildInputs "$BLIB"
  buildOk
  countIs "imports answered by the driver" "$(grep -cF "import-check: loaded $BLIB/lib/libcudafake.so, cuInit=0" "$D/log")" 2
  logHas "installCheck: d exited 0"
  logHas "NIX_LDFLAGS: []"
  checkHookLogHas "$DRIVER/libcuda.so.1 is here: $BLIB/nix-support/stubstrip-check-libs not used"
}

# A stub in an output that B references anyway (B's library also links the
# package's libcudart, next to the stub directory, as with cuda_cudart in
# nixpkgs since CUDA 12.9): a symlink, not a copy.
test_consumer_referenced_stub_is_linked() {
  local pkg=$STORE/2b6d0jv0x3mw9qkxq8lyr4s1n5a7cz1f-cuda_cudart-12.9.79
  mkdir -p "$pkg/lib/stubs"
  cp "$STUBDIR/libcuda.so" "$pkg/lib/stubs/" && ln -sf libcuda.so "$pkg/lib/stubs/libcuda.so.1"
  gcc -shared -fPIC -Wl,-soname,libcudart.so.12 -o "$pkg/lib/libcudart.so.12" "$SRC/plain.c"
  newDrv consumer-b-referenced new
  envAttr STUBSTRIP_DRIVER_LINK "$NODRIVER"
  list buildInputs "$pkg"
  flag dontAutoPatchelf
  # Not "pkg": stdenv's setup.sh loops over the inputs with that variable.
  str cudartPkg "$pkg"
  str installPhase 'runHook preInstall
mkdir -p "$out/lib" "$lib" "$bin"
cp "$fixtures/libcudafake.so" "$out/lib/libcudafake.so"
patchelf --add-needed libcudart.so.12 --set-rpath "$cudartPkg/lib/stubs:$cudartPkg/lib" "$out/lib/libcudafake.so"
runHook postInstall'
  buildOk
  runpathIs "$D/out/lib/libcudafake.so" "$NODRIVER:$pkg/lib"
  [[ $(readlink "$D/out/nix-support/stubstrip-check-libs/libcuda.so.1") == "$pkg/lib/stubs/libcuda.so" ]] ||
    fail "not a symlink to the stub: $(ls -l "$D/out/nix-support/stubstrip-check-libs")"
}

test_shellcheck_hook() { shellcheck "$HOOK" "$ROOT/hooks/stubstrip-check-hook.sh" >&2; }
test_shellcheck_harness() {
  (cd "$ROOT" && shellcheck -x tests/hook/run.sh tests/hook/lib/*.sh tests/hook/hooks/*.sh) >&2
}

######################################################################
# Runner.

tests=(test_shellcheck_hook test_shellcheck_harness test_control_without_hook
  test_control_source_time_registration_loses)
for mode in old new structured; do
  for order in after before; do
    for ic in off on; do
      tests+=("fixupCase $mode $order $ic")
    done
  done
done
for mode in old new structured; do
  tests+=("dontStubstripCase $mode" "onceCase $mode" "fixFailsCase $mode" "checkCase $mode" "checkCase $mode pattern"
    "fixtureCase $mode" "fixtureCase $mode stub" "noteCase $mode"
    "fallbackCase $mode"
    "fallbackOffCase $mode" "fallbackDriverCase $mode" "idempotentCase $mode" "handCase $mode" "phasesCase $mode"
    "flagsCase $mode" "quietCase $mode"
    "consumerCase $mode buildInputs" "consumerOptOutCase $mode" "consumerDriverCase $mode")
done
tests+=("consumerCase new nativeBuildInputs" test_consumer_through_propagation test_consumer_control_b_opted_out
  test_consumer_referenced_stub_is_linked)
# stubstripAudit: off by default; at "warning" an ambiguous RUNPATH (the
# NEEDED libcudafake.so in two of its directories) fails the build; at the
# default level "error" it does not.
AMBIGUOUS_INSTALL='runHook preInstall
mkdir -p "$out/libexec" "$lib/lib" "$bin/bin"
cp "$fixtures/libcudafake.so" "$out/libexec/"
cp "$fixtures/libcudafake.so" "$lib/lib/"
cp "$fixtures/app" "$bin/bin/"
patchelf --set-rpath "$out/libexec:$lib/lib:$stubdir" "$bin/bin/app"
runHook postInstall'
auditCase() { # NAME STUBSTRIPAUDIT EXPECT(ok|fail)
  newDrv "audit-$1" new
  str installPhase "$AMBIGUOUS_INSTALL"
  str stubdir "$STUBDIR"
  flag dontAutoPatchelf
  if [[ -n $2 ]]; then str stubstripAudit "$2"; fi
  if [[ $3 == ok ]]; then buildOk; else buildFails; fi
}
test_audit_off_by_default() {
  auditCase off "" ok
  countIs "stubstrip runs given --audit" "$(calls '--audit')" 0
  logLacks "audit:"
  runpathIs "$D/bin/bin/app" "$D/out/libexec:$D/lib/lib:$DRIVER"
}
test_audit_warning_fails_on_ambiguous_runpath() {
  auditCase warning warning fail
  logHas "SS002"
  logHas "the audit found problems at or above 'warning' (--audit, stubstripAudit)"
  logHas "(failing: findings at or above --audit warning)"
}
test_audit_error_level_tolerates_ambiguity() {
  auditCase error 1 ok
  countIs "stubstrip fixup runs given --audit error for stubstripAudit=1" "$(calls '^fixup .*--audit error ')" 1
  logHas "audit: no finding at or above 'error'"
}
tests+=(test_audit_off_by_default test_audit_warning_fails_on_ambiguous_runpath test_audit_error_level_tolerates_ambiguity)

tests+=(test_fallback_compat_present test_fallback_keeps_an_odd_ld_library_path
  test_control_phases_override_needs_preFixup_registration
  test_substituted_hook test_control_flags_vendor_dir_is_not_a_stub test_flags_driver_link_override
  test_flags_json_refused)

echo "run.sh: stubstrip binary: $BIN" >&2
passed=0 failed=0 skipped=0
failedNames=()
for t in "${tests[@]}"; do
  [[ -z $FILTER || $t == *"$FILTER"* ]] || continue
  errors=$WORK/errors
  # shellcheck disable=SC2086 # "function args" entries
  (
    set -e
    $t
  ) 2>"$errors"
  status=$?
  if ((status == 0)); then
    passed=$((passed + 1))
    echo "ok   $t"
  elif ((status == 77)); then
    skipped=$((skipped + 1))
    echo "skip $t: $(tail -n 1 "$errors")"
  else
    failed=$((failed + 1))
    failedNames+=("$t")
    echo "FAIL $t"
    sed 's/^/  /' "$errors"
  fi
done
echo
summary="$passed passed, $failed failed"
((skipped)) && summary+=", $skipped skipped"
echo "$summary"
if ((failed)); then
  printf 'failed: %s\n' "${failedNames[@]}"
  exit 1
fi
# In CI (tests/run-all.sh) every tool is installed: a test that could not run is a failure.
if ((skipped)) && [[ ${STUBSTRIP_REQUIRE_TOOLS:-} == 1 ]]; then
  echo "STUBSTRIP_REQUIRE_TOOLS=1: $skipped tests could not run" >&2
  exit 1
fi
