{
  description = "Mock nixpkgs for stubstrip's offline Nix tests (see ../README.md)";

  outputs =
    { self }:
    let
      lib = import ./lib.nix;
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs [
        "x86_64-linux"
        "aarch64-linux"
      ] (system: import ./. { inherit system; });
    };
}
