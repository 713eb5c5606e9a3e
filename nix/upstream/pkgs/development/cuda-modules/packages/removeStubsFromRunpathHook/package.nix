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
in
makeSetupHook {
  name = "removeStubsFromRunpathHook";
  substitutions = {
    # Setup hooks are sourced before PATH is set up: the full store path.
    stubstrip = lib.getExe stubstrip;
    driverLink = addDriverRunpath.driverLink + "/lib";
  };
  meta = {
    description = "Setup hook replacing CUDA stub RUNPATH entries with the driver link after fixup";
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
  };
} stubstrip.setupHookScript
