# pkgs/by-name/st/stubstrip/package.nix: the stubstrip workspace, the `stubstrip` CLI that
# removeStubsFromRunpathHook runs and the patchelf-compatible `elfpatch` CLI. Its check phase runs
# the whole Rust test suite, which compiles small C programs, edits them and inspects the result.
{
  lib,
  stdenv,
  rustPlatform,
  installShellFiles,
  fetchFromGitHub,
  gcc,
  patchelf,
  binutils,
  elfutils,
}:
rustPlatform.buildRustPackage (finalAttrs: {
  pname = "stubstrip";
  version = "0.1.0";

  src = fetchFromGitHub {
    owner = "stubstrip";
    repo = "stubstrip";
    tag = "v${finalAttrs.version}";
    # Filled in when the release is tagged.
    hash = lib.fakeHash;
  };

  cargoHash = lib.fakeHash;

  # Manual pages (stubstrip.1, elfpatch.1) and bash, zsh and fish completions, made by each
  # binary from the argument definitions it parses with (`--generate-man`,
  # `--generate-completion SHELL`), so they cannot drift from it. A cross build cannot run the
  # binary it built and goes without them.
  nativeBuildInputs = [ installShellFiles ];
  postInstall = lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
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
    setupHookScript = "${finalAttrs.src}/hooks/stubstrip-hook.sh";
    # What the outputs the hook fixed propagate to their consumers (a setup hook made of it by
    # removeStubsFromRunpathHook's package).
    checkHookScript = "${finalAttrs.src}/hooks/stubstrip-check-hook.sh";
  };

  meta = {
    description = "Replace CUDA stub directories in ELF RUNPATHs with the driver link";
    homepage = "https://github.com/stubstrip/stubstrip";
    license = lib.licenses.mit;
    mainProgram = "stubstrip";
    platforms = lib.platforms.linux;
  };
})
