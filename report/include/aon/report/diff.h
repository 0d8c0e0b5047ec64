// Run-to-run comparison (aon-diff): what changed between a base run and a new
// one, per step, so that runs of different lengths compare: the median step,
// and per kernel, framework operator, nn.Module (the report's top modules),
// NCCL function and GPU-idle cause its
// time per step, each change with its share of the step time's change,
// largest first.
//
// Per-step figures: GPU work (kernels, operators) over the steps whose GPU
// activity the timeline holds (a budgeted run's captured steps: windows
// against windows), NCCL over every step, idle causes in steady state (the
// report's: median per step over whole captured steps). Averaged over ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aon/report/report.h"

namespace aon::report {

struct DiffItem {
  std::string category;  // "kernel", "op", "module", "nccl", "idle"
  std::string name;
  double base_ns = 0, new_ns = 0;        // per step
  double base_count = 0, new_count = 0;  // per step (idle: gaps)
  double delta() const { return new_ns - base_ns; }
};

struct RankDiff {
  uint32_t rank = 0;
  double base_step_ns = 0, new_step_ns = 0;  // its median step
};

struct RunDiff {
  std::string base_job, new_job;
  uint32_t world_size = 0;
  double base_step_ns = 0, new_step_ns = 0;        // median step over every rank
  uint64_t base_steps = 0, new_steps = 0;          // steps of every rank
  uint64_t base_gpu_steps = 0, new_gpu_steps = 0;  // those with GPU activity traced
  std::vector<DiffItem> items;                     // largest |delta| first
  std::vector<RankDiff> ranks;                     // by rank
  std::vector<std::string> warnings;
  std::string not_comparable;  // why the two runs do not compare ("" = they do)
};

RunDiff DiffRuns(const Timeline& base, const Timeline& next);
std::string RenderDiffText(const RunDiff& d, size_t top);
std::string RenderDiffJson(const RunDiff& d);
// One self-contained HTML page (no scripts, no network): the summary, the
// ranks' median steps, every change.
std::string RenderDiffHtml(const RunDiff& d);

}  // namespace aon::report
