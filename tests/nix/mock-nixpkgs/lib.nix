# The subset of nixpkgs' lib that stubstrip's expressions and this mock use,
# written from the documented behaviour of lib/{fixed-points,customisation,
# attrsets,lists,strings,trivial,meta,licenses,systems,fileset}.nix.
let
  inherit (builtins)
    attrNames
    concatMap
    elem
    filter
    foldl'
    functionArgs
    genList
    hasAttr
    head
    intersectAttrs
    isAttrs
    isFunction
    isList
    isPath
    isString
    length
    listToAttrs
    mapAttrs
    pathExists
    readFile
    stringLength
    substring
    tail
    ;

  lib = rec {
    inherit
      attrNames
      elem
      filter
      foldl'
      functionArgs
      head
      intersectAttrs
      isAttrs
      isFunction
      isList
      isString
      length
      mapAttrs
      tail
      ;
    inherit (builtins) attrValues concatStringsSep hasAttr listToAttrs toString;

    # lists
    findFirst =
      pred: default: list:
      let
        found = filter pred list;
      in
      if found == [ ] then default else head found;

    # trivial
    id = x: x;
    const = x: _: x;
    flip =
      f: a: b:
      f b a;
    warn = msg: builtins.trace "evaluation warning: ${msg}";
    assertMsg = pred: msg: pred || builtins.throw msg;
    importTOML = path: builtins.fromTOML (readFile path);
    importJSON = path: builtins.fromJSON (readFile path);
    version = "26.05-stubstrip-mock";

    # fixed points
    fix =
      f:
      let
        x = f x;
      in
      x;
    extends =
      overlay: f: final:
      let
        prev = f final;
      in
      prev // overlay final prev;
    composeExtensions =
      f: g: final: prev:
      let
        fApplied = f final prev;
        prev' = prev // fApplied;
      in
      fApplied // g final prev';
    composeManyExtensions = builtins.foldl' (acc: ext: composeExtensions acc ext) (_: _: { });
    toExtension =
      f:
      if isFunction f then
        final: prev:
        let
          fPrev = f prev;
        in
        if isFunction fPrev then f final prev else fPrev
      else
        _: _: f;
    makeExtensible = makeExtensibleWithCustomName "extend";
    makeExtensibleWithCustomName =
      extenderName: rattrs:
      fix (
        self:
        rattrs self
        // {
          ${extenderName} = f: makeExtensibleWithCustomName extenderName (extends (toExtension f) rattrs);
        }
      );

    # attrsets
    genAttrs =
      names: f:
      listToAttrs (
        map (n: {
          name = n;
          value = f n;
        }) names
      );
    filterAttrs =
      pred: set:
      listToAttrs (
        concatMap (
          name:
          let
            v = set.${name};
          in
          if pred name v then
            [
              {
                inherit name;
                value = v;
              }
            ]
          else
            [ ]
        ) (attrNames set)
      );
    mapAttrsToList = f: set: map (n: f n set.${n}) (attrNames set);
    optionalAttrs = cond: set: if cond then set else { };
    nameValuePair = name: value: { inherit name value; };
    isDerivation = value: value.type or null == "derivation";
    recurseIntoAttrs = set: set // { recurseForDerivations = true; };

    # lists
    optional = cond: x: if cond then [ x ] else [ ];
    optionals = cond: xs: if cond then xs else [ ];
    toList = x: if isList x then x else [ x ];
    any = builtins.any;
    all = builtins.all;
    unique = foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ];
    flatten = x: if isList x then concatMap flatten x else [ x ];

    # strings
    optionalString = cond: s: if cond then s else "";
    hasPrefix = pre: s: substring 0 (stringLength pre) s == pre;
    hasSuffix =
      suf: s:
      let
        ls = stringLength s;
        lf = stringLength suf;
      in
      lf <= ls && substring (ls - lf) lf s == suf;
    concatMapStringsSep =
      sep: f: xs:
      builtins.concatStringsSep sep (map f xs);
    escapeShellArg = s: "'${builtins.replaceStrings [ "'" ] [ "'\\''" ] (toString s)}'";

    # meta / outputs (lib/attrsets.nix getOutput, lib/meta.nix getExe)
    getOutput =
      output: pkg:
      if !(pkg ? outputSpecified) || !pkg.outputSpecified then pkg.${output} or pkg.out or pkg else pkg;
    getBin = getOutput "bin";
    getLib = getOutput "lib";
    getDev = getOutput "dev";
    getName = x: x.pname or (builtins.parseDrvName x.name).name;
    getExe =
      x:
      getExe' x (
        x.meta.mainProgram or (warn "getExe: ${x.name or "?"} has no meta.mainProgram, guessing ${getName x}" (
          getName x
        ))
      );
    getExe' = x: y: "${getBin x}/bin/${y}";

    # customisation
    makeOverridable =
      f: origArgs:
      let
        result = f origArgs;
        overrideWith = newArgs: origArgs // (if isFunction newArgs then newArgs origArgs else newArgs);
        overrideResult = g: makeOverridable (args: g (f args)) origArgs;
      in
      if isAttrs result then
        result
        // {
          override = newArgs: makeOverridable f (overrideWith newArgs);
        }
        // optionalAttrs (result ? overrideAttrs) {
          overrideAttrs = fdrv: overrideResult (x: x.overrideAttrs fdrv);
        }
      else if isFunction result then
        result
      else
        result;
    callPackageWith =
      autoArgs: fn: args:
      let
        f = if isFunction fn then fn else import fn;
        fargs = functionArgs f;
        allArgs = intersectAttrs fargs autoArgs // args;
        missing = filter (n: !fargs.${n} && !(allArgs ? ${n})) (attrNames fargs);
      in
      if missing != [ ] then
        throw "callPackage: function called without required argument '${head missing}'"
      else
        makeOverridable f allArgs;
    callPackagesWith =
      autoArgs: fn: args:
      let
        f = if isFunction fn then fn else import fn;
        origArgs = intersectAttrs (functionArgs f) autoArgs // args;
        pkgs = f origArgs;
        mkAttrOverridable = name: _: makeOverridable (newArgs: (f newArgs).${name}) origArgs;
      in
      if isDerivation pkgs then
        throw "function passed to callPackages returned a derivation, use callPackage"
      else
        mapAttrs mkAttrOverridable pkgs;
    makeScope =
      newScope: f:
      let
        self = f self // {
          newScope = scope: newScope (self // scope);
          callPackage = self.newScope { };
          overrideScope = g: makeScope newScope (extends g f);
          packages = f;
        };
      in
      self;

    licenses.mit = {
      spdxId = "MIT";
      shortName = "mit";
      fullName = "MIT License";
      free = true;
    };
    platforms.linux = [
      "aarch64-linux"
      "armv7l-linux"
      "i686-linux"
      "powerpc64le-linux"
      "riscv64-linux"
      "x86_64-linux"
    ];
    systems.flakeExposed = [
      "x86_64-linux"
      "aarch64-linux"
      "x86_64-darwin"
      "aarch64-darwin"
    ];

    # lib.fileset, reduced to unions/toSource over paths: a file set is the
    # files at or below the listed paths; toSource copies exactly those into
    # the store, keeping the directories that lead to them.
    fileset = rec {
      _toPaths =
        x:
        if isPath x then
          if pathExists x then [ x ] else throw "lib.fileset: ${toString x} does not exist"
        else if x._type or null == "fileset" then
          x.paths
        else
          throw "lib.fileset: expected a path or a file set";
      unions = xs: {
        _type = "fileset";
        paths = concatMap _toPaths xs;
      };
      union = a: b: unions [ a b ];
      toSource =
        { root, fileset }:
        let
          wanted = map toString (_toPaths fileset);
          rootStr = toString root;
          keep =
            path:
            let
              p = toString path;
            in
            builtins.any (w: p == w || hasPrefix (w + "/") p || hasPrefix (p + "/") w) wanted;
        in
        assert builtins.all (w: w == rootStr || hasPrefix (rootStr + "/") w) wanted;
        builtins.path {
          name = "source";
          path = root;
          filter = path: _type: keep path;
        };
    };
  };
in
lib
