"""A small, dependency-free ELF reader used by the test harnesses.

It reads exactly what the tests need to judge an edit: the ELF header, the
program headers, the section headers (when present), the dynamic entries
(located through PT_DYNAMIC, never through section names), the dynamic
string table (located through DT_STRTAB mapped by the PT_LOADs), PT_INTERP
and the version-needs table.  Every field goes through the file's own class
and byte order.  It also provides ``strip_section_headers`` (an ``sstrip``
equivalent) to make inputs that have no section headers at all.

Nothing here trusts the file: offsets are bounds-checked and failures raise
``ElfError`` with a short reason.
"""

from __future__ import annotations

import struct

ELFMAG = b"\x7fELF"
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2

ET_NAMES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3

EM_MIPS = 8
# The smallest page size Linux runs each machine with, where it is not 4 KiB (sparc64, alpha).
MIN_PAGE_SIZE = {43: 8192, 0x9026: 8192}

DT_NAMES = {
    0: "NULL", 1: "NEEDED", 2: "PLTRELSZ", 3: "PLTGOT", 4: "HASH", 5: "STRTAB",
    6: "SYMTAB", 7: "RELA", 8: "RELASZ", 9: "RELAENT", 10: "STRSZ",
    11: "SYMENT", 12: "INIT", 13: "FINI", 14: "SONAME", 15: "RPATH",
    16: "SYMBOLIC", 17: "REL", 18: "RELSZ", 19: "RELENT", 20: "PLTREL",
    21: "DEBUG", 22: "TEXTREL", 23: "JMPREL", 24: "BIND_NOW",
    25: "INIT_ARRAY", 26: "FINI_ARRAY", 27: "INIT_ARRAYSZ",
    28: "FINI_ARRAYSZ", 29: "RUNPATH", 30: "FLAGS", 32: "PREINIT_ARRAY",
    33: "PREINIT_ARRAYSZ", 34: "SYMTAB_SHNDX", 35: "RELRSZ", 36: "RELR",
    37: "RELRENT",
    0x6FFFFEF5: "GNU_HASH", 0x6FFFFEF6: "TLSDESC_PLT", 0x6FFFFEF7: "TLSDESC_GOT",
    0x6FFFFEFA: "GNU_CONFLICT", 0x6FFFFEFB: "GNU_LIBLIST",
    0x6FFFFEFC: "CONFIG", 0x6FFFFEFD: "DEPAUDIT", 0x6FFFFEFE: "AUDIT",
    0x6FFFFDF5: "GNU_PRELINKED", 0x6FFFFDF6: "GNU_CONFLICTSZ",
    0x6FFFFDF7: "GNU_LIBLISTSZ", 0x6FFFFDF8: "CHECKSUM",
    0x6FFFFDF9: "PLTPADSZ", 0x6FFFFDFA: "MOVEENT", 0x6FFFFDFB: "MOVESZ",
    0x6FFFFDFC: "FEATURE_1", 0x6FFFFDFD: "POSFLAG_1", 0x6FFFFDFE: "SYMINSZ",
    0x6FFFFDFF: "SYMINENT", 0x6FFFFEFF: "SYMINFO",
    0x6FFFFFF0: "VERSYM", 0x6FFFFFF9: "RELACOUNT", 0x6FFFFFFA: "RELCOUNT",
    0x6FFFFFFB: "FLAGS_1", 0x6FFFFFFC: "VERDEF", 0x6FFFFFFD: "VERDEFNUM",
    0x6FFFFFFE: "VERNEED", 0x6FFFFFFF: "VERNEEDNUM",
    0x7FFFFFFD: "AUXILIARY", 0x7FFFFFFE: "USED", 0x7FFFFFFF: "FILTER",
}
# Processor-specific tags share numbers across machines; name the MIPS ones
# only for EM_MIPS files, and the ppc64/others generically.
DT_MIPS_NAMES = {
    0x70000001: "MIPS_RLD_VERSION", 0x70000002: "MIPS_TIME_STAMP",
    0x70000003: "MIPS_ICHECKSUM", 0x70000004: "MIPS_IVERSION",
    0x70000005: "MIPS_FLAGS", 0x70000006: "MIPS_BASE_ADDRESS",
    0x70000008: "MIPS_CONFLICT", 0x70000009: "MIPS_LIBLIST",
    0x7000000A: "MIPS_LOCAL_GOTNO", 0x7000000B: "MIPS_CONFLICTNO",
    0x70000010: "MIPS_LIBLISTNO", 0x70000011: "MIPS_SYMTABNO",
    0x70000012: "MIPS_UNREFEXTNO", 0x70000013: "MIPS_GOTSYM",
    0x70000016: "MIPS_RLD_MAP", 0x70000035: "MIPS_RLD_MAP_REL",
}

