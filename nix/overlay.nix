# The flake's overlay: stubstrip built from this checkout, and one stub mechanism in every CUDA
# derivation, ours.
#   1. It adds `stubstrip` (./package.nix) and `stubstripHook` (./hook.nix) to pkgs.
#   2. It appends an extension to `_cuda.extensions`, which nixpkgs applies to every CUDA package
#      set (cudaPackages, cudaPackages_12_9, cudaPackages_13, ...).
#   3. That extension replaces the set's `removeStubsFromRunpathHook` by ours under the same name
#      (./upstream/pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook/package.nix,
#      the file the nixpkgs pull request would change). buildRedist already writes that hook into
#      nix-support/propagated-build-inputs of every output holding stubs (cuda_cudart's `out`, the
#      `stubs` outputs of cuda_nvml_dev, libcublas, ...) and its build checks that the name is
#      there; so those packages now propagate stubstrip, nixpkgs' bash hook no longer runs, and no
#      other derivation changes (tests/nixpkgs compares the drv paths).
#   4. stdenv follows that file from any derivation with such a package in its inputs and sources
#      the hook.
# On a nixpkgs without that hook (before PR #459416: stubs in a `stubs` output, nothing removing
# them) the extension makes every package with a `stubs` output propagate stubstripHook instead
# (./add-hook-to-stubs.nix); on one without `_cuda`, for cudaPackages only.
# Opt out per derivation with `dontStubstrip = true;`, per CUDA package set by setting its
# `stubstripHook` to null (nixpkgs' own hook then stays); see nix/README-section.md.
final: prev:
let
  inherit (final) lib;
  addHookToStubs = import ./add-hook-to-stubs.nix { inherit lib; };
  hookPackage = ./upstream/pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook/package.nix;

  cudaExtension =
    finalCuda: prevCuda:
    (
      if prevCuda ? removeStubsFromRunpathHook then
        {
          removeStubsFromRunpathHook =
            if finalCuda.stubstripHook == null then
              prevCuda.removeStubsFromRunpathHook
            else
              finalCuda.callPackage hookPackage { };
        }
      else
        lib.mapAttrs (_: addHookToStubs finalCuda.stubstripHook) prevCuda
    )
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
    { cudaPackages = prev.cudaPackages.overrideScope cudaExtension; }
)
