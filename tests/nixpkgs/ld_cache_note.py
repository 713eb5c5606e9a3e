#!/usr/bin/env python3
"""The `.note.nixos.ldcache` notes of the ELF files under a path, for ./ld-cache.sh.

patchelf 0.19's --build-resolution-cache writes an allocated PT_NOTE, owner "NixOS", type
0x63a86cb6, whose descriptor is NUL-terminated pairs: a DT_NEEDED name, then a ':'-separated list
of `=<path>` (resolved at patch time) and `?<dir>` (searched at run time). The notes are read
from the program headers (what a loader reads), not from a section name.

    ld_cache_note.py PATH...          one line per ELF file: `FILE` then `NAME -> ITEMS` lines
    ld_cache_note.py --json PATH...   {file: [[name, [items...]], ...]} (no note: absent)
    ld_cache_note.py --check STUB DRIVER PATH...
                                      exit 1 naming each entry that names STUB or a stubs
                                      directory, or resolves libcuda.so.1 other than to ?DRIVER;
                                      then "N files with a note"

A malformed note is printed as an error and exits 2.
"""

import json
import os
import struct
import sys

OWNER = b"NixOS"
TYPE = 0x63A86CB6
PT_NOTE = 4


class Malformed(Exception):
    """A note that does not parse: the message names the file and the offset."""


def elf_notes(data):
    """(offset, owner, type, descriptor) for every note of every PT_NOTE segment."""
    if data[:4] != b"\x7fELF":
        return None
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        phoff, = struct.unpack_from(end + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
    else:
        phoff, = struct.unpack_from(end + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x2A)
    notes = []
    for i in range(phnum):
        base = phoff + i * phentsize
        if is64:
            ptype, _, off, _, _, filesz = struct.unpack_from(end + "IIQQQQ", data, base)
            align = 8
        else:
            ptype, off, _, _, filesz = struct.unpack_from(end + "IIIII", data, base)
            align = 4
        if ptype != PT_NOTE:
            continue
        align = struct.unpack_from(end + ("Q" if is64 else "I"), data, base + (0x30 if is64 else 0x1C))[0] or align
        align = 8 if align == 8 else 4
        pos, stop = off, off + filesz
        while pos + 12 <= stop:
            namesz, descsz, ntype = struct.unpack_from(end + "III", data, pos)
            name_at = pos + 12
            # Padding as the loader reads it: the descriptor and the next note start aligned
            # from the note's start (p_align 8 puts a 4-byte name's descriptor at +16, not +20).
            desc_at = pos + (12 + namesz + align - 1) // align * align
            nxt = pos + (desc_at - pos + descsz + align - 1) // align * align
            if desc_at + descsz > stop:
                raise Malformed(f"note at offset {pos:#x} runs past its segment")
            notes.append((pos, data[name_at:name_at + namesz].rstrip(b"\0"), ntype, data[desc_at:desc_at + descsz]))
            pos = nxt
    return notes


def ldcache_entries(path):
    """[(name, [items])] of the file's resolution-cache note, [] without one, None if not ELF."""
    with open(path, "rb") as f:
        data = f.read()
    notes = elf_notes(data)
    if notes is None:
        return None
    entries = []
    for off, owner, ntype, desc in notes:
        if owner != OWNER or ntype != TYPE:
            continue
        fields = desc.rstrip(b"\0").split(b"\0") if desc.strip(b"\0") else []
        if len(fields) % 2:
            raise Malformed(f"{path}: note at offset {off:#x}: {len(fields)} strings, not pairs")
        for name, items in zip(fields[0::2], fields[1::2]):
            entries.append((name.decode(), items.decode().split(":") if items else []))
    return entries


def elf_files(paths):
    for p in paths:
        if os.path.isfile(p) and not os.path.islink(p):
            yield p
        for root, _, files in os.walk(p):
            for n in sorted(files):
                f = os.path.join(root, n)
                if os.path.isfile(f) and not os.path.islink(f):
                    yield f


def problems(found, stub, driver):
    """What a fixed output's notes must not say: a stub directory anywhere, and libcuda.so.1
    resolved other than to the driver link (a `?` hint, no `=` path)."""
    out = []
    for f, entries in found.items():
        for name, items in entries:
            bad = [i for i in items if stub in i or "/stubs" in i]
            if bad:
                out.append(f"{f}: {name} -> {':'.join(items)} names the stubs")
            if name == "libcuda.so.1" and ("?" + driver not in items or any(i.startswith("=") for i in items)):
                out.append(f"{f}: libcuda.so.1 -> {':'.join(items)}, not ?{driver}")
    return out


def main(argv):
    check = None
    if argv[:1] == ["--check"]:
        check, driver, argv = argv[1], argv[2], argv[3:]
    as_json = argv[:1] == ["--json"]
    paths = argv[1:] if as_json else argv
    found = {}
    try:
        for f in elf_files(paths):
            e = ldcache_entries(f)
            if e:
                found[f] = e
    except (Malformed, struct.error) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if check is not None:
        bad = problems(found, check, driver)
        for line in bad:
            print(line)
        print(f"{len(found)} files with a note")
        return 1 if bad else 0
    if as_json:
        print(json.dumps(found))
    else:
        for f, entries in found.items():
            print(f)
            for name, items in entries:
                print(f"  {name} -> {':'.join(items)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
