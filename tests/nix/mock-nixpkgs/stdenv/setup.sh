# shellcheck shell=bash
# shellcheck disable=SC1090,SC1091,SC2034,SC2154
# Like nixpkgs' setup.sh, it word-splits dependency lists on purpose (strings
# or arrays), assigns through namerefs and sets PATH from scratch:
# shellcheck disable=SC2016,SC2048,SC2068,SC2123,SC2178,SC2206
#
# A small re-implementation of nixpkgs' pkgs/stdenv/generic/setup.sh (plus the
# default multiple-outputs and patchelf hooks) for offline tests. It keeps the
# parts that decide whether a setup hook runs and when:
#   - structured attrs (.attrs.sh, outputs as an associative array, env)
#   - dependency propagation through nix-support/propagated-* files with
#     (host, target) offsets, dropping whatever lands outside [-1, 1]
#   - sourcing of every input's nix-support/setup-hook at every offset it
#     lands at, with hostOffset/targetOffset set, in stdenv's order
#   - env hooks (addEnvHooks), runHook/runOneHook and implicit hooks
#   - the phase list (prePhases ... postPhases), its dont*/do* switches, and
#     fixupPhase: fixupOutput per output, propagated-* files written into the
#     dev output, then postFixup (implicit hook first, then postFixupHooks)
#   - helpers hooks rely on: appendToVar, prependToVar, concatTo, printWords,
#     getAllOutputNames, isELF, substitute*, the nix*Log functions; with
#     stdenvFlavour=old, a stdenv from before 2023 (nixpkgs 23.05 and
#     earlier), the first four and the nix*Log functions do not exist, so
#     hooks must cope without them (the phases use private copies)
# Tools come from the host (PATH=/usr/bin:/bin): there is no cc-wrapper, so
# CC is plain gcc and nothing adds -L/-rpath flags behind the compiler's back.

set -eu
set -o pipefail
shopt -s inherit_errexit nullglob

if [[ -n ${NIX_ATTRS_SH_FILE-} || -f .attrs.sh ]]; then
    __structuredAttrs=1
    for outputName in "${!outputs[@]}"; do
        export "$outputName=${outputs[$outputName]}"
    done
    unset outputName
else
    __structuredAttrs=
    : "${outputs:=out}"
fi

_stdenvOutputNames() {
    if [[ -n $__structuredAttrs ]]; then
        echo "${!outputs[*]}"
    else
        echo "$outputs"
    fi
}

######################################################################
# Logging (nixpkgs' nixLog family: to $NIX_LOG_FD, levels gated by NIX_DEBUG)

if [[ ${stdenvFlavour:-new} != old ]]; then
    _nixLogWithLevel() {
        [[ -n ${NIX_LOG_FD-} ]] || return 0
        (( ${NIX_DEBUG:-0} >= $1 )) || return 0
        local -a names=(ERROR WARN NOTICE INFO TALKATIVE CHATTY DEBUG VOMIT)
        printf '%s: %s: %s\n' "${names[$1]}" "${FUNCNAME[2]}" "$2" >&"$NIX_LOG_FD"
    }
    nixErrorLog() { _nixLogWithLevel 0 "$*"; }
    nixWarnLog() { _nixLogWithLevel 1 "$*"; }
    nixNoticeLog() { _nixLogWithLevel 2 "$*"; }
    nixInfoLog() { _nixLogWithLevel 3 "$*"; }
    nixTalkativeLog() { _nixLogWithLevel 4 "$*"; }
    nixChattyLog() { _nixLogWithLevel 5 "$*"; }
    nixDebugLog() { _nixLogWithLevel 6 "$*"; }
    nixVomitLog() { _nixLogWithLevel 7 "$*"; }
    nixLog() {
        [[ -n ${NIX_LOG_FD-} ]] || return 0
        local caller=${FUNCNAME[1]}
        [[ $caller != _callImplicitHook ]] || caller=${hookName-$caller}
        printf '%s: %s\n' "$caller" "$*" >&"$NIX_LOG_FD"
    }
