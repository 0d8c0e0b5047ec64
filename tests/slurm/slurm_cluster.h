// A real Slurm 22.05 cluster for one test, started and stopped by the test:
// its own munged (key and socket in a temp dir), slurmctld and one slurmd per
// node, a generated slurm.conf and a plugstack.conf loading the built aon.so.
//   * one node: slurmd on 127.0.0.1;
//   * several nodes: a bridge plus one network namespace per node (veth, addresses
//     in 10.254.X.0/24), each slurmd in its namespace with its own hostname
//     (unshare --uts, nsenter --net); slurmctld on the bridge address;
//   * optionally a time namespace per node (monotonic_offset_s);
//   * TmpFS=<dir>/tmpfs/%n: Slurm's PMIx plugin keeps spmix_appdir_<job>.<step>
//     there, which nodes sharing /tmp would collide on.
// Teardown kills exactly the processes it started, deletes its namespaces and
// bridge, and removes its temp dir. Clients (srun, sbatch) get SLURM_CONF.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "process_runner.h"

namespace aon::testing {

struct ClusterOptions {
  int nodes = 1;
  bool network_namespaces = false;  // required for nodes > 1
  std::string plugstack_line;       // e.g. "optional /path/aon.so"
  // Per node (with network namespaces), in seconds: slurmd runs in its own time
  // namespace whose CLOCK_MONOTONIC is this far ahead, and so do its steps'
  // tasks: nodes with really different clocks. Empty or 0: the host's clock.
  std::vector<int> monotonic_offset_s;
};

class SlurmCluster {
 public:
  // Starts everything and waits (bounded) until every node is idle. On failure
  // returns null and says why in *error (with the daemons' logs).
  static std::unique_ptr<SlurmCluster> Start(const ClusterOptions& options, std::string* error);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& conf() const { return conf_; }

  // Runs a Slurm client command (srun, sbatch, ...) with SLURM_CONF set, in
  // `cwd`, as `user` ("" = as the test, else through runuser).
  ProcessResult Run(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env, const std::string& cwd,
                    const std::string& user = "",
                    std::chrono::seconds limit = std::chrono::seconds(120));
  std::string Logs() const;  // slurmctld and slurmd logs, for failure messages

 private:
  SlurmCluster() = default;
  bool Setup(const ClusterOptions& options, std::string* error);
  bool SetupNetwork(int nodes, std::string* error);
  void Stop();

  std::string dir_;
  std::string conf_;
  std::string bridge_;
  std::vector<std::string> netns_;
  std::vector<std::string> node_names_;
  std::unique_ptr<Process> munged_;
  std::unique_ptr<Process> slurmctld_;
  std::vector<std::unique_ptr<Process>> slurmds_;
};

// Runs a command for set-up (ip, useradd): true if it exited 0; else *error says why.
bool RunSetupCommand(const std::vector<std::string>& argv, const std::string& scratch,
                     std::string* error);

}  // namespace aon::testing
