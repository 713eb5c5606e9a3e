#!/usr/bin/env bash
# tests/patchelf-suite/exceptions.sh
#
# The properties behind the four patchelf tests that elfpatch does not pass because they check
# patchelf's own layout (README.md, "The four exceptions"), tested by running the edited programs:
#
#   shared-rpath            a run path whose string is shared with a symbol name is replaced,
#                           longer and shorter, and the symbol still resolves by name
#   executable-page-growth  a non-PIE program takes an 800-byte run path, finds its library
#                           through it, and maps at most a few more pages
#   strip-gap-rewrite       edit, strip, edit again (patchelf #593): still runs, for several
#                           page sizes, programs and a library, GNU strip and eu-strip, over
#                           three rounds
#   verdef-relocate         after an edit that grows .dynstr, DT_VERDEF still names
#                           .gnu.version_d and the loader's version checks pass
#
# Each property is built with five toolchains (gcc with GNU ld, gcc -m32, gold, lld, mold) and runs
# with elfpatch (installed as `patchelf`) and, beside it, with the reference patchelf 0.19.3
# (PATCHELF_REF, else `patchelf` on PATH if it is 0.19.3). Prints one line per property and
# toolchain and `N passed, M failed` (elfpatch's); exits non-zero if one fails with elfpatch. A
# property whose precondition a toolchain does not meet (lld and mold do not share the run path's
# string with a symbol) prints N/A and is not counted.
# Environment: ELFPATCH (else `cargo build --release -p elfpatch`), PATCHELF_REF, KEEP=1.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

die() {
  echo "exceptions.sh: $*" >&2
  exit 2
}