fi

######################################################################
# Hooks

# runHook NAME ARGS...: the implicit hook NAME (function, executable or
# variable), then every entry of the array NAMEHooks (NAME minus a trailing
# "Hook"), in order.
runHook() {
    local hookName=$1
    shift
    local hooksSlice="${hookName%Hook}Hooks[@]"
    local hook
    for hook in "_callImplicitHook 0 $hookName" ${!hooksSlice+"${!hooksSlice}"}; do
        _eval "$hook" "$@"
    done
    return 0
}

# runOneHook NAME ARGS...: the same candidates, until one succeeds.
runOneHook() {
    local hookName=$1
    shift
    local hooksSlice="${hookName%Hook}Hooks[@]"
    local hook
    for hook in "_callImplicitHook 1 $hookName" ${!hooksSlice+"${!hooksSlice}"}; do
        if _eval "$hook" "$@"; then
            return 0
        fi
    done
    return 1
}

_callImplicitHook() {
    local def=$1 hookName=$2
    if declare -F "$hookName" >/dev/null; then
        "$hookName"
    elif type -p "$hookName" >/dev/null; then
        source "$hookName"
    elif [[ -n ${!hookName:-} ]]; then
        eval "${!hookName}"
    else
        return "$def"
    fi
}

# A function gets the arguments; anything else is evaluated as code.
_eval() {
    if declare -F "$1" >/dev/null 2>&1; then
        "$@"
    else
        eval "$1"
    fi
}

exitHandler() {
    local exitCode=$?
    set +e
    if ((exitCode != 0)); then
        runHook failureHook
    else
        runHook exitHook
    fi
    return "$exitCode"
}
trap exitHandler EXIT

######################################################################
# Helpers

addToSearchPathWithCustomDelimiter() {
    local delimiter=$1 varName=$2 dir=$3
    if [[ -d $dir && "${!varName:+$delimiter${!varName}$delimiter}" != *"$delimiter$dir$delimiter"* ]]; then
        export "$varName=${!varName:+${!varName}$delimiter}$dir"
    fi
}
addToSearchPath() { addToSearchPathWithCustomDelimiter : "$@"; }

# Append / prepend to a variable that is an array with structured attrs and a
# space-separated string without (or whatever it already is).
_varIsArray() {
    local type
    if type=$(declare -p "$1" 2>/dev/null); then
        case ${type#* } in
            -A*) echo "$2(): ERROR: $1 is an associative array" >&2; return 2 ;;
            -a*) return 0 ;;
            *) return 1 ;;
        esac
    fi
    [[ -n $__structuredAttrs ]]
}
if [[ ${stdenvFlavour:-new} != old ]]; then
    appendToVar() {
        local -n nameref=$1
        local rc=0
        _varIsArray "$1" appendToVar || rc=$?
        ((rc != 2)) || return 1
        shift
        if ((rc == 0)); then
            nameref=(${nameref+"${nameref[@]}"} "$@")
        else
            nameref="${nameref-} $*"
        fi
    }
    prependToVar() {
        local -n nameref=$1
        local rc=0
        _varIsArray "$1" prependToVar || rc=$?
        ((rc != 2)) || return 1
        shift
        if ((rc == 0)); then
            nameref=("$@" ${nameref+"${nameref[@]}"})
        else
            nameref="$* ${nameref-}"
        fi
    }
fi

# concatTo TARGET NAME[=DEFAULT]...: arrays are appended as they are,
# strings split on whitespace (without globbing).
_stdenvConcatTo() {
    local -
    set -o noglob
    local -n targetref=$1
    shift
    local arg name default type
    for arg in "$@"; do
        IFS="=" read -r name default <<<"$arg"
        local -n nameref=$name
        if [[ -z ${nameref[*]-} && -n $default ]]; then
            targetref+=("$default")
        elif type=$(declare -p "$name" 2>/dev/null); then
            case ${type#* } in
                -A*) echo "concatTo(): ERROR: $name is an associative array" >&2; return 1 ;;
                -a*) targetref+=("${nameref[@]}") ;;
                *) targetref+=(${nameref-}) ;;
            esac
        fi
        unset -n nameref
    done
}

