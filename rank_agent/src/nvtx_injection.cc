// NVTX injection: AON is the tool behind NVTX_INJECTION64_PATH.
//
// nvtx3 (header-only, compiled into each "module": the app, libtorch, NCCL...)
// dlopens the injection library on a module's first NVTX call and calls
// InitializeInjectionNvtx2 (entry_points.cc) with a getter for its function
// tables, which hands it to InstallNvtxInjection; we fill the
// CORE (default domain) and CORE2 (named domains) slots. Each module calls
// this separately, so it must be idempotent.
//
// Why our own injection rather than CUPTI's (cuptiNvtxInitialize2): it works
// without a GPU and before CUDA is initialized, avoids CUPTI 13.0's crash in
// nvtxNameOsThreadA, and keeps ranges on our timebase with our own ids.
//
// Semantics kept from the NVTX spec: push/pop are per thread and per domain;
// push returns the 0-based depth of the new range, pop the depth of the closed
// one (-1 if none); start/end ranges may end on another thread.
#define NVTX_NO_IMPL
#include "nvtx_injection.h"

#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aon/base/timebase.h"
#include "source_context.h"
#include "xla_steps.h"

namespace aon::agent {
namespace {

// Bound by InstallNvtxInjection, before any callback is installed.
BoundContext g_agent;

struct OpenRange {
  uint64_t start_ns;
  uint32_t domain_id;
  uint32_t name_id;
  uint32_t category;
  uint32_t color;
  uint16_t depth;
  uint32_t thread_id;
  bool step_name;          // named like a step (AON_STEP_RANGE)
  std::string xla_module;  // an XLA execution range: its module (xla_steps.h)
};

// Whether the name with string id `id` (text `name`) marks steps; cached per
// thread by id, so a repeated name is one lookup. Bounded: cleared when full.
bool IsStepName(uint32_t id, std::string_view name) {
  thread_local std::unordered_map<uint32_t, bool> cache;
  if (auto it = cache.find(id); it != cache.end()) return it->second;
  const bool step = g_agent->capture().StepRangeName(name);
  if (cache.size() >= 4096) cache.clear();
  cache.emplace(id, step);
  return step;
}

// Registered strings (nvtxDomainRegisterString) that name steps or XLA
// executions (XLA registers its module ranges' names).
struct RegisteredName {
  bool step = false;
  std::string xla_module;
};
std::mutex g_registered_mu;
std::unordered_map<uint32_t, RegisteredName>& RegisteredNames() {
  static auto* names = new std::unordered_map<uint32_t, RegisteredName>();
  return *names;
}

// The module an XLA execution range runs ("" for any other range name).
std::string XlaModuleOf(std::string_view name) { return XlaModuleName(name).value_or(""); }

XlaStepModule& XlaSteps() {
  static auto* steps = new XlaStepModule();
  return *steps;
}

uint32_t ThreadId() {
  thread_local uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

std::vector<OpenRange>& PushStack() {
  thread_local std::vector<OpenRange> stack;
  return stack;
}

std::mutex g_start_end_mu;
std::unordered_map<uint64_t, OpenRange>& StartEndRanges() {
  static auto* ranges = new std::unordered_map<uint64_t, OpenRange>();
  return *ranges;
}
std::atomic<uint64_t> g_next_range_id{1};

// Handles we hand out are string ids + 1 (0/NULL is the default domain).
uint32_t DomainId(nvtxDomainHandle_t d) {
  return d ? static_cast<uint32_t>(reinterpret_cast<uintptr_t>(d) - 1) : 0;
}

std::string Utf8(const wchar_t* w) {
  std::string out;
  if (w == nullptr) return out;
  for (; *w; ++w) {
    auto c = static_cast<uint32_t>(*w);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Names seen by this thread, so a mark or range with a known name takes no lock
// (the sink's string table is shared and locked). Bounded: cleared when full.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
constexpr size_t kThreadNameCache = 4096;

uint32_t InternName(const char* s) {
  if (s == nullptr) return 0;
  thread_local std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> cache;
  const std::string_view name(s);
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  const uint32_t id = g_agent->sink().Intern(name, RecordKind::kNvtx);
  if (cache.size() >= kThreadNameCache) cache.clear();
  cache.emplace(std::string(name), id);
  return id;
}

OpenRange FromAttributes(uint32_t domain_id, const nvtxEventAttributes_t* a) {
  OpenRange r{};
  r.domain_id = domain_id;
  r.thread_id = ThreadId();
  if (a != nullptr) {
    switch (a->messageType) {
      case NVTX_MESSAGE_TYPE_ASCII:
        r.name_id = InternName(a->message.ascii);
        r.step_name = a->message.ascii != nullptr && IsStepName(r.name_id, a->message.ascii);
        if (a->message.ascii != nullptr) r.xla_module = XlaModuleOf(a->message.ascii);
        break;
      case NVTX_MESSAGE_TYPE_UNICODE: {
        const std::string name = Utf8(a->message.unicode);
        r.name_id = g_agent->sink().Intern(name, RecordKind::kNvtx);
        r.step_name = IsStepName(r.name_id, name);
        r.xla_module = XlaModuleOf(name);
        break;
      }
      case NVTX_MESSAGE_TYPE_REGISTERED: {
        r.name_id =
            a->message.registered
                ? static_cast<uint32_t>(reinterpret_cast<uintptr_t>(a->message.registered) - 1)
                : 0;
        std::lock_guard<std::mutex> lock(g_registered_mu);
        auto it = RegisteredNames().find(r.name_id);
        if (it != RegisteredNames().end()) {
          r.step_name = it->second.step;
          r.xla_module = it->second.xla_module;
        }
        break;
      }
      default:
        break;
    }
    r.category = a->category;
    r.color = a->colorType == NVTX_COLOR_ARGB ? a->color : 0;
  }
  r.start_ns = TimebaseNowNs();
  return r;
}

void Emit(const OpenRange& r, uint64_t end_ns, NvtxType type) {
  const SourceContext& agent = *g_agent;
  if (!agent.enabled(RecordKind::kNvtx)) return;  // injected for step ranges only
  NvtxRecord rec{};
  rec.start_ns = r.start_ns;
  rec.end_ns = end_ns;
  rec.thread_id = r.thread_id;
  rec.domain_id = r.domain_id;
  rec.name_id = r.name_id;
  rec.category = r.category;
  rec.color = r.color;
  rec.depth = r.depth;
  rec.type = static_cast<uint8_t>(type);
  agent.sink().Push(rec);
}

// ---- range primitives -------------------------------------------------------

// A step range of the default domain, outermost on its thread (a push range) or
// any start/end range, marks a step boundary where it begins.
// An execution of the XLA module that XlaSteps chose marks one too (source
// xla), at any depth and in any domain.
void MaybeStep(const OpenRange& r, bool outermost) {
  if (r.step_name && r.domain_id == 0 && outermost) {
    g_agent->capture().OnBoundary(StepSource::kNvtx);
  }
  if (!r.xla_module.empty() && XlaSteps().Began(r.xla_module)) {
    g_agent->capture().OnBoundary(StepSource::kXla);
  }
}

void Ended(const OpenRange& r, uint64_t end_ns) {
  if (!r.xla_module.empty()) XlaSteps().Ended(r.xla_module, end_ns - r.start_ns);
}

int Push(OpenRange r) {
  auto& stack = PushStack();
  uint16_t depth = 0;
  for (const OpenRange& o : stack) depth += o.domain_id == r.domain_id;
  r.depth = depth;
  stack.push_back(r);
  MaybeStep(r, depth == 0);
  return depth;
}

int Pop(uint32_t domain_id) {
  uint64_t now = TimebaseNowNs();
  auto& stack = PushStack();
  for (size_t i = stack.size(); i-- > 0;) {
    if (stack[i].domain_id != domain_id) continue;
    OpenRange r = stack[i];
    stack.erase(stack.begin() + static_cast<std::ptrdiff_t>(i));
    Ended(r, now);
    Emit(r, now, NvtxType::kPushPop);
    return r.depth;
  }
  return -1;
}

nvtxRangeId_t Start(const OpenRange& r) {
  MaybeStep(r, true);
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_start_end_mu);
  StartEndRanges().emplace(id, r);
  return id;
}

void End(nvtxRangeId_t id) {
  uint64_t now = TimebaseNowNs();
  OpenRange r;
  {
    std::lock_guard<std::mutex> lock(g_start_end_mu);
    auto it = StartEndRanges().find(id);
    if (it == StartEndRanges().end()) return;
    r = it->second;
    StartEndRanges().erase(it);
  }
  Ended(r, now);
  Emit(r, now, NvtxType::kStartEnd);
}

void Mark(const OpenRange& r) { Emit(r, r.start_ns, NvtxType::kMark); }

OpenRange FromAscii(uint32_t domain_id, const char* s) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = s;
  return FromAttributes(domain_id, &a);
}

OpenRange FromWide(uint32_t domain_id, const wchar_t* s) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  a.message.unicode = s;
  return FromAttributes(domain_id, &a);
}

// ---- CORE: the default domain ---------------------------------------------------

void NVTX_API MarkEx(const nvtxEventAttributes_t* a) { Mark(FromAttributes(0, a)); }
void NVTX_API MarkA(const char* s) { Mark(FromAscii(0, s)); }
void NVTX_API MarkW(const wchar_t* s) { Mark(FromWide(0, s)); }
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  return Start(FromAttributes(0, a));
}
nvtxRangeId_t NVTX_API RangeStartA(const char* s) { return Start(FromAscii(0, s)); }
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* s) { return Start(FromWide(0, s)); }
void NVTX_API RangeEnd(nvtxRangeId_t id) { End(id); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) { return Push(FromAttributes(0, a)); }
int NVTX_API RangePushA(const char* s) { return Push(FromAscii(0, s)); }
int NVTX_API RangePushW(const wchar_t* s) { return Push(FromWide(0, s)); }
int NVTX_API RangePop() { return Pop(0); }
void NVTX_API NameCategoryA(uint32_t, const char*) {}
void NVTX_API NameCategoryW(uint32_t, const wchar_t*) {}
void NVTX_API NameOsThreadA(uint32_t, const char*) {}
void NVTX_API NameOsThreadW(uint32_t, const wchar_t*) {}

