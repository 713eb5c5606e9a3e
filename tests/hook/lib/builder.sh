#!/usr/bin/env bash
# builder.sh DRV: "builds" one test derivation with the stdenv emulation the
# Nix suite's mock uses (tests/nix/mock-nixpkgs/stdenv/setup.sh, the one
# emulation of nixpkgs' setup.sh in this repository). DRV is a bash file of
# attributes: what Nix would put in the environment, or, when it sets
# __structuredAttrs, what .attrs.sh would declare (it is then read as
# $NIX_ATTRS_SH_FILE, as Nix hands it over).
#
# What these derivations never asked for stays off unless DRV asks: unpacking
# a source, and configuring and building one (they have none, and the tests
# count the lines a build logs), patchELF's --shrink-rpath (the hook's
# RUNPATHs are asserted exactly), and the propagation of outputs into the dev
# output (their propagated-build-inputs hold only what the hooks write). The
# Nix suite builds with all of them. The tools are the caller's PATH (the
# patchelf the tests pin), not just /usr/bin and /bin.
set -eu
set -o pipefail
shopt -s inherit_errexit
mock=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../nix/mock-nixpkgs/stdenv" && pwd)
# shellcheck disable=SC2034 # read by setup.sh
dontUnpack=1 dontPatchELF=1 propagatedBuildOutputs=
# shellcheck disable=SC2034
configurePhase='runHook preConfigure; runHook postConfigure'
# shellcheck disable=SC2034
buildPhase='runHook preBuild; runHook postBuild'
# shellcheck disable=SC2034
initialPath=${PATH//:/ }
# shellcheck disable=SC1090
source "$1"
if [[ -n ${__structuredAttrs-} ]]; then
  export NIX_ATTRS_SH_FILE=$1
fi
# shellcheck source=tests/nix/mock-nixpkgs/stdenv/setup.sh
source "$mock/setup.sh"
genericBuild
