#!/usr/bin/env bash
# Installs the dependencies, builds AON with its tests in ./build and runs every
# test with ctest. Exits with ctest's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh --test
bash scripts/build.sh

# The integration tests start real mpirun jobs; Open MPI refuses root without these.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# The concurrent parts of the agent under ThreadSanitizer (its own build dir).
tsan_status=0
bash scripts/tsan.sh || tsan_status=$?
# What AON reads from other processes (rank files, rings, collector messages),
# fuzzed under AddressSanitizer + UBSan for a few minutes (its own build dir).
fuzz_status=0
bash scripts/fuzz.sh || fuzz_status=$?

jobs=$(nproc 2>/dev/null || echo 2)
status=0
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900 || status=$?
# The .deb made from this build, checked; on a CI machine also installed with
# apt, used for a synthetic job, and purged (scripts/package.sh).
package_status=0
bash scripts/package.sh --check || package_status=$?
if ((status == 0 && tsan_status != 0)); then
  echo "test.sh: ThreadSanitizer run failed (see above)"
  status=$tsan_status
fi
if ((status == 0 && fuzz_status != 0)); then
  echo "test.sh: fuzzing found something (see above; reproducers in build-fuzz/findings/)"
  status=$fuzz_status
fi
if ((status == 0 && package_status != 0)); then
  echo "test.sh: the Debian package failed its check (see above)"
  status=$package_status
fi
if ((status == 0)); then echo "test.sh: all tests passed"; else echo "test.sh: ctest failed (status $status)"; fi
exit "$status"
