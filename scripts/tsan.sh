#!/usr/bin/env bash
# Builds the agent and its multi-threaded tests with ThreadSanitizer in
# ./build-tsan and runs them: the record store, NVTX injection and the NCCL
# plugin are written to from several threads (application, CUPTI, NCCL's proxy
# thread), and the shared-memory record ring from many producer threads at once.
# Fails on any ThreadSanitizer report or test failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
flags=-fsanitize=thread
# -O1 with line tables: what ThreadSanitizer needs for its reports (file:line),
# and about half the compile time of -O2 -g on CI's 2 cores.
opt="-O1 -g1 -DNDEBUG"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAON_BUILD_EXAMPLES=OFF \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DCMAKE_SHARED_LINKER_FLAGS="$flags" > build-tsan.log 2>&1 || { tail -20 build-tsan.log; exit 1; }
cmake --build build-tsan --target aon_agent agent_test_child nccl_abi_child agent_test \
  nccl_plugin_test shm_ring_child shm_ring_test >> build-tsan.log 2>&1 ||
  { tail -30 build-tsan.log; exit 1; }
status=0
for t in agent_test nccl_plugin_test shm_ring_test; do
  # The children (real processes that load the agent) report to the same stderr.
  TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0" "build-tsan/bin/$t" > "build-tsan/$t.log" 2>&1 ||
    status=1
  races=$(grep -c "WARNING: ThreadSanitizer" "build-tsan/$t.log" || true)
  echo "tsan: $t: $(tail -1 "build-tsan/$t.log" | tr -s ' '), $races ThreadSanitizer reports"
  if [ "$races" != 0 ]; then
    grep -A20 "WARNING: ThreadSanitizer" "build-tsan/$t.log" | head -60
    status=1
  fi
done
exit $status