if [[ ${stdenvFlavour:-new} != old ]]; then
    getAllOutputNames() { _stdenvOutputNames; }
    concatTo() { _stdenvConcatTo "$@"; }
fi

printLines() { (($# > 0)) || return 0; printf '%s\n' "$@"; }
printWords() { (($# > 0)) || return 0; printf '%s ' "$@"; }

isELF() {
    local fd magic
    exec {fd}<"$1"
    read -r -n 4 -u "$fd" magic || true
    exec {fd}<&-
    [[ $magic == $'\177ELF' ]]
}

######################################################################
# Initial environment (the mock's stand-in for initialPath and cc-wrapper)

PATH=
for i in ${initialPath-/usr/bin /bin}; do addToSearchPath PATH "$i"; done
unset i
export SHELL=/bin/bash CONFIG_SHELL=/bin/bash
export CC=gcc CXX=g++
if [[ -n $__structuredAttrs ]] && declare -p env >/dev/null 2>&1; then
    for envVar in "${!env[@]}"; do
        declare -x "$envVar=${env[$envVar]}"
    done
    unset envVar
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}

runHook preHook
runHook addInputsHook

######################################################################
# Dependencies: find all inputs, then activate them (source setup hooks)

declare -a pkgsBuildBuild=() pkgsBuildHost=() pkgsBuildTarget=()
declare -a pkgsHostHost=() pkgsHostTarget=() pkgsTargetTarget=()
declare -a envBuildBuildHooks=() envBuildHostHooks=() envBuildTargetHooks=()
declare -a envHostHostHooks=() envHostTargetHooks=() envTargetTargetHooks=()
declare -a preFixupHooks=() fixupOutputHooks=() postFixupHooks=() preConfigureHooks=() postUnpackHooks=() unpackCmdHooks=()

# The accumulator array for a (host, target) offset pair.
_pkgAccum() {
    case "$1,$2" in
        -1,-1) echo pkgsBuildBuild ;;
        -1,0) echo pkgsBuildHost ;;
        -1,1) echo pkgsBuildTarget ;;
        0,0) echo pkgsHostHost ;;
        0,1) echo pkgsHostTarget ;;
        1,1) echo pkgsTargetTarget ;;
        *) echo "invalid offsets $1,$2" >&2; return 1 ;;
    esac
}
# The nix-support file listing dependencies propagated at a relative pair.
_propagatedFile() {
    case "$1,$2" in
        -1,-1) echo propagated-build-build-deps ;;
        -1,0) echo propagated-native-build-inputs ;;
        -1,1) echo propagated-build-target-deps ;;
        0,0) echo propagated-host-host-deps ;;
        0,1) echo propagated-build-inputs ;;
        1,1) echo propagated-target-target-deps ;;
    esac
}

# findInputs PKG HOST TARGET: record PKG at (HOST, TARGET), then follow its
# propagated-* files. A relative offset maps onto the current pair as
# rel <= 0 ? rel + host : rel - 1 + target; results outside [-1, 1] are dropped.
findInputs() {
    local -r pkg=$1 hostOffset=$2 targetOffset=$3
    ((hostOffset <= targetOffset)) || exit 1
    local accum
    accum=$(_pkgAccum "$hostOffset" "$targetOffset")
    local -n accumRef=$accum
    case " ${accumRef[*]-} " in
        *" $pkg "*) return 0 ;;
    esac
    accumRef+=("$pkg")
    unset -n accumRef
    if [[ ! -e $pkg ]]; then
        echo "build input $pkg does not exist" >&2
        exit 1
    fi
    local relHost relTarget hostNext targetNext file deps dep
    for relHost in -1 0 1; do
        if ((relHost <= 0)); then hostNext=$((relHost + hostOffset)); else hostNext=$((relHost - 1 + targetOffset)); fi
        ((-1 <= hostNext && hostNext <= 1)) || continue
        for relTarget in -1 0 1; do
            ((relHost <= relTarget)) || continue
            if ((relTarget <= 0)); then targetNext=$((relTarget + hostOffset)); else targetNext=$((relTarget - 1 + targetOffset)); fi
            ((-1 <= targetNext && targetNext <= 1)) || continue
            file=$(_propagatedFile "$relHost" "$relTarget")
            [[ -f $pkg/nix-support/$file ]] || continue
            deps=
            read -r -d '' deps <"$pkg/nix-support/$file" || true
            for dep in $deps; do
                findInputs "$dep" "$hostNext" "$targetNext"
            done
        done
    done
}

