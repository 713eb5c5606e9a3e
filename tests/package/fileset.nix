# What nix/package.nix gives buildRustPackage as `src`, evaluated from the real
# package.nix with a `lib` whose `fileset` functions record the paths instead of
# copying them: { root = "/abs/root"; paths = [ "/abs/file-or-dir" ... ]; }.
#
#   nix-instantiate --eval --strict --json tests/package/fileset.nix
#
# Only `src` is forced, so the rest of the package (meta, nativeCheckInputs)
# needs no stand-in. A fileset function not modelled here fails the evaluation
# with its name, so a change to the fileset cannot slip past tests/package/run.sh.
{
  package ? ../../nix/package.nix,
}:
let
  inherit (builtins)
    all
    concatMap
    isAttrs
    isPath
    substring
    stringLength
    throw
    toString
    ;

  # A fileset here: the list of absolute paths (files or whole directories) in it.
  recorded = paths: {
    _type = "recorded-fileset";
    inherit paths;
  };
  pathsOf =
    x:
    if isPath x then
      [ (toString x) ]
    else if isAttrs x && x ? _type && x._type == "recorded-fileset" then
      x.paths
    else
      throw "tests/package/fileset.nix: not a path or fileset: ${builtins.typeOf x}";
  under =
    root: p:
    p == root || substring 0 (stringLength root + 1) p == "${root}/";
  notModelled =
    name: _: throw "tests/package/fileset.nix: lib.fileset.${name} is not modelled; extend the recorder";

  lib = {
    importTOML = path: builtins.fromTOML (builtins.readFile path);
    fileset = {
      unions = filesets: recorded (concatMap pathsOf filesets);
      union = a: b: recorded (pathsOf a ++ pathsOf b);
      maybeMissing = p: recorded (if builtins.pathExists p then [ (toString p) ] else [ ]);
      toSource =
        { root, fileset }:
        let
          r = toString root;
          paths = pathsOf fileset;
          missing = builtins.filter (p: !builtins.pathExists p) paths;
        in
        if missing != [ ] then
          throw "lib.fileset.toSource: ${builtins.head missing} does not exist"
        else if !all (under r) paths then
          throw "lib.fileset.toSource: a path lies outside the root ${r}"
        else
          {
            root = r;
            inherit paths;
          };
      difference = notModelled "difference";
      intersection = notModelled "intersection";
      fileFilter = notModelled "fileFilter";
      gitTracked = notModelled "gitTracked";
      fromSource = notModelled "fromSource";
    };
  };

  pkg = import package {
    inherit lib;
    stdenv = { };
    rustPlatform.buildRustPackage = args: args;
    installShellFiles = null;
    glibc = null;
    gcc = null;
    patchelf = null;
    binutils = null;
    elfutils = null;
  };
in
pkg.src
