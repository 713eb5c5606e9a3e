# addHookToStubs hook pkg, for a nixpkgs whose CUDA packages propagate no stub hook (before PR
# #459416): `pkg`, if it has a `stubs` output, now writes `hook` into that output's
# nix-support/propagated-build-inputs, as buildRedist does with removeStubsFromRunpathHook since
# then. stdenv sources the setup hook of everything an input propagates, at whatever offset it
# lands, so that one file reaches consumers listing `pkg` in buildInputs and in
# nativeBuildInputs. Other packages, and a null hook, are unchanged.
{ lib }:
hook: pkg:
if hook == null || !(lib.isDerivation pkg) || !(lib.elem "stubs" (pkg.outputs or [ ])) then
  pkg
else
  pkg.overrideAttrs (prevAttrs: {
    # In postFixup because fixupPhase rewrites the propagated-* files earlier.
    postFixup = (prevAttrs.postFixup or "") + ''
      mkdir -p "$stubs/nix-support"
      printWords ${hook} >> "$stubs/nix-support/propagated-build-inputs"
    '';
  })