: "${depsBuildBuild=}" "${depsBuildBuildPropagated=}"
: "${nativeBuildInputs=}" "${propagatedNativeBuildInputs=}"
: "${depsBuildTarget=}" "${depsBuildTargetPropagated=}"
: "${depsHostHost=}" "${depsHostHostPropagated=}"
: "${buildInputs=}" "${propagatedBuildInputs=}"
: "${depsTargetTarget=}" "${depsTargetTargetPropagated=}"

for pkg in ${depsBuildBuild[@]} ${depsBuildBuildPropagated[@]}; do findInputs "$pkg" -1 -1; done
for pkg in ${nativeBuildInputs[@]} ${propagatedNativeBuildInputs[@]}; do findInputs "$pkg" -1 0; done
for pkg in ${depsBuildTarget[@]} ${depsBuildTargetPropagated[@]}; do findInputs "$pkg" -1 1; done
for pkg in ${depsHostHost[@]} ${depsHostHostPropagated[@]}; do findInputs "$pkg" 0 0; done
for pkg in ${buildInputs[@]} ${propagatedBuildInputs[@]}; do findInputs "$pkg" 0 1; done
for pkg in ${depsTargetTarget[@]} ${depsTargetTargetPropagated[@]}; do findInputs "$pkg" 1 1; done
unset pkg

# addEnvHooks HOSTOFFSET HOOK...: HOOK runs for every dependency whose host
# platform is the given one (with strictDeps; for all of them without).
addEnvHooks() {
    local depHostOffset=$1
    shift
    case $depHostOffset in
        -1) envBuildBuildHooks+=("$@"); envBuildHostHooks+=("$@"); envBuildTargetHooks+=("$@") ;;
        0) envHostHostHooks+=("$@"); envHostTargetHooks+=("$@") ;;
        1) envTargetTargetHooks+=("$@") ;;
    esac
}

_PATH=
activatePackage() {
    local pkg=$1
    local -r hostOffset=$2 targetOffset=$3
    if [[ -f $pkg ]]; then
        source "$pkg"
    fi
    if [[ -z ${strictDeps-} || $hostOffset -le -1 ]]; then
        addToSearchPath _PATH "$pkg/bin"
    fi
    if [[ -f $pkg/nix-support/setup-hook ]]; then
        source "$pkg/nix-support/setup-hook"
    fi
}

_activatePkgs() {
    local hostOffset targetOffset pkg accum
    for hostOffset in -1 0 1; do
        for targetOffset in -1 0 1; do
            ((hostOffset <= targetOffset)) || continue
            accum=$(_pkgAccum "$hostOffset" "$targetOffset")
            local -n accumRef=$accum
            for pkg in ${accumRef[@]+"${accumRef[@]}"}; do
                activatePackage "$pkg" "$hostOffset" "$targetOffset"
            done
            unset -n accumRef
        done
    done
}
_activatePkgs

