# The mock stdenv: mkDerivation with nixpkgs' argument conventions (pname and
# version, outputs, the *Inputs lists picking each input's dev output,
# nativeCheckInputs, env, passthru, meta, __structuredAttrs, overrideAttrs
# with finalAttrs/prevAttrs), building with /bin/bash, ./setup.sh and the
# host's tools.
{ lib, system }:
let
  platform = {
    inherit system;
    config = "${builtins.head (builtins.split "-" system)}-unknown-linux-gnu";
    isLinux = true;
    isGnu = true;
    isi686 = system == "i686-linux";
    isx86_64 = system == "x86_64-linux";
    isAarch64 = system == "aarch64-linux";
    canExecute = other: other.system == system;
  };

  depLists = [
    "depsBuildBuild"
    "depsBuildBuildPropagated"
    "nativeBuildInputs"
    "propagatedNativeBuildInputs"
    "depsBuildTarget"
    "depsBuildTargetPropagated"
    "depsHostHost"
    "depsHostHostPropagated"
    "buildInputs"
    "propagatedBuildInputs"
    "depsTargetTarget"
    "depsTargetTargetPropagated"
  ];

  # Every output of `drv` carries `passthru` (lib.extendDerivation).
  extendDerivation =
    passthru: drv:
    let
      outputs = drv.outputs or [ "out" ];
      outputsList = map (outputName: {
        name = outputName;
        value =
          common
          // {
            inherit (drv.${outputName})
              type
              outputName
              drvPath
              outPath
              ;
            outputSpecified = true;
          }
          // lib.optionalAttrs (passthru ? overrideAttrs) {
            overrideAttrs = f: (passthru.overrideAttrs f).${outputName};
          };
      }) outputs;
      common =
        drv
        // builtins.listToAttrs outputsList
        // {
          all = map (x: x.value) outputsList;
        }
        // passthru;
    in
    common // { inherit (drv) drvPath outPath; };

  derivationFromArgs =
    args: overrideAttrs:
    let
      structured = args.__structuredAttrs or false;
      doCheck = args.doCheck or false;
      doInstallCheck = args.doInstallCheck or false;
      pickDev = map (lib.getOutput "dev");
      inputs = {
        nativeBuildInputs =
          args.nativeBuildInputs or [ ]
          ++ lib.optionals doCheck (args.nativeCheckInputs or [ ])
          ++ lib.optionals doInstallCheck (args.nativeInstallCheckInputs or [ ]);
        buildInputs =
          args.buildInputs or [ ]
          ++ lib.optionals doCheck (args.checkInputs or [ ])
          ++ lib.optionals doInstallCheck (args.installCheckInputs or [ ]);
      };
      env = args.env or { };
      drvAttrs =
        removeAttrs args [
          "passthru"
          "meta"
          "env"
          "nativeCheckInputs"
          "checkInputs"
          "nativeInstallCheckInputs"
          "installCheckInputs"
        ]
        // lib.genAttrs (builtins.filter (n: args ? ${n} || inputs ? ${n}) depLists) (
          n: pickDev (inputs.${n} or args.${n})
        )
        // {
          name = args.name or "${args.pname}-${args.version}";
          outputs = args.outputs or [ "out" ];
          inherit system doCheck doInstallCheck;
          builder = "/bin/bash";
          args = [
            "-e"
            ./builder.sh
            ./setup.sh
          ];
          PATH = "/usr/bin:/bin";
        }
        // (if structured then { inherit env; } else env);
    in
    extendDerivation (
      (args.passthru or { })
      // {
        meta = args.meta or { };
        inherit overrideAttrs;
      }
    ) (derivation drvAttrs);

  # rattrs: finalAttrs -> attrs, as in make-derivation.nix.
  makeDerivationExtensible =
    rattrs:
    derivationFromArgs (lib.fix rattrs) (
      f: makeDerivationExtensible (lib.extends (lib.toExtension f) rattrs)
    );
in
{
  inherit system;
  hostPlatform = platform;
  buildPlatform = platform;
  targetPlatform = platform;
  isLinux = true;
  shell = "/bin/bash";
  mkDerivation =
    fnOrAttrs:
    makeDerivationExtensible (finalAttrs: if lib.isFunction fnOrAttrs then fnOrAttrs finalAttrs else fnOrAttrs);
}
