#include "python_frames.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace aon::agent {
namespace {

// This process's id, for process_vm_readv on itself: set before any sample
// is taken (SetSafeReadPid), a plain load in the handler.
std::atomic<pid_t> g_self_pid{0};

template <typename T>
bool ReadValue(uint64_t address, T* out) {
  return SafeRead(reinterpret_cast<const void*>(address), out, sizeof(T));
}

// Reads a field in place: only for memory the walk knows is the thread's own
// live data stack, or its thread state.
template <typename T>
T At(const void* base, size_t offset) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + offset, sizeof(T));
  return v;
}

// The data-stack chunks of a thread: [begin, end) each.
struct Chunks {
  static constexpr int kMax = 32;
  uintptr_t begin[kMax];
  uintptr_t end[kMax];
  int n = 0;
  bool Holds(uintptr_t p, size_t bytes) const {
    for (int i = 0; i < n; ++i)
      if (p >= begin[i] && p + bytes <= end[i]) return true;
    return false;
  }
};

}  // namespace

void SetSafeReadPid(pid_t pid) { g_self_pid.store(pid, std::memory_order_relaxed); }

bool SafeRead(const void* address, void* out, size_t n) {
  pid_t pid = g_self_pid.load(std::memory_order_relaxed);
  if (pid == 0) pid = static_cast<pid_t>(syscall(SYS_getpid));
  iovec local{out, n};
  iovec remote{const_cast<void*>(address), n};
  return syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0) == static_cast<long>(n);
}

PythonLayout PythonLayoutFor(int minor) {
  // Measured with offsetof against each version's internal headers (the
  // interpreter frame, code object, thread state and string structs of
  // CPython 3.11.7, 3.12.1 and 3.13.0); tests/python/test_host_samples.py
  // checks the table of the CPython CI runs (3.11), the GPU check that of the
  // GPU machine's (3.12), and 3.13 checks itself against its debug offsets.
  PythonLayout l;
  switch (minor) {
    case 11:
      l.ts_cframe = 56, l.cframe_current = 8, l.ts_datastack_chunk = 296;
      l.frame_code = 32, l.frame_instr = 56, l.frame_previous = 48, l.frame_owner = 69;
      l.frame_bytes = 72, l.owner_cstack = -1;
      l.code_firstlineno = 72, l.code_adaptive = 184;
      l.ascii_bytes = 48, l.compact_bytes = 72;
      break;
    case 12:
    case 13:
      if (minor == 12) {
        l.ts_cframe = 56, l.cframe_current = 0;
      } else {
        l.ts_current_frame = 72;
      }
      l.ts_datastack_chunk = 232;
      l.frame_code = 0, l.frame_instr = 56, l.frame_previous = 8, l.frame_owner = 70;
      l.frame_bytes = 72, l.owner_cstack = 3;
      l.code_firstlineno = 68, l.code_adaptive = minor == 12 ? 192 : 200;
      l.ascii_bytes = 40, l.compact_bytes = 56;
      break;
    default:
      return PythonLayout{};
  }
  l.minor = minor;
  l.chunk_previous = 0, l.chunk_size = 8;
  l.owner_generator = 1;
  l.code_filename = 112, l.code_qualname = 128, l.code_linetable = 136;
  return l;
}

namespace {

// 3.13 describes its own layout (_PyRuntime.debug_offsets, for debuggers):
// the table above must agree with it, which also refuses a free-threaded
// build (its objects have other offsets).
bool AgreesWithDebugOffsets(const PythonLayout& l) {
  const auto* words = static_cast<const uint64_t*>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
  if (words == nullptr || std::memcmp(words, "xdebugpy", 8) != 0) return false;
  constexpr int kWords = 128;
  const uint64_t frame[] = {l.frame_previous, l.frame_code, l.frame_instr, l.frame_bytes,
                            l.frame_owner};
  const uint64_t code[] = {l.code_filename, l.code_filename + 8, l.code_qualname, l.code_linetable,
                           l.code_firstlineno};
  auto has = [&](const uint64_t* seq, int n) {
    for (int i = 1; i + n <= kWords; ++i)
      if (std::equal(seq, seq + n, words + i)) return true;
    return false;
  };
  bool thread = false;
  for (int i = 1; i + 3 < kWords; ++i)
    thread = thread || (words[i] == l.ts_current_frame && words[i + 3] == l.ts_datastack_chunk);
  return thread && has(frame, 5) && has(code, 5);
}

}  // namespace

