#!/usr/bin/env bash
# nixpkgs' own checker for pkgs/by-name, nixpkgs-vet, on the upstream form (./README.md,
# "nixpkgs-vet"): `nixpkgs-vet --base BASE PR`, BASE the tree at $NIXPKGS and PR the same tree
# with nix/upstream applied as the pull request would apply it. It must pass; and a control, the
# same pull request without `__structuredAttrs = true`, must fail with NPV-166 (so the run could
# have failed; `strictDeps` cannot be left out that way: buildRustPackage sets it too). Then what
# nixpkgs-vet's evaluation reads of the new package (./vet-eval.nix).
#
#   NIXPKGS=/path/to/nixpkgs NIXPKGS_VET=/path/to/nixpkgs-vet bash tests/nixpkgs/vet.sh
#
# NIXPKGS_VET: the binary of NixOS/nixpkgs-vet 0.3.4, built with `cargo build --release` outside
# this repository (./README.md says how). Without NIXPKGS or NIXPKGS_VET the script says why it
# skipped and exits 0. nixpkgs-vet evaluates with Nix >= 2.18: Nix 2.26 from ./setup.sh, through a
# nix-instantiate wrapper made here (NIXPKGS_VET_NIX_PACKAGE).
#
# A slim snapshot of nixpkgs lacks three large files that the whole-tree evaluation reads; both
# trees get the same stand-ins (./vet_standins.py), and the by-name packages that still cannot be
# evaluated (those that force a Hackage package) are replaced in both by a plain derivation. The
# trees are hard-linked copies of $NIXPKGS in VET_WORK (default: mktemp -d), removed at the end
# unless KEEP=1.
# Prints PASS/FAIL lines and "N passed, M failed"; exits 1 on a failure.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ -z ${NIXPKGS-} || -z ${NIXPKGS_VET-} ]]; then
    echo "tests/nixpkgs vet: skipped: NIXPKGS (a nixpkgs tree) and NIXPKGS_VET (the nixpkgs-vet binary) must be set (tests/nixpkgs/README.md)"
    exit 0
fi
NIXPKGS=$(cd "$NIXPKGS" && pwd)
[[ -x $NIXPKGS_VET ]] || {
    echo "tests/nixpkgs vet: NIXPKGS_VET=$NIXPKGS_VET is not an executable" >&2
    exit 2
}

passed=0
failed=0
pass() {
    passed=$((passed + 1))
    echo "PASS $1"
}
fail() {
    failed=$((failed + 1))
    echo "FAIL $1${2:+: $2}"
}

