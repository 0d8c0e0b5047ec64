// The trace-event model (trace_events.h) as Chrome trace-event JSON, which
// ui.perfetto.dev and chrome://tracing load: trace.json and overview.json.
//
//   {"traceEvents":[            one event per line
//     {"ph":"M","name":"process_name","pid":R,"tid":0,"args":{"name":...}}   + process_sort_index
//     {"ph":"M","name":"thread_name",...}   + thread_sort_index for made-up tracks
//     {"ph":"X","name":..,"cat":..,"pid":..,"tid":..,"ts":..,"dur":..,"args":{..}}
//     {"ph":"s"|"f",...,"id":..}            flow_begin / flow_end ("f" binds to the
//                                           enclosing slice: "bp":"e")
//     {"ph":"b"|"e",...,"id":..}            async slices; {"ph":"i",..,"s":"t"} instants
//     {"ph":"C","name":<track>,...,"args":{<series>:<value>}}  counters (tid 0)
//   ],"displayTimeUnit":"ns","metadata":{...}}
// ts/dur: microseconds with 3 decimals (exact ns) from t0. Chained flows
// (flow_chain) are not written: the JSON trace keeps its API -> GPU arrows only.
// Written through the one JSON writer (aon/base/json_writer.h), flushed every MiB.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "aon/base/json_writer.h"
#include "output_file.h"
#include "trace_events.h"

namespace aon::merge {

// The "metadata" object of an export (trace.json, overview.json, the Perfetto
// index): keys in order, each a string or a number.
using TraceMetadata = std::vector<std::pair<std::string, std::variant<std::string, uint64_t>>>;
void WriteTraceMetadata(JsonWriter& json, const TraceMetadata& metadata);

class JsonTraceWriter final : public trace::TraceSink {
 public:
  using MetaValue = TraceMetadata::value_type::second_type;

  // Writes the document's opening into *file.
  JsonTraceWriter(AtomicTextFile* file, uint64_t t0);

  void OnProcess(const trace::ProcessInfo& process) override;
  void OnTrack(uint32_t id, const trace::TrackInfo& track) override;
  void OnSlice(const trace::Slice& slice) override;
  void OnCounter(const trace::CounterSample& sample) override;

  // Closes the events, writes "metadata" (in this order) and flushes.
  void Finish(const TraceMetadata& metadata);

  uint64_t events() const { return events_; }

 private:
  struct TrackRef {
    uint32_t pid = 0;
    int64_t tid = 0;
    std::string name;      // counters
    std::string category;  // counters
    std::string series;    // counters
  };
  void Begin(char ph, std::string_view name, std::string_view cat, uint32_t pid, int64_t tid);
  void End();
  void Ts(uint64_t t);
  void Args(std::span<const trace::Arg> args);
  void Metadata(std::string_view what, uint32_t pid, int64_t tid, std::string_view key,
                const trace::ArgValue& value);
  void Flow(char ph, const TrackRef& track, uint64_t id, uint64_t ts);

  AtomicTextFile* file_;
  uint64_t t0_;
  std::string buf_;
  JsonWriter json_;
  std::vector<TrackRef> tracks_;  // by track id
  uint64_t events_ = 0;
};

}  // namespace aon::merge
