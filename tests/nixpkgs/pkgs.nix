# The nixpkgs tree at $NIXPKGS (or `nixpkgs`) as the suite uses it.
#   upstream  apply nix/upstream (./README.md: "what is applied") as an overlay
#   native    build with nixpkgs' native stdenv over the host's tools (./native-stages.nix) and
#             the host stand-ins (./stand-ins.nix); false: the tree's own stdenv, for evaluation
#   extraOverlays  after those
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  upstream ? true,
  native ? true,
  extraOverlays ? [ ],
}:
assert nixpkgs != "" || throw "set NIXPKGS to a nixpkgs tree";
import ./import-nixpkgs.nix nixpkgs (
  {
    localSystem = { inherit system; };
    config = {
      allowUnfree = true;
      cudaSupport = true;
    };
    overlays =
      (if native then [ (import ./stand-ins.nix) ] else [ ])
      ++ (if upstream then [ (import ../../nix/upstream/overlay.nix) ] else [ ])
      ++ extraOverlays;
  }
  // (if native then { stdenvStages = import ./native-stages.nix nixpkgs; } else { })
)
