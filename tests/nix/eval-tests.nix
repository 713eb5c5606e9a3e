# Evaluation-only tests of nix/ against the mock nixpkgs. Each attribute is a
# test: { ok = <bool>; detail = <what was seen>; }. tests/nix/run.sh counts them.
{
  repo ? ../..,
  mock ? ./mock-nixpkgs,
  system ? "x86_64-linux",
}:
let
  overlay = import (repo + "/nix/overlay.nix");
  importMock =
    args:
    import mock (
      {
        inherit system;
        prebuilt = null;
      }
      // args
    );
  plain = importMock { };
  pkgs = importMock { overlays = [ overlay ]; };
  inherit (pkgs) lib stubstrip stubstripHook;

  workspace = (lib.importTOML (repo + "/Cargo.toml")).workspace.package;
  hookScript = builtins.readFile (repo + "/hooks/stubstrip-hook.sh");

  hasInfix =
    infix: s:
    let
      n = builtins.stringLength infix;
    in
    builtins.any (i: builtins.substring i n s == infix) (
      builtins.genList (i: i) (builtins.stringLength s - n + 1)
    );
  sameDrv = a: b: a.drvPath == b.drvPath;

  # Does pkg's postFixup write `hook` into nix-support/propagated-build-inputs of its stubs
  # output, as buildRedist (and, for the legacy layout, ./nix/add-hook-to-stubs.nix) does?
  propagates =
    hook: pkg:
    let
      text = pkg.postFixup or "";
    in
    hasInfix "printWords ${lib.getDev hook} >> " text
    && hasInfix "/nix-support/propagated-build-inputs" text
    && !(hasInfix "propagated-native-build-inputs" text);
  # The set's removeStubsFromRunpathHook is ours: the upstream hook package over stubstrip.
  isOurHook =
    hook:
    hook.name == "removeStubsFromRunpathHook"
    && hook.stubstrip == "${stubstrip}/bin/stubstrip"
    && hook.driverLink == "${pkgs.addDriverRunpath.driverLink}/lib";

  test = ok: detail: { inherit ok detail; };

  requiredHookTests = [
    "cuda-in-build-inputs"
    "no-install-check"
    "hook-before-autopatchelf"
    "hook-after-autopatchelf"
  ];

  withoutSetHook = importMock {
    overlays = [
      overlay
      (_: prev: {
        _cuda = prev._cuda.extend (
          _: prevCuda: { extensions = prevCuda.extensions ++ [ (_: _: { stubstripHook = null; }) ]; }
        );
      })
    ];
  };
  legacy = importMock {
    withCudaExtensions = false;
    overlays = [ overlay ];
  };
  i686 = importMock {
    system = "i686-linux";
    overlays = [ overlay ];
  };
