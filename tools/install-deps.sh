#!/usr/bin/env bash
# Installs the Debian packages kiln needs to build, test and run on the CPU
# (POCL). Safe to run repeatedly: apt is used only when a package is missing.
set -euo pipefail

packages=(
    ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
    libclblast-dev libcmocka-dev libcjson-dev libopenblas-dev libdnnl-dev
    cmake gcc g++ make pkg-config cppcheck clang-format clang libclang-rt-dev oclgrind
    python3 python3-matplotlib
)

# cuobjdump, which tests/test_cuda.c reads the CUDA kernels' SASS with, and
# nvdisasm, which cuobjdump from CUDA 13.1 on disassembles through (found
# beside it or on the PATH), from PyPI (Debian's toolkit lacks them). Best
# effort: without them (or without pip) the test compiles the kernels and
# skips the SASS checks, saying so.
pypi_tool() { # TOOL: installs nvidia-cuda-TOOL unless TOOL is on the PATH or in PyPI's nvidia tree
    local tool=$1 package=nvidia-cuda-$1
    if ! command -v "$tool" >/dev/null 2>&1 &&
        ! python3 -c "import glob, os, nvidia, sys; sys.exit(not glob.glob(os.path.join(list(nvidia.__path__)[0], 'cu*', 'bin', '$tool')))" 2>/dev/null &&
        python3 -m pip --version >/dev/null 2>&1; then
        echo "install-deps: installing $tool from PyPI ($package)"
        python3 -m pip install --quiet --user "$package" 2>/dev/null ||
            python3 -m pip install --quiet "$package" ||
            echo "install-deps: could not install $package; the SASS checks will be skipped" >&2
    fi
}
pypi_tool cuobjdump
pypi_tool nvdisasm

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: not a Debian-based system; install the equivalents of these yourself:" >&2
    echo "install-deps:   ${packages[*]}" >&2
    exit 0
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [[ "$status" != *" ok installed" ]]; then
        missing+=("$p")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi

as_root=()
if [[ $EUID -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps: missing packages: ${missing[*]}" >&2
        echo "install-deps: not root and sudo is not available; install them as root" >&2
        exit 1
    fi
    as_root=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
apt_get=(${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300)
if ! "${apt_get[@]}" update; then
    echo "install-deps: apt-get update failed" >&2
    exit 1
fi
if ! "${apt_get[@]}" install -y --no-install-recommends "${missing[@]}"; then
    echo "install-deps: could not install: ${missing[*]}" >&2
    exit 1
fi
