# shellcheck shell=bash
# Sourced by tests/nixpkgs/run.sh (which defines pass, fail, work and exports NIXPKGS): the
# consumers of a fixed package with nixpkgs' own machinery (./consumers.nix), every build in Nix's
# sandbox: only the closure of a derivation's inputs is visible, and no /run/opengl-driver unless a
# fake driver is mounted there. The host's /bin, /usr, /lib, /lib64 and /etc/alternatives are
# mounted for the native stdenv's tools. Nix 2.8 points NIX_ATTRS_SH_FILE at the build directory's
# path outside the sandbox, so builds run with TMPDIR under $work, mounted at the same path inside.
# shellcheck disable=SC2154 # work comes from run.sh

# shellcheck source=tests/nix/consumer-checks.sh
. "$here/../nix/consumer-checks.sh"

consumerTests() {
  local file=$here/consumers.nix tmp=$work/nix-tmp p
  local -a paths=() opts
  mkdir -p "$tmp"
  for p in /bin /usr /lib /lib64 /etc/alternatives; do [[ -e $p ]] && paths+=("$p"); done
  paths+=("$tmp")
  opts=(--option sandbox true --option sandbox-paths "${paths[*]}" --option substituters ''
    --option build-users-group '')

  cbuild() { TMPDIR=$tmp nix-build "${opts[@]}" --no-out-link "$file" --arg prebuilt "$work/prebuilt" "$@"; }
  clog() { nix-store --read-log "$(nix-instantiate "$file" --arg prebuilt "$work/prebuilt" -A "$1" 2>/dev/null)" 2>/dev/null; }
  has() { # ATTR TEXT: the build log of ATTR holds TEXT
    clog "$1" | grep -qF -- "$2"
  }
  runpathOf() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
  noStubOrCheckLibs() { [[ :$1: != *-stubs/* && :$1: != */stubs:* && $1 != *stubstrip-check-libs* ]]; }

  if ! cbuild -A checkHook >/dev/null 2>"$work/sandbox.err"; then
    fail "consumers: a sandboxed build works" "$(grep -m3 error "$work/sandbox.err")"
    return 0
  fi
  local checkHook cudart
  checkHook=$(cbuild -A checkHook 2>/dev/null)
  cudart=$(cbuild -A cuda_cudart 2>/dev/null)

  # B, each way, with its own checks; the check libraries; the closure figure.
  local kind b bOpt lib rp
  for kind in driver-api cudart; do
    if ! b=$(cbuild -A "bs.$kind" 2>"$work/err") || ! bOpt=$(cbuild -A "bs.$kind-opted-out" 2>>"$work/err"); then
      fail "consumers: B ($kind) and B with dontStubstripPropagateCheckFallback build" "$(grep -m3 'rror' "$work/err")"
      continue
    fi
    if has "bs.$kind" "probe.init(): 34" && has "bs.$kind" "Check whether the following modules can be imported: probe"; then
      pass "consumers: B ($kind, buildPythonPackage) builds; its check phase and pythonImportsCheck load its extension (the stub answers)"
    else
      fail "consumers: B ($kind) checks" "$(clog "bs.$kind" | grep -E 'probe|stubstrip' | head -5)"
    fi
    lib=$b/nix-support/stubstrip-check-libs/libcuda.so.1
    if [[ $kind == cudart && $(readlink "$lib") == "$cudart/lib/stubs/libcuda.so" ]]; then
      pass "consumers: B ($kind) check library: a link to cuda_cudart's stub (B references cuda_cudart anyway)"
    elif [[ $kind == driver-api && -f $lib && ! -L $lib ]] && cmp -s "$lib" "$cudart/lib/stubs/libcuda.so"; then
      pass "consumers: B ($kind) check library: a copy of cuda_cudart's stub (B does not reference cuda_cudart)"
    else
      fail "consumers: B ($kind) check library" "$(ls -l "$lib" 2>&1)"
    fi
    rp=$(runpathOf "$b/lib/libprobe.so")
    if [[ :$rp: == *:/run/opengl-driver/lib:* ]] && noStubOrCheckLibs "$rp"; then
      pass "consumers: B ($kind) libprobe.so RUNPATH: $rp"
    else
      fail "consumers: B ($kind) libprobe.so RUNPATH" "$rp"
    fi
    if closureFigure "$kind" "$b" "$bOpt" "$checkHook" "$(clog "bs.$kind")" &&
      { [[ $kind == cudart ]] || ! nix-store -q --requisites "$b" | grep -qxF "$cudart"; }; then
      pass "consumers: B ($kind) references stubstripCheckHook (and what a copied stub names), no CUDA stubs output$([[ $kind == cudart ]] || echo ", not cuda_cudart")"
    else
      fail "consumers: B ($kind) references stubstripCheckHook (and what a copied stub names), no CUDA stubs output"
    fi
  done

  # C and D: every strictDeps x __structuredAttrs over the driver-API B, both on over the other.
  local name d
  for name in driver-api-strict-sa driver-api-strict-nosa driver-api-lax-sa driver-api-lax-nosa cudart-strict-sa; do
    if ! cbuild -A "chains.$name.c" >/dev/null 2>"$work/err"; then
      fail "consumers: C ($name) builds" "$(grep -m3 -E 'rror|cannot' "$work/err")"
      continue
    fi
    if has "chains.$name.c" "usesprobe.init(): 34" && has "chains.$name.c" "Check whether the following modules can be imported: usesprobe" &&
      has "chains.$name.c" "stubstripCheckHook: for the link (-rpath-link) and the checks (LD_LIBRARY_PATH): " &&
      has "chains.$name.c" "LD_LIBRARY_PATH during install: []"; then
      pass "consumers: C ($name, pure Python, B propagated) builds: its check phase and pythonImportsCheck import B (the stub answers)"
    else
      fail "consumers: C ($name) log" "$(clog "chains.$name.c" | grep -E 'usesprobe|stubstripCheck|LD_LIBRARY' | head -5)"
    fi
    if ! d=$(cbuild -A "chains.$name.d" 2>"$work/err"); then
      fail "consumers: D ($name) builds" "$(grep -m3 -E 'rror|undefined|cannot' "$work/err")"
      continue
    fi
    rp=$(runpathOf "$d/bin/d")
    if has "chains.$name.d" "d: cuInit returned 34" && has "chains.$name.d" "-rpath-link=" && noStubOrCheckLibs "$rp"; then
      pass "consumers: D ($name) links B's library (cc-wrapper, -rpath-link) and runs it in installCheck; RUNPATH $rp"
    else
      fail "consumers: D ($name)" "RUNPATH=$rp; $(clog "chains.$name.d" | grep -E '^d:|NIX_LDFLAGS')"
    fi
  done
  if [[ -n ${d-} ]]; then notAtRunTime "$d/bin/d"; fi

  # A fake driver mounted at the driver link wins.
  local fake
  if fake=$(cbuild -A fakeDriver 2>"$work/err") &&
    cbuild --option extra-sandbox-paths "/run/opengl-driver/lib=$fake/lib" -A driver.c -A driver.d >/dev/null 2>"$work/err"; then
    if has driver.c "usesprobe.init(): 0" && has driver.c "/run/opengl-driver/lib/libcuda.so.1 is here: " &&
      has driver.d "d: cuInit returned 0" && ! has driver.d "-rpath-link="; then
      pass "consumers: with a fake driver at /run/opengl-driver/lib, C's imports and D load it, not the stub"
    else
      fail "consumers: a driver at the driver link" "$(clog driver.c | grep -E 'usesprobe|stubstripCheck' | head -4)"
    fi
  else
    fail "consumers: C and D build with a fake driver at the driver link" "$(grep -m3 -E 'rror|cannot' "$work/err")"
  fi

  # nixpkgs#471697: C's pythonImportsCheck fails without the mechanism: B opted out, and nixpkgs'
  # own hook alone (without nix/upstream; B's own checks disabled, as nixpkgs #465751 did).
  local args want="ImportError: libcuda.so.1: cannot open shared object file"
  for args in "-A negative" "--arg upstream false -A negativeNixpkgsHook"; do
    # shellcheck disable=SC2086 # two words
    if cbuild $args >/dev/null 2>"$work/err"; then
      fail "consumers: $args fails" "it built"
    elif grep -qF "Check whether the following modules can be imported: usesprobe" "$work/err" &&
      grep -qF -- "$want" "$work/err"; then
      pass "consumers: $args: C's pythonImportsCheck fails with $want"
    else
      fail "consumers: $args fails in pythonImportsCheck" "$(grep -E 'rror' "$work/err" | tail -3)"
    fi
  done
}
