// Unit tests of aon::launcher: option validation, argv rewriting per launcher,
// the agent environment, path resolution and job directories. Files and
// directories are real (under a per-test temporary directory); no launcher runs.
#include "aon/launcher/launch_plan.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "skip_or_fail.h"
#include "temp_dir.h"

namespace aon::launcher {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

// A getenv stand-in over a fixed map.
EnvLookupFn FakeEnv(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

const std::vector<EnvVar> kVars = {{"CUDA_INJECTION64_PATH", "/x/lib/libaon_agent.so"},
                                   {"AON_OUTPUT_DIR", "/jobs/a,b"}};

class TempDir : public ::testing::Test {
 protected:
  std::string Touch(const std::string& relative,
                    fs::perms perms = fs::perms::owner_read | fs::perms::owner_write) {
    fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
    fs::permissions(p, perms);
    return p.string();
  }
  // An install-like tree: <dir>/bin/aon-run, <dir>/lib/libaon_agent.so.
  HostContext Host(std::map<std::string, std::string> env = {}) {
    Touch("bin/aon-run", fs::perms::owner_all);
    Touch("lib/libaon_agent.so");
    Touch("path/mpirun", fs::perms::owner_all);
    Touch("path/srun", fs::perms::owner_all);
    Touch("path/torchrun", fs::perms::owner_all);
    if (!env.count("PATH")) env["PATH"] = dir_ + "/path";
    HostContext host;
    host.exe_path = dir_ + "/bin/aon-run";
    host.cwd = dir_ + "/work";
    fs::create_directories(host.cwd);
    host.env = FakeEnv(std::move(env));
    host.now = 0;
    host.pid = 42;
    return host;
  }
  test_support::TempDir tmp_;  // tests/support/temp_dir.h
  std::string dir_ = tmp_.path();
};

RunOptions Options(Args command) {
  RunOptions o;
  o.command = std::move(command);
  return o;
}

// ---- launcher kinds -------------------------------------------------------------

TEST(ClassifyLauncher, KnowsTheLaunchers) {
  EXPECT_EQ(ClassifyLauncher("mpirun"), LauncherKind::kOpenMpi);
  EXPECT_EQ(ClassifyLauncher("/usr/bin/mpiexec"), LauncherKind::kOpenMpi);
  EXPECT_EQ(ClassifyLauncher("orterun"), LauncherKind::kOpenMpi);
  EXPECT_EQ(ClassifyLauncher("mpirun.openmpi"), LauncherKind::kOpenMpi);
  EXPECT_EQ(ClassifyLauncher("mpirun", "/usr/bin/orterun"), LauncherKind::kOpenMpi);
  EXPECT_EQ(ClassifyLauncher("srun"), LauncherKind::kSlurm);
  EXPECT_EQ(ClassifyLauncher("/opt/slurm/bin/srun"), LauncherKind::kSlurm);
  EXPECT_EQ(ClassifyLauncher("torchrun"), LauncherKind::kTorchrun);
  EXPECT_EQ(ClassifyLauncher("python3"), LauncherKind::kPlain);
  EXPECT_EQ(ClassifyLauncher("./train"), LauncherKind::kPlain);
  EXPECT_EQ(ClassifyLauncher("mpirun-wrapper"), LauncherKind::kPlain);
}

TEST(ClassifyLauncher, MpichHydraIsPlainBecauseItHasNoDashX) {
  EXPECT_EQ(ClassifyLauncher("mpirun", "/usr/bin/mpiexec.hydra"), LauncherKind::kPlain);
  EXPECT_EQ(ClassifyLauncher("mpiexec", "/usr/bin/mpiexec.mpich"), LauncherKind::kPlain);
}

// ---- argv rewriting -------------------------------------------------------------

TEST(RewriteCommand, OpenMpiGetsDashXRightAfterTheLauncherWord) {
  for (const char* word : {"mpirun", "mpiexec", "orterun", "/usr/bin/mpirun"}) {
    Args in = {word, "-np", "4", "--oversubscribe", "./train", "-x", "5"};
    // The injection path goes to the ranks by value (mpirun's own environment lacks it).
    Args want = {word,
                 "-x",
                 "CUDA_INJECTION64_PATH=/x/lib/libaon_agent.so",
                 "-x",
                 "AON_OUTPUT_DIR",
                 "-np",
                 "4",
                 "--oversubscribe",
                 "./train",
                 "-x",
                 "5"};
    EXPECT_EQ(RewriteCommand(in, LauncherKind::kOpenMpi, kVars, FakeEnv({})), want) << word;
  }
}

TEST(RewriteCommand, OpenMpiGetsOddPathsByNameOnly) {
  // -x does not understand quoting: a path with a space or comma is exported by name.
  const std::vector<EnvVar> vars = {{"CUDA_INJECTION64_PATH", "/my dir/libaon_agent.so"},
                                    {"NVTX_INJECTION64_PATH", "/a,b/libaon_agent.so"}};
  Args want = {"mpirun", "-x", "CUDA_INJECTION64_PATH", "-x", "NVTX_INJECTION64_PATH", "./a"};
  EXPECT_EQ(RewriteCommand({"mpirun", "./a"}, LauncherKind::kOpenMpi, vars, FakeEnv({})), want);
  std::vector<std::string> unset;
  EXPECT_EQ(LauncherEnvironment(LauncherKind::kOpenMpi, vars, &unset).size(), 2u);
  EXPECT_TRUE(unset.empty());
}

TEST(LauncherEnvironment, MpirunItselfNeverLoadsTheAgent) {
  const std::vector<EnvVar> vars = {{"CUDA_INJECTION64_PATH", "/x/lib/libaon_agent.so"},
                                    {"NVTX_INJECTION64_PATH", "/x/lib/libaon_agent.so"},
                                    {"AON_OUTPUT_DIR", "/jobs/a"}};
  std::vector<std::string> unset;
  std::vector<EnvVar> env = LauncherEnvironment(LauncherKind::kOpenMpi, vars, &unset);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].name, "AON_OUTPUT_DIR");
  EXPECT_EQ(unset, (Args{"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}));
  for (LauncherKind kind : {LauncherKind::kSlurm, LauncherKind::kTorchrun, LauncherKind::kPlain}) {
    std::vector<std::string> none;
    EXPECT_EQ(LauncherEnvironment(kind, vars, &none).size(), vars.size()) << LauncherKindName(kind);
    EXPECT_TRUE(none.empty());
  }
}

TEST(RewriteCommand, SrunWithoutExportIsUnchanged) {
  Args in = {"srun", "-n", "4", "./train", "--export=NONE"};
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), in);
}

TEST(RewriteCommand, SrunExportAllIsUnchanged) {
  for (const char* e : {"--export=ALL", "--export=ALL,FOO=1", "--export=all"}) {
    Args in = {"srun", e, "-n", "2", "./train"};
    EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), in) << e;
  }
}

