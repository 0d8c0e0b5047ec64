// The reference tables of docs/options.md, made from the tables the code runs
// on: every option of the two front ends (FrontEndOptions(), aon/config/options.h)
// and every AON_* variable of the agent (AgentConfigVariables()). `aon-run
// --options-markdown` prints them; scripts/regen-docs.sh puts them between the
// document's GENERATED markers, and tests/unit/common/option_docs_test.cc fails
// while the two differ.
#pragma once

#include <string>

namespace aon::session {

std::string OptionTablesMarkdown();

}  // namespace aon::session
