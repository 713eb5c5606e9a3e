#!/usr/bin/env bash
# integrations/maturin/run.sh
#
# maturin 1.16.0 with its ELF edits done in-process by a library, and no `patchelf` anywhere on
# PATH. For each variant (VARIANTS, default `elfpatch`; `arwen` is the comparison):
#   - the maturin crate's source from crates.io (cargo fetch of a scratch project), the variant's
#     patch applied (NAME.patch: src/auditwheel/patchelf.rs's functions on that library);
#   - `cargo build --release` of it, elfpatch taken from this checkout ([patch.crates-io]);
#   - maturin's own unit tests of the auditwheel module (offline), with the patch's own tests;
#   - with a PATH that has no patchelf (directories holding one are replaced by copies without it,
#     and `command -v patchelf` must fail), under strace: `maturin build --release --auditwheel
#     repair` of tests/maturin/xmlwheel (a PyO3 extension linking the system's libxml2). No
#     process may execute anything named patchelf. The repaired wheel must carry libxml2, liblzma
#     and ICU, install into a fresh venv and import there with the grafted copies, and only they,
#     mapped (tests/maturin/check_import.py); eu-elflint must find nothing new.
#
# Prints one line per check, the times, and `N passed, M failed`; exits non-zero if a check on
# the elfpatch variant failed (the arwen variant's failures are reported, not fatal).
#
# Environment: VARIANTS ("elfpatch arwen" for both), APPLY_ONLY=1 (only check that the patches
# apply: CI's suite `integrations`), MATURIN_TARGET (maturin's cargo target
# directory, kept between runs: default target/maturin-integration), KEEP=1 keeps the work
# directory. Needs crates.io (cargo), gcc, git, strace, clang's libclang (bindgen), pkg-config,
# libxml2's headers, eu-elflint, unzip, python3 with venv. The maturin build is heavy: about
# 25 minutes of a 2-core machine the first time.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VERSION=1.16.0
VARIANTS=${VARIANTS:-elfpatch}
MATURIN_TARGET=${MATURIN_TARGET:-$ROOT/target/maturin-integration}
# The cargo features of each variant's build. The Linux repair is compiled in every feature set;
# leaving out the defaults (zig, xwin, upload, sbom, scaffolding) halves the build. arwen is
# maturin's optional dependency for Mach-O, behind `auditwheel`.
declare -A FEATURES=([elfpatch]="rustls" [arwen]="rustls,auditwheel")

die() {
  echo "run.sh: $*" >&2
  exit 2
}

for tool in cargo gcc git strace pkg-config eu-elflint readelf unzip python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
pkg-config --exists libxml-2.0 || die "libxml2's headers are required (Debian: libxml2-dev)"

# shellcheck source=tests/lib/client-suite.sh
. "$ROOT/tests/lib/client-suite.sh" maturin-inprocess
# shellcheck source=tests/maturin/xmlwheel-checks.sh
. "$ROOT/tests/maturin/xmlwheel-checks.sh"

# timed WHAT CMD...: runs CMD, appends `WHAT: N s` to the times.
times=()
timed() {
  local what=$1 start=$SECONDS rc
  shift
  "$@"
  rc=$?
  times+=("$what: $((SECONDS - start)) s")
  return $rc
}

# The crate as crates.io has it: a scratch project that depends on it, fetched.
mkdir -p "$WORK/fetch/src"
printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nmaturin = { version = "=%s", default-features = false }\n' \
  "$VERSION" >"$WORK/fetch/Cargo.toml"
echo 'fn main() {}' >"$WORK/fetch/src/main.rs"
SRC=$(cd "$WORK/fetch" && cargo fetch -q && cargo metadata -q --format-version 1 |
  python3 -c 'import json, os, sys
m = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "maturin"))') ||
  die "cannot fetch maturin $VERSION from crates.io"
echo "run.sh: maturin $VERSION from $SRC"

