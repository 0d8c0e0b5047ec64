// The options of both front ends in one table: aon-run (launcher/) registers
// its command-line options from it and srun --aon (slurm/) its SPANK options,
// each with the help text written here; both check a value with
// CheckOptionValue and turn it into agent settings with ApplyOption. What an
// option accepts and what it sets for the agent therefore cannot drift between
// the two (tests/slurm/front_end_parity_test.cc drives both real front ends
// with the same values).
//
// Parity rule: every aon-run option has its srun twin that takes the same
// values, or its entry says in `differs` why not; the same the other way round.
// Aliases are accepted by both sides alike (--nccl on = default, so scripts
// written for the old on|off --aon-nccl keep working).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/config/agent_env.h"

namespace aon::session {

// The options that are more than a value passed to one agent variable: each has its
// entry in FrontEndOptions() and its case in CheckOptionValue / ApplyOption.
enum class SessionOption : uint8_t {
  kOutput,      // where the trace goes
  kKinds,       // AON_KINDS
  kMemoryCap,   // AON_MEMORY_CAP
  kSource,      // AON_SOURCE
  kNccl,        // AON_NCCL
  kMode,        // AON_MODE (aon-run reads it too)
  kWindow,      // AON_WINDOW
  kFlight,      // AON_MODE=flight + AON_WINDOW
  kVerbose,     // AON_VERBOSE
  kProfile,     // srun --aon[=MODE]
  kMerge,       // merge when the job (step) ends
  kReport,      // aon-report after the merge
  kMergeProcs,  // processes of the merge
  kNamedCount,  // not an option: the named ones are below this
};

// The options that only pass their value to one agent variable are declared once, in that
// variable's row of AgentConfigVariables() (its FrontEndNames): their identity is the
// variable. Both front ends handle them generically: checked by the agent's parser, set as
// typed.
inline constexpr uint8_t kFirstPassthroughOption = 64;
static_assert(static_cast<size_t>(SessionOption::kNamedCount) <= kFirstPassthroughOption);
static_assert(kFirstPassthroughOption + kAgentConfigVariableCount <= 256);
constexpr SessionOption PassthroughOption(AgentVar var) {
  return static_cast<SessionOption>(kFirstPassthroughOption + static_cast<uint8_t>(var));
}

// How an option takes its value on one front end.
enum class OptionArg : uint8_t { kAbsent, kFlag, kRequired, kOptional };

struct FrontEndOption {
  SessionOption id;
  const char* run;  // aon-run's names as CLI11 takes them ("-o,--output"); nullptr: none
  OptionArg run_arg;
  const char* spank;  // srun's option without "--" ("aon-output"); nullptr: none
  OptionArg spank_arg;
  const char* value;     // what the value is ("LIST", "default|channels|coll|proxy|off")
  const char* help;      // for both front ends (the SPANK plugin prefixes "AON: ")
  const char* run_help;  // aon-run's own wording where the two differ; nullptr: `help`
  // nullptr: both front ends have it, take the same values and mean the same.
  // Else why the two differ, or why one of them has no such option.
  const char* differs;
  // Options that only pass their value to one agent variable: both front ends
  // handle them generically (checked by the agent's parser, set as typed).
  bool passthrough = false;
  AgentVar var = AgentVar::kOutputDir;
};

const std::vector<FrontEndOption>& FrontEndOptions();
const FrontEndOption& FrontEndOptionOf(SessionOption option);

// How a user types the option: aon-run's long name ("--kinds", "--output") or
// srun's ("--aon-kinds"); "" where that front end lacks it.
std::string RunName(SessionOption option);
std::string SpankName(SessionOption option);

// Checks one value of `option` and returns its canonical form ("on" -> "default"
// for the NCCL mode; others as typed), or why it is wrong. The message does not
// name the option: each front end names it the way its user typed it
// (aon-run: "--kinds 'x': ...", srun: "--aon-kinds=x: ...").
StatusOr<std::string> CheckOptionValue(SessionOption option, std::string_view value);

// What `option` = `value` (as CheckOptionValue returned it; for kVerbose the
// count) sets for the agent. Options that set no agent variable (kOutput,
// kProfile, kMerge, kReport, kMergeProcs) are an internal error here.
Status ApplyOption(AgentSettings& settings, SessionOption option, std::string_view value);

// on|off and its spellings (1/0, yes/no, true/false).
bool ParseOnOff(std::string_view value, bool* on);

}  // namespace aon::session
