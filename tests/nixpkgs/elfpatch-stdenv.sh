# shellcheck shell=bash
# Sourced by tests/nixpkgs/run.sh (which defines pass, fail, here and work and exports NIXPKGS):
# the part `elfpatch-stdenv`, ./elfpatch_stdenv.py (README.md), its PASS and FAIL lines counted
# with the suite's. STUBSTRIP_ELFPATCH_STDENV_SOME=1 builds a representative part of the consumer
# matrix instead of all of it.
# shellcheck disable=SC2154 # here and work come from run.sh

elfpatchStdenvTests() {
    local line failures=0 tail=()
    local -a opts=(--work "$work/elfpatch-stdenv")
    [[ -z ${STUBSTRIP_ELFPATCH_STDENV_SOME-} ]] || opts+=(--some)
    while IFS= read -r line; do
        case $line in
            "PASS "*) pass "${line#PASS }" ;;
            "FAIL "*)
                fail "${line#FAIL }"
                failures=$((failures + 1))
                ;;
            *" passed, "*" failed") ;;
            "elfpatch-stdenv exit 0") ;;
            "elfpatch-stdenv exit "*)
                # A failure the script did not report as a FAIL line (a crash, a refused build).
                ((failures)) || fail "elfpatch-stdenv" "$line: ${tail[*]}"
                ;;
            *)
                echo "$line"
                tail=("${tail[@]: -4}" "$line")
                ;;
        esac
    done < <(python3 "$here/elfpatch_stdenv.py" "${opts[@]}" 2>&1; echo "elfpatch-stdenv exit $?")
}
