# pkgs/development/cuda-modules/packages/removeStubsFromRunpathHook/package.nix, with stubstrip
# doing the work instead of the bash script over patchelf (removeStubsFromRunpathHook.bash is
# deleted). The attribute and the hook keep the name removeStubsFromRunpathHook: buildRedist writes
# it into nix-support/propagated-build-inputs of every output holding stubs, and
# checkCudaHasStubsIffIncludeRemoveStubsFromRunpathHook looks for that name there. So every CUDA
# package with stubs propagates this hook and no other stub mechanism runs in its consumers.
{
  lib,
  addDriverRunpath,
  buildPackages,
  makeSetupHook,
}:
let
  # The hook runs stubstrip on the machine that builds the consumer: a consumer reaches this hook
  # through a CUDA package in its buildInputs, whose build platform is the consumer's.
  inherit (buildPackages) stubstrip;
  # What every output the hook fixed writes into its nix-support/propagated-build-inputs, for the
  # packages that depend on it: their links and checks get the stub libraries the output needs
  # when no driver is there. In the run-time closure of those outputs, so it is bash that
  # references no store path: one store path of a few KB.
  checkHook = makeSetupHook {
    name = "stubstripCheckHook";
    meta = {
      description = "Setup hook letting the consumers of packages stubstrip fixed link and run their checks without a driver";
      license = lib.licenses.mit;
      platforms = lib.platforms.linux;
    };
  } stubstrip.checkHookScript;
in
makeSetupHook {
  name = "removeStubsFromRunpathHook";
  substitutions = {
    # Setup hooks are sourced before PATH is set up: the full store path.
    stubstrip = lib.getExe stubstrip;
    driverLink = addDriverRunpath.driverLink + "/lib";
    inherit checkHook;
  };
  meta = {
    description = "Setup hook replacing CUDA stub RUNPATH entries with the driver link after fixup";
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
  };
} stubstrip.setupHookScript
