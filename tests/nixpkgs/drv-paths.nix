# Every derivation of every CUDA package set of the tree, with and without nix/upstream:
# { SET = { ATTR = { drv; stubs; propagates; outputs; } or { error = true; }; }; }
#   drv         its drv path (null when it does not evaluate, e.g. unsupported on `system`)
#   stubs       whether buildRedist marks it as holding stubs (includeRemoveStubsFromRunpathHook)
#   propagates  whether its postFixup writes this set's removeStubsFromRunpathHook
#   outputs     its outputs
# The sets are the attributes of pkgs named cudaPackages or cudaPackages_* (aliases included).
# With `only = { SET = [ ATTR ... ]; }`, just those (drv_compare.py evaluates a set at a time, and
# leaves out what cannot be evaluated in this tree at all: see README.md).
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system,
  upstream,
  only ? null,
}:
let
  pkgs = import ./pkgs.nix {
    inherit nixpkgs system upstream;
    native = false;
  };
  inherit (pkgs) lib;
  # Removed sets (cudaPackages_11, ...) are aliases that throw: left out.
  setNames = lib.filter (
    n:
    (n == "cudaPackages" || lib.hasPrefix "cudaPackages_" n)
    && (builtins.tryEval (builtins.isAttrs pkgs.${n})).value or false
  ) (lib.attrNames pkgs);
  try =
    v:
    let
      r = builtins.tryEval (builtins.deepSeq v v);
    in
    if r.success then r.value else null;
  describe =
    set: name:
    let
      value = builtins.tryEval set.${name};
      pkg = value.value;
      isDrv = value.success && lib.isDerivation pkg;
      hook = set.removeStubsFromRunpathHook or null;
    in
    if !isDrv then
      { drv = null; }
    else
      {
        drv = try (pkg.drvPath or null);
        stubs = try (pkg.includeRemoveStubsFromRunpathHook or false);
        outputs = try (pkg.outputs or [ "out" ]);
        propagates = try (
          hook != null
          && lib.hasInfix (builtins.unsafeDiscardStringContext "${lib.getDev hook}") (
            builtins.unsafeDiscardStringContext (toString (pkg.postFixup or ""))
          )
        );
      };
  # Names of the set's attributes that are derivations.
  derivationNames =
    set:
    lib.filter (
      n:
      let
        r = builtins.tryEval set.${n};
      in
      r.success && lib.isDerivation r.value
    ) (lib.attrNames set);
  describeSet = setName: names: lib.genAttrs names (describe pkgs.${setName});
in
if only == null then
  lib.genAttrs setNames (n: derivationNames pkgs.${n})
else
  lib.mapAttrs describeSet only
