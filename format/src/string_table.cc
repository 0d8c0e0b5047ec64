#include "aon/format/string_table.h"

namespace aon {

uint32_t StringTable::Intern(std::string_view s) {
  if (s.empty()) return 0;
  auto it = index_.find(std::string(s));
  if (it != index_.end()) return it->second;
  auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  index_.emplace(strings_.back(), id);
  bytes_ += s.size();
  return id;
}

}  // namespace aon
