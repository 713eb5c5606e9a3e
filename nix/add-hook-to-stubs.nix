# addHookToStubs hook pkg: `pkg`, whose `stubs` output now propagates `hook`
# to every derivation that depends on it, whichever input list it is in.
# Packages without a `stubs` output, and a null hook, leave `pkg` unchanged.
{ lib }:
hook: pkg:
if hook == null || !(lib.isDerivation pkg) || !(lib.elem "stubs" (pkg.outputs or [ ])) then
  pkg
else
  pkg.overrideAttrs (prevAttrs: {
    # Written in postFixup because fixupPhase rewrites the propagated-* files
    # earlier. Both files: the hook must arrive whether the consumer lists the
    # package in buildInputs (propagated-native-build-inputs, offset -1) or in
    # nativeBuildInputs (propagated-build-inputs, again offset -1).
    postFixup = (prevAttrs.postFixup or "") + ''
      mkdir -p "$stubs/nix-support"
      printWords ${hook} >> "$stubs/nix-support/propagated-native-build-inputs"
      printWords ${hook} >> "$stubs/nix-support/propagated-build-inputs"
    '';
  })
