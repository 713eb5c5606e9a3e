#!/usr/bin/env bash
# The suite against a real nixpkgs tree (./README.md): runs only when NIXPKGS names one.
#
#   NIXPKGS=/path/to/nixpkgs tests/nixpkgs/run.sh [eval] [build] [rust] [release] [elfpatch-stdenv]
#                                                               (eval and build by default)
#
#   eval   with Nix 2.26 (./setup.sh): `nix flake check --no-build` on x86_64-linux and
#          aarch64-linux with the tree as the flake's nixpkgs input, and the drv comparison of
#          every CUDA package set with and without nix/upstream (./drv_compare.py)
#   build  with Nix 2.8 and nixpkgs' native stdenv (./builds.nix): buildRedist's cuda_cudart and
#          cuda_nvml_dev from fake sources, the consumer matrix, each output checked here; and
#          the same C consumer without nix/upstream, which must fail its installCheck
#   real-cuda  (only when named; REAL_CUDA_ARCHIVES) buildRedist's cuda_cudart from NVIDIA's real
#          files and two consumers in three stub-hook variants, in the sandbox (./real-cuda.sh)
#   rust   (only when named) the real buildRustPackage building nix/upstream's
#          pkgs/by-name/st/stubstrip from this checkout, its check phase running the whole Rust
#          test suite (./rust.nix)
#   release  (only when named) the same package built from the release's source tarball
#          (target/dist; release/build.sh is run when it is missing) with the hashes it names,
#          checked against Nix and nixpkgs' own fetcher; static binaries (./release.sh)
#   elfpatch-stdenv  (only when named) the CUDA packages and the consumer matrix built with
#          elfpatch as stdenv's patchelf, checked as `build` checks them and compared with the
#          same builds with patchelf 0.19.3 there (./elfpatch_stdenv.py)
# Binaries: $STUBSTRIP_PREBUILT_DIR, else target/release (built with cargo when missing).
# Prints PASS/FAIL lines and "N passed, M failed"; exits 1 on any failure.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ -z ${NIXPKGS-} ]]; then
    echo "tests/nixpkgs: skipped: NIXPKGS is not set (it names a nixpkgs tree to test against; see tests/nixpkgs/README.md)"
    exit 0
fi
if [[ ! -f $NIXPKGS/pkgs/top-level/all-packages.nix ]]; then
    echo "tests/nixpkgs: NIXPKGS=$NIXPKGS is not a nixpkgs tree" >&2
    exit 2
fi
NIXPKGS=$(cd "$NIXPKGS" && pwd)
export NIXPKGS