work=${VET_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-vet.XXXXXX")}
mkdir -p "$work"
[[ -n ${KEEP-} ]] || trap 'rm -rf "$work"' EXIT

# Nix 2.26's nix-instantiate, as nixpkgs-vet runs it (it clears the environment: all paths inside).
eval "$("$here/setup.sh")" || {
    echo "tests/nixpkgs vet: setup.sh failed" >&2
    exit 2
}
nixPrefix=$(dirname "$NIX_226")
mkdir -p "$work/nix/bin"
cat >"$work/nix/bin/nix-instantiate" <<EOF
#!/bin/bash
export NIX_CONF_DIR=$nixPrefix/conf
exec "$nixPrefix/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --argv0 nix-instantiate \\
  --library-path "$nixPrefix/usr/lib/x86_64-linux-gnu:$nixPrefix/lib/x86_64-linux-gnu" \\
  "$nixPrefix/usr/bin/nix-instantiate" --store "local?root=$nixPrefix/root" \\
  --option substituters '' --option sandbox false "\$@"
EOF
chmod +x "$work/nix/bin/nix-instantiate"
instantiate=$work/nix/bin/nix-instantiate
echo "nixpkgs: $NIXPKGS (commit ${NIXPKGS_COMMIT:-$(git -C "$NIXPKGS" rev-parse HEAD 2>/dev/null || echo unknown)});" \
    "nixpkgs-vet: $("$NIXPKGS_VET" --version 2>&1 | head -1); $("$instantiate" --version)"

# copy FROM TO: hard links where the file system allows them. A file of the copy is only ever
# replaced (rm, then written), never written through, so the source stays as it was.
copy() { cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2" && cp -a "$1" "$2"; }; }
# replace FILE: a new file in place of a hard link, read from stdin.
replace() {
    rm -f "$1" && cat >"$1"
}

# --- the base tree ------------------------------------------------------------------------------
base=$work/base
rm -rf "$base" "$work/pr" "$work/control"
copy "$NIXPKGS" "$base"
python3 "$here/vet_standins.py" "$base"
find "$base/pkgs/by-name" -mindepth 2 -maxdepth 2 -type d -printf '%f\n' | sort |
    python3 -c 'import json, sys; print(json.dumps([l.strip() for l in sys.stdin]))' >"$work/by-name.json"
if ! "$instantiate" --eval --strict --json --arg nixpkgsPath "$base" \
    --arg names "builtins.fromJSON (builtins.readFile $work/by-name.json)" "$here/vet-eval.nix" \
    >"$work/by-name-info.json" 2>"$work/by-name.err"; then
    fail "evaluate every pkgs/by-name attribute of the base tree (with the stand-ins)" "$(grep -m3 error: "$work/by-name.err")"
    echo "$passed passed, $failed failed"
    exit 1
fi
mapfile -t broken < <(python3 -c 'import json, sys; print("\n".join(sorted(n for n, v in json.load(sys.stdin).items() if v is None)))' \
    <"$work/by-name-info.json")
for n in "${broken[@]}"; do
    replace "$base/pkgs/by-name/${n:0:2}/$n/package.nix" <<EOF
# A stand-in (tests/nixpkgs/vet.sh): the real package cannot be evaluated in this tree, which lacks
# hackage-packages.nix. The same stand-in is in both trees nixpkgs-vet compares.
{ stdenvNoCC }:
stdenvNoCC.mkDerivation {
  pname = "$n";
  version = "0";
}
EOF
done
echo "base tree: the stand-ins of vet_standins.py, and ${#broken[@]} by-name packages replaced: ${broken[*]}"

# --- the pull request, and the control ----------------------------------------------------------
apply() { # apply TREE [control]: nix/upstream's files, as the pull request changes the tree
    local tree=$1 hook=pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook
    mkdir -p "$tree/pkgs/by-name/st/stubstrip"
    if [[ ${2-} == control ]]; then
        grep -v '^  __structuredAttrs = true;' \
            "$repo/nix/upstream/pkgs/by-name/st/stubstrip/package.nix" | replace "$tree/pkgs/by-name/st/stubstrip/package.nix"
    else
        replace "$tree/pkgs/by-name/st/stubstrip/package.nix" <"$repo/nix/upstream/pkgs/by-name/st/stubstrip/package.nix"
    fi
    replace "$tree/$hook/package.nix" <"$repo/nix/upstream/$hook/package.nix"
    rm -f "$tree/$hook/removeStubsFromRunpathHook.bash"
}
copy "$base" "$work/pr" && apply "$work/pr"
copy "$base" "$work/control" && apply "$work/control" control

vet() { # vet PR LOG: nixpkgs-vet --base BASE PR; its status
    NIXPKGS_VET_NIX_PACKAGE=$work/nix NIXPKGS_VET_NIXPKGS_LIB=$base/lib \
        "$NIXPKGS_VET" --base "$base" "$1" >"$2" 2>&1
}
start=$SECONDS
if vet "$work/pr" "$work/vet-pr.log"; then
    pass "nixpkgs-vet --base BASE PR passes with nix/upstream applied ($((SECONDS - start)) s): $(tail -1 "$work/vet-pr.log")"
else
    fail "nixpkgs-vet --base BASE PR with nix/upstream applied" "$(grep -v '^\s*[0-9]*|' "$work/vet-pr.log" | tail -12)"
fi
start=$SECONDS
if vet "$work/control" "$work/vet-control.log"; then
    fail "the control (no __structuredAttrs) must fail nixpkgs-vet" "$(tail -3 "$work/vet-control.log")"
elif grep -q 'NPV-166' "$work/vet-control.log" && ! grep -q 'NPV-120' "$work/vet-control.log"; then
    pass "the control fails nixpkgs-vet with NPV-166 alone ($((SECONDS - start)) s)"
else
    fail "the control fails nixpkgs-vet with NPV-166 alone" "$(grep -v '^\s*[0-9]*|' "$work/vet-control.log" | tail -8)"
fi
grep -B2 'NPV-166' "$work/vet-control.log" | sed 's/^/    /' | head -4

# --- the package as nixpkgs-vet's evaluation sees it ----------------------------------------------
if info=$("$instantiate" --eval --strict --json --arg nixpkgsPath "$work/pr" --arg names '[ "stubstrip" ]' \
    "$here/vet-eval.nix" 2>"$work/info.err") &&
    [[ $info == '{"stubstrip":{"is_derivation":true,"is_same_scope_call_package":true,"strict_deps":true,"structured_attrs":true}}' ]]; then
    pass "stubstrip, as nixpkgs-vet evaluates it: $info"
else
    fail "stubstrip, as nixpkgs-vet evaluates it" "${info-} $(grep -m3 error: "$work/info.err")"
fi

echo "$passed passed, $failed failed"
((failed == 0))