_addToEnv() {
    local depHostOffset depTargetOffset pkg accum hookName visited
    local -a names=(Build Host Target)
    for depHostOffset in -1 0 1; do
        for depTargetOffset in -1 0 1; do
            ((depHostOffset <= depTargetOffset)) || continue
            hookName="env${names[depHostOffset + 1]}${names[depTargetOffset + 1]}Hook"
            if [[ -z ${strictDeps-} ]]; then
                visited=
                for pkg in ${pkgsBuildBuild[@]+"${pkgsBuildBuild[@]}"} ${pkgsBuildHost[@]+"${pkgsBuildHost[@]}"} \
                    ${pkgsBuildTarget[@]+"${pkgsBuildTarget[@]}"} ${pkgsHostHost[@]+"${pkgsHostHost[@]}"} \
                    ${pkgsHostTarget[@]+"${pkgsHostTarget[@]}"} ${pkgsTargetTarget[@]+"${pkgsTargetTarget[@]}"}; do
                    [[ $visited != *" $pkg "* ]] || continue
                    runHook "$hookName" "$pkg"
                    visited+=" $pkg "
                done
            else
                accum=$(_pkgAccum "$depHostOffset" "$depTargetOffset")
                local -n accumRef=$accum
                for pkg in ${accumRef[@]+"${accumRef[@]}"}; do
                    runHook "$hookName" "$pkg"
                done
                unset -n accumRef
            fi
        done
    done
}
_addToEnv

if [[ -z ${prefix:-} ]]; then prefix=$out; fi
PATH="${_PATH}${_PATH:+:}$PATH"
unset _PATH
export TZ=UTC NIX_BUILD_CORES=${NIX_BUILD_CORES:-1}

######################################################################
# Default hooks stdenv always has. In nixpkgs they come from
# defaultNativeBuildInputs, which are activated after the derivation's own
# inputs, so they register after the inputs' hooks do.

# multiple-outputs.sh: which output gets what.
_assignFirst() {
    local varName=$1 candidate
    shift
    for candidate in "$@"; do
        if [[ -n ${!candidate-} ]]; then
            printf -v "$varName" '%s' "$candidate"
            return 0
        fi
    done
    echo "_assignFirst: no output for $varName" >&2
    return 1
}
_overrideFirst() { [[ -n ${!1-} ]] || _assignFirst "$@"; }
_overrideFirst outputDev dev out
_overrideFirst outputBin bin out
_overrideFirst outputInclude "$outputDev"
_overrideFirst outputLib lib out