# Tags whose value is an offset into the dynamic string table.
STRING_TAGS = {"NEEDED", "SONAME", "RPATH", "RUNPATH", "AUXILIARY", "FILTER",
               "CONFIG", "DEPAUDIT", "AUDIT"}

# Tags that point at (or give the size of) tables an editor may legitimately
# move or grow when it has to make room: the string table, the symbol table,
# its hash tables, the version tables and, for executables where the editor
# relocates the sections that follow the program headers, the relocation
# tables.  Their *values* are not compared; their presence is.
MOVABLE_TABLE_TAGS = {"STRTAB", "STRSZ", "SYMTAB", "HASH", "GNU_HASH",
                      "VERSYM", "VERNEED", "VERDEF", "REL", "RELA", "JMPREL",
                      "RELR"}


class ElfError(Exception):
    pass


def tag_name(tag: int, machine: int) -> str:
    if machine == EM_MIPS and tag in DT_MIPS_NAMES:
        return DT_MIPS_NAMES[tag]
    name = DT_NAMES.get(tag)
    if name is None:
        return "0x%x" % tag
    return name


class Elf:
    """Parsed view of an ELF file held in memory (``bytes``)."""

    def __init__(self, data: bytes):
        self.data = data
        if len(data) < 16 or data[:4] != ELFMAG:
            raise ElfError("not an ELF file")
        self.cls = data[4]
        self.enc = data[5]
        if self.cls not in (ELFCLASS32, ELFCLASS64):
            raise ElfError("bad EI_CLASS %d" % self.cls)
        if self.enc not in (ELFDATA2LSB, ELFDATA2MSB):
            raise ElfError("bad EI_DATA %d" % self.enc)
        self.is64 = self.cls == ELFCLASS64
        self.e = "<" if self.enc == ELFDATA2LSB else ">"
        self.word = 8 if self.is64 else 4
        if self.is64:
            fmt = self.e + "HHIQQQIHHHHHH"
        else:
            fmt = self.e + "HHIIIIIHHHHHH"
        (self.e_type, self.e_machine, self.e_version, self.e_entry,
         self.e_phoff, self.e_shoff, self.e_flags, self.e_ehsize,
         self.e_phentsize, self.e_phnum, self.e_shentsize, self.e_shnum,
         self.e_shstrndx) = self._unpack(fmt, 16)
        self.phdrs = self._read_phdrs()
        self.shdrs = self._read_shdrs()

    # -- low level ---------------------------------------------------------
    def _unpack(self, fmt: str, off: int):
        size = struct.calcsize(fmt)
        if off < 0 or off + size > len(self.data):
            raise ElfError("read of %d bytes at 0x%x past end of file (0x%x)"
                           % (size, off, len(self.data)))
        return struct.unpack_from(fmt, self.data, off)

    def _read_phdrs(self):
        out = []
        if self.e_phnum == 0:
            return out
        if self.is64:
            fmt = self.e + "IIQQQQQQ"
        else:
            fmt = self.e + "IIIIIIII"
        need = struct.calcsize(fmt)
        if self.e_phentsize < need:
            raise ElfError("e_phentsize %d too small" % self.e_phentsize)
        for i in range(self.e_phnum):
            v = self._unpack(fmt, self.e_phoff + i * self.e_phentsize)
            if self.is64:
                p_type, p_flags, off, vaddr, paddr, filesz, memsz, align = v
            else:
                p_type, off, vaddr, paddr, filesz, memsz, p_flags, align = v
            out.append(dict(type=p_type, flags=p_flags, offset=off,
                            vaddr=vaddr, paddr=paddr, filesz=filesz,
                            memsz=memsz, align=align))
        return out

    def _shdr_fmt(self):
        return self.e + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII")

    def section_count(self) -> int:
        if self.e_shoff == 0:
            return 0
        if self.e_shnum == 0:  # extended numbering: real count in shdr[0]
            v = self._unpack(self._shdr_fmt(), self.e_shoff)
            return v[5]
        return self.e_shnum

    def _read_shdrs(self):
        out = []
        n = self.section_count()
        if n == 0:
            return out
        fmt = self._shdr_fmt()
        if self.e_shentsize < struct.calcsize(fmt):
            raise ElfError("e_shentsize %d too small" % self.e_shentsize)
        for i in range(n):
            (name, stype, flags, addr, off, size, link, info, align,
             entsize) = self._unpack(fmt, self.e_shoff + i * self.e_shentsize)
            out.append(dict(name_off=name, type=stype, flags=flags,
                            addr=addr, offset=off, size=size, link=link,
                            info=info, addralign=align, entsize=entsize))
        return out

    def cstr(self, off: int, limit: int | None = None) -> bytes:
        if off < 0 or off >= len(self.data):
            raise ElfError("string offset 0x%x outside file" % off)
        end = self.data.find(b"\0", off, limit if limit is not None else len(self.data))
        if end < 0:
            raise ElfError("unterminated string at 0x%x" % off)
        return self.data[off:end]

    # -- segments ----------------------------------------------------------
    def mapped_filesz(self, p) -> int:
        """How many bytes from p_offset the loader maps from the file for PT_LOAD p: p_filesz,
        plus the rest of the last page (at the machine's smallest page size) when nothing
        zeroes it (p_memsz == p_filesz), the file has those bytes, and no other PT_LOAD maps
        that page from elsewhere in the file.  Both glibc and the kernel map whole pages."""
        page = MIN_PAGE_SIZE.get(self.e_machine, 4096)
        filesz = p["filesz"]
        if (p["type"] != PT_LOAD or filesz == 0 or p["memsz"] != filesz
                or (p["vaddr"] - p["offset"]) % page):
            return filesz
        end = p["vaddr"] + filesz
        tail = min((-end) % page, max(0, len(self.data) - (p["offset"] + filesz)))
        for q in self.phdrs:
            if q is p or q["type"] != PT_LOAD or q["memsz"] == 0 or tail == 0:
                continue
            q_lo = q["vaddr"] - q["vaddr"] % page
            if q_lo < end + tail and q["vaddr"] + q["memsz"] > end:
                same_bias = q["vaddr"] - q["offset"] == p["vaddr"] - p["offset"]
                tail = min(tail, max(0, q["vaddr"] - end)) if same_bias else 0
        return filesz + tail

    def vaddr_to_offset(self, vaddr: int) -> int:
        for p in self.phdrs:
            if p["type"] == PT_LOAD and p["vaddr"] <= vaddr < p["vaddr"] + self.mapped_filesz(p):
                return p["offset"] + (vaddr - p["vaddr"])
        raise ElfError("address 0x%x not in what any PT_LOAD maps from the file" % vaddr)

    def segment(self, ptype: int):
        for p in self.phdrs:
            if p["type"] == ptype:
                return p
        return None

    @property
    def type_name(self) -> str:
        return ET_NAMES.get(self.e_type, str(self.e_type))

    def interp(self) -> str | None:
        p = self.segment(PT_INTERP)
        if p is None:
            return None
        if p["offset"] + p["filesz"] > len(self.data):
            raise ElfError("PT_INTERP past end of file")
        raw = self.data[p["offset"]:p["offset"] + p["filesz"]]
        return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")

    # -- dynamic -----------------------------------------------------------
    def dynamic_raw(self):
        """[(tag, value, vaddr_of_entry)] up to (excluding) DT_NULL."""
        p = self.segment(PT_DYNAMIC)
        if p is None:
            return None
        fmt = self.e + ("qQ" if self.is64 else "iI")
        esz = struct.calcsize(fmt)
        out = []
        n = p["filesz"] // esz
        for i in range(n):
            tag, val = self._unpack(fmt, p["offset"] + i * esz)
            if tag == 0:
                break
            out.append((tag & (0xFFFFFFFFFFFFFFFF if self.is64 else 0xFFFFFFFF),
                        val, p["vaddr"] + i * esz))
        return out

    def _dyn_value(self, dyn, name):
        for tag, val, _ in dyn:
            if tag_name(tag, self.e_machine) == name:
                return val
        return None

    def strtab(self):
        """(file offset, size) of the dynamic string table via DT_STRTAB."""
        dyn = self.dynamic_raw()
        if dyn is None:
            return None
        addr = self._dyn_value(dyn, "STRTAB")
        size = self._dyn_value(dyn, "STRSZ")
        if addr is None:
            return None
        off = self.vaddr_to_offset(addr)
        if size is None:
            size = len(self.data) - off
        if off + size > len(self.data):
            raise ElfError("DT_STRTAB+DT_STRSZ past end of file")
        return off, size

    def dynstr(self, index: int) -> str:
        st = self.strtab()
        if st is None:
            raise ElfError("no DT_STRTAB")
        off, size = st
        if index >= size:
            raise ElfError("string index %d >= DT_STRSZ %d" % (index, size))
        return self.cstr(off + index, off + size).decode("utf-8", "surrogateescape")

    def dynamic(self):
        """[(tag name, value)] with string values resolved."""
        dyn = self.dynamic_raw()
        if dyn is None:
            return None
        out = []
        for tag, val, _ in dyn:
            name = tag_name(tag, self.e_machine)
            if name in STRING_TAGS:
                out.append((name, self.dynstr(val)))
            else:
                out.append((name, val))
        return out

    def dynamic_normalized(self):
        """Entries for comparing two versions of one file.

        String values are resolved; values of MOVABLE_TABLE_TAGS are replaced
        by None; DT_MIPS_RLD_MAP_REL (relative to its own slot) is turned into
        the absolute address it designates."""
        dyn = self.dynamic_raw()
        if dyn is None:
            return None
        out = []
        for tag, val, slot in dyn:
            name = tag_name(tag, self.e_machine)
            if name in STRING_TAGS:
                out.append((name, self.dynstr(val)))
            elif name in MOVABLE_TABLE_TAGS:
                out.append((name, None))
            elif name == "MIPS_RLD_MAP_REL":
                mask = (1 << (64 if self.is64 else 32)) - 1
                out.append(("MIPS_RLD_MAP_REL->", (slot + val) & mask))
            else:
                out.append((name, val))
        return out

    def needed(self):
        d = self.dynamic() or []
        return [v for k, v in d if k == "NEEDED"]

    def dyn_str(self, name):
        d = self.dynamic() or []
        vals = [v for k, v in d if k == name]
        return vals[0] if vals else None

    def verneed(self):
        """[(file name, [version names])] from DT_VERNEED/DT_VERNEEDNUM."""
        dyn = self.dynamic_raw()
        if dyn is None:
            return []
        addr = self._dyn_value(dyn, "VERNEED")
        num = self._dyn_value(dyn, "VERNEEDNUM")
        if addr is None or not num:
            return []
        off = self.vaddr_to_offset(addr)
        out = []
        for _ in range(min(num, 10000)):
            vn_version, vn_cnt, vn_file, vn_aux, vn_next = self._unpack(self.e + "HHIII", off)
            names = []
            aoff = off + vn_aux
            for _ in range(min(vn_cnt, 10000)):
                _h, _f, _o, vna_name, vna_next = self._unpack(self.e + "IHHII", aoff)
                names.append(self.dynstr(vna_name))
                if vna_next == 0:
                    break
                aoff += vna_next
            out.append((self.dynstr(vn_file), names))
            if vn_next == 0:
                break
            off += vn_next
        return out


