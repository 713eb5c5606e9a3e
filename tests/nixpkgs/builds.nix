# What tests/nixpkgs/run.sh builds with nixpkgs' own machinery (native stdenv, cc-wrapper,
# autoPatchelfHook, autoAddDriverRunpath, buildRedist, cmake's and python's hooks), with
# nix/upstream applied (upstream = true) or not:
#   cuda.*       buildRedist's real cuda_cudart (single output, stubs in out/lib/stubs) and
#                cuda_nvml_dev (a separate `stubs` output), from local fake sources laid out as
#                NVIDIA's archives are, and cccl (which cuda_cudart propagates)
#   consumers.*  programs linked against their stubs: a C program (stdenv.mkDerivation), a CMake
#                project and a buildPythonPackage extension, over a matrix of input lists, fixup
#                hook orders, strictDeps and __structuredAttrs (./README.md)
#   negative     the C consumer without nix/upstream: nixpkgs' hook alone
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  upstream ? true,
  # A directory with the stubstrip binary (cargo's target/release), or null to build the
  # pkgs/by-name package with the real buildRustPackage (STUBSTRIP_NIXPKGS_RUST=1, ./README.md).
  prebuilt ? null,
  # For the real build: the vendored crates (`cargo vendor`) and the source.
  cargoVendor ? null,
  # After the suite's own (./real-cuda.nix: NVIDIA's real cuda_cudart).
  extraOverlays ? [ ],
}:
let
  stubstripOverlay =
    final: prev:
    if prebuilt != null then
      {
        # The binary from this checkout, with the package's passthru and meta.
        stubstrip = final.stdenvNoCC.mkDerivation {
          pname = "stubstrip";
          version = "prebuilt";
          dontUnpack = true;
          installPhase = ''
            install -D -m 0755 ${prebuilt}/stubstrip $out/bin/stubstrip
          '';
          dontPatchELF = true;
          dontStrip = true;
          passthru = {
            setupHookScript = ../../hooks/stubstrip-hook.sh;
            checkHookScript = ../../hooks/stubstrip-check-hook.sh;
          };
          meta = prev.stubstrip.meta;
        };
      }
    else
      { };

  fakeCudaOverlay = final: prev: {
    _cuda = prev._cuda.extend (
      _: prevCuda: {
        extensions = prevCuda.extensions ++ [ (fakeRedists final) ];
      }
    );
  };

  # Local sources in the layout of NVIDIA's redistributable archives
  # (<pname>-linux-<arch>-<version>-archive/{include,lib,...}), built with nixpkgs' cc-wrapper.
  fakeRedists =
    pkgs: finalCuda: prevCuda:
    let
      archive =
        pkg: script:
        pkgs.runCommandCC "${pkg.pname}-linux-${pkgs.stdenv.hostPlatform.parsed.cpu.name}-${pkg.version}-archive"
          { }
          ''
            mkdir -p $out
            cd $out
            echo "stubstrip test stand-in for ${pkg.pname}" > LICENSE
            ${script}
          '';
      withSrc =
        pkg: script: extra:
        pkg.overrideAttrs (
          {
            src = archive pkg script;
          }
          // extra
        );
    in
    {
      cuda_cudart =
        withSrc prevCuda.cuda_cudart
          ''
            mkdir -p include lib/stubs
            echo 'int cuInit(unsigned int flags);' > include/cuda.h
            $CC -O2 -shared -fPIC -Wl,-soname,libcudart.so.12 -o lib/libcudart.so.12 ${./fake/cudart.c}
            ln -s libcudart.so.12 lib/libcudart.so
            $CC -O2 -shared -fPIC -Wl,-soname,libcuda.so.1 -o lib/stubs/libcuda.so ${../../nix/tests/libcuda-stub.c}
          ''
          {
            # cuda_cudart refuses cuda_nvcc in its closure; naming it would make Nix build the
            # real nvcc (an NVIDIA download). Nothing here can bring it in.
            disallowedRequisites = [ ];
          };
      cuda_nvml_dev = withSrc prevCuda.cuda_nvml_dev ''
        mkdir -p include lib/stubs
        echo 'int nvmlInit_v2(void);' > include/nvml.h
        $CC -O2 -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o lib/stubs/libnvidia-ml.so ${./fake/nvml-stub.c}
      '' { };
      # cuda_cudart propagates cccl's headers.
      ${if prevCuda ? cccl then "cccl" else null} = withSrc prevCuda.cccl ''
        mkdir -p include/cuda/std
        echo '#pragma once' > include/cuda/std/version
      '' { patches = [ ]; };
    };

  pkgs = import ./pkgs.nix {
    inherit nixpkgs system upstream;
    extraOverlays = [
      stubstripOverlay
      fakeCudaOverlay
    ]
    ++ extraOverlays;
  };
  inherit (pkgs) lib cudaPackages;
  inherit (cudaPackages) cuda_cudart cuda_nvml_dev;
  python = pkgs.python3;
  nvmlStubs = lib.getOutput "stubs" cuda_nvml_dev;

  hookByName = {
    inherit (pkgs) autoPatchelfHook autoAddDriverRunpath;
    inherit (cudaPackages) removeStubsFromRunpathHook;
  };

  # consumer { kind; cudaIn; order; strictDeps; structuredAttrs; }
  #   kind     "c", "cmake", "python" or "nvml" (a C program against cuda_nvml_dev's stubs output)
  #   cudaIn   "buildInputs" or "nativeBuildInputs"
  #   order    hook names in nativeBuildInputs order (removeStubsFromRunpathHook listed by hand
  #            too, to show the position does not matter)
  consumer =
    {
      kind,
      cudaIn,
      order,
      strictDeps,
      structuredAttrs,
      installCheck ? true,
    }:
    let
      cuda = if kind == "nvml" then cuda_nvml_dev else cuda_cudart;
      stubsDir = if kind == "nvml" then "${nvmlStubs}/lib/stubs" else "${cuda_cudart}/lib/stubs";
      tag = lib.concatStringsSep "-" [
        kind
        (if cudaIn == "buildInputs" then "bi" else "nbi")
        (lib.concatMapStrings (n: lib.substring 0 5 n) order)
        (if strictDeps then "strict" else "lax")
        (if structuredAttrs then "sa" else "nosa")
      ];
      common = {
        inherit strictDeps;
        __structuredAttrs = structuredAttrs;
        nativeBuildInputs = map (n: hookByName.${n}) order ++ lib.optional (cudaIn == "nativeBuildInputs") cuda;
        buildInputs = lib.optional (cudaIn == "buildInputs") cuda;
        # autoPatchelfHook searches the lib/ of host inputs, not lib/stubs below it (and nothing
        # of nativeBuildInputs): a consumer using it on a stub-linked program names the directory.
        preFixup = ''
          addAutoPatchelfSearchPath ${stubsDir}
        '';
        passthru = { inherit kind stubsDir tag; };
      };
      # The program the checks run, what it prints from the stub (check fallback) and from the
      # fake driver.
      probe = if kind == "nvml" then "nvml-probe" else "cuda-probe";
      fromStub = if kind == "nvml" then "nvmlInit_v2 returned 999" else "cuInit returned 34";
      # Runs the program in the build's own installCheck and leaves a mark that it passed.
      installCheckPhase = ''
        runHook preInstallCheck
        said=$("$out/bin/${probe}")
        echo "${probe}: $said"
        [[ $said == "${fromStub}" ]]
        mkdir -p "$out/share/stubstrip-nixpkgs"
        echo "$said" > "$out/share/stubstrip-nixpkgs/install-check"
        runHook postInstallCheck
      '';
    in
    if kind == "c" || kind == "nvml" then
      pkgs.stdenv.mkDerivation (
        common
        // {
          name = "stubstrip-nixpkgs-${tag}";
          dontUnpack = true;
          buildPhase = ''
            runHook preBuild
            $CC -O2 -o ${probe} ${
              if kind == "nvml" then ./fake/nvml-probe.c else ../../nix/tests/cuda-probe.c
            } -L${stubsDir} -l${if kind == "nvml" then "nvidia-ml" else "cuda"}
            runHook postBuild
          '';
          installPhase = ''
            runHook preInstall
            install -D -m 0755 ${probe} "$out/bin/${probe}"
            runHook postInstall
          '';
          doInstallCheck = installCheck;
          inherit installCheckPhase;
        }
      )
    else if kind == "cmake" then
      pkgs.stdenv.mkDerivation (
        common
        // {
          name = "stubstrip-nixpkgs-${tag}";
          src = pkgs.runCommand "stubstrip-nixpkgs-cmake-src" { } ''
            mkdir $out
            cp ${./fake/cmake/CMakeLists.txt} $out/CMakeLists.txt
            cp ${../../nix/tests/cuda-probe.c} $out/cuda-probe.c
          '';
          nativeBuildInputs = common.nativeBuildInputs ++ [ pkgs.cmake ];
          cmakeFlags = [ "-DCUDA_STUBS=${stubsDir}" ];
          doInstallCheck = installCheck;
          inherit installCheckPhase;
        }
      )
    else
      python.pkgs.buildPythonPackage (
        common
        // {
          pname = "stubstrip-nixpkgs-${tag}";
          version = "1";
          pyproject = false;
          src = ./fake/python;
          buildPhase = ''
            runHook preBuild
            suffix=$(${python.interpreter} -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
            $CC -O2 -shared -fPIC -I${python}/include/python${python.pythonVersion} \
              -o cudaprobe$suffix cudaprobe.c -L${stubsDir} -lcuda
            runHook postBuild
          '';
          installPhase = ''
            runHook preInstall
            install -D -m 0755 -t "$out/${python.sitePackages}" cudaprobe*.so
            runHook postInstall
          '';
          pythonImportsCheck = [ "cudaprobe" ];
          # buildPythonPackage runs the check phase after fixup, as installCheck.
          doCheck = installCheck;
          checkPhase = ''
            runHook preCheck
            said=$(${python.interpreter} -c 'import cudaprobe; print(cudaprobe.init())')
            echo "cudaprobe.init(): $said"
            [[ $said == 34 ]]
            mkdir -p "$out/share/stubstrip-nixpkgs"
            echo "$said" > "$out/share/stubstrip-nixpkgs/install-check"
            runHook postCheck
          '';
        }
      );

  permutations =
    l:
    if l == [ ] then
      [ [ ] ]
    else
      lib.concatMap (x: map (rest: [ x ] ++ rest) (permutations (lib.remove x l))) l;
  hookNames = [
    "autoPatchelfHook"
    "autoAddDriverRunpath"
    "removeStubsFromRunpathHook"
  ];
  cudaIns = [
    "buildInputs"
    "nativeBuildInputs"
  ];
  bools = [
    true
    false
  ];

  # The C consumer over the whole matrix: 2 input lists x 6 hook orders x strictDeps x
  # __structuredAttrs = 48 builds; the others over both input lists, two hook orders (the
  # stub hook listed first and last) and both settings together on or off = 8 each.
  matrix =
    kinds: orders: settings:
    lib.concatMap (
      kind:
      lib.concatMap (
        cudaIn:
        lib.concatMap (
          order:
          map (
            s:
            consumer {
              inherit kind cudaIn order;
              inherit (s) strictDeps structuredAttrs;
            }
          ) settings
        ) orders
      ) cudaIns
    ) kinds;
  allSettings = lib.concatMap (
    strictDeps:
    map (structuredAttrs: { inherit strictDeps structuredAttrs; }) bools
  ) bools;
  pairedSettings = map (b: {
    strictDeps = b;
    structuredAttrs = b;
  }) bools;
  twoOrders = [
    hookNames
    (lib.reverseList hookNames)
  ];
  consumerList =
    matrix [ "c" ] (permutations hookNames) allSettings
    ++ matrix [
      "cmake"
      "python"
      "nvml"
    ] twoOrders pairedSettings;
