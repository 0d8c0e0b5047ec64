#include "correlation_ids.h"

namespace aon::agent {

uint32_t CorrelationIds::Map(uint32_t source_id) {
  if (source_id == 0) return 0;
  const uint32_t id = source_id + base_.load(std::memory_order_relaxed);
  uint32_t seen = max_.load(std::memory_order_relaxed);
  while (id > seen && !max_.compare_exchange_weak(seen, id, std::memory_order_relaxed)) {
  }
  return id;
}

void CorrelationIds::NextAttach() {
  base_.store(max_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace aon::agent
