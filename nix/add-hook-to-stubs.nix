# addHookToStubs hook pkg: `pkg`, whose output holding NVIDIA's stub libraries
# now propagates `hook` to every derivation that depends on it, whichever
# input list it is in. That output is `stubs` when the package has one, else
# the one buildRedist names `outputStubs` for packages that set
# `includeRemoveStubsFromRunpathHook` (cuda_cudart keeps its stubs in `out`
# since nixpkgs PR #459416). Other packages, and a null hook, are unchanged.
{ lib }:
hook: pkg:
let
  outputs = pkg.outputs or [ ];
  stubsOutput =
    if lib.elem "stubs" outputs then
      "stubs"
    else if pkg.includeRemoveStubsFromRunpathHook or false then
      pkg.outputStubs or "out"
    else
      null;
  dir = "$" + stubsOutput + "/nix-support";
in
if hook == null || !(lib.isDerivation pkg) || stubsOutput == null then
  pkg
else
  pkg.overrideAttrs (prevAttrs: {
    # In postFixup because fixupPhase rewrites the propagated-* files earlier.
    # Both files: the hook must land at offset -1 whether the consumer lists
    # the package in buildInputs (propagated-native-build-inputs) or in
    # nativeBuildInputs (propagated-build-inputs). First in each file, so it
    # is sourced, registered and run before nixpkgs' removeStubsFromRunpathHook
    # that buildRedist writes there: stubstrip then still sees the stub
    # entries and keeps them loadable for the checks after fixup.
    postFixup = (prevAttrs.postFixup or "") + ''
      mkdir -p "${dir}"
      for stubstripFile in "${dir}"/propagated-{native-build,build}-inputs; do
        { printWords ${hook}; cat "$stubstripFile" 2>/dev/null || true; } > "$stubstripFile.new"
        mv "$stubstripFile.new" "$stubstripFile"
      done
      unset -v stubstripFile
    '';
  })
