#include "json_trace_writer.h"

namespace aon::merge {

namespace {
constexpr size_t kFlushBytes = 1 << 20;
}  // namespace

JsonTraceWriter::JsonTraceWriter(AtomicTextFile* file, uint64_t t0)
    : file_(file), t0_(t0), json_(&buf_) {
  json_.BeginObject();
  json_.Key("traceEvents");
  json_.BeginArray(JsonWriter::Layout::kOnePerLine);
}

// {"ph":..,"name":..,"cat":..,"pid":..,"tid":..  (closed by End()).
void JsonTraceWriter::Begin(char ph, std::string_view name, std::string_view cat, uint32_t pid,
                            int64_t tid) {
  ++events_;
  json_.BeginObject();
  json_.Key("ph");
  json_.String(std::string_view(&ph, 1));
  json_.Key("name");
  json_.String(name);
  if (!cat.empty()) {
    json_.Key("cat");
    json_.String(cat);
  }
  json_.Key("pid");
  json_.Uint(pid);
  json_.Key("tid");
  json_.Int(tid);
}

void JsonTraceWriter::End() {
  json_.EndObject();
  if (buf_.size() >= kFlushBytes) {
    file_->Write(buf_);
    buf_.clear();
  }
}

// Exact decimal microseconds from nanoseconds: no floating-point rounding.
void JsonTraceWriter::Ts(uint64_t t) {
  json_.Key("ts");
  json_.FixedPoint(t >= t0_ ? t - t0_ : t0_ - t, 3, t < t0_);
}

void JsonTraceWriter::Args(std::span<const trace::Arg> args) {
  if (args.empty()) return;
  json_.Key("args");
  json_.BeginObject();
  for (const trace::Arg& a : args) {
    json_.Key(a.key);
    if (const auto* u = std::get_if<uint64_t>(&a.value)) {
      json_.Uint(*u);
    } else if (const auto* i = std::get_if<int64_t>(&a.value)) {
      json_.Int(*i);
    } else if (const auto* d = std::get_if<double>(&a.value)) {
      json_.Double(*d, 6);
    } else if (const auto* s = std::get_if<std::string_view>(&a.value)) {
      json_.String(*s);
    } else if (const auto* v = std::get_if<trace::Dim3>(&a.value)) {
      json_.BeginArray();
      json_.Int(v->x);
      json_.Int(v->y);
      json_.Int(v->z);
      json_.EndArray();
    }
  }
  json_.EndObject();
}

void JsonTraceWriter::Metadata(std::string_view what, uint32_t pid, int64_t tid,
                               std::string_view key, const trace::ArgValue& value) {
  Begin('M', what, "", pid, tid);
  const trace::Arg arg{key, value};
  Args(std::span<const trace::Arg>(&arg, 1));
  End();
}

void JsonTraceWriter::OnProcess(const trace::ProcessInfo& process) {
  Metadata("process_name", process.pid, 0, "name", std::string_view(process.name));
  Metadata("process_sort_index", process.pid, 0, "sort_index", process.sort_index);
}

void JsonTraceWriter::OnTrack(uint32_t id, const trace::TrackInfo& track) {
  if (id >= tracks_.size()) tracks_.resize(id + 1);
  TrackRef& ref = tracks_[id];
  ref.pid = track.pid;
  ref.tid = track.tid;
  if (track.kind == trace::TrackKind::kCounter) {
    // A counter is named by its events; it has no row of its own to describe.
    ref.name = track.name;
    ref.category = track.category;
    ref.series = track.series;
    return;
  }
  Metadata("thread_name", track.pid, track.tid, "name", std::string_view(track.name));
  if (track.sort_index >= 0) {
    Metadata("thread_sort_index", track.pid, track.tid, "sort_index", track.sort_index);
  }
}

void JsonTraceWriter::Flow(char ph, const TrackRef& track, uint64_t id, uint64_t ts) {
  Begin(ph, "launch", "flow", track.pid, track.tid);
  json_.Key("id");
  json_.Uint(id);
  if (ph == 'f') {
    json_.Key("bp");
    json_.String("e");
  }
  Ts(ts);
  End();
}

void JsonTraceWriter::OnSlice(const trace::Slice& s) {
  const TrackRef& track = tracks_[s.track];
  switch (s.shape) {
    case trace::SliceShape::kComplete:
      Begin('X', s.name, s.category, track.pid, track.tid);
      Ts(s.start_ns);
      json_.Key("dur");
      json_.FixedPoint(s.end_ns - s.start_ns, 3);
      Args(s.args);
      End();
      break;
    case trace::SliceShape::kInstant:
      Begin('i', s.name, s.category, track.pid, track.tid);
      json_.Key("s");
      json_.String("t");
      Ts(s.start_ns);
      Args(s.args);
      End();
      break;
    case trace::SliceShape::kAsync:
      Begin('b', s.name, s.category, track.pid, track.tid);
      json_.Key("id");
      json_.Uint(s.async_id);
      Ts(s.start_ns);
      Args(s.args);
      End();
      Begin('e', s.name, s.category, track.pid, track.tid);
      json_.Key("id");
      json_.Uint(s.async_id);
      Ts(s.end_ns);
      End();
      break;
  }
  if (s.flow_begin != 0) Flow('s', track, s.flow_begin, s.start_ns);
  if (s.flow_end != 0) Flow('f', track, s.flow_end, s.start_ns);
}

void JsonTraceWriter::OnCounter(const trace::CounterSample& c) {
  const TrackRef& track = tracks_[c.track];
  Begin('C', track.name, track.category, track.pid, 0);
  Ts(c.ts);
  json_.Key("args");
  json_.BeginObject();
  json_.Key(track.series);
  if (const auto* d = std::get_if<double>(&c.value)) {
    json_.Double(*d, 6);
  } else {
    json_.Uint(std::get<uint64_t>(c.value));
  }
  json_.EndObject();
  End();
}

void WriteTraceMetadata(JsonWriter& json, const TraceMetadata& metadata) {
  json.BeginObject();
  for (const auto& [key, value] : metadata) {
    json.Key(key);
    if (const auto* s = std::get_if<std::string>(&value)) {
      json.String(*s);
    } else {
      json.Uint(std::get<uint64_t>(value));
    }
  }
  json.EndObject();
}

void JsonTraceWriter::Finish(const TraceMetadata& metadata) {
  json_.EndArray();
  // displayTimeUnit after the events: some older Perfetto builds read it from the
  // start of the file and then took ts as nanoseconds.
  json_.Key("displayTimeUnit");
  json_.String("ns");
  json_.Key("metadata");
  WriteTraceMetadata(json_, metadata);
  json_.EndObject();
  json_.Newline();
  file_->Write(buf_);
  buf_.clear();
}

}  // namespace aon::merge
