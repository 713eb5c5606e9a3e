# shellcheck shell=bash
# A small emulation of nixpkgs' pkgs/stdenv/generic/setup.sh: the parts that
# a fixup-phase setup hook depends on. See ../README.md for what is emulated
# and what is left out. Sourced by builder.sh after the derivation's
# attributes, with `set -eu -o pipefail` already on, as in the real one.
#
# Knobs (set by the derivation file):
#   stdenvFlavour      new: appendToVar, concatTo, getAllOutputNames and the
#                      nixLog family exist (nixpkgs 24.11 and later);
#                      old: none of them (a stdenv from before 2023)
#   __structuredAttrs  1: lists are bash arrays and outputs an associative
#                      array (as in .attrs.sh); empty: strings
# shellcheck disable=SC2154 # attributes come from the derivation file

shopt -s nullglob
: "${stdenvFlavour:=new}"
: "${__structuredAttrs=}"

if [[ -n $__structuredAttrs ]]; then
  for _outputName in "${!outputs[@]}"; do
    export "$_outputName=${outputs[$_outputName]}"
  done
  unset _outputName
else
  : "${outputs:=out}"
fi

######################################################################
# Helpers that only newer stdenvs have.

if [[ $stdenvFlavour == new ]]; then
  getAllOutputNames() {
    if [[ -n $__structuredAttrs ]]; then
      echo "${!outputs[*]}"
    else
      echo "$outputs"
    fi
  }

  # Append $2... to the variable $1: an array if it is one (or, with
  # structured attrs, if it does not exist yet), else a string.
  appendToVar() {
    local -n _ref=$1
    local _useArray=false _decl
    [[ -n $__structuredAttrs ]] && _useArray=true
    if _decl=$(declare -p "$1" 2>/dev/null); then
      case ${_decl#declare } in
        -A*) echo "appendToVar(): ERROR: $1 is an associative array" >&2; return 1 ;;
        -a*) _useArray=true ;;
        *) _useArray=false ;;
      esac
    fi
    shift
    if $_useArray; then
      _ref=(${_ref+"${_ref[@]}"} "$@")
    else
      # shellcheck disable=SC2178
      _ref="${_ref-} $*"
    fi
  }

  # Append to the array $1 the values of the variables $2...: arrays are
  # copied, strings are split on whitespace (without globbing).
  concatTo() {
    local -
    set -o noglob
    local -n _target=$1
    shift
    local _name _decl
    for _name in "$@"; do
      _decl=$(declare -p "$_name" 2>/dev/null) || continue
      local -n _src=$_name
      case ${_decl#declare } in
        -A*) echo "concatTo(): ERROR: $_name is an associative array" >&2; return 1 ;;
        -a*) _target+=("${_src[@]}") ;;
        *)
          # shellcheck disable=SC2206
          _target+=(${_src-})
          ;;
      esac
      unset -n _src
    done
  }

  # The nixLog family writes to $NIX_LOG_FD only, prefixed by the caller.
  nixLog() {
    [[ -z ${NIX_LOG_FD-} ]] && return 0
    printf '%s: %s\n' "${FUNCNAME[1]}" "$*" >&"$NIX_LOG_FD"
  }
  nixErrorLog() {
    [[ -z ${NIX_LOG_FD-} ]] && return 0
    printf 'ERROR: %s: %s\n' "${FUNCNAME[1]}" "$*" >&"$NIX_LOG_FD"
  }
fi

######################################################################
# Hooks.

# runHook NAME ARGS...: the derivation's own NAME (a function, else the text
# of the variable NAME), then every entry of the array NAMEHooks in order
# (NAME with a trailing "Hook" replaced: fooHook -> fooHooks).
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

_callImplicitHook() {
  local def=$1 hookName=$2
  if declare -F "$hookName" >/dev/null; then
    "$hookName"
  elif [[ -n ${!hookName:-} ]]; then
    eval "${!hookName}"
  else
    return "$def"
  fi
}

# A function is called with the arguments, any other text is eval'ed.
_eval() {
  if declare -F "$1" >/dev/null 2>&1; then
    "$@"
  else
    eval "$1"
  fi
}

# shellcheck disable=SC2034 # read by runHook through an indirection
declare -a preFixupHooks fixupOutputHooks postFixupHooks

######################################################################
# Inputs, as stdenv's findInputs then _activatePkgs: first every input is
# found, following each one's nix-support/propagated-build-inputs (same
# offset) and propagated-native-build-inputs (one offset down: from
# buildInputs into pkgsBuildHost; from nativeBuildInputs it would leave the
# range, so it is dropped), into pkgsBuildHost (nativeBuildInputs, at
# (-1, 0)) and pkgsHostTarget (buildInputs, at (0, 1)); then each found
# input's nix-support/setup-hook is sourced, once per list it is in (the
# real stdenv sources it once per offset it lands at), with
# hostOffset/targetOffset visible, from inside a function (hence hooks need
# `declare -g`). Then the env hooks run for every input.

# shellcheck disable=SC2034 # stdenv's input lists, read by hooks
declare -a pkgsBuildBuild=() pkgsBuildHost=() pkgsBuildTarget=() pkgsHostHost=() pkgsHostTarget=() pkgsTargetTarget=()
declare -a envHooks=()
addEnvHooks() {
  shift
  envHooks+=("$@")
}

