// Pack and Unpack of every message between merge processes (messages.h).
#include "messages.h"

#include <utility>

#include "aon/format/metadata_wire.h"
#include "pack.h"

namespace aon::merge {
namespace {

// The end of every Unpack: the whole input read, nothing malformed.
Status Finish(const Unpacker& u, std::string_view bytes, const char* what) {
  if (!u.ok()) {
    return Internal(std::string(what) + " of " + std::to_string(bytes.size()) +
                    " bytes is short or malformed (at byte " + std::to_string(u.position()) + ")");
  }
  if (!u.done()) {
    return Internal(std::string(what) + " of " + std::to_string(bytes.size()) + " bytes has " +
                    std::to_string(u.remaining()) + " bytes left over");
  }
  return Status::Ok();
}

template <typename E, E kLast>
E EnumFrom(Unpacker& u) {
  const uint64_t v = u.U64();
  if (v > static_cast<uint64_t>(kLast)) {
    u.Fail();
    return E{};
  }
  return static_cast<E>(v);
}

RankStatus RankStatusFrom(Unpacker& u) { return EnumFrom<RankStatus, RankStatus::kDamaged>(u); }

void PackListed(Packer& p, const std::vector<ListedFile>& files) {
  p.U64(files.size());
  for (const ListedFile& f : files) {
    p.Str(f.path);
    p.U64(f.bytes);
  }
}

std::vector<ListedFile> UnpackListed(Unpacker& u) {
  const uint64_t n = u.Count(2 * sizeof(uint64_t));
  std::vector<ListedFile> files(n);
  for (ListedFile& f : files) {
    f.path = u.Str();
    f.bytes = u.U64();
  }
  return files;
}

}  // namespace

// ---- StatusMessage ------------------------------------------------------------------

std::string Pack(const StatusMessage& m) {
  Packer p;
  p.U64(static_cast<uint64_t>(m.code));
  p.Str(m.message);
  return p.Take();
}

Status Unpack(std::string_view bytes, StatusMessage* m) {
  Unpacker u(bytes);
  m->code = EnumFrom<StatusCode, StatusCode::kInternal>(u);
  m->message = u.Str();
  return Finish(u, bytes, "status message");
}

// ---- ScanList -----------------------------------------------------------------------

std::string Pack(const ScanList& m) {
  Packer p;
  p.Bool(m.listed);
  PackListed(p, m.finals);
  PackListed(p, m.partials);
  p.Strs(m.joined);
  p.Strs(m.join_problems);
  return p.Take();
}

Status Unpack(std::string_view bytes, ScanList* m) {
  Unpacker u(bytes);
  m->listed = u.Bool();
  m->finals = UnpackListed(u);
  m->partials = UnpackListed(u);
  m->joined = u.Strs();
  m->join_problems = u.Strs();
  return Finish(u, bytes, "scan list");
}

// ---- CandidateSummaries ---------------------------------------------------------------

std::string Pack(const CandidateSummaries& m) {
  Packer p;
  p.U64(m.opened.size());
  for (const CandidateSummary& c : m.opened) {
    const OpenResult& f = c.found;
    p.U64(c.index);
    p.U64(static_cast<uint64_t>(f.status));
    p.Str(f.reason);
    p.Bool(f.meta_read);
    if (f.meta_read) p.Str(EncodeRankMetadata(f.meta));
    for (size_t k = 0; k < kRecordKindCount; ++k) {
      p.Bool(f.has_table[k]);
      p.U64(f.table_rows[k]);
    }
    p.Strs(f.open_problems);
    p.Str(f.damage);
  }
  return p.Take();
}

Status Unpack(std::string_view bytes, CandidateSummaries* m) {
  Unpacker u(bytes);
  // The smallest summary: index, status, reason length, meta_read, the tables,
  // problems, damage length.
  constexpr size_t kMinSummary = (6 + 2 * kRecordKindCount) * sizeof(uint64_t);
  m->opened.assign(u.Count(kMinSummary), CandidateSummary{});
  for (CandidateSummary& c : m->opened) {
    if (!u.ok()) break;
    OpenResult& f = c.found;
    c.index = u.U64();
    f.status = RankStatusFrom(u);
    f.reason = u.Str();
    f.meta_read = u.Bool();
    if (f.meta_read) {
      const std::string text = u.Str();
      if (u.ok()) {
        auto meta = DecodeRankMetadata(text);
        if (!meta.ok()) {
          return Internal("candidate summary of candidate " + std::to_string(c.index) +
                          ": its metadata does not decode: " + meta.status().message());
        }
        f.meta = std::move(meta).value();
      }
    }
    for (size_t k = 0; k < kRecordKindCount; ++k) {
      f.has_table[k] = u.Bool();
      f.table_rows[k] = u.U64();
    }
    f.open_problems = u.Strs();
    f.damage = u.Str();
  }
  return Finish(u, bytes, "candidate summaries");
}

// ---- StringUnion ----------------------------------------------------------------------

std::string Pack(const StringUnion& m) { return PackStrings(m.strings); }

std::string PackStrings(std::span<const std::string> strings) {
  Packer p;
  p.Strs(strings);
  return p.Take();
}

Status Unpack(std::string_view bytes, StringUnion* m) {
  Unpacker u(bytes);
  m->strings = u.Strs();
  return Finish(u, bytes, "string union");
}

Status UnpackInto(std::string_view bytes, StringTable* table) {
  Unpacker u(bytes);
  u.EachStr([](uint64_t) {}, [table](std::string_view s) { table->Intern(s); });
  return Finish(u, bytes, "string union");
}

// ---- RowCount, StartSamples --------------------------------------------------------------

std::string Pack(const RowCount& m) {
  Packer p;
  p.U64(m.rows);
  return p.Take();
}

Status Unpack(std::string_view bytes, RowCount* m) {
  Unpacker u(bytes);
  m->rows = u.U64();
  return Finish(u, bytes, "row count");
}

std::string Pack(const StartSamples& m) {
  Packer p;
  p.U64s(m.starts);
  return p.Take();
}

Status Unpack(std::string_view bytes, StartSamples* m) {
  Unpacker u(bytes);
  m->starts = u.U64s();
  return Finish(u, bytes, "start samples");
}

// ---- ProcessOutcome -----------------------------------------------------------------------

std::string Pack(const ProcessOutcome& m) {
  Packer p;
  p.U64(static_cast<uint64_t>(m.status.code));
  p.Str(m.status.message);
  for (uint64_t n : m.written) p.U64(n);
  p.U64(m.ranks.size());
  for (const RankResult& r : m.ranks) {
    p.U64(r.rank);
    p.U64(r.records);
    p.U64(r.first_ns);
    p.U64(r.last_ns);
    p.U64(r.bad_string_ids);
    for (uint64_t n : r.damaged) p.U64(n);
    p.U64(static_cast<uint64_t>(r.status));
    p.Str(r.message);
    p.I64(r.nccl_gpu_clock_offset_ns);
    p.I64(r.nccl_gpu_clock_pairs);
    p.I64(r.nccl_gpu_clock_spread_ns);
    p.Strs(r.notes);
    p.Strs(r.problems);
    p.U64(r.devices.size());
    p.Raw(r.devices.data(), r.devices.size() * sizeof(DeviceInfo));
  }
  return p.Take();
}

Status Unpack(std::string_view bytes, ProcessOutcome* m) {
  Unpacker u(bytes);
  m->status.code = EnumFrom<StatusCode, StatusCode::kInternal>(u);
  m->status.message = u.Str();
  for (uint64_t& n : m->written) n = u.U64();
  // The smallest rank result: 10 numbers, the damaged counts, the message's
  // length, three list counts.
  constexpr size_t kMinRank = (13 + kRecordKindCount) * sizeof(uint64_t);
  m->ranks.assign(u.Count(kMinRank), RankResult{});
  for (RankResult& r : m->ranks) {
    if (!u.ok()) break;
    const uint64_t rank = u.U64();
    if (rank > UINT32_MAX) u.Fail();
    r.rank = static_cast<uint32_t>(rank);
    r.records = u.U64();
    r.first_ns = u.U64();
    r.last_ns = u.U64();
    r.bad_string_ids = u.U64();
    for (uint64_t& n : r.damaged) n = u.U64();
    r.status = RankStatusFrom(u);
    r.message = u.Str();
    r.nccl_gpu_clock_offset_ns = u.I64();
    r.nccl_gpu_clock_pairs = u.I64();
    r.nccl_gpu_clock_spread_ns = u.I64();
    r.notes = u.Strs();
    r.problems = u.Strs();
    r.devices.resize(u.Count(sizeof(DeviceInfo)));
    u.Raw(r.devices.data(), r.devices.size() * sizeof(DeviceInfo));
  }
  return Finish(u, bytes, "process outcome");
}

}  // namespace aon::merge
