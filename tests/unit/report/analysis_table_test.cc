// The analyses' table (report/src/analyses/analysis.h): every analysis runs
// after the ones it reads, each once.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "analyses/analysis.h"

namespace aon::report {
namespace {

TEST(Analyses, EachRunsAfterWhatItNeeds) {
  std::set<std::string> done;
  std::vector<std::string> names;
  for (const Analysis* a : AnalysisTable()) {
    const std::string needs = a->needs;
    size_t pos = 0;
    while (pos < needs.size()) {
      size_t comma = needs.find(',', pos);
      if (comma == std::string::npos) comma = needs.size();
      std::string need = needs.substr(pos, comma - pos);
      need.erase(0, need.find_first_not_of(' '));
      EXPECT_TRUE(done.count(need)) << a->name << " needs " << need << " before it";
      pos = comma + 1;
    }
    EXPECT_TRUE(done.insert(a->name).second) << "twice: " << a->name;
    names.push_back(a->name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"steps", "capture", "loss", "breakdown", "kernels",
                                             "communication", "compile", "idle", "memory", "nvtx",
                                             "heat", "torch", "xla", "counters"}));
}

}  // namespace
}  // namespace aon::report
