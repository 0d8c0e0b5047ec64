// CUPTI PM sampling as the capture windows' counter sampler (counter_sampler.h).
#pragma once

#include <cstdint>

#include "counter_sampler.h"
#include "source_context.h"

namespace aon::agent {

// The process's PM sampler, or null when AON_COUNTERS is not auto or the
// counters kind is off. Nothing touches the GPU's monitor until a window opens.
CounterSampler* StartCuptiPmSampler(const SourceContext& context);
// At exit: ends a window still sampling (full mode) and says what was sampled.
void EndCuptiPmSampler();
// The device of a kernel CUPTI delivered: the sampler's device when no CUDA
// context is current where the window opened.
void NoteKernelDevice(uint32_t device);

}  // namespace aon::agent