# A PATH with no patchelf: each directory on PATH that holds one is replaced by a directory of
# links to everything else in it.
clean_path() {
  local dir n=0 out=() entry
  IFS=: read -r -a dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    if [[ -e $dir/patchelf ]]; then
      n=$((n + 1))
      mkdir -p "$WORK/nopatchelf/$n"
      for entry in "$dir"/*; do
        [[ $(basename "$entry") == patchelf ]] || ln -sf "$entry" "$WORK/nopatchelf/$n/"
      done
      out+=("$WORK/nopatchelf/$n")
    else
      out+=("$dir")
    fi
  done
  (IFS=:; echo "${out[*]}")
}
NOPATCHELF_PATH=$(clean_path)
if PATH=$NOPATCHELF_PATH command -v patchelf >/dev/null; then
  die "a patchelf is still on PATH: $(PATH=$NOPATCHELF_PATH command -v patchelf)"
fi

python3 -m venv "$WORK/venv" || die "cannot make a venv"
cp -r "$ROOT/tests/maturin/xmlwheel" "$WORK/src"

cargo_maturin() {
  local name=$1
  shift
  (cd "$WORK/maturin-$name" && CARGO_TARGET_DIR=$MATURIN_TARGET cargo "$@" --release \
    --no-default-features --features "${FEATURES[$name]}" \
    --config "patch.crates-io.elfpatch.path=\"$ROOT/crates/elfpatch\"")
}
build_maturin() {
  cargo_maturin "$1" build &&
    mkdir -p "$WORK/bin-$1" && cp "$MATURIN_TARGET/release/maturin" "$WORK/bin-$1/maturin"
}
# The auditwheel module's unit tests (policy tables, tags, library names; the patch's own test of
# the edits): all run offline.
unit_tests() {
  cargo_maturin "$1" test --lib auditwheel:: 2>&1 | tee "$WORK/unit-$1.log" | grep -E '^test |test result'
  grep -q 'test result: ok' "$WORK/unit-$1.log"
}
# repair NAME [MODE]: the wheel, built by that maturin with no patchelf on PATH; every process it
# starts is recorded. maturin edits the cdylib in its target directory in place: the source is
# touched so that cargo links a fresh one for each build.
repair() {
  touch "$WORK/src/src/lib.rs"
  (cd "$WORK/src" && CARGO_TARGET_DIR=$WORK/target PATH=$WORK/bin-$1:$WORK/venv/bin:$NOPATCHELF_PATH \
    strace -f -qq -e trace=execve -e signal=none -o "$WORK/execve-$1.log" \
    maturin build --release --auditwheel "${2:-repair}" -i "$WORK/venv/bin/python" -o "$WORK/dist-$1")
}
# no_patchelf_exec NAME: nothing named patchelf was executed, or even tried.
no_patchelf_exec() {
  echo "$(grep -c 'execve(' "$WORK/execve-$1.log") execve calls"
  ! grep -E 'execve\("[^"]*patchelf"' "$WORK/execve-$1.log"
}

# variant NAME: every check of one variant, stopping at the first that leaves nothing to check.
variant() {
  local name=$1
  rm -rf "$WORK/maturin-$name"
  cp -r "$SRC" "$WORK/maturin-$name"
  check "$name" "git apply $name.patch to maturin $VERSION" \
    git -C "$WORK/maturin-$name" apply --verbose "$HERE/$name.patch" || return
  [[ -z ${APPLY_ONLY-} ]] || return 0
  check "$name" "cargo build --release (features ${FEATURES[$name]})" timed "$name: cargo build --release" \
    build_maturin "$name" || return
  check "$name" "maturin's auditwheel unit tests (cargo test --release --lib auditwheel::)" \
    timed "$name: cargo test" unit_tests "$name" && sed 's/^/       /' "$WORK/check.log" | grep 'test result'
  if [[ ! -d $WORK/unzipped-original ]]; then
    # The unrepaired wheel: the extension as the linker wrote it (and the first, longest build).
    timed "xmlwheel: unrepaired build" repair "$name" skip >"$WORK/build-original.log" 2>&1 ||
      { cat "$WORK/build-original.log"; die "maturin cannot build the extension"; }
    mv "$WORK/dist-$name" "$WORK/dist-original"
    unzip -q -o "$WORK"/dist-original/xmlwheel-*.whl -d "$WORK/unzipped-original" || die "cannot unzip the unrepaired wheel"
  fi
  check "$name" "maturin build --release --auditwheel repair, no patchelf on PATH" \
    timed "$name: maturin build --auditwheel repair" repair "$name" || return
  grep -iE 'patchelf|graft|repair' "$WORK/check.log" | sed 's/^/       /' | head -8
  check "$name" "no process executed patchelf (strace -f -e execve)" no_patchelf_exec "$name" &&
    sed 's/^/       /' "$WORK/check.log"
  check "$name" "the wheel carries libxml2, liblzma, libicuuc and libicudata" grafted "$name" || return
  check "$name" "the repaired wheel installs into a fresh venv" install_repaired "$name"
  check "$name" "imports in a fresh process, the grafted copies and only they mapped (check_import.py)" \
    import_repaired "$name" && sed 's/^/       /' "$WORK/check.log"
  check "$name" "eu-elflint --gnu-ld: no new message on the grafted libraries and the extension" elflint "$name"
}

for name in $VARIANTS; do
  [[ -f $HERE/$name.patch ]] || die "no $name.patch"
  before=$failed
  variant "$name"
  # The comparison's failures are reported, not fatal.
  [[ $name == elfpatch ]] || failed=$before
done

echo
((${#times[@]} == 0)) || printf 'time: %s\n' "${times[@]}"
finish