bool FindPythonRuntime(PythonRuntime* runtime, std::string* why) {
  const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  auto* initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  if (initialized == nullptr) {
    *why = "not a Python process";
    return false;
  }
  if (version == nullptr) {
    *why = "Python older than 3.11 (no Python frames: only 3.11 to 3.13 are read)";
    return false;
  }
  const unsigned long v = *version;
  const int major = static_cast<int>(v >> 24), minor = static_cast<int>((v >> 16) & 0xff);
  runtime->version =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string((v >> 8) & 0xff);
  runtime->layout = major == 3 ? PythonLayoutFor(minor) : PythonLayout{};
  if (runtime->layout.minor == 0) {
    *why = "Python " + runtime->version + " (no Python frames: only 3.11 to 3.13 are read)";
    return false;
  }
  if (minor >= 13 && !AgreesWithDebugOffsets(runtime->layout)) {
    *why = "Python " + runtime->version +
           " describes a layout other than 3.13's (a free-threaded build?): no Python frames";
    return false;
  }
  runtime->code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  runtime->is_finalizing = reinterpret_cast<int (*)()>(
      dlsym(RTLD_DEFAULT, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing"));
  runtime->this_thread_state =
      reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  if (runtime->code_type == nullptr || runtime->this_thread_state == nullptr) {
    *why = "Python " + runtime->version + " without PyCode_Type or PyGILState_GetThisThreadState";
    return false;
  }
  return true;
}

int WalkPythonFrames(const PythonLayout& l, const void* tstate, uint64_t* code, uint64_t* instr,
                     int max, uint8_t* flags) {
  // The thread state and its data-stack chunks are read safely: at
  // interpreter shutdown a daemon thread's state is freed while the thread
  // still runs (and its thread-specific pointer still names it).
  alignas(8) unsigned char ts[512];
  const size_t ts_bytes =
      std::max({l.ts_datastack_chunk, l.ts_cframe, l.ts_current_frame}) + sizeof(uintptr_t);
  if (ts_bytes > sizeof ts || !SafeRead(tstate, ts, ts_bytes)) {
    *flags |= kWalkPartial;
    return 0;
  }
  // The thread's data stack, where its running frames live; linked before use
  // and unlinked before being freed, by this very thread, which is stopped here.
  Chunks chunks;
  for (auto c = At<uintptr_t>(ts, l.ts_datastack_chunk); c != 0 && chunks.n < Chunks::kMax;) {
    alignas(8) unsigned char header[16];  // holds previous and size (PythonLayoutFor)
    if (c % alignof(uintptr_t) != 0 ||
        !SafeRead(reinterpret_cast<const void*>(c), header, sizeof header) ||
        At<uintptr_t>(header, l.chunk_size) > (uintptr_t{1} << 30)) {
      *flags |= kWalkPartial;
      break;
    }
    chunks.begin[chunks.n] = c;
    chunks.end[chunks.n] = c + At<uintptr_t>(header, l.chunk_size);
    ++chunks.n;
    c = At<uintptr_t>(header, l.chunk_previous);
  }
  uintptr_t frame = 0;
  if (l.minor >= 13) {
    frame = At<uintptr_t>(ts, l.ts_current_frame);
  } else {
    // The C-level frame lives on this thread's C stack (or in the thread state).
    const auto cframe = At<uintptr_t>(ts, l.ts_cframe);
    if (cframe == 0) return 0;
    uintptr_t current = 0;
    if (!SafeRead(reinterpret_cast<const void*>(cframe + l.cframe_current), &current,
                  sizeof current))
      return 0;
    frame = current;
  }
  alignas(8) unsigned char copy[128];
  const size_t bytes = std::min(l.frame_bytes, sizeof copy);
  int n = 0;
  for (int hops = 0; frame != 0 && hops < 4 * max; ++hops) {
    const unsigned char* f;
    if (chunks.Holds(frame, bytes)) {
      f = reinterpret_cast<const unsigned char*>(frame);
    } else {
      // Not on the data stack: a generator's frame, a shim on the C stack, or
      // a pointer published before it was set. Read it safely and believe it
      // only with an owner such a frame can have.
      if (!SafeRead(reinterpret_cast<const void*>(frame), copy, bytes)) {
        *flags |= kWalkPartial;
        break;
      }
      f = copy;
      const int owner = f[l.frame_owner];
      if (owner != l.owner_generator && owner != l.owner_cstack) {
        *flags |= kWalkPartial;
        break;
      }
    }
    if (static_cast<int>(f[l.frame_owner]) != l.owner_cstack) {
      if (n == max) {
        *flags |= kWalkTruncated;
        break;
      }
      code[n] = At<uint64_t>(f, l.frame_code);
      instr[n] = At<uint64_t>(f, l.frame_instr);
      ++n;
    }
    frame = At<uintptr_t>(f, l.frame_previous);
  }
  return n;
}

namespace {

// CPython's location tables: varints of 6-bit chunks, low first, bit 6 = more.
struct TableCursor {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint32_t Varint() {
    uint32_t v = 0;
    for (int shift = 0; shift < 32; shift += 6) {
      if (p >= end) {
        ok = false;
        return v;
      }
      const uint8_t b = *p++;
      v |= static_cast<uint32_t>(b & 63) << shift;
      if (!(b & 64)) return v;
    }
    return v;
  }
  int32_t Svarint() {
    const uint32_t v = Varint();
    return (v & 1) ? -static_cast<int32_t>(v >> 1) : static_cast<int32_t>(v >> 1);
  }
};

}  // namespace

int LineOfCodeUnit(const uint8_t* table, size_t size, int first_line, int64_t index) {
  if (index < 0) return first_line;
  TableCursor c{table, table + size};
  int line = first_line;
  int64_t unit = 0;
  while (c.p < c.end && c.ok) {
    const uint8_t head = *c.p++;
    if (!(head & 0x80)) return -1;  // not at an entry: a damaged table
    const int code = (head >> 3) & 15;
    const int length = (head & 7) + 1;
    bool none = false;
    if (code == 15) {
      none = true;            // no location
    } else if (code == 14) {  // long form
      line += c.Svarint();
      c.Varint(), c.Varint(), c.Varint();
    } else if (code == 13) {  // no columns
      line += c.Svarint();
    } else if (code >= 10) {  // one line: delta 0..2, two column bytes
      line += code - 10;
      c.p += 2;
    } else {  // short form: same line, one column byte
      c.p += 1;
    }
    if (index < unit + length) return none ? -1 : line;
    unit += length;
  }
  return -1;
}

bool PythonResolver::ReadString(uint64_t object, std::string* out) const {
  const PythonLayout& l = runtime_.layout;
  struct {
    uint64_t refcount, type;
    int64_t length;
    int64_t hash;
    uint32_t state;
  } head{};
  if (object == 0 || !ReadValue(object, &head)) return false;
  const int kind = (head.state >> 2) & 7;
  const bool compact = (head.state >> 5) & 1, ascii = (head.state >> 6) & 1;
  if (!compact || head.length < 0 || head.length > 4096) return false;
  const uint64_t data = object + (ascii ? l.ascii_bytes : l.compact_bytes);
  if (kind != 1 && kind != 2 && kind != 4) return false;  // Latin-1, UCS-2, UCS-4
  std::string raw(static_cast<size_t>(head.length) * kind, '\0');
  if (!SafeRead(reinterpret_cast<const void*>(data), raw.data(), raw.size())) return false;
  out->clear();
  for (int64_t i = 0; i < head.length; ++i) {
    uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * kind, kind);
    // Lone surrogates (names decoded with surrogateescape) and values no
    // character has (stale memory): the replacement character.
    if ((cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff) cp = 0xfffd;
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return true;
}

const PythonResolver::Code& PythonResolver::Lookup(uint64_t address) {
  auto [it, added] = codes_.try_emplace(address);
  Code& code = it->second;
  if (!added) return code;
  const PythonLayout& l = runtime_.layout;
  uint64_t type = 0, filename = 0, qualname = 0, linetable = 0;
  int32_t first_line = 0;
  if (!ReadValue(address + 8, &type) || type != reinterpret_cast<uint64_t>(runtime_.code_type) ||
      !ReadValue(address + l.code_filename, &filename) ||
      !ReadValue(address + l.code_qualname, &qualname) ||
      !ReadValue(address + l.code_linetable, &linetable) ||
      !ReadValue(address + l.code_firstlineno, &first_line) || !ReadString(filename, &code.file) ||
      !ReadString(qualname, &code.function))
    return code;
  int64_t table_size = 0;  // a bytes object: ob_size, then the bytes at 32
  if (linetable != 0 && ReadValue(linetable + 16, &table_size) && table_size > 0 &&
      table_size <= (int64_t{1} << 20)) {
    code.linetable.resize(static_cast<size_t>(table_size));
    if (!SafeRead(reinterpret_cast<const void*>(linetable + 32), code.linetable.data(),
                  code.linetable.size()))
      code.linetable.clear();
  }
  code.first_line = first_line;
  code.valid = true;
  return code;
}

std::string PythonResolver::Frame(uint64_t address, uint64_t instr) {
  const Code& code = Lookup(address);
  if (!code.valid) return "? (?)";
  const int64_t index =
      instr >= address + runtime_.layout.code_adaptive
          ? static_cast<int64_t>((instr - address - runtime_.layout.code_adaptive) / 2)
          : -1;
  const int line = LineOfCodeUnit(reinterpret_cast<const uint8_t*>(code.linetable.data()),
                                  code.linetable.size(), code.first_line, index);
  return code.function + " (" + code.file + ":" +
         std::to_string(line < 0 ? code.first_line : line) + ")";
}

}  // namespace aon::agent