in
{
  inherit pkgs;
  cuda = {
    inherit cuda_cudart;
    cuda_nvml_dev = nvmlStubs;
    inherit (cudaPackages) removeStubsFromRunpathHook;
  };
  consumers = lib.listToAttrs (map (drv: lib.nameValuePair drv.tag drv) consumerList);
  # bench/nixpkgs_hook_bench.py: a consumer of cuda_cudart with `files` ELF files (copies of one
  # library linked against the stub) in 40 directories. Every postFixupHooks entry is timed: a
  # fixupOutputHooks entry (they run after preFixup's hooks, when every hook has registered)
  # wraps each in a function that logs "stubstrip-bench: SECONDS s: ENTRY". `salt` forces a new
  # build.
  bench =
    {
      files ? 2000,
      salt ? "",
    }:
    pkgs.stdenv.mkDerivation {
      name = "stubstrip-nixpkgs-bench-${toString files}";
      inherit salt;
      dontUnpack = true;
      strictDeps = true;
      nativeBuildInputs = [
        pkgs.autoPatchelfHook
        pkgs.autoAddDriverRunpath
      ];
      buildInputs = [ cuda_cudart ];
      buildPhase = ''
        runHook preBuild
        $CC -O2 -shared -fPIC -o libprobe.so ${../../nix/tests/cuda-probe.c} -L${cuda_cudart}/lib/stubs -lcuda
        runHook postBuild
      '';
      installPhase = ''
        runHook preInstall
        for ((i = 0; i < ${toString files}; i++)); do
          dir=$out/lib/d$((i % 40))
          mkdir -p "$dir"
          cp libprobe.so "$dir/libprobe$i.so"
        done
        runHook postInstall
      '';
      preFixup = ''
        addAutoPatchelfSearchPath ${cuda_cudart}/lib/stubs
        stubstripBenchWrap() {
          [[ -z ''${stubstripBenchEntries+x} ]] || return 0
          stubstripBenchEntries=("''${postFixupHooks[@]}")
          postFixupHooks=()
          local i
          for i in "''${!stubstripBenchEntries[@]}"; do
            postFixupHooks+=("stubstripBenchRun $i")
          done
        }
        stubstripBenchRun() {
          local entry=''${stubstripBenchEntries[$1]} t0=$EPOCHREALTIME rc=0
          eval "$entry" || rc=$?
          local t1=$EPOCHREALTIME
          echo "stubstrip-bench: $(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }") s: $entry"
          return $rc
        }
        fixupOutputHooks+=(stubstripBenchWrap)
      '';
    };

  # Without nix/upstream: nixpkgs' hook alone replaces the stub entry, and the installCheck has
  # nothing to load libcuda.so.1 from.
  negative = consumer {
    kind = "c";
    cudaIn = "buildInputs";
    order = [ "autoPatchelfHook" ];
    strictDeps = true;
    structuredAttrs = false;
  };
}
