# At mock level, built for real in the local store (tests/nix/consumers.sh runs it, in
# Nix's sandbox): the consumers of a package that stubstripHook fixed.
#   A  a CUDA package holding NVIDIA's stub libcuda (a stand-in): `single`, one output with
#      libcudart.so.12 in lib/ and the stub in lib/stubs (cuda_cudart in nixpkgs since CUDA 12.9),
#      or `split`, the stub in a separate `stubs` output (./../../nix/tests/fake-cuda.nix); both
#      propagate stubstripHook, as the overlay arranges it.
#   B  a library, libcudafake.so, that needs libcuda.so.1 (linked against A's stub, and against
#      libcudart with `single`), fixed by stubstripHook: its RUNPATH now names the driver link.
#   C  a package with no CUDA input that only propagates B and "imports" B's library (dlopen with
#      RTLD_NOW, as Python imports an extension) in checkPhase, installCheckPhase and a
#      preDistPhases import check, like pythonImportsCheck.
#   D  a C program linking B's library (B reached through C's propagation), run in installCheck.
{
  # A directory holding the stubstrip and elfpatch binaries.
  prebuilt,
  system ? builtins.currentSystem,
}:
let
  pkgs = import ./mock-nixpkgs {
    inherit system prebuilt;
    overlays = [ (import ../../nix/overlay.nix) ];
  };
  inherit (pkgs) lib stdenv stubstripHook;
  addHookToStubs = import ../../nix/add-hook-to-stubs.nix { inherit lib; };
  fixtures = ../hook/fixtures;

  cuda = {
    split = addHookToStubs stubstripHook (pkgs.callPackage ../../nix/tests/fake-cuda.nix { });
    # Propagates stubstripHook from its single output, as buildRedist writes the stub hook into
    # outputStubs (= out) since nixpkgs PR #459416.
    single = stdenv.mkDerivation {
      pname = "stubstrip-test-consumers-cuda_cudart";
      version = "12.9.79";
      dontUnpack = true;
      buildPhase = ''
        $CC -shared -fPIC -Wl,-soname,libcudart.so.12 -o libcudart.so.12 ${fixtures}/plain.c
        $CC -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so ${../../nix/tests/libcuda-stub.c}
      '';
      installPhase = ''
        mkdir -p "$out/lib/stubs"
        install -m 0755 libcudart.so.12 "$out/lib/"
        install -m 0755 libcuda.so "$out/lib/stubs/"
        ln -s libcuda.so "$out/lib/stubs/libcuda.so.1"
      '';
      postFixup = ''
        mkdir -p "$out/nix-support"
        printWords ${stubstripHook} >> "$out/nix-support/propagated-build-inputs"
      '';
    };
  };
  stubsDir = a: if a ? stubs then "${a.stubs}/lib" else "${a}/lib/stubs";

  # A fake driver, mounted at the driver link by tests/nix/consumers.sh for the `driver` builds:
  # its cuInit answers 0, the stubs' 34.
  fakeDriver = stdenv.mkDerivation {
    name = "stubstrip-test-consumers-fake-driver";
    dontUnpack = true;
    buildPhase = "$CC -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so.1 ${fixtures}/cuda_driver.c";
    installPhase = ''install -D -m 0755 libcuda.so.1 "$out/lib/libcuda.so.1"'';
  };

  settingsTag =
    s:
    (if s.strictDeps then "strict" else "lax") + "-" + (if s.structuredAttrs then "sa" else "nosa");

  b =
    {
      a,
      tag,
      optOut ? false,
    }:
    stdenv.mkDerivation {
      name = "stubstrip-test-consumers-b-${tag}";
      strictDeps = true;
      __structuredAttrs = true;
      dontUnpack = true;
      nativeBuildInputs = [ pkgs.autoPatchelfHook ];
      buildInputs = [ a ];
      # autoPatchelfHook searches the lib/ of inputs, not lib/stubs.
      preFixup = ''addAutoPatchelfSearchPath --no-recurse ${stubsDir a}'';
      buildPhase =
        "$CC -shared -fPIC -o libcudafake.so ${fixtures}/cudafake.c -L${stubsDir a} -lcuda"
        # With `single`, B links libcudart too: its RUNPATH keeps naming A's output.
        + lib.optionalString (!(a ? stubs)) " -Wl,--no-as-needed -L${a}/lib -l:libcudart.so.12";
      installPhase = ''install -D -m 0755 libcudafake.so "$out/lib/libcudafake.so"'';
      dontStubstripPropagateCheckFallback = optOut;
    };

  # What C and D share: the name, the two settings, no source.
  consumerAttrs = role: tag: settings: {
    name = "stubstrip-test-consumers-${role}-${tag}-${settingsTag settings}";
    inherit (settings) strictDeps;
    __structuredAttrs = settings.structuredAttrs;
    dontUnpack = true;
  };

  # What answered (34: a stub, 0: the driver) must be what the derivation expects.
  importCheck = ''
    said=$("$TMPDIR/import-check" "$blib/lib/libcudafake.so")
    echo "$said"
    [[ $said == *"cuInit=$expectCuInit" ]]
  '';
  c =
    {
      b,
      tag,
      settings,
      extra ? { },
    }:
    stdenv.mkDerivation (
      consumerAttrs "c" tag settings
      // {
        # No CUDA input of its own: B only, propagated (as `dependencies` of a Python package).
        propagatedBuildInputs = [ b ];
        blib = b;
        buildPhase = ''
          $CC -o "$TMPDIR/import-check" ${fixtures}/import_check.c -ldl
          echo "LD_LIBRARY_PATH during build: [''${LD_LIBRARY_PATH-}]"
        '';
        doCheck = true;
        checkPhase = ''
          runHook preCheck
          ${importCheck}
          runHook postCheck
        '';
        installPhase = ''
          echo "LD_LIBRARY_PATH during install: [''${LD_LIBRARY_PATH-}]"
          mkdir -p "$out/share" && echo C > "$out/share/c"
        '';
        doInstallCheck = true;
        installCheckPhase = ''
          runHook preInstallCheck
          ${importCheck}
          runHook postInstallCheck
        '';
        preDistPhases = [ "importsCheckPhase" ];
        importsCheckPhase = importCheck;
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
    stdenv.mkDerivation (
      consumerAttrs "d" tag settings
      // {
        buildInputs = [ c ];
        blib = c.blib;
        # The mock has no cc-wrapper: NIX_LDFLAGS goes to the linker as cc-wrapper passes it, and
        # -rpath names the -L store directory as ld-wrapper adds it.
        buildPhase = ''
          ldflags=()
          for f in ''${NIX_LDFLAGS-}; do ldflags+=("-Wl,$f"); done
          echo "NIX_LDFLAGS: [''${NIX_LDFLAGS-}]"
          $CC -o d ${fixtures}/app.c -L"$blib/lib" -lcudafake -Wl,--enable-new-dtags,-rpath,"$blib/lib" \
            ''${ldflags[@]+"''${ldflags[@]}"}
        '';
        installPhase = ''install -D -m 0755 d "$out/bin/d"'';
        doInstallCheck = true;
        installCheckPhase = ''
          runHook preInstallCheck
          rc=0
          "$out/bin/d" || rc=$?
          echo "installCheck: d exited $rc"
          [[ $rc == "$expectRc" ]]
          runHook postInstallCheck
        '';
        expectRc = "34";
      }
      // extra
    );

  allSettings = builtins.concatMap (
    strictDeps:
    map (structuredAttrs: { inherit strictDeps structuredAttrs; }) [
      true
      false
    ]
  ) [
    true
    false
  ];
  strictSa = {
    strictDeps = true;
    structuredAttrs = true;
  };

  bs = {
    single = b {
      a = cuda.single;
      tag = "single";
    };
    split = b {
      a = cuda.split;
      tag = "split";
    };
    single-opted-out = b {
      a = cuda.single;
      tag = "single-opted-out";
      optOut = true;
    };
    split-opted-out = b {
      a = cuda.split;
      tag = "split-opted-out";
      optOut = true;
    };
  };

  chain =
    kind: settings:
    let
      cDrv = c {
        b = bs.${kind};
        tag = kind;
        inherit settings;
      };
    in
    {
      c = cDrv;
      d = d {
        c = cDrv;
        tag = kind;
        inherit settings;
      };
    };
