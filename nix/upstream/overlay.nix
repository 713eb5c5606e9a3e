# This directory applied to a nixpkgs as an overlay, as the pull request would change the tree:
# `stubstrip` from pkgs/by-name, and in every CUDA package set (through `_cuda.extensions`, which
# nixpkgs applies to each) `removeStubsFromRunpathHook` from
# pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook/package.nix, as
# packagesFromDirectoryRecursive would call it. tests/nixpkgs/ runs against a real tree with this
# overlay.
final: prev: {
  stubstrip = final.callPackage ./pkgs/by-name/st/stubstrip/package.nix { };
  _cuda = prev._cuda.extend (
    _: prevCuda: {
      extensions = prevCuda.extensions ++ [
        (finalCuda: _: {
          removeStubsFromRunpathHook =
            finalCuda.callPackage ./pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook/package.nix
              { };
        })
      ];
    }
  );
}
