#!/usr/bin/env python3
"""The two hashes of nixpkgs' package (nix/upstream/pkgs/by-name/st/stubstrip/package.nix) for
the release in target/dist: `src`'s (the source tarball's sha256, as fetchurl checks it) and
`cargoHash` (what nixpkgs' fetchCargoVendor's fixed-output derivation holds, NAR-hashed).

    python3 release/upstream_hashes.py            print them
    python3 release/upstream_hashes.py --write    and write them into the package
    python3 release/upstream_hashes.py --check    exit 1 unless the package has them

fetchCargoVendor's first step (`fetch-cargo-vendor-util create-vendor-staging` in nixpkgs'
pkgs/build-support/rust) puts the source's Cargo.lock and, for every crates.io package it names,
`tarballs/NAME-VERSION.tar.gz` (the crate file from static.crates.io, checked against the lock
file's sha256) into its output; cargoHash is the sha256 of that directory's NAR serialisation.
This script builds the same NAR in memory from the crate files in cargo's own cache (the same
bytes: cargo checks the same sha256), after `cargo fetch --locked`, so it needs no Nix and no
network beyond cargo's. tests/nixpkgs (part `release`) checks both against Nix itself: the
tarball and nixpkgs' own fetcher's output added to the store must land at the paths the package
names.
"""

import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nix/upstream/pkgs/by-name/st/stubstrip/package.nix"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def sri(digest: bytes) -> str:
    return "sha256-" + base64.b64encode(digest).decode()


def nar_str(b: bytes) -> bytes:
    """A NAR string: its length (u64, little-endian), the bytes, zeros up to a multiple of 8."""
    return len(b).to_bytes(8, "little") + b + b"\0" * (-len(b) % 8)


def nar_file(data: bytes) -> bytes:
    """A regular, non-executable file."""
    return b"".join(map(nar_str, [b"(", b"type", b"regular", b"contents"])) + nar_str(data) + nar_str(b")")


def nar_dir(entries: dict[str, bytes]) -> bytes:
    """A directory of already-serialised nodes, in name order (as Nix writes it)."""
    out = [nar_str(b"("), nar_str(b"type"), nar_str(b"directory")]
    for name in sorted(entries, key=str.encode):
        out += [nar_str(b"entry"), nar_str(b"("), nar_str(b"name"), nar_str(name.encode()),
                nar_str(b"node"), entries[name], nar_str(b")")]
    out.append(nar_str(b")"))
    return b"".join(out)


def crate_cache_dirs() -> list[Path]:
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    return sorted((home / "registry/cache").glob("index.crates.io-*"))


def cargo_hash(lock: Path) -> str:
    """fetchCargoVendor's hash for this Cargo.lock (see the module's doc)."""
    subprocess.run(["cargo", "fetch", "--locked", "--manifest-path", str(lock.parent / "Cargo.toml")],
                   check=True, stdout=sys.stderr)
    packages = tomllib.loads(lock.read_text())["package"]
    caches = crate_cache_dirs()
    tarballs = {}
    for p in packages:
        source = p.get("source")
        if source is None:
            continue  # the workspace's own crates
        if source != CRATES_IO:
            sys.exit(f"upstream_hashes: {p['name']} {p['version']} comes from {source}; only crates.io is handled")
        name = f"{p['name']}-{p['version']}"
        found = [c / f"{name}.crate" for c in caches if (c / f"{name}.crate").exists()]
        if not found:
            sys.exit(f"upstream_hashes: {name}.crate is not in cargo's cache after `cargo fetch`")
        data = found[0].read_bytes()
        if hashlib.sha256(data).hexdigest() != p["checksum"]:
            sys.exit(f"upstream_hashes: {found[0]} does not match Cargo.lock's checksum")
        tarballs[f"{name}.tar.gz"] = nar_file(data)
    root = {"Cargo.lock": nar_file(lock.read_bytes())}
    if tarballs:
        root["tarballs"] = nar_dir(tarballs)
    return sri(hashlib.sha256(nar_str(b"nix-archive-1") + nar_dir(root)).digest())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the hashes into the package")
    mode.add_argument("--check", action="store_true", help="exit 1 unless the package has these hashes")
    ap.add_argument("--dist", type=Path, default=ROOT / "target/dist", help="release/build.sh's output")
    a = ap.parse_args()

    version = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    tarball = a.dist / f"stubstrip-{version}.tar.gz"
    if not tarball.exists():
        sys.exit(f"upstream_hashes: no {tarball} (run bash release/build.sh first)")
    src = sri(hashlib.sha256(tarball.read_bytes()).digest())
    cargo = cargo_hash(ROOT / "Cargo.lock")
    print(f"src.hash  {src}  ({tarball.name})")
    print(f"cargoHash {cargo}")

    text = PACKAGE.read_text()
    version_line = re.search(r'^  version = "([^"]*)";', text, re.M)
    src_line = re.search(r'(\n  src = fetchurl \{.*?\n    hash = ")([^"]*)(";)', text, re.S)
    cargo_line = re.search(r'(\n  cargoHash = ")([^"]*)(";)', text)
    if not (version_line and src_line and cargo_line):
        sys.exit(f"upstream_hashes: {PACKAGE} has no version, src hash or cargoHash line where expected")
    have = (version_line[1], src_line[2], cargo_line[2])
    want = (version, src, cargo)
    if a.check:
        if have != want:
            sys.exit(f"upstream_hashes: {PACKAGE.relative_to(ROOT)} has version/src.hash/cargoHash {have}, "
                     f"the release in {a.dist} needs {want} (python3 release/upstream_hashes.py --write)")
        print(f"ok: {PACKAGE.relative_to(ROOT)} has the release's hashes")
    elif a.write:
        if version_line[1] != version:
            sys.exit(f"upstream_hashes: the package says version {version_line[1]}, Cargo.toml {version}: set it first")
        text = text[:src_line.start(2)] + src + text[src_line.end(2):]
        cargo_line = re.search(r'(\n  cargoHash = ")([^"]*)(";)', text)
        text = text[:cargo_line.start(2)] + cargo + text[cargo_line.end(2):]
        PACKAGE.write_text(text)
        print(f"wrote them into {PACKAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
