# shellcheck shell=bash
# Appended to nixpkgs' patchelf setup hook in the elfpatch-stdenv part (../elfpatch-stdenv.nix):
# after every other postFixupHooks entry, says which program stdenv's `patchelf` ran, what its
# --version answers, and what ./patchelf-calls.sh logged: the calls by options, the failed ones
# (the shrink in fixupPhase ignores failures: `patchelf --shrink-rpath "$i" || true`), and each
# --shrink-rpath's RUNPATH before and after. Lines start "stubstrip-nixpkgs patchelf".
stubstripPatchelfCallsReport() {
    local log=$NIX_BUILD_TOP/.stubstrip-patchelf-calls
    echo "stubstrip-nixpkgs patchelf: $(command -v patchelf) runs @tool@; --version: $(STUBSTRIP_PATCHELF_NOLOG=1 patchelf --version 2>&1 | head -n 1)"
    if [[ ! -f $log ]]; then
        echo "stubstrip-nixpkgs patchelf calls: 0"
        return 0
    fi
    awk -F'\t' '{ n++; if ($1 != 0) f++; c[$2]++ }
        END { printf "stubstrip-nixpkgs patchelf calls: %d, failed %d:", n, f + 0
              for (k in c) printf " [%s]=%d", k, c[k]; print "" }' "$log"
    awk -F'\t' '$1 != 0 { print "stubstrip-nixpkgs patchelf failed: " $0 }' "$log"
    awk -F'\t' '$2 ~ /--shrink-rpath/ { print "stubstrip-nixpkgs patchelf shrink: " $3 ": [" $4 "] -> [" $5 "]" }' "$log"
}
stubstripPatchelfCallsRegister() {
    [[ -z ${stubstripPatchelfCallsRegistered-} ]] || return 0
    stubstripPatchelfCallsRegistered=1
    postFixupHooks+=(stubstripPatchelfCallsReport)
}
fixupOutputHooks+=(stubstripPatchelfCallsRegister)
