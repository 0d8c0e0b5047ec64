// The analyses behind aon-report, one per file in this folder, each behind the
// same small interface: an Analysis reads the timeline and the parts of the
// report that the analyses it `needs` have filled, and fills its own part.
// Analyze() (analyze.cc) runs AnalysisTable() in order; the table's order is
// checked against `needs` by tests/unit/report/analysis_table_test.cc.
//
// Each file also keeps its analysis callable on its own as a plain function
// (DetectSteps, ComputeBreakdown, ... in aon/report/report.h): tests call them on
// small timelines with known answers.
//
// Also here: helpers that several analyses share (intervals.cc).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "aon/report/report.h"

namespace aon::report {

struct Analysis {
  const char* name;   // "steps"
  const char* needs;  // names of the analyses it reads, comma-separated ("" = none)
  const char* fills;  // the Report members it writes
  void (*run)(const Timeline& t, Report* r);
};

// One per file of this folder.
extern const Analysis kStepsAnalysis;          // steps.cc
extern const Analysis kCaptureAnalysis;        // capture.cc
extern const Analysis kLossAnalysis;           // loss.cc
extern const Analysis kBreakdownAnalysis;      // breakdown.cc
extern const Analysis kKernelsAnalysis;        // kernels.cc
extern const Analysis kCommunicationAnalysis;  // communication.cc
extern const Analysis kCompileAnalysis;        // compile.cc
extern const Analysis kIdleAnalysis;           // idle.cc
extern const Analysis kMemoryAnalysis;         // memory.cc
extern const Analysis kNvtxAnalysis;           // nvtx.cc
extern const Analysis kHeatAnalysis;           // heat.cc
extern const Analysis kTorchAnalysis;          // torch_ops.cc
extern const Analysis kXlaAnalysis;            // xla.cc
extern const Analysis kCountersAnalysis;       // counters.cc

// Every analysis, each after the ones it needs.
std::span<const Analysis* const> AnalysisTable();

// ---- Shared helpers (intervals.cc) --------------------------------------------------

std::string Lower(std::string s);
// A range name (NormalizeRangeName'd) that names steps: "step #", "iteration #", ...
// (steps.cc).
bool IsStepRangeName(const std::string& normalized);
bool IsNcclKernelName(const std::string& name);
double Median(std::vector<double> v);
// The `n` names with the most GPU time of `by_name` (string id -> ns), most first
// (ties by name).
std::vector<std::pair<std::string, uint64_t>> TopKernels(
    const StringTable& strings, const std::map<uint32_t, uint64_t>& by_name, size_t n);
// Index of the window in `windows` (sorted by start) holding `at`, or -1.
int32_t StepOf(const std::vector<Interval>& windows, uint64_t at);
// The rank's steps an analysis can place its records in, or nullptr when it has
// none: for GPU activity (`gpu`), the steps whose GPU activity the timeline holds
// (Steps::GpuSteps: only the captured ones in a budgeted job); for records of the
// continuous tier (NCCL operations), every step.
const std::vector<Interval>* StepWindows(const Steps* steps, uint32_t rank, bool gpu = true);
// Steps the rank ran / steps of StepWindows(steps, rank, gpu): what a steady
// per-step total over the captured steps is scaled by to stand for the whole run
// (1 without capture windows).
double RunScale(const Steps* steps, uint32_t rank, bool gpu = true);

}  // namespace aon::report
