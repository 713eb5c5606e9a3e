# The host's tools in place of nixpkgs packages that would be built from an upstream source, which
# cannot be fetched here (the native stdenv does the same for its compiler and coreutils). Each
# stand-in is a new derivation holding links to the host's files, with the replaced package's
# passthru, meta and setup hooks, so nixpkgs' hooks and helpers (cmake's setup hook, python's
# setup hook, withPackages, buildPythonPackage, pythonImportsCheck) are nixpkgs' own.
# tests/nixpkgs/README.md lists them. Applied in every stage of the native bootstrap.
final: prev:
let
  inherit (prev) lib;
  hostPython = "3.11";

  # standIn pkg { bin = { NAME = HOSTPATH; }; extra = SHELL; }
  # `.override` gives the same stand-in (python's passthru overrides the interpreter for its
  # splices). Made with stdenv, not stdenvNoCC: buildPythonPackage builds with `python.stdenv`.
  standIn =
    pkg:
    {
      bin ? { },
      extra ? "",
    }:
    lib.makeOverridable (_: final.stdenv.mkDerivation {
      pname = "stubstrip-host-${pkg.pname or (lib.getName pkg)}";
      version = "host";
      passthru = pkg.passthru or { };
      meta = removeAttrs (pkg.meta or { }) [ "maintainers" "teams" ];
      setupHook = pkg.setupHook or null;
      setupHooks = pkg.setupHooks or [ ];
      outputs = [ "out" ];
      dontUnpack = true;
      dontPatchELF = true;
      dontStrip = true;
      # The fixup phase runs, as it does for the real package: it installs the setup hooks.
      installPhase = ''
        mkdir -p $out/bin
        ${lib.concatStrings (lib.mapAttrsToList (name: path: "ln -s ${path} $out/bin/${name}\n") bin)}
        ${extra}
      '';
    }) { };

  # Debian's python3.11, with nixpkgs' sitecustomize.py (which reads the NIX_PYTHONPATH that
  # python.withPackages environments set) in the site-packages of the stand-in; the python setup
  # hook puts that directory on PYTHONPATH, and the interpreter wrapper below does too.
  python = standIn prev."python${lib.replaceStrings [ "." ] [ "" ] hostPython}" {
    extra = ''
      site=$out/lib/python${hostPython}/site-packages
      mkdir -p $site $out/include
      cp ${prev.path + "/pkgs/development/interpreters/python/sitecustomize.py"} $site/sitecustomize.py
      ln -s /usr/include/python${hostPython} $out/include/python${hostPython}
      for name in python${hostPython} python3 python; do
        printf '#!/bin/bash\nexport PYTHONPATH=%s${"\${PYTHONPATH:+:$PYTHONPATH}"}\nexec -a "$0" /usr/bin/python${hostPython} "$@"\n' \
          "$site" > $out/bin/$name
        chmod +x $out/bin/$name
      done
    '';
  };
  pythonAttr = "python${lib.replaceStrings [ "." ] [ "" ] hostPython}";
in
{
  # The native stdenv's last stage builds these from source for itself.
  xz = standIn prev.xz {
    bin = lib.genAttrs [ "xz" "unxz" "xzcat" "lzma" "unlzma" ] (n: "/usr/bin/${n}");
  };
  patchelf = standIn prev.patchelf { bin.patchelf = "/usr/bin/patchelf"; };
  # nixpkgs' bintools wraps binutils built from source (and, with the native stdenv's
  # nativeTools, fails its own assertion); the native stdenv's wrapper of the host's is used.
  bintools = prev.stdenv.cc.bintools;

  # Hooks that name a coreutils program by its store path (ensureNewerSourcesForZipFilesHook).
  coreutils = standIn prev.coreutils {
    extra = ''
      for f in $(dpkg -L coreutils | grep '/bin/'); do
        [[ -f $f ]] && ln -sf "$f" $out/bin/
      done
    '';
  };

  # Named by store path by python's hooks and wrappers (find, and bash as the wrappers' shell).
  findutils = standIn prev.findutils {
    bin = lib.genAttrs [ "find" "xargs" ] (n: "/usr/bin/${n}");
  };
  bash = standIn prev.bash {
    bin = {
      bash = "/bin/bash";
      sh = "/bin/bash";
    };
  };
  bashNonInteractive = final.bash;

  # buildEnv (python.withPackages) runs a perl script.
  perl = standIn prev.perl { bin.perl = "/usr/bin/perl"; };

  cmake = standIn prev.cmake {
    bin = lib.genAttrs [ "cmake" "ctest" "cpack" ] (n: "/usr/bin/${n}");
  };

  ${pythonAttr} = python;
  python3 = final.${pythonAttr};
  python3Packages = final.${pythonAttr}.pkgs;

  pythonPackagesExtensions = prev.pythonPackagesExtensions ++ [
    (pyFinal: pyPrev: {
      # Debian's python3-pyelftools, which the host python finds by itself.
      pyelftools = pyFinal.toPythonModule (
        standIn pyPrev.pyelftools {
          extra = "mkdir -p $out/${pyFinal.python.sitePackages}";
        }
      );
    })
  ];
}