for tool in gcc strip eu-strip readelf nm eu-elflint; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
# shellcheck source=tests/lib/elfpatch-bin.sh
. "$ROOT/tests/lib/elfpatch-bin.sh"
find_elfpatch "$ROOT"
REF=${PATCHELF_REF:-$(command -v patchelf)}
[[ -n $REF && $("$REF" --version 2>/dev/null) == "patchelf 0.19.3" ]] || {
  echo "exceptions.sh: no patchelf 0.19.3 (PATCHELF_REF); the reference column is left out" >&2
  REF=
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/stubstrip-exceptions.XXXXXX") || die "mktemp failed"
cleanup() {
  if [[ -n ${KEEP-} ]]; then echo "exceptions.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Each tool under the name `patchelf` (a copy: elfpatch's behaviour may follow argv[0]).
mkdir -p "$WORK/bin-elfpatch" "$WORK/bin-patchelf"
cp "$BIN" "$WORK/bin-elfpatch/patchelf"
[[ -z $REF ]] || cp "$REF" "$WORK/bin-patchelf/patchelf"

######################################################################
# Fixture sources (built per property, in the property's directory).

cat >"$WORK/libprop.c" <<'EOF'
int prop_value(void) { return 40; }
EOF
cat >"$WORK/prog.c" <<'EOF'
int prop_value(void);
int main(void) { return prop_value() + 2; }
EOF

# must CMD...: runs CMD; on failure says which command failed (the property's log shows it).
must() {
  local status=0 cmd
  "$@" || status=$?
  ((status != 0)) || return 0
  cmd="$*"
  ((${#cmd} <= 160)) || cmd="${cmd:0:160}..."
  echo "failed (exit $status): $cmd" >&2
  return 1
}
# runs_with STATUS CMD...: CMD exits with STATUS.
runs_with() {
  local want=$1 status=0
  shift
  "$@" || status=$?
  [[ $status == "$want" ]] || {
    echo "$* exited $status, want $want" >&2
    return 1
  }
}
# rpath_of FILE: the DT_RUNPATH or DT_RPATH string.
rpath_of() { readelf -dW "$1" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p'; }
# long_dir BASE N: makes and prints a directory BASE/ddd.../ddd... at least N bytes long.
long_dir() {
  local dir=$1 part
  part=$(printf '%0200d' 0 | tr 0 d)
  while ((${#dir} < $2)); do dir=$dir/$part; done
  mkdir -p "$dir" && echo "$dir"
}
# misses N: a colon-separated list of N nonexistent 100-byte directories (ends with a colon).
misses() {
  local i
  for ((i = 0; i < $1; i++)); do printf '/nonexistent-%087d:' "$i"; done
}
# cc ARGS...: gcc with the variant's flags (VARIANT_FLAGS, a string of words: -m32, -fuse-ld=lld).
cc() {
  # shellcheck disable=SC2086 # VARIANT_FLAGS is a list of words
  gcc ${VARIANT_FLAGS-} "$@"
}
# elflint_like FILE ORIG: eu-elflint finds nothing in FILE, if it found nothing in ORIG. With
# STRICT_ELFLINT unset (the reference tool) the messages are only counted in the log: the property
# is about the program, and a patchelf verdict should not hide which part failed.
elflint_like() {
  eu-elflint --gnu-ld "$2" >/dev/null 2>&1 || return 0
  local out
  out=$(eu-elflint --gnu-ld "$1" 2>&1) && return 0
  echo "$out" >&2
  echo "eu-elflint: $(grep -c . <<<"$out") messages on ${1##*/}" >&2
  [[ -z ${STRICT_ELFLINT-} ]]
}

######################################################################
# The properties. Each runs in its own directory with PE (the tool under test) set.

# shared-rpath: DT_RPATH "shared_tail_name" is stored once in .dynstr, shared with the symbol.
prop_shared_rpath() {
  cat >shared.c <<'EOF'
int shared_tail_name = 5;
int shared_get(void) { return shared_tail_name * 8; }
EOF
  cat >useshared.c <<'EOF'
extern int shared_tail_name;
int shared_get(void);
int main(void) { shared_tail_name += 1; return shared_get() + 2 * shared_tail_name; } /* 60 */
EOF
  must cc -fPIC -shared -Wl,--disable-new-dtags -Wl,-rpath=shared_tail_name -o libshared.so shared.c &&
    must cc -o useshared useshared.c -L. -lshared || return 1
  # The precondition: one copy of the string, serving both the run path and the symbol.
  local copies
  copies=$(readelf -p .dynstr libshared.so | grep -c 'shared_tail_name$')
  # lld and mold store the run path and the name apart: the property has nothing to act on (77).
  [[ $copies == 1 ]] || {
    echo "precondition: .dynstr holds $copies copies of shared_tail_name" >&2
    [[ -z ${VARIANT_FLAGS-} ]] && return 1
    return 77
  }
  local rpath out
  for rpath in a_much_longer_run_path_than_the_symbol_name_it_shared short; do
    out=lib-$rpath
    mkdir -p "$out" && must "$PE" --set-rpath "$rpath" --output "$out/libshared.so" libshared.so || return 1
    [[ $(rpath_of "$out/libshared.so") == "$rpath" ]] || {
      echo "$out: run path reads '$(rpath_of "$out/libshared.so")'" >&2
      return 1
    }
    must nm -D "$out/libshared.so" | grep -q ' shared_tail_name$' || return 1
    # The loader finds shared_tail_name by name (copy relocation) and shared_get: 48 + 12.
    runs_with 60 env LD_BIND_NOW=1 LD_LIBRARY_PATH="$PWD/$out" ./useshared || return 1
    elflint_like "$out/libshared.so" libshared.so || return 1
  done
  # Edited again, now that the run path has its own string.
  must "$PE" --set-rpath "an_even_longer_run_path_on_the_second_edit_of_the_same_library" \
    lib-a_much_longer_run_path_than_the_symbol_name_it_shared/libshared.so &&
    runs_with 60 env LD_BIND_NOW=1 LD_LIBRARY_PATH="$PWD/lib-a_much_longer_run_path_than_the_symbol_name_it_shared" \
      ./useshared
}

# mapped_pages FILE: the 4 KiB pages the PT_LOAD segments span, summed.
mapped_pages() {
  local type va msz pages=0
  while read -r type _ va _ _ msz _; do
    [[ $type == LOAD ]] || continue
    pages=$((pages + (va + msz + 4095) / 4096 - va / 4096))
  done < <(readelf -lW "$1")
  echo "$pages"
}

# executable-page-growth: an 800-byte run path on a non-PIE program.
prop_page_growth() {
  local dir before after
  dir=$(long_dir "$PWD/libs" 800) &&
    must cc -fPIC -shared -o "$dir/libprop.so" "$WORK/libprop.c" &&
    must cc -fno-pie -no-pie -o prog "$WORK/prog.c" -L"$dir" -lprop || return 1
  cp prog prog.orig
  before=$(mapped_pages prog)
  must "$PE" --set-rpath "$dir" prog || return 1
  after=$(mapped_pages prog)
  # The loader reads the new run path: no LD_LIBRARY_PATH, the library is only there.
  runs_with 42 env -u LD_LIBRARY_PATH ./prog || return 1
  # 800 bytes of .dynstr and a moved .dynamic need one new page; allow a second for alignment.
  ((after - before <= 2)) || {
    echo "mapped pages grew from $before to $after" >&2
    return 1
  }
  echo "mapped pages: $before -> $after" >&2
  elflint_like prog prog.orig
}

# strip_rounds DIR KIND PAGESIZE STRIPPER: three rounds of edit, run, strip, run on one copy.
strip_rounds() {
  local dir=$1 kind=$2 pagesize=$3 stripper=$4 round extra rpath
  local work=$PWD/$kind-$pagesize-$stripper
  mkdir -p "$work/lib"
  cp prog-"${kind/lib/pie}" "$work/prog"
  cp libprop.so "$work/lib/libprop.so"
  # The program finds the library through its own run path (the directory of 400 bytes), or, when
  # the library is the one edited, through a plain one to $work/lib.
  local target=$work/prog libdir=$dir
  if [[ $kind == lib ]]; then
    target=$work/lib/libprop.so libdir=$work/lib
    must "$PE" --set-rpath "$libdir" "$work/prog" || return 1
  else
    cp libprop.so "$dir/libprop.so"
  fi
  for round in 1 2 3; do
    # Each round a longer run path: nonexistent entries (a page or more of them on the last
    # rounds), then the directory that holds the library.
    extra=$((round == 1 ? 8 : round == 2 ? 16 : 40))
    [[ $round != 3 || $pagesize != 65536 ]] || extra=160
    rpath=$(misses "$extra")$libdir
    local opts=()
    [[ $pagesize == default || $round != 1 ]] || opts=(--page-size "$pagesize")
    must "$PE" "${opts[@]}" --set-rpath "$rpath" "$target" || return 1
    runs_with 42 env -u LD_LIBRARY_PATH "$work/prog" || {
      echo "round $round: the edited program fails" >&2
      return 1
    }
    must "$stripper" "$target" || return 1
    runs_with 42 env -u LD_LIBRARY_PATH "$work/prog" || {
      echo "round $round: the program fails after $stripper" >&2
      return 1
    }
  done
}

# strip-gap-rewrite: edit, strip, edit again (three rounds), for a non-PIE program with a run
# path, a PIE program and the library, with the default page size and --page-size 8192 / 65536 on
# the first edit, stripped by GNU strip and by elfutils' eu-strip. Every combination runs; the
# failing ones are listed.
prop_strip_gap() {
  local dir pagesize kind stripper failures=0
  dir=$(long_dir "$PWD/libs" 400) &&
    must cc -fPIC -shared -o libprop.so "$WORK/libprop.c" &&
    must cc -fno-pie -no-pie -Wl,-rpath,/nonexistent -o prog-nopie "$WORK/prog.c" -L. -lprop &&
    must cc -fPIE -pie -o prog-pie "$WORK/prog.c" -L. -lprop || return 1
  for stripper in strip eu-strip; do
    for pagesize in default 8192 65536; do
      for kind in nopie pie lib; do
        strip_rounds "$dir" "$kind" "$pagesize" "$stripper" 2>"$kind-$pagesize-$stripper.err" || {
          echo "FAILED: $kind, page size $pagesize, $stripper: $(tail -1 "$kind-$pagesize-$stripper.err")" >&2
          ((failures++))
        }
      done
    done
  done
  echo "combinations failed: $failures of 18" >&2
  ((failures == 0))
}

# verdef_tag FILE / verdef_addr FILE: DT_VERDEF's value / .gnu.version_d's address, as numbers.
verdef_tag() { printf '%d' "$(readelf -dW "$1" | awk '$2 == "(VERDEF)" { print $3 }')"; }
verdef_addr() {
  printf '%d' "0x$(readelf -SW "$1" | sed 's/^ *\[ *[0-9]*\]//' | awk '$1 == ".gnu.version_d" { print $3 }')"
}

# verdef-relocate: a library and a program that define versions, edited with a run path long
# enough to move .dynstr; the consumer's version requirement is checked by the loader.
prop_verdef() {
  cat >ver.c <<'EOF'
int ver_value(void) { return 40; }
EOF
  cat >ver.map <<'EOF'
VERS_1.0 { global: ver_value; local: *; };
EOF
  cat >usever.c <<'EOF'
int ver_value(void);
int main(void) { return ver_value() + 2; }
EOF
  cat >vexe.map <<'EOF'
PROG_1.0 { global: prog_api; local: *; };
EOF
  cat >vexe.c <<'EOF'
int prog_api(void) { return 42; }
int main(void) { return prog_api(); }
EOF
  local long f
  long=$(printf '%0300d' 0 | tr 0 r)
  must cc -fPIC -shared -Wl,--version-script=ver.map -o libver.so ver.c &&
    must cc -o usever usever.c -L. -lver &&
    must cc -fno-pie -no-pie -rdynamic -Wl,--version-script=vexe.map -o vexe vexe.c || return 1
  # The preconditions: the consumer requires VERS_1.0, and both objects define versions.
  if ! readelf -V usever | grep -q 'Name: VERS_1.0' || ! readelf -SW libver.so | grep -q '[.]gnu[.]version_d' ||
    ! readelf -SW vexe | grep -q '[.]gnu[.]version_d'; then
    echo "precondition: no VERS_1.0 requirement or no .gnu.version_d" >&2
    return 1
  fi
  for f in libver.so vexe; do
    cp "$f" "$f.orig"
    must "$PE" --set-rpath "/lib/$long" "$f" || return 1
    [[ $(verdef_tag "$f") == "$(verdef_addr "$f")" && $(verdef_tag "$f") != 0 ]] || {
      echo "$f: DT_VERDEF $(verdef_tag "$f"), .gnu.version_d at $(verdef_addr "$f")" >&2
      return 1
    }
    elflint_like "$f" "$f.orig" || return 1
  done
  # glibc checks usever's VERS_1.0 requirement against libver's verdef chain at load time.
  runs_with 42 env LD_BIND_NOW=1 LD_LIBRARY_PATH="$PWD" ./usever &&
    runs_with 42 ./vexe
}

######################################################################

declare -A props=(
  [shared-rpath]=prop_shared_rpath
  [executable-page-growth]=prop_page_growth
  [strip-gap-rewrite]=prop_strip_gap
  [verdef-relocate]=prop_verdef
)
# The toolchains each property is built with: GNU ld, 32-bit x86, gold, lld, mold.
declare -A variants=([gcc]="" [m32]="-m32" [gold]="-fuse-ld=gold" [lld]="-fuse-ld=lld" [mold]="-fuse-ld=mold")
variantOrder=(gcc m32 gold lld mold)

printf 'int main(void) { return 0; }\n' >"$WORK/probe.c"
passed=0 failed=0 notHere=() notApplicable=()
for name in shared-rpath executable-page-growth strip-gap-rewrite verdef-relocate; do
  for variant in "${variantOrder[@]}"; do
    flags=${variants[$variant]}
    # shellcheck disable=SC2086 # flags is a list of words
    if ! gcc $flags -o "$WORK/probe" "$WORK/probe.c" 2>/dev/null || ! "$WORK/probe"; then
      # Under run-all.sh (STUBSTRIP_REQUIRE_TOOLS=1) every toolchain must be there.
      if [[ $variant == gcc || ${STUBSTRIP_REQUIRE_TOOLS-} == 1 ]]; then
        printf '%-5s %-40s cannot build and run with gcc %s\n' FAIL "$name ($variant)" "$flags"
        ((failed++))
      else
        notHere+=("$variant")
      fi
      continue
    fi
    declare -A verdict=()
    for tool in elfpatch patchelf; do
      if [[ $tool == patchelf && -z $REF ]]; then
        verdict[$tool]=n/a
        continue
      fi
      strict=
      [[ $tool == patchelf ]] || strict=1
      dir=$WORK/$tool/$name-$variant
      mkdir -p "$dir"
      status=0
      (cd "$dir" && PE=$WORK/bin-$tool/patchelf STRICT_ELFLINT=$strict VARIANT_FLAGS=$flags "${props[$name]}") \
        >"$dir.log" 2>&1 || status=$?
      case $status in
      0) verdict[$tool]=PASS ;;
      77) verdict[$tool]=N/A ;;
      *) verdict[$tool]=FAIL ;;
      esac
      # The reference's eu-elflint messages, which do not decide its verdict.
      [[ $tool == elfpatch ]] || ! grep -q '^eu-elflint: ' "$dir.log" ||
        verdict[$tool]+=" (eu-elflint: $(grep -c '^eu-elflint: ' "$dir.log") files with messages)"
    done
    printf '%-5s %-40s patchelf: %s\n' "${verdict[elfpatch]}" "$name ($variant)" "${verdict[patchelf]}"
    for tool in elfpatch patchelf; do
      [[ ${verdict[$tool]} != FAIL* ]] || grep -v '^eu-elflint: ' "$WORK/$tool/$name-$variant.log" |
        grep '^FAILED: \|^combinations' | sed "s/^/      [$tool] /" | tail -19 | grep . ||
        sed "s/^/      [$tool] /" "$WORK/$tool/$name-$variant.log" | tail -8
    done
    case ${verdict[elfpatch]} in
    PASS*) ((passed++)) ;;
    N/A) notApplicable+=("$name ($variant)") ;;
    *) ((failed++)) ;;
    esac
  done
done
((${#notHere[@]} == 0)) || echo "not on this machine, left out: $(printf '%s\n' "${notHere[@]}" | sort -u | xargs)"
((${#notApplicable[@]} == 0)) || echo "precondition not met, nothing to test: ${notApplicable[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
