// What every part of the agent may tell the agent: a degradation for the rank
// file's notes, a verbose log line, what GPU source ran on which devices, and
// what must run before the rank file is written. Implemented by the Agent
// (agent.h); the parts receive it (source_context.h) and never look the agent up.
#pragma once

#include <cstdarg>
#include <string>

#include "aon/format/trace_format.h"

namespace aon::agent {

class AgentNotes {
 public:
  // A degradation, said once: printed with the [aon] prefix and kept for the file.
  virtual void Note(const std::string& text) = 0;
  // Only with AON_VERBOSE.
  void Log(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    LogV(fmt, ap);
    va_end(ap);
  }
  virtual void LogV(const char* fmt, va_list ap) = 0;
  // The GPU activity source that ran ("cupti", "synthetic") and its devices.
  virtual void SetSource(const std::string& source) = 0;
  virtual void AddDevice(const DeviceInfo& device) = 0;

  // Run at the agent's Finish, after the capture's last step ended and before
  // the rank file is written: the GPU source's flush (one; it runs first), then
  // the others in the order they were added (each at most once).
  using Hook = void (*)();
  virtual void SetFlushHook(Hook hook) = 0;
  virtual void AddFinishHook(Hook hook) = 0;

 protected:
  ~AgentNotes() = default;
};

}  // namespace aon::agent
