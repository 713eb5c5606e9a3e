# Packages the expressions only put on PATH (compilers, linters, formatters):
# each links the host's binaries of that name, if it has them, into $out/bin.
{ lib, runCommand }:
let
  hostTool =
    name: bins:
    runCommand "stubstrip-mock-host-${name}"
      {
        inherit bins;
        meta.mainProgram = builtins.head bins;
      }
      ''
        mkdir -p "$out/bin"
        for bin in $bins; do
          if path=$(command -v "$bin"); then ln -s "$path" "$out/bin/$bin"; fi
        done
      '';
in
lib.mapAttrs hostTool {
  gcc = [
    "gcc"
    "cc"
  ];
  binutils = [
    "readelf"
    "objdump"
    "strip"
    "ld"
  ];
  glibc = [ "ldd" ];
  elfutils = [
    "eu-elflint"
    "eu-readelf"
  ];
  patchelf = [ "patchelf" ];
  cargo = [ "cargo" ];
  rustc = [ "rustc" ];
  clippy = [ "cargo-clippy" ];
  rustfmt = [ "rustfmt" ];
  shellcheck = [ "shellcheck" ];
  nixfmt = [ "nixfmt" ];
  nixfmt-tree = [ "treefmt" ];
}
