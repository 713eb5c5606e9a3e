# shellcheck shell=bash
# Emulation of a pythonImportsCheck-like hook: a phase appended to
# preDistPhases when sourced, so it runs after fixup and installCheck
# whatever doInstallCheck says. It "imports" every library listed in
# importsCheck by dlopen()ing it in a child process (@importCheck@ is
# substituted by the test harness, like makeSetupHook would).
# shellcheck disable=SC2154 # importsCheck comes from the derivation

importsCheckPhase() {
  local lib
  # shellcheck disable=SC2068 # an array or a string of paths
  for lib in ${importsCheck[@]}; do
    echo "importsCheckPhase: importing $lib"
    @importCheck@ "$lib"
  done
}

if declare -F appendToVar >/dev/null; then
  appendToVar preDistPhases importsCheckPhase
else
  # shellcheck disable=SC2178
  preDistPhases="${preDistPhases-} importsCheckPhase"
fi
