#include "aon/format/framework_ranges.h"

#include <array>
#include <cctype>

#include "aon/format/records.h"

namespace aon {
namespace {

// XLA's compiler ranges: the compile of a module and the passes, emitters and
// autotuning inside it. Its other ranges (XlaModule: one execution, Thunk: one
// thunk) are running work.
constexpr std::array<std::string_view, 9> kXlaCompilePrefixes = {
    "XlaCompile", "XlaPass",  "XlaEmit",    "XlaOptimize", "XlaAutotun",
    "XlaLower",   "XlaBuild", "XlaCodegen", "HloPass"};
constexpr std::string_view kTorchCompile = "torch.compile";
constexpr std::string_view kDynamoTimed = "(dynamo_timed)";

}  // namespace

std::string_view WithoutTslPrefix(std::string_view name) {
  return name.starts_with("TSL:") ? name.substr(4) : name;
}

std::string CompileFramework(std::string_view domain, std::string_view name) {
  if (domain == kAonNvtxDomain && name.starts_with(kTorchCompile)) return "torch.compile";
  if (name.ends_with(kDynamoTimed)) return "torch.compile";
  const std::string_view n = WithoutTslPrefix(name);
  for (std::string_view p : kXlaCompilePrefixes)
    if (n.starts_with(p)) return "XLA";
  return "";
}

std::optional<XlaRange> ParseXlaRange(std::string_view name) {
  name = WithoutTslPrefix(name);
  XlaRange r;
  if (name.starts_with("Thunk:#")) {
    r.thunk = true;
    name.remove_prefix(7);
  } else if (name.starts_with("XlaModule:#")) {
    name.remove_prefix(11);
  } else {
    return std::nullopt;
  }
  if (name.empty() || name.back() != '#') return std::nullopt;
  name.remove_suffix(1);
  // key=value pairs split at commas; a value may hold commas (a JAX name's
  // parameters), so a field starts only where a comma is followed by "key=".
  auto starts_field = [&](size_t at) {
    size_t k = at;
    while (k < name.size() && (std::isalnum(static_cast<unsigned char>(name[k])) || name[k] == '_'))
      ++k;
    return k > at && k < name.size() && name[k] == '=' &&
           !std::isdigit(static_cast<unsigned char>(name[at]));
  };
  size_t from = 0;
  while (from < name.size()) {
    size_t to = from;
    while (to < name.size() && !(name[to] == ',' && starts_field(to + 1))) ++to;
    const std::string_view field = name.substr(from, to - from);
    const size_t eq = field.find('=');
    if (eq != std::string_view::npos) {
      const std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
      if (key == "hlo_op") r.hlo_op = value;
      if (key == "name") r.jax_op = value;
      if (key == "hlo_module") r.module = value;
      if (key == "program_id") r.program = true;
    }
    from = to + 1;
  }
  return r;
}

}  // namespace aon