_findInputs() { # PKG ARRAY
  local pkg=$1 var=$2 dep
  local -n _found=$2
  local p
  for p in ${_found[@]+"${_found[@]}"}; do [[ $p != "$pkg" ]] || return 0; done
  [[ -e $pkg ]] || { echo "build input $pkg does not exist" >&2; exit 1; }
  _found+=("$pkg")
  if [[ -f $pkg/nix-support/propagated-build-inputs ]]; then
    for dep in $(<"$pkg/nix-support/propagated-build-inputs"); do _findInputs "$dep" "$var"; done
  fi
  if [[ $var == pkgsHostTarget && -f $pkg/nix-support/propagated-native-build-inputs ]]; then
    for dep in $(<"$pkg/nix-support/propagated-native-build-inputs"); do _findInputs "$dep" pkgsBuildHost; done
  fi
}

_activateList() { # HOSTOFFSET TARGETOFFSET ARRAY
  # shellcheck disable=SC2034 # visible to the hooks being sourced
  local -r hostOffset=$1 targetOffset=$2
  local -n _list=$3
  local pkg
  for pkg in ${_list[@]+"${_list[@]}"}; do
    if [[ -f $pkg/nix-support/setup-hook ]]; then
      # shellcheck disable=SC1091
      source "$pkg/nix-support/setup-hook"
    fi
  done
}
: "${nativeBuildInputs=}" "${buildInputs=}" "${propagatedBuildInputs=}"
# shellcheck disable=SC2068 # store paths are space free; arrays or strings
for _pkg in ${nativeBuildInputs[@]}; do _findInputs "$_pkg" pkgsBuildHost; done
# shellcheck disable=SC2068
for _pkg in ${buildInputs[@]} ${propagatedBuildInputs[@]}; do _findInputs "$_pkg" pkgsHostTarget; done
_activateList -1 0 pkgsBuildHost
_activateList 0 1 pkgsHostTarget
declare -a _allInputs=()
for _pkg in ${pkgsBuildHost[@]+"${pkgsBuildHost[@]}"} ${pkgsHostTarget[@]+"${pkgsHostTarget[@]}"}; do
  [[ " ${_allInputs[*]-} " == *" $_pkg "* ]] || _allInputs+=("$_pkg")
done
for _pkg in ${_allInputs[@]+"${_allInputs[@]}"}; do
  for _envHook in ${envHooks[@]+"${envHooks[@]}"}; do
    "$_envHook" "$_pkg"
  done
done
unset _pkg _envHook

######################################################################
# Phases. Only install, fixup, installCheck and dist do anything; the
# others just run their pre/post hooks.

unpackPhase() { runHook preUnpack; runHook postUnpack; }
patchPhase() { runHook prePatch; runHook postPatch; }
configurePhase() { runHook preConfigure; runHook postConfigure; }
buildPhase() { runHook preBuild; runHook postBuild; }
checkPhase() { runHook preCheck; runHook postCheck; }

installPhase() {
  runHook preInstall
  local output
  for output in $(_outputNames); do mkdir -p "${!output}"; done
  runHook postInstall
}

_outputNames() {
  if [[ -n $__structuredAttrs ]]; then echo "${!outputs[*]}"; else echo "$outputs"; fi
}

fixupPhase() {
  local output
  for output in $(_outputNames); do
    if [[ -e ${!output} ]]; then chmod -R u+w "${!output}"; fi
  done
  runHook preFixup
  for output in $(_outputNames); do
    prefix=${!output} runHook fixupOutput
  done
  # (propagated-* files and nix-support/setup-hook are not written here)
  runHook postFixup
}

installCheckPhase() { runHook preInstallCheck; runHook postInstallCheck; }
distPhase() { runHook preDist; runHook postDist; }

genericBuild() {
  if [[ -z ${phases[*]:-} ]]; then
    phases="${prePhases[*]:-} unpackPhase patchPhase ${preConfigurePhases[*]:-} \
      configurePhase ${preBuildPhases[*]:-} buildPhase checkPhase \
      ${preInstallPhases[*]:-} installPhase ${preFixupPhases[*]:-} fixupPhase installCheckPhase \
      ${preDistPhases[*]:-} distPhase ${postPhases[*]:-}"
  fi
  local curPhase
  # Phase names are space free; this works for a string and an array alike.
  # shellcheck disable=SC2048
  for curPhase in ${phases[*]}; do
    if [[ $curPhase == checkPhase && -z ${doCheck:-} ]]; then continue; fi
    if [[ $curPhase == installPhase && -n ${dontInstall:-} ]]; then continue; fi
    if [[ $curPhase == fixupPhase && -n ${dontFixup:-} ]]; then continue; fi
    if [[ $curPhase == installCheckPhase && -z ${doInstallCheck:-} ]]; then continue; fi
    if [[ $curPhase == distPhase && -z ${doDist:-} ]]; then continue; fi
    echo "Running phase: $curPhase"
    # The variable named like the phase if set, else the function.
    eval "${!curPhase:-$curPhase}"
  done
}
