#include "ring_intake.h"

#include <algorithm>
#include <cstring>

namespace aon::collector {

std::string RingIntake::Take(const ring::Entry& e, RecordBatches& into, FlightWatch* watch,
                             uint64_t now_ns) {
  if (e.type == static_cast<uint16_t>(ring::EntryType::kString)) {
    TakeString(e);
    return "";
  }
  const RecordKind kind = into.Add(e);
  ++records_;
  return Note(kind, into, watch, now_ns);
}

void RingIntake::TakeString(const ring::Entry& e) {
  uint32_t id;
  std::memcpy(&id, e.payload, 4);
  if (id == 0) return;
  if (id >= kMaxStringId || id >= taken_ + kMaxIdLead) {
    ++refused_strings_;
    return;
  }
  std::string s(reinterpret_cast<const char*>(e.payload) + 4, e.payload_bytes - 4u);
  if (s.size() == ring::kMaxStringBytes && !cut_strings_.insert(s).second) {
    s += " #" + std::to_string(id);  // two long names cut to the same prefix
  }
  if (id >= strings_.size()) {
    strings_.resize(id + 1);
    have_.resize(id + 1, 0);
  }
  if (have_[id] == 0 && id >= written_) {
    strings_[id] = std::move(s);
    have_[id] = 1;
    ++taken_;
  }
}

std::string RingIntake::Note(RecordKind kind, const RecordBatches& into, FlightWatch* watch,
                             uint64_t now_ns) {
  switch (kind) {
    case RecordKind::kNvtx: {
      const NvtxRecord& n = into.Of<NvtxRecord>().back();
      last_record_ns_ = std::max(last_record_ns_, n.end_ns);
      if (watch != nullptr && n.name_id < strings_.size()) {
        return watch->OnNvtxRange(n, strings_[n.name_id]);
      }
      break;
    }
    case RecordKind::kNccl:
      if (watch != nullptr) watch->OnNccl(now_ns);
      last_record_ns_ = std::max(last_record_ns_, into.Of<NcclRecord>().back().start_ns);
      break;
    case RecordKind::kKernel:
      last_record_ns_ = std::max(last_record_ns_, into.Of<KernelRecord>().back().end_ns);
      break;
    case RecordKind::kApi:
      last_record_ns_ = std::max(last_record_ns_, into.Of<ApiRecord>().back().end_ns);
      break;
    case RecordKind::kSteps: {
      const StepRecord& s = into.Of<StepRecord>().back();
      if (!steps_.seen || s.step + 1 >= steps_.begun ||
          s.source != static_cast<uint8_t>(steps_.source)) {
        steps_.seen = true;
        steps_.begun = s.step + 1;
        steps_.begun_ns = s.end_ns;
        steps_.step_ns = s.end_ns > s.start_ns ? s.end_ns - s.start_ns : 0;
        if (steps_.step_ns > 0 && (steps_.fastest_ns == 0 || steps_.step_ns < steps_.fastest_ns))
          steps_.fastest_ns = steps_.step_ns;
        steps_.source = static_cast<StepSource>(s.source);
      }
      break;
    }
    default:
      break;
  }
  return "";
}

std::span<const std::string> RingIntake::Unwritten(bool final) {
  if (final) {
    for (size_t i = written_; i < strings_.size(); ++i) {
      if (have_[i] == 0) {
        strings_[i] = "<name " + std::to_string(i) + " lost: ring full>";
        have_[i] = 1;
      }
    }
  }
  size_t end = written_;
  while (end < strings_.size() && have_[end] != 0) ++end;
  return std::span<const std::string>(strings_).subspan(written_, end - written_);
}

}  // namespace aon::collector
