// The RankMetadata field table (trace_format.h). Order: identity, clock,
// capture, completeness, NCCL clock: the order aon-inspect shows them in.
#include "aon/format/trace_format.h"

#include <algorithm>

namespace aon {

std::span<const MetaField> RankMetadataFields() {
  using M = RankMetadata;
  static const MetaField kFields[] = {
      {"job_id", &M::job_id, 0, "AON_JOB_ID, else SLURM_JOB_ID.step, else Open MPI's job id"},
      {"rank", &M::rank, 0, "rank in the job, from the launcher (-1 unknown)"},
      {"local_rank", &M::local_rank, 0, "rank on its node (-1 unknown)"},
      {"world_size", &M::world_size, 0, "ranks in the job (-1 unknown)"},
      {"local_size", &M::local_size, 0, "ranks on the node (-1 unknown)"},
      {"host", &M::host, 0, "SLURMD_NODENAME if set, else gethostname()"},
      {"pid", &M::pid, 0, "process id"},
      {"launcher", &M::launcher, 0,
       "where the identity came from: openmpi, slurm, torchrun, pmix, none"},
      {"clock_domain", &M::clock_domain, 0, "CLOCK_MONOTONIC: every timestamp in the file"},
      {"anchor_clock_ns", &M::anchor_clock_ns, 0,
       "the file's clock and CLOCK_REALTIME read back to back (with anchor_realtime_ns): "
       "wall = t - anchor_clock_ns + anchor_realtime_ns"},
      {"anchor_realtime_ns", &M::anchor_realtime_ns, 0, "see anchor_clock_ns"},
      {"clock_offset_ns", &M::clock_offset_ns, 0,
       "correction onto the job's reference clock: reference = t + clock_offset_ns + "
       "clock_drift_ppm x 1e-6 x (t - clock_reference_ns)"},
      {"clock_drift_ppm", &M::clock_drift_ppm, 0, "see clock_offset_ns"},
      {"clock_error_bound_ns", &M::clock_error_bound_ns, 0,
       "bound on that correction's error within the measured span, -1 = unknown"},
      {"clock_synchronized", &M::clock_synchronized, 0, "1 if the correction is known"},
      {"clock_reference_ns", &M::clock_reference_ns, 1, "see clock_offset_ns"},
      {"clock_leader_rank", &M::clock_leader_rank, 3,
       "-1: this rank measured its clock itself; else the rank whose measurement applies "
       "to it (same clock_id)"},
      {"clock_id", &M::clock_id, 3,
       "which CLOCK_MONOTONIC: <kernel boot id>/timens:<time namespace inode>; \"\" unknown"},
      {"source", &M::source, 0, "cupti (real GPU), synthetic (simulated GPU, labeled), none"},
      {"kinds", &M::kinds, 0, "record kinds enabled, comma-separated"},
      {"memory_cap_bytes", &M::memory_cap_bytes, 0, "the agent's hard memory cap"},
      {"agent_version", &M::agent_version, 0, "version of the agent that wrote the file"},
      {"start_ns", &M::start_ns, 0, "capture start on the host timebase"},
      {"end_ns", &M::end_ns, 0, "capture end on the host timebase"},
      {"end_reason", &M::end_reason, 0, "exit, signal SIGTERM, ..."},
      {"capture_mode", &M::capture_mode, 5,
       "budgeted (CUPTI in capture windows inside overhead_budget), full, or flight"},
      {"step_source", &M::step_source, 5,
       "what marked the steps: api, pytorch, jax, nvtx, xla, nccl, time slot, none (the steps table)"},
      {"steps", &M::steps, 5,
       "steps of step_source this rank ran (steps of a source it replaced are in the steps "
       "table, not counted here)"},
      {"captured_steps", &M::captured_steps, 5, "steps of step_source inside capture windows"},
      {"windows", &M::windows, 5, "capture windows opened on steps of step_source"},
      {"capture_period", &M::capture_period, 5,
       "the last capture period: a window every capture_period steps"},
      {"overhead_budget", &M::overhead_budget, 5,
       "the share of step time AON may cost (0.01 = 1 %; 0: none, the period was fixed "
       "or the mode is not budgeted)"},
      {"window_step_ratio", &M::window_step_ratio, 5,
       "median step time inside windows / outside them, measured in this process (0: not "
       "measured)"},
      {"duty_cycle", &M::duty_cycle, 5, "captured_steps / steps"},
      {"amortized_cost", &M::amortized_cost, 5,
       "the step time capture windows added, as a share of all step time (-1: not measured)"},
      {"truncated", &M::truncated, 2,
       "1 if the process ended without finishing its capture (killed): the trace stops early"},
      {"last_record_ns", &M::last_record_ns, 2,
       "the latest record time written (host timebase; 0 = unknown or none)"},
      {"capture_disabled", &M::capture_disabled, 11,
       "why this rank captured nothing (\"\": it captured): a setting it was given was refused"},
      {"unwritten_why", &M::unwritten_why, 12,
       "why this file's writer (the collector, or the rank without one) could not write some "
       "records it had (\"\": it wrote them all): "
       "its first error, naming ENOSPC, EDQUOT or EIO; unwritten_<kind> counts them"},
      {"collector_lost_ns", &M::collector_lost_ns, 11,
       "when the node collector exited while this rank ran (host timebase; 0: it did not): the "
       "rank wrote the rest itself, and aon-merge joins that file with the collector's .partial"},
      {"nccl_gpu_clock_offset_ns", &M::nccl_gpu_clock_offset_ns, 1,
       "NCCL %globaltimer -> host timebase: host = gpu + offset"},
      {"nccl_gpu_clock_pairs", &M::nccl_gpu_clock_pairs, 1,
       "NCCL kernels seen by both NCCL and CUPTI the offset was measured on (0: not calibrated)"},
      {"nccl_gpu_clock_spread_ns", &M::nccl_gpu_clock_spread_ns, 1,
       "10th..90th percentile range of those per-kernel offsets (-1: not calibrated)"},
  };
  return kFields;
}

void SetCaptureSummary(const RankMetadata& m, RankSummary* row) {
  row->steps = m.steps > 0 ? static_cast<uint64_t>(m.steps) : 0;
  row->captured_steps = m.captured_steps > 0 ? static_cast<uint64_t>(m.captured_steps) : 0;
  row->windows = static_cast<uint32_t>(std::max<int64_t>(0, m.windows));
  row->capture_period = static_cast<uint32_t>(std::max<int64_t>(0, m.capture_period));
  row->overhead_budget = m.overhead_budget;
  row->window_step_ratio = m.window_step_ratio;
  row->amortized_cost = m.amortized_cost;
  row->capture_mode = static_cast<uint8_t>(CaptureMode::kUnknown);
  for (const EnumValue& v : kCaptureModeValues) {
    if (m.capture_mode == v.name) row->capture_mode = static_cast<uint8_t>(v.value);
  }
}

}  // namespace aon
