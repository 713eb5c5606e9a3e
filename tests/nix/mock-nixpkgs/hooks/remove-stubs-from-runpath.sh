# shellcheck shell=bash
# shellcheck disable=SC2154
# Mock of nixpkgs' cudaPackages.removeStubsFromRunpathHook
# (pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook/): sourced
# once, registers from prePhases, then in postFixup replaces the first
# RUNPATH entry matching *-cuda*/stubs or *-cuda*-stubs/lib* (nixpkgs' patterns) with @driverLinkLib@ (dropping
# further ones) in every ELF file of every output.
if [[ -n ${removeStubsFromRunpathHookOnce-} ]]; then
    return 0
fi
declare -g removeStubsFromRunpathHookOnce=1

removeStubsFromRunpath() {
    local file=$1 entry seen=
    local -a entries=() kept=()
    IFS=: read -r -a entries <<<"$(patchelf --print-rpath "$file")"
    for entry in ${entries[@]+"${entries[@]}"}; do
        case $entry in
            *-cuda*/stubs | *-cuda*-stubs/lib*)
                [[ -n $seen ]] || kept+=("@driverLinkLib@")
                seen=1
                ;;
            *)
                kept+=("$entry")
                [[ $entry != "@driverLinkLib@" ]] || seen=1
                ;;
        esac
    done
    patchelf --set-rpath "$(IFS=:; echo "${kept[*]-}")" "$file"
}

removeStubsFromRunpathAll() {
    local output file
    for output in $(getAllOutputNames); do
        [[ -e ${!output} ]] || continue
        while IFS= read -r -d '' file; do
            isELF "$file" || continue
            removeStubsFromRunpath "$file"
        done < <(find "${!output}" -type f -print0)
    done
}

removeStubsFromRunpathHookRegistration() {
    postFixupHooks+=(removeStubsFromRunpathAll)
}
appendToVar prePhases removeStubsFromRunpathHookRegistration
