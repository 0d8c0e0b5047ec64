// The Python frames of a thread, read from inside a signal handler that
// interrupted it, and turned into "function (file:line)" later on another
// thread (host_sampler.h; docs/host-sampling.md).
//
// No Python headers: the agent serves whatever CPython the job runs, so the
// layout of the interpreter's internal structs (thread state, interpreter
// frames, code objects, strings) is a table per minor version, 3.11 to 3.13,
// chosen at run time from Py_Version. Another version gets no Python frames
// (the sample keeps its native frame), and the rank file's notes say why.
//
// What the handler may do: read the interrupted thread's own frame chain.
// Frames on the thread's data stack (the chunks its thread state lists) are
// read in place; any other frame (a generator's, one on the C stack, or a
// pointer the interpreter published before it set it: CPython 3.11/3.12 do so
// when the eval loop starts) is read with SafeRead, a system call that fails
// on a bad address instead of faulting. The handler never looks into a code
// object: it records the code object's address and the instruction pointer.
// Resolve looks into them later, every read a SafeRead, so a code object
// freed since the sample yields "?" and never a crash.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace aon::agent {

// Reads `n` bytes at `address` of this process into `out`; false (and nothing
// read) where the address is not mapped. Async-signal-safe.
bool SafeRead(const void* address, void* out, size_t n);
// The process SafeRead reads: this one (set before sampling starts, and again
// in a forked child).
void SetSafeReadPid(pid_t pid);

struct PythonLayout {
  int minor = 0;  // 11, 12 or 13; 0: no supported Python in this process
  // PyThreadState: the current frame is tstate->cframe->current_frame
  // (3.11, 3.12) or tstate->current_frame (3.13).
  size_t ts_cframe = 0;
  size_t cframe_current = 0;
  size_t ts_current_frame = 0;
  size_t ts_datastack_chunk = 0;
  // _PyStackChunk
  size_t chunk_previous = 0;
  size_t chunk_size = 8;
  // _PyInterpreterFrame
  size_t frame_code = 0;
  size_t frame_instr = 0;
  size_t frame_previous = 0;
  size_t frame_owner = 0;
  size_t frame_bytes = 0;  // the fixed part, up to localsplus
  int owner_generator = 1;
  int owner_cstack = -1;  // 3.12+: shim frames on the C stack (no code)
  // PyCodeObject
  size_t code_filename = 0;
  size_t code_qualname = 0;
  size_t code_firstlineno = 0;
  size_t code_linetable = 0;
  size_t code_adaptive = 0;  // the first instruction
  // str: a compact ASCII string's characters follow PyASCIIObject, another
  // compact string's follow PyCompactUnicodeObject.
  size_t ascii_bytes = 0;
  size_t compact_bytes = 0;
};

// The layout for CPython 3.`minor`, or minor 0 for a version not known here.
PythonLayout PythonLayoutFor(int minor);

// The interpreter of this process: found through the dynamic symbols of the
// python executable or libpython. False, with the reason, where there is none
// or its version has no layout here.
struct PythonRuntime {
  PythonLayout layout;
  const void* code_type = nullptr;         // &PyCode_Type
  void* (*this_thread_state)() = nullptr;  // PyGILState_GetThisThreadState
  // _Py_IsFinalizing (3.11, 3.12) / Py_IsFinalizing (3.13): no Python frames
  // are walked once the interpreter shuts down. Null: not found.
  int (*is_finalizing)() = nullptr;
  std::string version;  // "3.12.3"
};
bool FindPythonRuntime(PythonRuntime* runtime, std::string* why);

// Flags of one walk (as HostSampleRecord's).
inline constexpr uint8_t kWalkTruncated = 2;
inline constexpr uint8_t kWalkPartial = 4;

// The interrupted thread's frames, innermost first: code object and
// instruction addresses. Returns how many (at most `max`); sets kWalk* in
// *flags. Async-signal-safe; `tstate` is the calling thread's own.
int WalkPythonFrames(const PythonLayout& layout, const void* tstate, uint64_t* code,
                     uint64_t* instr, int max, uint8_t* flags);

// The line of the code unit `index` of a 3.11+ location table (described in
// CPython's source, Objects/locations.md); -1 where it has none.
int LineOfCodeUnit(const uint8_t* table, size_t size, int first_line, int64_t index);

// Turns code object and instruction addresses into "function (file:line)".
// Not thread-safe; one per draining thread. Forget() drops what it learned
// (a code object's address may be reused once it is freed).
class PythonResolver {
 public:
  explicit PythonResolver(const PythonRuntime& runtime) : runtime_(runtime) {}
  std::string Frame(uint64_t code, uint64_t instr);
  void Forget() { codes_.clear(); }

 private:
  struct Code {
    bool valid = false;
    std::string function;
    std::string file;
    int first_line = 0;
    std::string linetable;
  };
  const Code& Lookup(uint64_t code);
  bool ReadString(uint64_t object, std::string* out) const;

  const PythonRuntime& runtime_;
  std::unordered_map<uint64_t, Code> codes_;
};

}  // namespace aon::agent