TEST(RewriteCommand, SrunExportNoneBecomesTheListOfOurNames) {
  Args in = {"srun", "-n", "2", "--export=NONE", "./train"};
  Args want = {"srun", "-n", "2", "--export=CUDA_INJECTION64_PATH,AON_OUTPUT_DIR", "./train"};
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), want);
}

TEST(RewriteCommand, SrunExportAsSeparateWord) {
  Args in = {"srun", "--export", "NONE", "./train"};
  Args want = {"srun", "--export", "CUDA_INJECTION64_PATH,AON_OUTPUT_DIR", "./train"};
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), want);
}

TEST(RewriteCommand, SrunExportListGetsOurNamesAppended) {
  Args in = {"srun", "--export=PATH,OMP_NUM_THREADS=4", "./train"};
  Args want = {"srun", "--export=PATH,OMP_NUM_THREADS=4,CUDA_INJECTION64_PATH,AON_OUTPUT_DIR",
               "./train"};
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), want);
}

TEST(RewriteCommand, SrunExportKeepsAValueTheUserExportedExplicitly) {
  Args in = {"srun", "--export=AON_OUTPUT_DIR=/mine", "./train"};
  Args want = {"srun", "--export=AON_OUTPUT_DIR=/mine,CUDA_INJECTION64_PATH", "./train"};
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), want);
}

