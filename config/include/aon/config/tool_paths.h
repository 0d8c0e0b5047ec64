// Where AON's programs and its agent library are, found from the file that
// looks for them (aon-run, the SPANK plugin, the agent itself). One layout, the
// same in the install tree and the build tree:
//
//   install tree (cmake --install)           build tree
//   <prefix>/bin/aon-run, aon-merge,         <build>/bin/ (the same programs)
//                aon-report, aon-collector
//   <prefix>/lib/libaon_agent.so             <build>/lib/libaon_agent.so
//   <prefix>/lib/aon/aon.so (SPANK plugin;   <build>/lib/aon.so
//     or <prefix>/lib/<multiarch>/aon/aon.so)
//
// Overrides are the front ends' own: AON_AGENT_PATH for aon-run, agent= and
// bindir= in plugstack.conf, AON_COLLECTOR for the agent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aon/base/status.h"

namespace aon {

enum class Tool : uint8_t { kAgent, kMerge, kReport, kCollector };
const char* ToolFileName(
    Tool tool);  // "libaon_agent.so", "aon-merge", "aon-report", "aon-collector"

// The kind of file that is looking, which says where the others are.
enum class ToolOrigin : uint8_t {
  kProgram,       // a program in bin/ (aon-run)
  kSpankPlugin,   // aon.so
  kAgentLibrary,  // libaon_agent.so
};

// Where `tool` may be, for a file of kind `origin` in directory `origin_dir`,
// in the order they are tried (not normalized: "<dir>/../lib/libaon_agent.so").
std::vector<std::string> ToolCandidates(ToolOrigin origin, const std::string& origin_dir,
                                        Tool tool);

// `path` resolved (realpath) when it is a regular file that can be used: read
// for the agent library, executed for a program. The error says what is wrong
// with it (NotFound when there is no such file).
StatusOr<std::string> UsableToolFile(const std::string& path, Tool tool);

// The first usable candidate, resolved; NotFound naming every place it looked.
StatusOr<std::string> FindTool(ToolOrigin origin, const std::string& origin_dir, Tool tool);

// The directory that holds aon-merge (and aon-report, aon-collector), resolved.
StatusOr<std::string> FindBinDir(ToolOrigin origin, const std::string& origin_dir);

// <bindir>/<program>.
std::string ToolPath(const std::string& bindir, Tool tool);

// The directory part of `path`: "." for a bare name, "/" for "/x".
std::string DirectoryOf(const std::string& path);

}  // namespace aon
