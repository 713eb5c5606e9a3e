# The ld-cache part of ./run.sh (./README.md "The ld-cache part"): consumers of
# ./builds.nix with a resolution-cache step like nixpkgs PR #535735's `generate-ld-cache` hook
# (./ld-cache/generate-ld-cache.sh, patchelf 0.19.3's --build-resolution-cache) in their
# nativeBuildInputs, its step running after stubstrip's ("after") or before it ("first").
#
#   prebuilt  the stubstrip binary's directory, as for ./builds.nix
#   patchelf  a directory holding patchelf 0.19.3's static binary `patchelf` (brought into the
#             store as a path, as the stubstrip binary is)
#
# The order. stubstrip's hook appends its postFixupHooks entry from prePhases; the ld-cache hook
# from preFixupHooks, which run later (fixupPhase), so by itself the ld-cache step runs after
# ours. For "first", the derivation lists a phase of its own in prePhases — a derivation's
# prePhases come before those the setup hooks append — which calls the hook's own
# `_registerGenerateLDCache` there, and takes the hook's preFixupHooks entry out (it would
# append a second entry). Then `ldcacheSnapshot`, also appended there, prints each ELF file's
# note before stubstrip's entry runs: what stubstrip found.
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  prebuilt,
  patchelf,
}:
let
  builds = import ./builds.nix { inherit nixpkgs system prebuilt; };
  inherit (builds) pkgs consumers;
  inherit (pkgs) lib;

  ldCacheHook = pkgs.makeSetupHook {
    name = "stubstrip-nixpkgs-generate-ld-cache-hook";
    substitutions.patchelf = "${patchelf}/patchelf";
  } ./ld-cache/generate-ld-cache.sh;

  # The consumers of ./builds.nix with stubstrip's hook listed last (it registers from prePhases
  # whatever its place in the list): the C program over strictDeps x __structuredAttrs, the
  # Python extension with both on and both off.
  bases = {
    c-strict-sa = consumers."c-bi-autoPautoAremov-strict-sa";
    c-strict-nosa = consumers."c-bi-autoPautoAremov-strict-nosa";
    c-lax-sa = consumers."c-bi-autoPautoAremov-lax-sa";
    c-lax-nosa = consumers."c-bi-autoPautoAremov-lax-nosa";
    python-strict-sa = consumers."python-bi-autoPautoAremov-strict-sa";
    python-lax-nosa = consumers."python-bi-autoPautoAremov-lax-nosa";
  };

  withLdCache =
    order: extra: base:
    base.overrideAttrs (
      old:
      {
        name = "${old.name or "${old.pname}-${old.version}"}-ldcache-${order}";
        nativeBuildInputs = old.nativeBuildInputs ++ [ ldCacheHook ];
        # The implicit postFixup runs before the postFixupHooks entries: the order they run in.
        postFixup = (old.postFixup or "") + ''
          echo "ld-cache test: postFixupHooks: ''${postFixupHooks[*]}"
        '';
      }
      // lib.optionalAttrs (order == "first") {
        prePhases = [ "ldcacheFirstPhase" ];
        ldcacheFirstPhase = ''
          _registerGenerateLDCache
          postFixupHooks+=(ldcacheSnapshot)
          local -a keep=()
          local h
          for h in "''${preFixupHooks[@]}"; do
            [[ $h == _registerGenerateLDCache ]] || keep+=("$h")
          done
          preFixupHooks=("''${keep[@]}")
        '';
        # Each ELF file's note as the ld-cache step left it, one line per file in the log.
        preFixup = old.preFixup + ''
          ldcacheSnapshot() {
            local f
            while IFS= read -r -d "" f; do
              isELF "$f" || continue
              objcopy -O binary --only-section=.note.nixos.ldcache "$f" "$TMPDIR/ldcache-note" 2>/dev/null || continue
              [[ -s $TMPDIR/ldcache-note ]] || continue
              echo "ld-cache test: note before stubstrip: $f: $(tr '\0' '\n' < "$TMPDIR/ldcache-note" | grep -a -x '[[:print:]]\{2,\}' | paste -sd' ')"
            done < <(find "$out" -type f -print0)
          }
        '';
      }
      // extra
    );
in
{
  inherit (builds) cuda;
  inherit ldCacheHook;
  variants =
    lib.mapAttrs' (n: b: lib.nameValuePair "${n}-after" (withLdCache "after" { } b)) bases
    // lib.mapAttrs' (n: b: lib.nameValuePair "${n}-first" (withLdCache "first" { } b)) bases;
  # The negative control: the ld-cache step first and stubstrip's run turned off. Its note must
  # pin the stub, as the "first" builds' did before stubstrip rewrote it.
  control = (withLdCache "first" { dontStubstrip = true; } bases.c-strict-sa).overrideAttrs (old: {
    name = "${old.name}-nostubstrip";
  });
}