// ---- CORE2: named domains -------------------------------------------------------

void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Mark(FromAttributes(DomainId(d), a));
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return Start(FromAttributes(DomainId(d), a));
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { End(id); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return Push(FromAttributes(DomainId(d), a));
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) { return Pop(DomainId(d)); }
nvtxResourceHandle_t NVTX_API DomainResourceCreate(nvtxDomainHandle_t, nvtxResourceAttributes_t*) {
  // Opaque to the caller; resources (named locks, memory) are not traced yet.
  static int token;
  return reinterpret_cast<nvtxResourceHandle_t>(&token);
}
void NVTX_API DomainResourceDestroy(nvtxResourceHandle_t) {}
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t, uint32_t, const char*) {}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t, uint32_t, const wchar_t*) {}
nvtxStringHandle_t RegisteredString(std::string_view s, uint32_t id) {
  const bool step = g_agent->capture().StepRangeName(s);
  std::lock_guard<std::mutex> lock(g_registered_mu);
  RegisteredNames()[id] = RegisteredName{step, XlaModuleOf(s)};
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(id) + 1);
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  return RegisteredString(s != nullptr ? s : "", InternName(s));
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  const std::string name = Utf8(s);
  return RegisteredString(name, g_agent->sink().Intern(name, RecordKind::kNvtx));
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(InternName(name)) + 1);
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  uint32_t id = g_agent->sink().Intern(Utf8(name), RecordKind::kNvtx);
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(id) + 1);
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}
void NVTX_API Initialize(const void*) {}

