# `import nixpkgs args` for the flake, as the tree's own default.nix, with one addition when the
# tree lacks pkgs/development/haskell-modules/hackage-packages.nix (the nixpkgs-slim snapshot does:
# it leaves out files of 4 MiB or more): shellcheck and nixfmt, Haskell packages that the flake's
# devShell and formatter name, become scripts, so that those outputs evaluate. Nothing of
# stubstrip's depends on them.
args:
let
  haskellMissing = !builtins.pathExists ./tree/pkgs/development/haskell-modules/hackage-packages.nix;
in
import ./tree (
  args
  // {
    overlays =
      (args.overlays or [ ])
      ++ (
        if haskellMissing then
          [
            (final: _: {
              shellcheck = final.writeShellScriptBin "shellcheck" "echo 'stand-in: the tree has no Haskell packages' >&2; exit 1";
              nixfmt = final.writeShellScriptBin "nixfmt" "echo 'stand-in: the tree has no Haskell packages' >&2; exit 1";
            })
          ]
        else
          [ ]
      );
  }
)
