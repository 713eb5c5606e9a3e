# stubstripHook's tests, shared by stubstripHook.passthru.tests and the flake's
# checks. Each builds a program against a fake libcuda stub (./fake-cuda.nix)
# whose stubs output propagates the hook as buildRedist does (one line in its
# nix-support/propagated-build-inputs, written by ../add-hook-to-stubs.nix).
{
  lib,
  callPackage,
  stubstripHook,
}:
let
  addHookToStubs = import ../add-hook-to-stubs.nix { inherit lib; };
  cuda = addHookToStubs stubstripHook (callPackage ./fake-cuda.nix { });
  runpathTest = args: callPackage ./runpath-test.nix ({ inherit stubstripHook cuda; } // args);
in
{
  # cuda_cudart in buildInputs, hook only through propagation.
  cuda-in-build-inputs = runpathTest { name = "build-inputs"; };
  # The fix happens in fixup, not in the checks that run after it.
  no-install-check = runpathTest {
    name = "no-install-check";
    doInstallCheck = false;
  };
  # Listing the hook by hand, on either side of autoPatchelfHook, changes nothing.
  hook-before-autopatchelf = runpathTest {
    name = "hook-before-autopatchelf";
    hookPosition = "before";
  };
  hook-after-autopatchelf = runpathTest {
    name = "hook-after-autopatchelf";
    hookPosition = "after";
  };
  # cuda_cudart in nativeBuildInputs: the hook comes through propagated-build-inputs.
  cuda-in-native-build-inputs = runpathTest {
    name = "native-build-inputs";
    cudaIn = "nativeBuildInputs";
  };
  structured-attrs = runpathTest {
    name = "structured-attrs";
    structuredAttrs = true;
  };
  # Opt-outs: the stub entry stays; without the fallback the checks cannot load it.
  dont-stubstrip = runpathTest {
    name = "dont-stubstrip";
    dontStubstrip = true;
  };
  no-check-fallback = runpathTest {
    name = "no-check-fallback";
    dontStubstripCheckFallback = true;
  };
}
