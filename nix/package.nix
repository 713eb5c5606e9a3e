# The stubstrip workspace: the `stubstrip` CLI (crates/stubstrip) and the
# patchelf-compatible `elfpatch` CLI (crates/elfpatch).
{
  lib,
  stdenv,
  rustPlatform,
  installShellFiles,
  glibc,
  gcc,
  patchelf,
  binutils,
  elfutils,
}:
let
  workspace = (lib.importTOML ../Cargo.toml).workspace.package;
in
rustPlatform.buildRustPackage {
  pname = "stubstrip";
  inherit (workspace) version;

  # Only what cargo reads, so editing nix/, hooks/ or docs does not rebuild.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../crates
      # The README's library snippet is one of elfpatch's doctests (crates/elfpatch/src/lib.rs).
      ../README.md
    ];
  };

  cargoLock.lockFile = ../Cargo.lock;

  # Statically linked, as the release's binaries (release/README.md): elfpatch is started once per
  # file where it stands in for patchelf, and a static binary skips the dynamic loader. The `dist`
  # profile is the release's (fat LTO, one codegen unit, panic=abort; Cargo.toml). On glibc that
  # takes +crt-static and glibc's static libraries; pkgsStatic builds with musl, static by itself.
  # RUSTFLAGS reach only the target's crates (buildRustPackage passes --target). bench/README.md
  # ("Start-up") has what each choice costs per call.
  buildType = "dist";
  RUSTFLAGS = lib.optionals stdenv.hostPlatform.isGnu [ "-Ctarget-feature=+crt-static" ];
  buildInputs = lib.optionals stdenv.hostPlatform.isGnu [ glibc.static ];
  # The tests as CI runs them: the release profile (fat LTO would make every test binary slow to
  # link, and tests need unwinding).
  checkType = "release";

  # Manual pages (stubstrip.1, elfpatch.1) and bash, zsh and fish completions, made by the
  # binaries from the argument definitions they parse with (`--generate-man`,
  # `--generate-completion SHELL`), so they cannot drift from them. A cross build cannot run the
  # binaries it built and goes without them.
  nativeBuildInputs = [ installShellFiles ];
  postInstall = lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
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

  # `cargo build` / `cargo test` at the root of a virtual workspace cover every
  # member, so both binaries are installed and every crate's tests run.
  cargoTestFlags = [ "--workspace" ];

  # The tests compile small C programs, edit them and inspect the result with
  # readelf, strip, eu-elflint and ldd (from the libc's bin output).
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
    # The setup hook ships with the tool (cudaPackages.removeStubsFromRunpathHook is built from
    # it, ./upstream); outside the source, so that editing it does not rebuild the package.
    setupHookScript = ../hooks/stubstrip-hook.sh;
    # What the outputs the hook fixed propagate to their consumers (hooks/stubstrip-check-hook.sh).
    checkHookScript = ../hooks/stubstrip-check-hook.sh;
  };

  meta = {
    description = "Replace CUDA stub directories in ELF RUNPATHs with the driver link";
    homepage = workspace.repository;
    license = lib.licenses.mit;
    mainProgram = "stubstrip";
    platforms = lib.platforms.linux;
  };
}
