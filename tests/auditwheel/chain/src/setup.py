"""Builds chainpkg with its extension linked against libouter.so from CHAIN_PREFIX (no rpath)."""

import os

from setuptools import Extension, setup

prefix = os.environ["CHAIN_PREFIX"]
setup(
    name="chainwheel",
    version="1.0",
    packages=["chainpkg"],
    package_dir={"": "."},
    ext_modules=[
        Extension(
            "chainpkg.chainmod",
            ["chainpkg/chainmod.c"],
            include_dirs=[os.path.join(prefix, "include")],
            library_dirs=[os.path.join(prefix, "lib")],
            libraries=["outer"],
        )
    ],
)
