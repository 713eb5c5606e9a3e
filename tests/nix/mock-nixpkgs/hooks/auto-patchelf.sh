# shellcheck shell=bash
# shellcheck disable=SC2154
# Mock of autoPatchelfHook (pkgs/build-support/setup-hooks/auto-patchelf.sh
# and auto-patchelf.py), reduced to what decides RUNPATH:
#   - libraries are looked up in the lib/ directories of host inputs
#     (gathered by an env hook, not recursively) and in the directories named
#     with addAutoPatchelfSearchPath;
#   - RUNPATH is rebuilt from scratch: runtimeDependencies' lib/, then the
#     directory of each needed library found, then appendRunpaths;
#   - libraries the host's loader finds by itself (glibc and the like, the
#     mock's stand-in for libc in nixpkgs) need no entry; any other missing
#     library fails the build unless autoPatchelfIgnoreMissingDeps names it;
#   - it registers in postFixupHooks when it is sourced, like the real one.
# It does not set the interpreter.

declare -ga autoPatchelfLibs=() extraAutoPatchelfLibs=()

gatherLibraries() {
    autoPatchelfLibs+=("$1/lib")
}
addEnvHooks "$targetOffset" gatherLibraries

addAutoPatchelfSearchPath() {
    local -a findOpts=()
    while (($#)); do
        case $1 in
            --) shift; break ;;
            --no-recurse) shift; findOpts+=(-maxdepth 1) ;;
            --*) echo "addAutoPatchelfSearchPath: invalid argument $1" >&2; return 1 ;;
            *) break ;;
        esac
    done
    local dir
    while IFS= read -r -d '' dir; do
        extraAutoPatchelfLibs+=("$dir")
    done < <(find "$@" "${findOpts[@]}" ! -type d \( -name '*.so' -o -name '*.so.*' \) -printf '%h\0' | sort -zu)
}

_autoPatchelfHostResolves() {
    local dir
    for dir in /lib /lib64 /usr/lib /usr/lib64 /lib/*-linux-gnu /usr/lib/*-linux-gnu; do
        [[ -e $dir/$1 ]] && return 0
    done
    return 1
}

_autoPatchelfIgnored() {
    local needed=$1 pattern
    shift
    for pattern in "$@"; do
        # shellcheck disable=SC2053 # a glob, as autoPatchelfIgnoreMissingDeps allows
        [[ $needed == $pattern ]] && return 0
    done
    return 1
}

autoPatchelfFile() {
    local file=$1 needed dir found runpath=
    local -a entries=() ignore=() append=() runtime=()
    concatTo ignore autoPatchelfIgnoreMissingDeps
    concatTo append appendRunpaths
    concatTo runtime runtimeDependencies
    for dir in ${runtime[@]+"${runtime[@]}"}; do entries+=("$dir/lib"); done
    for needed in $(patchelf --print-needed "$file"); do
        found=
        for dir in ${autoPatchelfLibs[@]+"${autoPatchelfLibs[@]}"} ${extraAutoPatchelfLibs[@]+"${extraAutoPatchelfLibs[@]}"}; do
            if [[ -e $dir/$needed ]]; then found=$dir; break; fi
        done
        if [[ -n $found ]]; then
            [[ " ${entries[*]-} " == *" $found "* ]] || entries+=("$found")
            echo "  $needed -> found: $found/$needed" >&2
        elif _autoPatchelfHostResolves "$needed"; then
            :
        elif _autoPatchelfIgnored "$needed" ${ignore[@]+"${ignore[@]}"}; then
            echo "  $needed -> not found, ignored" >&2
        else
            echo "auto-patchelf: could not satisfy dependency $needed wanted by $file" >&2
            return 1
        fi
    done
    entries+=(${append[@]+"${append[@]}"})
    runpath=$(IFS=:; echo "${entries[*]-}")
    echo "setting RUNPATH of $file to: $runpath" >&2
    if [[ -n $runpath ]]; then
        patchelf --set-rpath "$runpath" "$file"
    else
        patchelf --remove-rpath "$file"
    fi
}

autoPatchelf() {
    [[ ${1-} != -- ]] || shift
    local path file
    for path in "$@"; do
        while IFS= read -r -d '' file; do
            isELF "$file" || continue
            autoPatchelfFile "$file" || return 1
        done < <(find "$path" -type f -print0)
    done
}

autoPatchelfPostFixup() {
    [[ -z ${dontAutoPatchelf-} ]] || return 0
    local output
    local -a paths=()
    for output in $(getAllOutputNames); do
        [[ ! -e ${!output} ]] || paths+=("${!output}")
    done
    autoPatchelf -- "${paths[@]}"
}
postFixupHooks+=(autoPatchelfPostFixup)
