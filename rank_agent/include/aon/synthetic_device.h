// The synthetic device: a clearly labeled fake GPU for machines without one.
//
// It is the one narrow interface behind which the GPU is faked (CI and the demo
// on CPU-only machines). A "fake driver" program (examples/synthetic/) loads the
// agent exactly as the CUDA driver would (dlopen of CUDA_INJECTION64_PATH, then
// InitializeInjection) and, with AON_SOURCE=synthetic, gets this table from the
// agent. Every call records what the CUDA runtime would: one API record on the
// calling thread and one activity record on a simulated per-stream GPU
// timeline, through the same record path as CUPTI data; a call made while a
// framework op range is open on its thread (aon_op_begin, aon/capture_api.h) is
// preceded by the external correlation record CUPTI would write (kind 3, the
// innermost range's id). Rank files say
// source = "synthetic" and the device is named "AON synthetic GPU (not real)".
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AON_SYNTHETIC_ALL_STREAMS 0xffffffffu

/* The device's timing model, for programs that plant figures on it: an
 * operation starts AON_SYNTHETIC_LAUNCH_LATENCY_NS after it is issued or when
 * its stream is free, whichever is later; a copy lasts
 * AON_SYNTHETIC_COPY_FIXED_NS + bytes / rate, the rate in bytes per ns being
 * ..._PINNED for device memory and pinned host memory (asynchronous copies)
 * and ..._PAGEABLE for pageable host memory (synchronous host copies: the
 * driver stages them through a pinned buffer). */
#define AON_SYNTHETIC_LAUNCH_LATENCY_NS 4000u
#define AON_SYNTHETIC_COPY_FIXED_NS 2000u
#define AON_SYNTHETIC_COPY_BYTES_PER_NS_PINNED 25.0
#define AON_SYNTHETIC_COPY_BYTES_PER_NS_PAGEABLE 6.25

typedef struct AonSyntheticDeviceV1 {
  uint32_t struct_size;
  // Queues a kernel of `duration_ns` on `stream` (asynchronous, like a launch).
  int (*launch_kernel)(uint32_t stream, const char* name, uint64_t duration_ns, int grid_x,
                       int block_x);
  // copy_kind as CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD); a
  // synchronous copy returns when its simulated transfer is done.
  int (*memcpy)(uint32_t stream, uint8_t copy_kind, uint64_t bytes, int async);
  int (*memset)(uint32_t stream, uint64_t bytes, int async);
  // Waits for `stream` (or AON_SYNTHETIC_ALL_STREAMS: the device).
  int (*synchronize)(uint32_t stream);
  // Present when struct_size covers it. What the GPU's performance counters
  // see of the kernels this thread launches from now on, in percent of peak
  // (default 90, 10, 0). With AON_SYNTHETIC_GPU_DIR set, the device appends
  // every kernel it runs with its profile to <dir>/<uuid>.activity, from which
  // the labeled fake NVML of the tests computes GPM metrics.
  int (*set_kernel_profile)(double sm_active_pct, double dram_pct, double tensor_pct);
  // Present when struct_size covers them: CUDA graphs, as stream capture makes
  // them. Between begin_capture and end_capture, this thread's kernel launches
  // on `stream` run nothing: each records its launch call and becomes a kernel
  // node of the graph (the node-created callback CUPTI makes inside the
  // capturing launch, while activity is recorded). end_capture instantiates
  // the graph (every node cloned, as cudaGraphInstantiate does) and gives its
  // handle (> 0); launch_graph runs its kernels in capture order on `stream`:
  // one cudaGraphLaunch call, one kernel record per node carrying the clone's
  // graph_node_id and the launch's correlation id.
  int (*begin_capture)(uint32_t stream);
  int (*end_capture)(uint32_t stream, uint64_t* graph);
  int (*launch_graph)(uint64_t graph, uint32_t stream);
  // Present when struct_size covers them: a kernel whose end the host gives
  // later, as NCCL's kernels wait on the GPU for their peers' data. It starts
  // as any launch on `stream` would; close_kernel ends it at end_ns
  // (CLOCK_MONOTONIC ns; its start if earlier) and records it. Until then
  // nothing else may be queued on `stream` or waited for (those calls return
  // 1), and a second open kernel on it is refused.
  int (*launch_open_kernel)(uint32_t stream, const char* name, int grid_x, int block_x);
  int (*close_kernel)(uint32_t stream, uint64_t end_ns);
} AonSyntheticDeviceV1;

// NULL unless the agent runs with AON_SOURCE=synthetic.
typedef const AonSyntheticDeviceV1* (*AonGetSyntheticDeviceFn)(void);
const AonSyntheticDeviceV1* aonSyntheticDeviceV1(void);

#ifdef __cplusplus
}
#endif
