# shellcheck shell=bash
# Sourced by tests/nixpkgs/run.sh (which defines pass, fail, here, repo, work and exports NIXPKGS)
# for the opt-in part `real-cuda` (./README.md): nixpkgs' own buildRedist cuda_cudart of
# cudaPackages_13_0 from NVIDIA's files, and its two consumers (./real-cuda.nix) in three variants,
# every build in Nix's sandbox. It checks here what a build can show, keeps each build log, and
# packs the runtime closures and tests/gpu/real-cuda.sh for the GPU machine.
#
#   REAL_CUDA_ARCHIVES  the directory tests/gpu/pack-cudart.sh filled (NVIDIA's files; never
#                       committed). Unset: the part says so and skips.
#   REAL_CUDA_OUT       where the build logs, closure sizes and the bundle for the GPU go
#                       (default $REAL_CUDA_ARCHIVES/out): logs/*.log, closures.txt,
#                       bundle/{closure.tar.xz,programs.txt,real-cuda.sh}
# shellcheck disable=SC2154 # here, repo and work come from run.sh

realCudaTests() {
  if [[ -z ${REAL_CUDA_ARCHIVES-} ]]; then
    echo "tests/nixpkgs real-cuda: skipped: REAL_CUDA_ARCHIVES is not set (a directory with NVIDIA's" \
      "cuda_cudart and cuda_crt archives, made on a GPU machine by tests/gpu/pack-cudart.sh; see tests/nixpkgs/README.md)"
    return 0
  fi
  local archives out tmp p
  archives=$(cd "$REAL_CUDA_ARCHIVES" 2>/dev/null && pwd) || {
    fail "real-cuda: REAL_CUDA_ARCHIVES=$REAL_CUDA_ARCHIVES is not a directory"
    return 0
  }
  out=${REAL_CUDA_OUT:-$archives/out}
  rm -rf "$out/logs" "$out/bundle"
  mkdir -p "$out/logs" "$out/bundle"
  out=$(cd "$out" && pwd)

  # The stubstrip binary (run.sh's build part makes the same copy).
  local prebuiltDir=${STUBSTRIP_PREBUILT_DIR:-$repo/target/release}
  [[ -x $prebuiltDir/stubstrip ]] || (cd "$repo" && cargo build --release -p stubstrip) >"$work/cargo.log" 2>&1
  mkdir -p "$work/prebuilt"
  cp "$prebuiltDir/stubstrip" "$work/prebuilt/" || {
    fail "real-cuda: stubstrip binary in $prebuiltDir"
    return 0
  }

  # Nix's sandbox, as ./consumers.sh runs it: the host's tools mounted, TMPDIR under $work.
  local -a paths=() opts
  tmp=$work/real-cuda-tmp
  mkdir -p "$tmp"
  for p in /bin /usr /lib /lib64 /etc/alternatives; do [[ -e $p ]] && paths+=("$p"); done
  paths+=("$tmp")
  opts=(--option sandbox true --option sandbox-paths "${paths[*]}" --option substituters ''
    --option build-users-group '')
  local file=$here/real-cuda.nix
  rbuild() { TMPDIR=$tmp nix-build "${opts[@]}" --no-out-link "$file" --arg prebuilt "$work/prebuilt" --argstr archives "$archives" "$@"; }
  rdrv() { nix-instantiate "$file" --arg prebuilt "$work/prebuilt" --argstr archives "$archives" -A "$1" 2>/dev/null; }
  rlog() { nix-store --read-log "$(rdrv "$1")" 2>/dev/null; }
  runpathOf() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
  # The archive's copy of FILE (a path inside the archive's top directory).
  fromArchive() { tar -xJOf "$archives"/cuda_cudart-linux-x86_64-*-archive.tar.xz --wildcards "*-archive/$1"; }
  # The sha256 of FILE's .text: the fixup hooks rewrite a library's dynamic section (RUNPATH),
  # never its code, so this names NVIDIA's stub wherever it went.
  textSum() {
    objcopy -O binary --only-section=.text "$1" "$work/text.bin" 2>/dev/null && sha256sum <"$work/text.bin" | cut -d' ' -f1
  }

  # buildRedist's cuda_cudart, with and without nix/upstream (its own checks run in the build).
  local cudart cudartNixpkgs hookNixpkgs stubSum nixpkgsHookDrv
  if cudart=$(rbuild -A cuda_cudart 2>"$work/rc.err") && cudartNixpkgs=$(rbuild -A cuda_cudart_nixpkgs 2>>"$work/rc.err") &&
    hookNixpkgs=$(rbuild -A nixpkgsHook 2>>"$work/rc.err"); then
    rlog cuda_cudart >"$out/logs/cuda_cudart-ours.log"
    rlog cuda_cudart_nixpkgs >"$out/logs/cuda_cudart-nixpkgs.log"
    # The fixup hooks rewrite the libraries' RUNPATH: they are compared by their code.
    fromArchive lib/stubs/libcuda.so >"$work/stub.so"
    fromArchive "lib/libcudart.so.13.*" >"$work/cudart.so"
    stubSum=$(textSum "$work/stub.so")
    if [[ -L $cudart/lib/stubs/libcuda.so.1 && $(textSum "$cudart/lib/stubs/libcuda.so") == "$stubSum" ]] &&
      [[ $(textSum "$cudart/lib/libcudart.so.13") == "$(textSum "$work/cudart.so")" ]] &&
      readelf -d "$cudart/lib/libcudart.so.13" | grep -q 'SONAME.*\[libcudart.so.13\]' &&
      grep -qF "$hookNixpkgs" "$cudartNixpkgs/nix-support/propagated-build-inputs" &&
      ! grep -qF "$hookNixpkgs" "$cudart/nix-support/propagated-build-inputs" &&
      grep -q 'bin/stubstrip' "$(grep -o '[^ ]*-removeStubsFromRunpathHook' "$cudart/nix-support/propagated-build-inputs")/nix-support/setup-hook"; then
      pass "real-cuda: buildRedist builds cudaPackages_13_0.cuda_cudart from NVIDIA's files ($(basename "$cudart")): NVIDIA's libcudart.so.13 and stub (lib/stubs, with the libcuda.so.1 link); it propagates nixpkgs' hook, or ours with nix/upstream"
    else
      fail "real-cuda: cuda_cudart from NVIDIA's files" "$(find "$cudart/lib" -maxdepth 2 | head -12)"
    fi
  else
    fail "real-cuda: buildRedist builds cuda_cudart from NVIDIA's files" "$(grep -m5 -i 'error' "$work/rc.err")"
    return 0
  fi

  # The consumers. nohook, nixpkgsNoCheck and ours must build; nixpkgs must fail its installCheck.
  local variant program attr o rp
  local -A built=()
  for variant in nohook nixpkgs nixpkgsNoCheck ours oursNoPropagate; do
    for program in driver-api runtime-api; do
      attr=$variant.$program
      if o=$(rbuild -A "$attr" 2>"$work/b.err"); then
        built[$attr]=$o
      fi
      { rlog "$attr" || cat "$work/b.err"; } >"$out/logs/$variant-$program.log"
    done
  done

  local stubFrom
  nixpkgsHookDrv=$(rdrv nixpkgsHook)
  for program in driver-api runtime-api; do
    [[ $program == driver-api ]] && stubFrom="cuInit: CUDA_ERROR_STUB_LIBRARY (34)" || stubFrom="cudaGetDeviceCount: cudaErrorStubLibrary (34)"
    # No hook: the stub directory stays in RUNPATH; in the build the stub answers.
    o=${built[nohook.$program]-}
    rp=$(runpathOf "$o/bin/$program")
    if [[ -n $o && :$rp: == *"$cudart/lib/stubs:"* || -n $o && :$rp: == *"/lib/stubs:"* ]] &&
      grep -qF "installCheck: $o/bin/$program: " "$out/logs/nohook-$program.log" && grep -qF "$stubFrom" "$out/logs/nohook-$program.log"; then
      pass "real-cuda: no hook, $program: builds; RUNPATH keeps the stub directory ($rp); its installCheck gets the stub's $stubFrom"
    else
      fail "real-cuda: no hook, $program" "RUNPATH '$rp'; $(grep -m3 'installCheck\|rror' "$out/logs/nohook-$program.log")"
    fi
    # nixpkgs' hook: the installCheck cannot load libcuda.so.1 in the sandbox.
    if [[ -n ${built[nixpkgs.$program]-} ]]; then
      fail "real-cuda: nixpkgs' hook, $program: its installCheck fails in the sandbox" "it built"
    elif grep -q "libcuda.so.1: cannot open shared object file" "$out/logs/nixpkgs-$program.log"; then
      pass "real-cuda: nixpkgs' hook, $program: its installCheck fails in the sandbox: $(grep -m1 -o 'error while loading shared libraries: libcuda.so.1: cannot open shared object file' "$out/logs/nixpkgs-$program.log")"
    else
      fail "real-cuda: nixpkgs' hook, $program: its installCheck fails with the loader's message" "$(grep -m3 'installCheck\|rror' "$out/logs/nixpkgs-$program.log")"
    fi
    # nixpkgs' hook with installCheck off: builds, the driver link in place of the stub entry.
    o=${built[nixpkgsNoCheck.$program]-}
    rp=$(runpathOf "$o/bin/$program")
    if [[ -n $o && :$rp: == *:/run/opengl-driver/lib:* && $rp != *stubs* ]]; then
      pass "real-cuda: nixpkgs' hook, installCheck off, $program: builds; RUNPATH $rp"
    else
      fail "real-cuda: nixpkgs' hook, installCheck off, $program" "RUNPATH '$rp'"
    fi
    # Ours (and ours with dontStubstripPropagateCheckFallback): builds with its installCheck
    # (the check fallback lets the stub answer), the driver link in RUNPATH, no stub entry,
    # nixpkgs' hook not in the build's closure.
    for variant in ours oursNoPropagate; do
      o=${built[$variant.$program]-}
      rp=$(runpathOf "$o/bin/$program")
      if [[ -n $o && :$rp: == *:/run/opengl-driver/lib:* && $rp != *stubs* ]] &&
        grep -qF "$stubFrom" "$out/logs/$variant-$program.log" && "$work/prebuilt/stubstrip" check "$o" >/dev/null 2>&1 &&
        ! nix-store -qR "$(rdrv "$variant.$program")" 2>/dev/null | grep -qxF "$nixpkgsHookDrv"; then
        pass "real-cuda: $variant, $program: builds with its installCheck in the sandbox (the stub answers: $stubFrom); RUNPATH $rp; stubstrip check passes; nixpkgs' hook not in the build's closure"
      else
        fail "real-cuda: $variant, $program" "RUNPATH '$rp'; $(grep -m3 'installCheck\|rror' "$out/logs/$variant-$program.log")"
      fi
    done
  done

  # The runtime closures: sizes, and where NVIDIA's stub is in them. No ELF file of ours'
  # closure has a stub directory in RUNPATH; a copy of the stub may only sit in
  # nix-support/stubstrip-check-libs (for the checks of packages built on top; no loader looks
  # there at run time).
  local closureList closureLines="" size n f stubs bad
  : >"$out/closures.txt"
  for variant in nohook nixpkgsNoCheck ours oursNoPropagate; do
    for program in driver-api runtime-api; do
      o=${built[$variant.$program]-}
      [[ -n $o ]] || continue
      closureList=$(nix-store -qR "$o")
      n=$(wc -l <<<"$closureList")
      size=$(xargs nix-store -q --size <<<"$closureList" | awk '{ s += $1 } END { print s }')
      stubs=$(while IFS= read -r p; do find -L "$p" -type f -name 'libcuda.so*' 2>/dev/null; done <<<"$closureList" |
        while IFS= read -r f; do [[ $(textSum "$f") == "$stubSum" ]] && echo "${f#/nix/store/}"; done | sort -u | tr '\n' ' ')
      bad=$(while IFS= read -r p; do find "$p" -type f 2>/dev/null; done <<<"$closureList" | while IFS= read -r f; do
        rp=$(runpathOf "$f")
        [[ $rp == *stubs* ]] && echo "$f"
      done | head -3)
      echo "$variant $(basename "$o"): $n store paths, $size bytes; NVIDIA's stub at: ${stubs:-nowhere}; stub RUNPATH entries in: ${bad:-none}" |
        tee -a "$out/closures.txt" | sed 's/^/     closure: /'
      # Allowed for ours: cuda_cudart's own lib/stubs (single-output in nixpkgs: a program
      # using libcudart references the package that holds the stub) and, unless the derivation
      # opts out, the check-library copy for the checks of packages built on top of it.
      if [[ $variant == ours* ]]; then
        local allowed='-cuda_cudart-[0-9.]*/lib/stubs/'
        [[ $variant == ours ]] && allowed+='|/nix-support/stubstrip-check-libs/'
        if [[ -z $bad ]] && ! tr ' ' '\n' <<<"$stubs" | grep -v '^$' | grep -qvE -- "$allowed"; then
          pass "real-cuda: $variant, $program: no ELF file of the runtime closure has a stub directory in RUNPATH; NVIDIA's stub only at: ${stubs:-nowhere}"
        else
          fail "real-cuda: $variant, $program: the runtime closure" "$bad $stubs"
        fi
      fi
      closureLines+="$variant $program $o"$'\n'
    done
  done

  # The bundle for the GPU machine: every runtime closure (one tar of the store paths), the
  # programs to run, and the script that runs them (tests/gpu/real-cuda.sh).
  printf '%s' "$closureLines" >"$out/bundle/programs.txt"
  mapfile -t all < <(cut -d' ' -f3 "$out/bundle/programs.txt" | xargs nix-store -qR | sort -u)
  tar -C / -cJf "$out/bundle/closure.tar.xz" "${all[@]#/}"
  cp "$repo/tests/gpu/real-cuda.sh" "$out/bundle/"
  echo "     bundle for the GPU: $out/bundle ($(du -sh "$out/bundle" | cut -f1), ${#all[@]} store paths)"
}
