#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages AON builds and tests with. Idempotent:
# when every package is already installed it does nothing (no apt-get update,
# no network). On a machine without apt, or where apt cannot install (no
# network, no root), it checks the tools it needs and continues: the build
# then says precisely what is missing.
set -euo pipefail

PACKAGES=(build-essential cmake ninja-build pkg-config libhdf5-dev zlib1g-dev hdf5-tools
          libopenmpi-dev openmpi-bin libpmix-dev libcli11-dev libgtest-dev libgmock-dev
          libbenchmark-dev libdeflate-dev libotf2-trace-dev python3)
# Only the test suite needs these: a Slurm cluster started by the tests (slurmctld,
# slurmd, munge; SPANK headers), headless Chromium for the report's screenshot,
# clang with libFuzzer and its sanitizers for scripts/fuzz.sh, and protoc to decode
# the Perfetto traces the merge writes (tests/unit/merge/perfetto_trace_test.cc),
# and Debian's CPU PyTorch with its headers, h5py and numpy for the PyTorch hook's
# test (tests/python/test_torch_hook.py; the build compiles the operator observer
# against that torch), pandas for the reader's DataFrame conventions
# (tests/python/test_reader.py: "none" values as NA), otf2-print to read the OTF2 archives back
# (tests/unit/merge/otf2_trace_test.cc), and pip to install the Python package's
# wheel the way users do (tests/python/test_wheel.py; the build makes the wheel
# with the standard library alone).
TEST_PACKAGES=(slurmctld slurmd slurm-client libslurm-dev munge chromium clang-14
               libclang-rt-14-dev protobuf-compiler python3-torch libtorch-dev python3-h5py
               python3-numpy python3-pandas otf2-tools python3-pip)
if [[ ${1:-} == --test ]]; then PACKAGES+=("${TEST_PACKAGES[@]}"); fi
# Commands that stand for those packages when they were installed another way.
COMMANDS=(c++ cmake ninja pkg-config mpicxx mpirun python3)

say() { echo "install-deps: $*"; }

check_commands() {
  local missing=()
  for c in "${COMMANDS[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
  if ((${#missing[@]})); then
    say "WARNING: not found in PATH: ${missing[*]} (the build may fail)"
  else
    say "tools found: ${COMMANDS[*]}"
  fi
}

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  say "no apt on this machine: checking for the tools instead"
  check_commands
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  say "all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    say "missing packages: ${missing[*]}, and not root (no sudo) to install them"
    check_commands
    exit 0
  fi
fi

say "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if "${SUDO[@]}" apt-get update -q &&
   "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  say "done"
else
  say "WARNING: apt-get could not install ${missing[*]} (offline?)"
  check_commands
fi
