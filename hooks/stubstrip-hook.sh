# shellcheck shell=bash
# Variables such as outputs and stubstripFlags come from stdenv / the derivation.
# shellcheck disable=SC2154
#
# stubstrip setup hook: after autoPatchelfHook and autoAddDriverRunpath have
# run, replace the CUDA stub directories in the RUNPATH of every ELF file of
# every output with the driver link, check that no stub entry is left, and
# keep the stubs loadable for the checks that run after fixup.
#
# Variables a derivation may set (all optional):
#   dontStubstrip               non-empty: skip the automatic run (one log line)
#   stubstripFlags              extra `stubstrip fix` flags, a string or (with
#                               __structuredAttrs) an array; --stub-pattern is
#                               also passed to `stubstrip check`, --driver-link
#                               replaces the default driver link, --json is
#                               refused (stdout carries --print-removed)
#   stubstripAudit              off by default; info, warning or error (any
#                               other non-empty value: error): after the fix,
#                               run `stubstrip audit` on the outputs and fail
#                               the build on findings at or above that level
#                               (warning includes ambiguous RUNPATHs, SS002;
#                               error: build-directory and relative entries)
#   dontStubstripCheckFallback  non-empty: do not put the removed stub
#                               directories on LD_LIBRARY_PATH after fixup
#                               (not done either when the driver link or the
#                               --compat directory holds a libcuda.so.1, as in a
#                               GPU-enabled sandbox: the stub would shadow it)
# Like the rest of stdenv, "non-empty" means set: "0" and "false" count as set.
#
# Function for manual use, e.g. after calling `autoPatchelf` by hand:
#   stubstripFixup PATH...      fix, check and fallback on the given paths
#                               (the fallback holds from then on; ignores
#                               dontStubstrip, which only governs the
#                               automatic run)
#
# Failures. The build fails if `stubstrip fix` fails (a usage error, say),
# and if `stubstrip check` then finds a stub entry left (it names each file
# and entry). Files the fix could not rewrite (exit 3, named on stderr) are
# tolerated only as far as the check finds no stub entry in them.
#
# Order. autoPatchelfHook and autoAddDriverRunpath append to postFixupHooks
# when they are sourced, and autoPatchelfHook rebuilds RUNPATH from scratch,
# so a hook registered at source time loses its edit whenever it is sourced
# first. This hook registers late instead: stubstripRegisterPhase is appended
# to prePhases (which run after every setup hook was sourced) and appends
# stubstripPostFixup to postFixupHooks from there. A derivation that sets
# `phases` itself usually leaves prePhases out, so the same function is also
# in preFixupHooks: whichever runs first registers, the other does nothing.
# A derivation whose `phases` omit fixupPhase gets no fixup from any hook, so
# none from this one either. doInstallCheck plays no part: the fix runs in
# fixup, before installCheck.

if [[ -n ${stubstripHookOnce-} ]]; then
  return 0
fi
declare -g stubstripHookOnce=1

# makeSetupHook substitutes these. An unsubstituted copy (tests, or sourcing
# the file by hand) falls back to STUBSTRIP_BIN / STUBSTRIP_DRIVER_LINK.
declare -g _stubstripBin='@stubstrip@'
if [[ $_stubstripBin == @* ]]; then
  _stubstripBin=${STUBSTRIP_BIN:-stubstrip}
fi
declare -g _stubstripDriverLink='@driverLink@'
if [[ $_stubstripDriverLink == @* ]]; then
  _stubstripDriverLink=${STUBSTRIP_DRIVER_LINK:-/run/opengl-driver/lib}
fi

# Logging: the stdenv's nixLog / nixErrorLog when it has them and a log fd
# (they name the calling function), else the same "function: message" shape
# on stderr. Called through these variables so the caller's name is reported.
_stubstripStderrLog() {
  printf '%s: %s\n' "${FUNCNAME[1]}" "$*" >&2
}
_stubstripStderrError() {
  printf 'ERROR: %s: %s\n' "${FUNCNAME[1]}" "$*" >&2
}
if declare -F nixLog >/dev/null && [[ -n ${NIX_LOG_FD-} ]]; then
  declare -g _stubstripLogFn=nixLog
