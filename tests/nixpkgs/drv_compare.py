#!/usr/bin/env python3
"""Drv paths of every CUDA package set of a nixpkgs tree, with and without nix/upstream.

For each system and each set (cudaPackages, cudaPackages_12_6 ... cudaPackages_13_3, and the
cudaPackages_12/13 aliases), every attribute that is a derivation is evaluated twice (./drv-paths.nix)
with Nix >= 2.18 ($NIX_226, evaluating into a store of its own). The claims, each printed as a
PASS/FAIL line:

  - the same attributes evaluate with and without the overlay;
  - every package that holds stubs (buildRedist's includeRemoveStubsFromRunpathHook; every package
    with a `stubs` output has it) writes the set's removeStubsFromRunpathHook, which is ours, into
    its propagated-build-inputs;
  - a derivation differs exactly when nixpkgs' removeStubsFromRunpathHook is in the closure of its
    drv without the overlay: the hook itself, the packages holding stubs, and what depends on them;
  - with the overlay nixpkgs' hook is in no closure (one stub mechanism), and ours is in the closure
    of exactly those derivations.

What differs is listed by set. An attribute whose evaluation aborts in this tree (a file the
snapshot lacks) is found by bisection, left out and named.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def nix_eval(nix, expr):
    """Runs `nix eval --json` on expr in this directory; returns (value, stderr)."""
    proc = subprocess.run(
        [nix, "eval", "--impure", "--json", "--expr", expr],
        cwd=HERE,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def evaluate(nix, system, upstream, only):
    """Runs drv-paths.nix on only ({set: [attr]}); returns (value or None, stderr)."""
    only_expr = "{ %s }" % " ".join(
        "%s = [ %s ];" % (json.dumps(s), " ".join(json.dumps(n) for n in names)) for s, names in only.items()
    )
    expr = 'import ./drv-paths.nix { system = "%s"; upstream = %s; only = %s; }' % (
        system,
        "true" if upstream else "false",
        only_expr,
    )
    return nix_eval(nix, expr)


def describe_set(nix, system, upstream, set_name, names, skipped):
    """Descriptions of names in set_name; names whose evaluation aborts (which tryEval cannot
    catch) are found by bisection and go to skipped, with the error."""
    if not names:
        return {}
    value, err = evaluate(nix, system, upstream, {set_name: names})
    if value is not None:
        return value[set_name]
    if len(names) == 1:
        reason = [line.strip() for line in err.splitlines() if "error:" in line]
        skipped[names[0]] = reason[-1] if reason else err.strip()[-200:]
        return {}
    half = len(names) // 2
    result = describe_set(nix, system, upstream, set_name, names[:half], skipped)
    result.update(describe_set(nix, system, upstream, set_name, names[half:], skipped))
    return result


def describe_all(nix, system, upstream, sets, known_bad):
    """{set: (descriptions, skipped)} for every set. Names found unevaluable before (known_bad,
    updated here) are tried alone first, so that the rest evaluates in one call."""
    result = {}
    good = {s: [n for n in names if n not in known_bad] for s, names in sets.items()}
    value, _ = evaluate(nix, system, upstream, good)
    for set_name, names in sets.items():
        skipped = {}
        described = value[set_name] if value is not None else describe_set(
            nix, system, upstream, set_name, good[set_name], skipped
        )
        for name in names:
            if name in known_bad:
                described.update(describe_set(nix, system, upstream, set_name, [name], skipped))
        known_bad.update(skipped)
        result[set_name] = (described, skipped)
    return result


def closures(nix, drvs):
    """{drv: set of drvs in its closure}, from one `nix path-info --json --recursive` call."""
    drvs = sorted(set(drvs))
    proc = subprocess.run(
        [nix, "path-info", "--json", "--recursive", *drvs], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit("nix path-info failed: " + proc.stderr[-500:])
    info = json.loads(proc.stdout)
    if isinstance(info, list):  # older JSON shape
        info = {i["path"]: i for i in info}
    refs = {p: [r for r in (i or {}).get("references", []) if r.endswith(".drv") and r != p] for p, i in info.items()}
    memo = {}

    def close(p):
        if p in memo:
            return memo[p]
        seen, stack = {p}, [p]
        while stack:
            for r in refs.get(stack.pop(), []):
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
        memo[p] = seen
        return seen

    return {d: close(d) for d in drvs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nix", default=os.environ.get("NIX_226", "nix"))
    ap.add_argument("--system", action="append", default=[])
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args()
    systems = args.system or ["x86_64-linux", "aarch64-linux"]

    passed = failed = 0

    def check(ok, name, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"PASS {name}")
        else:
            failed += 1
            print(f"FAIL {name}{': ' + detail if detail else ''}")

    report = {}
    known_bad = {}
    for system in systems:
        sets = {}
        for upstream in (False, True):
            names, err = nix_eval(
                args.nix, 'import ./drv-paths.nix { system = "%s"; upstream = %s; }' % (system, "true" if upstream else "false")
            )
            if names is None:
                check(False, f"{system}: list the CUDA package sets", err.strip()[-300:])
                return 1
            for set_name, described in describe_all(args.nix, system, upstream, names, known_bad).items():
                sets.setdefault(set_name, {})[upstream] = described
        all_drvs = [
            d["drv"]
            for variants in sets.values()
            for described, _ in variants.values()
            for d in described.values()
            if d.get("drv")
        ]
        closure = closures(args.nix, all_drvs)
        for set_name, variants in sorted(sets.items()):
            label = f"{system} {set_name}"
            (plain, plain_skipped), (ours, ours_skipped) = variants[False], variants[True]
            check(
                set(plain_skipped) == set(ours_skipped) and set(plain) == set(ours),
                f"{label}: the same attributes evaluate with and without the overlay",
                f"only without: {sorted(set(plain) - set(ours))}, only with: {sorted(set(ours) - set(plain))}",
            )
            old_hook = plain.get("removeStubsFromRunpathHook", {}).get("drv")
            new_hook = ours.get("removeStubsFromRunpathHook", {}).get("drv")
            check(
                bool(old_hook and new_hook and old_hook != new_hook),
                f"{label}: removeStubsFromRunpathHook is replaced",
                f"{old_hook} -> {new_hook}",
            )
            if not (old_hook and new_hook):
                continue
            holders = sorted(n for n, d in ours.items() if d.get("stubs"))
            stub_outputs = sorted(n for n, d in ours.items() if "stubs" in (d.get("outputs") or []))
            check(
                set(stub_outputs) <= set(holders),
                f"{label}: every package with a stubs output is marked as holding stubs",
                f"not marked: {sorted(set(stub_outputs) - set(holders))}",
            )
            not_propagating = [n for n in holders if not ours[n].get("propagates")]
            check(
                not not_propagating and holders,
                f"{label}: each of the {len(holders)} packages holding stubs propagates our hook",
                f"not: {not_propagating}",
            )
            differ, unexplained, wrong_closure = [], [], []
            for name in sorted(set(plain) & set(ours)):
                a, b = plain[name].get("drv"), ours[name].get("drv")
                if not a or not b:
                    continue
                had_old = old_hook in closure[a]
                if a != b:
                    differ.append(name)
                if (a != b) != had_old:
                    unexplained.append(name)
                if old_hook in closure[b] or (new_hook in closure[b]) != had_old:
                    wrong_closure.append(name)
            dependents = [n for n in differ if n not in holders and n != "removeStubsFromRunpathHook"]
            check(
                not unexplained,
                f"{label}: {len(differ)} of {len(ours)} derivations differ, exactly those with nixpkgs' hook in their closure",
                f"unexplained: {unexplained}",
            )
            check(
                not wrong_closure,
                f"{label}: with the overlay nixpkgs' hook is in no closure, ours where it was",
                f"wrong: {wrong_closure}",
            )
            by_reason = {}
            for n, r in sorted(ours_skipped.items()):
                by_reason.setdefault(r, []).append(n)
            skipped_note = "; ".join(f"{', '.join(ns)} ({r})" for r, ns in by_reason.items())
            print(f"  differ: the hook; holding stubs: {', '.join(holders)}; depending on them: {', '.join(dependents) or 'none'}")
            if ours_skipped:
                print(f"  not evaluable in this tree (left out): {skipped_note}")
            report[label] = {
                "derivations": len(ours),
                "differ": differ,
                "holdingStubs": holders,
                "dependents": dependents,
                "skipped": ours_skipped,
            }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
