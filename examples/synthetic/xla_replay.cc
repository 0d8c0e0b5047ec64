// aon-synthetic-xla: replays a JAX/XLA program's host-side annotation sequence
// on the SYNTHETIC GPU, for CI tests of AON's XLA attribution (docs/jax.md).
// Not a GPU workload and never presented as one (source = "synthetic").
//
//   aon-synthetic-xla REPLAY_FILE [--steps N] [--no-step-hook]
//
// The replay file is one step of the program, run N times (default 10), one
// command per line ('#' starts a comment):
//   step                  a step boundary from AON's JAX hook (aon_jax_step, as
//                         jax.profiler.StepTraceAnnotation gives under the hook);
//                         skipped with --no-step-hook (a program that marks no
//                         steps: AON then takes them from XLA's executions)
//   push DOMAIN NAME...   an NVTX push/pop range (DOMAIN "-": the default
//                         domain), as XLA's runtime emits around executions and
//                         thunks; NAME is the rest of the line
//   pop                   ends the innermost range of the last push's domain
//   kernel NS NAME...     a kernel of NS nanoseconds, launched on this thread
//   graph_kernel NS NAME...
//                         a kernel of a command buffer (a CUDA graph XLA builds
//                         for a run of thunks): captured into the graph in the
//                         first step, launched by graph_launch only; in later
//                         steps nothing (the ranges around it are still
//                         pushed and popped, as XLA's runtime does every step)
//   graph_launch          the first step: ends the capture (instantiates the
//                         graph); every step: one launch of the graph
//   sync                  waits for the device
//   first COMMAND...      COMMAND in the first step only (XLA compiling the
//                         module at its first call)
// It prints "AON_XLA kernel=<name>\tthunk=<range>\tmodule=<range>" for every
// kernel of the first step (the innermost Thunk and XlaModule range names open
// around its launch, as written) so a test can compare them with the reader's
// columns, then "DONE steps=N kernels=K".
#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "aon/synthetic_device.h"
#include "fake_driver.h"

namespace {

struct Command {
  std::string op, domain, text;
  uint64_t ns = 0;
  bool first = false;  // the first step only
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: aon-synthetic-xla REPLAY_FILE [--steps N] [--no-step-hook]\n");
    return 2;
  }
  int steps = 10;
  bool step_hook = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--no-step-hook") {
      step_hook = false;
    } else {
      std::fprintf(stderr, "aon-synthetic-xla: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "aon-synthetic-xla: cannot read %s\n", argv[1]);
    return 1;
  }
  std::vector<Command> body;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    Command c;
    words >> c.op;
    if (c.op == "first") {
      c.first = true;
      words >> c.op;
    }
    if (c.op == "push") {
      words >> c.domain;
    } else if (c.op == "kernel" || c.op == "graph_kernel") {
      words >> c.ns;
    } else if (c.op != "pop" && c.op != "step" && c.op != "sync" && c.op != "graph_launch") {
      std::fprintf(stderr, "aon-synthetic-xla: %s:%d: unknown command '%s'\n", argv[1], n,
                   c.op.c_str());
      return 1;
    }
    std::getline(words >> std::ws, c.text);
    body.push_back(c);
  }
  const AonSyntheticDeviceV1* gpu = aon::synthetic::LoadFakeDriver("aon-synthetic-xla", true);
  if (gpu == nullptr) return 1;
  auto jax_step = aon::synthetic::AgentFunction<void (*)()>("aon_jax_step");
  std::map<std::string, nvtxDomainHandle_t> domains;
  std::vector<std::string> open_names;
  std::vector<nvtxDomainHandle_t> open_domains;
  if (gpu->struct_size < offsetof(AonSyntheticDeviceV1, launch_graph) + sizeof(gpu->launch_graph)) {
    std::fprintf(stderr, "aon-synthetic-xla: the synthetic device has no CUDA graphs\n");
    return 1;
  }
  int kernels = 0;
  bool capturing = false;
  uint64_t graph = 0;
  int graph_nodes = 0;
  // The innermost Thunk and XlaModule range names open now, as written.
  auto print_truth = [&](const std::string& kernel) {
    std::string thunk, module;
    for (const std::string& n : open_names) {
      if (n.rfind("Thunk:#", 0) == 0) thunk = n;
      if (n.rfind("XlaModule:#", 0) == 0) module = n;
    }
    std::printf("AON_XLA kernel=%s\tthunk=%s\tmodule=%s\n", kernel.c_str(), thunk.c_str(),
                module.c_str());
  };
  for (int s = 0; s < steps; ++s) {
    for (const Command& c : body) {
      if (c.first && s > 0) continue;
      if (c.op == "step") {
        if (jax_step != nullptr && step_hook) jax_step();
      } else if (c.op == "push") {
        nvtxDomainHandle_t d = nullptr;
        if (c.domain != "-") {
          auto it = domains.find(c.domain);
          if (it == domains.end())
            it = domains.emplace(c.domain, nvtxDomainCreateA(c.domain.c_str())).first;
          d = it->second;
        }
        nvtxEventAttributes_t a{};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = c.text.c_str();
        nvtxDomainRangePushEx(d, &a);
        open_names.push_back(c.text);
        open_domains.push_back(d);
      } else if (c.op == "pop") {
        if (open_domains.empty()) continue;
        nvtxDomainRangePop(open_domains.back());
        open_domains.pop_back();
        open_names.pop_back();
      } else if (c.op == "kernel") {
        gpu->launch_kernel(0, c.text.c_str(), c.ns, 1, 128);
        ++kernels;
        if (s == 0) print_truth(c.text);
      } else if (c.op == "graph_kernel") {
        if (graph != 0) continue;  // recorded in the first step
        if (!capturing) capturing = gpu->begin_capture(0) == 0;
        gpu->launch_kernel(0, c.text.c_str(), c.ns, 1, 128);
        ++graph_nodes;
        print_truth(c.text);  // the instruction XLA recorded it for
      } else if (c.op == "graph_launch") {
        if (capturing) {
          capturing = false;
          if (gpu->end_capture(0, &graph) != 0) graph = 0;
        }
        if (graph == 0) {
          std::fprintf(stderr, "aon-synthetic-xla: no graph to launch\n");
          return 1;
        }
        gpu->launch_graph(graph, 0);
        kernels += graph_nodes;
      } else if (c.op == "sync") {
        gpu->synchronize(0);
      }
    }
  }
  gpu->synchronize(0);
  std::printf("DONE steps=%d kernels=%d\n", steps, kernels);
  return 0;
}
