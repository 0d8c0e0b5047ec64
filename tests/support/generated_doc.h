// The generated part of a document of docs/: what lies between its markers
// "<!-- BEGIN GENERATED: <marker> -->\n" and "<!-- END GENERATED -->", which
// scripts/regen-docs.sh rewrites. A test compares it with what the code makes.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace aon::testing {

// The section of docs/<name>, or nullopt (with a test failure) when the file or
// its markers are missing.
inline std::optional<std::string> GeneratedDocSection(const std::string& name,
                                                      const std::string& marker) {
  const std::string path = std::string(AON_SOURCE_DIR) + "/docs/" + name;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- BEGIN GENERATED: " + marker + " -->\n";
  const std::string end = "<!-- END GENERATED -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) {
    ADD_FAILURE() << path << " lost its generated section (" << marker << ")";
    return std::nullopt;
  }
  return doc.substr(b + begin.size(), e - b - begin.size());
}

}  // namespace aon::testing
