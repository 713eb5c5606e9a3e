# cudaPackages, after pkgs/top-level/cuda-packages.nix and pkgs/development/cuda-modules as of
# the nixpkgs tree tests/nixpkgs runs against (26.11pre): package sets built with makeScope from a
# base fixed point extended by every entry of `_cuda.extensions` (read from the final pkgs, so an
# overlay that extends _cuda reaches every set). Packages are shaped like buildRedist's:
#   - names carry cudaNamePrefix: cuda12.9-cuda_cudart-12.9.79;
#   - structured attrs, split outputs, propagatedBuildOutputs, `out` propagating the others;
#   - includeRemoveStubsFromRunpathHook defaults to having a `stubs` output; outputStubs falls back
#     from `stubs` to `lib` to `out`;
#   - postFixup writes the set's removeStubsFromRunpathHook into
#     nix-support/propagated-build-inputs of outputStubs, and only there;
#   - checkCudaHasStubsIffIncludeRemoveStubsFromRunpathHook: the build fails unless every output
#     with a stubs directory (or named stubs) names removeStubsFromRunpathHook in that file, and
#     no other does.
# The sets: cudaPackages_12_9 (= cudaPackages_12 = cudaPackages, the default) and
# cudaPackages_13_0 (= cudaPackages_13), each with a single-output cuda_cudart (stub libcuda.so
# in out/lib/stubs with the libcuda.so.1 link, includeRemoveStubsFromRunpathHook = true),
# cuda_nvml_dev (a `stubs` output, stubs/lib/stubs) and cuda_cccl (no stubs).
# `withCudaExtensions = false` gives a nixpkgs from before `_cuda` and before PR #459416: one set,
# cuda_cudart with a `stubs` output and no stub hook at all.
{
  lib,
  pkgs,
  withCudaExtensions,
}:
let
  redist =
    finalCuda:
    {
      pname,
      version ? "${finalCuda.cudaMajorMinorVersion}.79",
      outputs,
      propagatedBuildOutputs ? [ ],
      includeRemoveStubsFromRunpathHook ? lib.elem "stubs" outputs,
      install,
    }:
    pkgs.stdenv.mkDerivation {
      inherit
        pname
        version
        outputs
        propagatedBuildOutputs
        includeRemoveStubsFromRunpathHook
        ;
      name = "${finalCuda.cudaNamePrefix}-${pname}-${version}";
      # buildRedist's outputNameVarFallbacks.outputStubs.
      outputStubs = lib.findFirst (o: lib.elem o outputs) "out" [
        "stubs"
        "lib"
      ];
      __structuredAttrs = true;
      strictDeps = true;
      dontUnpack = true;
      installPhase = ''
        runHook preInstall
        mkdir -p "$out"
        ${install}
        runHook postInstall
      '';
      postFixup =
        # buildRedist's fixupCudaPropagatedBuildOutputsToOut.
        ''
          if [[ $outputDev != out ]]; then
            mkdir -p "$out/nix-support"
            for output in $(getAllOutputNames); do
              [[ $output == out ]] || printWords "''${!output}" >> "$out/nix-support/propagated-build-inputs"
            done
          fi
        ''
        # buildRedist: the stub hook goes into outputStubs' propagated-build-inputs only.
        + lib.optionalString (includeRemoveStubsFromRunpathHook && finalCuda ? removeStubsFromRunpathHook) ''
          mkdir -p "''${!outputStubs}/nix-support"
          printWords ${lib.getDev finalCuda.removeStubsFromRunpathHook} >> "''${!outputStubs}/nix-support/propagated-build-inputs"
        ''
        # buildRedistHook.bash's checkCudaHasStubsIffIncludeRemoveStubsFromRunpathHook.
        + lib.optionalString (finalCuda ? removeStubsFromRunpathHook) ''
          for output in $(getAllOutputNames); do
            hasStubs=
            if [[ $output == stubs ]] || find "''${!output}" -mindepth 1 -type d -name stubs | grep -q .; then
              hasStubs=1
            fi
            hasHook=
            if grep -qs removeStubsFromRunpathHook "''${!output}/nix-support/propagated-build-inputs"; then
              hasHook=1
            fi
            if [[ $hasStubs != "$hasHook" ]]; then
              echo "mock buildRedist: output $output: stubs=''${hasStubs:-no} removeStubsFromRunpathHook=''${hasHook:-no}" >&2
              exit 1
            fi
          done
        '';
    };

  # $1: directory for the stub libcuda and the libcuda.so.1 link cuda_cudart adds.
  installLibcudaStub = dir: ''
    mkdir -p "${dir}"
    $CC -shared -fPIC -Wl,-soname,libcuda.so.1 -o "${dir}/libcuda.so" ${./stub.c}
    ln -s libcuda.so "${dir}/libcuda.so.1"
  '';

  common = finalCuda: {
    cudaNamePrefix = "cuda${finalCuda.cudaMajorMinorVersion}";
    backendStdenv = pkgs.stdenv;
    # Disabled packages are null in real sets too (cuda_compat off Jetson).
    cuda_compat = null;
    # No stubs: must come through the overlay untouched.
    cuda_cccl = redist finalCuda {
      pname = "cuda_cccl";
      outputs = [ "out" ];
      install = ''
        mkdir -p "$out/include/cub"
        echo '#pragma once' > "$out/include/cub/cub.cuh"
      '';
    };
  };

  current =
    cudaMajorMinorVersion: finalCuda:
    common finalCuda
    // {
      inherit cudaMajorMinorVersion;
      removeStubsFromRunpathHook = pkgs.makeSetupHook {
        name = "removeStubsFromRunpathHook";
        substitutions.driverLinkLib = "${pkgs.addDriverRunpath.driverLink}/lib";
      } ../hooks/remove-stubs-from-runpath.sh;
      cuda_cudart = redist finalCuda {
        pname = "cuda_cudart";
        outputs = [ "out" ];
        includeRemoveStubsFromRunpathHook = true;
        install = ''
          mkdir -p "$out/include" "$out/lib"
          echo 'int cuInit(unsigned int flags);' > "$out/include/cuda.h"
          $CC -shared -fPIC -Wl,-soname,libcudart.so.12 -o "$out/lib/libcudart.so.12" ${./cudart.c}
          ${installLibcudaStub "$out/lib/stubs"}
        '';
      };
      cuda_nvml_dev = redist finalCuda {
        pname = "cuda_nvml_dev";
        outputs = [
          "out"
          "stubs"
        ];
        propagatedBuildOutputs = [ "stubs" ];
        install = ''
          mkdir -p "$stubs/lib/stubs"
          $CC -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$stubs/lib/stubs/libnvidia-ml.so" ${./stub.c}
          ln -s libnvidia-ml.so "$stubs/lib/stubs/libnvidia-ml.so.1"
        '';
      };
    };

  # Before PR #459416: the stubs in a `stubs` output, linked from its lib/, and no stub hook.
  legacy =
    finalCuda:
    common finalCuda
    // {
      cudaMajorMinorVersion = "12.8";
      cuda_cudart = redist finalCuda {
        pname = "cuda_cudart";
        outputs = [
          "out"
          "stubs"
        ];
        propagatedBuildOutputs = [ "stubs" ];
        install = ''
          mkdir -p "$out/include"
          echo 'int cuInit(unsigned int flags);' > "$out/include/cuda.h"
          ${installLibcudaStub "$stubs/lib/stubs"}
          ln -s stubs/libcuda.so "$stubs/lib/libcuda.so"
          ln -s stubs/libcuda.so.1 "$stubs/lib/libcuda.so.1"
        '';
      };
    };

  extensions = if withCudaExtensions then pkgs._cuda.extensions else [ ];
  mkCudaPackages =
    base: lib.makeScope pkgs.newScope (lib.extends (lib.composeManyExtensions extensions) base);
in
if withCudaExtensions then
  {
    _cuda = lib.makeExtensible (_: {
      extensions = [ ];
    });
    cudaPackages_12_9 = mkCudaPackages (current "12.9");
    cudaPackages_13_0 = mkCudaPackages (current "13.0");
    cudaPackages_12 = pkgs.cudaPackages_12_9;
    cudaPackages_13 = pkgs.cudaPackages_13_0;
    cudaPackages = pkgs.cudaPackages_12;
  }
else
  {
    cudaPackages_12_8 = mkCudaPackages legacy;
    cudaPackages = pkgs.cudaPackages_12_8;
  }
