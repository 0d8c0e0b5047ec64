#include "aon/ipc/capture_request.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace aon {

namespace {

constexpr std::string_view kRequestMagic = "aon-capture-request v1";
constexpr std::string_view kStepsMagic = "aon-steps v1";
constexpr std::string_view kTriggerMagic = "aon-trigger-request v1";
constexpr std::string_view kAnswerMagic = "aon-trigger-answer v1";

const char* SourceName(StepSource s) {
  const char* name = EnumValueName(kStepSourceValues, static_cast<int64_t>(s));
  return name != nullptr ? name : "none";
}

// "magic\nkey value\n..." -> key -> value; the first line must be `magic`.
StatusOr<std::map<std::string, std::string>> Fields(std::string_view text, std::string_view magic,
                                                    const std::string& path) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (first) {
      if (line != magic) return InvalidArgument(path + ": not a " + std::string(magic) + " file");
      first = false;
      continue;
    }
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0)
      return InvalidArgument(path + ": malformed line '" + std::string(line.substr(0, 60)) + "'");
    out[std::string(line.substr(0, sp))] = std::string(line.substr(sp + 1));
  }
  if (first) return InvalidArgument(path + ": empty");
  return out;
}

Status Number(const std::map<std::string, std::string>& f, const char* key, const std::string& path,
              uint64_t* out) {
  auto it = f.find(key);
  if (it == f.end()) return InvalidArgument(path + ": no '" + key + "'");
  const std::string& v = it->second;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  if (ec != std::errc() || end != v.data() + v.size())
    return InvalidArgument(path + ": '" + key + "' is not a count: '" + v.substr(0, 40) + "'");
  return Status::Ok();
}

}  // namespace

StepSource StepSourceFromName(std::string_view name) {
  for (const EnumValue& v : kStepSourceValues) {
    if (name == v.name) return static_cast<StepSource>(v.value);
  }
  return StepSource::kNone;
}

std::string FormatCaptureRequest(const CaptureRequest& r) {
  return std::string(kRequestMagic) + "\nseq " + std::to_string(r.seq) + "\nfirst_step " +
         std::to_string(r.first_step) + "\nsteps " + std::to_string(r.steps) + "\nsource " +
         SourceName(r.source) + "\n";
}

StatusOr<CaptureRequest> ParseCaptureRequest(std::string_view text, const std::string& path) {
  AON_ASSIGN_OR_RETURN(auto f, Fields(text, kRequestMagic, path));
  CaptureRequest r;
  uint64_t steps = 0;
  AON_RETURN_IF_ERROR(Number(f, "seq", path, &r.seq));
  AON_RETURN_IF_ERROR(Number(f, "first_step", path, &r.first_step));
  AON_RETURN_IF_ERROR(Number(f, "steps", path, &steps));
  if (steps == 0 || steps > kMaxOnDemandSteps)
    return InvalidArgument(path + ": steps " + std::to_string(steps) + " is not within 1.." +
                           std::to_string(kMaxOnDemandSteps));
  r.steps = static_cast<uint32_t>(steps);
  r.source = StepSourceFromName(f.count("source") ? f["source"] : "");
  if (r.source == StepSource::kNone)
    return InvalidArgument(path +
                           ": no step source (api, pytorch, jax, nvtx, xla, nccl or time slot)");
  return r;
}

std::string FormatNodeSteps(const NodeSteps& n) {
  return std::string(kStepsMagic) + "\nhost " + n.host + "\nstep " + std::to_string(n.step) +
         "\nsource " + SourceName(n.source) + "\nstep_ns " + std::to_string(n.step_ns) +
         "\nat_realtime_ns " + std::to_string(n.at_realtime_ns) + "\nranks " +
         std::to_string(n.ranks) + "\n";
}

StatusOr<NodeSteps> ParseNodeSteps(std::string_view text, const std::string& path) {
  AON_ASSIGN_OR_RETURN(auto f, Fields(text, kStepsMagic, path));
  NodeSteps n;
  n.host = f.count("host") ? f["host"] : "";
  uint64_t ranks = 0;
  AON_RETURN_IF_ERROR(Number(f, "step", path, &n.step));
  AON_RETURN_IF_ERROR(Number(f, "step_ns", path, &n.step_ns));
  AON_RETURN_IF_ERROR(Number(f, "at_realtime_ns", path, &n.at_realtime_ns));
  AON_RETURN_IF_ERROR(Number(f, "ranks", path, &ranks));
  n.ranks = static_cast<uint32_t>(std::min<uint64_t>(ranks, UINT32_MAX));
  n.source = StepSourceFromName(f.count("source") ? f["source"] : "");
  return n;
}

std::string CleanTriggerReason(std::string_view reason) {
  std::string out(reason.substr(0, kMaxTriggerReason));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

std::string HostFilePart(std::string_view host) {
  std::string out = host.empty() ? std::string("node") : std::string(host);
  for (char& c : out) {
    if (c == '/' || c == '\0') c = '_';
  }
  return out;
}

std::string FormatTriggerRequest(const TriggerRequest& r) {
  return std::string(kTriggerMagic) + "\nseq " + std::to_string(r.seq) + "\nreason " +
         CleanTriggerReason(r.reason) + "\n";
}

StatusOr<TriggerRequest> ParseTriggerRequest(std::string_view text, const std::string& path) {
  AON_ASSIGN_OR_RETURN(auto f, Fields(text, kTriggerMagic, path));
  TriggerRequest r;
  AON_RETURN_IF_ERROR(Number(f, "seq", path, &r.seq));
  r.reason = CleanTriggerReason(f.count("reason") ? f["reason"] : "");
  return r;
}

std::string FormatTriggerAnswer(const TriggerAnswer& a) {
  return std::string(kAnswerMagic) + "\nhost " + CleanTriggerReason(a.host) + "\nseq " +
         std::to_string(a.seq) + "\ndumped " + (a.dumped ? "1" : "0") + "\nwhat " +
         CleanTriggerReason(a.what) + "\n";
}

StatusOr<TriggerAnswer> ParseTriggerAnswer(std::string_view text, const std::string& path) {
  AON_ASSIGN_OR_RETURN(auto f, Fields(text, kAnswerMagic, path));
  TriggerAnswer a;
  uint64_t dumped = 0;
  AON_RETURN_IF_ERROR(Number(f, "seq", path, &a.seq));
  AON_RETURN_IF_ERROR(Number(f, "dumped", path, &dumped));
  a.dumped = dumped != 0;
  a.host = f.count("host") ? f["host"] : "";
  a.what = f.count("what") ? f["what"] : "";
  return a;
}

uint64_t ChooseFirstStep(const std::vector<NodeSteps>& nodes, uint64_t now_realtime_ns,
                         uint64_t lead_ns) {
  uint64_t first = 0;
  for (const NodeSteps& n : nodes) {
    uint64_t at = n.step;
    const uint64_t until = now_realtime_ns + lead_ns;
    if (n.step_ns > 0 && until > n.at_realtime_ns) at += (until - n.at_realtime_ns) / n.step_ns;
    first = std::max(first, at + 1);
  }
  return first;
}

}  // namespace aon
