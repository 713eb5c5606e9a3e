# pkgs/by-name/st/stubstrip/package.nix: the stubstrip workspace, the `stubstrip` CLI that
# removeStubsFromRunpathHook runs and the patchelf-compatible `elfpatch` CLI, built from the
# release's source tarball (what stubstrip's release/build.sh makes and publishes with the release;
# its sha256 is in the release's SHA256SUMS). Its check phase runs the whole Rust test suite, which
# compiles small C programs, edits them and inspects the result.
{
  lib,
  stdenv,
  rustPlatform,
  fetchurl,
  installShellFiles,
  glibc,
  gcc,
  patchelf,
  binutils,
  elfutils,
}:
rustPlatform.buildRustPackage (finalAttrs: {
  pname = "stubstrip";
  version = "0.1.0";

  src = fetchurl {
    url = "https://github.com/stubstrip/stubstrip/releases/download/v${finalAttrs.version}/stubstrip-${finalAttrs.version}.tar.gz";
    hash = "sha256-3j+THB6xNcdDn6bsUlGaRAkbSrA20EpoTcEWUExHVCc=";
  };

  cargoHash = "sha256-gQQJk97bEnuMiHzTPdyp4S50NyMHxBJ52Bm2w2VHYZ4=";

  strictDeps = true;
  __structuredAttrs = true;

  # Statically linked, as the release's binaries: elfpatch is started once per file where it
  # stands in for patchelf, and a static binary skips the dynamic loader. The `dist` profile is
  # the release's (fat LTO, one codegen unit, panic=abort). On glibc that takes +crt-static and
  # glibc's static libraries; pkgsStatic builds with musl, static by itself. RUSTFLAGS reach only
  # the target's crates: buildRustPackage passes --target.
  buildType = "dist";
  RUSTFLAGS = lib.optionals stdenv.hostPlatform.isGnu [ "-Ctarget-feature=+crt-static" ];
  buildInputs = lib.optionals stdenv.hostPlatform.isGnu [ glibc.static ];

  # The tests, as CI runs them: the release profile (the dist profile's fat LTO would make every
  # test binary slow to link, and tests need unwinding).
  checkType = "release";

  # Manual pages (stubstrip.1, elfpatch.1) and bash, zsh and fish completions, made by the
  # binaries from the argument definitions they parse with (`--generate-man`,
  # `--generate-completion SHELL`), so they cannot drift from them. A cross build cannot run the binaries it built and goes without them.
  # The setup hooks are installed too: removeStubsFromRunpathHook is built from the ones of this
  # release (passthru below).
  nativeBuildInputs = [ installShellFiles ];
  postInstall = ''
    install -Dm644 -t $out/share/stubstrip hooks/stubstrip-hook.sh hooks/stubstrip-check-hook.sh
  ''
  + lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
    # --- manual pages and completions: the command lines (release/build.sh runs the same) ---
    $out/bin/stubstrip --generate-man > stubstrip.1
    installManPage stubstrip.1
    installShellCompletion --cmd stubstrip \
      --bash <($out/bin/stubstrip --generate-completion bash) \
      --zsh <($out/bin/stubstrip --generate-completion zsh) \
      --fish <($out/bin/stubstrip --generate-completion fish)
    $out/bin/elfpatch --generate-man > elfpatch.1
    installManPage elfpatch.1
    installShellCompletion --cmd elfpatch \
      --bash <($out/bin/elfpatch --generate-completion bash) \
      --zsh <($out/bin/elfpatch --generate-completion zsh) \
      --fish <($out/bin/elfpatch --generate-completion fish)
  '';

  # A virtual workspace: `cargo build` and `cargo test` at its root cover every member, so both
  # binaries are installed and every crate's tests run.
  cargoTestFlags = [ "--workspace" ];

  # The tests link C programs with the compiler on PATH (nixpkgs' cc wrapper) and compare the
  # RUNPATH they asked for with the file's: stdenv's own `-rpath $out/lib` would add an entry. No
  # installed file needs $out/lib in its RUNPATH.
  env.NIX_NO_SELF_RPATH = true;

  nativeCheckInputs = [
    gcc
    patchelf
    binutils
    elfutils
    (lib.getBin stdenv.cc.libc)
  ];

  passthru = {
    # The setup hook ships with the tool, so that the flags it passes are always the ones this
    # binary takes; cudaPackages.removeStubsFromRunpathHook is built from it.
    setupHookScript = "${finalAttrs.finalPackage}/share/stubstrip/stubstrip-hook.sh";
    # What the outputs the hook fixed propagate to their consumers (a setup hook made of it by
    # removeStubsFromRunpathHook's package).
    checkHookScript = "${finalAttrs.finalPackage}/share/stubstrip/stubstrip-check-hook.sh";
  };

  meta = {
    description = "Replace CUDA stub directories in ELF RUNPATHs with the driver link";
    homepage = "https://github.com/stubstrip/stubstrip";
    changelog = "https://github.com/stubstrip/stubstrip/blob/v${finalAttrs.version}/CHANGELOG.md";
    license = lib.licenses.mit;
    mainProgram = "stubstrip";
    platforms = lib.platforms.linux;
  };
})
