#!/usr/bin/env python3
"""What the workspace promises about its crates, checked from their manifests and sources.

    python3 tests/crates/check.py [CHECK...]     CHECK: msrv, deps, length, imports, methods, files,
                                                 publish (default: all)

- msrv: the workspace's `rust-version` is at least the `rust_version` of every crate that a
  publishable crate (elfpatch, stubstrip, ldso-model) builds with: its normal and build
  dependencies, transitively, as `cargo metadata` resolves them (every platform, the workspace's
  features). Crates that only tests build (dev-dependencies and what they pull in) are reported
  as "tests need Rust >= X", not failed: the library builds without them. Also checks that
  clippy's `incompatible_msrv` lint is denied for the whole workspace, so that clippy holds our own
  use of the standard library to `rust-version` (clippy leaves #[cfg(test)] code alone).
- deps: every dependency a crate's manifest lists is used: a [dependencies] entry in src/, a
  [build-dependencies] entry in build.rs, a [dev-dependencies] entry anywhere in src/, tests/,
  examples/, benches/ or build.rs; "used" means `name::` or `use name` (with - read as _).
  Deliberate exceptions are listed in DELIBERATE with the reason.
- length: no function in crates/*/src is longer than MAX_FN_LINES lines (from the line with
  `fn` to the closing brace), unless the comment lines right above it (doc comments and
  attributes may sit in between) include one that starts with `// Long:` and says why the
  function is better whole.
- imports: no module import circle inside any crate's src/: a file naming another through
  `crate::`, `super::`, `self::` or a child module's name (in `use` items or in paths in code,
  comments and strings aside) is an edge, and no set of files may reach each other. Crate roots
  (lib.rs, main.rs, bin/*.rs) and mod.rs files are hubs, left out: they declare the modules and
  hold what all of them share.
- methods: no type's inherent methods (`impl Type {`, not trait impls) live in more than two files,
  and none ties files both ways out of sight: the file declaring a type depends on every file that
  holds its methods (a caller of `value.method()` needs it, though no `use` line says so), so
  those edges join the import graph of `imports`, which must stay free of circles. As there, a
  type declared in a hub (mod.rs, lib.rs) is left out of the circle part: a child extending its
  parent's type is Rust's common shape (`Plan::apply_to_vec` in apply.rs, elfsynth's `Draft` and
  `Parsed`), and only the two-file limit holds for it.
- files: no source file in crates/*/src or fuzz/ has more than 900 lines before its unit tests
  (its first `#[cfg(test)]` line).
- publish: `cargo publish --dry-run` passes for elfpatch alone (packaged and built as crates.io
  would), and for elfpatch, ldso-model and stubstrip together (cargo >= 1.90 verifies each against
  the others as packaged; alone, the other two wait for elfpatch on crates.io). It needs the
  crates.io index.

Each failure is one line naming the crate or file; the exit status is 1 if any check failed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLISHABLE = ["elfpatch", "stubstrip", "ldso-model"]
MAX_FN_LINES = 150
# (crate, section, dependency) -> why it is listed although no source names it.
DELIBERATE = {
    ("elfpatch", "dev-dependencies", "elfpatch"): "the crate's own tests turn on its "
    "fault-injection feature through a dev-dependency on itself",
}

failures: list[str] = []


def fail(msg: str) -> None:
    failures.append(msg)
    print(f"FAIL: {msg}")


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def show(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


# --- msrv ------------------------------------------------------------------------------------


def check_msrv() -> None:
    r = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        print(r.stderr[-2000:])
        fail("msrv: `cargo metadata --locked` failed (output above; is Cargo.lock up to date?)")
        return
    meta = json.loads(r.stdout)
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    declared = version_key(workspace["workspace"]["package"]["rust-version"])
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    by_name = {p["name"]: p["id"] for p in meta["packages"] if p["id"] in meta["workspace_members"]}

    def closure(starts: list[str], first_kinds: set) -> dict[str, str]:
        """Packages reachable from `starts` (the first edge of `first_kinds`, then normal and
        build edges), each with the crate that pulled it in first."""
        seen: dict[str, str] = {}
        todo = []
        for s in starts:
            for d in nodes[s]["deps"]:
                if any(k["kind"] in first_kinds for k in d["dep_kinds"]):
                    todo.append((d["pkg"], packages[s]["name"]))
        while todo:
            pkg, via = todo.pop()
            if pkg in seen:
                continue
            seen[pkg] = via
            for d in nodes[pkg]["deps"]:
                if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
                    todo.append((d["pkg"], packages[pkg]["name"]))
        return seen

    starts = [by_name[n] for n in PUBLISHABLE]
    built = closure(starts, {None, "build"})
    tests = {k: v for k, v in closure(starts, {"dev"}).items() if k not in built}

    members = set(meta["workspace_members"])

    def table(ids: dict[str, str], title: str) -> tuple[int, ...]:
        """Prints the crates outside the workspace (its own share its rust-version) with the
        highest rust-versions; returns the highest."""
        rows = []
        for pid, via in ids.items():
            if pid in members:
                continue
            p = packages[pid]
            rv = p.get("rust_version")
            rows.append((version_key(rv) if rv else (0,), p["name"], p["version"], rv or "-", via))
        rows.sort(reverse=True)
        undeclared = sorted(r[1] for r in rows if r[3] == "-")
        print(f"{title}: {len(rows)} crates; the highest rust-versions:")
        print(f"  {'crate':<20} {'version':<20} {'rust-version':<13} pulled in by")
        for _, name, version, rv, via in rows[:8]:
            print(f"  {name:<20} {version:<20} {rv:<13} {via}")
        if undeclared:
            print(f"  declaring none ({len(undeclared)}): {', '.join(undeclared)}")
        return rows[0][0] if rows else (0,)

    print(f"workspace rust-version: {show(declared)}")
    highest = table(built, "built by the publishable crates (normal and build dependencies)")
    for pid in built:
        rv = packages[pid].get("rust_version")
        if rv and version_key(rv) > declared:
            p = packages[pid]
            fail(
                f"msrv: {p['name']} {p['version']} (pulled in by {built[pid]}) needs Rust {rv}, "
                f"above the workspace's rust-version {show(declared)}"
            )
    if highest <= declared:
        print(f"ok: no dependency needs more than Rust {show(declared)} (the highest: {show(highest)})")
    if tests:
        needed = table(tests, "built only for tests (dev-dependencies)")
        print(f"note: tests need Rust >= {show(max(needed, declared))}")

    lints = workspace.get("workspace", {}).get("lints", {}).get("clippy", {})
    level = lints.get("incompatible_msrv")
    level = level.get("level") if isinstance(level, dict) else level
    if level not in ("deny", "forbid"):
        fail("msrv: Cargo.toml: [workspace.lints.clippy] does not deny incompatible_msrv")
    for manifest in sorted(ROOT.glob("crates/*/Cargo.toml")):
        m = tomllib.loads(manifest.read_text())
        if m.get("lints", {}).get("workspace") is not True:
            fail(f"msrv: {manifest.relative_to(ROOT)}: no `[lints] workspace = true`, so the "
                 "workspace's incompatible_msrv lint does not apply to it")
    if level in ("deny", "forbid"):
        print(f"ok: clippy's incompatible_msrv is {level} in every crate")


# --- deps -------------------------------------------------------------------------------------


def rust_files(crate: Path, parts: list[str]) -> list[Path]:
    out = []
    for part in parts:
        p = crate / part
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(p.rglob("*.rs")))
    return out


def check_deps() -> None:
    where = {
        "dependencies": ["src"],
        "build-dependencies": ["build.rs"],
        "dev-dependencies": ["src", "tests", "examples", "benches", "build.rs"],
    }
    checked = 0
    for manifest in sorted(ROOT.glob("crates/*/Cargo.toml")):
        crate = manifest.parent
        m = tomllib.loads(manifest.read_text())
        name = m["package"]["name"]
        # The same sections under [target.'cfg(...)'] count as well.
        tables = [m, *m.get("target", {}).values()]
        for section, parts in where.items():
            texts = [f.read_text() for f in rust_files(crate, parts)]
            for dep in [d for t in tables for d in t.get(section, {})]:
                checked += 1
                if (name, section, dep) in DELIBERATE:
                    continue
                ident = re.escape(dep.replace("-", "_"))
                pat = re.compile(rf"(?<![\w:]){ident}::|\buse\s+{ident}\b|\bextern\s+crate\s+{ident}\b")
                if not any(pat.search(t) for t in texts):
                    fail(f"deps: {manifest.relative_to(ROOT)}: [{section}] {dep} is not used in "
                         f"{', '.join(p + ('/' if p != 'build.rs' else '') for p in parts)}")
    ok = not any(f.startswith("deps:") for f in failures)
    print(f"{'ok: ' if ok else ''}{checked} dependency entries checked")


# --- length -----------------------------------------------------------------------------------

CHAR_LITERAL = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'")


def code_only(src: str) -> str:
    """`src` with comments, strings and character literals blanked (newlines kept), so that the
    braces left are the code's."""
    out = []
    i, n = 0, len(src)

    def blank(s: str) -> str:
        return re.sub(r"[^\n]", " ", s)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(src, i)) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = src.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(blank(src[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := CHAR_LITERAL.match(src, i)):
            out.append(blank(m.group(0)))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def functions(path: Path):
    """(name, first line, last line) of every function with a body in `path` (1-based lines)."""
    src = path.read_text()
    code = code_only(src)
    for m in FN.finditer(code):
        # The body is the first `{` outside the parameter list (a `;` first: no body).
        depth, j = 0, m.end()
        while j < len(code) and not (code[j] in "{;" and depth == 0):
            if code[j] in "([":
                depth += 1
            elif code[j] in ")]":
                depth -= 1
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        braces, k = 0, j
        while k < len(code):
            if code[k] == "{":
                braces += 1
            elif code[k] == "}":
                braces -= 1
                if braces == 0:
                    break
            k += 1
        yield m.group(1), code.count("\n", 0, m.start()) + 1, code.count("\n", 0, k) + 1


def explained(lines: list[str], first: int) -> bool:
    """Whether the comment block right above line `first` holds a `// Long:` line."""
    i = first - 2
    while i >= 0:
        s = lines[i].strip()
        if s.startswith("// Long:"):
            return True
        if not (s.startswith("//") or s.startswith("#[")):
            return False
        i -= 1
    return False


def check_length() -> None:
    longest = []
    for path in sorted(ROOT.glob("crates/*/src/**/*.rs")):
        lines = path.read_text().splitlines()
        for name, first, last in functions(path):
            length = last - first + 1
            longest.append((length, f"{path.relative_to(ROOT)}:{first}", name))
            if length > MAX_FN_LINES and not explained(lines, first):
                fail(f"length: {path.relative_to(ROOT)}:{first}: fn {name} is {length} lines "
                     f"(more than {MAX_FN_LINES}); split it, or say why not in a `// Long:` comment above it")
    longest.sort(reverse=True)
    print(f"{len(longest)} functions in crates/*/src; the longest:")
    for length, where, name in longest[:5]:
        print(f"  {length:4} {name} ({where})")


# --- imports ----------------------------------------------------------------------------------

USE = re.compile(r"(?<![\w:])use\s+([^;]*);")
INLINE_PATH = re.compile(r"(?<![\w:])(crate|super|self)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
INLINE_MOD = re.compile(r"(?<![\w:])mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")


def use_paths(tree: str) -> list[list[str]]:
    """The paths a `use` tree names: `super::{a::B, c}` is `super::a::B` and `super::c`."""
    tokens = re.findall(r"::|[{},*]|[A-Za-z_][A-Za-z0-9_]*", tree)
    pos = 0

    def parse(prefix: list[str]) -> list[list[str]]:
        nonlocal pos
        path = list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "{":
                pos += 1
                out = []
                while pos < len(tokens) and tokens[pos] != "}":
                    if tokens[pos] == ",":
                        pos += 1
                        continue
                    out.extend(parse(path))
                pos += 1
                return out
            if t in (",", "}"):
                break
            if t == "as":
                pos += 2
                continue
            if t != "::":
                path.append(t)
            pos += 1
        return [path]

    return parse([])


def crate_modules(src_root: Path) -> dict[Path, tuple[str, tuple[str, ...], bool]]:
    """Every source file of a crate's src/: (crate root it belongs to, module path, hub?). Crate
    roots (lib.rs, main.rs, bin/*.rs) and mod.rs files are hubs."""
    out = {}
    for path in sorted(src_root.rglob("*.rs")):
        parts = list(path.relative_to(src_root).with_suffix("").parts)
        root = "lib"
        if parts[0] == "bin":
            root, parts = f"bin/{parts[1]}", parts[2:]
        elif parts == ["main"]:
            root, parts = "main", []
        hub = not parts or parts[-1] in ("mod", "lib")
        if parts and parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        out[path] = (root, tuple(parts), hub)
    return out


def import_edges(path: Path, root: str, module: tuple[str, ...], known: set) -> set[tuple[str, ...]]:
    """The modules of the same crate root that `path` names through `crate::`, `super::`,
    `self::` or a child module's name, in `use` items and in paths inside code (comments and
    strings aside). A path inside an inline `mod name { }` is relative to that module."""
    code = code_only(path.read_text())
    spans = []
    for m in INLINE_MOD.finditer(code):
        depth, k = 0, m.end() - 1
        while k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                break
            k += 1
        spans.append((m.end(), k, m.group(1)))

    def scope(at: int) -> tuple[str, ...]:
        return module + tuple(name for s, e, name in sorted(spans) if s <= at < e)

    def resolve(segments: list[str], here: tuple[str, ...]):
        base, i = here, 0
        if segments and segments[0] == "crate":
            base, i = (), 1
        elif segments and segments[0] in ("super", "self"):
            while i < len(segments) and segments[i] in ("super", "self"):
                base = base[:-1] if segments[i] == "super" else base
                i += 1
        elif not (segments and (root, here + (segments[0],)) in known):
            return None
        while i < len(segments) and (root, base + (segments[i],)) in known:
            base += (segments[i],)
            i += 1
        return base

    found = set()
    uses = [(m.start(), m.end()) for m in USE.finditer(code)]
    for (start, end), m in zip(uses, USE.finditer(code)):
        for segments in use_paths(m.group(1)):
            target = resolve(segments, scope(start))
            if target is not None:
                found.add(target)
    for m in INLINE_PATH.finditer(code):
        if any(s <= m.start() < e for s, e in uses):
            continue
        segments = [m.group(1)] + re.findall(r"[A-Za-z_][A-Za-z0-9_]*", m.group(2))
        target = resolve(segments, scope(m.start()))
        if target is not None:
            found.add(target)
    return found


def strongly_connected(graph: dict) -> list[list]:
    """Tarjan's components of more than one node, each in a stable order."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph(src_root: Path):
    """The crate's modules, its import graph between non-hub files, and each such node's path."""
    modules = crate_modules(src_root)
    known = {(root, module) for root, module, _ in modules.values()}
    hubs = {(root, module) for root, module, hub in modules.values() if hub}
    path_of = {(root, module): p for p, (root, module, hub) in modules.items() if not hub}
    graph: dict = {}
    for path, (root, module, hub) in modules.items():
        if hub:
            continue
        node = (root, module)
        targets = import_edges(path, root, module, known)
        graph[node] = {
            (root, t) for t in targets
            if (root, t) != node and (root, t) not in hubs and (root, t) in path_of
        }
    return modules, graph, path_of


def circles(src_root: Path, graph: dict, path_of: dict, what: str, hint: str) -> None:
    for comp in strongly_connected(graph):
        name = lambda n: str(path_of[n].relative_to(src_root))
        edges = [f"{name(a)} -> {name(b)}" for a in comp for b in sorted(graph[a]) if b in comp]
        fail(f"{what}: a module import circle in {src_root.relative_to(ROOT)}: "
             f"{', '.join(edges)}; {hint}")


def check_imports() -> None:
    files = 0
    for src_root in sorted(ROOT.glob("crates/*/src")):
        _, graph, path_of = import_graph(src_root)
        files += len(graph)
        circles(src_root, graph, path_of, "imports", "let the lower module not name the higher one")
    ok = not any(f.startswith("imports:") for f in failures)
    print(f"{'ok: ' if ok else ''}{files} modules checked for import circles (lib.rs, main.rs, "
          "bin roots and mod.rs are hubs)")


# --- methods ----------------------------------------------------------------------------------

MAX_METHOD_FILES = 2
DECLARE = re.compile(r"(?<![\w])(?:struct|enum|union)\s+([A-Z][A-Za-z0-9_]*)")
# An inherent impl: `impl<...> Name<...> {` with no `for` (trait impls are not methods of the type).
INHERENT = re.compile(r"(?<![\w])impl\s*(?:<[^{;]*?>)?\s*([A-Z][A-Za-z0-9_]*)\s*(?:<[^{;]*?>)?\s*(?:where[^{;]*)?\{")


def check_methods() -> None:
    """No type's inherent methods spread over more than MAX_METHOD_FILES files, and none hides a
    two-way tie: the file declaring a type reaches every file that holds its methods (code that
    calls `value.method()` depends on where the method is, though no `use` line says so), so
    those edges join the import graph, which must stay free of circles."""
    types = 0
    for src_root in sorted(ROOT.glob("crates/*/src")):
        modules, graph, path_of = import_graph(src_root)
        node_of = {p: (root, module) for p, (root, module, hub) in modules.items()}
        declared: dict = {}
        impls: dict = {}
        for path in modules:
            code = code_only(path.read_text())
            for m in DECLARE.finditer(code):
                declared.setdefault((modules[path][0], m.group(1)), set()).add(path)
            for m in INHERENT.finditer(code):
                impls.setdefault((modules[path][0], m.group(1)), set()).add(path)
        def home_of(path: Path, name: str):
            """Where the type an `impl` in `path` names is declared: `path` itself, else the one
            declaring file `path` imports, else the only declaring file of the crate root."""
            homes = sorted(declared.get((modules[path][0], name), ()))
            for candidates in ([h for h in homes if h == path],
                               [h for h in homes if node_of[h] in graph.get(node_of[path], ())],
                               homes if len(homes) == 1 else []):
                if candidates:
                    return candidates[0]
            return None

        methods_of: dict = {}
        for (root, name), files in sorted(impls.items()):
            for path in sorted(files):
                home = home_of(path, name)
                if home is None:
                    continue
                methods_of.setdefault((home, name), set()).add(path)
                a, b = node_of[home], node_of[path]
                if a != b and a in graph and b in graph:
                    graph[a] = graph[a] | {b}
        for (home, name), files in sorted(methods_of.items()):
            types += 1
            if len(files) > MAX_METHOD_FILES:
                fail(f"methods: {name} (declared in {home.relative_to(ROOT)}) has inherent methods "
                     f"in {len(files)} files: "
                     f"{', '.join(str(f.relative_to(src_root)) for f in sorted(files))}; at most "
                     f"{MAX_METHOD_FILES}: make the others functions of the value they need")
        circles(src_root, graph, path_of, "methods",
                "a type's methods in a file that imports the type's file tie the two both ways")
    ok = not any(f.startswith("methods:") for f in failures)
    print(f"{'ok: ' if ok else ''}{types} types with inherent methods checked")


# --- files ------------------------------------------------------------------------------------

MAX_FILE_LINES = 900


def check_files() -> None:
    """No source file is longer than MAX_FILE_LINES before its unit tests (`#[cfg(test)]`)."""
    n = 0
    for path in sorted(ROOT.glob("crates/*/src/**/*.rs")) + sorted(ROOT.glob("fuzz/**/*.rs")):
        if "target" in path.parts:
            continue
        n += 1
        lines = path.read_text().splitlines()
        body = next((i for i, l in enumerate(lines) if l.strip() == "#[cfg(test)]"), len(lines))
        if body > MAX_FILE_LINES:
            fail(f"files: {path.relative_to(ROOT)} has {body} lines before its unit tests (more "
                 f"than {MAX_FILE_LINES}); split it by concept")
    ok = not any(f.startswith("files:") for f in failures)
    print(f"{'ok: ' if ok else ''}{n} source files checked for length")


# --- publish ----------------------------------------------------------------------------------


def dry_run(packages: list[str]) -> bool:
    args = [a for p in packages for a in ("-p", p)]
    r = subprocess.run(
        ["cargo", "publish", "--dry-run", "--allow-dirty", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    what = f"cargo publish --dry-run {' '.join(args)}"
    if r.returncode != 0:
        print(r.stderr[-4000:])
        fail(f"publish: `{what}` failed (output above)")
        return False
    packaged = [l.strip() for l in r.stderr.splitlines() if l.strip().startswith("Packaged")]
    print(f"ok: {what}: {'; '.join(packaged)}")
    return True


def forget_packaged(packages: list[str]) -> None:
    """Removes cargo's extracted copies of our packaged crates from earlier dry runs.

    The multi-crate dry run serves the crates it packaged from a local registry whose id depends
    only on the path of target/package, and unpacks them under CARGO_HOME/registry/src/<id>/NAME-VERSION.
    Cargo unpacks a crate only when that directory is absent, so a second run with changed sources
    but the same version verifies the dependent crates against the first run's copy (seen in the
    clean-Debian container: stubstrip failed against an ldso-model from before a new module).
    Local registries' ids start with "-"; crates.io's never do, so nothing downloaded is touched.
    """
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    versions = {p: crate_version(p) for p in packages}
    for registry in (cargo_home / "registry" / "src").glob("-*"):
        for name, version in versions.items():
            stale = registry / f"{name}-{version}"
            if stale.is_dir():
                shutil.rmtree(stale)


def crate_version(package: str) -> str:
    manifest = tomllib.loads((ROOT / "crates" / package / "Cargo.toml").read_text())
    version = manifest["package"]["version"]
    if isinstance(version, dict):  # version.workspace = true
        version = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    return version


def check_publish() -> None:
    # elfpatch alone, as crates.io would build it: its normal dependencies all come from there.
    dry_run(["elfpatch"])
    # ldso-model and stubstrip need elfpatch (and ldso-model) from crates.io; cargo >= 1.90
    # packages several crates at once and verifies each against the others as packaged.
    version = subprocess.run(["cargo", "--version"], capture_output=True, text=True).stdout
    m = re.match(r"cargo (\d+)\.(\d+)", version)
    if m and (int(m.group(1)), int(m.group(2))) >= (1, 90):
        forget_packaged(["elfpatch", "ldso-model"])
        dry_run(["elfpatch", "ldso-model", "stubstrip"])
    else:
        print(f"skipped: the dry run of ldso-model and stubstrip with elfpatch needs cargo >= 1.90 "
              f"(this is {version.strip()})")


CHECKS = {
    "msrv": check_msrv,
    "deps": check_deps,
    "length": check_length,
    "imports": check_imports,
    "methods": check_methods,
    "files": check_files,
    "publish": check_publish,
}


def main() -> int:
    names = sys.argv[1:] or list(CHECKS)
    for n in names:
        if n not in CHECKS:
            print(f"check.py: unknown check {n} (known: {', '.join(CHECKS)})", file=sys.stderr)
            return 2
    for n in names:
        print(f"--- {n}")
        CHECKS[n]()
    print(f"crates: {len(failures)} failure(s)" if failures else "crates: every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
