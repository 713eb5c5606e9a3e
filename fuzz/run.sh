#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 60) and prints how many inputs each executed.
#
#   fuzz/run.sh [SECONDS]            parse and plan_apply, one after the other
#   TARGETS="plan_apply" fuzz/run.sh 600
#   SANITIZER=none fuzz/run.sh 60    without AddressSanitizer (faster)
#   KEEP_GOING=1 fuzz/run.sh 3600    fork mode: record crashes in fuzz/artifacts/ and go on
#   FUZZ_SEED=1 FUZZ_RUNS=20000 fuzz/run.sh 300
#                                    libFuzzer's seed fixed, at most 20000 inputs per target: with a
#                                    fresh corpus from make_corpus.sh (byte-identical wherever the compilers are), the same inputs on every
#                                    run (the seconds stay a cap)
#
# Stable toolchain only: cargo-fuzz needs nightly's -Z flags (-Zsanitizer, and it passes
# -Cpasses=sancov-module), which RUSTC_BOOTSTRAP=1 unlocks on stable; the stable toolchain ships
# the ASan runtime, so the default sanitizer works. Builds with -a (debug assertions and overflow
# checks). Installs cargo-fuzz (into ~/.cargo/bin) when missing and generates the seed corpus
# (make_corpus.sh) when fuzz/corpus is absent. Exit status: 0 when no target found anything,
# 1 when one crashed (the input is in fuzz/artifacts/TARGET/; replay it with
# `cargo run --example replay -- FILE` and add it to crates/elfpatch-check/regressions/ once fixed), 2 on setup errors.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 2
seconds=${1:-60}
read -r -a targets <<<"${TARGETS:-parse plan_apply}"
sanitizer=${SANITIZER:-address}
export RUSTC_BOOTSTRAP=1 CARGO_TERM_COLOR=never
export PATH="$HOME/.cargo/bin:$PATH"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "run.sh: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked >&2 || { echo "run.sh: cannot install cargo-fuzz" >&2; exit 2; }
fi
if [[ ! -d corpus/plan_apply || ! -d corpus/parse ]]; then
  ./make_corpus.sh >&2 || { echo "run.sh: cannot build the seed corpus" >&2; exit 2; }
fi
build=(-a -s "$sanitizer")
if ! cargo fuzz build "${build[@]}" >&2; then
  if [[ $sanitizer != none ]]; then
    echo "run.sh: the $sanitizer build failed; falling back to -s none" >&2
    build=(-a -s none)
    cargo fuzz build "${build[@]}" >&2 || exit 2
  else
    exit 2
  fi
fi

status=0
summary=()
for t in "${targets[@]}"; do
  log=$(mktemp)
  dirs=("corpus/$t")
  reg=../crates/elfpatch-check/regressions/$t
  [[ -d $reg ]] && dirs+=("$reg")
  mkdir -p "artifacts/$t"
  echo "run.sh: fuzzing $t for ${seconds}s" >&2
  extra=()
  [[ -n ${KEEP_GOING:-} ]] && extra=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  [[ -n ${FUZZ_SEED:-} ]] && extra+=(-seed="$FUZZ_SEED")
  [[ -n ${FUZZ_RUNS:-} ]] && extra+=(-runs="$FUZZ_RUNS")
  cargo fuzz run "${build[@]}" "$t" "${dirs[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -print_final_stats=1 -close_fd_mask=1 "${extra[@]}" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  [[ -n $execs ]] || execs=$(grep -o '^#[0-9]* *DONE' "$log" | grep -o '[0-9]*' | tail -1)
  [[ -n $execs ]] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  corpus=$(find "corpus/$t" -type f | wc -l)
  line="$t: ${execs:-0} executions (seed ${FUZZ_SEED:-random}) in at most ${seconds}s, coverage ${cov:-?} edges, corpus $corpus files"
  if ((rc != 0)); then
    status=1
    line+=", FAILED (exit $rc)"
    grep -E 'panicked|property violated|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -20 >&2
  fi
  summary+=("$line")
  if [[ -n ${KEEP_GOING:-} ]]; then
    crashes=$(find "artifacts/$t" -type f | wc -l)
    summary[-1]+=", $crashes artifacts"
    ((crashes == 0)) || status=1
  fi
  [[ -n ${FUZZ_LOG_DIR:-} ]] && cp "$log" "$FUZZ_LOG_DIR/$t.log"
  rm -f "$log"
done
printf 'fuzz: %s\n' "${summary[@]}"
exit $status
