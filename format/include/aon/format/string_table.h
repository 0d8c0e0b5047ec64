// StringTable: interned strings addressed by dense uint32 ids; id 0 is "".
// Not thread-safe: callers that share one guard it themselves.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace aon {

class StringTable {
 public:
  StringTable() { strings_.emplace_back(); }

  // Id of `s`, adding it if new.
  uint32_t Intern(std::string_view s);
  // The string of `id`, or "" for an id out of range (a reader never trusts ids).
  const std::string& Get(uint32_t id) const {
    return id < strings_.size() ? strings_[id] : strings_[0];
  }
  bool Contains(uint32_t id) const { return id < strings_.size(); }
  size_t size() const { return strings_.size(); }
  const std::vector<std::string>& strings() const { return strings_; }
  // Total bytes of all strings (for budgets).
  size_t bytes() const { return bytes_; }

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> index_;
  size_t bytes_ = 0;
};

}  // namespace aon
