# shellcheck shell=bash
# What tests/nix/consumers.sh (mock) and tests/nixpkgs/consumers.sh (real nixpkgs) check the same
# way: the consumers of a fixed package. The caller defines pass and fail.

# closureFigure LABEL B BOPT CHECKHOOK BLOG: prints the closure figure of B against BOPT (the same
# package built with dontStubstripPropagateCheckFallback): the store paths B references beyond
# BOPT's, the size of B's output and of its closure (nix-store -q --references, --requisites,
# --size). Succeeds when those references are exactly CHECKHOOK and the store paths that B's build
# log BLOG says a copied stub names (Nix's own scan must agree with stubstrip's report).
closureFigure() {
  local label=$1 b=$2 bOpt=$3 checkHook=$4 blog=$5 gained named expected
  local sizeB sizeOpt closB closOpt nB nOpt
  gained=$(comm -13 <(nix-store -q --references "$bOpt" | grep -vxF "$bOpt" | sort) \
    <(nix-store -q --references "$b" | grep -vxF "$b" | sort))
  named=$(sed -n 's/.*libcuda.so.1 (a copy of [^,]*, which names \(.*\)).*/\1/p' <<<"$blog" | tr ' ' '\n')
  expected=$(printf '%s\n' "$checkHook" ${named:+"$named"} | sort -u)
  sizeB=$(nix-store -q --size "$b") sizeOpt=$(nix-store -q --size "$bOpt")
  closB=$(nix-store -q --requisites "$b" | xargs nix-store -q --size | awk '{s += $1} END {print s}')
  closOpt=$(nix-store -q --requisites "$bOpt" | xargs nix-store -q --size | awk '{s += $1} END {print s}')
  nB=$(nix-store -q --requisites "$b" | wc -l) nOpt=$(nix-store -q --requisites "$bOpt" | wc -l)
  echo "     closure of B ($label): references +[${gained//$'\n'/ }]; B's output $sizeOpt -> $sizeB bytes" \
    "(+$((sizeB - sizeOpt))); closure $nOpt -> $nB store paths, $closOpt -> $closB bytes (+$((closB - closOpt)))"
  [[ $gained == "$expected" ]] && ! nix-store -q --requisites "$b" | grep -qE -- '-stubs$'
}

# notAtRunTime EXE: outside the build, where this machine has no driver, EXE does not find
# libcuda.so.1 (nothing of the check libraries reaches run time). Skipped, with a line, on a
# machine that has one at the driver link.
notAtRunTime() {
  local out
  if [[ -e /run/opengl-driver/lib/libcuda.so.1 ]]; then
    echo "SKIP consumers: this machine has a driver at /run/opengl-driver/lib: the run-time check needs none"
  elif out=$(env -i "$1" 2>&1); then
    fail "consumers: outside the build, without a driver, D does not load" "it ran: $out"
  elif [[ $out == *"libcuda.so.1: cannot open shared object file"* ]]; then
    pass "consumers: outside the build, without a driver, D does not find libcuda.so.1"
  else
    fail "consumers: outside the build, without a driver, D does not load" "$out"
  fi
}
