#!/usr/bin/env python3
"""hot-loops.py: the register-tile kernels of the CPU profiles (and the
other CPU kernels that accumulate in vector registers: the small-M GEMM,
the direct convolution, fused attention and decoding), as POCL compiles
them for this machine, keep their accumulators in registers.

Each CPU kernel built on the register tile (common/register_tile.h) is fast
only while its MR x NR/VW accumulators live in vector registers through the
k loop. If the compiler cannot keep them there, because some code after the
loop indexes the accumulator array with a variable, it keeps the array in
memory and stores every accumulator back after each multiply-add: the loop
then runs at the store port's pace, two to three times slower, and every
result is still right, so no correctness test sees it. The row variant of
the implicit GEMM did this in NHWC until its epilogue's loop was unrolled
(docs/convolution.md, "The row variant of the implicit-GEMM CPU kernel").

This runs small kiln-bench problems that compile those kernels (the GEMM's
micro kernel plain, flipped and reading B in place; both implicit-GEMM
variants in NCHW and NHWC; Winograd's fused kernel in both layouts; the
small-M GEMM, the direct and depthwise convolutions, decoding and fused
attention), under this device's
profile and under generic-cpu and x86-64-avx2 for other tiles, with POCL's
kernel cache in a scratch directory. Then it disassembles every compiled
kernel with objdump and counts the vector multiply-adds whose result is
stored to the stack by the very next instruction, and those that read an
operand from the stack (spilled weights or accumulators). A register-tile
kernel with more than a quarter of its multiply-adds followed so, or (but
for the small-M GEMM, whose K slices park sums in private memory on
purpose) more than a quarter reading the stack, fails the check
(the clean ones measure 0 to 0.04 stored and 0 to 0.23 read: the fused
Winograd kernel parks its products in private memory on purpose; the
spilling row variant measured 0.88 and more stored, the direct convolution
holding its weights 0.29 read).

x86-64 only (on other hosts it says so and passes). Needs objdump (binutils).
Usage: tools/hot-loops.py [BUILD_DIR] (default build/ci); exits 1 on a
spilling kernel, on a kiln-bench failure, or when no kernel was found.
"""
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

# The kernels whose inner loop is the register tile.
TILE_KERNELS = re.compile(r"^(gemm_f32_cpu_micro|gemm_f32_smallm\w*|conv_f32_igemm|conv_f32_igemm_rows|"
                          r"conv_f32_wino\dx\d_fused|conv_f32_direct|attention_f32_(decode|fused))$")
LIMIT = 0.25
# Multiply-adds reading an operand from the stack: spilled weights or
# accumulators (the direct convolution's per-channel weights, held as
# broadcast vectors, read 0.29 of them so before it read each weight where it
# is used). The small-M GEMM's K slices park their partial sums in private
# memory by design, and so does the fused Winograd kernel its products (0.23
# of its multiply-adds read them on AVX-512, 0.33-0.41 on AVX2, whose 16
# registers hold fewer), so their reads are not counted against them.
READ_LIMIT = 0.25
PARKS = re.compile(r"^(gemm_f32_smallm\w*|conv_f32_wino\dx\d_fused)$")
# The depthwise NHWC direct tile (up to 4 x 4 pixels of VW channels) holds its
# 3x3 filter's 9 weight vectors beside its accumulators: where the machine has
# 16 vector registers (AVX2) they live on the stack, and each multiply-add
# reads its weight from there as it would from memory. Read instead from the
# packed taps at each use (no stack at all), MobileNet's NHWC 56x56 depthwise
# layer measured 0.88-0.96x on a 2-vCPU Zen 3 (ab-bench, three runs of 8-12
# rounds), so this case's reads are not counted against it; its stores are.
HOLDS_WEIGHTS = "--groups 64 --layout nhwc"

