# Mock nixpkgs entry point: `import <mock> { system; overlays; }` gives a
# package set built as a fixed point over `overlays`, like nixpkgs'
# pkgs/top-level/default.nix and stage.nix (native only: buildPackages and
# the pkgs* spliced sets are the set itself).
{
  system ? builtins.currentSystem or "x86_64-linux",
  localSystem ? null,
  overlays ? [ ],
  config ? { },
  # Mock only: false gives a nixpkgs from before `_cuda.extensions`.
  withCudaExtensions ? true,
  # Mock only: binaries that rustPlatform.buildRustPackage installs.
  prebuilt ? if builtins.pathExists ./prebuilt then ./prebuilt else null,
}@args:
let
  lib = import ./lib.nix;
  hostSystem = if localSystem == null then system else localSystem.system or localSystem;

  base =
    self:
    let
      stdenvNoCC = import ./stdenv {
        inherit lib;
        system = hostSystem;
      };
      trivial = import ./trivial-builders.nix {
        inherit lib;
        stdenv = stdenvNoCC;
      };
      hostTools = import ./host-tools.nix {
        inherit lib;
        inherit (trivial) runCommand;
      };
      # stdenv.cc and its libc, as the tools derivations that hold gcc and ldd.
      stdenv = stdenvNoCC // {
        cc = hostTools.gcc // {
          libc = hostTools.glibc;
        };
      };
    in
    trivial
    // hostTools
    // {
      # glibc's static libraries (nix/package.nix links statically): the host's, found by gcc.
      glibc = hostTools.glibc // {
        static = hostTools.glibc;
      };
    }
    // import ./cuda {
      inherit lib withCudaExtensions;
      pkgs = self;
    }
    // {
      inherit lib stdenv stdenvNoCC config;
      system = hostSystem;
      path = ./.;

      buildPackages = self;
      pkgsBuildBuild = self;
      pkgsBuildHost = self;
      pkgsBuildTarget = self;
      pkgsHostHost = self;
      pkgsHostTarget = self;
      pkgsTargetTarget = self;

      newScope = extra: lib.callPackageWith (self // extra);
      callPackage = self.newScope { };
      callPackages = lib.callPackagesWith self;
      extend = f: import ./. (args // { overlays = overlays ++ [ f ]; });
      appendOverlays = more: import ./. (args // { overlays = overlays ++ more; });

      # pkgs/by-name/ad/addDriverRunpath/package.nix
      addDriverRunpath = self.makeSetupHook {
        name = "add-driver-runpath-hook";
        substitutions.driverLink = "/run/opengl-driver" + lib.optionalString stdenv.hostPlatform.isi686 "-32";
      } ./hooks/add-driver-runpath.sh;

      autoPatchelfHook = self.makeSetupHook { name = "auto-patchelf-hook"; } ./hooks/auto-patchelf.sh;

      # pkgs/by-name/in/installShellFiles: installManPage, installShellCompletion.
      installShellFiles = self.makeSetupHook { name = "install-shell-files"; } ./hooks/install-shell-files.sh;

      rustPlatform = import ./rust.nix {
        inherit lib prebuilt;
        inherit (self) stdenv cargo rustc;
      };

      # pkgs/build-support/mkshell/default.nix
      mkShell =
        {
          name ? "nix-shell",
          packages ? [ ],
          inputsFrom ? [ ],
          nativeBuildInputs ? [ ],
          buildInputs ? [ ],
          ...
        }@shellArgs:
        stdenv.mkDerivation (
          removeAttrs shellArgs [
            "packages"
            "inputsFrom"
          ]
          // {
            inherit name;
            nativeBuildInputs =
              packages ++ nativeBuildInputs ++ builtins.concatMap (d: d.nativeBuildInputs or [ ]) inputsFrom;
            buildInputs = buildInputs ++ builtins.concatMap (d: d.buildInputs or [ ]) inputsFrom;
            phases = [ "buildPhase" ];
            buildPhase = ''
              echo "mkShell: use nix develop" >> "$out"
            '';
          }
        );
    };
in
lib.fix (builtins.foldl' (acc: overlay: lib.extends overlay acc) base overlays)
