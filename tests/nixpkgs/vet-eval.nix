# What nixpkgs-vet's evaluation (its src/eval.nix, for x86_64-linux) sees of some attributes of a
# tree, each under tryEval: whether it is a derivation, its strictDeps and __structuredAttrs (with
# passthru copies of those two taken out, as nixpkgs-vet does, so that only the real attributes
# count), and whether the scope's own callPackage made it. null for an attribute that fails to
# evaluate. ./vet.sh uses it to find the by-name packages a slim tree cannot evaluate, and to show
# what nixpkgs-vet's rules NPV-164 and NPV-166 read for stubstrip.
{
  nixpkgsPath,
  names,
}:
let
  # Marks what the scope's callPackage returns (eval.nix's overlay does the same).
  overlay = final: prev: {
    callPackage = fn: args: mark (prev.callPackage fn args);
  };
  mark = value: if builtins.isAttrs value then value // { _callPackage = true; } else value;
  pkgs = import nixpkgsPath {
    config = { };
    overlays = [ overlay ];
    system = "x86_64-linux";
  };
  info =
    value:
    if !builtins.isAttrs value then
      { non_attribute_set = true; }
    else
      let
        override = value.overrideAttrs or (_: value);
        clean = override (
          _: prev: {
            passthru = removeAttrs (prev.passthru or { }) [
              "__structuredAttrs"
              "strictDeps"
            ];
          }
        );
      in
      {
        is_derivation = pkgs.lib.isDerivation value;
        strict_deps = clean.strictDeps or false;
        structured_attrs = clean.__structuredAttrs or false;
        is_same_scope_call_package = value._callPackage or false;
      };
  attempt =
    name:
    let
      r = builtins.tryEval (
        let
          i = info pkgs.${name};
        in
        builtins.deepSeq i i
      );
    in
    if r.success then r.value else null;
in
builtins.listToAttrs (
  map (name: {
    inherit name;
    value = attempt name;
  }) names
)
