# The nixpkgs input `nix flake check` gets (run.sh): the tree at ./tree (a hard-linked copy of
# $NIXPKGS made by run.sh), with ./default.nix in front of its own.
{
  outputs = _: { lib = import ./tree/lib; };
}
