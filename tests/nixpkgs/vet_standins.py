#!/usr/bin/env python3
"""Stand-ins for the files a slim nixpkgs snapshot lacks, so that nixpkgs-vet's whole-tree
evaluation (its eval.nix: every attribute of pkgs) can run on it (./vet.sh, ./README.md "nixpkgs-vet").

    python3 tests/nixpkgs/vet_standins.py TREE

The snapshot (github:neg-serg/nixpkgs-slim) leaves out files of 4 MiB or more. Three are read
when pkgs is evaluated:

- pkgs/development/haskell-modules/hackage-packages.nix: every Hackage package. The stand-in
  defines each name the tree mentions (the lists in configuration-hackage2nix/, `haskellPackages.X`,
  `self.X`/`super.X` and the like, `inherit (haskellPackages) …`, the arguments of cabal2nix output
  in the tree) as a `throw`: the attribute exists, forcing it throws, and tryEval catches that
  (a missing attribute it could not);
- pkgs/development/r-modules/cran-packages.json: every CRAN package. The stand-in lists the names
  the Bioconductor lists depend on and the tree mentions, each version "0" with no dependencies;
- pkgs/desktops/gnome/extensions/extensions.json: the GNOME extensions index. The stand-in lists
  the extensions extensionOverrides.nix patches (by UUID), for GNOME 50; nothing outside the
  directory names an extension.

It writes only files that are missing (a file that exists is left alone) and prints what it wrote.
The by-name packages that still cannot evaluate (those that force a Hackage package) are found by
evaluation, in ./vet.sh, and replaced there.
"""

import json
import os
import re
import sys

IDENT = r"([A-Za-z_][A-Za-z0-9_'-]*)"
HASKELL_SETS = (r"haskellPackages", r"haskell\.packages\.[A-Za-z0-9_]+", r"haskellPackages_[A-Za-z0-9_]+")
# Names the Haskell package set defines itself (make-package-set.nix): never stand-ins.
HASKELL_OWN = {"override", "overrideAttrs", "callPackage", "lib", "pkgs", "ghc", "buildHaskellPackages",
               "mkDerivation", "haskellSrc2nix", "callHackage", "callCabal2nix", "extend", "overrideScope",
               "packageSourceOverrides", "shellFor", "ghcWithPackages", "ghcWithHoogle", "hoogleWithPackages",
               "developPackage", "callHackageDirect", "callCabal2nixWithOptions",
               "generateOptparseApplicativeCompletions", "hackage2nix", "cabal2nix"}


def nix_files(tree):
    for root, _, files in os.walk(os.path.join(tree, "pkgs")):
        for fn in files:
            if fn.endswith(".nix"):
                path = os.path.join(root, fn)
                try:
                    with open(path, errors="replace") as f:
                        yield path, f.read()
                except OSError:
                    continue


def hackage_names(tree):
    """Every name the tree may ask the Haskell package set for (a superset: a stand-in too many
    costs nothing)."""
    hm = os.path.join(tree, "pkgs/development/haskell-modules")
    names = set()
    lists = os.path.join(hm, "configuration-hackage2nix")
    for fn in os.listdir(lists):
        with open(os.path.join(lists, fn)) as f:
            names.update(m[1] for line in f if (m := re.match(r"\s*-\s+([A-Za-z][A-Za-z0-9_'-]*)", line)))
    member = re.compile(r"(?:\b(?:super|self|hself|hsuper|hfinal|hprev|hsPkgs|hpkgs|hp|ps|p)|"
                        + "|".join(HASKELL_SETS) + r")\." + IDENT)
    inherits = re.compile(r"inherit\s*\(\s*(?:" + "|".join(HASKELL_SETS)
                          + r"|hself|self|super|hpkgs|hp|ps)\s*\)([^;]*);")
    formals = re.compile(r"\s*(?:#[^\n]*\n\s*)*\{([^}]*)\}\s*:")
    for _, text in nix_files(tree):
        names.update(member.findall(text))
        for m in inherits.findall(text):
            names.update(re.findall(IDENT, m))
        # cabal2nix output (by-name packages call theirs with haskellPackages.callPackage): its
        # formal arguments are Hackage names.
        if "HaskellDepends" in text and (m := formals.match(text)):
            names.update(a.split("?")[0].strip() for a in m[1].split(","))
    return sorted(n for n in names - HASKELL_OWN if n and n != "...")


def cran_packages(tree):
    """The stand-in cran-packages.json: every CRAN name something depends on or mentions."""
    rm = os.path.join(tree, "pkgs/development/r-modules")
    names, bioc = set(), set()
    for fn in os.listdir(rm):
        if fn.endswith(".json") and fn != "cran-packages.json":
            with open(os.path.join(rm, fn)) as f:
                packages = json.load(f)["packages"]
            bioc.update(packages)
            for p in packages.values():
                names.update(p.get("depends", []))
    ident = r"([A-Za-z][A-Za-z0-9_.]*)"
    with open(os.path.join(rm, "default.nix")) as f:
        text = f.read()
    names.update(re.findall(r"\b(?:old|self|super)\." + ident, text))
    names.update(re.findall(r"^\s+" + ident + r"\s*=", text, re.M))
    for _, t in nix_files(tree):
        names.update(re.findall(r"rPackages\." + ident, t))
        for m in re.findall(r"inherit\s*\(\s*rPackages\s*\)([^;]*);", t):
            names.update(re.findall(ident, m))
    names = sorted(n for n in names - bioc if not n.startswith("_"))
    return {"extraArgs": {}, "packages": {
        n: {"name": n, "version": "0", "sha256": "0" * 52, "depends": []} for n in names}}


def gnome_extensions(tree):
    """The stand-in extensions.json: the extensions extensionOverrides.nix patches, by UUID."""
    with open(os.path.join(tree, "pkgs/desktops/gnome/extensions/extensionOverrides.nix")) as f:
        uuids = sorted(set(re.findall(r'"([^"\s]+@[^"\s]+)"', f.read())))
    return [{"uuid": u, "name": u, "pname": re.sub(r"[^a-z0-9]+", "-", u.split("@")[0].lower()),
             "description": "", "link": "",
             "shell_version_map": {"50": {"version": 1, "sha256": "0" * 52, "metadata": ""}}} for u in uuids]


def write_missing(path, text):
    if os.path.exists(path):
        return
    with open(path, "w") as f:
        f.write(text)
    print(f"vet_standins: wrote {path}")


def main():
    tree = sys.argv[1]
    hm = os.path.join(tree, "pkgs/development/haskell-modules")
    names = hackage_names(tree)
    write_missing(os.path.join(hm, "hackage-packages.nix"),
                  "# A stand-in (tests/nixpkgs/vet_standins.py): not nixpkgs' file, which this tree lacks.\n"
                  "{ pkgs, lib, callPackage }:\nself:\nlib.genAttrs (import ./hackage-standin-names.nix) (\n"
                  '  name: throw "hackage-packages.nix is a stand-in in this tree: ${name} is not defined"\n)\n')
    write_missing(os.path.join(hm, "hackage-standin-names.nix"),
                  "[\n" + "".join(f'  "{n}"\n' for n in names) + "]\n")
    write_missing(os.path.join(tree, "pkgs/development/r-modules/cran-packages.json"),
                  json.dumps(cran_packages(tree), indent=1) + "\n")
    write_missing(os.path.join(tree, "pkgs/desktops/gnome/extensions/extensions.json"),
                  json.dumps(gnome_extensions(tree), indent=1) + "\n")


if __name__ == "__main__":
    main()
