// A test fixture that runs a real child process with libaon_agent.so injected
// (NVTX, CUDA injection and NCCL plugin paths all point at it) and reads back
// the rank file it leaves.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "aon/format/trace_file.h"

namespace aon {

namespace fs = std::filesystem;

inline const std::string kAgent = std::string(AON_BUILD_LIB_DIR) + "/libaon_agent.so";


// kChildProgram: the child executable, defined by each test file.
extern const std::string kChildProgram;

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aon-agent-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the child with the agent injected; returns its wait status.
  int RunChild(const std::string& mode, const std::map<std::string, std::string>& extra_env = {}) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("NVTX_INJECTION64_PATH", kAgent.c_str(), 1);
      setenv("CUDA_INJECTION64_PATH", kAgent.c_str(), 1);
      setenv("AON_OUTPUT_DIR", dir_.c_str(), 1);
      setenv("AON_JOB_ID", "agent-test", 1);
      // These tests check full capture; budgeted mode sets AON_MODE itself.
      setenv("AON_MODE", "full", 1);
      // Steps of the time source come an hour after the start at the earliest:
      // a slow machine never makes them mark a step before the source a test
      // is about. The tests of the time source set AON_TIME_SLOT themselves.
      setenv("AON_TIME_SLOT", "3600", 1);
      for (const char* v : {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK", "PMIX_RANK"}) unsetenv(v);
      for (const auto& [k, v] : extra_env) setenv(k.c_str(), v.c_str(), 1);
      execl(kChildProgram.c_str(), kChildProgram.c_str(), mode.c_str(), nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  }

  std::unique_ptr<TraceReader> OpenRank0() {
    auto r = TraceReader::Open(dir_ + "/rank-00000.h5");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string dir_;
};

}  // namespace aon
