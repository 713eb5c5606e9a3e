# shellcheck shell=bash
# Variables such as outputs and stubstripFlags come from stdenv / the derivation.
# shellcheck disable=SC2154
#
# stubstrip setup hook: after autoPatchelfHook and autoAddDriverRunpath have
# run, `stubstrip fixup` replaces the CUDA stub directories in the RUNPATH of
# every ELF file of every output with the driver link, checks from disk that
# no stub entry is left (the build fails naming the files otherwise), audits
# if asked, and says whether to put the removed stub directories on
# LD_LIBRARY_PATH for the checks after fixup (installCheck,
# pythonImportsCheck). The policy is in the binary (README, "The setup
# hook"); this file registers it, passes the settings and applies the reply.
#
# Variables a derivation may set (all optional; "non-empty" means set, as in
# the rest of stdenv: "0" and "false" count as set):
#   dontStubstrip               skip the automatic run (one log line)
#   stubstripFlags              `stubstrip fix` flags, a string or (with
#                               __structuredAttrs) an array: --driver-link
#                               (replaces the default), --compat,
#                               --stub-pattern (fix, check and audit),
#                               --exclude GLOB, -v, --jobs; --json is refused
#   stubstripAudit              info, warning or error (any other non-empty
#                               value: error): fail the build on `stubstrip
#                               audit` findings at or above that level
#   dontStubstripCheckFallback  keep the stub directories off LD_LIBRARY_PATH
#                               (they stay off anyway where the driver link or
#                               the --compat directory holds a libcuda.so.1)
#   dontStubstripPropagateCheckFallback
#                               leave nothing for the packages that depend on
#                               this one: by default each output with a fixed
#                               file gets nix-support/stubstrip-check-libs
#                               (the stub libraries its files need) and
#                               propagates stubstripCheckHook, which lets the
#                               consumers link and run their checks
#                               (hooks/stubstrip-check-hook.sh)
#
# For manual use, e.g. after calling `autoPatchelf` by hand:
#   stubstripFixup PATH...      the same on the given paths (ignores
#                               dontStubstrip; the fallback holds from then on)
#
# Order. autoPatchelfHook and autoAddDriverRunpath append to postFixupHooks
# when they are sourced, and autoPatchelfHook rebuilds RUNPATH from scratch,
# so a hook registered at source time loses its edit whenever it is sourced
# first. This one registers from prePhases (which run after every setup hook
# was sourced) and, for derivations that set `phases` without prePhases, from
# preFixupHooks: whichever runs first appends stubstripPostFixup to
# postFixupHooks. Without fixupPhase in `phases`, nothing runs.

if [[ -n ${stubstripHookOnce-} ]]; then
  return 0
fi
declare -g stubstripHookOnce=1

# makeSetupHook substitutes these; an unsubstituted copy (tests, sourcing by
# hand) falls back to STUBSTRIP_BIN / STUBSTRIP_DRIVER_LINK /
# STUBSTRIP_CHECK_HOOK (none: nothing is propagated to the consumers).
declare -g _stubstripBin='@stubstrip@'
[[ $_stubstripBin != @* ]] || _stubstripBin=${STUBSTRIP_BIN:-stubstrip}
declare -g _stubstripDriverLink='@driverLink@'
[[ $_stubstripDriverLink != @* ]] || _stubstripDriverLink=${STUBSTRIP_DRIVER_LINK:-/run/opengl-driver/lib}
declare -g _stubstripCheckHook='@checkHook@'
[[ $_stubstripCheckHook != @* ]] || _stubstripCheckHook=${STUBSTRIP_CHECK_HOOK-}

