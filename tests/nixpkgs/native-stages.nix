# stdenvStages for the suite: nixpkgs' own native stdenv (pkgs/stdenv/native: the real setup.sh
# and cc-wrapper over the host's /usr/bin tools), with three changes for a Debian 12 host:
# - Its bintools wrapper is built with nativeTools = true, which writes no
#   nix-support/dynamic-linker and no nix-support/orig-libc; auto-patchelf reads both
#   ($NIX_BINTOOLS/nix-support) to know the loader and which libraries are libc's. They are added,
#   pointing at the host's loader and at a store path whose lib/ is the host's libc directory; the
#   cc wrapper is then made again, as stage 0 makes it, over that bintools wrapper.
# - The default hardening flags lose strictflexarrays1/3: the host's gcc 12 does not know
#   -fstrict-flex-arrays (gcc 13).
# - The cc wrapper says what the host's compiler is (isGNU, and its major version as `version`,
#   from $STUBSTRIP_HOST_GCC_VERSION, `gcc -dumpversion`): cudaPackages.backendStdenv picks a
#   compiler nvcc supports by them, and would otherwise build another gcc from source.
# - `sh` is bash, as it is in nixpkgs' stdenv (Debian's is dash; stdenv's audit-tmpdir and
#   make-symlinks-relative hooks run bash code through `sh -c`).
nixpkgs: stageArgs:
let
  inherit (stageArgs) lib localSystem;
  gccVersion =
    let
      v = builtins.getEnv "STUBSTRIP_HOST_GCC_VERSION";
    in
    if v == "" then "12" else v;
  stages = import (nixpkgs + "/pkgs/stdenv/native") (removeAttrs stageArgs [ "crossOverlays" ]);
  stage0 = builtins.head stages;
  multiarch =
    {
      x86_64-linux = "x86_64-linux-gnu";
      aarch64-linux = "aarch64-linux-gnu";
    }
    .${localSystem.system};
  loader =
    {
      x86_64-linux = "/lib64/ld-linux-x86-64.so.2";
      aarch64-linux = "/lib/ld-linux-aarch64.so.1";
    }
    .${localSystem.system};

  withNixSupport =
    prevStageArgs:
    let
      stage = stage0 prevStageArgs;
      # A store path whose lib/ is the host's libc directory, as orig-libc names a libc's out.
      hostLibc = derivation {
        name = "stubstrip-nixpkgs-host-libc";
        inherit (localSystem) system;
        builder = "/bin/bash";
        args = [
          "-c"
          "/bin/mkdir -p $out && /bin/ln -s /lib/${multiarch} $out/lib"
        ];
      };
      hardeningFlags = lib.subtractLists [
        "strictflexarrays1"
        "strictflexarrays3"
      ] stage.cc.bintools.defaultHardeningFlags;
      bintools = stage.cc.bintools.overrideAttrs (prevAttrs: {
        # Both: the passthru is what the cc wrapper reads, the string what the setup hook exports.
        passthru = prevAttrs.passthru // {
          defaultHardeningFlags = hardeningFlags;
        };
        env = prevAttrs.env // {
          default_hardening_flags_str = toString hardeningFlags;
        };
        postFixup = (prevAttrs.postFixup or "") + ''
          echo ${loader} > $out/nix-support/dynamic-linker
          echo ${hostLibc} > $out/nix-support/orig-libc
        '';
      });
    in
    stage
    // {
      cc =
        (import (nixpkgs + "/pkgs/build-support/cc-wrapper") {
          name = "cc-native";
          nativeTools = true;
          nativeLibc = true;
          nativePrefix = "/usr";
          expand-response-params = "";
          runtimeShell = "/bin/bash";
          isGNU = true;
          inherit lib bintools;
          inherit (stage) stdenvNoCC;
        }).overrideAttrs
          { version = gccVersion; };
    };
  hostSh = derivation {
    name = "stubstrip-nixpkgs-host-sh";
    inherit (localSystem) system;
    builder = "/bin/bash";
    args = [
      "-c"
      "/bin/mkdir -p $out/bin && /bin/ln -s /bin/bash $out/bin/sh"
    ];
  };
  lastStage = lib.last stages;
  withBashAsSh =
    prevStage:
    let
      stage = lastStage prevStage;
    in
    stage
    // {
      stdenv = stage.stdenv.override (prevArgs: {
        initialPath = [ hostSh ] ++ prevArgs.initialPath;
      });
    };
in
[ withNixSupport ] ++ lib.init (builtins.tail stages) ++ [ withBashAsSh ]
