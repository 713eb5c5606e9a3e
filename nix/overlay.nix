# How stubstripHook reaches a CUDA derivation, with no change to its expression:
#   1. This overlay adds `stubstrip` and `stubstripHook` to pkgs.
#   2. It appends an extension to `_cuda.extensions`, which nixpkgs applies to
#      every CUDA package set (cudaPackages, cudaPackages_12_8, ...).
#   3. That extension rebuilds each CUDA package holding stub libraries (a
#      `stubs` output, or `includeRemoveStubsFromRunpathHook` set) so that its
#      postFixup writes stubstripHook first into that output's
#      nix-support/propagated-native-build-inputs and propagated-build-inputs
#      (./add-hook-to-stubs.nix).
#   4. stdenv follows those files from any derivation that has, say,
#      cuda_cudart in buildInputs or nativeBuildInputs, and sources the hook.
# Opt out per derivation with `dontStubstrip = true;`, per CUDA package set by
# setting its `stubstripHook` to null (see nix/README-section.md).
final: prev:
let
  inherit (final) lib;
  addHookToStubs = import ./add-hook-to-stubs.nix { inherit lib; };

  cudaExtension =
    finalCuda: prevCuda:
    lib.mapAttrs (_: addHookToStubs finalCuda.stubstripHook) prevCuda
    // {
      # Hooks run on the build machine. An earlier extension may have set null.
      stubstripHook = prevCuda.stubstripHook or final.buildPackages.stubstripHook;
    };
in
{
  stubstrip = final.callPackage ./package.nix { };
  stubstripHook = final.callPackage ./hook.nix { };
}
// (
  if prev ? _cuda then
    {
      _cuda = prev._cuda.extend (
        _: prevCudaAttrs: { extensions = prevCudaAttrs.extensions ++ [ cudaExtension ]; }
      );
    }
  else
    # Older nixpkgs, without `_cuda`: only the default package set.
    { cudaPackages = prev.cudaPackages.overrideScope cudaExtension; }
)
