# A stand-in for cudaPackages.cuda_cudart: NVIDIA's libcuda stub in a `stubs`
# output, laid out as nixpkgs lays it out (lib/stubs/libcuda.so, the
# libcuda.so.1 symlink that lets it load, and links from lib/ so that
# autoPatchelfHook, which does not recurse, finds it), propagated from `out`.
{ stdenv }:
stdenv.mkDerivation {
  pname = "stubstrip-test-cuda_cudart";
  version = "12.8.90";

  __structuredAttrs = true;
  strictDeps = true;

  outputs = [
    "out"
    "stubs"
  ];
  propagatedBuildOutputs = [ "stubs" ];

  dontUnpack = true;

  buildPhase = ''
    runHook preBuild
    $CC -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so ${./libcuda-stub.c}
    runHook postBuild
  '';

  installPhase = ''
    runHook preInstall
    mkdir -p "$out/include" "$stubs/lib/stubs"
    echo 'int cuInit(unsigned int flags);' > "$out/include/cuda.h"
    install -m 0755 libcuda.so "$stubs/lib/stubs/libcuda.so"
    ln -s libcuda.so "$stubs/lib/stubs/libcuda.so.1"
    ln -s stubs/libcuda.so "$stubs/lib/libcuda.so"
    ln -s stubs/libcuda.so.1 "$stubs/lib/libcuda.so.1"
    runHook postInstall
  '';
}
