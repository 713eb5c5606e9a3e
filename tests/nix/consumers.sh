# shellcheck shell=bash
# Sourced by tests/nix/run.sh (which defines pass, fail, work, system, nixOpts): the consumers of a
# fixed package at mock level, ./consumers.nix built for real in the local store, in Nix's sandbox
# (only the closure of a derivation's inputs is visible, no /run/opengl-driver), the host's /bin,
# /usr and /lib mounted for the mock's builders. See ./README.md, "The consumers of a fixed
# package".
# shellcheck disable=SC2154 # work and system come from run.sh

# shellcheck source=tests/nix/consumer-checks.sh
. "$here/consumer-checks.sh"

consumerTests() {
  local file=$work/src/tests/nix/consumers.nix
  local -a sandboxPaths=() opts=(--option substituters '' --option sandbox true)
  local p
  for p in /bin /usr /lib /lib64; do [[ -e $p ]] && sandboxPaths+=("$p"); done
  opts+=(--option sandbox-paths "${sandboxPaths[*]}")
  getent group nixbld >/dev/null || opts+=(--option build-users-group '')

  cbuild() { nix-build "${opts[@]}" --no-out-link "$file" --arg prebuilt "$work/prebuilt" --argstr system "$system" "$@"; }
  cdrv() { nix-instantiate "$file" --arg prebuilt "$work/prebuilt" --argstr system "$system" -A "$1" 2>/dev/null; }
  # The build log of an attribute (built now or earlier).
  clog() { nix-store --read-log "$(cdrv "$1")" 2>/dev/null; }
  # has ATTR TEXT [COUNT]: the build log of ATTR holds TEXT (COUNT times).
  has() {
    local n
    n=$(clog "$1" | grep -cF -- "$2")
    if [[ -n ${3-} ]]; then [[ $n == "$3" ]]; else ((n > 0)); fi
  }
  runpathOf() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }

  # Nix's sandbox must work here, or nothing below means what it says.
  if ! cbuild -A checkHook >/dev/null 2>"$work/sandbox.err"; then
    if [[ ${STUBSTRIP_REQUIRE_TOOLS:-} == 1 ]]; then
      fail "consumers: a sandboxed build works" "$(tail -3 "$work/sandbox.err")"
    else
      echo "SKIP consumers: Nix's sandbox does not work here: $(tail -1 "$work/sandbox.err")"
    fi
    return 0
  fi
  local checkHook
  checkHook=$(cbuild -A checkHook 2>/dev/null)

  # B, each way: check libraries (a link where B references A anyway, else a copy), the driver
  # link in RUNPATH, and the closure figure against B built with the opt-out.
  local kind b bOpt stubs lib rp
  for kind in single split; do
    if ! b=$(cbuild -A "bs.$kind" 2>"$work/err") || ! bOpt=$(cbuild -A "bs.$kind-opted-out" 2>>"$work/err"); then
      fail "consumers: build B ($kind) and B with dontStubstripPropagateCheckFallback" "$(grep -m3 'error\|FAIL' "$work/err")"
      continue
    fi
    lib=$b/nix-support/stubstrip-check-libs/libcuda.so.1
    if [[ $kind == single ]]; then
      stubs=$(cbuild -A cuda.single 2>/dev/null)
      if [[ $(readlink "$lib") == "$stubs/lib/stubs/libcuda.so" ]]; then
        pass "consumers: B ($kind) links its check library to the stub of A, which it references anyway"
      else
        fail "consumers: B ($kind) links its check library to the stub of A" "$(ls -l "$lib" 2>&1)"
      fi
    else
      stubs=$(cbuild -A cuda.split.stubs 2>/dev/null)
      if [[ -f $lib && ! -L $lib ]] && cmp -s "$lib" "$stubs/lib/stubs/libcuda.so"; then
        pass "consumers: B ($kind) copies the stub of A's stubs output, which it does not reference"
      else
        fail "consumers: B ($kind) copies the stub" "$(ls -l "$lib" 2>&1)"
      fi
    fi
    rp=$(runpathOf "$b/lib/libcudafake.so")
    if [[ :$rp: == *:/run/opengl-driver/lib:* && :$rp: != *-stubs/* && :$rp: != */stubs:* && $rp != *stubstrip-check-libs* ]]; then
      pass "consumers: B ($kind) RUNPATH has the driver link, no stub, no check library: $rp"
    else
      fail "consumers: B ($kind) RUNPATH" "$rp"
    fi
    if [[ $(cat "$b/nix-support/stubstrip-driver-dirs") == /run/opengl-driver/lib ]] &&
      grep -qF "$checkHook " "$b/nix-support/propagated-build-inputs" &&
      [[ ! -e $bOpt/nix-support/stubstrip-check-libs ]]; then
      pass "consumers: B ($kind) records the driver link and propagates stubstripCheckHook; opted out, nothing"
    else
      fail "consumers: B ($kind) nix-support" "$(find "$b/nix-support" "$bOpt/nix-support" 2>&1 | head)"
    fi
    if closureFigure "$kind" "$b" "$bOpt" "$checkHook" "$(clog "bs.$kind")" &&
      { [[ $kind == single ]] || ! nix-store -q --requisites "$b" | grep -qxF "$stubs"; }; then
      pass "consumers: B ($kind) references stubstripCheckHook (and what a copied stub names), no stubs output"
    else
      fail "consumers: B ($kind) references stubstripCheckHook (and what a copied stub names), no stubs output"
    fi
  done

  # C and D, every strictDeps x __structuredAttrs with `single`, both on with `split`.
  local names name c d
  names=$(nix-instantiate --eval --strict --json -E "builtins.attrNames (import $file {
    prebuilt = $work/prebuilt; system = \"$system\"; }).chains" 2>/dev/null | tr -d '[]"' | tr ',' ' ')
  [[ -n $names ]] || fail "consumers: list the chains"
  for name in $names; do
    if ! c=$(cbuild -A "chains.$name.c" 2>"$work/err"); then
      fail "consumers: C ($name) builds: its checks load B's library" "$(grep -m3 'error\|cannot' "$work/err")"
      continue
    fi
    if has "chains.$name.c" "import-check: loaded" 3 && has "chains.$name.c" "cuInit=34" 3 &&
      has "chains.$name.c" "LD_LIBRARY_PATH during build: []" && has "chains.$name.c" "LD_LIBRARY_PATH during install: []" &&
      has "chains.$name.c" "stubstripCheckHook: for the link (-rpath-link) and the checks (LD_LIBRARY_PATH): "; then
      pass "consumers: C ($name) builds; checkPhase, installCheck and the import check load B's library (the stub answers), nothing outside the checks"
    else
      fail "consumers: C ($name) log" "$(clog "chains.$name.c" | grep -E 'import-check|LD_LIBRARY|stubstripCheck' | head -8)"
    fi
    if ! d=$(cbuild -A "chains.$name.d" 2>"$work/err"); then
      fail "consumers: D ($name) links B's library and runs in installCheck" "$(grep -m3 'error\|undefined\|cannot' "$work/err")"
      continue
    fi
    rp=$(runpathOf "$d/bin/d")
    if has "chains.$name.d" "installCheck: d exited 34" && has "chains.$name.d" "NIX_LDFLAGS: [-rpath-link=" &&
      [[ $rp == "$(nix-store -q --references "$c" | grep -- '-consumers-b-' | head -1)/lib" ]]; then
      pass "consumers: D ($name) links through C's propagation, runs in installCheck; RUNPATH $rp"
    else
      fail "consumers: D ($name)" "RUNPATH=$rp; $(clog "chains.$name.d" | grep -E 'installCheck|NIX_LDFLAGS')"
    fi
  done
  # Never at run time.
  if [[ -n ${d-} ]]; then notAtRunTime "$d/bin/d"; fi

  # A fake driver mounted at the driver link wins.
  local fake
  if fake=$(cbuild -A fakeDriver 2>"$work/err") &&
    cbuild --option extra-sandbox-paths "/run/opengl-driver/lib=$fake/lib" -A driver.c >/dev/null 2>"$work/err" &&
    cbuild --option extra-sandbox-paths "/run/opengl-driver/lib=$fake/lib" -A driver.d >/dev/null 2>>"$work/err"; then
    if has driver.c "cuInit=0" 3 && has driver.c "/run/opengl-driver/lib/libcuda.so.1 is here: " &&
      has driver.d "installCheck: d exited 0" && has driver.d "NIX_LDFLAGS: []"; then
      pass "consumers: with a (fake) driver at the driver link, C's checks and D load the driver, not the stub"
    else
      fail "consumers: driver at the driver link" "$(clog driver.c | grep -E 'cuInit|stubstripCheck' | head -5)"
    fi
  else
    fail "consumers: C and D build with a fake driver at the driver link" "$(grep -m3 'error\|cannot' "$work/err")"
  fi

  # The negatives (nixpkgs#471697): they must fail, and for that reason.
  local attr want
  for attr in negative.c-b-opted-out negative.d-b-opted-out negative.c-opted-out; do
    case $attr in
      negative.d-b-opted-out) want="undefined reference to \`cuInit'" ;;
      *) want="libcuda.so.1: cannot open shared object file" ;;
    esac
    if cbuild -A "$attr" >/dev/null 2>"$work/err"; then
      fail "consumers: $attr fails" "it built"
    elif grep -qF -- "$want" "$work/err"; then
      pass "consumers: $attr fails with: $want"
    else
      fail "consumers: $attr fails with: $want" "$(tail -5 "$work/err")"
    fi
  done
}
