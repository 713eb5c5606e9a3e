# The real-cuda part (./real-cuda.sh, ./README.md): nixpkgs' own buildRedist `cuda_cudart` of
# cudaPackages_13_0 built from NVIDIA's files (tests/gpu/pack-cudart.sh packs them on the GPU
# machine in the layout of NVIDIA's archives; they are never committed), and two consumers built
# with nixpkgs' native stdenv and autoPatchelfHook, in three variants:
#   nohook   nixpkgs without nix/upstream, nixpkgs' removeStubsFromRunpathHook's postFixup entry
#            taken out again in preFixup: what a consumer got before any stub hook
#   nixpkgs  nixpkgs' own removeStubsFromRunpathHook (without nix/upstream)
#   ours     with nix/upstream as the overlay: stubstrip's hook
# plus nixpkgsNoCheck (nixpkgs' hook, installCheck off, as nixpkgs' maintainers had to) and
# oursNoPropagate (ours with dontStubstripPropagateCheckFallback: no copy of the stub for the
# checks of packages built on top, as suits a program nothing links).
#   archives  a directory holding cuda_cudart-linux-x86_64-<v>-archive.tar.xz and
#             cuda_crt-linux-x86_64-<v>-archive.tar.xz (REAL_CUDA_ARCHIVES)
# Only `src` changes, and `version` where the archive's differs from the tree's manifest.
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  prebuilt,
  archives,
}:
let
  # The archive of PNAME in `archives`, and its version from the file name.
  archiveOf =
    pname:
    let
      names = builtins.attrNames (builtins.readDir archives);
      prefix = "${pname}-linux-x86_64-";
      suffix = "-archive.tar.xz";
      matching = builtins.filter (
        n:
        builtins.substring 0 (builtins.stringLength prefix) n == prefix
        && builtins.match ".*${suffix}" n != null
      ) names;
      file =
        if matching == [ ] then
          throw "real-cuda: no ${prefix}<version>${suffix} in ${toString archives} (tests/gpu/pack-cudart.sh makes it)"
        else
          builtins.head matching;
      version = builtins.substring (builtins.stringLength prefix) (
        builtins.stringLength file - builtins.stringLength prefix - builtins.stringLength suffix
      ) file;
    in
    {
      inherit version;
      src = builtins.path {
        path = /. + "${toString archives}/${file}";
        name = file;
      };
    };

  realCudaOverlay = final: prev: {
    _cuda = prev._cuda.extend (
      _: prevCuda: {
        extensions = prevCuda.extensions ++ [ (realRedists final) ];
      }
    );
  };
  realRedists =
    pkgs: finalCuda: prevCuda:
    let
      real =
        pkg:
        let
          a = archiveOf pkg.pname;
        in
        pkg.overrideAttrs (
          { inherit (a) src; } // (if a.version == pkg.version then { } else { inherit (a) version; })
        );
    in
    {
      cuda_cudart = real prevCuda.cuda_cudart;
      ${if prevCuda ? cuda_crt then "cuda_crt" else null} = real prevCuda.cuda_crt;
      # cuda_cudart propagates cccl's headers, which nothing here includes: a stand-in in the
      # CUDA 13 layout (cccl's prePatch un-nests include/cccl).
      ${if prevCuda ? cccl then "cccl" else null} = prevCuda.cccl.overrideAttrs {
        src = pkgs.runCommand "stubstrip-realcuda-cccl-stand-in" { } ''
          mkdir -p $out/include/cccl/cuda/std
          echo '#pragma once' > $out/include/cccl/cuda/std/version
          echo "stubstrip test stand-in for cccl" > $out/LICENSE
        '';
        patches = [ ];
      };
    };

  setOf =
    upstream:
    let
      built = import ./builds.nix {
        inherit
          nixpkgs
          system
          upstream
          prebuilt
          ;
        extraOverlays = [ realCudaOverlay ];
      };
    in
    {
      inherit (built) pkgs;
      cuda = built.pkgs.cudaPackages_13_0;
    };
  withOverlay = setOf true;
  withoutOverlay = setOf false;

  # consumer SET VARIANT PROGRAM: PROGRAM is driver-api (-lcuda) or runtime-api (-lcudart -lcuda).
  consumer =
    {
      set,
      variant,
      program,
      installCheck ? true,
      extraAttrs ? { },
    }:
    let
      inherit (set) pkgs cuda;
      cudart = cuda.cuda_cudart;
      # What the program prints where the stub answers (the installCheck's expectation).
      fromStub =
        if program == "driver-api" then
          "cuInit: CUDA_ERROR_STUB_LIBRARY (34)"
        else
          "cudaGetDeviceCount: cudaErrorStubLibrary (34)";
    in
    pkgs.stdenv.mkDerivation (
      {
        name = "stubstrip-realcuda-${variant}-${program}";
        dontUnpack = true;
        strictDeps = true;
        nativeBuildInputs = [ pkgs.autoPatchelfHook ];
        buildInputs = [ cudart ];
        buildPhase = ''
          runHook preBuild
          { echo 'static const char kernel_ptx[] ='
            sed 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&\\n"/' ${./real-cuda/kernel.ptx}
            echo ';'; } > kernel-ptx.h
          $CC -O2 -Wall -I. -o ${program} ${./real-cuda + "/${program}.c"} \
            ${if program == "runtime-api" then "-L${cudart}/lib -lcudart" else ""} \
            -L${cudart}/lib/stubs -lcuda
          runHook postBuild
        '';
        installPhase = ''
          runHook preInstall
          install -D -m 0755 ${program} "$out/bin/${program}"
          runHook postInstall
        '';
        # autoPatchelfHook searches lib/ of the inputs, not lib/stubs below it: a consumer linking
        # the stub names the directory (as the suite's other consumers do).
        preFixup = ''
          addAutoPatchelfSearchPath ${cudart}/lib/stubs
        ''
        + (
          if variant == "nohook" then
            ''
              # No stub hook: take nixpkgs' entry out of postFixupHooks again (it registers from
              # prePhases, cuda_cudart propagates it).
              kept=()
              for h in "''${postFixupHooks[@]}"; do
                [[ $h == "autoFixElfFiles removeStubsFromRunpath" ]] || kept+=("$h")
              done
              postFixupHooks=("''${kept[@]}")
              echo "stubstrip-realcuda: postFixupHooks without the stub hook: ''${postFixupHooks[*]}"
            ''
          else
            ""
        );
        doInstallCheck = installCheck;
        installCheckPhase = ''
          runHook preInstallCheck
          said=$("$out/bin/${program}" 2>&1) || true
          echo "installCheck: $out/bin/${program}: $said"
          [[ $said == *"${fromStub}"* ]]
          runHook postInstallCheck
        '';
        passthru = { inherit cudart fromStub; };
      }
      // extraAttrs
    );

  variantOf =
    set: variant: installCheck: extraAttrs:
    builtins.listToAttrs (
      map
        (program: {
          name = program;
          value = consumer {
            inherit
              set
              variant
              program
              installCheck
              extraAttrs
              ;
          };
        })
        [
          "driver-api"
          "runtime-api"
        ]
    );
in
{
  cuda_cudart = withOverlay.cuda.cuda_cudart;
  cuda_cudart_nixpkgs = withoutOverlay.cuda.cuda_cudart;
  nixpkgsHook = withoutOverlay.cuda.removeStubsFromRunpathHook;
  nohook = variantOf withoutOverlay "nohook" true { };
  nixpkgs = variantOf withoutOverlay "nixpkgs" true { };
  nixpkgsNoCheck = variantOf withoutOverlay "nixpkgs-nocheck" false { };
  ours = variantOf withOverlay "ours" true { };
  # A program nothing is built on: no check library for dependents (hooks/stubstrip-hook.sh).
  oursNoPropagate = variantOf withOverlay "ours-nopropagate" true {
    dontStubstripPropagateCheckFallback = true;
  };
}
