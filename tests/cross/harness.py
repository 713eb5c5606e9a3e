"""What the Python harnesses share (cross: run.py, prior.py; sweep: sweep.py,
wheels.py, differential.py through sweep/common.py): running a tool, hashing
a file, clipping a message, comparing eu-elflint's messages before and after
an edit, wording dynamic entries, and the end of a run (its JSON, its work
directory).  The ELF reader and the editors are elfmini.py and editors.py."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess

# eu-elflint, or None; a harness may set it (to None for --no-elflint) before
# its worker pool forks.
ELFLINT = shutil.which("eu-elflint")


def sh(cmd, timeout=120, cwd=None, env=None, stdout=True):
    """Runs cmd: (exit status, stdout, stderr), 124 on timeout and 127 when it
    cannot start (the message then says so); stdout=False discards stdout."""
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout, cwd=cwd, env=env)
        return (r.returncode, (r.stdout or b"").decode("utf-8", "replace"),
                r.stderr.decode("utf-8", "replace"))
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %ss: %s" % (timeout, " ".join(cmd))
    except OSError as e:
        return 127, "", "%s: %s" % (cmd[0], e)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def clip(s: str, n: int = 600) -> str:
    """s stripped, cut to n characters with a note of how many more there were."""
    s = s.strip()
    return s if len(s) <= n else s[:n] + "...[%d more]" % (len(s) - n)


_NUM = re.compile(r"\b(0x[0-9a-fA-F]+|\d+)\b")


def elflint_messages(path: str, timeout: int = 600):
    """eu-elflint --gnu-ld's messages on path: {"counts": normalized message ->
    count, "raw": normalized -> one raw example}, with the path replaced by
    FILE and numbers normalized, so that renumbered sections or entries do not
    look new; None without eu-elflint."""
    if not ELFLINT:
        return None
    rc, out, err = sh([ELFLINT, "--gnu-ld", path], timeout=timeout)
    counts = {}
    raw = {}
    for line in (out + "\n" + err).splitlines():
        line = line.strip().replace(path, "FILE")
        if not line or line == "No errors":
            continue
        norm = _NUM.sub("#", re.sub(r"\[\s*\d+\]", "[#]", line))
        counts[norm] = counts.get(norm, 0) + 1
        raw.setdefault(norm, line)
    return {"counts": counts, "raw": raw}


def new_elflint(before, after):
    """The messages of after (raw) that occur more often than in before."""
    if before is None or after is None:
        return []
    return sorted(after["raw"][k] for k, n in after["counts"].items() if n > before["counts"].get(k, 0))


def fmt_entries(c):
    """A Counter of (tag, value) dynamic entries as one line."""
    out = []
    for (k, v), n in sorted(c.items(), key=lambda kv: str(kv[0])):
        vs = ("0x%x" % v) if isinstance(v, int) else ("*" if v is None else repr(v)[:70])
        out.append("%s=%s%s" % (k, vs, "" if n == 1 else " x%d" % n))
    return "[" + ", ".join(out) + "]"


def finish_run(json_path, doc, workdir, keep_requested, workdir_given, log, kept="kept under %s"):
    """The end of a run: doc written to json_path (when given), the work
    directory removed unless it was given or is to be kept."""
    if json_path:
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=1)
        log("wrote %s" % json_path)
    if not workdir_given and not keep_requested:
        shutil.rmtree(workdir, ignore_errors=True)
    elif keep_requested:
        log(kept % workdir)
