// GPU probe: the CUPTI facts AON's CUDA-graph attribution of NCCL operations
// rests on (rank_agent/src/nccl_plugin.cc, merge/src/nccl_resolve.cc), checked
// without NCCL or AON. It launches a kernel the way NCCL does (cuLaunchKernelEx
// on a stream under capture, inside a pushed CUSTOM2 external correlation id),
// instantiates the graph twice, replays it, and prints one "FACT" line per
// assumption, then "graph_probe: PASS" only if all of them hold:
//   created_on_launching_thread_inside_launch  GRAPHNODE_CREATED for the
//       captured kernel node fires inside cuLaunchKernelEx, on its thread;
//   clones_reported (printed, not required)    instantiation reports
//       GRAPHNODE_CLONED with originalNode = the captured node (needed only
//       when replays carry the clones' ids);
//   replay_node_is_known                       every replayed kernel's
//       graphNodeId is the created node or one of its clones (which one is
//       printed: AON accepts either);
//   one_kernel_record_per_replay                5 replays -> 5 kernel records.
// Build: nvcc -O2 -arch=sm_90 -o graph_probe graph_probe.cu -lcupti -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    auto rc_ = (x);                                                                               \
    if (rc_ != 0) {                                                                               \
      std::fprintf(stderr, "graph_probe: %s failed (%d) at line %d\n", #x, static_cast<int>(rc_), \
                   __LINE__);                                                                     \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)

__global__ void probe_kernel(int* x) { x[threadIdx.x] += 1; }

namespace {

std::mutex g_mu;
thread_local bool t_in_launch = false;
thread_local uint32_t t_launch_corr = 0;
long g_launch_tid = 0;
uint64_t g_created = 0;  // the captured kernel node
bool g_created_inside = false;
long g_created_tid = 0;
uint32_t g_created_during_corr = 0;
std::set<uint64_t> g_clones;  // clones whose original is g_created (or a clone)
std::vector<uint64_t> g_replay_nodes;
int g_replay_kernels = 0;

long Tid() { return static_cast<long>(syscall(SYS_gettid)); }

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    if (cb->callbackSite == CUPTI_API_ENTER) {
      t_in_launch = true;
      t_launch_corr = cb->correlationId;
    } else {
      t_in_launch = false;
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* g = static_cast<const CUpti_GraphData*>(
      static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  if (g == nullptr || g->node == nullptr) return;
  uint64_t id = 0, orig = 0;
  uint32_t graph = 0;
  cuptiGetGraphNodeId(g->node, &id);
  if (g->originalNode) cuptiGetGraphNodeId(g->originalNode, &orig);
  if (g->graph) cuptiGetGraphId(g->graph, &graph);
  std::lock_guard<std::mutex> lock(g_mu);
  std::printf(
      "[callback] %s node=%llu original=%llu graph=%u type=%d tid=%ld inside_launch=%d "
      "launch_corr=%u\n",
      cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED ? "GRAPHNODE_CREATED" : "GRAPHNODE_CLONED",
      static_cast<unsigned long long>(id), static_cast<unsigned long long>(orig), graph,
      static_cast<int>(g->nodeType), Tid(), t_in_launch ? 1 : 0, t_launch_corr);
  if (g->nodeType != CU_GRAPH_NODE_TYPE_KERNEL) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED && g_created == 0) {
    g_created = id;
    g_created_inside = t_in_launch;
    g_created_tid = Tid();
    g_created_during_corr = t_launch_corr;
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED &&
             (orig == g_created || g_clones.count(orig))) {
    g_clones.insert(id);
  }
}

constexpr size_t kBuf = 8 << 20;
void CUPTIAPI Request(uint8_t** b, size_t* size, size_t* max) {
  *b = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBuf));
  *size = kBuf;
  *max = 0;
}
void CUPTIAPI Complete(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(b, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::printf("[kernel] corr=%u graphId=%u graphNodeId=%llu start=%llu\n", k->correlationId,
                  k->graphId, static_cast<unsigned long long>(k->graphNodeId),
                  static_cast<unsigned long long>(k->start));
      if (k->graphNodeId != 0) {
        ++g_replay_kernels;
        g_replay_nodes.push_back(k->graphNodeId);
      }
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      std::printf("[external] kind=%d external=%llu corr=%u\n", static_cast<int>(e->externalKind),
                  static_cast<unsigned long long>(e->externalId), e->correlationId);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      const char* name = nullptr;
      cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name);
      std::printf("[driver] %s corr=%u start=%llu\n", name ? name : "?", a->correlationId,
                  static_cast<unsigned long long>(a->start));
    }
  }
  std::free(b);
}

}  // namespace

int main() {
  CUpti_SubscriberHandle sub;
  CK(cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr));
  CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
  CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
  CK(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
                         CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  CK(cuptiActivityRegisterCallbacks(Request, Complete));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));

  int* d = nullptr;
  CK(cudaMalloc(&d, 32 * sizeof(int)));
  CK(cudaMemset(d, 0, 32 * sizeof(int)));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  CUfunction fn;
  CK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&fn),
                         reinterpret_cast<const void*>(probe_kernel)));
  void* args[] = {&d};
  CUlaunchConfig cfg = {};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 32;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;

  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 777));
  g_launch_tid = Tid();
  CK(cuLaunchKernelEx(&cfg, fn, args, nullptr));
  uint64_t popped = 0;
  CK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &popped));
  cudaGraph_t graph;
  CK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec1, exec2;
  CK(cudaGraphInstantiate(&exec1, graph, 0));
  CK(cudaGraphInstantiate(&exec2, graph, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec1, s));
  for (int i = 0; i < 2; ++i) CK(cudaGraphLaunch(exec2, s));
  CK(cudaStreamSynchronize(s));
  int h[32];
  CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  CK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));

  std::set<uint64_t> seen(g_replay_nodes.begin(), g_replay_nodes.end());
  bool known = !g_replay_nodes.empty();
  int on_original = 0, on_clone = 0;
  for (uint64_t n : g_replay_nodes) {
    if (n == g_created) {
      ++on_original;
    } else if (g_clones.count(n)) {
      ++on_clone;
    } else {
      known = false;
    }
  }
  const bool inside = g_created != 0 && g_created_inside && g_created_tid == g_launch_tid;
  std::printf("FACT created_on_launching_thread_inside_launch=%s (node %llu, launch corr %u)\n",
              inside ? "yes" : "no", static_cast<unsigned long long>(g_created),
              g_created_during_corr);
  std::printf("FACT clones_reported=%s (%zu clones)\n", g_clones.empty() ? "no" : "yes",
              g_clones.size());
  std::printf("FACT replay_node_is_known=%s (%d on the created node, %d on clones, %zu distinct)\n",
              known ? "yes" : "no", on_original, on_clone, seen.size());
  std::printf("FACT one_kernel_record_per_replay=%s (%d graph kernel records for 5 replays)\n",
              g_replay_kernels == 5 ? "yes" : "no", g_replay_kernels);
  std::printf("graph_probe: app result %d (expect 5)\n", h[0]);
  const bool ok = inside && known && g_replay_kernels == 5 && h[0] == 5;
  std::printf("graph_probe: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