CASES = [
    "gemm --m 200 --n 150 --k 96",
    "gemm --m 150 --n 200 --k 96 --trans-a",
    "conv --n 1 --c 64 --h 14 --w 14 --k 128 --r 1 --s 1 --bias --relu --residual --constant-weights",
    "conv --n 1 --c 64 --h 7 --w 7 --k 96 --r 1 --s 1 --bias --relu --constant-weights",
    "conv --n 1 --c 16 --h 20 --w 20 --k 64 --r 3 --s 3 --pad 1 --bias --relu --algo implicit-gemm",
    "conv --n 1 --c 32 --h 15 --w 15 --k 64 --r 3 --s 3 --stride 2 --pad 1 --bias --relu --algo implicit-gemm",
    "conv --n 1 --c 32 --h 15 --w 15 --k 64 --r 3 --s 3 --stride 2 --pad 1 --layout nhwc --bias --relu "
    "--algo implicit-gemm",
    "conv --n 1 --c 64 --h 7 --w 7 --k 64 --r 1 --s 1 --layout nhwc --bias --residual --algo implicit-gemm",
    "conv --n 1 --c 3 --h 30 --w 30 --k 64 --r 7 --s 7 --stride 2 --pad 3 --layout nhwc --bias --relu "
    "--algo implicit-gemm",
    "conv --n 1 --c 3 --h 30 --w 30 --k 32 --r 3 --s 3 --stride 2 --pad 1 --layout nhwc --bias --relu "
    "--algo implicit-gemm",
    "conv --n 1 --c 32 --h 14 --w 14 --k 64 --r 3 --s 3 --pad 1 --bias --relu --constant-weights --algo winograd-4x4",
    "conv --n 1 --c 32 --h 7 --w 7 --k 64 --r 3 --s 3 --pad 1 --bias --relu --constant-weights --algo winograd-2x2",
    "conv --n 1 --c 32 --h 14 --w 14 --k 64 --r 3 --s 3 --pad 1 --layout nhwc --bias --relu --residual "
    "--constant-weights --algo winograd-4x4",
    "conv --n 1 --c 64 --h 14 --w 14 --k 64 --r 3 --s 3 --pad 1 --groups 64 --bias --relu",
    "conv --n 1 --c 64 --h 14 --w 14 --k 64 --r 3 --s 3 --pad 1 --groups 64 --layout nhwc --bias --relu",
    "conv --n 1 --c 16 --h 14 --w 14 --k 32 --r 3 --s 3 --pad 1 --bias --relu --algo direct",
    "conv --n 1 --c 3 --h 30 --w 30 --k 32 --r 3 --s 3 --stride 2 --pad 1 --bias --relu --algo direct",
    "gemm --m 4 --n 300 --k 200",
    "gemm --m 64 --n 256 --k 300",  # B read in place 256 floats apart: its rows fetched ahead (KILN_B_FETCH)
    "attention --heads 8 --kv-heads 2 --seq-q 1 --seq-kv 700 --head-dim 128",
    "attention --heads 2 --seq-q 100 --seq-kv 100 --head-dim 64",
]
PROFILES = ["", "generic-cpu", "x86-64-avx2"]  # "": the device's own

FMA = re.compile(r"vfn?m(?:add|sub)\d{3}ps\s+\S+,\s*%[xyz]mm\d+,\s*(%[xyz]mm\d+)$")


def spills(so):
    """(multiply-adds, those whose result the next instruction stores to the stack, those reading an operand
    from the stack)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True, text=True, check=True).stdout
    code = [line.split("\t", 1)[1].strip() for line in out.splitlines() if re.match(r"\s+[0-9a-f]+:\t", line)]
    fmas = stored = loaded = 0
    for here, after in zip(code, code[1:]):
        m = FMA.match(here)
        if not m:
            continue
        fmas += 1
        if re.match(r"vmov[au]ps\s+" + re.escape(m.group(1)) + r",\s*-?(0x[0-9a-f]+)?\(%rsp\)", after):
            stored += 1
        if "(%rsp)" in here:
            loaded += 1
    return fmas, stored, loaded


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/ci"
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"hot-loops.py: {platform.machine()} host, the check reads x86-64 code only: skipped")
        return 0
    if not shutil.which("objdump"):
        print("hot-loops.py: objdump is not installed (binutils)", file=sys.stderr)
        return 1
    bench = os.path.join(build, "bench", "kiln-bench")
    status = found = 0
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, KILN_CACHE_DIR=os.path.join(scratch, "kiln"))
        env.pop("KILN_PROFILE_DIR", None)
        for i, (profile, case) in enumerate((p, c) for p in PROFILES for c in CASES):
            # A POCL cache of its own, so each kernel is named with the case that compiled it.
            env["POCL_CACHE_DIR"] = pocl = os.path.join(scratch, f"pocl{i}")
            env["KILN_PROFILE"] = profile
            what = f"{profile or 'own profile'}, kiln-bench {case}"
            run = subprocess.run([bench] + case.split() + ["--reps", "1", "--warmup", "0", "--compare", "none"],
                                 env=env, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL: {what}: exit {run.returncode}\n{run.stderr}", file=sys.stderr)
                status = 1
            for root, _, files in os.walk(pocl):
                for f in files:
                    name = f[:-3] if f.endswith(".so") else ""
                    if not TILE_KERNELS.match(name):
                        continue
                    fmas, stored, loaded = spills(os.path.join(root, f))
                    if not fmas:
                        continue
                    found += 1
                    share, read = stored / fmas, loaded / fmas
                    held = name == "conv_f32_direct" and HOLDS_WEIGHTS in case
                    bad = share > LIMIT or (read > READ_LIMIT and not PARKS.match(name) and not held)
                    status |= bad
                    print(f"{'FAIL' if bad else 'ok'}: {name}, of {fmas} multiply-adds {stored} stored to the stack "
                          f"next ({share:.2f}), {loaded} reading it ({read:.2f}); {what}")
    if not found:
        print("hot-loops.py: no register-tile kernel was compiled", file=sys.stderr)
        status = 1
    return status

if __name__ == "__main__":
    sys.exit(main())
