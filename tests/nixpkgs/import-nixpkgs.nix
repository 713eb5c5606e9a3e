# Imports the nixpkgs tree at `nixpkgs` with `args` (as `import nixpkgs args`), under any Nix.
# Nix >= 2.18 imports it as it is. Debian's Nix 2.8, which builds here, is refused by the tree's
# default.nix (lib/minfeatures.nix), so it evaluates pkgs/top-level/impure.nix directly, with the one
# builtin that lib needs and 2.8 lacks, builtins.readFileType (lib.filesystem.pathType, used by
# lib.fileset), made from builtins.readDir. Every file the tree imports sees the same builtins.
nixpkgs: args:
if builtins ? readFileType then
  import nixpkgs args
else
  let
    path = toString nixpkgs;
    readFileType =
      p:
      let
        s = toString p;
      in
      if s == "/" then "directory" else (builtins.readDir (dirOf s)).${baseNameOf s};
    scope = {
      builtins = builtins // {
        inherit readFileType;
      };
      import = scopedImport scope;
      scopedImport = attrs: scopedImport (scope // attrs);
    };
  in
  scopedImport scope (path + "/pkgs/top-level/impure.nix") args
