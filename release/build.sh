#!/usr/bin/env bash
# release/build.sh: the release, in target/dist/ (release/README.md says what each file is and
# how a release is cut).
#
#   bash release/build.sh
#
# Everything is built from the source tarball this script makes of HEAD (`git archive`), never
# from the working tree: what is released is what the tarball holds, and what nixpkgs builds
# from it is the same code. Uncommitted changes are left out (with a warning).
#
# Reproducible: two runs, here or in a clone at another path, give the same bytes
# (tests/release/run.sh proves it). Times come from SOURCE_DATE_EPOCH, the commit's time; paths
# from the build (the unpacked source, CARGO_HOME, the target directory) are remapped; the
# dependencies are Cargo.lock's (--locked); the toolchain and maturin are pinned below.
#
# It installs what it needs itself: the pinned Rust toolchain with the musl target (rustup), and
# maturin from PyPI into a virtual environment under target/. Needs git, python3 with venv,
# rustup, gzip, GNU tar.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Pinned: a new toolchain or maturin may change the bytes, so they change with a commit.
TOOLCHAIN=1.95.0
TARGET=x86_64-unknown-linux-musl
MATURIN=maturin==1.16.0

log() { echo "release/build.sh: $*" >&2; }
die() {
    log "$*"
    exit 1
}

[[ $(uname -m) == x86_64 ]] || die "the release is x86_64 only (TARGET=$TARGET); this is $(uname -m)"
git rev-parse --verify -q HEAD >/dev/null || die "not a git checkout with a commit: the release is made from HEAD"
commit=$(git rev-parse HEAD)
version=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["workspace"]["package"]["version"])' Cargo.toml)
name=stubstrip-$version
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
    log "warning: the working tree has uncommitted changes; the release is HEAD ($commit) without them"
fi

# The time of the last commit that changed a file of the tarball: the commit that records the
# tarball's hash in nixpkgs' package (a file the tarball leaves out, .gitattributes) changes
# neither the time nor anything else.
packageFile=nix/upstream/pkgs/by-name/st/stubstrip/package.nix
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD -- . ":(exclude)$packageFile")
export TZ=UTC LC_ALL=C
umask 022

work=$root/target/release-build
dist=$root/target/dist
rm -rf "$dist" "$work/src" "$work/stage"
mkdir -p "$dist" "$work/src" "$work/stage"

# --- the tools ------------------------------------------------------------------------------------
command -v rustup >/dev/null || die "rustup is needed (https://rustup.rs): it installs the pinned toolchain $TOOLCHAIN"
# Installed once; an installed toolchain of that name is left as it is (only the target added).
if ! rustup run "$TOOLCHAIN" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$TOOLCHAIN" --profile minimal --target "$TARGET" >&2
elif ! rustup target list --installed --toolchain "$TOOLCHAIN" | grep -qx "$TARGET"; then
    rustup target add --toolchain "$TOOLCHAIN" "$TARGET" >&2
