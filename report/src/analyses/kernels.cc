// Kernels: per demangled name, count, total, mean, stddev, min, max, per rank and
// the most common launch configuration; families (GEMM, attention, ...) from the
// name.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "analyses/analysis.h"

namespace aon::report {

const char* KernelFamilyName(KernelFamily f) {
  switch (f) {
    case KernelFamily::kGemm:
      return "GEMM";
    case KernelFamily::kAttention:
      return "attention";
    case KernelFamily::kElementwise:
      return "elementwise";
    case KernelFamily::kReduction:
      return "reduction";
    case KernelFamily::kNccl:
      return "NCCL";
    case KernelFamily::kCopy:
      return "copy";
    case KernelFamily::kOther:
      return "other";
  }
  return "other";
}

namespace {

bool Has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

}  // namespace

KernelFamily ClassifyKernel(const std::string& name) {
  if (IsNcclKernelName(name)) return KernelFamily::kNccl;
  const std::string s = Lower(name);
  if (Has(s, "flash") || Has(s, "attention") || Has(s, "fmha") || Has(s, "sdpa") || Has(s, "attn"))
    return KernelFamily::kAttention;
  if (Has(s, "gemm") || Has(s, "gemv") || Has(s, "cutlass") || Has(s, "cublas") ||
      Has(s, "matmul") || Has(s, "xmma") || Has(s, "wgmma") || Has(s, "sm90_") || Has(s, "sm80_") ||
      Has(s, "conv"))
    return KernelFamily::kGemm;
  if (Has(s, "reduce") || Has(s, "softmax") || Has(s, "norm") || Has(s, "reduction") ||
      Has(s, "_sum") || Has(s, "argmax") || Has(s, "cross_entropy") || Has(s, "nll_loss"))
    return KernelFamily::kReduction;
  if (Has(s, "memcpy") || Has(s, "copy") || Has(s, "cat_") || Has(s, "transpose"))
    return KernelFamily::kCopy;
  if (Has(s, "elementwise") || Has(s, "vectorized") || Has(s, "unrolled") || Has(s, "pointwise") ||
      Has(s, "activation") || Has(s, "relu") || Has(s, "gelu") || Has(s, "fill") ||
      Has(s, "adam") || Has(s, "foreach") || Has(s, "mul") || Has(s, "add"))
    return KernelFamily::kElementwise;
  return KernelFamily::kOther;
}

std::vector<KernelStats> TopKernels(const Timeline& t) {
  struct Acc {
    uint64_t count = 0, total = 0, min = UINT64_MAX, max = 0;
    double sumsq = 0;
    std::map<uint32_t, uint64_t> per_rank;
    std::map<std::string, uint64_t> configs;
  };
  std::unordered_map<uint32_t, Acc> acc;
  for (const auto& m : t.kernels) {
    const KernelRecord& k = m.record;
    const uint64_t d = k.end_ns > k.start_ns ? k.end_ns - k.start_ns : 0;
    Acc& a = acc[k.name_id];
    ++a.count;
    a.total += d;
    a.sumsq += static_cast<double>(d) * d;
    a.min = std::min(a.min, d);
    a.max = std::max(a.max, d);
    a.per_rank[m.rank] += d;
    if (a.configs.size() < 64) {
      std::string cfg = "grid(" + std::to_string(k.grid_x) + "," + std::to_string(k.grid_y) + "," +
                        std::to_string(k.grid_z) + ") block(" + std::to_string(k.block_x) + "," +
                        std::to_string(k.block_y) + "," + std::to_string(k.block_z) + ")";
      if (k.registers_per_thread) cfg += " regs " + std::to_string(k.registers_per_thread);
      const uint32_t smem = k.static_shared_bytes + k.dynamic_shared_bytes;
      if (smem) cfg += " smem " + std::to_string(smem);
      ++a.configs[cfg];
    }
  }
  std::vector<KernelStats> out;
  for (auto& [id, a] : acc) {
    KernelStats s;
    s.name = t.strings.Get(id);
    if (s.name.empty()) s.name = "(unnamed kernel)";
    s.family = ClassifyKernel(s.name);
    s.count = a.count;
    s.total_ns = a.total;
    s.min_ns = a.min;
    s.max_ns = a.max;
    s.mean_ns = static_cast<double>(a.total) / a.count;
    s.stddev_ns = std::sqrt(std::max(0.0, a.sumsq / a.count - s.mean_ns * s.mean_ns));
    s.per_rank_ns = std::move(a.per_rank);
    uint64_t best = 0;
    for (const auto& [cfg, n] : a.configs) {
      if (n > best) best = n, s.launch_config = cfg;
    }
    if (a.configs.size() > 1)
      s.launch_config += " (+" + std::to_string(a.configs.size() - 1) + " more)";
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

const Analysis kKernelsAnalysis = {
    "kernels", "", "kernels", [](const Timeline& t, Report* r) { r->kernels = TopKernels(t); }};

}  // namespace aon::report