TEST(RewriteCommand, SrunOptionValuesAreNotMistakenForTheProgram) {
  // -n 4, --mpi pmix and -lN1 come before --export; the app's own --export is left alone.
  Args in = {"srun",    "-n",           "4", "--mpi", "pmix", "-lN1", "--label", "--export=NONE",
             "./train", "--export=NONE"};
  Args want = in;
  want[7] = "--export=CUDA_INJECTION64_PATH,AON_OUTPUT_DIR";
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), want);
}

TEST(RewriteCommand, SrunLastExportWins) {
  Args in = {"srun", "--export=NONE", "--export=FOO", "./train"};
  Args want = {"srun", "--export=NONE", "--export=FOO,CUDA_INJECTION64_PATH,AON_OUTPUT_DIR",
               "./train"};
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({})), want);
}

TEST(RewriteCommand, SrunInheritsANarrowingSlurmExportEnv) {
  Args in = {"srun", "-n", "2", "./train"};
  Args want = {"srun", "--export=CUDA_INJECTION64_PATH,AON_OUTPUT_DIR", "-n", "2", "./train"};
  EXPECT_EQ(
      RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({{"SLURM_EXPORT_ENV", "NONE"}})),
      want);
  EXPECT_EQ(RewriteCommand(in, LauncherKind::kSlurm, kVars, FakeEnv({{"SLURM_EXPORT_ENV", "ALL"}})),
            in);
  // An --export on the command line overrides SLURM_EXPORT_ENV.
  Args explicit_all = {"srun", "--export=ALL", "./train"};
  EXPECT_EQ(RewriteCommand(explicit_all, LauncherKind::kSlurm, kVars,
                           FakeEnv({{"SLURM_EXPORT_ENV", "NONE"}})),
            explicit_all);
}

TEST(RewriteCommand, TorchrunAndPlainProgramsInherit) {
  Args torch = {"torchrun", "--nproc-per-node=2", "train.py"};
  EXPECT_EQ(RewriteCommand(torch, LauncherKind::kTorchrun, kVars, FakeEnv({})), torch);
  Args plain = {"python3", "train.py", "-x", "1"};
  EXPECT_EQ(RewriteCommand(plain, LauncherKind::kPlain, kVars, FakeEnv({})), plain);
}

// ---- option validation ----------------------------------------------------------

TEST(ValidateOptions, AcceptsGoodValues) {
  RunOptions o = Options({"mpirun", "-np", "2", "./a"});
  EXPECT_TRUE(ValidateOptions(o).ok());
  o.kinds = "kernels,memcpy,nvtx";
  o.memory_cap = "1G";
  o.source = "synthetic";
  EXPECT_TRUE(ValidateOptions(o).ok()) << ValidateOptions(o).ToString();
}

TEST(ValidateOptions, ErrorsNameTheOption) {
  struct Case {
    std::string RunOptions::*field;
    std::string value;
    const char* option;
  };
  const std::vector<Case> cases = {
      {&RunOptions::kinds, "kernels,bogus", "--kinds"},
      {&RunOptions::memory_cap, "12Q", "--memory-cap"},
      {&RunOptions::memory_cap, "MiB", "--memory-cap"},
      {&RunOptions::memory_cap, "0", "--memory-cap"},
      {&RunOptions::source, "gpu", "--source"},
  };
  for (const Case& c : cases) {
    RunOptions o = Options({"mpirun", "./a"});
    o.*c.field = c.value;
    Status s = ValidateOptions(o);
    EXPECT_FALSE(s.ok()) << c.option << " " << c.value;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.option), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.value), std::string::npos) << s.message();
  }
  Status no_command = ValidateOptions(Options({}));
  EXPECT_EQ(no_command.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_command.message().find("no command"), std::string::npos) << no_command.message();
}