template <typename F>
void SetSlot(NvtxFunctionTable table, unsigned size, unsigned cbid, F fn) {
  if (cbid < size && table[cbid] != nullptr)
    *table[cbid] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

bool FillCore(const NvtxExportTableCallbacks* etbl) {
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (!etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) || t == nullptr) return false;
  SetSlot(t, n, NVTX_CBID_CORE_MarkEx, MarkEx);
  SetSlot(t, n, NVTX_CBID_CORE_MarkA, MarkA);
  SetSlot(t, n, NVTX_CBID_CORE_MarkW, MarkW);
  SetSlot(t, n, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
  SetSlot(t, n, NVTX_CBID_CORE_RangeStartA, RangeStartA);
  SetSlot(t, n, NVTX_CBID_CORE_RangeStartW, RangeStartW);
  SetSlot(t, n, NVTX_CBID_CORE_RangeEnd, RangeEnd);
  SetSlot(t, n, NVTX_CBID_CORE_RangePushEx, RangePushEx);
  SetSlot(t, n, NVTX_CBID_CORE_RangePushA, RangePushA);
  SetSlot(t, n, NVTX_CBID_CORE_RangePushW, RangePushW);
  SetSlot(t, n, NVTX_CBID_CORE_RangePop, RangePop);
  SetSlot(t, n, NVTX_CBID_CORE_NameCategoryA, NameCategoryA);
  SetSlot(t, n, NVTX_CBID_CORE_NameCategoryW, NameCategoryW);
  SetSlot(t, n, NVTX_CBID_CORE_NameOsThreadA, NameOsThreadA);
  SetSlot(t, n, NVTX_CBID_CORE_NameOsThreadW, NameOsThreadW);
  return true;
}

bool FillCore2(const NvtxExportTableCallbacks* etbl) {
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (!etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) || t == nullptr) return false;
  SetSlot(t, n, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainResourceCreate, DomainResourceCreate);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainResourceDestroy, DomainResourceDestroy);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainNameCategoryA, DomainNameCategoryA);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainNameCategoryW, DomainNameCategoryW);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
  SetSlot(t, n, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
  SetSlot(t, n, NVTX_CBID_CORE2_Initialize, Initialize);
  return true;
}

}  // namespace

