#!/usr/bin/env bash
# tests/manpages/run.sh: the manual pages and shell completions the packages install
# (nix/package.nix: installManPage, installShellCompletion) are what the binaries generate
# from their own argument definitions; here each one must be usable:
#   - every manual page renders with `man -l` without a warning (groff's, through man-db);
#   - every completion script parses in its shell: bash -n, zsh -n, fish --no-execute.
# Both binaries write them the same way: `--generate-man` (the one page on stdout) and
# `--generate-completion SHELL`.
# Prints `N passed, M failed`; exits non-zero if any check failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
for tool in cargo man bash zsh fish; do
  command -v "$tool" >/dev/null || {
    echo "run.sh: $tool is required (tests/run-all.sh installs man-db, zsh and fish)" >&2
    exit 2
  }
done

passed=0 failed=0
pass() {
  passed=$((passed + 1))
  echo "ok   $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $1"
  [[ -z ${2-} ]] || printf '     %s\n' "${2//$'\n'/$'\n'     }"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-manpages.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT

cargo build --release -q -p stubstrip -p elfpatch || exit 2
targetDir=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $targetDir == /* ]] || targetDir=$ROOT/$targetDir

# check_pages NAME DIR: every page in DIR renders without a warning, and there is one for NAME.
check_pages() {
  local name=$1 dir=$2 page out
  [[ -f $dir/$name.1 ]] || {
    fail "$name: a manual page $name.1" "$(ls -A "$dir")"
    return
  }
  for page in "$dir"/*.1; do
    # man-db passes --warnings on to groff; anything on stderr is a warning.
    out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    if [[ -n $out ]]; then
      fail "$(basename "$page") renders without warnings" "$out"
    elif ! MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q .; then
      fail "$(basename "$page") renders to something"
    else
      pass "$(basename "$page") renders without warnings"
    fi
  done
}

# check_completions NAME CMD...: CMD SHELL prints a script that parses in that shell.
check_completions() {
  local name=$1 shell script out
  shift
  for shell in bash zsh fish; do
    script=$WORK/$name.$shell
    if ! "$@" "$shell" >"$script" 2>"$WORK/err" || [[ ! -s $script ]]; then
      fail "$name: a $shell completion script" "$(cat "$WORK/err")"
      continue
    fi
    local rc=0
    case $shell in
      bash) out=$(bash -n "$script" 2>&1) || rc=$? ;;
      zsh) out=$(zsh -n "$script" 2>&1) || rc=$? ;;
      fish) out=$(fish --no-execute "$script" 2>&1) || rc=$? ;;
    esac
    if ((rc != 0)) || [[ -n $out ]]; then
      fail "$name: the $shell completion parses" "$out"
    else
      pass "$name: the $shell completion parses"
    fi
  done
}

S=$targetDir/release/stubstrip
mkdir -p "$WORK/stubstrip-man"
if "$S" --generate-man >"$WORK/stubstrip-man/stubstrip.1" 2>"$WORK/err" && [[ -s $WORK/stubstrip-man/stubstrip.1 ]]; then
  check_pages stubstrip "$WORK/stubstrip-man"
  # The one page holds every subcommand, and the synopses name their arguments' values.
  page=$(MANWIDTH=80 man -l "$WORK/stubstrip-man/stubstrip.1" 2>/dev/null)
  for sub in fix check fixup explain audit driver-link; do
    grep -q "^   stubstrip $sub\$" <<<"$page" || fail "stubstrip.1 has a section for stubstrip $sub"
  done
  grep -q -- '--jobs N' <<<"$page" || fail "stubstrip.1's synopsis names the value of --jobs"
else
  fail "stubstrip --generate-man (the page on stdout)" "$(cat "$WORK/err")"
fi
check_completions stubstrip "$S" --generate-completion

E=$targetDir/release/elfpatch
if grep -rq -- 'generate-man\|generate_man' crates/elfpatch/src; then
  mkdir -p "$WORK/elfpatch-man"
  if "$E" --generate-man >"$WORK/elfpatch-man/elfpatch.1" 2>"$WORK/err" && [[ -s $WORK/elfpatch-man/elfpatch.1 ]]; then
    check_pages elfpatch "$WORK/elfpatch-man"
  else
    fail "elfpatch --generate-man (the page on stdout)" "$(cat "$WORK/err")"
  fi
  check_completions elfpatch "$E" --generate-completion
else
  echo "skip elfpatch: crates/elfpatch/src has no manual page generator yet"
fi

echo "$passed passed, $failed failed"
((failed == 0))
