#!/usr/bin/env bash
# Offline checks of stubstrip's Nix expressions (flake.nix, nix/), with no
# nixpkgs and no binary cache: a mock nixpkgs (./mock-nixpkgs, see README.md)
# stands in for the real one.
#   a. every .nix file of the repository parses;
#   b. the flake evaluates with its nixpkgs input overridden by the mock, has
#      exactly the expected outputs, and passes `nix flake check --no-build`;
#      nix/ passes the evaluation tests of ./eval-tests.nix;
#   c. real builds in the local store (./store-build.nix): the overlay and the
#      hook's tests, built by the mock's emulation of stdenv's setup.sh with
#      the real stubstrip binary; RUNPATHs are then checked with readelf.
# Needs root or a working Nix; installs Debian's nix-bin when Nix is missing.
# Binaries: $STUBSTRIP_PREBUILT_DIR (holding stubstrip and elfpatch), else
# target/release, built with cargo first when missing and cargo is there.
# Prints one PASS/FAIL line per test and "N passed, M failed"; exits 1 on any
# failure.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
system=$(uname -m)-linux

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

# --- Nix, and the host tools the mock's builders use -------------------------
missing=()
command -v nix-build >/dev/null || missing+=(nix-bin)
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
command -v readelf >/dev/null || missing+=(binutils)
[[ -x /usr/bin/patchelf ]] || missing+=(patchelf)
if ((${#missing[@]})) && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]}"
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; } >"$work/apt.log" 2>&1 ||
        tail -20 "$work/apt.log"
fi
if ! command -v nix-build >/dev/null; then
    fail "nix is installed" "no nix-build, and apt-get install nix-bin did not provide one"
    finish
fi
nixOpts=(--option sandbox false --option substituters '')
if ! getent group nixbld >/dev/null; then
    # nix-bin without nix-setup-systemd: build as the calling user.
    nixOpts+=(--option build-users-group '')
fi
nixFlakes() { nix --extra-experimental-features 'nix-command flakes' "${nixOpts[@]}" "$@"; }

# Files of the working tree that git does not ignore (target/ stays out).
treeFiles() {
    if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$repo" ls-files -z -co --exclude-standard
    else
        (cd "$repo" && find . -path ./target -prune -o -path ./.git -prune -o -type f -print0)
    fi
}

# --- a. every .nix file parses -----------------------------------------------
while IFS= read -r -d '' file; do
    file=${file#./}
    [[ $file == *.nix && -f $repo/$file ]] || continue
    if nix-instantiate --parse "$repo/$file" >/dev/null 2>"$work/err"; then
        pass "parse $file"
    else
        fail "parse $file" "$(head -3 "$work/err")"
    fi
done < <(treeFiles)

# --- stage the flake and the mock -------------------------------------------
# A flake in a git checkout sees only tracked files, and a path: flake copies
# everything (target/ included), so the flake is evaluated from a copy of the
# non-ignored files: path:$work/src.
mkdir -p "$work/src" "$work/prebuilt"
(cd "$repo" && treeFiles | xargs -0 cp --parents -t "$work/src" --)
cp -r "$here/mock-nixpkgs" "$work/mock"

prebuiltDir=${STUBSTRIP_PREBUILT_DIR:-$repo/target/release}
if [[ -z ${STUBSTRIP_PREBUILT_DIR-} && ! (-x $prebuiltDir/stubstrip && -x $prebuiltDir/elfpatch) ]] &&
    command -v cargo >/dev/null; then
    echo "building stubstrip and elfpatch with cargo"
    (cd "$repo" && cargo build --release -p stubstrip -p elfpatch) >"$work/cargo.log" 2>&1 ||
        tail -20 "$work/cargo.log"
fi
havePrebuilt=1
for bin in stubstrip elfpatch; do
    if [[ -x $prebuiltDir/$bin ]]; then
        cp "$prebuiltDir/$bin" "$work/prebuilt/$bin"
    else
        havePrebuilt=
    fi
done
if [[ -n $havePrebuilt ]]; then
    pass "stubstrip and elfpatch binaries found in $prebuiltDir"
    cp -r "$work/prebuilt" "$work/mock/prebuilt"
else
    fail "stubstrip and elfpatch binaries found in $prebuiltDir" "build them: cargo build --release"
fi

flakeRef="path:$work/src"
overrideMock=(--no-write-lock-file --override-input nixpkgs "path:$work/mock")

# --- b. the flake against the mock -------------------------------------------
if nixFlakes flake show --json "${overrideMock[@]}" "$flakeRef" >"$work/show.json" 2>"$work/err"; then
    pass "nix flake show"
    expected="apps.aarch64-linux.default apps.x86_64-linux.default"
    expected+=" devShells.aarch64-linux.default devShells.x86_64-linux.default"
    expected+=" formatter.aarch64-linux formatter.x86_64-linux overlays.default"
    for sys in aarch64-linux x86_64-linux; do
        for pkg in default stubstrip stubstripHook; do expected+=" packages.$sys.$pkg"; done
    done
    # Leaves of the output tree, checks excluded (compared with the hook's tests below).
    # shellcheck disable=SC2016 # a Nix expression
    outputs=$(nix-instantiate "${nixOpts[@]}" --eval --strict --json --argstr file "$work/show.json" -E '
      { file }:
      let
        leaves = prefix: v:
          if builtins.isAttrs v && !(v ? type) then
            builtins.concatMap (n: leaves (prefix ++ [ n ]) v.${n}) (builtins.attrNames v)
          else [ (builtins.concatStringsSep "." prefix) ];
        tree = builtins.fromJSON (builtins.readFile file);
      in builtins.concatStringsSep " " (leaves [ ] (removeAttrs tree [ "checks" ]))' 2>"$work/leaves.err" | tr -d '"')
    if [[ $outputs == "$expected" ]]; then
        pass "flake outputs are exactly the expected ones"
    else
        fail "flake outputs are exactly the expected ones" "got: $outputs $(tail -3 "$work/leaves.err")"
    fi
else
    fail "nix flake show" "$(tail -5 "$work/err")"
fi

if nixFlakes flake check --no-build "${overrideMock[@]}" "$flakeRef" >"$work/check.log" 2>&1; then
    pass "nix flake check --no-build"
else
    fail "nix flake check --no-build" "$(grep -m3 error "$work/check.log")"
fi

for sys in x86_64-linux aarch64-linux; do
    program=$(nixFlakes eval --raw "${overrideMock[@]}" "$flakeRef#apps.$sys.default.program" 2>"$work/err")
    stubstripOut=$(nixFlakes eval --raw "${overrideMock[@]}" "$flakeRef#packages.$sys.stubstrip.outPath" 2>>"$work/err")
    if [[ -n $stubstripOut && $program == "$stubstripOut/bin/stubstrip" ]]; then
        pass "apps.$sys.default runs stubstrip"
    else
        fail "apps.$sys.default runs stubstrip" "program=$program $(tail -3 "$work/err")"
    fi
    checks=$(nixFlakes eval --json "${overrideMock[@]}" "$flakeRef#checks.$sys" --apply builtins.attrNames 2>"$work/err")
    hookTests=$(nixFlakes eval --json "${overrideMock[@]}" "$flakeRef#packages.$sys.stubstripHook.tests" \
        --apply 'tests: builtins.sort builtins.lessThan (builtins.attrNames tests ++ [ "stubstrip" ])' 2>>"$work/err")
    if [[ -n $checks && $checks == "$hookTests" ]]; then
        pass "checks.$sys = the package + stubstripHook.passthru.tests"
    else
        fail "checks.$sys = the package + stubstripHook.passthru.tests" "checks=$checks tests=$hookTests"
    fi
done

# Evaluation tests of nix/ (./eval-tests.nix), each evaluated on its own so
# that one that cannot evaluate fails alone.
evalTests="import $work/src/tests/nix/eval-tests.nix { repo = $work/src; mock = $work/mock; system = \"$system\"; }"
names=$(nix-instantiate --eval --strict --json -E "builtins.attrNames ($evalTests)" 2>"$work/err" | tr -d '[]"' | tr ',' ' ')
[[ -n $names ]] || fail "list eval-tests.nix" "$(tail -5 "$work/err")"
for name in $names; do
    verdict=$(nix-instantiate --eval --strict --json -E "let t = ($evalTests).$name; in
        if t.ok then \"ok\" else builtins.toJSON t.detail" 2>"$work/err")
    if [[ $verdict == '"ok"' ]]; then
        pass "eval $name"
    else
        verdict=${verdict:-$(grep -m1 error "$work/err")}
        fail "eval $name" "${verdict:0:400}"
    fi
done

# --- d. the real-nixpkgs suite (tests/nixpkgs) as far as CI can run it --------
# It needs a nixpkgs tree, which CI has not: its scripts must parse and lint,
# and without NIXPKGS it must say that it skipped and why, and pass.
for script in "$repo"/tests/nixpkgs/*.sh; do
    name=${script#"$repo"/}
    if ! bash -n "$script" 2>"$work/err"; then
        fail "bash -n $name" "$(head -3 "$work/err")"
    elif command -v shellcheck >/dev/null; then
        if shellcheck -x "$script" >"$work/err" 2>&1; then
            pass "shellcheck $name"
        else
            fail "shellcheck $name" "$(head -5 "$work/err")"
        fi
    elif [[ -n ${STUBSTRIP_REQUIRE_TOOLS-} ]]; then
        fail "shellcheck $name" "shellcheck is not installed"
    else
        pass "bash -n $name (no shellcheck here)"
    fi
done
for py in tests/nixpkgs/drv_compare.py bench/nixpkgs_hook_bench.py; do
    if python3 -m py_compile "$repo/$py" 2>"$work/err"; then
        pass "python3 compiles $py"
    else
        fail "python3 compiles $py" "$(tail -3 "$work/err")"
    fi
done
if skipped=$(env -u NIXPKGS bash "$repo/tests/nixpkgs/run.sh" 2>&1) && [[ $skipped == "tests/nixpkgs: skipped: NIXPKGS is not set"* ]]; then
    pass "tests/nixpkgs/run.sh without NIXPKGS: $skipped"
else
    fail "tests/nixpkgs/run.sh without NIXPKGS says it skipped" "$skipped"
fi

# --- c. real builds in the local store ---------------------------------------
if [[ -z $havePrebuilt ]]; then
    finish
fi

storeBuild() {
    nix-build "${nixOpts[@]}" --no-out-link "$work/src/tests/nix/store-build.nix" \
        --arg prebuilt "$work/prebuilt" --argstr system "$system" "$@"
}

# RUNPATH of an ELF file, as readelf prints it.
runpathOf() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }

if out=$(storeBuild -A stubstrip 2>"$work/err"); then
    if [[ -x $out/bin/stubstrip && -x $out/bin/elfpatch ]] && cmp -s "$out/bin/stubstrip" "$work/prebuilt/stubstrip"; then
        pass "build stubstrip: bin/stubstrip and bin/elfpatch installed"
    else
        fail "build stubstrip: bin/stubstrip and bin/elfpatch installed" "$(ls "$out/bin")"
    fi
    # postInstall: the binary's own manual pages and completions (installShellFiles).
    shellFiles=(share/man/man1/stubstrip.1 share/bash-completion/completions/stubstrip.bash
        share/zsh/site-functions/_stubstrip share/fish/vendor_completions.d/stubstrip.fish
        share/man/man1/elfpatch.1 share/bash-completion/completions/elfpatch.bash
        share/zsh/site-functions/_elfpatch share/fish/vendor_completions.d/elfpatch.fish)
    missingFiles=()
    for f in "${shellFiles[@]}"; do [[ -s $out/$f ]] || missingFiles+=("$f"); done
    if ((${#missingFiles[@]} == 0)); then
        pass "build stubstrip: manual pages and completions installed"
    else
        fail "build stubstrip: manual pages and completions installed" "missing: ${missingFiles[*]}"
    fi
else
    fail "build stubstrip" "$(tail -5 "$work/err")"
fi

if hook=$(storeBuild -A stubstripHook 2>"$work/err"); then
    script=$hook/nix-support/setup-hook
    exe=$(storeBuild -A stubstrip 2>/dev/null)/bin/stubstrip
    if [[ -f $script ]] && ! grep -q '@stubstrip@\|@driverLink@' "$script" &&
        grep -qF "'$exe'" "$script" && grep -qF "'/run/opengl-driver/lib'" "$script"; then
        pass "build stubstripHook: setup-hook installed with both substitutions"
    else
        fail "build stubstripHook: setup-hook installed with both substitutions" "$(grep -n "_stubstrip\(Bin\|DriverLink\)=" "$script")"
    fi
else
    fail "build stubstripHook" "$(tail -5 "$work/err")"
fi

# The same claims as tests/nixpkgs makes of buildRedist's real cuda_cudart: one output holding
# the stub, and our removeStubsFromRunpathHook named in nix-support/propagated-build-inputs only,
# once (the mock runs buildRedist's check that the name is there).
if cudart=$(storeBuild -A cudart 2>"$work/err"); then
    file=$cudart/nix-support/propagated-build-inputs
    ourHook=$(grep -o '/nix/store/[a-z0-9]*-removeStubsFromRunpathHook' "$file" 2>/dev/null)
    if [[ $(grep -o removeStubsFromRunpathHook "$file" 2>/dev/null | wc -l) == 1 && ! -e $cudart/nix-support/propagated-native-build-inputs ]] &&
        grep -qF "$(storeBuild -A stubstrip 2>/dev/null)/bin/stubstrip" "$ourHook/nix-support/setup-hook" 2>/dev/null; then
        pass "build mock cuda_cudart: propagated-build-inputs (only) names our removeStubsFromRunpathHook, once"
    else
        fail "build mock cuda_cudart: propagated-build-inputs (only) names our removeStubsFromRunpathHook, once" "$(ls "$cudart/nix-support" 2>&1; cat "$file" 2>&1)"
    fi
    if [[ -L $cudart/lib/stubs/libcuda.so.1 && -f $cudart/lib/stubs/libcuda.so && $(basename "$cudart") == *-cuda12.9-cuda_cudart-12.9.79 ]]; then
        pass "build mock cuda_cudart: cuda12.9-cuda_cudart-12.9.79, single output, stub in out/lib/stubs"
    else
        fail "build mock cuda_cudart: cuda12.9-cuda_cudart-12.9.79, single output, stub in out/lib/stubs" "$cudart"
    fi
else
    fail "build mock cuda_cudart" "$(tail -5 "$work/err")"
fi

# Every hook test and overlay consumer: the check derivation builds (it
# asserts in the sandbox), and readelf here agrees on the program it checked.
attrs=$(nix-instantiate --eval --strict --json -E "builtins.attrNames (import $work/src/tests/nix/store-build.nix {
    prebuilt = $work/prebuilt; system = \"$system\"; }).tests" 2>"$work/err" | tr -d '[]"' | tr ',' ' ')
[[ -n $attrs ]] || fail "list the hook's tests" "$(tail -3 "$work/err")"
for attr in $(for a in $attrs; do echo "tests.$a"; done) overlay.cudart-build-inputs \
    overlay.cudart-native-build-inputs overlay.cudart-13 overlay.cudart-set-opt-out; do
    if ! storeBuild -A "$attr" >/dev/null 2>"$work/err"; then
        fail "build $attr" "$(grep -m3 'FAIL\|error' "$work/err")"
        continue
    fi
    program=$(storeBuild -A "$attr.program" 2>/dev/null)/bin/cuda-probe
    runpath=$(runpathOf "$program")
    hasDriver='' hasStub=''
    IFS=: read -r -a entries <<<"$runpath"
    for entry in "${entries[@]}"; do
        [[ $entry != /run/opengl-driver/lib ]] || hasDriver=1
        [[ $entry != /nix/store/*-stubs/lib* && $entry != */lib/stubs ]] || hasStub=1
    done
    case $attr in
        tests.dont-stubstrip) want="stub kept" ok=$([[ -n $hasStub && -z $hasDriver ]] && echo 1) ;;
        *) want="driver link, no stub" ok=$([[ -n $hasDriver && -z $hasStub ]] && echo 1) ;;
    esac
    if [[ -n $ok ]]; then
        pass "build $attr: readelf RUNPATH has $want"
    else
        fail "build $attr: readelf RUNPATH has $want" "RUNPATH=$runpath"
    fi
done

# As in tests/nixpkgs: without the overlay nixpkgs' hook alone replaces the stub entry, and the
# installCheck cannot load libcuda.so.1.
if storeBuild -A negative.without-overlay >/dev/null 2>"$work/err"; then
    fail "negative: without the overlay the consumer's installCheck fails" "it built"
elif grep -q 'libcuda.so.1: cannot open shared object file' "$work/err"; then
    pass "negative: without the overlay the consumer's installCheck fails: libcuda.so.1: cannot open shared object file"
else
    fail "negative: without the overlay the consumer's installCheck fails" "$(tail -3 "$work/err")"
fi

# The consumers of a fixed package (./consumers.sh, ./consumers.nix), in the sandbox.
# shellcheck source=tests/nix/consumers.sh
. "$here/consumers.sh"
consumerTests

finish