TEST(ValidateOptions, KindsErrorNamesTheBadKind) {
  RunOptions o = Options({"a"});
  o.kinds = "kernels,bogus";
  Status s = ValidateOptions(o);
  EXPECT_NE(s.message().find("bogus"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("AON_KINDS"), std::string::npos) << s.message();
}

// ---- paths ----------------------------------------------------------------------

TEST_F(TempDir, AgentIsFoundRelativeToTheExecutable) {
  Touch("bin/aon-run", fs::perms::owner_all);
  std::string agent = Touch("lib/libaon_agent.so");
  auto found = ResolveAgentPath(dir_ + "/bin/aon-run", FakeEnv({}));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, fs::canonical(agent).string());
  EXPECT_EQ(found->find(".."), std::string::npos);
}

TEST_F(TempDir, MissingAgentErrorSaysWhereItLooked) {
  Touch("bin/aon-run", fs::perms::owner_all);
  auto found = ResolveAgentPath(dir_ + "/bin/aon-run", FakeEnv({}));
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find(dir_ + "/bin/../lib/libaon_agent.so"), std::string::npos)
      << found.status().message();
  EXPECT_NE(found.status().message().find("AON_AGENT_PATH"), std::string::npos);
}

TEST_F(TempDir, AgentPathOverride) {
  std::string other = Touch("elsewhere/agent.so");
  auto found = ResolveAgentPath("/nonexistent/bin/aon-run", FakeEnv({{"AON_AGENT_PATH", other}}));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, fs::canonical(other).string());

  auto missing = ResolveAgentPath("/nonexistent/bin/aon-run",
                                  FakeEnv({{"AON_AGENT_PATH", dir_ + "/nope.so"}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("AON_AGENT_PATH=" + dir_ + "/nope.so"),
            std::string::npos)
      << missing.status().message();

  auto directory = ResolveAgentPath("/x/bin/aon-run", FakeEnv({{"AON_AGENT_PATH", dir_}}));
  EXPECT_FALSE(directory.ok());
}

TEST_F(TempDir, FindProgramSearchesPathLikeExecvp) {
  std::string exe = Touch("p2/tool", fs::perms::owner_all);
  Touch("p1/tool");  // not executable: skipped
  auto found = FindProgram("tool", dir_ + "/p1:" + dir_ + "/p2", "/");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, exe);

  auto only_unexecutable = FindProgram("tool", dir_ + "/p1", "/");
  EXPECT_EQ(only_unexecutable.status().code(), StatusCode::kPermissionDenied);

  auto missing = FindProgram("no-such-launcher", dir_ + "/p1", "/");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no-such-launcher"), std::string::npos);

  // A word with a slash is a path, relative to the working directory.
  auto relative = FindProgram("./p2/tool", "", dir_);
  ASSERT_TRUE(relative.ok()) << relative.status().ToString();
  EXPECT_EQ(*relative, exe);
}

TEST(AbsolutePath, NormalizesAgainstCwd) {
  EXPECT_EQ(AbsolutePath("out", "/home/u"), "/home/u/out");
  EXPECT_EQ(AbsolutePath("./a/../b/", "/home/u"), "/home/u/b");
  EXPECT_EQ(AbsolutePath("/abs/x", "/home/u"), "/abs/x");
}

// ---- job directories ------------------------------------------------------------

TEST(DefaultJobDirName, UsesTheSlurmJobId) {
  EXPECT_EQ(DefaultJobDirName(FakeEnv({{"SLURM_JOB_ID", "81234"}}), 0, 7), "aon-81234");
  // Not a path: a hostile value cannot climb out of the current directory.
  EXPECT_EQ(DefaultJobDirName(FakeEnv({{"SLURM_JOB_ID", "../../etc"}}), 0, 7), "aon-.._.._etc");
}

