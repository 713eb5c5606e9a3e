# shellcheck shell=bash
# stubstripCheckHook: lets a derivation link against, and check, the packages stubstrip fixed.
#
# `stubstrip fixup` leaves, in each output of a package B whose files it fixed,
# nix-support/stubstrip-check-libs: the CUDA stub libraries those files were linked against and
# no longer find (their RUNPATH now names the driver link), and nix-support/stubstrip-driver-dirs:
# where the real libraries will be. That output propagates this hook, so it is sourced in every
# derivation C with B among its inputs, directly or through propagation. Then:
#   - when sourced (stdenv has found every input by then), it keeps the stubstrip-check-libs
#     directory of each input unless one of that input's driver directories holds one of its
#     libraries here (a driver at the driver link or in the compat directory always wins);
#   - the linker gets those directories as -rpath-link, to find what B's libraries need while
#     linking against them (GNU ld fails otherwise); -rpath-link is never recorded in the output;
#   - LD_LIBRARY_PATH gets them appended during checkPhase (taken off after it) and from the end
#     of fixup on (installCheckPhase, pytestCheckHook, pythonImportsCheck), as stubstrip does for
#     B's own checks.
# Nothing of it reaches run time or any RUNPATH.
#
# A derivation may set (non-empty means set, as in the rest of stdenv):
#   dontStubstripCheckFallback  no stub libraries in this build at all
#
# This file is in the run-time closure of every package that propagates it: it references no
# store path and keeps to what only the consumer's sandbox can answer (is a driver library
# there?). What to provide is decided by the binary, in B's build (nix/README-section.md,
# "Checks of the packages that depend on a fixed package").

if [[ -n ${stubstripCheckHookOnce-} ]]; then
  return 0
fi
declare -g stubstripCheckHookOnce=1

# One line for the build log, "stubstripCheckHook: ..." (nixLog prefixes its caller's name).
stubstripCheckHook() {
  if declare -F nixLog >/dev/null && [[ -n ${NIX_LOG_FD-} ]]; then
    nixLog "$*"
  else
    printf 'stubstripCheckHook: %s\n' "$*" >&2
  fi
}

# The stubstrip-check-libs directories to use, decided once.
declare -ga _stubstripCheckDirs=()
_stubstripCheckFind() {
  local var slice pkg dir driverDir lib here seen=" "
  local -a pkgs=()
  for var in pkgsBuildBuild pkgsBuildHost pkgsBuildTarget pkgsHostHost pkgsHostTarget pkgsTargetTarget; do
    slice="${var}[@]"
    pkgs+=(${!slice+"${!slice}"})
  done
  for pkg in ${pkgs[@]+"${pkgs[@]}"}; do
    dir=$pkg/nix-support/stubstrip-check-libs
    [[ -d $dir && $dir != *:* && $seen != *" $dir "* ]] || continue
    seen+="$dir "
    here=
    if [[ -f $pkg/nix-support/stubstrip-driver-dirs ]]; then
      while IFS= read -r driverDir && [[ -z $here ]]; do
        [[ -n $driverDir ]] || continue
        for lib in "$dir"/*; do
          if [[ -e $driverDir/${lib##*/} ]]; then
            here=$driverDir/${lib##*/}
            break
          fi
        done
      done <"$pkg/nix-support/stubstrip-driver-dirs"
    fi
    if [[ -n $here ]]; then
      stubstripCheckHook "$here is here: $dir not used"
    else
      _stubstripCheckDirs+=("$dir")
    fi
  done
}

# On: append the directories to LD_LIBRARY_PATH (those not on it yet).
declare -ga _stubstripCheckAdded=()
_stubstripCheckOn() {
  ((${#_stubstripCheckAdded[@]} == 0)) || return 0
  local dir value=${LD_LIBRARY_PATH-}
  for dir in "${_stubstripCheckDirs[@]}"; do
    if [[ ":$value:" != *":$dir:"* ]]; then
      value+=${value:+:}$dir
      _stubstripCheckAdded+=("$dir")
    fi
  done
  if ((${#_stubstripCheckAdded[@]})); then export LD_LIBRARY_PATH="$value"; fi
}

# Off: take the directories this hook appended off LD_LIBRARY_PATH again.
_stubstripCheckOff() {
  local entry dir kept=() added
  local -a entries=()
  ((${#_stubstripCheckAdded[@]})) || return 0
  IFS=: read -r -a entries <<<"${LD_LIBRARY_PATH-}"
  for entry in ${entries[@]+"${entries[@]}"}; do
    added=
    for dir in "${_stubstripCheckAdded[@]}"; do [[ $entry != "$dir" ]] || added=1; done
    [[ -n $added ]] || kept+=("$entry")
  done
  _stubstripCheckAdded=()
  if ((${#kept[@]})); then
    LD_LIBRARY_PATH=$(IFS=:; echo "${kept[*]}")
    export LD_LIBRARY_PATH
  else
    unset LD_LIBRARY_PATH
  fi
}

# checkPhase runs before installation, so its LD_LIBRARY_PATH is taken back after it; from the
# end of fixup on (or from installCheck, for derivations without fixup) it stays.
declare -g _stubstripCheckAfterFixup=
stubstripCheckPreCheck() { _stubstripCheckOn; }
stubstripCheckPostCheck() { [[ -n $_stubstripCheckAfterFixup ]] || _stubstripCheckOff; }
stubstripCheckAfterFixup() {
  _stubstripCheckAfterFixup=1
  _stubstripCheckOn
}

if [[ -z ${dontStubstripCheckFallback-} ]]; then
  _stubstripCheckFind
  if ((${#_stubstripCheckDirs[@]})); then
    for _stubstripCheckDir in "${_stubstripCheckDirs[@]}"; do
      export NIX_LDFLAGS="${NIX_LDFLAGS-}${NIX_LDFLAGS:+ }-rpath-link=$_stubstripCheckDir"
    done
    unset -v _stubstripCheckDir
    stubstripCheckHook "for the link (-rpath-link) and the checks (LD_LIBRARY_PATH): ${_stubstripCheckDirs[*]}"
    preCheckHooks+=(stubstripCheckPreCheck)
    postCheckHooks+=(stubstripCheckPostCheck)
    postFixupHooks+=(stubstripCheckAfterFixup)
    preInstallCheckHooks+=(stubstripCheckAfterFixup)
  fi
fi
