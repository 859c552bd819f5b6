#!/usr/bin/env bash
# Builds kiln's libFuzzer harnesses (tests/fuzz/, clang with ASan and UBSan,
# in build/fuzz) and runs each named target (all by default):
#   1. replays its corpus, tests/fuzz/corpus/<target>/ (every input once);
#   2. fuzzes it for --seconds (default 600; the CI run uses a few), keeping
#      new inputs in build/fuzz/corpus/<target>/ and any input that fails in
#      build/fuzz/crashes/ (replay one: build/fuzz/tests/fuzz/fuzz_<target> FILE);
#   3. with --merge, adds the new inputs that reach new code to the corpus in
#      the repository (to be committed).
# --replay stops after step 1. --jobs N runs N targets at once (default 1;
# each takes about one core, compiling kernels for its inputs), printing each
# target's lines when all are done, in order. Exits non-zero if any target
# failed.
#
#   tools/fuzz.sh                       # every target, ten minutes each
#   tools/fuzz.sh --seconds 3600 conv   # one target for an hour
#   tools/fuzz.sh --jobs 2 --seconds 10 # every target, two at a time
set -Eeuo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
root=$PWD

seconds=600
replay_only=0
merge=0
jobs=1
targets=()
while (($#)); do
    case $1 in
    --seconds) seconds=$2 && shift ;;
    --replay) replay_only=1 ;;
    --merge) merge=1 ;;
    --jobs) jobs=$2 && shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2 && exit 2 ;;
    *) targets+=("$1") ;;
    esac
    shift
done
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: --jobs $jobs is not a positive count" >&2
    exit 2
fi
if ((${#targets[@]} == 0)); then
    for f in tests/fuzz/fuzz_*.c; do
        t=${f##*/fuzz_}
        t=${t%.c}
        [[ $t == util ]] || targets+=("$t")
    done
fi

if ! command -v clang >/dev/null 2>&1; then
    echo "fuzz.sh: clang is needed (tools/install-deps.sh installs it)" >&2
    exit 1
fi
CC=clang cmake -S . -B build/fuzz -DKILN_FUZZ=ON -DKILN_BUILD_TOOLS=OFF -DKILN_WERROR=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j"$(nproc)" --target kiln_fuzzers >/dev/null

# Programs compiled on disk between runs; leaks inside POCL and LLVM are
# theirs (tools/lsan.supp); a harness that allocates more than POCL's
# compiler needs is a finding.
export KILN_CACHE_DIR=$root/build/fuzz/cache
export POCL_WORK_GROUP_SPECIALIZATION=0
# intercept_tls_get_addr=0: as in tools/test.sh, the dynamic TLS of POCL's
# kernel compiler is recorded with a bogus range, and the leak check at exit
# can crash scanning it ("Tracer caught signal 11").
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0
export LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
options=(-rss_limit_mb=4096 -max_len=256 -len_control=0 -timeout=120 -print_final_stats=0)

# run_target <target>: replays, fuzzes and (--merge) merges one target,
# printing PASS or FAIL lines; non-zero if it failed.
run_target() {
    local t=$1 bin corpus log start inputs runs
    bin=build/fuzz/tests/fuzz/fuzz_$t
    corpus=tests/fuzz/corpus/$t
    if [[ ! -x $bin ]]; then
        echo "FAIL: fuzz $t: no harness (tests/fuzz/fuzz_$t.c)" >&2
        return 1
    fi
    mkdir -p "$corpus" "build/fuzz/corpus/$t" build/fuzz/crashes
    log=build/fuzz/$t.log
    start=$SECONDS
    if ! "$bin" "${options[@]}" -runs=0 -artifact_prefix="build/fuzz/crashes/$t-" "$corpus" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "FAIL: fuzz $t: an input of $corpus fails (log: $log)" >&2
        return 1
    fi
    inputs=$(find "$corpus" -type f | wc -l)
    if ((replay_only)); then
        echo "PASS: fuzz $t: $inputs corpus inputs replayed in $((SECONDS - start)) s"
        return 0
    fi
    if ! "$bin" "${options[@]}" -max_total_time="$seconds" -artifact_prefix="build/fuzz/crashes/$t-" \
        "build/fuzz/corpus/$t" "$corpus" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "FAIL: fuzz $t (log: $log; the failing input is in build/fuzz/crashes/)" >&2
        return 1
    fi
    runs=$(grep -Eo '^Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' || echo "?")
    echo "PASS: fuzz $t: $inputs corpus inputs replayed, $runs runs in $((SECONDS - start)) s"
    if ((merge)); then
        "$bin" "${options[@]}" -merge=1 "$corpus" "build/fuzz/corpus/$t" >>"$log" 2>&1
        echo "fuzz.sh: $corpus now holds $(find "$corpus" -type f | wc -l) inputs"
    fi
}

failed=0
if ((jobs == 1)); then
    for t in "${targets[@]}"; do
        run_target "$t" || failed=$((failed + 1))
    done
    exit $((failed > 0))
fi
# The targets, `jobs` at a time, each one's lines in build/fuzz/<target>.out
# and its status in build/fuzz/<target>.status, printed in order at the end.
running=0
for t in "${targets[@]}"; do
    if ((running == jobs)); then
        wait -n || true
        running=$((running - 1))
    fi
    (
        rc=0
        run_target "$t" >"build/fuzz/$t.out" 2>&1 || rc=$?
        echo "$rc" >"build/fuzz/$t.status"
    ) &
    running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
    cat "build/fuzz/$t.out"
    [[ $(cat "build/fuzz/$t.status" 2>/dev/null) == 0 ]] || failed=$((failed + 1))
done
exit $((failed > 0))
