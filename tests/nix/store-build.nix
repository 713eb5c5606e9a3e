# What tests/nix/run.sh builds for real in the local store: the overlay,
# evaluated against the mock nixpkgs, and everything it produces --
# stubstrip (from prebuilt binaries), stubstripHook (substituted by the
# mock's makeSetupHook), the hook's tests from nix/tests, and consumers of
# the mock's own cudaPackages, whose stubs outputs the overlay rewrote.
{
  # A directory holding the stubstrip and elfpatch binaries.
  prebuilt,
  system ? builtins.currentSystem,
}:
let
  importMock =
    overlays:
    import ./mock-nixpkgs {
      inherit system prebuilt overlays;
    };
  pkgs = importMock [ (import ../../nix/overlay.nix) ];
  plain = importMock [ ];
  runpathTest = args: pkgs.callPackage ../../nix/tests/runpath-test.nix args;
in
{
  inherit (pkgs) stubstrip stubstripHook;
  inherit (pkgs.stubstripHook) tests;
  cudart = pkgs.cudaPackages.cuda_cudart;
  # Consumers of the mock cudaPackages: nothing but cuda_cudart (single output, its stub in
  # out/lib/stubs, as in nixpkgs) in an input list. The mock's autoPatchelfHook does not recurse
  # into lib/, so it is told where the stub is, in both lists.
  overlay = {
    cudart-build-inputs = runpathTest {
      name = "mock-cudart-build-inputs";
      cuda = pkgs.cudaPackages.cuda_cudart;
      stubsLibDir = "${pkgs.cudaPackages.cuda_cudart}/lib/stubs";
      searchStubsLibDir = true;
    };
    cudart-native-build-inputs = runpathTest {
      name = "mock-cudart-native-build-inputs";
      cuda = pkgs.cudaPackages.cuda_cudart;
      cudaIn = "nativeBuildInputs";
      stubsLibDir = "${pkgs.cudaPackages.cuda_cudart}/lib/stubs";
    };
    cudart-13 = runpathTest {
      name = "mock-cudart-13";
      cuda = pkgs.cudaPackages_13.cuda_cudart;
      stubsLibDir = "${pkgs.cudaPackages_13.cuda_cudart}/lib/stubs";
      searchStubsLibDir = true;
    };
    # The package-set switch (stubstripHook = null in the CUDA set): nixpkgs' own hook again. It
    # too replaces the stub entry with the driver link, but leaves the checks after fixup
    # nothing to load libcuda.so.1 from: the installCheck expects the probe not to load, as with
    # dontStubstripCheckFallback.
    cudart-set-opt-out = runpathTest {
      name = "mock-cudart-set-opt-out";
      cuda = (pkgs.cudaPackages.overrideScope (_: _: { stubstripHook = null; })).cuda_cudart;
      stubsLibDir = "${plain.cudaPackages.cuda_cudart}/lib/stubs";
      searchStubsLibDir = true;
      stubstripHook = null;
      dontStubstripCheckFallback = true;
    };
  };

  # Must fail to build, as the real suite's negative does: without the overlay nixpkgs' hook
  # alone replaces the stub entry, and the installCheck cannot load libcuda.so.1.
  negative.without-overlay = plain.callPackage ../../nix/tests/runpath-test.nix {
    name = "negative-without-overlay";
    cuda = plain.cudaPackages.cuda_cudart;
    stubsLibDir = "${plain.cudaPackages.cuda_cudart}/lib/stubs";
    searchStubsLibDir = true;
    stubstripHook = null;
  };
}
