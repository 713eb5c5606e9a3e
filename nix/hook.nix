# stubstripHook: hooks/stubstrip-hook.sh with the stubstrip binary and the
# driver link substituted. Add it to nativeBuildInputs by hand, or let the
# overlay propagate it from every CUDA package that has a `stubs` output.
{
  lib,
  makeSetupHook,
  addDriverRunpath,
  stubstrip,
  callPackage,
  callPackages,
}:
let
  # What the fixed outputs propagate to their consumers (./check-hook.nix).
  checkHook = callPackage ./check-hook.nix { };
  hook = makeSetupHook {
    name = "stubstripHook";
    substitutions = {
      # Setup hooks are sourced before PATH is set up: use full store paths.
      stubstrip = lib.getExe stubstrip;
      driverLink = "${addDriverRunpath.driverLink}/lib";
      inherit checkHook;
    };
    # `checkHook` is an attribute of the hook through its substitution.
    passthru.tests = callPackages ./tests { stubstripHook = hook; };
    meta = {
      description = "Setup hook replacing CUDA stub RUNPATH entries with the driver link after fixup";
      license = lib.licenses.mit;
      platforms = lib.platforms.linux;
    };
  } ../hooks/stubstrip-hook.sh;
in
hook
