// Steps of a JAX/XLA program that marks none (docs/jax.md): XLA's GPU runtime
// names an NVTX range around each execution of a compiled module,
// "XlaModule:#hlo_module=jit_step,program_id=7#", and a training loop runs its
// jitted step function once per iteration. XlaStepModule picks that module
// from what it sees and says which executions begin a step (source "xla",
// below NVTX step ranges: docs/always-on.md).
//
// The rule, from how such programs run: the step function is the program's
// largest graph (forward, backward and update), so of the modules that repeat,
// its executions take the most host time each (XLA's runtime dispatches one
// thunk after another inside the range); helpers may run more often, a
// one-off (initialization) does not repeat. The choice is made once, when a
// module has been executed kDecideAt times: among the modules executed at
// least kMinRepeats times by then, the one with the largest mean host time
// per execution (a helper run up to 12 times per iteration, before the step
// function, leaves the step function its 3 executions by then). From then on each execution of the chosen module (by name: a
// recompilation keeps it) begins a step, unless one of its executions is
// still in flight (one process running it on several local GPUs at once: one
// step, not several). A program whose step is not its heaviest repeated
// module marks its steps itself (StepTraceAnnotation, aon.step(), NVTX).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace aon::agent {

// The module name of an XLA execution range of the program ("jit_step" from
// "XlaModule:#hlo_module=jit_step,program_id=7#"), or nullopt for any other
// name. Ranges without a program_id are not the program's: XLA's autotuner
// runs candidate fusions as modules of their own while it compiles
// ("XlaModule:#hlo_module=gemm_fusion_dot.2#", tens of times each: seen with
// JAX 0.11 on an H100), before the program's first step.
std::optional<std::string> XlaModuleName(std::string_view range_name);

class XlaStepModule {
 public:
  static constexpr uint64_t kDecideAt = 48;
  static constexpr uint64_t kMinRepeats = 3;

  // An execution of `module` began; true when it begins a step.
  bool Began(const std::string& module);
  // That execution ended after `host_ns`.
  void Ended(const std::string& module, uint64_t host_ns);
  // The chosen module ("" while undecided).
  std::string chosen() const;

 private:
  struct Seen {
    uint64_t executions = 0;
    uint64_t host_ns = 0;
    uint64_t first_seen = 0;
    int in_flight = 0;
  };
  void MaybeDecide();  // under mu_

  mutable std::mutex mu_;
  std::map<std::string, Seen> seen_;
  std::string chosen_;
  uint64_t order_ = 0;
};

}  // namespace aon::agent
