/* The agent's own API for applications and framework hooks: step boundaries and
 * on-demand capture windows (docs/always-on.md). The agent library is already in
 * the process (CUDA_INJECTION64_PATH): look the functions up with
 * dlsym(RTLD_DEFAULT, "aon_step") or dlopen that path, so an application runs
 * unchanged without AON. */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A training (or inference) step begins now. Steps marked this way are preferred
 * over NVTX step ranges, NCCL collectives and time slots for aligning capture
 * windows. Cheap: one clock read, a lock, one ring push; at a window's edge it
 * switches CUPTI on or off, on this thread. */
void aon_step(void);

/* A step boundary from a framework's own hook (PyTorch's optimizer step hooks):
 * like aon_step, but its source is "pytorch", preferred below aon_step ("api")
 * and above NVTX step ranges, so a program that calls aon_step itself keeps
 * its own boundaries. */
void aon_framework_step(void);

/* Capture the next `steps` steps of this rank from the first step boundary at
 * least `delay_ms` milliseconds from now (every rank given the same wall-clock
 * deadline starts on the same step). Returns 0, or -1 when this process records
 * nothing (no agent configuration, a launcher process). */
int aon_capture(uint32_t steps, uint32_t delay_ms);

#ifdef __cplusplus
}
#endif
