#!/usr/bin/env bash
# tests/package/run.sh: the package's sources test themselves.
#
# `nix build .#stubstrip` compiles and tests the workspace from the files
# nix/package.nix's fileset selects, nothing else. This suite takes exactly
# those files (evaluating the real package.nix with a recording lib.fileset,
# tests/package/fileset.nix, so a change to the fileset changes what is copied),
# copies them, as a flake build sees them (git-tracked files only), into a
# fresh directory, and there
#   1. builds every test: cargo test --workspace --locked --no-run;
#   2. runs the whole suite there (cargo test --workspace, debug, as the
#      checkPhase would with the tools of nativeCheckInputs on PATH): a test
#      that reads a file the fileset leaves out fails here.
# Prints `N passed, M failed`; exits non-zero if any step failed. KEEP=1 keeps
# the copy. The copy and its target directory live under target/package-fileset
# so a second run rebuilds only what changed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
targetDir=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $targetDir == /* ]] || targetDir=$ROOT/$targetDir
BASE=$targetDir/package-fileset
COPY=$BASE/src
LOGS=$BASE/logs

passed=0 failed=0
pass() {
  passed=$((passed + 1))
  echo "ok   $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $1"
  [[ -z ${2-} ]] || printf '  %s\n' "${2//$'\n'/$'\n'  }"
}
finish() {
  echo
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

for tool in nix-instantiate python3 cargo rustc; do
  command -v "$tool" >/dev/null || {
    echo "run.sh: $tool is required (tests/run-all.sh installs nix-bin and python3)" >&2
    exit 2
  }
done
rm -rf "$COPY" "$LOGS" && mkdir -p "$COPY" "$LOGS" || exit 2

# 1. What the fileset selects, from the real package.nix.
if ! nix-instantiate --eval --strict --json -E "import $HERE/fileset.nix { }" >"$LOGS/fileset.json" 2>"$LOGS/eval.log"; then
  fail "evaluate nix/package.nix's src with a recording lib.fileset" "$(grep -v "group 'nixbld'" "$LOGS/eval.log")"
  finish
fi
mapfile -t selected < <(python3 - "$LOGS/fileset.json" "$ROOT" <<'EOF'
import json, os, sys
src = json.load(open(sys.argv[1]))
if os.path.realpath(src["root"]) != os.path.realpath(sys.argv[2]):
    sys.exit(f"the fileset's root is {src['root']}, not the repository root")
for p in src["paths"]:
    print(os.path.relpath(p, src["root"]))
EOF
)
if ((${#selected[@]} == 0)); then
  fail "evaluate nix/package.nix's src with a recording lib.fileset" "no paths selected"
  finish
fi
pass "package.nix's fileset selects: ${selected[*]}"

# 2. The copy: what a flake build sees (tracked files; a path: build would also
# see untracked ones, which no commit carries).
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' -t files < <(git -C "$ROOT" ls-files -z --cached -- "${selected[@]}")
else
  mapfile -d '' -t files < <(cd "$ROOT" && find "${selected[@]}" -type f -print0)
fi
copied=0
for f in "${files[@]}"; do
  [[ -e $ROOT/$f || -L $ROOT/$f ]] || continue # deleted in the work tree
  (cd "$ROOT" && cp -P -p --parents -- "$f" "$COPY/") || {
    fail "copy $f"
    finish
  }
  copied=$((copied + 1))
done
pass "copied $copied files into $COPY"

# 3. Every test builds from the copy alone.
export CARGO_TARGET_DIR=$BASE/target
if (cd "$COPY" && cargo test --workspace --locked --no-run) >"$LOGS/build.log" 2>&1; then
  pass "cargo test --workspace --locked --no-run, in the copy"
else
  fail "cargo test --workspace --locked --no-run, in the copy" "$(grep -E -A5 '^error' "$LOGS/build.log" | head -40)"
  finish
fi

# 4. The whole suite runs from the copy, with the tools the package's
# nativeCheckInputs give its checkPhase (gcc, binutils, patchelf, elfutils, ldd):
# a test that reads a file the fileset leaves out fails here.
if (cd "$COPY" && cargo test --workspace --locked --no-fail-fast) >"$LOGS/test.log" 2>&1; then
  pass "cargo test --workspace, in the copy ($(awk '/^test result:/ { p += $4 } END { print p }' "$LOGS/test.log") tests passed)"
else
  fail "cargo test --workspace, in the copy" "$(grep -E -A12 "^failures:|panicked at|^error" "$LOGS/test.log" | head -60)"
fi

# Control: step 4 notices a file the tests read at run time going missing.
# The fuzz replay test reads its regression inputs from its crate's directory;
# without them in the copy it must fail.
regressions=crates/elfpatch-check/regressions
if [[ ! -d $COPY/$regressions ]]; then
  fail "control: $regressions is in the copy" "the fuzz regression inputs moved; update this control"
elif mv "$COPY/$regressions" "$BASE/regressions.moved" &&
  ! (cd "$COPY" && cargo test -p elfpatch-check --locked --test fuzz_corpus) >"$LOGS/control.log" 2>&1 &&
  grep -q "regressions" "$LOGS/control.log"; then
  pass "control: without $regressions in the copy, its replay test fails"
else
  fail "control: without $regressions in the copy, its replay test fails" "$(tail -20 "$LOGS/control.log")"
fi
rm -rf "$BASE/regressions.moved"

if [[ -z ${KEEP-} ]]; then rm -rf "$COPY"; fi
finish