TEST(DefaultJobDirName, ElseTimeAndPid) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(DefaultJobDirName(FakeEnv({}), 86400 + 3661, 4242), "aon-19700102-010101-4242");
}

TEST_F(TempDir, PlanLaunchBuildsEverything) {
  HostContext host = Host();
  RunOptions o = Options({"mpirun", "-np", "4", "./train"});
  o.kinds = "kernels,nvtx";
  o.memory_cap = "128M";
  o.source = "synthetic";
  o.verbose = 1;
  auto plan = PlanLaunch(o, host);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->launcher, LauncherKind::kOpenMpi);
  EXPECT_EQ(plan->program_path, dir_ + "/path/mpirun");
  EXPECT_EQ(plan->job_dir, dir_ + "/work/aon-19700101-000000-42");
  EXPECT_EQ(plan->merge_path, dir_ + "/bin/aon-merge");
  const std::string agent = fs::canonical(dir_ + "/lib/libaon_agent.so").string();
  std::map<std::string, std::string> env;
  for (const EnvVar& v : plan->agent_env) env[v.name] = v.value;
  EXPECT_EQ(env, (std::map<std::string, std::string>{
                     {"CUDA_INJECTION64_PATH", agent},
                     {"NVTX_INJECTION64_PATH", agent},
                     {"AON_OUTPUT_DIR", plan->job_dir},
                     {"AON_JOB_ID", "aon-19700101-000000-42"},
                     {"AON_KINDS", "kernels,nvtx"},
                     {"AON_MEMORY_CAP", "128M"},
                     {"AON_SOURCE", "synthetic"},
                     {"AON_VERBOSE", "1"},
                     {"AON_NCCL", "default"},
                     {"AON_MODE", "budgeted"},
                     {"AON_WINDOW", "60"},
                     {"NCCL_PROFILER_PLUGIN", agent},
                     {"PYTHONPATH", fs::path(agent).parent_path().string() + "/aon-python"},
                 }));
  // Every variable is passed with -x, before the user's own arguments.
  ASSERT_EQ(plan->argv.size(), 1 + 2 * plan->agent_env.size() + 3);
  EXPECT_EQ(plan->argv[0], "mpirun");
  EXPECT_EQ(plan->argv[1], "-x");
  EXPECT_EQ(plan->argv[2], "CUDA_INJECTION64_PATH=" + agent);
  EXPECT_EQ(Args(plan->argv.end() - 3, plan->argv.end()), (Args{"-np", "4", "./train"}));
  // ... and mpirun's own environment has everything but the injection paths.
  EXPECT_EQ(plan->launcher_env.size(), plan->agent_env.size() - 2);
  EXPECT_EQ(plan->launcher_unset, (Args{"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}));
}

TEST(OpenMpiHostOptions, TakesHostOptionsUpToTheApplication) {
  EXPECT_EQ(OpenMpiHostOptions({"mpirun", "-np", "8", "-H", "n1:4,n2:4", "--map-by", "node",
                                "./train", "-H", "not-mpirun's"}),
            (Args{"-H", "n1:4,n2:4"}));
  EXPECT_EQ(OpenMpiHostOptions({"mpirun", "--hostfile", "hosts.txt", "--mca", "btl", "self,tcp",
                                "-x", "FOO", "--host=a,b", "python3", "t.py"}),
            (Args{"--hostfile", "hosts.txt", "--host=a,b"}));
  EXPECT_EQ(OpenMpiHostOptions({"mpirun", "-np", "2", "./app", "--hostfile", "x"}), Args{});
  EXPECT_EQ(OpenMpiHostOptions({"mpirun"}), Args{});
}

TEST_F(TempDir, MergeRunsOnTheJobsHostsOrWithTheProcessesAsked) {
  HostContext host = Host();
  auto plan = PlanLaunch(
      Options({"mpirun", "--allow-run-as-root", "-np", "4", "-H", "n1,n2", "./train"}), host);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->merge_argv,
            (Args{dir_ + "/path/mpirun", "-H", "n1,n2", "--allow-run-as-root", "--map-by",
                  "ppr:1:node", dir_ + "/bin/aon-merge", plan->job_dir}));
  RunOptions o = Options({"mpirun", "-np", "4", "-H", "n1,n2", "./train"});
  o.merge_procs = 3;
  plan = PlanLaunch(o, host);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->merge_argv, (Args{dir_ + "/bin/aon-merge", "--procs", "3", plan->job_dir}));
  plan = PlanLaunch(Options({"mpirun", "-np", "4", "./train"}), host);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->merge_argv, (Args{dir_ + "/bin/aon-merge", plan->job_dir}));
}

