# With nixpkgs' own machinery (./run.sh, part `consumers`): the consumers of a package
# that the hook fixed, built with checks on in Nix's sandbox, where no driver is.
#   A  buildRedist's real cuda_cudart from ./builds.nix (fake sources; single output, the stub in
#      out/lib/stubs), which propagates our hook.
#   B  a buildPythonPackage with a C library, libprobe.so, that needs libcuda.so.1 (linked against
#      A's stub with nixpkgs' cc-wrapper, whose ld-wrapper puts the stub directory into RUNPATH),
#      and a C extension `probe` over it; pythonImportsCheck and a check phase import it.
#      `cudart = true` links libcudart too, so that B references A's output at run time anyway.
#   C  a pure-Python buildPythonPackage whose only dependency is B (propagated, as `dependencies`)
#      and whose pythonImportsCheck and check phase import it through its own module.
#   D  a C program (stdenv.mkDerivation) linking B's libprobe.so, B reached through C's
#      propagation, run in installCheck.
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  prebuilt ? null,
  upstream ? true,
}:
let
  builds = import ./builds.nix {
    inherit
      nixpkgs
      system
      prebuilt
      upstream
      ;
  };
  inherit (builds) pkgs;
  inherit (pkgs) lib;
  inherit (pkgs.cudaPackages) cuda_cudart;
  python = pkgs.python3;
  fake = ./fake/consumers;

  settingsTag =
    s:
    (if s.strictDeps then "strict" else "lax") + "-" + (if s.structuredAttrs then "sa" else "nosa");
  bothOn = {
    strictDeps = true;
    structuredAttrs = true;
  };

  b =
    {
      tag,
      cudart ? false,
      optOut ? false,
      # B's own import check and check phase; off for B built with nixpkgs' own hook, which leaves
      # its checks nothing to load libcuda.so.1 from (nixpkgs #465751 disabled them).
      checks ? true,
    }:
    python.pkgs.buildPythonPackage {
      pname = "stubstrip-nixpkgs-i14-b-${tag}";
      version = "1";
      pyproject = false;
      src = "${fake}/b";
      strictDeps = true;
      __structuredAttrs = true;
      buildInputs = [ cuda_cudart ];
      buildPhase = ''
        runHook preBuild
        $CC -O2 -shared -fPIC -Wl,-soname,libprobe.so -o libprobe.so probe.c \
          -L${cuda_cudart}/lib/stubs -lcuda ${lib.optionalString cudart "-DPROBE_CUDART -lcudart"}
        suffix=$(${python.interpreter} -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
        $CC -O2 -shared -fPIC -I${python}/include/python${python.pythonVersion} -o probe$suffix probemodule.c \
          -L. -lprobe -Wl,-rpath,$out/lib
        runHook postBuild
      '';
      installPhase = ''
        runHook preInstall
        install -D -m 0755 libprobe.so "$out/lib/libprobe.so"
        install -D -m 0755 -t "$out/${python.sitePackages}" probe.*so
        runHook postInstall
      '';
      pythonImportsCheck = lib.optional checks "probe";
      # buildPythonPackage runs it after fixup: B's own checks get the removed stub directory.
      doCheck = checks;
      checkPhase = ''
        runHook preCheck
        said=$(${python.interpreter} -c 'import probe; print(probe.init())')
        echo "probe.init(): $said"
        [[ $said == 34 ]]
        runHook postCheck
      '';
      dontStubstripPropagateCheckFallback = optOut;
    };

  c =
    {
      b,
      tag,
      settings,
      extra ? { },
    }:
    python.pkgs.buildPythonPackage (
      {
        pname = "stubstrip-nixpkgs-i14-c-${tag}-${settingsTag settings}";
        version = "1";
        pyproject = false;
        src = "${fake}/c";
        inherit (settings) strictDeps;
        __structuredAttrs = settings.structuredAttrs;
        dependencies = [ b ];
        dontBuild = true;
        installPhase = ''
          runHook preInstall
          mkdir -p "$out/${python.sitePackages}"
          cp -r usesprobe "$out/${python.sitePackages}/"
          echo "LD_LIBRARY_PATH during install: [''${LD_LIBRARY_PATH-}]"
          runHook postInstall
        '';
        pythonImportsCheck = [ "usesprobe" ];
        doCheck = true;
        checkPhase = ''
          runHook preCheck
          said=$(${python.interpreter} -c 'import usesprobe; print(usesprobe.init())')
          echo "usesprobe.init(): $said"
          [[ $said == "$expectCuInit" ]]
          runHook postCheck
        '';
        expectCuInit = "34";
      }
      // extra
    );

  d =
    {
      c,
      tag,
      settings,
      extra ? { },
    }:
    pkgs.stdenv.mkDerivation (
      {
        name = "stubstrip-nixpkgs-i14-d-${tag}-${settingsTag settings}";
        inherit (settings) strictDeps;
        __structuredAttrs = settings.structuredAttrs;
        dontUnpack = true;
        # B through C's propagation; cc-wrapper adds -L for it.
        buildInputs = [ c ];
        buildPhase = ''
          runHook preBuild
          echo "NIX_LDFLAGS: [''${NIX_LDFLAGS-}]"
          $CC -O2 -o d ${fake}/d.c -lprobe
          runHook postBuild
        '';
        installPhase = ''
          runHook preInstall
          install -D -m 0755 d "$out/bin/d"
          runHook postInstall
        '';
        doInstallCheck = true;
        installCheckPhase = ''
          runHook preInstallCheck
          said=$("$out/bin/d")
          echo "d: $said"
          [[ $said == "cuInit returned $expectCuInit" ]]
          runHook postInstallCheck
        '';
        expectCuInit = "34";
      }
      // extra
    );

  bs = {
    driver-api = b { tag = "driver-api"; };
    driver-api-opted-out = b {
      tag = "driver-api-opted-out";
      optOut = true;
    };
    cudart = b {
      tag = "cudart";
      cudart = true;
    };
    cudart-opted-out = b {
      tag = "cudart-opted-out";
      cudart = true;
      optOut = true;
    };
  };

  allSettings = lib.concatMap (
    strictDeps:
    map (structuredAttrs: { inherit strictDeps structuredAttrs; }) [
      true
      false
    ]
  ) [
    true
    false
  ];
  chain =
    bName: settings: extra:
    let
      tag = bName + lib.optionalString (extra ? expectCuInit) "-driver";
      cDrv = c {
        b = bs.${bName};
        inherit tag settings extra;
      };
    in
    {
      c = cDrv;
      d = d {
        c = cDrv;
        inherit tag settings extra;
      };
    };
  # Built with a fake driver at the driver link (the same derivations but for this attribute, so
  # that they build again): the driver is what loads.
  withDriver = {
    driverAtTheDriverLink = true;
    expectCuInit = "0";
  };
in
{
  inherit bs cuda_cudart;
  # Mounted at /run/opengl-driver/lib for the `driver` builds (./consumers.sh): cuInit answers 0.
  fakeDriver = pkgs.runCommandCC "stubstrip-nixpkgs-i14-fake-driver" { } ''
    mkdir -p $out/lib
    $CC -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o $out/lib/libcuda.so.1 ${./fake/driver.c}
  '';
  checkHook = pkgs.cudaPackages.removeStubsFromRunpathHook.checkHook;
  # C and D over the driver-API B in every strictDeps x __structuredAttrs; over the B that links
  # libcudart with both on.
  chains =
    lib.listToAttrs (map (s: lib.nameValuePair "driver-api-${settingsTag s}" (chain "driver-api" s { })) allSettings)
    // {
      "cudart-${settingsTag bothOn}" = chain "cudart" bothOn { };
    };
  driver = chain "driver-api" bothOn withDriver;
  # Must fail as nixpkgs#471697 describes: C's pythonImportsCheck, with B leaving nothing for its
  # consumers (dontStubstripPropagateCheckFallback), and with nixpkgs' own hook (./builds.nix
  # without nix/upstream: see negative-nixpkgs-hook in ./run.sh).
  negative = c {
    b = bs.driver-api-opted-out;
    tag = "b-opted-out";
    settings = bothOn;
    # The import check alone, as in the report.
    extra.doCheck = false;
  };
  # With upstream = false: nixpkgs as it is (its bash hook replaces the stub entry, B's checks
  # disabled as nixpkgs #465751 did), and C's pythonImportsCheck fails as in #471697.
  negativeNixpkgsHook = c {
    b = b {
      tag = "nixpkgs-hook";
      checks = false;
    };
    tag = "nixpkgs-hook";
    settings = bothOn;
    extra.doCheck = false;
  };
}
