# The real rustPlatform.buildRustPackage of the tree building nix/upstream's
# pkgs/by-name/st/stubstrip/package.nix: its cargo build, and its check phase running the whole
# Rust test suite (`cargo test --workspace`), offline.
#   src         fromRelease = false (part `rust`): the package's own fileset of this checkout
#               (nix/package.nix's: Cargo.toml, Cargo.lock, crates/) instead of the release
#               tarball; true (part `release`): the package's own `src`, the fetchurl of the release
#               tarball, whose output run.sh put into the store (nix-store --add-fixed), so nothing
#               is fetched
#   cargoDeps   the vendor directory made on the host by run.sh: `cargo vendor` of Cargo.lock
#               (`rust`), or nixpkgs' own fetch-cargo-vendor-util's `create-vendor` (`release`),
#               in place of fetchCargoVendor's second step, whose Python tools cannot be built
#               offline (its first step, the fixed-output download, is checked against cargoHash
#               by run.sh)
#   stand-ins   rustc and cargo are the host's toolchain (`toolchain`, `rustc --print sysroot`),
#               through nixpkgs' makeRustPlatform, so nixpkgs' cargo hooks (setup, build, check,
#               install) run; diffutils (the setup hook's lock-file check), and gcc, binutils,
#               elfutils and the libc's ldd for the check phase are the host's
#   auditable   off: cargo-auditable would be built from source; it is marked broken, which is
#               what buildRustPackage's default (`auditable ? !cargo-auditable.meta.broken`) reads
#   glibc       static linking (+crt-static) takes `glibc.static`: the host's libc.a, which the
#               host's gcc finds by itself, so the stand-in is empty
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  vendor,
  toolchain,
  fromRelease ? false,
}:
let
  # `.override` gives the same stand-in (cargo-auditable's wrapper overrides cargo).
  hostBins =
    pkgs: name: bins: extra:
    pkgs.lib.makeOverridable (_: pkgs.stdenv.mkDerivation {
      pname = "stubstrip-host-${name}";
      version = "host";
      dontUnpack = true;
      dontPatchELF = true;
      dontStrip = true;
      installPhase = ''
        mkdir -p $out/bin
        for b in ${toString bins}; do
          ln -s "$b" $out/bin/
        done
        ${extra}
      '';
    }) { };
  rustOverlay = final: prev: {
    rustc = hostBins final "rustc" [
      "${toolchain}/bin/rustc"
      "${toolchain}/bin/rustdoc"
    ] "" // {
      inherit (prev.rustc) targetPlatforms badTargetPlatforms;
    };
    cargo = hostBins final "cargo" [ "${toolchain}/bin/cargo" ] "";
    rustPlatform = final.makeRustPlatform { inherit (final) rustc cargo; };
    cargo-auditable = prev.cargo-auditable // {
      meta = prev.cargo-auditable.meta // {
        broken = true;
      };
    };
    diffutils = hostBins final "diffutils" [
      "/usr/bin/diff"
      "/usr/bin/cmp"
    ] "";
  };
  pkgs = import ./pkgs.nix {
    inherit nixpkgs system;
    extraOverlays = [ rustOverlay ];
  };
  inherit (pkgs) lib;
  checkTools = hostBins pkgs "check-tools" [
    "/usr/bin/gcc"
    "/usr/bin/cc"
    "/usr/bin/readelf"
    "/usr/bin/objdump"
    "/usr/bin/strip"
    "/usr/bin/ld"
    "/usr/bin/eu-elflint"
    "/usr/bin/eu-readelf"
    "/usr/bin/ldd"
  ] "";
  local = import ../../nix/package.nix {
    inherit lib;
    inherit (pkgs) stdenv rustPlatform;
    glibc = null;
    gcc = null;
    patchelf = null;
    binutils = null;
    elfutils = null;
  };
in
(pkgs.stubstrip.override {
  gcc = checkTools;
  binutils = checkTools;
  elfutils = checkTools;
  glibc = {
    static = hostBins pkgs "glibc-static" [ ] "";
  };
}).overrideAttrs
  (
    {
      # A distinctive name: the store is shared.
      pname = if fromRelease then "stubstrip-nixpkgs-release" else "stubstrip-nixpkgs-rust";
    }
    // (if fromRelease then { } else { inherit (local) src; })
    // {
      cargoDeps = vendor;
      cargoHash = null;
      # Without a sandbox $HOME (/homeless-shelter) is writable, and cargo would make its cache
      # there, and fish (which the completion tests start when it is on PATH, as the host's is
      # here) its configuration; Nix then refuses every later build until it is removed.
      postUnpack = ''
        export CARGO_HOME=$NIX_BUILD_TOP/cargo-home
        export HOME=$NIX_BUILD_TOP/home
        mkdir -p "$HOME"
      '';
    }
  )