in
{
  inherit cuda fakeDriver bs;
  checkHook = stubstripHook.checkHook;
  # C and D over every strictDeps x __structuredAttrs, with B linked against either layout.
  chains = builtins.listToAttrs (
    builtins.concatMap (
      kind:
      map (s: lib.nameValuePair "${kind}-${settingsTag s}" (chain kind s)) (
        if kind == "single" then allSettings else [ strictSa ]
      )
    ) [
      "single"
      "split"
    ]
  );
  # Built with the fake driver mounted at the driver link (a distinct derivation, so it builds
  # again): the driver answers, the check libraries stay unused.
  driver =
    let
      cDrv = c {
        b = bs.single;
        tag = "single-driver";
        settings = strictSa;
        extra = {
          driverAtTheDriverLink = true;
          expectCuInit = "0";
        };
      };
    in
    {
      c = cDrv;
      d = d {
        c = cDrv;
        tag = "single-driver";
        settings = strictSa;
        extra = {
          driverAtTheDriverLink = true;
          expectRc = "0";
        };
      };
    };
  # Must fail: without check libraries (B opted out), C's import and D's link fail as in
  # nixpkgs#471697; with C's own opt-out, C's import does.
  negative = {
    c-b-opted-out = c {
      b = bs.single-opted-out;
      tag = "b-opted-out";
      settings = strictSa;
    };
    d-b-opted-out = d {
      c = c {
        b = bs.single-opted-out;
        tag = "b-opted-out-for-d";
        settings = strictSa;
        extra = {
          doCheck = false;
          doInstallCheck = false;
          preDistPhases = [ ];
        };
      };
      tag = "b-opted-out";
      settings = strictSa;
    };
    c-opted-out = c {
      b = bs.single;
      tag = "c-opted-out";
      settings = strictSa;
      extra.dontStubstripCheckFallback = true;
    };
  };
}
