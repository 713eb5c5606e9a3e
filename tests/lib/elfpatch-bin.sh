# shellcheck shell=bash
# The elfpatch binary a suite runs: $ELFPATCH when set, else the one `cargo build --release -p
# elfpatch` makes in ROOT's target directory (CARGO_TARGET_DIR honoured). Sets BIN to its absolute
# path; calls the suite's `die` when there is none.
find_elfpatch() {
  local root=$1 targetDir
  if [[ -n ${ELFPATCH-} ]]; then
    BIN=$ELFPATCH
  else
    (cd "$root" && cargo build --release -p elfpatch) || die "cargo build --release -p elfpatch failed"
    targetDir=${CARGO_TARGET_DIR:-target}
    [[ $targetDir == /* ]] || targetDir=$root/$targetDir
    BIN=$targetDir/release/elfpatch
  fi
  [[ -x $BIN ]] || die "no elfpatch binary at $BIN"
  BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
}
