# shellcheck shell=bash
# Sourced by tests/nixpkgs/run.sh (which defines pass, fail, here, repo, work, nixOpts and exports
# NIXPKGS) for the opt-in part `release` (./README.md): nixpkgs' package, nix/upstream's
# pkgs/by-name/st/stubstrip, built inside the real tree from the release that release/build.sh
# made in target/dist (made first when it is not there), with the hashes the package names.
#
#  1. nix/upstream has the hashes of this release (release/upstream_hashes.py --check).
#  2. The source tarball added to the store (nix-store --add-fixed) lands at the output path of
#     the package's `src` (its fetchurl): Nix's own hash agrees, and the build fetches nothing.
#  3. cargoHash: nixpkgs' own fetch-cargo-vendor-util (from the tree, run on the host in a virtual
#     environment with its two PyPI modules) makes fetchCargoVendor's fixed output from the
#     tarball's Cargo.lock (crates from static.crates.io); added to the store it lands at the
#     output path of the package's `cargoDeps.vendorStaging`. Its `create-vendor` makes the vendor
#     directory the build uses (./rust.nix says why not the derivation).
#  4. The real buildRustPackage builds the package from the tarball (./rust.nix, fromRelease):
#     both binaries static (no PT_INTERP, no DT_NEEDED), the `dist` profile, the check
#     phase's `cargo test --workspace` passing, the manual pages, completions and the setup hooks
#     installed, passthru.setupHookScript the release's hook.
#  5. pkgsStatic.stubstrip evaluates (musl: static by itself, no +crt-static), with Nix 2.26.
# shellcheck disable=SC2154 # pass, fail, here, repo, work and nixOpts come from run.sh

