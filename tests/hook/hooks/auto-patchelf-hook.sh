# shellcheck shell=bash
# Emulation of nixpkgs' autoPatchelfHook, as far as RUNPATH goes: it
# registers itself into postFixupHooks when sourced and, in postFixup,
# REBUILDS the RUNPATH of every ELF file of every output from scratch: one
# entry per directory providing a DT_NEEDED library, searched among the
# shared objects under the patched paths, then in the lib/ directory of every
# build input (autoPatchelfLibs). Libraries found nowhere (libc, ...) are left
# to the system, like autoPatchelfIgnoreMissingDeps. Honours dontAutoPatchelf;
# `autoPatchelf PATH...` can be called by hand.
# shellcheck disable=SC2154 # outputs etc. come from the derivation

declare -ga autoPatchelfLibs

gatherLibraries() {
  if [[ -d $1/lib ]]; then autoPatchelfLibs+=("$1/lib"); fi
}
# shellcheck disable=SC2154 # set while setup.sh sources this file
addEnvHooks "$targetOffset" gatherLibraries

_isElf() {
  local magic
  read -r -n 4 magic <"$1" || true
  [[ $magic == $'\177ELF' ]]
}

autoPatchelf() {
  local -a elfs=() libDirs=()
  local f
  while IFS= read -r -d '' f; do
    if _isElf "$f"; then elfs+=("$f"); fi
  done < <(find "$@" -type f -print0)
  # Shared objects of the patched paths first, then the inputs'.
  while IFS= read -r -d '' f; do
    libDirs+=("${f%/*}")
  done < <(find "$@" \( -name '*.so' -o -name '*.so.*' \) -print0)
  libDirs+=(${autoPatchelfLibs[@]+"${autoPatchelfLibs[@]}"})

  local needed dir rpath
  for f in "${elfs[@]}"; do
    rpath=
    for needed in $(patchelf --print-needed "$f"); do
      for dir in "${libDirs[@]}"; do
        if [[ -e $dir/$needed ]]; then
          case ":$rpath:" in *":$dir:"*) ;; *) rpath=${rpath:+$rpath:}$dir ;; esac
          break
        fi
      done
    done
    patchelf --remove-rpath "$f"
    if [[ -n $rpath ]]; then
      echo "autoPatchelf: setting RUNPATH of $f to $rpath" >&2
      patchelf --set-rpath "$rpath" "$f"
    fi
  done
}

autoPatchelfPostFixup() {
  [[ -z ${dontAutoPatchelf-} ]] || return 0
  local output names
  local -a paths=()
  if [[ -n ${__structuredAttrs-} ]]; then names="${!outputs[*]}"; else names=$outputs; fi
  for output in $names; do
    if [[ -e ${!output} ]]; then paths+=("${!output}"); fi
  done
  autoPatchelf "${paths[@]}"
}

postFixupHooks+=(autoPatchelfPostFixup)
