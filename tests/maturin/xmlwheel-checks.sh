# shellcheck shell=bash
# The checks on a repaired xmlwheel that tests/maturin/run.sh (maturin spawning elfpatch as
# `patchelf`) and integrations/maturin/run.sh (maturin editing in-process) share. Needs WORK (the
# suite's work directory), ROOT (the checkout) and the wheels: $WORK/dist-NAME/xmlwheel-*.whl for
# each repair NAME, and the unrepaired one unzipped into $WORK/unzipped-original.
XMLWHEEL_HERE=$ROOT/tests/maturin
libdir=$(pkg-config --variable=libdir libxml-2.0)

# grafted NAME: the wheel carries libxml2, liblzma and ICU in xmlwheel.libs/.
grafted() {
  local dir=$WORK/unzipped-$1 lib
  unzip -q -o "$WORK"/dist-"$1"/xmlwheel-*.whl -d "$dir" || return 1
  ls "$dir"/xmlwheel.libs
  for lib in libxml2 liblzma libicuuc libicudata; do
    compgen -G "$dir/xmlwheel.libs/$lib*" >/dev/null || { echo "no $lib in xmlwheel.libs"; return 1; }
  done
}
install_repaired() {
  python3 -m venv "$WORK/use-$1" &&
    "$WORK/use-$1/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$WORK"/dist-"$1"/xmlwheel-*.whl
}
import_repaired() {
  (cd / && env -u LD_LIBRARY_PATH -u PYTHONPATH "$WORK/use-$1/bin/python" -I "$XMLWHEEL_HERE/check_import.py")
}
# elflint NAME: no eu-elflint message on the repaired extension and grafted libraries that its
# original (the unrepaired extension, the system's library) did not draw.
elflint() {
  local dir=$WORK/unzipped-$1 f base pairs=()
  pairs+=("$WORK/unzipped-original/xmlwheel/xmlwheel.abi3.so" "$dir/xmlwheel/xmlwheel.abi3.so")
  for f in "$dir"/xmlwheel.libs/*; do
    # libxml2-437e68a2.so.2 is a copy of the system's libxml2.so.2.
    base=$(basename "$f")
    pairs+=("$(readlink -f "$libdir/${base%%-*}.so.${base##*.so.}")" "$f")
  done
  python3 "$ROOT/tests/lib/new_elflint.py" "${pairs[@]}"
}