PF_X, PF_W, PF_R = 1, 2, 4
SHF_ALLOC, SHF_TLS = 0x2, 0x400
SHT_NOBITS = 8
PT_PHDR, PT_TLS = 6, 7


def section_name(elf: Elf, i: int) -> str:
    try:
        sh = elf.shdrs[i]
        if elf.e_shstrndx and elf.e_shstrndx < len(elf.shdrs):
            st = elf.shdrs[elf.e_shstrndx]
            if sh["name_off"] < st["size"]:
                return elf.cstr(st["offset"] + sh["name_off"],
                                st["offset"] + st["size"]).decode("utf-8", "replace")
    except (ElfError, IndexError):
        pass
    return "#%d" % i


def layout_problems(elf: Elf) -> set:
    """Structural facts a loader relies on, as a set of short messages.

    Meant to be compared between an input and its edited copy: only problems
    that are new after an edit count (some inputs already have some, e.g.
    MIPS keeps .dynamic read-only)."""
    probs = set()
    n = len(elf.data)
    loads = [p for p in elf.phdrs if p["type"] == PT_LOAD]
    for i, p in enumerate(loads):
        if p["align"] > 1 and (p["offset"] - p["vaddr"]) % p["align"]:
            probs.add("PT_LOAD vaddr 0x%x: p_offset 0x%x not congruent to p_vaddr mod p_align 0x%x"
                      % (p["vaddr"], p["offset"], p["align"]))
        if p["filesz"] > p["memsz"]:
            probs.add("PT_LOAD vaddr 0x%x: p_filesz > p_memsz" % p["vaddr"])
        if p["offset"] + p["filesz"] > n:
            probs.add("PT_LOAD vaddr 0x%x: file image past end of file" % p["vaddr"])
    vaddrs = [p["vaddr"] for p in loads]
    if vaddrs != sorted(vaddrs):
        probs.add("PT_LOADs not sorted by p_vaddr")
    for i in range(len(loads)):
        for j in range(i + 1, len(loads)):
            a, b = loads[i], loads[j]
            if a["memsz"] and b["memsz"] and a["vaddr"] < b["vaddr"] + b["memsz"] \
                    and b["vaddr"] < a["vaddr"] + a["memsz"]:
                probs.add("PT_LOADs at 0x%x and 0x%x overlap in memory" % (a["vaddr"], b["vaddr"]))

    def covering(vaddr, size, file_image=True):
        for p in loads:
            lim = elf.mapped_filesz(p) if file_image else p["memsz"]
            if p["vaddr"] <= vaddr and vaddr + size <= p["vaddr"] + lim:
                return p
        return None

    for p in elf.phdrs:
        kind = {PT_DYNAMIC: "PT_DYNAMIC", PT_INTERP: "PT_INTERP", PT_PHDR: "PT_PHDR"}.get(p["type"])
        if kind is None:
            continue
        seg = covering(p["vaddr"], p["filesz"])
        if seg is None:
            probs.add("%s not inside a PT_LOAD's file image" % kind)
            continue
        if p["offset"] - seg["offset"] != p["vaddr"] - seg["vaddr"]:
            probs.add("%s file offset disagrees with its PT_LOAD's mapping" % kind)
        # MIPS keeps .dynamic read-only (its loader writes through DT_MIPS_RLD_MAP instead) and
        # says so in PT_DYNAMIC's flags.
        mips_read_only = elf.e_machine == EM_MIPS and not p["flags"] & PF_W
        if kind == "PT_DYNAMIC" and not seg["flags"] & PF_W and not mips_read_only:
            probs.add("PT_DYNAMIC in a read-only PT_LOAD")
    for i, sh in enumerate(elf.shdrs):
        if not sh["flags"] & SHF_ALLOC or sh["size"] == 0 or sh["flags"] & SHF_TLS:
            continue
        name = section_name(elf, i)
        if sh["type"] == SHT_NOBITS:
            if covering(sh["addr"], sh["size"], file_image=False) is None:
                probs.add("section %s not inside a PT_LOAD" % name)
            continue
        seg = covering(sh["addr"], sh["size"])
        if seg is None:
            probs.add("section %s not inside a PT_LOAD's file image" % name)
        elif sh["offset"] - seg["offset"] != sh["addr"] - seg["vaddr"]:
            probs.add("section %s: sh_offset disagrees with its PT_LOAD's mapping" % name)
    return probs


