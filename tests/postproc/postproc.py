"""The tools that run on a file after elfpatch, and the invariant they must keep.

A file is rarely edited last: nixpkgs' fixupPhase strips it (`strip -S`, `--strip-unneeded`,
`-s`), separateDebugInfo runs objcopy, Debian's dh_strip and rpm's eu-strip do their own, LLVM
toolchains use llvm-strip, and patchelf or elfpatch edit it again. Each post-processor below is
applied to the edited file and, for comparison, to the unedited one. The edited file passes when,
for every post-processor (docs/elfpatch.md, "After the edit: strip, objcopy and the rest"):

- the tool succeeds wherever it succeeds on the unedited file, and prints nothing it does not
  print there (binutils' `lma ... adjusted`, `can't be allocated in segment`, `not covered`);
- its output loads and runs as the edited file did (the caller's `loads` says what that means);
- eu-elflint has nothing to say of its output that it does not say of the same tool's output
  on the unedited file;
- elfpatch and patchelf 0.19.3 can edit its output again (a growing run path), and that loads.

Used by run.py beside this file (the machine's files, large files, the cross matrix); standard
library only.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cross"))
import elfmini  # noqa: E402
import harness  # noqa: E402
from harness import clip, sh  # noqa: E402

# What binutils prints when it had to move a section away from where its segment says it is:
# the output then no longer matches its program headers.
LAYOUT_WARNING = re.compile(r"adjusted to|can't be allocated|not covered|overlap|out of order",
                            re.IGNORECASE)
# Problems reported but not counted as breakage (see check()).
NOTES = {"debugfile", "toolbug", "emptysection", "editorbug"}
# eu-elflint's complaint about a section whose file offset a post-processor recomputed.
_NOT_IN_SEGMENT = re.compile(r"section \[\s*(\d+)\] '[^']*'(?:: alloc flag set but section not in any "
                             r"loaded segment| has type NOBITS but is read from the file| not fully "
                             r"contained in segment)")
REEDIT_RUNPATH = "/nix/store/" + "r" * 32 + "-postproc-reedit/lib:" + "$ORIGIN/../postproc-" + "q" * 40


def grow_args(path: str):
    """The arguments of a growing run path edit of path that changes nothing the loader finds:
    its run path with REEDIT_RUNPATH after it, RPATH kept an RPATH."""
    try:
        elf = elfmini.read(path)
        runpath, rpath = elf.dyn_str("RUNPATH"), elf.dyn_str("RPATH")
    except elfmini.ElfError:
        runpath = rpath = None
    current = runpath if runpath is not None else rpath
    args = ["--set-rpath", (current + ":" if current else "") + REEDIT_RUNPATH]
    if rpath is not None and runpath is None:
        args.append("--force-rpath")
    return args


@dataclass(frozen=True)
class PostProc:
    """One post-processor: a name and the commands it runs on `{f}` (the file) with `{d}` (a
    debug file beside it)."""

    name: str
    family: str
    commands: tuple


def _strip_family(prefix: str, family: str, strip: str, objcopy: str):
    return [
        PostProc(family + " strip -S", family, ((strip, "-S", "{f}"),)),
        PostProc(family + " strip --strip-unneeded", family, ((strip, "--strip-unneeded", "{f}"),)),
        PostProc(family + " strip -s", family, ((strip, "-s", "{f}"),)),
        # Debian's dh_strip on a shared library.
        PostProc(family + " dh_strip", family,
                 ((strip, "--remove-section=.comment", "--remove-section=.note", "--strip-unneeded",
                   "{f}"),)),
        # nixpkgs' separateDebugInfo.
        PostProc(family + " separate-debug-info", family,
                 ((objcopy, "--only-keep-debug", "{f}", "{d}"),
                  (objcopy, "--strip-debug", "--add-gnu-debuglink={d}", "{f}"))),
    ]


@dataclass
class Tools:
    """Where each post-processor's program is. `binutils_prefix` is the target's GNU binutils
    (`aarch64-linux-gnu-`, or `` for the host's)."""

    elfpatch: str
    patchelf019: str | None
    patchelf015: str | None
    binutils_prefix: str = ""
    llvm: bool = True
    elfutils: bool = True
    missing: list = field(default_factory=list)

    def postprocessors(self):
        out = []
        p = self.binutils_prefix
        if shutil.which(p + "strip") and shutil.which(p + "objcopy"):
            out += _strip_family(p, "binutils", p + "strip", p + "objcopy")
        else:
            self.missing.append(p + "strip")
        if self.elfutils and shutil.which("eu-strip"):
            out.append(PostProc("elfutils eu-strip -f", "elfutils", (("eu-strip", "-f", "{d}", "{f}"),)))
        elif self.elfutils:
            self.missing.append("eu-strip")
        if self.llvm and shutil.which("llvm-strip") and shutil.which("llvm-objcopy"):
            out += _strip_family("", "llvm", "llvm-strip", "llvm-objcopy")
        elif self.llvm:
            self.missing.append("llvm-strip")
        if self.patchelf015:
            out.append(PostProc("patchelf-0.15.2 --shrink-rpath", "patchelf",
                                ((self.patchelf015, "--shrink-rpath", "{f}"),)))
            out.append(PostProc("patchelf-0.15.2 --set-rpath", "patchelf",
                                ((self.patchelf015, "{grow}", "{f}"),)))
        if self.patchelf019:
            out.append(PostProc("patchelf-0.19.3 --set-rpath", "patchelf",
                                ((self.patchelf019, "{grow}", "{f}"),)))
        out.append(PostProc("elfpatch --set-rpath", "elfpatch", ((self.elfpatch, "{grow}", "{f}"),)))
        return out


def apply(pp: PostProc, src: str, workdir: str):
    """pp on a copy of src in workdir/: (path of the result, exit status, what it printed about
    the file, what it printed about the separate debug file), messages with the paths replaced
    by FILE and DEBUG."""
    os.makedirs(workdir, exist_ok=True)
    f = os.path.join(workdir, os.path.basename(src))
    shutil.copy2(src, f)
    d = f + ".debug"
    lines = []
    debug_lines = []
    for cmd in pp.commands:
        cmd = [c.replace("{f}", f).replace("{d}", d) for c in cmd]
        rc, out, err = sh(cmd, timeout=600)
        # What `--only-keep-debug FILE DEBUG` says is about the debug file, which no loader maps.
        to = debug_lines if "--only-keep-debug" in cmd else lines
        for line in (err + out).splitlines():
            line = line.replace(d, "DEBUG").replace(f, "FILE").strip()
            if line:
                to.append(line)
        if rc != 0:
            return f, rc, lines, debug_lines
    return f, 0, lines, debug_lines


def _norm(lines):
    return {re.sub(r"0x[0-9a-f]+|\b\d+\b", "#", line) for line in lines}


def check(pp: PostProc, orig: str, edited: str, workdir: str, loads, tools: Tools, elflint=True,
          loads_unedited=None):
    """The invariant for one post-processor on one edited file: a list of problems, each
    (kind, message); empty when it holds. `loads(path)` says whether a file loads and runs as
    `edited` did (None when it does, else why not); `loads_unedited(path)`, where given, whether
    the tool's output of the unedited file loads as the unedited file did."""
    probs = []
    base_dir = os.path.join(workdir, "unedited")
    got_dir = os.path.join(workdir, "edited")
    base, brc, blines, _ = apply(pp, orig, base_dir)
    got, rc, lines, debug_lines = apply(pp, edited, got_dir)
    if rc != 0:
        if brc == 0:
            probs.append(("fails", "%s fails (exit %d) where it succeeds on the unedited file: %s"
                          % (pp.name, rc, clip(" | ".join(lines), 300))))
        return probs
    if debug_lines:
        # GNU objcopy --only-keep-debug lays out the debug file's program headers anew, with
        # every allocated section but the notes turned to SHT_NOBITS; a note that follows such
        # a section in an appended segment then draws "can't be allocated" for the debug file
        # (patchelf's appended segments draw it too). Debuggers read the debug file's sections,
        # which are right; no loader maps it. Reported, not a failure (docs/elfpatch.md).
        probs.append(("debugfile", "%s, debug file: %s" % (pp.name, clip(" | ".join(debug_lines), 200))))
    warned = [line for line in lines if LAYOUT_WARNING.search(line)]
    new = sorted(_norm(lines) - _norm(blines))
    if warned or new:
        probs.append(("warns", "%s warns: %s" % (pp.name, clip(" | ".join(warned or new), 300))))
    why = loads(got)
    if why:
        own = own_damage(orig, base) if brc == 0 else None
        if own is None and brc == 0 and loads_unedited is not None:
            # llvm-objcopy lays out a PT_LOAD that starts where an earlier PT_NOTE starts (as
            # patchelf appends them: auditwheel's wheels) at the note's alignment, edited or not.
            unedited_why = loads_unedited(base)
            own = "its output of the unedited file: %s" % unedited_why if unedited_why else None
        if own:
            # The tool breaks the unedited file the same way (patchelf 0.15.2's --shrink-rpath
            # overwrites a NEEDED name that shares bytes with the run path: its #162).
            probs.append(("toolbug", "after %s: %s; the tool does this to the unedited file too: %s"
                          % (pp.name, clip(why, 150), own)))
        else:
            probs.append(("load", "after %s: %s" % (pp.name, why)))
    if elflint and brc == 0 and harness.ELFLINT:
        lint = harness.new_elflint(harness.elflint_messages(base), harness.elflint_messages(got))
        empty = [m for m in lint if _empty_section(got, m)]
        if empty:
            # A section with no bytes (SHT_NOBITS, or size 0) that eu-strip or llvm-objcopy gave
            # an offset from the sections before it in the table: mold's NOBITS sections have
            # offset 0, and after an appended edit the table's order is no longer the file's.
            # No loader reads a section header; such a section has nothing to load.
            probs.append(("emptysection", "after %s, eu-elflint: %s" % (pp.name, clip(" | ".join(empty), 300))))
        lint = [m for m in lint if m not in empty]
        if lint:
            probs.append(("elflint", "after %s, eu-elflint: %s" % (pp.name, clip(" | ".join(lint), 300))))
    tool_broke_it = any(kind == "toolbug" for kind, _ in probs)
    if not tool_broke_it and (pp.family != "patchelf" or pp.name.endswith("--shrink-rpath")):
        for ed_name, ed in (("elfpatch", tools.elfpatch), ("patchelf 0.19.3", tools.patchelf019)):
            if not ed:
                continue
            probs += _reedit(pp, ed_name, ed, base if brc == 0 else None, got, edited, workdir, loads)
    return probs


def _empty_section(path, message):
    """Whether message is eu-elflint's complaint about where a section of path that holds no
    bytes (SHT_NOBITS, or empty) lies in the file."""
    m = _NOT_IN_SEGMENT.search(message)
    if not m:
        return False
    try:
        sh = elfmini.read(path).shdrs[int(m.group(1))]
    except (elfmini.ElfError, IndexError, ValueError):
        return False
    return sh["type"] == 8 or sh["size"] == 0


def own_damage(orig, base):
    """How the post-processor changed the unedited file's NEEDED names or interpreter (the
    tool's own damage), or None."""
    try:
        a, b = elfmini.read(orig), elfmini.read(base)
        if a.needed() != b.needed():
            return "NEEDED %s became %s" % (a.needed(), b.needed())
        if a.interp() != b.interp():
            return "interpreter %s became %s" % (a.interp(), b.interp())
    except elfmini.ElfError:
        return None
    return None


def _edits_and_loads(ed, src, d, loads):
    """The editor's growing edit of a copy of src in d: None when it succeeds and the result
    loads, else why not."""
    os.makedirs(d, exist_ok=True)
    f = os.path.join(d, os.path.basename(src))
    shutil.copy2(src, f)
    rc, out, err = sh([ed] + grow_args(f) + [f], timeout=600)
    if rc != 0:
        return "exit %d: %s" % (rc, clip((err or out).replace(f, "FILE"), 200))
    why = loads(f)
    return "the result: %s" % why if why else None


def _reedit(pp, ed_name, ed, base, got, edited, workdir, loads):
    """An editor grows the run path of the post-processed file: it must succeed and the result
    load, wherever it does so on the edited file before the post-processor (the post-processor's
    doing, not the editor's: patchelf 0.19.3 cannot grow the run path of many MIPS files, edited
    or not)."""
    d = os.path.join(workdir, "reedit-" + ed_name.split()[0])
    why = _edits_and_loads(ed, got, d, loads)
    if why is None:
        return []
    before = _edits_and_loads(ed, edited, d + "-before", loads)
    if before is not None:
        return [("editorbug", "%s on the output of %s: %s; on the edited file itself too: %s"
                 % (ed_name, pp.name, why, before))]
    return [("reedit", "%s on the output of %s: %s" % (ed_name, pp.name, why))]
