let
  pkgs = import ./import-nixpkgs.nix /work/nixpkgs {
    stdenvStages = import ./native-stages.nix /work/nixpkgs;
    overlays = [ (import ./stand-ins.nix) ];
    config.allowUnfree = true;
  };
in pkgs.stdenv.mkDerivation {
  name = "stubstrip-nixpkgs-probe-hello";
  dontUnpack = true;
  nativeBuildInputs = [ pkgs.autoPatchelfHook ];
  buildPhase = ''echo 'int main(){return 0;}' > h.c; $CC -o hello h.c'';
  installPhase = ''install -D hello $out/bin/hello'';
}
