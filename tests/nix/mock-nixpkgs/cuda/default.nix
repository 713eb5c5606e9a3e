# cudaPackages, after pkgs/top-level/cuda-packages.nix and
# pkgs/development/cuda-modules: package sets built with makeScope from a base
# fixed point extended by every entry of `_cuda.extensions` (read from the
# final pkgs, so an overlay that extends _cuda reaches every set), and
# redistributables shaped like buildRedist's: structured attrs, split
# outputs, stubs in their own output, propagatedBuildOutputs, and `out`
# propagating the other outputs.
{
  lib,
  pkgs,
  withCudaExtensions,
}:
let
  redist =
    {
      cudaNamePrefix,
      pname,
      version,
      outputs,
      propagatedBuildOutputs,
      install,
    }:
    pkgs.stdenv.mkDerivation {
      inherit pname version outputs;
      # A distinctive store name: the mock builds in a shared store.
      name = "stubstrip-mock-${cudaNamePrefix}-${pname}-${version}";
      __structuredAttrs = true;
      strictDeps = true;
      dontUnpack = true;
      inherit propagatedBuildOutputs;
      installPhase = ''
        runHook preInstall
        mkdir -p "$out"
        ${install}
        runHook postInstall
      '';
      # buildRedist's fixupCudaPropagatedBuildOutputsToOut.
      postFixup = ''
        if [[ $outputDev != out ]]; then
          mkdir -p "$out/nix-support"
          for output in $(getAllOutputNames); do
            [[ $output == out ]] || printWords "''${!output}" >> "$out/nix-support/propagated-build-inputs"
          done
        fi
      '';
    };

  base = finalCuda: {
    cudaMajorMinorVersion = "12.8";
    cudaNamePrefix = "cuda${finalCuda.cudaMajorMinorVersion}";
    backendStdenv = pkgs.stdenv;
    # Disabled packages are null in real sets too (cuda_compat off Jetson).
    cuda_compat = null;

    cuda_cudart = redist {
      inherit (finalCuda) cudaNamePrefix;
      pname = "cuda_cudart";
      version = "12.8.90";
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
        mkdir -p "$include/include" "$lib/lib" "$stubs/lib/stubs"
        echo 'int cuInit(unsigned int flags);' > "$include/include/cuda.h"
        $CC -shared -fPIC -Wl,-soname,libcudart.so.12 -o "$lib/lib/libcudart.so.12" ${./cudart.c}
        ln -s libcudart.so.12 "$lib/lib/libcudart.so"
        $CC -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stubs/lib/stubs/libcuda.so" ${./stub.c}
        ln -s libcuda.so "$stubs/lib/stubs/libcuda.so.1"
        ln -s stubs/libcuda.so "$stubs/lib/libcuda.so"
        ln -s stubs/libcuda.so.1 "$stubs/lib/libcuda.so.1"
      '';
    };

    cuda_nvml_dev = redist {
      inherit (finalCuda) cudaNamePrefix;
      pname = "cuda_nvml_dev";
      version = "12.8.90";
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

    # No stubs: must come through the overlay untouched.
    cuda_cccl = redist {
      inherit (finalCuda) cudaNamePrefix;
      pname = "cuda_cccl";
      version = "12.8.90";
      outputs = [ "out" ];
      propagatedBuildOutputs = [ ];
      install = ''
        mkdir -p "$out/include/cub"
        echo '#pragma once' > "$out/include/cub/cub.cuh"
      '';
    };
  };

  extensions = if withCudaExtensions then pkgs._cuda.extensions else [ ];
  cudaPackages_12_8 = lib.makeScope pkgs.newScope (
    lib.extends (lib.composeManyExtensions extensions) base
  );
in
lib.optionalAttrs withCudaExtensions {
  _cuda = lib.makeExtensible (_: {
    extensions = [ ];
  });
}
// {
  inherit cudaPackages_12_8;
  cudaPackages_12 = pkgs.cudaPackages_12_8;
  cudaPackages = pkgs.cudaPackages_12;
}
