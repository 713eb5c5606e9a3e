# runCommand, makeSetupHook and friends, after
# pkgs/build-support/trivial-builders/default.nix.
{ lib, stdenv }:
rec {
  runCommandWith =
    {
      name,
      derivationArgs ? { },
    }:
    buildCommand:
    stdenv.mkDerivation (
      {
        inherit name buildCommand;
        passAsFile = [ "buildCommand" ] ++ (derivationArgs.passAsFile or [ ]);
      }
      // removeAttrs derivationArgs [ "passAsFile" ]
    );

  runCommand =
    name: env:
    runCommandWith {
      inherit name;
      derivationArgs = env;
    };
  runCommandLocal = runCommand;

  writeTextFile =
    {
      name,
      text,
      executable ? false,
      destination ? "",
      meta ? { },
    }:
    runCommand name
      {
        inherit text executable destination meta;
        passAsFile = [ "text" ];
      }
      ''
        target=$out$destination
        mkdir -p "$(dirname "$target")"
        cp "$textPath" "$target"
        if [[ -n $executable ]]; then chmod +x "$target"; fi
      '';
  writeText = name: text: writeTextFile { inherit name text; };
  writeShellScriptBin =
    name: text:
    writeTextFile {
      inherit name;
      executable = true;
      destination = "/bin/${name}";
      text = "#!/bin/bash\n${text}\n";
      meta.mainProgram = name;
    };

  # The script lands in $out/nix-support/setup-hook; each substitution becomes
  # an attribute of the derivation (so `hook.driverLink` works) and replaces
  # its @name@ in the script. Propagated inputs are recorded as usual.
  makeSetupHook =
    {
      name ? lib.warn "calling makeSetupHook without passing a name is deprecated." "hook",
      propagatedBuildInputs ? [ ],
      propagatedNativeBuildInputs ? [ ],
      depsTargetTargetPropagated ? [ ],
      meta ? { },
      passthru ? { },
      substitutions ? { },
    }:
    script:
    runCommand name
      (
        substitutions
        // {
          __structuredAttrs = false;
          inherit
            meta
            passthru
            propagatedBuildInputs
            propagatedNativeBuildInputs
            depsTargetTargetPropagated
            ;
          strictDeps = true;
        }
      )
      (
        ''
          mkdir -p $out/nix-support
          cp ${script} $out/nix-support/setup-hook
          recordPropagatedDependencies
        ''
        + lib.optionalString (substitutions != { }) ''
          substituteAll ${script} $out/nix-support/setup-hook
        ''
      );
}
