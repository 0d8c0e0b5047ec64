/* The agent's own API for applications and framework hooks: step boundaries,
 * on-demand capture windows (docs/always-on.md) and framework operator ranges
 * (the `ops` records, docs/trace-format.md). The agent library is already in
 * the process (CUDA_INJECTION64_PATH): look the functions up with
 * dlsym(RTLD_DEFAULT, "aon_step") or dlopen that path, so an application runs
 * unchanged without AON. Every function may be called from any thread, before
 * the agent has started (it then does nothing) and after it finished. */
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

/* A step boundary from AON's JAX hook (each jax.profiler.StepTraceAnnotation
 * entered): source "jax", preferred below "pytorch" and above NVTX ranges. */
void aon_jax_step(void);

/* Capture the next `steps` steps of this rank from the first step boundary at
 * least `delay_ms` milliseconds from now (every rank given the same wall-clock
 * deadline starts on the same step). Returns 0, or -1 when this process records
 * nothing (no agent configuration, a launcher process). */
int aon_capture(uint32_t steps, uint32_t delay_ms);

/* Kinds of a range given to aon_op_begin (OpRecord::kind). */
/* A framework operator in the forward pass or outside autograd (PyTorch: an aten op). */
#define AON_OP_OPERATOR 0
/* An operator run by autograd's backward pass. */
#define AON_OP_BACKWARD 1
/* A module's forward (PyTorch: nn.Module, name = its path "encoder.layers.3.self_attn"). */
#define AON_OP_MODULE 2
/* A user range (aon.range(), torch.profiler.record_function). */
#define AON_OP_USER 3

/* Begins a range on the calling thread; returns its id (> 0, unique in the
 * process) for aon_op_end, or 0 when it is not recorded (no capture window open
 * on this rank, a launcher process, the `ops` kind not enabled). `name` is
 * copied (interned) before the call returns. sequence_nr: the framework's
 * sequence number linking a backward op to its forward op (-1: none);
 * framework_thread: the framework's own id of the calling thread;
 * forward_thread: for backward ops, the framework's id of the thread that ran
 * the forward op (0: unknown). Thread-safe; ranges nest per thread: the record's
 * parent is the innermost recorded range open on this thread. While a range is
 * open, every CUDA launch, copy or memset on this thread is tied to the
 * innermost open range through CUPTI external correlation (kind
 * CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, external id = the range's id).
 * Outside capture windows it costs one atomic load. */
uint64_t aon_op_begin(const char* name, uint8_t kind, int64_t sequence_nr,
                      uint32_t framework_thread, uint32_t forward_thread);

/* Ends the range `id` (0: nothing) on the thread that began it. Ends need not
 * come in exact LIFO order across a window's edge, but must on one thread
 * otherwise: ending a range also ends the recorded ranges opened after it on
 * this thread and still open (their own end is then ignored). An id whose begin
 * was recorded is always recorded, even if the window closed meanwhile; an id
 * not open on this thread is ignored (counted in the rank's notes). */
void aon_op_end(uint64_t id);

/* 1 while this rank records ops: a capture window is open (budgeted mode) or
 * CUPTI traces all the time (--mode full, flight) and the `ops` kind is on; 0
 * otherwise. Cheap (an atomic load): framework hooks call it at every step to
 * switch their observers on and off. */
int aon_ops_active(void);

/* Registers `listener` (null: none), called with 1 right after this rank starts
 * recording ops and with 0 just before it stops, on the thread that marked the
 * step boundary, whichever source marked it (optimizer, aon_step, NVTX, NCCL,
 * time slots); and once at once with the current state. A framework switches
 * its per-operator observer there, so the observer is on for exactly the
 * window's steps (PyTorch: python/aon/_torch_observer.cc). Not called at the
 * agent's exit (the framework may be torn down by then), nor in a forked
 * child. The listener must not call back into the agent's step or capture
 * functions. */
void aon_ops_listen(void (*listener)(int on));

/* The framework begins (on = 1) or ends (on = 0) capturing a CUDA graph on
 * the calling thread's stream (PyTorch: torch.cuda.CUDAGraph.capture_begin and
 * capture_end, which torch.cuda.graph, make_graphed_callables and
 * torch.compile's CUDA graph trees use). Call begin before the capture starts
 * and end after the graph is instantiated. In budgeted and flight modes, ops
 * are then recorded (aon_ops_active returns 1, the listener is told) and the
 * graph's kernel nodes are tied to them, so that its replays in later capture
 * windows are attributed even when the graph was captured outside any window.
 * Calls nest; nothing happens in --mode full (both are on all along). */
void aon_graph_capture(int on);
/* A stretch of framework work the report must tell apart from the program's
 * own (PyTorch: a torch.compile compilation, from the hook's Dynamo callbacks),
 * on the calling thread from `start_ns` to `end_ns` (CLOCK_MONOTONIC ns, as
 * Python's time.monotonic_ns()). Recorded as a push/pop NVTX range of domain
 * "AON" named `name` whenever the agent records NVTX, in or out of capture
 * windows (such work is rare: a call per compilation, not per operator). A
 * range that ends before it starts is ignored. */
void aon_host_range(const char* name, uint64_t start_ns, uint64_t end_ns);

#ifdef __cplusplus
}
#endif
