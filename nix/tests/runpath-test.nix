# Builds a program against `cuda`'s libcuda stub, lets autoPatchelfHook write
# the stub directory into its RUNPATH, and checks what stubstripHook left:
# the driver link in place of the stub entry (or, with dontStubstrip, the stub
# entry untouched). The installCheck phase runs the program, which loads the
# stub only through the hook's check fallback.
{
  lib,
  stdenv,
  runCommand,
  autoPatchelfHook,
  addDriverRunpath,
  binutils,
  stubstripHook,
  cuda,
  name,
  # Where the consumer lists cuda: "buildInputs" or "nativeBuildInputs".
  cudaIn ? "buildInputs",
  # stubstripHook listed by hand "before" or "after" autoPatchelfHook, or
  # null: it arrives only through cuda's stubs output.
  hookPosition ? null,
  doInstallCheck ? true,
  dontStubstrip ? false,
  dontStubstripCheckFallback ? false,
  structuredAttrs ? false,
  # Whether the stub entry should survive (the opt-outs).
  expectStub ? dontStubstrip,
  # Where cuda keeps libcuda.so.1: `stubs`/lib as in ./fake-cuda.nix, or
  # lib/stubs of `out` for cuda_cudart since nixpkgs PR #459416.
  stubsLibDir ? "${lib.getOutput "stubs" cuda}/lib",
  # Name stubsLibDir to autoPatchelfHook, which only searches the lib/ of
  # host inputs.
  searchStubsLibDir ? cudaIn == "nativeBuildInputs",
}:
let
  stubs = lib.getOutput "stubs" cuda;
  driverLib = "${addDriverRunpath.driverLink}/lib";
  # The probe loads the stub through RUNPATH (opt-out) or the check fallback.
  expectProbeLoads = expectStub || !dontStubstripCheckFallback;

  hooks =
    if hookPosition == "before" then
      [
        stubstripHook
        autoPatchelfHook
      ]
    else if hookPosition == "after" then
      [
        autoPatchelfHook
        stubstripHook
      ]
    else
      [ autoPatchelfHook ];

  program = stdenv.mkDerivation {
    name = "stubstrip-test-${name}";
    __structuredAttrs = structuredAttrs;
    strictDeps = true;
    dontUnpack = true;

    nativeBuildInputs = hooks ++ lib.optional (cudaIn == "nativeBuildInputs") cuda;
    buildInputs = lib.optional (cudaIn == "buildInputs") cuda;

    inherit doInstallCheck dontStubstrip dontStubstripCheckFallback;

    buildPhase = ''
      runHook preBuild
      $CC -o cuda-probe ${./cuda-probe.c} -L${stubsLibDir} -lcuda
      runHook postBuild
    '';

    installPhase = ''
      runHook preInstall
      install -D -m 0755 cuda-probe "$out/bin/cuda-probe"
      runHook postInstall
    '';

    preFixup = lib.optionalString searchStubsLibDir ''
      addAutoPatchelfSearchPath --no-recurse ${stubsLibDir}
    '';

    installCheckPhase = ''
      runHook preInstallCheck
      ${
        if expectProbeLoads then
          ''
            probe=$("$out/bin/cuda-probe")
            echo "cuda-probe: $probe"
            [[ $probe == "cuInit returned 34" ]]
          ''
        else
          ''
            if "$out/bin/cuda-probe"; then
              echo "cuda-probe loaded libcuda.so.1 without the check fallback" >&2
              exit 1
            fi
          ''
      }
      runHook postInstallCheck
    '';
  };
in
runCommand "stubstrip-test-${name}-runpath"
  {
    nativeBuildInputs = [ binutils ];
    passthru = { inherit program; };
  }
  ''
    file=${program}/bin/cuda-probe
    runpath=$(readelf -d "$file" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
    echo "RUNPATH of $file: $runpath"
    IFS=: read -r -a entries <<< "$runpath"

    hasDriver= hasStub=
    for entry in "''${entries[@]}"; do
      [[ $entry == ${driverLib} ]] && hasDriver=1
      [[ $entry == ${stubs} || $entry == ${stubs}/* ]] && hasStub=1
    done

    ${
      if expectStub then
        ''
          [[ -n $hasStub ]] || { echo "FAIL: stub entry removed despite the opt-out" >&2; exit 1; }
          [[ -z $hasDriver ]] || { echo "FAIL: driver link added despite the opt-out" >&2; exit 1; }
        ''
      else
        ''
          [[ -n $hasDriver ]] || { echo "FAIL: ${driverLib} missing from RUNPATH" >&2; exit 1; }
          [[ -z $hasStub ]] || { echo "FAIL: a ${stubs} entry is left in RUNPATH" >&2; exit 1; }
        ''
    }
    echo "$runpath" > $out
  ''
