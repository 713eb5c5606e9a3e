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
  # Consumers of the mock cudaPackages: nothing but cuda_cudart in an input list.
  overlay = {
    cudart-build-inputs = runpathTest {
      name = "mock-cudart-build-inputs";
      cuda = pkgs.cudaPackages.cuda_cudart;
    };
    cudart-native-build-inputs = runpathTest {
      name = "mock-cudart-native-build-inputs";
      cuda = pkgs.cudaPackages.cuda_cudart;
      cudaIn = "nativeBuildInputs";
    };
    # cuda_cudart as since nixpkgs PR #459416: stubs in out/lib/stubs, and
    # nixpkgs' removeStubsFromRunpathHook propagated from the same files.
    # stubstripHook must run first, or the check fallback has nothing to add.
    cudart-13-with-upstream-hook = runpathTest {
      name = "mock-cudart-13-with-upstream-hook";
      cuda = pkgs.cudaPackages_13.cuda_cudart;
      stubsLibDir = "${pkgs.cudaPackages_13.cuda_cudart}/lib/stubs";
      searchStubsLibDir = true;
    };
    # The package-set switch: stubstripHook = null in the CUDA set.
    cudart-set-opt-out = runpathTest {
      name = "mock-cudart-set-opt-out";
      cuda = (pkgs.cudaPackages.overrideScope (_: _: { stubstripHook = null; })).cuda_cudart;
      expectStub = true;
    };
  };

  # Must fail to build: without the overlay nothing replaces the stub entry,
  # so a check expecting the driver link has to notice.
  negative.without-overlay = plain.callPackage ../../nix/tests/runpath-test.nix {
    name = "negative-without-overlay";
    cuda = plain.cudaPackages.cuda_cudart;
    stubstripHook = null;
  };
}
