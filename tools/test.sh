#!/usr/bin/env bash
# Installs what is missing, then builds and checks everything:
#   1. the test suite with warnings as errors (build/ci), its operator tests
#      again choosing kernels as the CUDA backend does, and some again on
#      POCL's workers and three of kiln's threads (KILN_CPU_THREADS=pocl,
#      kiln:3);
#   2. the GPU kernels under Oclgrind's race and bounds checks
#      (tools/oclgrind.sh), the CPU kernels' compiled inner loops
#      (tools/hot-loops.py), then the test suite under AddressSanitizer and
#      UBSan (build/asan);
#   3. the tests that run kiln from several threads under ThreadSanitizer
#      (build/tsan);
#   4. each libFuzzer harness (tests/fuzz/, build/fuzz): its corpus replayed,
#      then fuzzed for a few seconds (tools/fuzz.sh fuzzes for longer);
#   5. the installed package, used from CMake (shared and static) and from
#      pkg-config by examples/hello.c (build/stage, build/examples*);
#   6. cppcheck on src/;
#   7. the formatting of every C file (.clang-format) outside cl/.
# Ends with "N passed, M failed" (tests and example checks); exits non-zero if
# anything failed.
set -Eeuo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
root=$PWD
trap 'echo "test.sh: failed: $BASH_COMMAND" >&2' ERR

passed=0
failed=0

