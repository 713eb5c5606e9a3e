# stubstripCheckHook: hooks/stubstrip-check-hook.sh as a setup hook. stubstripHook writes it into
# nix-support/propagated-build-inputs of every output it left check libraries in, so it is in the
# run-time closure of those packages: no substitution, no dependency, a few KB and one store path.
{ lib, makeSetupHook }:
makeSetupHook {
  name = "stubstripCheckHook";
  meta = {
    description = "Setup hook letting the consumers of packages stubstrip fixed link and run their checks without a driver";
    license = lib.licenses.mit;
    platforms = lib.platforms.linux;
  };
} ../hooks/stubstrip-check-hook.sh
