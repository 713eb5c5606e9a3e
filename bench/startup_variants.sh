#!/usr/bin/env bash
# How the released elfpatch is linked, chosen by measurement: builds elfpatch in each variant
# below (each in its own target directory, target/startup-variants/NAME, so none rebuilds
# another) and times them all in one run of bench/startup_bench.py, interleaved call by call,
# with patchelf 0.19.3, `cargo build --release`'s dynamic build and the two no-op floors.
# bench/README.md ("Start-up: how the release is linked") records a run and the choice.
#
#   bash bench/startup_variants.sh [--calls 500] [VARIANT...]     (default: every variant)
#
# Needs rustup's x86_64-unknown-linux-musl target (`rustup target add x86_64-unknown-linux-musl`)
# and patchelf 0.19.3 on PATH (or PATCHELF=...). x86_64 only: the variants name its targets.
set -euo pipefail
cd "$(dirname "$0")/.."

calls=500
if [[ ${1-} == --calls ]]; then
    calls=$2
    shift 2
fi

musl=x86_64-unknown-linux-musl
gnu=x86_64-unknown-linux-gnu
nopie='-C relocation-model=static'
# -mallocng: without the crate's default `dlmalloc` feature, the C library's malloc (musl's).
mallocng=--no-default-features
# NAME  TARGET  PROFILE  then RUSTFLAGS (for the target only: cargo is given --target) and cargo
# options (`--config X`, `--no-default-features`)
variants=(
    "musl-pie-release-mallocng  $musl release $mallocng"
    "musl-pie-release           $musl release"
    "musl-nopie-dist-mallocng   $musl dist    $nopie $mallocng"
    "musl-pie-dist              $musl dist"
    "musl-nopie-dist            $musl dist    $nopie"
    "musl-nopie-dist-unwind     $musl dist    $nopie --config profile.dist.panic=\"unwind\""
    "musl-nopie-dist-Os         $musl dist    $nopie --config profile.dist.opt-level=\"s\""
    "musl-nopie-dist-nosep      $musl dist    $nopie -C link-arg=-Wl,-z,noseparate-code"
    "glibc-nopie-dist           $gnu  dist    $nopie -C target-feature=+crt-static"
)

wanted=("$@")
compare=()
for v in "${variants[@]}"; do
    read -r name target profile rest <<<"$v"
    if ((${#wanted[@]})) && [[ " ${wanted[*]} " != *" $name "* ]]; then
        continue
    fi
    # `--config X` and `--no-default-features` go to cargo; the rest are rustflags.
    config=()
    flags=()
    read -ra words <<<"${rest-}"
    for ((i = 0; i < ${#words[@]}; i++)); do
        case ${words[i]} in
        --config)
            config+=(--config "${words[i + 1]}")
            i=$((i + 1))
            ;;
        --no-default-features) config+=("${words[i]}") ;;
        *) flags+=("${words[i]}") ;;
        esac
    done
    dir=target/startup-variants/$name
    echo "startup_variants: building $name ($target, profile $profile${rest:+, $rest})" >&2
    RUSTFLAGS="${flags[*]}" CARGO_TARGET_DIR=$dir cargo build --locked -q -p elfpatch --bin elfpatch \
        --target "$target" --profile "$profile" "${config[@]}"
    exe=$dir/$target/$profile/elfpatch
    echo "startup_variants: $name: $(stat -c %s "$exe") bytes, $(file -b "$exe" | cut -d, -f1-4)" >&2
    compare+=(--compare "$name=$exe")
done

# The dynamic build the suites use, brought up to date (startup_bench.py only builds a missing one).
cargo build --locked -q --release -p elfpatch --bin elfpatch
args=(--no-static --calls "$calls" "${compare[@]}")
[[ -n ${PATCHELF-} ]] && args+=(--patchelf "$PATCHELF")
exec python3 bench/startup_bench.py "${args[@]}"