# Each section's header gives the minutes since the start, so that a slow
# run shows where its time went (the aim is under 30 minutes in all).
section() { printf '\n=== %s (at %d:%02d)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

# build <dir> <cmake options...>: configure and build the library and tests.
build() {
    local dir=$1
    shift
    cmake -S . -B "$dir" "$@"
    cmake --build "$dir" -j"$(nproc)"
}

# suite <build dir> [VAR=value...] [-- ctest options...]: runs ctest there
# and adds its counts.
suite() {
    local dir=$1
    shift
    local vars=()
    while (($#)) && [[ $1 != -- ]]; do
        vars+=("$1")
        shift
    done
    if (($#)); then
        shift
    fi
    local log=$dir/ctest.log rc=0
    env "${vars[@]}" ctest --test-dir "$dir" --output-on-failure --no-tests=error -j2 "$@" 2>&1 | tee "$log" || rc=$?
    local summary
    summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
    if [[ -z $summary ]]; then
        echo "test.sh: ctest in $dir gave no summary" >&2
        failed=$((failed + 1))
        return
    fi
    local nfailed total
    nfailed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$summary")
    total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$summary")
    passed=$((passed + total - nfailed))
    failed=$((failed + nfailed))
    if [[ $rc -ne 0 && $nfailed -eq 0 ]]; then
        echo "test.sh: ctest in $dir exited with $rc" >&2
        failed=$((failed + 1))
    fi
}

# check <name> <command...>: one counted check.
check() {
    local name=$1
    shift
    if "$@"; then
        echo "PASS: $name"
        passed=$((passed + 1))
    else
        echo "FAIL: $name" >&2
        failed=$((failed + 1))
    fi
}

example_cmake() {
    cmake -S examples -B build/examples -DCMAKE_PREFIX_PATH="$root/build/stage" -DCMAKE_C_FLAGS=-Werror &&
        cmake --build build/examples -j"$(nproc)"
}

example_pkgconfig() {
    mkdir -p build/examples-pkgconfig &&
        PKG_CONFIG_PATH="$root/build/stage/lib/pkgconfig" make -C examples O="$root/build/examples-pkgconfig" \
            CFLAGS="-O2 -Wall -Wextra -Werror" &&
        build/examples-pkgconfig/hello
}

tools/install-deps.sh

section "build and test (build/ci)"
build build/ci -DKILN_WERROR=ON
suite build/ci

section "the CUDA backend's kernel choices on the OpenCL device (build/ci)"
# KILN_CUDA_ROUTES=1 makes the operators choose as on the CUDA backend (the
# kernels shared through cl/common/portability.h, nothing in OpenCL's vector
# syntax): those choices run and are checked here, and test_cuda compiles
# their programs with NVRTC.
suite build/ci KILN_CUDA_ROUTES=1 -- \
    -R '^test_(attention|buffer|gemm|gemm_conformance|nn_ops|conv_conformance|conv_desc|conv_epilogue|conv_plans|params|peaks|threads)$'

section "POCL's workers, then three of kiln's threads (build/ci)"
# The suite above ran on kiln's threads, one a core (the default on POCL's
# CPU device): here the chained network, the element-wise operators and the
# program cache run on POCL's workers (KILN_CPU_THREADS=pocl, POCL_DEVICES
# left alone), then the first two with launches split over three of kiln's
# threads on two cores (three split the launches that run on kiln's
# threads alone two ways, and so offset group ids too).
suite build/ci KILN_CPU_THREADS=pocl -- -R '^test_(network|nn_ops|program_cache)$'
suite build/ci KILN_CPU_THREADS=kiln:3 -- -R '^test_(network|nn_ops)$'

section "work-group kernels under Oclgrind (build/ci)"
# The GPU kernels with the GPU profiles' parameters on Oclgrind's simulated
# device, which reports data races between work-items (a missing barrier)
# and accesses out of bounds: what the POCL CPU device cannot show.
check "GPU kernels: no data race, no access out of bounds" tools/oclgrind.sh build/ci

section "the CPU kernels' hot loops (build/ci)"
# The CPU kernels that accumulate in vector registers (the register tile's,
# the small-M GEMM, direct convolution, attention) as POCL compiles them
# for this machine, read back with objdump: their accumulators stay in
# registers through the k loop (a kernel that stores them back after every
# multiply-add is two to three times slower and still right, so no other
# test sees it).
check "CPU register tiles: accumulators kept in registers" tools/hot-loops.py build/ci

section "build and test with sanitizers (build/asan)"
# -O1, as AddressSanitizer's own documentation advises: at -O0 the tests'
# double-precision references (plain C loops, instrumented) were most of the
# run, test_gemm 450 s of a 12.8-minute suite on a 2-core Zen 4; at -O1 the
# suite took 7.9 minutes there, test_gemm 122 s.
build build/asan -DKILN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DKILN_WERROR=ON
# intercept_tls_get_addr=0: with GCC 12's LeakSanitizer, the dynamic TLS that
# POCL's kernel compiler allocates is recorded with a bogus range, and the leak
# check crashes scanning it at exit. kiln is linked, not loaded, so its own
# thread-local state is still scanned.
# use_sigaltstack=0: LLVM, which POCL compiles kernels with, gives the thread
# that first installs its signal handlers an alternate signal stack from
# malloc; AddressSanitizer, which would otherwise have set that stack itself,
# fails to unmap it when the thread ends ("unable to unmap"). A test whose
# first compile runs on a thread it starts and joins then fails when it runs
# first in its process (each test alone, KILN_TEST_SHARD: test_threads'
# shared cache test and test_program_cache's concurrent writers).
suite build/asan \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0:use_sigaltstack=0 \
    LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

section "threads under ThreadSanitizer (build/tsan)"
# The tests that run kiln from several threads: test_threads (docs/threads.md)
# and the racing threads of the context, program cache and disk cache tests.
# The rest of the suite calls kiln from one thread at a time; the AddressSanitizer
# build covers it. No suppressions: the OpenCL runtime (POCL, ocl-icd) gives
# ThreadSanitizer nothing to report in these tests.
build build/tsan -DKILN_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR=ON
suite build/tsan \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    -- -R '^test_(threads|context|program_cache|disk_cache)$'

section "fuzzing (build/fuzz)"
# Every harness replays its corpus, then fuzzes for FUZZ_SECONDS (10 by
# default), as many harnesses at once as there are cores: the replay is most
# of the time, each input compiling its kernels (on a 2-core machine, one
# after another in a fresh clone's run the seven took 10.5 minutes, conv's
# corpus 5 of them and attention's 2.5; two at a time, kiln's and POCL's
# kernel caches emptied, 7.9). Each harness counts once. New inputs stay in
# build/fuzz/corpus, failing ones in build/fuzz/crashes.
fuzz_rc=0
tools/fuzz.sh --jobs "$(nproc)" --seconds "${FUZZ_SECONDS:-10}" 2>&1 | tee build/fuzz.log || fuzz_rc=$?
fuzz_passed=$(grep -c '^PASS: fuzz ' build/fuzz.log || true)
fuzz_failed=$(grep -c '^FAIL: fuzz ' build/fuzz.log || true)
passed=$((passed + fuzz_passed))
failed=$((failed + fuzz_failed))
if [[ $fuzz_rc -ne 0 && $fuzz_failed -eq 0 ]]; then
    echo "FAIL: fuzzing (tools/fuzz.sh exited with $fuzz_rc)" >&2
    failed=$((failed + 1))
fi

section "installed package (build/stage)"
rm -rf build/stage build/examples build/examples-pkgconfig
cmake --install build/ci --prefix build/stage
export KILN_CACHE_DIR="$root/build/examples-cache"
if check "examples build with CMake" example_cmake; then
    check "hello, shared library from CMake" build/examples/hello
    check "hello, static library from CMake" build/examples/hello-static
fi
check "hello, built with pkg-config" example_pkgconfig

if command -v cppcheck >/dev/null 2>&1; then
    section "cppcheck src/"
    mkdir -p build/cppcheck
    if cppcheck --error-exitcode=1 --enable=warning,performance,portability --inline-suppr --std=c11 -q \
        -j"$(nproc)" --cppcheck-build-dir=build/cppcheck -I include -I src \
        -D_GNU_SOURCE -DCL_TARGET_OPENCL_VERSION=120 -DKILN_VERSION='"0"' src; then
        echo "cppcheck: clean"
    else
        echo "FAIL: cppcheck" >&2
        failed=$((failed + 1))
    fi
fi

section "formatting (clang-format)"
mapfile -t c_files < <(git ls-files '*.c' '*.h' ':!cl/*' 2>/dev/null || find src include tests bench tools examples -name '*.[ch]')
if clang-format --dry-run --Werror "${c_files[@]}"; then
    echo "clang-format: ${#c_files[@]} files formatted"
else
    echo "FAIL: clang-format (run: clang-format -i on the files above)" >&2
    failed=$((failed + 1))
fi

echo
printf 'took %d:%02d\n' $((SECONDS / 60)) $((SECONDS % 60))
echo "$passed passed, $failed failed"
if ((failed)); then
    exit 1
fi
