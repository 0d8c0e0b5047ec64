#include "unify_strings.h"

#include "exchange.h"

namespace aon::merge {

StatusOr<StringTable> UnifyStrings(MergeComm& comm, const std::vector<const StringTable*>& mine) {
  StringTable local_union;
  for (const StringTable* table : mine) {
    for (const std::string& text : table->strings()) local_union.Intern(text);
  }
  AON_ASSIGN_OR_RETURN(const std::vector<StringUnion> unions,
                       AllgatherMessage(comm, StringUnion{local_union.strings()}));
  StringTable unified;
  for (const StringUnion& u : unions) {
    for (const std::string& text : u.strings) unified.Intern(text);
  }
  return unified;
}

std::vector<uint32_t> MapStrings(const StringTable& local, StringTable& unified) {
  const auto& texts = local.strings();
  std::vector<uint32_t> map(texts.size());
  for (size_t id = 0; id < texts.size(); ++id) map[id] = unified.Intern(texts[id]);
  return map;
}

}  // namespace aon::merge
