// aon-run's command line, registered from the option table that the SPANK
// plugin reads too (aon/config/options.h): names, value names and help text
// come from there, so tests/slurm/front_end_parity_test.cc can hold every
// option of the real aon-run next to its srun twin.
#pragma once

#include <CLI/CLI.hpp>

#include "aon/launcher/launch_plan.h"

namespace aon::launcher {

// What the command line fills in.
struct RunCommandLine {
  RunOptions options;
  bool no_merge = false;
  bool no_report = false;
};

// Adds every aon-run option of the table to `app`, bound to `values`, and makes
// the first word that is not an option (or the word after "--") and everything
// after it the command (app.remaining()). Values
// are checked afterwards by ValidateOptions (one check for both front ends),
// except --merge-procs, which CLI11 bounds.
void DefineRunOptions(CLI::App& app, RunCommandLine& values);

}  // namespace aon::launcher
