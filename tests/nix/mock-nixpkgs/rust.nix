# rustPlatform.buildRustPackage with nixpkgs' argument conventions
# (pkgs/build-support/rust/build-rust-package/default.nix): cargoLock or
# cargoHash, nativeCheckInputs, cargoTestFlags, doCheck on by default, every
# executable of the release target dir installed into $out/bin. The mock
# cannot run cargo offline as the build user: when the mock has prebuilt
# binaries (./prebuilt, put there by tests/nix/run.sh from target/release),
# "building" installs those; without them the build fails and says why.
{
  lib,
  stdenv,
  cargo,
  rustc,
  prebuilt,
}:
{
  buildRustPackage =
    args:
    assert lib.assertMsg (
      args ? cargoLock || args ? cargoHash || args ? cargoDeps
    ) "buildRustPackage: one of cargoLock, cargoHash or cargoDeps is required";
    assert lib.assertMsg (
      args ? cargoLock -> builtins.pathExists args.cargoLock.lockFile
    ) "buildRustPackage: cargoLock.lockFile does not exist";
    stdenv.mkDerivation (
      removeAttrs args [
        "cargoLock"
        "cargoHash"
      ]
      // {
        nativeBuildInputs = (args.nativeBuildInputs or [ ]) ++ [
          cargo
          rustc
        ];
        doCheck = args.doCheck or true;
        cargoTestFlags = args.cargoTestFlags or [ ];
        mockPrebuilt = if prebuilt == null then "" else prebuilt;

        buildPhase =
          args.buildPhase or ''
            runHook preBuild
            test -f Cargo.toml && test -f Cargo.lock || { echo "mock cargo: no Cargo.toml/Cargo.lock in src" >&2; exit 1; }
            if [[ -z $mockPrebuilt ]]; then
              echo "mock rustPlatform: no prebuilt binaries (tests/nix/run.sh copies target/release/* into the mock)" >&2
              exit 1
            fi
            echo "mock cargo build: using the binaries in $mockPrebuilt"
            runHook postBuild
          '';
        checkPhase =
          args.checkPhase or ''
            runHook preCheck
            echo "mock cargo test $cargoTestFlags: not run; tools on PATH:"
            for tool in gcc patchelf readelf strip eu-elflint ldd; do command -v "$tool" || echo "($tool: not on PATH)"; done
            runHook postCheck
          '';
        installPhase =
          args.installPhase or ''
            runHook preInstall
            mkdir -p "$out/bin"
            find "$mockPrebuilt" -maxdepth 1 -type f -executable -exec cp {} "$out/bin/" \;
            runHook postInstall
          '';

        passthru = (args.passthru or { }) // {
          mockCargoLockFile = args.cargoLock.lockFile or null;
        };
      }
    );
}
