# shellcheck shell=bash
# The mock stdenv's builder: load structured attrs when there are any, then
# setup.sh ($1), then run the phases -- nixpkgs' source-stdenv.sh and
# default-builder.sh in one.
# shellcheck disable=SC1090,SC1091
if [[ -n ${NIX_ATTRS_SH_FILE-} && -e $NIX_ATTRS_SH_FILE ]]; then
    source "$NIX_ATTRS_SH_FILE"
elif [[ -f .attrs.sh ]]; then
    source .attrs.sh
fi
source "$1"
genericBuild