in
{
  package-pname = test (stubstrip.pname == "stubstrip") stubstrip.pname;
  package-version-from-cargo-toml = test (stubstrip.version == workspace.version) stubstrip.version;
  package-meta =
    test
      (
        stubstrip.meta.mainProgram == "stubstrip"
        && stubstrip.meta.license.spdxId == "MIT"
        && lib.all (s: lib.elem s stubstrip.meta.platforms) [
          "x86_64-linux"
          "aarch64-linux"
        ]
        && stubstrip.meta.description != ""
      )
      {
        inherit (stubstrip.meta) mainProgram description;
        license = stubstrip.meta.license.spdxId;
      };
  # The Rust sources, and the README whose library snippet is one of elfpatch's doctests.
  package-src-is-only-the-rust-sources =
    let
      names = builtins.attrNames (builtins.readDir stubstrip.src);
    in
    test (
      names == [
        "Cargo.lock"
        "Cargo.toml"
        "README.md"
        "crates"
      ]
    ) names;
  # Static, in the release's profile (release/README.md): +crt-static with glibc's static
  # libraries on glibc; the tests in the release profile.
  package-links-statically =
    test
      (
        stubstrip.buildType == "dist"
        && stubstrip.checkType == "release"
        && stubstrip.RUSTFLAGS == [ "-Ctarget-feature=+crt-static" ]
        && lib.any (sameDrv plain.glibc.static) stubstrip.buildInputs
      )
      {
        inherit (stubstrip) buildType checkType RUSTFLAGS;
        buildInputs = map (d: d.name) stubstrip.buildInputs;
      };
  package-cargo-lock-file =
    test (toString stubstrip.mockCargoLockFile == toString (repo + "/Cargo.lock"))
      (toString stubstrip.mockCargoLockFile);
  package-checks-run-with-elf-tools =
    let
      inputs = map (d: d.drvPath) stubstrip.nativeBuildInputs;
    in
    test (
      stubstrip.doCheck
      && lib.all (t: lib.elem t.drvPath inputs) [
        plain.gcc
        plain.patchelf
        plain.binutils
        plain.elfutils
        plain.glibc
      ]
    ) (map (d: d.name) stubstrip.nativeBuildInputs);

  hook-name = test (stubstripHook.name == "stubstripHook") stubstripHook.name;
  hook-substitutes-stubstrip-exe =
    test (stubstripHook.stubstrip == "${stubstrip}/bin/stubstrip")
      stubstripHook.stubstrip;
  hook-substitutes-driver-link-lib =
    test (stubstripHook.driverLink == "${pkgs.addDriverRunpath.driverLink}/lib")
      stubstripHook.driverLink;
  hook-driver-link-follows-add-driver-runpath-on-i686 =
    test (i686.stubstripHook.driverLink == "/run/opengl-driver-32/lib")
      i686.stubstripHook.driverLink;
  hook-script-has-both-placeholders =
    test (hasInfix "@stubstrip@" hookScript && hasInfix "@driverLink@" hookScript)
      "hooks/stubstrip-hook.sh";
  hook-passthru-tests-present =
    let
      names = builtins.attrNames stubstripHook.tests;
    in
    test (
      lib.all (n: lib.elem n names) requiredHookTests
      && lib.all (n: lib.isDerivation stubstripHook.tests.${n}) names
    ) names;

  overlay-replaces-removeStubsFromRunpathHook-by-ours =
    test (isOurHook pkgs.cudaPackages.removeStubsFromRunpathHook) {
      inherit (pkgs.cudaPackages.removeStubsFromRunpathHook) name stubstrip driverLink;
    };
  overlay-cudart-propagates-our-hook-only-from-propagated-build-inputs =
    test (propagates pkgs.cudaPackages.removeStubsFromRunpathHook pkgs.cudaPackages.cuda_cudart)
      pkgs.cudaPackages.cuda_cudart.postFixup;
  overlay-reaches-every-cuda-package-set =
    test (
      lib.all (set: isOurHook set.removeStubsFromRunpathHook && propagates set.removeStubsFromRunpathHook set.cuda_cudart) [
        pkgs.cudaPackages_12_9
        pkgs.cudaPackages_13_0
        pkgs.cudaPackages_13
      ]
    ) pkgs.cudaPackages_13_0.cuda_cudart.name;
  overlay-every-package-with-stubs =
    test (propagates pkgs.cudaPackages.removeStubsFromRunpathHook pkgs.cudaPackages.cuda_nvml_dev)
      pkgs.cudaPackages.cuda_nvml_dev.outputs;
  mock-cudart-is-single-output-with-cuda-name-prefix =
    test (
      pkgs.cudaPackages.cuda_cudart.outputs == [ "out" ]
      && pkgs.cudaPackages.cuda_cudart.name == "cuda12.9-cuda_cudart-12.9.79"
      && pkgs.cudaPackages.cuda_cudart.includeRemoveStubsFromRunpathHook
    ) { inherit (pkgs.cudaPackages.cuda_cudart) name outputs; };
  # Only the hook and the packages holding stubs change.
  overlay-changes-only-the-hook-and-stubs-holders =
    let
      changed = lib.filter (n: !(sameDrv pkgs.cudaPackages.${n} plain.cudaPackages.${n})) [
        "removeStubsFromRunpathHook"
        "cuda_cudart"
        "cuda_nvml_dev"
        "cuda_cccl"
      ];
    in
    test (
      changed == [
        "removeStubsFromRunpathHook"
        "cuda_cudart"
        "cuda_nvml_dev"
      ]
    ) changed;
  overlay-leaves-packages-without-stubs-alone =
    test (sameDrv pkgs.cudaPackages.cuda_cccl plain.cudaPackages.cuda_cccl)
      pkgs.cudaPackages.cuda_cccl.drvPath;
  overlay-leaves-null-packages-alone =
    test (pkgs.cudaPackages.cuda_compat == null)
      (builtins.typeOf pkgs.cudaPackages.cuda_compat);
  overlay-uses-build-platform-hook =
    test (
      sameDrv pkgs.cudaPackages.stubstripHook pkgs.buildPackages.stubstripHook
      && pkgs.cudaPackages.removeStubsFromRunpathHook.stubstrip == lib.getExe pkgs.buildPackages.stubstrip
    ) pkgs.cudaPackages.stubstripHook.name;
  overlay-opt-out-per-set-via-cuda-extensions =
    test (sameDrv withoutSetHook.cudaPackages.cuda_cudart plain.cudaPackages.cuda_cudart)
      withoutSetHook.cudaPackages.cuda_cudart.drvPath;
  overlay-opt-out-per-set-via-override-scope =
    let
      scope = pkgs.cudaPackages.overrideScope (_: _: { stubstripHook = null; });
    in
    test (sameDrv scope.cuda_cudart plain.cudaPackages.cuda_cudart) scope.cuda_cudart.drvPath;
  overlay-respects-an-earlier-opt-out =
    let
      earlier = importMock {
        overlays = [
          (_: prev: {
            _cuda = prev._cuda.extend (
              _: prevCuda: { extensions = prevCuda.extensions ++ [ (_: _: { stubstripHook = null; }) ]; }
            );
          })
          overlay
        ];
      };
    in
    test (sameDrv earlier.cudaPackages.cuda_cudart plain.cudaPackages.cuda_cudart)
      earlier.cudaPackages.cuda_cudart.drvPath;
  overlay-without-cuda-extensions-overrides-cudaPackages =
    test (
      !(legacy.cudaPackages ? removeStubsFromRunpathHook)
      && propagates legacy.stubstripHook legacy.cudaPackages.cuda_cudart
    ) legacy.cudaPackages.cuda_cudart.postFixup;
  # Guards the test above: the mock without extensions really ignores _cuda.
  mock-without-cuda-extensions-has-no-_cuda = test (!(legacy ? _cuda)) (builtins.attrNames legacy);
}