def read(path) -> Elf:
    with open(path, "rb") as f:
        return Elf(f.read())


def is_elf(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELFMAG
    except OSError:
        return False


def strip_section_headers(path) -> None:
    """Remove the section header table from an ELF file, like ``sstrip``.

    Zeroes e_shoff, e_shnum and e_shstrndx, and truncates the file after the
    last byte any program header (or the ELF/program header tables
    themselves) covers, which drops the section headers and every
    non-allocated section after the segments (.symtab, .strtab,
    .shstrtab, debug info).  If the section header table is not past the end
    of the segments (unusual), the header fields are still cleared but
    nothing is truncated."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    elf = Elf(bytes(data))
    end = max(elf.e_ehsize, elf.e_phoff + elf.e_phnum * elf.e_phentsize)
    for p in elf.phdrs:
        if p["filesz"]:
            end = max(end, p["offset"] + p["filesz"])
    if elf.is64:
        shoff_at, shnum_at, shstrndx_at, addr_fmt = 0x28, 0x3C, 0x3E, "Q"
    else:
        shoff_at, shnum_at, shstrndx_at, addr_fmt = 0x20, 0x30, 0x32, "I"
    struct.pack_into(elf.e + addr_fmt, data, shoff_at, 0)
    struct.pack_into(elf.e + "H", data, shnum_at, 0)
    struct.pack_into(elf.e + "H", data, shstrndx_at, 0)
    if elf.e_shoff >= end and end <= len(data):
        del data[end:]
    with open(path, "wb") as f:
        f.write(data)
    check = Elf(bytes(data))
    if check.e_shoff or check.e_shnum or check.e_shstrndx or check.shdrs:
        raise ElfError("strip_section_headers: header fields not cleared")
