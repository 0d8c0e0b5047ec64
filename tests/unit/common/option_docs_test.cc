// docs/options.md holds the option reference made from the option tables.
#include "aon/config/option_docs.h"

#include <gtest/gtest.h>

#include <string>

#include "aon/config/agent_config.h"
#include "aon/config/options.h"
#include "generated_doc.h"

namespace aon::session {
namespace {

TEST(OptionDocs, DocumentedTablesMatchTheCode) {
  const auto section = testing::GeneratedDocSection("options.md", "aon-run --options-markdown");
  ASSERT_TRUE(section.has_value());
  EXPECT_EQ(*section, OptionTablesMarkdown())
      << "docs/options.md is out of date: run `bash scripts/regen-docs.sh`";
}

// Every variable and every option of both front ends has its row, with its default.
TEST(OptionDocs, EveryVariableAndOptionHasItsRow) {
  const std::string md = OptionTablesMarkdown();
  for (const ConfigVariable& v : AgentConfigVariables()) {
    const std::string row = "| `" + std::string(v.env) + "` | " + ConfigTypeName(v.type) + " | ";
    EXPECT_NE(md.find(row), std::string::npos) << v.env;
    EXPECT_STRNE(ConfigTypeName(v.type), "?") << v.env;
  }
  for (const FrontEndOption& o : FrontEndOptions()) {
    if (o.spank != nullptr) {
      EXPECT_NE(md.find("`--" + std::string(o.spank) + "`"), std::string::npos) << o.spank;
    }
    if (o.run != nullptr) {
      const std::string first(o.run, std::string_view(o.run).find(',') == std::string_view::npos
                                         ? std::string_view(o.run).size()
                                         : std::string_view(o.run).find(','));
      EXPECT_NE(md.find("`" + first + "`"), std::string::npos) << o.run;
    }
  }
  // A '|' inside a value would cut its row short: escaped.
  EXPECT_NE(md.find("auto\\|gpm\\|off"), std::string::npos);
}

}  // namespace
}  // namespace aon::session
