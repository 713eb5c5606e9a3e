# The elfpatch-stdenv part of ./run.sh and bench/nixpkgs_fixup_bench.py: what ./builds.nix builds,
# with another program as stdenv's `patchelf` — the one fixupPhase's `patchelf --shrink-rpath`
# (nixpkgs' patchelf setup hook), autoPatchelfHook, autoAddDriverRunpath, audit-tmpdir and
# nixpkgs' removeStubsFromRunpathHook run.
#
#   tool     a directory holding the program (brought into the store as a path): elfpatch from
#            target/release, or patchelf 0.19.3 for the reference builds
#   toolBin  its file name in `tool`
#   label    names the variant's derivations (stubstrip-nixpkgs-LABEL-as-patchelf)
#   logCalls true: bin/patchelf is ./fake/patchelf-calls.sh, which logs every call in the build
#            directory, and the setup hook reports them at the end of fixup; false: bin/patchelf is
#            a link to the program itself (the benchmark)
#
# The variant is an overlay replacing `patchelf` after ./stand-ins.nix (which makes it the host's):
# the native stdenv's last stage puts the previous stage's `patchelf` into every build's
# nativeBuildInputs, so its setup hook (nixpkgs' own patchelf setup-hook.sh) and its bin/patchelf
# are what every build of the set gets, the CUDA packages included.
{
  nixpkgs ? builtins.getEnv "NIXPKGS",
  system ? builtins.currentSystem,
  upstream ? true,
  prebuilt,
  tool,
  toolBin,
  label,
  logCalls ? true,
}:
let
  patchelfOverlay = final: prev: {
    patchelf = final.stdenvNoCC.mkDerivation {
      name = "stubstrip-nixpkgs-${label}-as-patchelf";
      dontUnpack = true;
      dontPatchELF = true;
      dontStrip = true;
      installPhase = ''
        mkdir -p $out/bin $out/nix-support
        ${
          if logCalls then
            ''
              substitute ${./fake/patchelf-calls.sh} $out/bin/patchelf \
                --subst-var-by tool ${tool}/${toolBin} \
                --subst-var-by readelf /usr/bin/readelf
              chmod +x $out/bin/patchelf
            ''
          else
            "ln -s ${tool}/${toolBin} $out/bin/patchelf"
        }
        # nixpkgs' own patchelf setup hook (fixupPhase's shrink-rpath), then the report.
        cat ${prev.path + "/pkgs/development/tools/misc/patchelf/setup-hook.sh"} > $out/nix-support/setup-hook
        ${
          if logCalls then
            "substitute ${./fake/patchelf-calls-hook.sh} hook --subst-var-by tool ${tool}/${toolBin} && cat hook >> $out/nix-support/setup-hook"
          else
            ""
        }
      '';
      passthru = {
        inherit tool toolBin label;
      };
      meta = removeAttrs (prev.patchelf.meta or { }) [
        "maintainers"
        "teams"
      ];
    };
  };

  # ./builds.nix as it is, its ./pkgs.nix given the overlay above after its own.
  builds = scopedImport {
    import =
      p:
      if toString p == toString ./pkgs.nix then
        args: import p (args // { extraOverlays = (args.extraOverlays or [ ]) ++ [ patchelfOverlay ]; })
      else
        import p;
  } ./builds.nix { inherit nixpkgs system upstream prebuilt; };

  inherit (builds) pkgs;
  inherit (builds.cuda) cuda_cudart;
in
builds
// {
  inherit (pkgs) patchelf;

  # bench/nixpkgs_fixup_bench.py: a CUDA-sized output through the whole fixup phase; ./builds.nix's
  # `bench` (a consumer of cuda_cudart with autoPatchelfHook and autoAddDriverRunpath, every
  # postFixupHooks entry timed: "stubstrip-bench: SECONDS s: ENTRY") with another output. `plan`
  # is a file of lines "KIND PAD PATH": an ELF file of KIND (cuda: a library needing libcuda.so.1,
  # linked against cuda_cudart's stub; cudart: one needing libcudart; exe: a program needing
  # libcuda.so.1; plain: needing libc only) with PAD bytes of read-only data at $out/PATH, or
  # "text SIZE PATH" for a file that is not ELF. Also timed: the whole fixup phase, from a phase
  # just before it to one just after (installCheck is off), patchELF (fixupPhase's
  # --shrink-rpath), and an anchor before it. `salt` forces a new build.
  fixupBench =
    {
      plan,
      salt ? "",
    }:
    (builds.bench { inherit salt; }).overrideAttrs (old: {
      name = "stubstrip-nixpkgs-fixup-bench-${label}";
      buildPhase = ''
        runHook preBuild
        mkdir templates
        cat > templates/t.c <<'EOF'
        extern const char bench_pad[];
        #if defined(NEEDS_CUDA)
        int cuInit(unsigned int flags);
        int bench(int i) { return cuInit(0) + bench_pad[i & 7]; }
        #elif defined(NEEDS_CUDART)
        int cudaRuntimeGetVersion(int *v);
        int bench(int i) { int v; return cudaRuntimeGetVersion(&v) + bench_pad[i & 7]; }
        #else
        int bench(int i) { return bench_pad[i & 7]; }
        #endif
        #ifdef EXE
        int main(void) { return bench(0) == 34 ? 0 : 1; }
        #endif
        EOF
        while read -r kind pad path; do
          t=templates/$kind-$pad
          [[ $kind == text || -e $t ]] && continue
          printf '.section .rodata.bench_pad,"a"\n.globl bench_pad\nbench_pad:\n.zero %d\n.section .note.GNU-stack,"",@progbits\n' \
            $((pad + 16)) > $t.S
          case $kind in
            cuda) flags="-shared -fPIC -DNEEDS_CUDA -L${cuda_cudart}/lib/stubs -lcuda" ;;
            cudart) flags="-shared -fPIC -DNEEDS_CUDART -L${cuda_cudart}/lib -lcudart" ;;
            exe) flags="-DEXE -DNEEDS_CUDA -L${cuda_cudart}/lib/stubs -lcuda" ;;
            *) flags="-shared -fPIC" ;;
          esac
          $CC -O1 -o $t templates/t.c $t.S $flags
        done < ${plan}
        runHook postBuild
      '';
      installPhase = ''
        runHook preInstall
        while read -r kind pad path; do
          mkdir -p "$(dirname "$out/$path")"
          if [[ $kind == text ]]; then
            head -c "$pad" ${plan} > "$out/$path"
          else
            cp templates/$kind-$pad "$out/$path"
          fi
        done < ${plan}
        runHook postInstall
      '';
      preFixupPhases = [
        "stubstripFixupBenchAnchor"
        "stubstripFixupBenchStart"
      ];
      # The anchor: one readelf process per ELF file (what the hooks do per file, without
      # patchelf); it also reads the output into the page cache for the fixup that follows.
      stubstripFixupBenchAnchor = ''
        echo "stubstrip-bench: patchelf is $(readlink -f "$(command -v patchelf)") ($(patchelf --version 2>&1 | head -n 1))"
        t0=$EPOCHREALTIME
        while IFS= read -r -d "" f; do
          if isELF "$f"; then readelf -d "$f" > /dev/null; fi
        done < <(find "$out" -type f -print0)
        echo "stubstrip-bench: $(awk "BEGIN { printf \"%.3f\", $EPOCHREALTIME - $t0 }") s: anchor: readelf -d per ELF file"
      '';
      stubstripFixupBenchStart = "stubstripFixupBenchT0=$EPOCHREALTIME";
      preDistPhases = [ "stubstripFixupBenchEnd" ];
      stubstripFixupBenchEnd = ''
        stubstripFixupBenchLog "$stubstripFixupBenchT0" "fixupPhase (whole)"
      '';
      preFixup = old.preFixup + ''
        stubstripFixupBenchLog() {
          echo "stubstrip-bench: $(awk "BEGIN { printf \"%.3f\", $EPOCHREALTIME - $1 }") s: $2"
        }
        # patchELF (the patchelf setup hook's shrink-rpath), timed; its line per file dropped.
        eval "stubstripFixupBenchPatchELF()$(declare -f patchELF | tail -n +2)"
        patchELF() {
          local t0=$EPOCHREALTIME rc=0
          stubstripFixupBenchPatchELF "$@" > /dev/null || rc=$?
          stubstripFixupBenchLog "$t0" "patchELF $1 (fixupPhase's patchelf --shrink-rpath)"
          return $rc
        }
      '';
    });
}
