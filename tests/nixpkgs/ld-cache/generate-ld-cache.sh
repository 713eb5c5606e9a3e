# shellcheck shell=bash
# Variables such as outputs come from stdenv / the derivation.
# shellcheck disable=SC2154
#
# A stand-in for the `generate-ld-cache` setup hook of nixpkgs PR #535735, written for this suite
# from the PR's description (../README.md, "The ld-cache part"): it registers from preFixupHooks,
# so its postFixupHooks entry comes after those the other hooks appended when they were sourced
# (autoPatchelfHook's among them), and then runs patchelf's --build-resolution-cache over every
# ELF file of every output. A failure only warns. `dontGenerateLDCache` turns it off.
# @patchelf@ is patchelf 0.19.3 (makeSetupHook substitutes it).

_registerGenerateLDCache() {
  postFixupHooks+=(_generateLDCacheAllOutputs)
}

_generateLDCacheAllOutputs() {
  if [[ -n ${dontGenerateLDCache-} ]]; then
    echo "generate-ld-cache: skipped: dontGenerateLDCache is set"
    return 0
  fi
  local output dir file
  for output in $(getAllOutputNames); do
    dir=${!output}
    [[ -e $dir ]] || continue
    while IFS= read -r -d '' file; do
      isELF "$file" || continue
      if @patchelf@ --build-resolution-cache "$file"; then
        echo "generate-ld-cache: $file"
      else
        echo "generate-ld-cache: warning: patchelf --build-resolution-cache failed on $file" >&2
      fi
    done < <(find "$dir" -type f -print0)
  done
}

preFixupHooks+=(_registerGenerateLDCache)
