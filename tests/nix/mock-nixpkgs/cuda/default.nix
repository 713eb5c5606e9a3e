# cudaPackages, after pkgs/top-level/cuda-packages.nix and
# pkgs/development/cuda-modules: package sets built with makeScope from a base
# fixed point extended by every entry of `_cuda.extensions` (read from the
# final pkgs, so an overlay that extends _cuda reaches every set).
# Redistributables are shaped like buildRedist's: structured attrs, split
# outputs, propagatedBuildOutputs, `out` propagating the other outputs.
# The two sets show the two layouts nixpkgs has had:
#   cudaPackages_12_8: cuda_cudart with a `stubs` output, no stub hook;
#   cudaPackages_13_0: as since nixpkgs PR #459416, cuda_cudart in a single
#     output with its stubs in lib/stubs and includeRemoveStubsFromRunpathHook,
#     so buildRedist writes removeStubsFromRunpathHook into the propagated
#     files of `outputStubs`; cuda_nvml_dev with a `stubs` output and the flag.
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
      version ? "${finalCuda.cudaMajorMinorVersion}.90",
      outputs,
      propagatedBuildOutputs ? [ ],
      includeRemoveStubsFromRunpathHook ? false,
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
      # A distinctive store name: the mock builds in a shared store.
      name = "stubstrip-mock-${finalCuda.cudaNamePrefix}-${pname}-${version}";
      # buildRedist's outputNameVarFallbacks: stubs, else out.
      outputStubs = if lib.elem "stubs" outputs then "stubs" else "out";
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
        # buildRedist since PR #459416: the stub hook goes into outputStubs.
        + lib.optionalString includeRemoveStubsFromRunpathHook ''
          mkdir -p "''${!outputStubs}/nix-support"
          printWords ${finalCuda.removeStubsFromRunpathHook} >> "''${!outputStubs}/nix-support/propagated-build-inputs"
          printWords ${finalCuda.removeStubsFromRunpathHook} >> "''${!outputStubs}/nix-support/propagated-native-build-inputs"
        '';
    };

  # $1: directory for the stub libcuda (and its libcuda.so.1 name).
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
    removeStubsFromRunpathHook = pkgs.makeSetupHook {
      name = "removeStubsFromRunpathHook";
      substitutions.driverLinkLib = "${pkgs.addDriverRunpath.driverLink}/lib";
    } ../hooks/remove-stubs-from-runpath.sh;
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

  base_12_8 =
    finalCuda:
    common finalCuda
    // {
      cudaMajorMinorVersion = "12.8";
      cuda_cudart = redist finalCuda {
        pname = "cuda_cudart";
        outputs = [
          "out"
          "dev"
          "include"
          "lib"
          "stubs"
        ];
        propagatedBuildOutputs = [
          "include"
          "lib"
          "stubs"
        ];
        install = ''
          mkdir -p "$include/include" "$lib/lib"
          echo 'int cuInit(unsigned int flags);' > "$include/include/cuda.h"
          $CC -shared -fPIC -Wl,-soname,libcudart.so.12 -o "$lib/lib/libcudart.so.12" ${./cudart.c}
          ${installLibcudaStub "$stubs/lib/stubs"}
          ln -s stubs/libcuda.so "$stubs/lib/libcuda.so"
          ln -s stubs/libcuda.so.1 "$stubs/lib/libcuda.so.1"
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
          ln -s stubs/libnvidia-ml.so.1 "$stubs/lib/libnvidia-ml.so.1"
        '';
      };
    };

  base_13_0 =
    finalCuda:
    common finalCuda
    // {
      cudaMajorMinorVersion = "13.0";
      cuda_cudart = redist finalCuda {
        pname = "cuda_cudart";
        outputs = [ "out" ];
        includeRemoveStubsFromRunpathHook = true;
        install = ''
          mkdir -p "$out/include" "$out/lib"
          echo 'int cuInit(unsigned int flags);' > "$out/include/cuda.h"
          $CC -shared -fPIC -Wl,-soname,libcudart.so.13 -o "$out/lib/libcudart.so.13" ${./cudart.c}
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
        includeRemoveStubsFromRunpathHook = true;
        install = ''
          mkdir -p "$stubs/lib"
          $CC -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$stubs/lib/libnvidia-ml.so" ${./stub.c}
          ln -s libnvidia-ml.so "$stubs/lib/libnvidia-ml.so.1"
        '';
      };
    };

  extensions = if withCudaExtensions then pkgs._cuda.extensions else [ ];
  mkCudaPackages =
    base: lib.makeScope pkgs.newScope (lib.extends (lib.composeManyExtensions extensions) base);
in
lib.optionalAttrs withCudaExtensions {
  _cuda = lib.makeExtensible (_: {
    extensions = [ ];
  });
}
// {
  cudaPackages_12_8 = mkCudaPackages base_12_8;
  cudaPackages_13_0 = mkCudaPackages base_13_0;
  cudaPackages_12 = pkgs.cudaPackages_12_8;
  cudaPackages_13 = pkgs.cudaPackages_13_0;
  cudaPackages = pkgs.cudaPackages_12;
}
