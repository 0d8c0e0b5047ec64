// What the NVTX ranges of frameworks mean, read the same way by every tool
// that looks at them (aon-report, the trace exports): XLA's execution and
// thunk ranges, and the ranges that mark compilation (XLA's compiler,
// torch.compile through AON's hook or Dynamo's own). docs/jax.md,
// report/README.md ("compilation").
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace aon {

// XLA's GPU runtime opens an NVTX range around each execution of a module
// ("XlaModule:#hlo_module=jit_step,program_id=3#") and each thunk it runs
// ("Thunk:#name=jit(step)/dot_general,hlo_op=gemm_fusion_dot.4,...#": one HLO
// instruction, a kernel launch, a command buffer or a collective). Modules
// without a program_id are XLA's autotuner running candidate fusions while it
// compiles.
struct XlaRange {
  bool thunk = false;    // a Thunk range (else an XlaModule execution)
  bool program = false;  // it carries a program_id (an execution of the program's module)
  std::string hlo_op;    // Thunk: the HLO instruction ("gemm_fusion_dot.4")
  std::string jax_op;    // Thunk: the JAX operation ("jit(step)/dot_general"), may be ""
  std::string module;    // XlaModule: the HLO module ("jit_step")
};
// The fields of one of XLA's range names (an optional "TSL:" prefix), or nullopt
// for any other name. A value may hold commas: a field starts only where a comma
// is followed by "key=".
std::optional<XlaRange> ParseXlaRange(std::string_view name);

// The framework a range marks compilation of ("XLA", "torch.compile"), or ""
// (`domain` and `name` as recorded, not normalized): XLA's compiler ranges
// (after an optional "TSL:", names starting XlaCompile, XlaPass, XlaEmit,
// XlaOptimize, XlaAutotun, XlaLower, XlaBuild, XlaCodegen, HloPass; not
// XlaModule or Thunk, which are running work), AON's hook's ("AON" domain,
// "torch.compile ..."), Dynamo's "... (dynamo_timed)".
std::string CompileFramework(std::string_view domain, std::string_view name);

// `name` without the "TSL:" prefix some exports of XLA's ranges carry.
std::string_view WithoutTslPrefix(std::string_view name);

}  // namespace aon