int InstallNvtxInjection(const SourceContext& agent, NvtxExportTableGetter get_export_table) {
  // Also without NVTX records: step ranges mark the steps of capture windows.
  const bool steps = agent.recording() && agent.capture().windowed();
  if ((!agent.enabled(RecordKind::kNvtx) && !steps) || get_export_table == nullptr) return 0;
  g_agent.Bind(agent);
  const auto* etbl =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (etbl == nullptr || etbl->struct_size < sizeof(NvtxExportTableCallbacks)) {
    agent.notes().Note(
        "NVTX: this NVTX version offers no callback table; NVTX ranges not captured");
    return 0;
  }
  if (const auto* version =
          static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
      version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  bool ok = FillCore(etbl) && FillCore2(etbl);
  if (!ok) agent.notes().Note("NVTX: could not install callbacks; NVTX ranges not captured");
  agent.notes().Log("NVTX injection installed in a module");
  return ok ? 1 : 0;
}

}  // namespace aon::agent

// NVTX looks these up with dlsym on our handle, which also searches our
// dependencies: without our own definitions it would find libcupti's, and
// CUPTI's NVTX extension entry crashes when CUPTI is not the NVTX tool (seen
// with NCCL 2.28, whose payload schemas use the extension API). Returning 0
// tells NVTX the extension (or the legacy v1 interface) is not offered, so
// those calls become no-ops in the application.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(void*) {
  return 0;
}
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx(void*) { return 0; }
