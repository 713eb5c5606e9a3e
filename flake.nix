{
  description = "stubstrip: replace CUDA stub directories in ELF RUNPATHs with the driver link";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      # nixpkgs for each system, with this flake's overlay applied.
      forAllSystems =
        f:
        lib.genAttrs systems (
          system:
          f (
            import nixpkgs {
              inherit system;
              overlays = [ self.overlays.default ];
            }
          )
        );
    in
    {
      overlays.default = import ./nix/overlay.nix;

      packages = forAllSystems (pkgs: {
        default = pkgs.stubstrip;
        inherit (pkgs) stubstrip stubstripHook;
      });

      # `nix run github:<owner>/<repo> -- fix ./result`
      apps = forAllSystems (pkgs: {
        default = {
          type = "app";
          program = lib.getExe pkgs.stubstrip;
          meta.description = pkgs.stubstrip.meta.description;
        };
      });

      # The package (its checkPhase runs the Rust tests) and the hook's tests
      # from nix/tests, the same set as stubstripHook.passthru.tests.
      checks = forAllSystems (pkgs: { stubstrip = pkgs.stubstrip; } // pkgs.stubstripHook.tests);

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          packages = [
            pkgs.cargo
            pkgs.rustc
            pkgs.clippy
            pkgs.rustfmt
            pkgs.patchelf
            pkgs.elfutils
            pkgs.shellcheck
            pkgs.nixfmt
          ];
        };
      });

      formatter = forAllSystems (pkgs: pkgs.nixfmt-tree);
    };
}
