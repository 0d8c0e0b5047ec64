// The NCCL profiler-plugin interface, versions 5 and 4, as AON implements it.
//
// NCCL (2.27: v4, 2.28: v5) dlopens NCCL_PROFILER_PLUGIN and looks up the data
// symbol ncclProfiler_v5 (then _v4, ...): a table of a name and five functions.
// These declarations restate the binary layout NCCL expects (field order and
// types are the contract; see NCCL's src/include/plugin/profiler/profiler_v5.h
// and _v4.h); they are written here so the agent builds without NCCL's private
// headers, and the ABI tests drive the plugin through exactly these types.
//
// Event hierarchy (parentObj): GroupApi -> CollApi/P2pApi -> Coll/P2p ->
// ProxyOp -> ProxyStep; KernelCh's parent is its Coll/P2p; KernelLaunch's is
// the GroupApi. Asking NCCL for an event type implies its ancestors.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern "C" {

typedef int aon_nccl_result_t;  // ncclResult_t; 0 = ncclSuccess
typedef void (*aon_nccl_logger_t)(int level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

// Event types (activation-mask bits).
enum : uint64_t {
  kNcclProfileGroup = 1u << 0,
  kNcclProfileColl = 1u << 1,
  kNcclProfileP2p = 1u << 2,
  kNcclProfileProxyOp = 1u << 3,
  kNcclProfileProxyStep = 1u << 4,
  kNcclProfileProxyCtrl = 1u << 5,
  kNcclProfileKernelCh = 1u << 6,
  kNcclProfileNetPlugin = 1u << 7,
  kNcclProfileGroupApi = 1u << 8,   // v5
  kNcclProfileCollApi = 1u << 9,    // v5
  kNcclProfileP2pApi = 1u << 10,    // v5
  kNcclProfileKernelLaunch = 1u << 11,  // v5
};

// The one state AON reads: a channel's kernel work stopped (args.kernel_ch.gpu_timer).
inline constexpr int kNcclStateKernelChStop = 22;

struct AonNcclEventV5 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    struct {
      bool graph_captured;
      int group_depth;
    } group_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
    } p2p_api;
    struct {
      void* stream;
    } kernel_launch;
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t n_channels;
      uint8_t n_warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t n_channels;
      void* parent_group;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channel_id;
      int peer;
      int n_steps;
      int chunk_size;
      int is_send;
    } proxy_op;
    struct {
      int step;
    } proxy_step;
    struct {
      uint8_t channel_id;
      uint64_t gpu_timer;  // %globaltimer at the channel's start
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// v4 differs from v5 in the event descriptor: an 8-bit type, no API/launch
// events and no parent_group; and in init's argument order.
struct AonNcclEventV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t n_channels;
      uint8_t n_warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t n_channels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channel_id;
      int peer;
      int n_steps;
      int chunk_size;
      int is_send;
    } proxy_op;
    struct {
      int step;
    } proxy_step;
    struct {
      uint8_t channel_id;
      uint64_t gpu_timer;
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// Same layout in v4 and v5.
union AonNcclStateArgs {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t gpu_timer;  // %globaltimer at the channel's stop
  } kernel_ch;
};

struct AonNcclProfilerV5 {
  const char* name;
  aon_nccl_result_t (*init)(void** context, uint64_t comm_id, int* activation_mask,
                            const char* comm_name, int n_nodes, int n_ranks, int rank,
                            aon_nccl_logger_t log);
  aon_nccl_result_t (*start_event)(void* context, void** handle, AonNcclEventV5* event);
  aon_nccl_result_t (*stop_event)(void* handle);
  aon_nccl_result_t (*record_event_state)(void* handle, int state, AonNcclStateArgs* args);
  aon_nccl_result_t (*finalize)(void* context);
};

struct AonNcclProfilerV4 {
  const char* name;
  aon_nccl_result_t (*init)(void** context, int* activation_mask, const char* comm_name,
                            uint64_t comm_hash, int n_nodes, int n_ranks, int rank,
                            aon_nccl_logger_t log);
  aon_nccl_result_t (*start_event)(void* context, void** handle, AonNcclEventV4* event);
  aon_nccl_result_t (*stop_event)(void* handle);
  aon_nccl_result_t (*record_event_state)(void* handle, int state, AonNcclStateArgs* args);
  aon_nccl_result_t (*finalize)(void* context);
};

}  // extern "C"
