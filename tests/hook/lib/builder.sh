#!/usr/bin/env bash
# builder.sh DRV: "builds" one test derivation. DRV is a bash file of
# attributes (what Nix would put in the environment, or in .attrs.sh with
# structured attrs); the emulated stdenv is sourced after it, as in a real
# build, then genericBuild runs.
set -eu
set -o pipefail
shopt -s inherit_errexit
# shellcheck disable=SC1090
source "$1"
# shellcheck source=tests/hook/lib/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
genericBuild
