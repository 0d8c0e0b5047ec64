// Always-on GPU metrics of every GPU of the node, read by the node collector
// through NVML GPU Performance Monitoring (GPM; Hopper and newer), outside the
// application: no CUPTI, nothing in the ranks' processes (docs/counters.md).
//
// The driver's libnvidia-ml.so.1 is loaded at run time (the build needs neither
// it nor nvml.h: nvml_abi.h). AON_NVML_LIBRARY names another library instead:
// the tests point it at the labeled fake of tests/fakes/fake_nvml.cc.
//
// Every `interval` the collector takes one GPM sample per GPU; each pair of
// consecutive samples gives one CounterRecord per metric, averaged over the
// interval between them (on the host timebase). Whatever is missing (no
// driver, a GPU without GPM, a metric the GPU lacks, no permission, another
// tool holding the performance monitor) is said once, in words that say what
// a site can do, and the rest goes on; nothing here can fail the job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aon/base/gpu_uuid.h"
#include "aon/format/records.h"

namespace aon::collector {

class GpmCounters {
 public:
  ~GpmCounters();
  GpmCounters(const GpmCounters&) = delete;
  GpmCounters& operator=(const GpmCounters&) = delete;

  // Loads NVML and finds the node's GPUs. Null when there is nothing to sample
  // (no library, NVML not initialized, no GPU with GPM); `notes` says why.
  static std::unique_ptr<GpmCounters> Open(std::vector<std::string>* notes);

  // Takes a sample of every GPU at `now_ns` and appends the metrics of the
  // interval since its previous sample to `out`. Problems go to `notes`, once
  // each (a GPU whose monitor another tool holds is retried every 10 s).
  void Sample(uint64_t now_ns, std::vector<CounterRecord>* out, std::vector<std::string>* notes);

  // GPUs being sampled now.
  size_t active_gpus() const;
  const std::string& library() const { return library_; }

 private:
  struct Gpu;
  struct Api;
  GpmCounters() = default;
  std::string Error(int code) const;

  std::string library_;
  bool fake_ = false;  // tests/fakes/fake_nvml.cc: rows are labeled synthetic
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
};

}  // namespace aon::collector