fi
export RUSTUP_TOOLCHAIN=$TOOLCHAIN
venv=$root/target/release-tools/venv
if [[ $("$venv/bin/maturin" --version 2>/dev/null) != "maturin ${MATURIN#maturin==}" ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check "$MATURIN" || die "pip could not install $MATURIN"
fi

# --- the source tarball ---------------------------------------------------------------------------
# git archive of the commit's tree: names sorted, owner root, modes from the tree, every mtime
# SOURCE_DATE_EPOCH. The tree, not the commit, so that the tarball does not carry the commit's
# id (git writes it into a pax header for a commit); .gitattributes leaves out nixpkgs' package
# file. Writing this tarball's hash into that file therefore changes neither.
tarball=$dist/$name.tar.gz
git -c tar.umask=022 archive --format=tar --mtime="@$SOURCE_DATE_EPOCH" --prefix="$name/" "$commit^{tree}" |
    gzip -n -9 >"$tarball"
tar -xzf "$tarball" -C "$work/src"
src=$work/src/$name

# --- the binaries ---------------------------------------------------------------------------------
# musl, static (static-pie, the musl target's default), the `dist` profile, elfpatch with dlmalloc
# (its crate's default feature): bench/README.md ("Start-up: how the release is linked") has the
# variants measured. RUSTFLAGS reach only the target's crates (--target is given), not the
# proc-macros built for the host; here they only remap the build's paths.
targetDir=$work/target
cargoHome=${CARGO_HOME:-$HOME/.cargo}
export CARGO_TARGET_DIR=$targetDir
export RUSTFLAGS="--remap-path-prefix=$src=$name --remap-path-prefix=$cargoHome=cargo-home --remap-path-prefix=$targetDir=target"
cargoArgs=(--locked --profile dist --target "$TARGET")
# One package per cargo call: built together, cargo would give their dependencies the union of the
# features both ask for, and elfpatch would not be the binary maturin builds alone for the wheel.
for p in elfpatch stubstrip; do
    (cd "$src" && cargo build "${cargoArgs[@]}" -p "$p" --bin "$p") || die "cargo build -p $p failed"
done
bin=$targetDir/$TARGET/dist
for b in elfpatch stubstrip; do
    # Static: no program interpreter and no shared library needed, so nothing to load but the file.
    if readelf -lW "$bin/$b" | grep -Eq '^\s+INTERP\s' || readelf -dW "$bin/$b" | grep -q '(NEEDED)'; then
        die "$bin/$b is not statically linked"
    fi
    install -m 0755 "$bin/$b" "$dist/$b"
done

# --- manual pages and completions -----------------------------------------------------------------
# THE COMMAND LINES THAT WRITE THEM, in this one place (nix/package.nix's postInstall runs the
# same). Each binary makes its own from the argument definitions it parses with.
#   docs BIN DIR: DIR/man/*.1 and DIR/{bash,zsh,fish}/NAME for elfpatch and stubstrip
docs() {
    local b=$1 out=$2 sh
    mkdir -p "$out/man" "$out/bash" "$out/zsh" "$out/fish"
    "$b/stubstrip" --generate-man >"$out/man/stubstrip.1"
    "$b/elfpatch" --generate-man >"$out/man/elfpatch.1"
    for sh in bash zsh fish; do
        "$b/stubstrip" --generate-completion "$sh" >"$out/$sh/stubstrip"
        "$b/elfpatch" --generate-completion "$sh" >"$out/$sh/elfpatch"
    done
}
docs "$bin" "$work/stage/docs"

# --- the binary tarball: bin/, share/ (man pages, completions where shells look, the docs) -------
# The layout a prefix expects (FHS, as `make install` leaves /usr/local): unpacked with
# --strip-components=1 into ~/.local or /usr/local, nothing lands at the prefix's root. The
# completions answer for `patchelf` too, the name the README links to elfpatch: bash-completion
# and fish load a command's script by its name, so that name is a link to elfpatch's script
# (which registers both names); zsh's compinit reads the `#compdef elfpatch patchelf` line.
plat=$name-x86_64-linux
tree=$work/stage/$plat
install -d "$tree/bin" "$tree/share/man/man1" "$tree/share/bash-completion/completions" \
    "$tree/share/zsh/site-functions" "$tree/share/fish/vendor_completions.d" "$tree/share/doc/stubstrip"
install -m 0755 "$bin/elfpatch" "$bin/stubstrip" "$tree/bin/"
install -m 0644 "$work/stage/docs/man/"*.1 "$tree/share/man/man1/"
for p in elfpatch stubstrip; do
    install -m 0644 "$work/stage/docs/bash/$p" "$tree/share/bash-completion/completions/$p"
    install -m 0644 "$work/stage/docs/zsh/$p" "$tree/share/zsh/site-functions/_$p"
    install -m 0644 "$work/stage/docs/fish/$p" "$tree/share/fish/vendor_completions.d/$p.fish"
done
ln -s elfpatch "$tree/share/bash-completion/completions/patchelf"
ln -s elfpatch.fish "$tree/share/fish/vendor_completions.d/patchelf.fish"
install -m 0644 "$src/README.md" "$src/CHANGELOG.md" "$src/LICENSE" "$tree/share/doc/stubstrip/"
# Names sorted, owner root, one mtime, no atime/ctime: only the contents make the bytes.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --format=gnu \
    -C "$work/stage" -cf - "$plat" | gzip -n -9 >"$dist/$plat.tar.gz"

# --- the wheel ------------------------------------------------------------------------------------
# maturin builds elfpatch's binary with the same cargo arguments and environment (so cargo finds it
# built and the wheel's file is the one above: checked below); stubstrip and the man pages go in
# as the wheel's data (.data/scripts, .data/data/share/man/man1). Zip times: SOURCE_DATE_EPOCH.
wheelDir=$src/release/wheel
install -d "$wheelDir/data/scripts" "$wheelDir/data/data/share/man/man1"
install -m 0755 "$bin/stubstrip" "$wheelDir/data/scripts/"
install -m 0644 "$work/stage/docs/man/"*.1 "$wheelDir/data/data/share/man/man1/"
(cd "$wheelDir" && "$venv/bin/maturin" build --quiet "${cargoArgs[@]}" \
    --compatibility manylinux_2_5 musllinux_1_1 --out "$dist") >&2 || die "maturin build failed"
wheel=$(cd "$dist" && echo elfpatch-"$version"-*.whl)
[[ -f $dist/$wheel ]] || die "maturin wrote no wheel to $dist"
python3 - "$dist/$wheel" "$dist/elfpatch" "$dist/stubstrip" <<'EOF' || die "the wheel's binaries are not the release's"
import sys, zipfile
wheel, *bins = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for b in bins:
        name = b.rsplit("/", 1)[1]
        inside = [n for n in z.namelist() if n.endswith(".data/scripts/" + name)]
        if len(inside) != 1 or z.read(inside[0]) != open(b, "rb").read():
            sys.exit(f"{wheel}: {name} is not {b}")
EOF

# --- the sums -------------------------------------------------------------------------------------
(
    cd "$dist"
    files=()
    for f in *; do [[ $f == SHA256SUMS ]] || files+=("$f"); done
    sha256sum -- "${files[@]}" >SHA256SUMS
)
log "$name at ${commit:0:12} (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH) in target/dist:"
cat "$dist/SHA256SUMS" >&2
