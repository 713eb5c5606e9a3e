#!/usr/bin/env bash
# Installs what the real-nixpkgs suite (./run.sh) needs, outside the repository, and prints the
# variables that point at it. Run as root on Debian 12; a no-op for what is already there.
#
#   eval "$(tests/nixpkgs/setup.sh)"     # sets NIX_226 (a `nix` 2.26 command line)
#
# 1. Debian packages for the builds: Nix 2.8 (nix-bin; builds, single-user, offline) and the host
#    tools that stand in for nixpkgs packages whose sources cannot be fetched here (./README.md
#    lists every stand-in): cmake, python3 with pyelftools, patchelf, xz.
# 2. Nix 2.26 for evaluation (nixpkgs needs Nix >= 2.18, lib/minfeatures.nix): Debian trixie's
#    nix-bin and the libraries it links, downloaded with `apt-get download` under a private apt
#    configuration (the system's sources stay as they are), unpacked with `dpkg -x` into
#    $STUBSTRIP_TOOLS/nix-2.26 and run through the unpacked loader. It only evaluates, against a
#    store of its own ($STUBSTRIP_TOOLS/nix-2.26/root), so the shared /nix/store and its database
#    are never opened by a second Nix version.
# Progress goes to stderr; stdout carries only the `export` lines.
set -euo pipefail

tools=${STUBSTRIP_TOOLS:-/work/tools}
prefix=$tools/nix-2.26
log() { echo "nixpkgs-setup: $*" >&2; }

# --- 1. Debian packages --------------------------------------------------------------------------
debs=(nix-bin cmake python3 python3-pyelftools patchelf xz-utils gcc g++ make binutils file)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || {
        log "missing ${missing[*]} and not root"
        exit 2
    }
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Wait for another apt-get's dpkg lock rather than failing at once.
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. Nix 2.26 in a private prefix -------------------------------------------------------------
if [[ ! -x $prefix/usr/bin/nix ]]; then
    log "downloading Debian trixie's nix-bin into $prefix"
    apt=$prefix/apt
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$prefix/debs"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
        >"$apt/sources.list"
    aptOpts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::Status=/dev/null)
    apt-get "${aptOpts[@]}" update -qq >/dev/null
    # nix-bin and every library package it needs, transitively (perl, passwd and the like are
    # left out: only shared libraries are needed to run the binary).
    mapfile -t wanted < <(apt-cache "${aptOpts[@]}" depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances nix-bin |
        grep -v '^ ' | grep -v '<' | grep -E '^(nix-bin|lib.*|gcc-14-base)$' | grep -v perl | sort -u)
    (cd "$prefix/debs" && apt-get "${aptOpts[@]}" download "${wanted[@]}" >/dev/null)
    for deb in "$prefix"/debs/*.deb; do
        dpkg -x "$deb" "$prefix"
    done
fi
arch=$(uname -m)
loader=$(find "$prefix/usr/lib/$arch-linux-gnu" "$prefix/lib/$arch-linux-gnu" -maxdepth 1 -name "ld-linux*.so*" 2>/dev/null | head -1 || true)
libpath=$prefix/usr/lib/$arch-linux-gnu:$prefix/lib/$arch-linux-gnu
[[ -n $loader ]] || {
    log "no loader under $prefix"
    exit 1
}
mkdir -p "$prefix/root" "$prefix/conf"
# Single-user, as root, no build users (this machine has no nixbld group).
echo 'build-users-group =' >"$prefix/conf/nix.conf"
# The wrapper: the unpacked loader runs trixie's nix with trixie's libraries; --store gives it a
# store of its own (evaluation writes .drv files there, never into the shared /nix/store).
cat >"$prefix/nix" <<EOF
#!/usr/bin/env bash
export NIX_CONF_DIR=$prefix/conf
exec "$loader" --library-path "$libpath" "$prefix/usr/bin/nix" \\
    --extra-experimental-features 'nix-command flakes' --store "local?root=$prefix/root" \\
    --option substituters '' --option sandbox false "\$@"
EOF
chmod +x "$prefix/nix"
version=$("$prefix/nix" --version)
log "$version at $prefix/nix"
echo "export NIX_226=$prefix/nix"
