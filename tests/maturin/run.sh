#!/usr/bin/env bash
# tests/maturin/run.sh
#
# maturin, a real client of patchelf, with elfpatch installed as `patchelf` and nothing else
# changed: `maturin build --release --auditwheel repair` of a PyO3 extension (xmlwheel/) that
# links the system's libxml2, whose dependencies liblzma and ICU no manylinux policy allows
# either. maturin checks `patchelf --version` as a semantic version (nothing may follow it),
# then grafts the four libraries into the wheel with `patchelf --set-soname`, `--replace-needed`,
# `--remove-rpath` and `--force-rpath --set-rpath`. The repair runs with elfpatch first on PATH
# as `patchelf`, then with the real patchelf 0.19.3 (the baseline); each repaired wheel is
# installed into a fresh venv and imported in a fresh process (check_import.py): the grafted
# copies, and only they, are mapped. eu-elflint looks at what each tool wrote.
#
# Prints one line per check and `N passed, M failed`; exits non-zero if a check on elfpatch's
# repair failed, or if the baseline cannot repair (then the test, not elfpatch, is broken).
#
# Environment: ELFPATCH (default: the one `cargo build --release -p elfpatch` makes), KEEP=1 keeps
# the work directory. Needs PyPI (pip) and crates.io (cargo), gcc, clang's libclang (the libxml
# crate's bindgen), pkg-config and libxml2's headers (Debian: libxml2-dev), eu-elflint, unzip,
# python3 with venv.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

# Pinned: the maturin release that refused `patchelf 0.19.3 (elfpatch 0.1.0)` as a version.
MATURIN=maturin==1.16.0

die() {
  echo "run.sh: $*" >&2
  exit 2
}

for tool in cargo gcc pkg-config eu-elflint readelf unzip python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
pkg-config --exists libxml-2.0 || die "libxml2's headers are required (Debian: libxml2-dev)"

# shellcheck source=tests/lib/elfpatch-bin.sh
. "$ROOT/tests/lib/elfpatch-bin.sh"
find_elfpatch "$ROOT"

# shellcheck source=tests/lib/client-suite.sh
. "$ROOT/tests/lib/client-suite.sh" maturin

{ python3 -m venv "$WORK/venv" && pipq "$WORK/venv/bin/pip" install "$MATURIN"; } ||
  die "could not install $MATURIN"
patchelf_dirs "$WORK/venv"
echo "run.sh: $("$WORK/venv/bin/maturin" --version); elfpatch is $BIN, as patchelf: $("$WORK/path-elfpatch/patchelf" --version)"

cp -r "$HERE/xmlwheel" "$WORK/src"
export CARGO_TARGET_DIR=$WORK/target

# build TOOL [MODE]: maturin's build with TOOL first on PATH as `patchelf`, the venv's python,
# repairing the wheel (MODE repair) or not (skip: the originals eu-elflint compares with). maturin
# edits the cdylib in its target directory in place: the source is touched so that cargo links a
# fresh one for each build.
build() {
  touch "$WORK/src/src/lib.rs"
  (cd "$WORK/src" && PATH=$WORK/path-$1:$WORK/venv/bin:$PATH \
    maturin build --release --auditwheel "${2:-repair}" -i "$WORK/venv/bin/python" -o "$WORK/dist-$1")
}
# grafted, install_repaired, import_repaired, elflint.
# shellcheck source=tests/maturin/xmlwheel-checks.sh
. "$HERE/xmlwheel-checks.sh"

# The unrepaired wheel: the extension as the linker wrote it (and the first, longest build).
build original skip >"$WORK/build-original.log" 2>&1 || { cat "$WORK/build-original.log"; die "maturin cannot build the extension"; }
unzip -q -o "$WORK"/dist-original/xmlwheel-*.whl -d "$WORK/unzipped-original" || die "cannot unzip the unrepaired wheel"

for tool in elfpatch patchelf; do
  check "$tool" "maturin build --release --auditwheel repair with $tool as patchelf" build "$tool" || continue
  check "$tool" "the wheel carries libxml2, liblzma, libicuuc and libicudata" grafted "$tool" || continue
  check "$tool" "the repaired wheel installs into a fresh venv" install_repaired "$tool"
  check "$tool" "imports in a fresh process, the grafted copies and only they mapped (check_import.py)" \
    import_repaired "$tool" && sed 's/^/       /' "$WORK/check.log"
done

# eu-elflint: what each tool wrote, against its original.
if [[ -n $(compgen -G "$WORK/unzipped-elfpatch/xmlwheel.libs/*") ]]; then
  check elfpatch "eu-elflint --gnu-ld: no new message on elfpatch's grafted libraries and extension" elflint elfpatch
fi
if [[ -n $(compgen -G "$WORK/unzipped-patchelf/xmlwheel.libs/*") ]]; then
  elflint patchelf >"$WORK/elflint-patchelf.log" 2>&1
  echo "note: eu-elflint --gnu-ld on patchelf 0.19.3's repair, against the originals:"
  sed 's/^/       /' "$WORK/elflint-patchelf.log" | head -30
fi

finish
