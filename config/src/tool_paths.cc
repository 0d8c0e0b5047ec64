#include "aon/config/tool_paths.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace aon {

const char* ToolFileName(Tool tool) {
  switch (tool) {
    case Tool::kAgent:
      return "libaon_agent.so";
    case Tool::kMerge:
      return "aon-merge";
    case Tool::kReport:
      return "aon-report";
    case Tool::kCollector:
      return "aon-collector";
  }
  return "?";
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string ToolPath(const std::string& bindir, Tool tool) {
  return bindir + "/" + ToolFileName(tool);
}

std::vector<std::string> ToolCandidates(ToolOrigin origin, const std::string& dir, Tool tool) {
  const std::string name = ToolFileName(tool);
  if (tool == Tool::kAgent) {
    switch (origin) {
      case ToolOrigin::kProgram:
        return {dir + "/../lib/" + name};
      case ToolOrigin::kSpankPlugin:  // <build>/lib/aon.so; <prefix>/lib/aon/aon.so
        return {dir + "/" + name, dir + "/../" + name};
      case ToolOrigin::kAgentLibrary:
        return {dir + "/" + name};
    }
  }
  switch (origin) {
    case ToolOrigin::kProgram:
      return {dir + "/" + name};
    case ToolOrigin::kSpankPlugin:  // <build>/lib, <prefix>/lib/aon, <prefix>/lib/<multiarch>/aon
      return {dir + "/../bin/" + name, dir + "/../../bin/" + name, dir + "/../../../bin/" + name};
    case ToolOrigin::kAgentLibrary:
      return {dir + "/../bin/" + name};
  }
  return {};
}

StatusOr<std::string> UsableToolFile(const std::string& path, Tool tool) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return ErrnoStatus(path, errno);
  struct stat st {};
  if (::stat(resolved, &st) != 0) return ErrnoStatus(resolved, errno);
  if (!S_ISREG(st.st_mode)) return NotFound(std::string(resolved) + " is not a regular file");
  const int mode = tool == Tool::kAgent ? R_OK : X_OK;
  if (::access(resolved, mode) != 0)
    return ErrnoStatus(
        std::string(resolved) + (mode == R_OK ? " is not readable" : " is not executable"), errno);
  return std::string(resolved);
}

StatusOr<std::string> FindTool(ToolOrigin origin, const std::string& origin_dir, Tool tool) {
  std::string looked;
  for (const std::string& candidate : ToolCandidates(origin, origin_dir, tool)) {
    auto usable = UsableToolFile(candidate, tool);
    if (usable.ok()) return usable;
    looked += (looked.empty() ? "" : "; ") + usable.status().message();
  }
  return NotFound(std::string(ToolFileName(tool)) + " not found (" + looked + ")");
}

StatusOr<std::string> FindBinDir(ToolOrigin origin, const std::string& origin_dir) {
  AON_ASSIGN_OR_RETURN(std::string merge, FindTool(origin, origin_dir, Tool::kMerge));
  return DirectoryOf(merge);
}

}  // namespace aon
