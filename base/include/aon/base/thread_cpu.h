// CPU time of threads: the calling thread's, and the sum over the helper
// threads a process starts for one piece of work and joins again (the trace
// files' chunk coders, the merge's k-way merging thread). Timers that measure
// their own thread's CPU time add the helpers' (merge/src/phase_clock.h).
#pragma once

#include <cstdint>

namespace aon {

// CPU nanoseconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
uint64_t ThisThreadCpuNs();

// A helper thread, as it ends, adds the CPU time it used.
void AddHelperCpuNs(uint64_t ns);

// CPU seconds every helper thread of this process has added so far.
double HelperCpuSeconds();

}  // namespace aon
