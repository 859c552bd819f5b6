#!/usr/bin/env bash
# Installs what is missing, builds kiln in Release and runs the main job on the
# default device (KILN_DEVICE selects another). Extra arguments go to the job.
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."

tools/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release
cmake --build build/release -j"$(nproc)"

exec build/release/bench/kiln-bench quick "$@"