else
  declare -g _stubstripLogFn=_stubstripStderrLog
fi
if declare -F nixErrorLog >/dev/null && [[ -n ${NIX_LOG_FD-} ]]; then
  declare -g _stubstripErrorFn=nixErrorLog
else
  declare -g _stubstripErrorFn=_stubstripStderrError
fi

# Names of the derivation's outputs, space separated.
_stubstripOutputNames() {
  if declare -F getAllOutputNames >/dev/null; then
    getAllOutputNames
  elif [[ -n ${__structuredAttrs-} ]]; then
    echo "${!outputs[@]}"
  else
    echo "${outputs:-out}"
  fi
}

# Copies stubstripFlags (array or string) into the array named $1.
_stubstripReadFlags() {
  local -n _stubstripFlagsOut=$1
  if declare -F concatTo >/dev/null; then
    concatTo _stubstripFlagsOut stubstripFlags
  elif [[ $(declare -p stubstripFlags 2>/dev/null) == "declare -a"* ]]; then
    _stubstripFlagsOut+=("${stubstripFlags[@]}")
  else
    local -
    set -o noglob
    # shellcheck disable=SC2206 # word splitting is the point, globbing is off
    _stubstripFlagsOut+=(${stubstripFlags-})
  fi
}

# Appends the removed stub directories (one per line in $1) that are
# absolute, existing and not there yet to LD_LIBRARY_PATH, and the same to
# the array named $2, so that checks after fixup (installCheck,
# pythonImportsCheck, ...) can load libraries that need libcuda.so.1 in a
# sandbox without a driver.
_stubstripAddCheckFallback() {
  local -n _stubstripAdded=$2
  local dir
  while IFS= read -r dir; do
    [[ $dir == /* && -d $dir ]] || continue
    case ":${LD_LIBRARY_PATH-}:" in
      *":$dir:"*) continue ;;
    esac
    LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir
    _stubstripAdded+=("$dir")
  done <<<"$1"
  if ((${#_stubstripAdded[@]})); then
    export LD_LIBRARY_PATH
  fi
}

# _stubstripRunAudit [FLAGS...] -- PATH...: `stubstrip audit` with the level
# stubstripAudit names (info, warning or error; any other non-empty value
# means error). Fails when a finding at or above that level exists; files it
# cannot read are reported and tolerated, like the fix's.
_stubstripRunAudit() {
  local deny=error report status=0
  case $stubstripAudit in
    info | warning | error) deny=$stubstripAudit ;;
  esac
  report=$("$_stubstripBin" audit --deny "$deny" "$@" 2>&1) || status=$?
  case $status in
    0) "$_stubstripLogFn" "audit: no finding at or above '$deny'" ;;
    1)
      "$_stubstripErrorFn" "stubstrip audit found problems at or above '$deny' (stubstripAudit):"$'\n'"$report"
      return 1
      ;;
    3) "$_stubstripLogFn" "warning: stubstrip audit could not read some files:"$'\n'"$report" ;;
    *)
      "$_stubstripErrorFn" "'$_stubstripBin audit' failed with exit status $status:"$'\n'"$report"
      return 1
      ;;
  esac
}

# stubstripFixup PATH...
# Replaces stub RUNPATH entries under PATH... with the driver link (one
# stubstrip process), fails if a stub entry survives, and applies the check
# fallback unless dontStubstripCheckFallback is set or the driver link (or
# the --compat directory) already provides libcuda.so.1.
stubstripFixup() {
  if (($# == 0)); then
    "$_stubstripErrorFn" "usage: stubstripFixup PATH..."
    return 2
  fi

  local -a userFlags=() fixFlags=() checkFlags=()
  _stubstripReadFlags userFlags
  local flag driverLink=$_stubstripDriverLink haveDriverLink='' compat=''
  local -i i
  for ((i = 0; i < ${#userFlags[@]}; i++)); do
    flag=${userFlags[i]}
    case $flag in
      --json | --json=*)
        "$_stubstripErrorFn" "stubstripFlags: --json cannot be used by the hook (stdout carries --print-removed)"
        return 2
        ;;
      --print-removed) ;;
      --stub-pattern=*)
        fixFlags+=("$flag")
        checkFlags+=("$flag")
        ;;
      --stub-pattern)
        fixFlags+=("$flag" "${userFlags[i + 1]-}")
        checkFlags+=("$flag" "${userFlags[i + 1]-}")
        i+=1
        ;;
      --driver-link | --compat)
        if [[ $flag == --driver-link ]]; then
          haveDriverLink=1
          driverLink=${userFlags[i + 1]-}
        else
          compat=${userFlags[i + 1]-}
        fi
        fixFlags+=("$flag" "${userFlags[i + 1]-}")
        i+=1
        ;;
      --driver-link=*)
        haveDriverLink=1
        driverLink=${flag#*=}
        fixFlags+=("$flag")
        ;;
      --compat=*)
        compat=${flag#*=}
        fixFlags+=("$flag")
        ;;
      *) fixFlags+=("$flag") ;;
    esac
  done
  if [[ -z $haveDriverLink ]]; then
    fixFlags=(--driver-link "$_stubstripDriverLink" "${fixFlags[@]}")
  fi

  local removed status=0
  removed=$("$_stubstripBin" fix --print-removed "${fixFlags[@]}" -- "$@") || status=$?
  case $status in
    0) ;;
    3) "$_stubstripLogFn" "warning: stubstrip could not rewrite some files (named above); checking them for stub entries" ;;
    *)
      "$_stubstripErrorFn" "'$_stubstripBin fix' failed with exit status $status"
      return 1
      ;;
  esac

  local report
  status=0
  report=$("$_stubstripBin" check "${checkFlags[@]}" -- "$@" 2>&1 >/dev/null) || status=$?
  case $status in
    0) ;;
    1)
      "$_stubstripErrorFn" "stub paths still present in RUNPATH after '$_stubstripBin fix':"$'\n'"$report"
      return 1
      ;;
    *)
      "$_stubstripErrorFn" "'$_stubstripBin check' failed with exit status $status:"$'\n'"$report"
      return 1
      ;;
  esac

  if [[ -n ${stubstripAudit-} ]]; then
    _stubstripRunAudit "${checkFlags[@]}" -- "$@" || return 1
  fi

  if [[ -z $removed || -n ${dontStubstripCheckFallback-} ]]; then
    return 0
  fi
  local dir
  for dir in ${compat:+"$compat"} "$driverLink"; do
    if [[ -e $dir/libcuda.so.1 ]]; then
      "$_stubstripLogFn" "$dir provides libcuda.so.1 here: LD_LIBRARY_PATH left as it is"
      return 0
    fi
  done
  local -a added=()
  _stubstripAddCheckFallback "$removed" added
  if ((${#added[@]})); then
    "$_stubstripLogFn" "appended to LD_LIBRARY_PATH for the checks after fixup: ${added[*]}"
  fi
  return 0
}

# The postFixupHooks entry: stubstripFixup over every output, in one process.
stubstripPostFixup() {
  if [[ -n ${dontStubstrip-} ]]; then
    "$_stubstripLogFn" "skipped: dontStubstrip is set"
    return 0
  fi
  local output
  local -a paths=()
  for output in $(_stubstripOutputNames); do
    if [[ -e ${!output-} ]]; then
      paths+=("${!output}")
    fi
  done
  if ((${#paths[@]} == 0)); then
    return 0
  fi
  stubstripFixup "${paths[@]}"
}

# Appends stubstripPostFixup to postFixupHooks, once (see "Order" above).
stubstripRegisterPhase() {
  if [[ -n ${_stubstripRegistered-} ]]; then
    return 0
  fi
  declare -g _stubstripRegistered=1
  postFixupHooks+=(stubstripPostFixup)
}

if declare -F appendToVar >/dev/null; then
  appendToVar prePhases stubstripRegisterPhase
elif [[ $(declare -p prePhases 2>/dev/null) == "declare -a"* ]]; then
  prePhases+=(stubstripRegisterPhase)
else
  # shellcheck disable=SC2178 # a plain string on stdenvs without structured attrs
  prePhases="${prePhases-} stubstripRegisterPhase"
fi
preFixupHooks+=(stubstripRegisterPhase)
