#!/usr/bin/env bash
# The work-group kernels under Oclgrind, an OpenCL device simulator that
# checks every access of every work-item: data races in local and global
# memory (a barrier missing between work-items that share a tile, which the
# POCL CPU device, running a work-group's items one after another, never
# shows) and accesses out of bounds. Runs small kiln-bench problems with the
# GPU profiles forced (KILN_PROFILE), so the GPU kernels and their
# parameters are the ones simulated: fused attention's flash kernel
# (generic-gpu, amd-rdna3) and per-work-item kernel (nvidia-hopper's route),
# its decoding kernel for GPUs (every GPU profile; the simulated device's
# 32 KiB of local memory halve its tiles at head dimension 128, and 300 keys
# make two splits of 256, the last partial, on its one compute unit), the
# tiled GEMM with and without split K and its small-M class, the direct and
# small-M GEMMs (and, under generic-cpu, fused attention's per-work-item
# kernel with rows in vectors of 4, causal over several blocks of rows, the
# small-M GEMM's K steps and Winograd's fused kernel in NCHW and NHWC, the
# last block of filters partial),
# and the tiled implicit-GEMM convolution with and without split K (the
# simulator has one compute unit: a problem of one tile and a long K
# splits); and the softmax's work-group kernel through the operator tests'
# softmax rows (kiln-bench has no softmax command).
# Fails on any report, on a result kiln-bench finds wrong, or on an error.
# Usage: tools/oclgrind.sh [BUILD_DIR] (default build/ci).
set -uo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
bench=${1:-build/ci}/bench/kiln-bench
nn_tests=${1:-build/ci}/tests/test_nn_ops
if ! command -v oclgrind >/dev/null 2>&1; then
    echo "oclgrind.sh: oclgrind is not installed (tools/install-deps.sh installs it)" >&2
    exit 1
fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export KILN_CACHE_DIR=$cache

cases=(
    "attention --heads 2 --kv-heads 1 --seq-q 70 --seq-kv 45 --head-dim 24 --causal"
    "attention --heads 2 --seq-q 33 --seq-kv 50 --head-dim 64 --dtype f16 --layout bhsd"
    "attention --heads 4 --kv-heads 1 --seq-q 1 --seq-kv 40 --head-dim 128"
    "attention --heads 6 --kv-heads 1 --seq-q 1 --seq-kv 300 --head-dim 80 --causal --dtype f16"
    "gemm --m 70 --n 37 --k 19 --algo tiled"
    "gemm --m 130 --n 70 --k 40 --trans-b --algo tiled"
    "gemm --m 16 --n 100 --k 1000 --algo tiled"
    "gemm --m 40 --n 33 --k 1000 --trans-a --trans-b --algo tiled"
    "gemm --m 37 --n 20 --k 33 --trans-a --algo direct"
    "gemm --m 1 --n 300 --k 70 --algo smallm"
    "gemm --m 3 --n 130 --k 41 --trans-b --algo smallm"
    "conv --n 1 --c 12 --h 9 --w 11 --k 13 --r 3 --s 3 --pad 1 --bias --relu --algo implicit-gemm"
    "conv --n 1 --c 64 --h 7 --w 7 --k 20 --r 3 --s 3 --pad 1 --layout nhwc --bias --residual --algo implicit-gemm"
)
# The CPU profile's kernels: fused attention's with vectors of rows (an
# integer vector clamped by scalar bounds read wrong lanes under Oclgrind
# there, 0.43 relative error), and the small-M kernel with B as stored, which
# takes K in steps over several chunks of columns per work-item
# (gemm.smallm.kc).
cpu_cases=(
    "attention --heads 2 --kv-heads 1 --seq-q 70 --seq-kv 45 --head-dim 24 --causal"
    "gemm --m 5 --n 300 --k 70 --algo smallm"
    "gemm --m 7 --n 130 --k 41 --trans-a --dtype f16 --algo smallm"
    "conv --n 1 --c 16 --h 11 --w 13 --k 40 --r 3 --s 3 --pad 1 --bias --relu --residual --constant-weights --algo winograd-4x4"
    "conv --n 1 --c 16 --h 11 --w 13 --k 40 --r 3 --s 3 --pad 1 --bias --relu --residual --constant-weights --algo winograd-2x2"
    "conv --n 1 --c 16 --h 11 --w 13 --k 40 --r 3 --s 3 --pad 1 --layout nhwc --bias --relu --residual --constant-weights --algo winograd-4x4"
)
status=0
for profile in generic-gpu nvidia-hopper amd-rdna3 generic-cpu; do
    if [[ $profile == generic-cpu ]]; then
        set -- "${cpu_cases[@]}"
    else
        set -- "${cases[@]}"
    fi
    for c in "$@"; do
        # shellcheck disable=SC2086
        out=$(KILN_PROFILE=$profile oclgrind --data-races "$bench" $c --reps 1 --warmup 0 --compare none 2>&1)
        rc=$?
        plan=$(grep -m1 -E '^kiln plan:|^  (implicit-gemm|winograd-[24]x[24]) ' <<<"$out" |
            sed -E 's/^(kiln plan: |  (implicit-gemm|winograd-[24]x[24]) +)//')
        # Oclgrind's reports (races, invalid accesses, fatal errors), kiln-bench's
        # warnings (a wrong result) and failures; not the device's name.
        if ((rc != 0)) || grep -qE 'data race|Invalid (read|write)|OCLGRIND|Oclgrind - |warning|failed|error' <<<"$out"; then
            echo "FAIL: $profile: $c"
            echo "$out" | head -40
            status=1
        else
            echo "ok: $profile: $c: $plan"
        fi
    done
done
# One work-group per column (src/ops/softmax.c): every softmax row of the
# operator tests, under the two GPU profiles' work-group sizes.
for profile in generic-gpu nvidia-hopper; do
    out=$(KILN_PROFILE=$profile KILN_TEST_FILTER='softmax*' oclgrind --data-races "$nn_tests" 2>&1)
    rc=$?
    if ((rc != 0)) || grep -qE 'data race|Invalid (read|write)|OCLGRIND|Oclgrind - |FAILED' <<<"$out"; then
        echo "FAIL: $profile: test_nn_ops softmax rows"
        echo "$out" | grep -vE '^\[ *(RUN|OK) ' | head -40
        status=1
    else
        echo "ok: $profile: test_nn_ops softmax rows ($(grep -c '^\[       OK' <<<"$out") passed)"
    fi
done
exit $status
