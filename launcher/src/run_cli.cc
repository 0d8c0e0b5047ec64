#include "aon/launcher/run_cli.h"

#include <stdexcept>
#include <string>

#include "aon/config/options.h"

namespace aon::launcher {
void DefineRunOptions(CLI::App& app, RunCommandLine& values) {
  using session::SessionOption;
  // Everything from the launcher word on belongs to the launcher, -np and all.
  app.prefix_command();
  RunOptions& o = values.options;
  for (const session::FrontEndOption& entry : session::FrontEndOptions()) {
    if (entry.run == nullptr) continue;
    // Wrapped by the help formatter (aon/cli/command_line.h).
    const std::string help = entry.run_help != nullptr ? entry.run_help : entry.help;
    CLI::Option* option = nullptr;
    switch (entry.id) {
      case SessionOption::kOutput:
        // "" would silently mean the default directory: refused, as srun's twin is.
        option = app.add_option(entry.run, o.output_dir, help)
                     ->check(
                         [](const std::string& value) {
                           auto checked = session::CheckOptionValue(SessionOption::kOutput, value);
                           return checked.ok() ? std::string() : checked.status().message();
                         },
                         "DIR");
        break;
      case SessionOption::kKinds:
        option = app.add_option(entry.run, o.kinds, help)->capture_default_str();
        break;
      case SessionOption::kMemoryCap:
        option = app.add_option(entry.run, o.memory_cap, help)->capture_default_str();
        break;
      case SessionOption::kSource:
        option = app.add_option(entry.run, o.source, help)->capture_default_str();
        break;
      case SessionOption::kNccl:
        option = app.add_option(entry.run, o.nccl, help)->capture_default_str();
        break;
      case SessionOption::kMode:
        option = app.add_option(entry.run, o.mode, help)->capture_default_str();
        break;
      case SessionOption::kWindow:
        option = app.add_option(entry.run, o.window, help)->capture_default_str();
        break;
      case SessionOption::kVerbose:
        option = app.add_flag(entry.run, o.verbose, help);
        break;
      case SessionOption::kMerge:
        option = app.add_flag(entry.run, values.no_merge, help);
        break;
      case SessionOption::kReport:
        option = app.add_flag(entry.run, values.no_report, help);
        break;
      case SessionOption::kMergeProcs:
        option = app.add_option(entry.run, o.merge_procs, help)->check(CLI::Range(1, 4096));
        break;
      default:  // the passthrough options but --mode (aon-run reads it): their text, checked later
        if (entry.passthrough) option = app.add_option(entry.run, o.passthrough[entry.id], help);
        break;
    }
    // An entry aon-run names but nothing here defines: an option added to the
    // table without its case (a passthrough one needs none). Every aon-run
    // start, and so every test of it, fails on it at once.
    if (option == nullptr) {
      throw std::logic_error(std::string("aon-run: the option table's ") + entry.run +
                             " has no definition (launcher/src/run_cli.cc)");
    }
    if (option != nullptr && entry.value != nullptr && entry.run_arg != session::OptionArg::kFlag)
      option->type_name(entry.value);
  }
}

}  // namespace aon::launcher