parts=("$@")
((${#parts[@]})) || parts=(eval build)
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }

passed=0
failed=0
pass() {
    passed=$((passed + 1))
    echo "PASS $1"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL $1${2:+: $2}"
}
finish() {
    echo "$passed passed, $failed failed"
    ((failed == 0))
    exit
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

eval "$("$here/setup.sh")" || {
    fail "setup" "tests/nixpkgs/setup.sh failed"
    finish
}
export NIX_226
STUBSTRIP_HOST_GCC_VERSION=$(gcc -dumpversion)
export STUBSTRIP_HOST_GCC_VERSION

# The tree's commit: $NIXPKGS_COMMIT when the tree is not a git checkout (README.md).
commit=${NIXPKGS_COMMIT:-$(git -C "$NIXPKGS" rev-parse HEAD 2>/dev/null || echo unknown)}
echo "nixpkgs: $NIXPKGS (commit $commit, $(cat "$NIXPKGS/lib/.version" 2>/dev/null))"
echo "evaluation: $("$NIX_226" --version); builds: $(nix-build --version)"

nixOpts=(--option sandbox false --option substituters '' --option build-users-group '')

# --- eval --------------------------------------------------------------------------------------
if want eval; then
    # The flake as a user gets it: the files git tracks (a flake in a git checkout sees only
    # those) and the tree as its nixpkgs input.
    mkdir -p "$work/src"
    (cd "$repo" && git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$work/src" --)
    # The input: the tree (hard links), behind ./flake-input (stand-ins for the two Haskell tools
    # the devShell names, only when the tree lacks Haskell packages).
    mkdir -p "$work/input"
    cp "$here/flake-input/flake.nix" "$here/flake-input/default.nix" "$work/input/"
    cp -al "$NIXPKGS" "$work/input/tree" 2>/dev/null || cp -a "$NIXPKGS" "$work/input/tree"
    for sys in x86_64-linux aarch64-linux; do
        if "$NIX_226" flake check --no-build --system "$sys" --no-write-lock-file \
            --override-input nixpkgs "path:$work/input" "path:$work/src" >"$work/check-$sys.log" 2>&1; then
            pass "nix flake check --no-build --system $sys (nixpkgs $commit)"
        else
            fail "nix flake check --no-build --system $sys" "$(grep -m3 'error' "$work/check-$sys.log")"
        fi
    done

    python3 "$here/drv_compare.py" --nix "$NIX_226" --json "$work/drv-compare.json" >"$work/drv-compare.log" 2>&1
    grep -E '^(PASS|FAIL) ' "$work/drv-compare.log" | while IFS= read -r line; do echo "$line"; done
    grep -E '^  ' "$work/drv-compare.log"
    read -r p f < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$work/drv-compare.log")
    if [[ -n ${p-} ]]; then
        passed=$((passed + p))
        failed=$((failed + f))
    else
        fail "drv comparison" "$(tail -5 "$work/drv-compare.log")"
    fi
fi

# --- rust --------------------------------------------------------------------------------------
if want rust; then
    # The crates of Cargo.lock, vendored on the host by cargo (crates.io is reachable through
    # cargo; a Nix fetcher is not), once per lock file.
    vendor=${STUBSTRIP_TOOLS:-/work/tools}/stubstrip-vendor/$(sha256sum "$repo/Cargo.lock" | cut -c1-16)
    if [[ ! -f $vendor/Cargo.lock ]]; then
        rm -rf "$vendor"
        (cd "$repo" && cargo vendor --locked --versioned-dirs "$vendor") >"$work/vendor.log" 2>&1 &&
            cp "$repo/Cargo.lock" "$vendor/"
    fi
    start=$SECONDS
    if [[ -f $vendor/Cargo.lock ]] && out=$(nix-build "${nixOpts[@]}" --no-out-link "$here/rust.nix" --arg vendor "$vendor" \
        --argstr toolchain "$(rustc --print sysroot)" 2>"$work/rust.err"); then
        drv=$(nix-store -qd "$out")
        # cargo colours its summary lines in a build's log (no terminal tells it not to).
        log=$(nix-store -l "$drv" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/\x1b(B//g')
        tests=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' <<<"$log" | awk '{ s += $1 } END { print s + 0 }')
        failedTests=$(grep -c '^test result: FAILED' <<<"$log")
        if [[ -x $out/bin/stubstrip && -x $out/bin/elfpatch && ${tests:-0} -gt 0 && $failedTests == 0 ]] &&
            grep -q 'cargoCheckHook flags: .*--workspace' <<<"$log"; then
            pass "buildRustPackage builds pkgs/by-name/st/stubstrip and its checkPhase runs cargo test --workspace: $tests tests passed ($((SECONDS - start)) s)"
        else
            fail "buildRustPackage's check phase" "tests=$tests failed=$failedTests $(ls "$out/bin")"
        fi
    else
        fail "buildRustPackage builds pkgs/by-name/st/stubstrip with its tests" "$(sed 's/\x1b\[[0-9;]*m//g' "$work/rust.err" |
            grep -E -m6 "panicked at|^test result: FAILED|^error" || tail -5 "$work/vendor.log" 2>/dev/null)"
    fi
fi

# --- release (opt-in) ---------------------------------------------------------------------------
if want release; then
    # shellcheck source=tests/nixpkgs/release.sh
    . "$here/release.sh"
    releaseTests
fi

# --- real-cuda (opt-in) -------------------------------------------------------------------------
if want real-cuda; then
    # shellcheck source=tests/nixpkgs/real-cuda.sh
    . "$here/real-cuda.sh"
    realCudaTests
fi

# --- elfpatch-stdenv ----------------------------------------------------------------------------
if want elfpatch-stdenv; then
    # shellcheck source=tests/nixpkgs/elfpatch-stdenv.sh
    . "$here/elfpatch-stdenv.sh"
    elfpatchStdenvTests
fi

# --- ld-cache (opt-in): a resolution-cache step before and after ours (./ld-cache.sh)
# shellcheck source=tests/nixpkgs/ld-cache.sh
if want ld-cache; then . "$here/ld-cache.sh" && ldCacheTests; fi

# --- build -------------------------------------------------------------------------------------
if ! want build; then
    finish
fi

prebuiltDir=${STUBSTRIP_PREBUILT_DIR:-$repo/target/release}
if [[ -z ${STUBSTRIP_PREBUILT_DIR-} && ! -x $prebuiltDir/stubstrip ]] && command -v cargo >/dev/null; then
    echo "building stubstrip with cargo"
    (cd "$repo" && cargo build --release -p stubstrip) >"$work/cargo.log" 2>&1 || tail -20 "$work/cargo.log"
fi
if [[ ! -x $prebuiltDir/stubstrip ]]; then
    fail "stubstrip binary in $prebuiltDir" "build it: cargo build --release"
    finish
fi
mkdir -p "$work/prebuilt"
cp "$prebuiltDir/stubstrip" "$work/prebuilt/"

build() { nix-build "${nixOpts[@]}" --no-out-link "$here/builds.nix" --arg prebuilt "$work/prebuilt" "$@"; }
instantiate() { nix-instantiate "${nixOpts[@]}" "$here/builds.nix" --arg prebuilt "$work/prebuilt" "$@"; }
runpathOf() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }

# The CUDA packages, through buildRedist (its own checks run in their fixup and installCheck).
start=$SECONDS
if cudart=$(build -A cuda.cuda_cudart 2>"$work/cudart.err") && nvml=$(build -A cuda.cuda_nvml_dev 2>"$work/nvml.err"); then
    hook=$(build -A cuda.removeStubsFromRunpathHook 2>/dev/null)
    pass "buildRedist builds cuda_cudart ($(basename "$cudart")) and cuda_nvml_dev's stubs output, its checks included"
    for pair in "cuda_cudart:$cudart" "cuda_nvml_dev.stubs:$nvml"; do
        name=${pair%%:*} path=${pair#*:}
        file=$path/nix-support/propagated-build-inputs
        if grep -qF "$hook" "$file" 2>/dev/null && [[ ! -e $path/nix-support/propagated-native-build-inputs ]] &&
            [[ $(grep -o 'removeStubsFromRunpathHook' "$file" | wc -l) == 1 ]]; then
            pass "$name: nix-support/propagated-build-inputs (only) names our removeStubsFromRunpathHook, once"
        else
            fail "$name: propagated-build-inputs names our hook" "$(cat "$file" 2>&1)"
        fi
    done
    if [[ -L $cudart/lib/stubs/libcuda.so.1 && -f $cudart/lib/stubs/libcuda.so && ! -e $cudart/stubs ]]; then
        pass "cuda_cudart is single-output, its stub in out/lib/stubs with the libcuda.so.1 link"
    else
        fail "cuda_cudart layout" "$(find "$cudart" | head -20)"
    fi
    script=$hook/nix-support/setup-hook
    if ! grep -q '@stubstrip@\|@driverLink@' "$script" && grep -q '/nix/store/[a-z0-9]*-stubstrip-[^/]*/bin/stubstrip' "$script" &&
        grep -qF /run/opengl-driver/lib "$script"; then
        pass "our hook's setup-hook has stubstrip and the driver link substituted"
    else
        fail "our hook's setup-hook has stubstrip and the driver link substituted" "$(grep -n 'stubstrip\|driver' "$script" | head -5)"
    fi
else
    fail "buildRedist builds cuda_cudart and cuda_nvml_dev" "$(grep -h -m5 'error\|ERROR' "$work/cudart.err" "$work/nvml.err" 2>/dev/null)"
    finish
fi
echo "  (CUDA packages: $((SECONDS - start)) s)"

# The original hook, for the one-mechanism check: its drv must be in no consumer's closure.
nixpkgsHookDrv=$(nix-instantiate "${nixOpts[@]}" "$here/builds.nix" --arg prebuilt "$work/prebuilt" \
    --arg upstream false -A cuda.removeStubsFromRunpathHook 2>/dev/null)

# Every consumer in one nix-build call (two jobs at a time), then each output on its own.
start=$SECONDS
names=$(nix-instantiate "${nixOpts[@]}" --eval --strict --json -E "builtins.attrNames (import $here/builds.nix {
    prebuilt = $work/prebuilt; }).consumers" 2>"$work/err" | tr -d '[]"' | tr ',' ' ')
[[ -n $names ]] || {
    fail "list the consumers" "$(tail -3 "$work/err")"
    finish
}
args=()
for n in $names; do args+=(-A "consumers.$n"); done
build --keep-going --max-jobs 2 "${args[@]}" >"$work/consumers.out" 2>"$work/consumers.err"
echo "  (consumers: $(wc -w <<<"$names") derivations, $((SECONDS - start)) s)"

driverDir=$work/driver
mkdir -p "$driverDir"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$driverDir/libcuda.so.1" "$here/fake/driver.c"
gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$driverDir/libnvidia-ml.so.1" "$here/fake/driver.c"
# Runs "$@" with the fake driver at the driver link, in a mount namespace of its own (/run is a
# private tmpfs there; the machine's /run is not touched).
withDriver() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    unshare -m bash -c 'mount -t tmpfs none /run && mkdir -p /run/opengl-driver/lib &&
        cp "$0"/* /run/opengl-driver/lib/ && exec "$@"' "$driverDir" "$@"
}

pythonBin=$(nix-build "${nixOpts[@]}" --no-out-link "$here/builds.nix" --arg prebuilt "$work/prebuilt" -A pkgs.python3 2>/dev/null)/bin/python3
for n in $names; do
    drv=$(instantiate -A "consumers.$n" 2>/dev/null)
    out=$(nix-store -q --outputs "$drv" 2>/dev/null | head -1)
    # Without a sandbox a failed build can leave its output directory behind: only a valid path counts.
    if ! nix-store --check-validity "$out" 2>/dev/null; then
        fail "$n builds" "$(nix-store -l "$drv" 2>/dev/null | grep -m5 -i 'error\|FAIL\|not found')"
        continue
    fi
    kind=${n%%-*}
    problems=()
    # No stub entry left, by stubstrip's own check and by readelf.
    "$work/prebuilt/stubstrip" check "$out" >/dev/null 2>&1 || problems+=("stubstrip check finds a stub entry")
    while IFS= read -r -d '' f; do
        rp=$(runpathOf "$f")
        [[ -z $rp ]] && continue
        [[ ":$rp:" == *":/run/opengl-driver/lib:"* ]] || problems+=("$f: no driver link in RUNPATH $rp")
        [[ $rp != *stubs* ]] || problems+=("$f: RUNPATH $rp")
    done < <(find "$out" -type f \( -perm -u+x -o -name '*.so' \) -print0)
    # The stub's store path is not among the output's references.
    stubPath=$cudart
    [[ $kind != nvml ]] || stubPath=$nvml
    if nix-store -q --references "$out" | grep -qxF "$stubPath"; then
        problems+=("references $stubPath")
    fi
    # The build's own checks ran and passed.
    [[ -s $out/share/stubstrip-nixpkgs/install-check ]] || problems+=("no mark of the installCheck")
    log=$(nix-store -l "$drv" 2>/dev/null)
    if [[ $kind == python ]] && ! grep -q "Check whether the following modules can be imported: cudaprobe" <<<"$log"; then
        problems+=("pythonImportsCheck did not run")
    fi
    # One mechanism: our hook ran (its log line), nixpkgs' hook is not in the build's closure.
    grep -q "stubstrip\|Stubstrip" <<<"$log" || problems+=("no log line from stubstrip")
    if [[ -n $nixpkgsHookDrv ]] && nix-store -qR "$drv" | grep -qxF "$nixpkgsHookDrv"; then
        problems+=("nixpkgs' removeStubsFromRunpathHook is in the closure")
    fi
    # The fake driver at the driver link is what the program loads.
    case $kind in
        python) said=$(PYTHONPATH=$(echo "$out"/lib/python*/site-packages) withDriver "$pythonBin" -c 'import cudaprobe; print(cudaprobe.init())' 2>&1) want=0 ;;
        nvml) said=$(withDriver "$out/bin/nvml-probe" 2>&1) want="nvmlInit_v2 returned 0" ;;
        *) said=$(withDriver "$out/bin/cuda-probe" 2>&1) want="cuInit returned 0" ;;
    esac
    [[ $said == "$want" ]] || problems+=("with the fake driver: $said")
    if ((${#problems[@]} == 0)); then
        pass "$n: no stub entry, no stub reference, its checks ran, one mechanism, loads the driver"
    else
        fail "$n" "${problems[*]}"
    fi
done

# Without nix/upstream: nixpkgs' hook replaces the entry, and the installCheck cannot load
# libcuda.so.1 in the build (the difference our check fallback makes).
if build --arg upstream false -A negative >/dev/null 2>"$work/negative.err"; then
    fail "without nix/upstream the C consumer's installCheck fails" "it built"
elif grep -q "libcuda.so.1: cannot open shared object file" "$work/negative.err"; then
    pass "without nix/upstream the C consumer's installCheck fails: libcuda.so.1: cannot open shared object file"
else
    fail "without nix/upstream the C consumer's installCheck fails" "$(grep -m3 -i error "$work/negative.err")"
fi

# The consumers of a package the hook fixed (./consumers.nix), in Nix's sandbox.
# shellcheck source=tests/nixpkgs/consumers.sh
. "$here/consumers.sh"
consumerTests

finish