# The dev output propagates the outputs named in propagatedBuildOutputs
# (default: bin, include and lib, minus the dev output itself).
_multioutPropagateDev() {
    [[ "$(_stdenvOutputNames)" != out ]] || return 0
    local propagater=$outputDev output
    local -a wanted=()
    if declare -p propagatedBuildOutputs >/dev/null 2>&1; then
        _stdenvConcatTo wanted propagatedBuildOutputs
    else
        for output in $outputBin $outputInclude $outputLib; do
            [[ $output == "$propagater" || " ${wanted[*]-} " == *" $output "* ]] || wanted+=("$output")
        done
    fi
    ((${#wanted[@]})) || return 0
    mkdir -p "${!propagater}/nix-support"
    for output in "${wanted[@]}"; do
        echo -n " ${!output}" >>"${!propagater}/nix-support/propagated-build-inputs"
    done
}
postFixupHooks+=(_multioutPropagateDev)

# patchelf's setup hook: drop RUNPATH entries that provide no needed library.
patchELF() {
    local dir=$1 file
    [[ -e $dir ]] || return 0
    while IFS= read -r -d '' file; do
        isELF "$file" || continue
        patchelf --shrink-rpath "$file" || true
    done < <(find "$dir" -type f -print0)
}
fixupOutputHooks+=('if [[ -z "${dontPatchELF-}" ]]; then patchELF "$prefix"; fi')

######################################################################
# Substitution

substituteStream() {
    local var=$1 description=$2 pattern replacement varName
    shift 2
    while (($#)); do
        case $1 in
            --replace | --replace-fail | --replace-warn | --replace-quiet)
                pattern=$2 replacement=$3
                shift 3
                eval "$var"'=${'"$var"'//"$pattern"/"$replacement"}'
                ;;
            --subst-var)
                varName=$2
                shift 2
                if [[ -z ${!varName+x} ]]; then
                    echo "substituteStream(): ERROR: variable \$$varName is unset" >&2
                    return 1
                fi
                pattern="@$varName@" replacement=${!varName}
                eval "$var"'=${'"$var"'//"$pattern"/"$replacement"}'
                ;;
            --subst-var-by)
                pattern="@$2@" replacement=$3
                shift 3
                eval "$var"'=${'"$var"'//"$pattern"/"$replacement"}'
                ;;
            *)
                echo "substituteStream(): ERROR: invalid argument $1 ($description)" >&2
                return 1
                ;;
        esac
    done
    printf '%s' "${!var}"
}

consumeEntire() {
    if IFS='' read -r -d '' "$1"; then
        echo "consumeEntire(): ERROR: input has null bytes" >&2
        return 1
    fi
}

substitute() {
    local input=$1 output=$2 content
    shift 2
    [[ -f $input ]] || { echo "substitute(): ERROR: $input does not exist" >&2; return 1; }
    consumeEntire content <"$input"
    if [[ -e $output ]]; then chmod +w "$output"; fi
    substituteStream content "file '$input'" "$@" >"$output"
}

substituteInPlace() {
    local -a files=()
    while (($#)) && [[ $1 != --* ]]; do files+=("$1"); shift; done
    local file
    for file in "${files[@]}"; do substitute "$file" "$file" "$@"; done
}

# Every exported variable whose name starts with a lowercase letter.
_allFlags() {
    export system pname name version 2>/dev/null || true
    local varName
    for varName in $(compgen -e); do
        [[ $varName =~ ^[a-z][a-zA-Z0-9_]*$ ]] || continue
        args+=(--subst-var "$varName")
    done
}
substituteAll() {
    local input=$1 output=$2
    local -a args=()
    _allFlags
    substitute "$input" "$output" "${args[@]}"
}
substituteAllInPlace() { substituteAll "$1" "$1"; }

######################################################################
# Phases

stripHash() {
    local name
    name=$(basename -- "$1")
    if [[ $name =~ ^[a-z0-9]{32}- ]]; then echo "${name:33}"; else echo "$name"; fi
}

unpackCmdHooks+=(_defaultUnpack)
_defaultUnpack() {
    local fn=$1
    if [[ -d $fn ]]; then
        cp -pr --reflink=auto -- "$fn" "$(stripHash "$fn")"
    else
        case $fn in
            *.tar | *.tar.* | *.tgz) tar xf "$fn" --warning=no-timestamp ;;
            *) return 1 ;;
        esac
    fi
}

unpackPhase() {
    runHook preUnpack
    local -a srcsArray=()
    if [[ -n ${srcs-} ]]; then _stdenvConcatTo srcsArray srcs; else srcsArray=("$src"); fi
    local dirsBefore="" i
    for i in *; do [[ ! -d $i ]] || dirsBefore+=" $i "; done
    for i in "${srcsArray[@]}"; do
        echo "unpacking source archive $i"
        runOneHook unpackCmd "$i" || { echo "do not know how to unpack $i" >&2; exit 1; }
    done
    if [[ -z ${sourceRoot-} ]]; then
        for i in *; do
            [[ -d $i && $dirsBefore != *" $i "* ]] || continue
            [[ -z ${sourceRoot-} ]] || { echo "unpacker produced multiple directories" >&2; exit 1; }
            sourceRoot=$i
        done
    fi
    [[ -n ${sourceRoot-} ]] || { echo "unpacker appears to have produced no directories" >&2; exit 1; }
    echo "source root is $sourceRoot"
    [[ ${dontMakeSourcesWritable:-0} == 1 ]] || chmod -R u+w -- "$sourceRoot"
    runHook postUnpack
}

patchPhase() {
    runHook prePatch
    local -a patchesArray=()
    _stdenvConcatTo patchesArray patches
    local p
    for p in ${patchesArray[@]+"${patchesArray[@]}"}; do
        echo "applying patch $p"
        patch -p1 <"$p"
    done
    runHook postPatch
}

_noMakefile() { [[ -z ${makefile-} && ! (-e Makefile || -e makefile || -e GNUmakefile) ]]; }

configurePhase() {
    runHook preConfigure
    echo "no configure script, doing nothing"
    runHook postConfigure
}

buildPhase() {
    runHook preBuild
    if _noMakefile; then echo "no Makefile or custom buildPhase, doing nothing"; else make; fi
    runHook postBuild
}

checkPhase() {
    runHook preCheck
    if _noMakefile; then echo "no Makefile or custom checkPhase, doing nothing"; else make check; fi
    runHook postCheck
}

installPhase() {
    runHook preInstall
    if _noMakefile; then echo "no Makefile or custom installPhase, doing nothing"; else make install; fi
    runHook postInstall
}

# Writes the propagated* inputs into the dev output's nix-support files.
recordPropagatedDependencies() {
    local -a vars=(depsBuildBuildPropagated propagatedNativeBuildInputs depsBuildTargetPropagated
        depsHostHostPropagated propagatedBuildInputs depsTargetTargetPropagated)
    local -a files=(propagated-build-build-deps propagated-native-build-inputs propagated-build-target-deps
        propagated-host-host-deps propagated-build-inputs propagated-target-target-deps)
    local i
    for i in "${!vars[@]}"; do
        local -a values=()
        _stdenvConcatTo values "${vars[i]}"
        ((${#values[@]})) || continue
        mkdir -p "${!outputDev}/nix-support"
        printWords "${values[@]}" >"${!outputDev}/nix-support/${files[i]}"
    done
}

fixupPhase() {
    local output
    for output in $(_stdenvOutputNames); do
        if [[ -e ${!output} ]]; then chmod -R u+w -- "${!output}"; fi
    done

    runHook preFixup

    for output in $(_stdenvOutputNames); do
        prefix=${!output} runHook fixupOutput
    done

    recordPropagatedDependencies

    if [[ -n ${setupHook:-} ]]; then
        mkdir -p "${!outputDev}/nix-support"
        substituteAll "$setupHook" "${!outputDev}/nix-support/setup-hook"
    fi

    runHook postFixup
}

installCheckPhase() {
    runHook preInstallCheck
    echo "no Makefile or custom installCheckPhase, doing nothing"
    runHook postInstallCheck
}

distPhase() {
    runHook preDist
    runHook postDist
}

genericBuild() {
    if [[ -f ${buildCommandPath:-} ]]; then
        source "$buildCommandPath"
        return
    fi
    if [[ -n ${buildCommand:-} ]]; then
        eval "$buildCommand"
        return
    fi

    if [[ -z ${phases[*]:-} ]]; then
        phases="${prePhases[*]:-} unpackPhase patchPhase ${preConfigurePhases[*]:-} \
            configurePhase ${preBuildPhases[*]:-} buildPhase checkPhase \
            ${preInstallPhases[*]:-} installPhase ${preFixupPhases[*]:-} fixupPhase installCheckPhase \
            ${preDistPhases[*]:-} distPhase ${postPhases[*]:-}"
    fi

    for curPhase in ${phases[*]}; do
        case $curPhase in
            unpackPhase) [[ -z ${dontUnpack:-} ]] || continue ;;
            patchPhase) [[ -z ${dontPatch:-} ]] || continue ;;
            configurePhase) [[ -z ${dontConfigure:-} ]] || continue ;;
            buildPhase) [[ -z ${dontBuild:-} ]] || continue ;;
            checkPhase) [[ -n ${doCheck:-} ]] || continue ;;
            installPhase) [[ -z ${dontInstall:-} ]] || continue ;;
            fixupPhase) [[ -z ${dontFixup:-} ]] || continue ;;
            installCheckPhase) [[ -n ${doInstallCheck:-} ]] || continue ;;
            distPhase) [[ -n ${doDist:-} ]] || continue ;;
        esac
        echo "Running phase: $curPhase"
        eval "${!curPhase:-$curPhase}"
        if [[ $curPhase == unpackPhase ]]; then
            cd "${sourceRoot:-.}"
        fi
    done
}

runHook postHook