releaseTests() {
  local version dist tarball name
  version=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["workspace"]["package"]["version"])' "$repo/Cargo.toml")
  name=stubstrip-$version
  dist=$repo/target/dist
  tarball=$dist/$name.tar.gz
  if [[ ! -f $tarball ]]; then
    echo "tests/nixpkgs release: no $tarball; running release/build.sh"
    bash "$repo/release/build.sh" >"$work/release-build.log" 2>&1 || {
      fail "release: bash release/build.sh" "$(tail -5 "$work/release-build.log")"
      return 0
    }
  fi

  # 1. The hashes.
  if python3 "$repo/release/upstream_hashes.py" --check >"$work/hashes.log" 2>&1; then
    pass "release: nix/upstream names this release's hashes ($(grep -o 'sha256-[^ ]*' "$work/hashes.log" | tr '\n' ' '))"
  else
    fail "release: nix/upstream names this release's hashes" "$(tail -3 "$work/hashes.log")"
    return 0
  fi

  # What the package says, evaluated in the real tree with nix/upstream applied (its own stdenv: a
  # fixed output's path is its name and hash, and the native stdenv cannot evaluate the fetcher's
  # tools).
  local evalExpr="let pkgs = import $here/pkgs.nix { native = false; }; in { src = pkgs.stubstrip.src.outPath;
    staging = pkgs.stubstrip.cargoDeps.vendorStaging.outPath; }"
  local paths
  paths=$(nix-instantiate "${nixOpts[@]}" --eval --strict --json -E "$evalExpr" 2>"$work/eval.err") || {
    fail "release: evaluate the package's src and cargoDeps" "$(tail -5 "$work/eval.err")"
    return 0
  }

  # 2. The tarball.
  local srcPath wantSrc
  wantSrc=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["src"])' <<<"$paths")
  srcPath=$(nix-store --add-fixed sha256 "$tarball" 2>"$work/add.err")
  if [[ -n $srcPath && $srcPath == "$wantSrc" ]]; then
    pass "release: the tarball in the store is the package's src ($srcPath)"
  else
    fail "release: the tarball in the store is the package's src" "added $srcPath, the package wants $wantSrc $(cat "$work/add.err")"
    return 0
  fi

  # 3. cargoHash, with nixpkgs' own fetcher script.
  local util=$NIXPKGS/pkgs/build-support/rust/fetch-cargo-vendor-util.py staging vendor wantStaging stagingPath
  staging=$work/$name-vendor-staging
  vendor=$work/$name-vendor
  wantStaging=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["staging"])' <<<"$paths")
  mkdir -p "$work/release-src"
  tar -xzf "$tarball" -C "$work/release-src"
  # The script needs Python >= 3.12 (PEP 701 f-strings), as nixpkgs' python3 is: $FETCHER_PYTHON,
  # one on PATH, or one pyenv has installed.
  local py='' p candidates=(python3.13 python3.12 python3)
  [[ -z ${FETCHER_PYTHON-} ]] || candidates=("$FETCHER_PYTHON" "${candidates[@]}")
  if command -v pyenv >/dev/null; then
    for p in $(pyenv versions --bare 2>/dev/null); do candidates+=("$(pyenv root)/versions/$p/bin/python3"); done
  fi
  for p in "${candidates[@]}"; do
    if command -v "$p" >/dev/null && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      py=$p
      break
    fi
  done
  [[ -n $py ]] || {
    fail "release: cargoHash" "nixpkgs' fetch-cargo-vendor-util needs Python >= 3.12; none on PATH"
    return 0
  }
  if "$py" -m venv "$work/fetcher" &&
    "$work/fetcher/bin/pip" install -q --disable-pip-version-check requests==2.32.5 tomli-w==1.2.0 &&
    (cd "$work/release-src/$name" && "$work/fetcher/bin/python" "$util" create-vendor-staging ./Cargo.lock "$staging") \
      >"$work/staging.log" 2>&1; then
    stagingPath=$(nix-store --add-fixed --recursive sha256 "$staging")
    if [[ $stagingPath == "$wantStaging" ]]; then
      pass "release: nixpkgs' fetch-cargo-vendor-util's output is the package's cargoDeps.vendorStaging (cargoHash)"
    else
      fail "release: cargoHash" "fetch-cargo-vendor-util's output is $stagingPath, the package wants $wantStaging"
      return 0
    fi
  else
    fail "release: nixpkgs' fetch-cargo-vendor-util create-vendor-staging" "$(tail -5 "$work/staging.log")"
    return 0
  fi
  if ! PATH=$work/fetcher/bin:$PATH "$work/fetcher/bin/python" "$util" create-vendor "$staging" "$vendor" >>"$work/staging.log" 2>&1; then
    fail "release: fetch-cargo-vendor-util create-vendor" "$(tail -5 "$work/staging.log")"
    return 0
  fi

  # 4. The build.
  local start=$SECONDS out drv log tests failedTests b
  if out=$(nix-build "${nixOpts[@]}" --no-out-link "$here/rust.nix" --arg fromRelease true --arg vendor "$vendor" \
    --argstr toolchain "$(rustc --print sysroot)" 2>"$work/release.err"); then
    drv=$(nix-store -qd "$out")
    log=$(nix-store -l "$drv" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g; s/\x1b(B//g')
    tests=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' <<<"$log" | awk '{ s += $1 } END { print s + 0 }')
    failedTests=$(grep -c '^test result: FAILED' <<<"$log")
    if [[ ${tests:-0} -gt 0 && $failedTests == 0 ]] && grep -q 'cargoCheckHook flags: .*--workspace' <<<"$log"; then
      pass "release: buildRustPackage builds the package from $name.tar.gz; its checkPhase passes $tests tests ($((SECONDS - start)) s)"
    else
      fail "release: the package's check phase" "tests=$tests failed=$failedTests"
    fi
    if grep -q 'cargoBuildHook flags: .*--profile dist' <<<"$log"; then
      pass "release: cargo builds with the dist profile"
    else
      fail "release: cargo builds with the dist profile" "$(grep 'cargoBuildHook flags' <<<"$log")"
    fi
    for b in elfpatch stubstrip; do
      if [[ -x $out/bin/$b ]] && ! readelf -lW "$out/bin/$b" | grep -Eq '^\s+INTERP\s' &&
        ! readelf -dW "$out/bin/$b" | grep -q '(NEEDED)' && "$out/bin/$b" --version >/dev/null; then
        pass "release: $out/bin/$b is static (no PT_INTERP, no DT_NEEDED) and runs"
      else
        fail "release: $out/bin/$b is static and runs" "$(readelf -lW "$out/bin/$b" 2>&1 | grep -E 'INTERP|Error'; readelf -dW "$out/bin/$b" | grep NEEDED)"
      fi
    done
    local missing=()
    for f in share/man/man1/elfpatch.1.gz share/man/man1/stubstrip.1.gz share/bash-completion/completions/elfpatch.bash \
      share/zsh/site-functions/_stubstrip share/fish/vendor_completions.d/elfpatch.fish \
      share/stubstrip/stubstrip-hook.sh share/stubstrip/stubstrip-check-hook.sh; do
      [[ -s $out/$f ]] || missing+=("$f")
    done
    if ((${#missing[@]} == 0)) && cmp -s "$out/share/stubstrip/stubstrip-hook.sh" "$work/release-src/$name/hooks/stubstrip-hook.sh"; then
      pass "release: manual pages, completions and the release's setup hooks are installed"
    else
      fail "release: manual pages, completions and setup hooks installed" "missing: ${missing[*]} ($(find "$out/share" | head -20))"
    fi
    echo "tests/nixpkgs release: the package is $out"
  else
    fail "release: buildRustPackage builds the package from $name.tar.gz" "$(sed 's/\x1b\[[0-9;]*m//g' "$work/release.err" |
      grep -E -m6 "panicked at|^test result: FAILED|^error" || tail -5 "$work/release.err")"
  fi

  # 5. pkgsStatic, evaluated in the tree as it is (its own stdenv), with Nix 2.26.
  local staticExpr="let s = (import $here/pkgs.nix { native = false; }).pkgsStatic.stubstrip; in
    [ s.stdenv.hostPlatform.isStatic s.stdenv.hostPlatform.isMusl (s.RUSTFLAGS or \"\") (builtins.unsafeDiscardStringContext s.drvPath) ]"
  local static
  if static=$("$NIX_226" eval --impure --json --expr "$staticExpr" 2>"$work/static.err") &&
    [[ $static == '[true,true,"",'* ]]; then
    pass "release: pkgsStatic.stubstrip evaluates: musl, static by itself, no RUSTFLAGS of ours ($static)"
  else
    fail "release: pkgsStatic.stubstrip evaluates" "$static $(tail -3 "$work/static.err")"
  fi
}