# The stdenv's nixLog / nixErrorLog where it has them and a log fd, else the
# same "function: message" shape on stderr.
_stubstripStderrLog() { printf '%s: %s\n' "${FUNCNAME[1]}" "$*" >&2; }
_stubstripStderrError() { printf 'ERROR: %s: %s\n' "${FUNCNAME[1]}" "$*" >&2; }
declare -g _stubstripLogFn=_stubstripStderrLog _stubstripErrorFn=_stubstripStderrError
if declare -F nixLog >/dev/null && [[ -n ${NIX_LOG_FD-} ]]; then _stubstripLogFn=nixLog; fi
if declare -F nixErrorLog >/dev/null && [[ -n ${NIX_LOG_FD-} ]]; then _stubstripErrorFn=nixErrorLog; fi

# stubstripFixup PATH...: one `stubstrip fixup` over PATH..., then its reply:
# `log MESSAGE` lines are logged, `export NAME=VALUE` lines exported (no eval).
stubstripFixup() {
  if (($# == 0)); then
    "$_stubstripErrorFn" "usage: stubstripFixup PATH..."
    return 2
  fi
  local -a fixupArgs=(--default-driver-link "$_stubstripDriverLink" --ld-library-path "${LD_LIBRARY_PATH-}")
  local output
  local -a outputPaths=()
  mapfile -t outputPaths < <(_stubstripOutputPaths)
  for output in ${outputPaths[@]+"${outputPaths[@]}"}; do fixupArgs+=(--output "$output"); done
  if [[ -n $_stubstripCheckHook ]]; then fixupArgs+=(--propagate-check-hook "$_stubstripCheckHook"); fi
  # stubstripAudit follows the stdenv's convention (any set value turns it on; `true` arrives
  # as 1): the levels pass as they are, any other value means error. The binary itself takes
  # only the three levels.
  case ${stubstripAudit-} in
    '') ;;
    info | warning | error) fixupArgs+=(--audit "$stubstripAudit") ;;
    *) fixupArgs+=(--audit error) ;;
  esac
  if [[ -n ${dontStubstripCheckFallback-} ]]; then fixupArgs+=(--no-check-fallback); fi
  if [[ -n ${dontStubstripPropagateCheckFallback-} ]]; then fixupArgs+=(--no-propagate-check-fallback); fi
  if declare -F concatTo >/dev/null; then
    concatTo fixupArgs stubstripFlags
  elif [[ $(declare -p stubstripFlags 2>/dev/null) == "declare -a"* ]]; then
    fixupArgs+=("${stubstripFlags[@]}")
  else
    local -
    set -o noglob
    # shellcheck disable=SC2206 # word splitting is the point, globbing is off
    fixupArgs+=(${stubstripFlags-})
  fi
  local reply line status=0
  reply=$("$_stubstripBin" fixup "${fixupArgs[@]}" -- "$@") || status=$?
  if ((status != 0)); then
    "$_stubstripErrorFn" "'$_stubstripBin fixup' failed with exit status $status"
    return 1
  fi
  while IFS= read -r line; do
    case $line in
      'log '*) "$_stubstripLogFn" "${line#log }" ;;
      'export '*) export -- "${line#export }" ;;
      ?*)
        "$_stubstripErrorFn" "unknown reply from '$_stubstripBin fixup': $line"
        return 1
        ;;
    esac
  done <<<"$reply"
}

# The paths of the outputs that exist, one per line (store paths hold no whitespace).
_stubstripOutputPaths() {
  local output outputNames
  if declare -F getAllOutputNames >/dev/null; then
    outputNames=$(getAllOutputNames)
  elif [[ -n ${__structuredAttrs-} ]]; then
    outputNames=${!outputs[*]}
  else
    outputNames=${outputs:-out}
  fi
  for output in $outputNames; do
    if [[ -e ${!output-} ]]; then printf '%s\n' "${!output}"; fi
  done
}

# The postFixupHooks entry: stubstripFixup over every output, in one process.
stubstripPostFixup() {
  if [[ -n ${dontStubstrip-} ]]; then
    "$_stubstripLogFn" "skipped: dontStubstrip is set"
    return 0
  fi
  local -a paths=()
  mapfile -t paths < <(_stubstripOutputPaths)
  if ((${#paths[@]})); then stubstripFixup "${paths[@]}"; fi
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