// An AON_* variable aon-run leaves alone reaches every rank as inherited: a bad
// one is refused before launching (exit 125), naming it, its value and the fix;
// a good one passes; one aon-run sets itself (AON_MODE) is replaced, not checked.
TEST_F(TempDir, PlanLaunchRefusesABadInheritedAgentVariable) {
  RunOptions o = Options({"mpirun", "-np", "2", "./train"});
  auto bad = PlanLaunch(o, Host({{"AON_CAPTURE_PERIOD", "3"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(PlanErrorExitStatus(bad.status()), kExitAonError);
  const std::string& m = bad.status().message();
  EXPECT_NE(m.find("inherited from the environment"), std::string::npos) << m;
  EXPECT_NE(m.find("AON_CAPTURE_PERIOD"), std::string::npos) << m;
  EXPECT_NE(m.find("'3'"), std::string::npos) << m;
  EXPECT_NE(m.find("unset it or pass --capture-period"), std::string::npos) << m;
  auto memory = PlanLaunch(o, Host({{"AON_COUNTERS", "sometimes"}}));
  ASSERT_FALSE(memory.ok());
  EXPECT_NE(memory.status().message().find("AON_COUNTERS"), std::string::npos);

  auto good = PlanLaunch(o, Host({{"AON_CAPTURE_PERIOD", "64"}}));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  auto replaced = PlanLaunch(o, Host({{"AON_MODE", "bogus"}}));
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  for (const EnvVar& v : replaced->agent_env) {
    if (v.name == "AON_MODE") {
      EXPECT_EQ(v.value, "budgeted");
    }
  }
  // The option, when given, is what the ranks get: the inherited value is not theirs.
  o.passthrough[session::PassthroughOption(AgentVar::kCapturePeriod)] = "128";
  auto given = PlanLaunch(o, Host({{"AON_CAPTURE_PERIOD", "3"}}));
  EXPECT_TRUE(given.ok()) << given.status().ToString();
}

TEST_F(TempDir, PlanLaunchKeepsAUserJobIdAndMakesOutputAbsolute) {
  HostContext host = Host({{"AON_JOB_ID", "my-run"}, {"SLURM_JOB_ID", "77"}});
  RunOptions o = Options({"srun", "-n", "2", "./train"});
  o.output_dir = "results/../prof/";
  auto plan = PlanLaunch(o, host);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->launcher, LauncherKind::kSlurm);
  EXPECT_EQ(plan->job_dir, dir_ + "/work/prof");
  for (const EnvVar& v : plan->agent_env) {
    if (v.name == "AON_JOB_ID") {
      EXPECT_EQ(v.value, "my-run");
    }
  }
}

TEST_F(TempDir, TorchrunItselfIsMarkedAsTheLauncherNotARank) {
  HostContext host = Host();
  auto find = [](const LaunchPlan& plan) -> std::string {
    for (const EnvVar& v : plan.agent_env) {
      if (v.name == "AON_LAUNCHER_PARENT_PID") return v.value;
    }
    return "";
  };
  auto torch = PlanLaunch(Options({"torchrun", "--nproc-per-node=2", "train.py"}), host);
  ASSERT_TRUE(torch.ok()) << torch.status().ToString();
  EXPECT_EQ(find(*torch), std::to_string(host.pid));
  // A plain program is itself the rank; mpirun never receives the injection.
  auto plain = PlanLaunch(Options({"mpirun", "./a"}), host);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(find(*plain), "");
}

TEST_F(TempDir, DefaultJobDirIsNeverReused) {
  HostContext host = Host({{"SLURM_JOB_ID", "77"}});
  fs::create_directories(dir_ + "/work/aon-77");
  fs::create_directories(dir_ + "/work/aon-77-2");
  auto plan = PlanLaunch(Options({"mpirun", "./a"}), host);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->job_dir, dir_ + "/work/aon-77-3");
}

TEST_F(TempDir, PlanErrorsAndTheirExitStatuses) {
  HostContext host = Host();
  auto no_launcher = PlanLaunch(Options({"no-such-launcher", "-n", "2"}), host);
  ASSERT_FALSE(no_launcher.ok());
  EXPECT_NE(no_launcher.status().message().find("no-such-launcher"), std::string::npos);
  EXPECT_EQ(PlanErrorExitStatus(no_launcher.status()), kExitNotFound);

  RunOptions bad = Options({"mpirun"});
  bad.source = "nope";
  EXPECT_EQ(PlanErrorExitStatus(PlanLaunch(bad, host).status()), kExitAonError);

  fs::remove(dir_ + "/lib/libaon_agent.so");
  auto no_agent = PlanLaunch(Options({"mpirun"}), host);
  ASSERT_FALSE(no_agent.ok());
  EXPECT_NE(no_agent.status().message().find("libaon_agent.so"), std::string::npos);
  EXPECT_EQ(PlanErrorExitStatus(no_agent.status()), kExitAonError);
}

TEST_F(TempDir, PrepareOutputDirCreatesPrivateDirectories) {
  const std::string job = dir_ + "/a/b/job";
  ASSERT_TRUE(PrepareOutputDir(job).ok());
  for (const std::string& d : {dir_ + "/a", dir_ + "/a/b", job}) {
    struct stat st;
    ASSERT_EQ(::stat(d.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  EXPECT_TRUE(fs::is_empty(job)) << "the write probe must be removed";
  // An existing, empty directory is fine (mkdir -p).
  EXPECT_TRUE(PrepareOutputDir(job).ok());
}

TEST_F(TempDir, PrepareOutputDirRefusesFilesAndPathsBelowFiles) {
  std::string file = Touch("plain-file");
  Status not_dir = PrepareOutputDir(file);
  EXPECT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.message().find(file + " exists and is not a directory"), std::string::npos)
      << not_dir.message();

  Status below = PrepareOutputDir(file + "/job");
  EXPECT_FALSE(below.ok());
  EXPECT_NE(below.message().find(file + "/job"), std::string::npos) << below.message();
  EXPECT_NE(below.message().find("-o/--output"), std::string::npos) << below.message();
}

TEST_F(TempDir, PrepareOutputDirRefusesAnEarlierRunsTraces) {
  Touch("old/rank-00003.h5");
  Status s = PrepareOutputDir(dir_ + "/old");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank-00003.h5"), std::string::npos) << s.message();
  Touch("old2/timeline.h5");
  EXPECT_FALSE(PrepareOutputDir(dir_ + "/old2").ok());
  Touch("other/notes.txt");
  EXPECT_TRUE(PrepareOutputDir(dir_ + "/other").ok());
}

// -o is checked as the SPANK plugin checks its job directories (issue #18: a
// link or a directory of another user's, mode 0777, was accepted).
TEST_F(TempDir, PrepareOutputDirRefusesWhatAnotherUserCouldReplace) {
  const std::string open_dir = dir_ + "/open";
  fs::create_directory(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  Status below_open = PrepareOutputDir(open_dir + "/job");
  ASSERT_FALSE(below_open.ok());
  EXPECT_NE(below_open.message().find("-o/--output: cannot create " + open_dir + "/job (" +
                                      open_dir + ": every user may write in it"),
            std::string::npos)
      << below_open.message();
  EXPECT_FALSE(fs::exists(open_dir + "/job"));
  // Group-writable on the way, and the job directory's own loose mode: said,
  // and the directory made 0700.
  const std::string team = dir_ + "/team";
  fs::create_directories(team + "/job");
  ::chmod(team.c_str(), 0775);
  ::chmod((team + "/job").c_str(), 0755);
  std::vector<std::string> warnings;
  ASSERT_TRUE(PrepareOutputDir(team + "/job", &warnings).ok());
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("-o/--output: " + team + " may be written by its group"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find(team + "/job had mode 0755: made it 0700"), std::string::npos)
      << warnings[1];
  struct stat st {};
  ASSERT_EQ(::stat((team + "/job").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // The user's own link is followed (/home -> /export/home).
  fs::create_directory(dir_ + "/real");
  fs::create_directory_symlink(dir_ + "/real", dir_ + "/mine");
  EXPECT_TRUE(PrepareOutputDir(dir_ + "/mine/job").ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/real/job"));
}

TEST_F(TempDir, PrepareOutputDirRefusesAnotherUsersLinkOrDirectory) {
  const passwd* nobody = geteuid() == 0 ? ::getpwnam("nobody") : nullptr;
  if (nobody == nullptr || nobody->pw_uid == 0) AON_SKIP_OR_FAIL(<< "needs root and 'nobody'");
  ::chmod(dir_.c_str(), 0755);
  fs::create_directory(dir_ + "/real");
  const std::string planted = dir_ + "/out";
  fs::create_directory_symlink(dir_ + "/real", planted);
  ASSERT_EQ(::lchown(planted.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  Status link = PrepareOutputDir(planted);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.message().find(planted + ": is a symbolic link owned by uid " +
                                std::to_string(nobody->pw_uid)),
            std::string::npos)
      << link.message();
  EXPECT_TRUE(fs::is_empty(dir_ + "/real"));
  const std::string theirs = dir_ + "/theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  ::chmod(theirs.c_str(), 0777);
  Status dir = PrepareOutputDir(theirs);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("exists and belongs to another user (uid " +
                               std::to_string(nobody->pw_uid) + ")"),
            std::string::npos)
      << dir.message();
  EXPECT_TRUE(fs::is_empty(theirs)) << "the write probe ran in another user's directory";
}

TEST_F(TempDir, ListRankFilesSorted) {
  Touch("j/rank-00002.h5");
  Touch("j/rank-00000.h5");
  Touch("j/rank-00001.h5.partial");
  Touch("j/timeline.h5");
  EXPECT_EQ(ListRankFiles(dir_ + "/j"), (Args{"rank-00000.h5", "rank-00002.h5"}));
  EXPECT_TRUE(ListRankFiles(dir_ + "/missing").empty());
}

// ---- exit status ----------------------------------------------------------------

int WaitStatusOf(void (*child)()) {
  pid_t pid = ::fork();
  if (pid == 0) {
    child();
    ::_exit(99);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ExitStatusFromWaitStatus, ExitCodeOr128PlusSignal) {
  EXPECT_EQ(ExitStatusFromWaitStatus(WaitStatusOf([] { ::_exit(0); })), 0);
  EXPECT_EQ(ExitStatusFromWaitStatus(WaitStatusOf([] { ::_exit(3); })), 3);
  EXPECT_EQ(ExitStatusFromWaitStatus(WaitStatusOf([] { ::_exit(255); })), 255);
  EXPECT_EQ(ExitStatusFromWaitStatus(WaitStatusOf([] {
              ::signal(SIGTERM, SIG_DFL);
              ::raise(SIGTERM);
            })),
            128 + SIGTERM);
  EXPECT_EQ(ExitStatusFromWaitStatus(WaitStatusOf([] { ::raise(SIGKILL); })), 128 + SIGKILL);
}

}  // namespace
}  // namespace aon::launcher
