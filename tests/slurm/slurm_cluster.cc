#include "slurm_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace aon::testing {
namespace fs = std::filesystem;
namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void StopProcess(std::unique_ptr<Process>& p) {
  if (!p) return;
  ::kill(p->pid(), SIGTERM);  // only this pid; Wait() kills its group if it lingers
  p->Wait(std::chrono::seconds(15));
  p.reset();
}

// slurmctld only runs where SlurmctldHost names this host.
std::string LocalHostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string s = name;
  return s.substr(0, s.find('.'));
}

}  // namespace

bool RunSetupCommand(const std::vector<std::string>& argv, const std::string& scratch,
                     std::string* error) {
  ProcessResult r = RunProcess(argv, {}, scratch, std::chrono::seconds(30));
  if (r.exit_status == 0) return true;
  std::string cmd;
  for (const std::string& a : argv) cmd += a + " ";
  *error += "'" + cmd + "' failed: " + r.Describe() + "\n";
  return false;
}

std::unique_ptr<SlurmCluster> SlurmCluster::Start(const ClusterOptions& options,
                                                  std::string* error) {
  std::unique_ptr<SlurmCluster> c(new SlurmCluster());
  if (!c->Setup(options, error)) {
    *error += c->Logs();
    return nullptr;  // the destructor tears down whatever did start
  }
  return c;
}

bool SlurmCluster::SetupNetwork(int nodes, std::string* error) {
  const int tag = getpid() % 100000;
  const std::string subnet = "10.254." + std::to_string(getpid() % 250) + ".";
  bridge_ = "aonbr" + std::to_string(tag);
  if (!RunSetupCommand({"ip", "link", "add", bridge_, "type", "bridge"}, dir_, error)) {
    bridge_.clear();
    return false;
  }
  if (!RunSetupCommand({"ip", "addr", "add", subnet + "1/24", "dev", bridge_}, dir_, error) ||
      !RunSetupCommand({"ip", "link", "set", bridge_, "up"}, dir_, error))
    return false;
  for (int i = 1; i <= nodes; ++i) {
    const std::string ns = "aon" + std::to_string(tag) + "n" + std::to_string(i);
    const std::string host_if = "aon" + std::to_string(tag) + "h" + std::to_string(i);
    if (!RunSetupCommand({"ip", "netns", "add", ns}, dir_, error)) return false;
    netns_.push_back(ns);
    const std::string ip = subnet + std::to_string(10 + i);
    if (!RunSetupCommand(
            {"ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns},
            dir_, error) ||
        !RunSetupCommand({"ip", "link", "set", host_if, "master", bridge_, "up"}, dir_, error) ||
        !RunSetupCommand({"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"}, dir_, error) ||
        !RunSetupCommand({"ip", "-n", ns, "link", "set", "eth0", "up"}, dir_, error) ||
        !RunSetupCommand({"ip", "-n", ns, "link", "set", "lo", "up"}, dir_, error) ||
        !RunSetupCommand({"ip", "-n", ns, "route", "add", "default", "via", subnet + "1"}, dir_,
                         error))
      return false;
  }
  return true;
}

bool SlurmCluster::Setup(const ClusterOptions& o, std::string* error) {
  char tmpl[] = "/tmp/aon-slurm-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *error = "mkdtemp failed";
    return false;
  }
  dir_ = tmpl;
  // Traversable by the unprivileged test user (munge socket, slurm.conf, logs).
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec |
                            fs::perms::group_read | fs::perms::others_read);
  for (const char* sub : {"munge-key", "munge", "state", "log", "spool"})
    fs::create_directories(dir_ + "/" + sub);
  fs::permissions(dir_ + "/munge-key", fs::perms::owner_all);

  // munged: own key and socket; --force because it runs as root here.
  if (!RunSetupCommand({"mungekey", "-c", "-k", dir_ + "/munge-key/munge.key"}, dir_, error))
    return false;
  const std::string socket = dir_ + "/munge/socket";
  munged_ = std::make_unique<Process>(
      std::vector<std::string>{
          "munged", "-F", "--force", "--socket=" + socket,
          "--key-file=" + dir_ + "/munge-key/munge.key", "--pid-file=" + dir_ + "/munge/munged.pid",
          "--seed-file=" + dir_ + "/munge-key/seed", "--log-file=" + dir_ + "/log/munged.log"},
      std::map<std::string, std::string>{}, dir_);
  // Up to 30 s: how fast munged starts is not under test, and a loaded
  // machine may take longer than the 5 s this used to wait.
  for (int i = 0; i < 600 && !fs::exists(socket); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!fs::exists(socket)) {
    *error = "munged did not create " + socket + " in 30 s\n" + ReadFile(dir_ + "/log/munged.log");
    return false;
  }

  std::string ctl_addr = "127.0.0.1";
  std::vector<std::string> node_addrs;
  if (o.network_namespaces) {
    if (!SetupNetwork(o.nodes, error)) {
      *error = "cannot create the network namespaces for a " + std::to_string(o.nodes) +
               "-node cluster: " + *error;
      return false;
    }
    const std::string subnet = "10.254." + std::to_string(getpid() % 250) + ".";
    ctl_addr = subnet + "1";
    for (int i = 1; i <= o.nodes; ++i) node_addrs.push_back(subnet + std::to_string(10 + i));
  } else {
    if (o.nodes != 1) {
      *error = "several nodes need network namespaces";
      return false;
    }
    node_addrs.push_back("127.0.0.1");
  }
  for (int i = 1; i <= o.nodes; ++i) node_names_.push_back("n" + std::to_string(i));

  std::ofstream(dir_ + "/plugstack.conf") << o.plugstack_line << "\n";
  conf_ = dir_ + "/slurm.conf";
  std::ofstream conf(conf_);
  conf << "ClusterName=aontest\n"
       << "SlurmctldHost=" << LocalHostname() << "(" << ctl_addr << ")\n"
       << "SlurmctldPort=" << FreePort() << "\n"
       << "SlurmdPort=" << FreePort() << "\n"
       << "AuthType=auth/munge\nCredType=cred/munge\n"
       << "AuthInfo=socket=" << socket << "\n"
       << "SlurmUser=root\nSlurmdUser=root\n"
       << "StateSaveLocation=" << dir_ << "/state\n"
       << "SlurmdSpoolDir=" << dir_ << "/spool/%n\n"
       << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\n"
       << "SlurmdPidFile=" << dir_ << "/slurmd-%n.pid\n"
       << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\n"
       << "SlurmdLogFile=" << dir_ << "/log/slurmd-%n.log\n"
       << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
       << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
       << "MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n"
       << "AccountingStorageType=accounting_storage/none\n"
       << "SlurmdParameters=config_overrides\nReturnToService=2\n"
       << "KillWait=5\nMessageTimeout=20\n"
       // Per node: Slurm's PMIx plugin puts spmix_appdir_<job>.<step> in TmpFS, which
       // nodes on one host would otherwise share (/tmp).
       << "TmpFS=" << dir_ << "/tmpfs/%n\n"
       << "PlugStackConfig=" << dir_ << "/plugstack.conf\n";
  for (int i = 0; i < o.nodes; ++i)
    conf << "NodeName=" << node_names_[i] << " NodeAddr=" << node_addrs[i]
         << " NodeHostname=" << (o.network_namespaces ? node_names_[i] : "localhost")
         << " CPUs=4 State=UNKNOWN\n";
  conf << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  conf.close();

  const std::map<std::string, std::string> env = {{"SLURM_CONF", conf_}};
  slurmctld_ = std::make_unique<Process>(
      std::vector<std::string>{"slurmctld", "-D", "-i", "-f", conf_}, env, dir_);
  for (int i = 0; i < o.nodes; ++i) {
    const std::string& name = node_names_[static_cast<size_t>(i)];
    fs::create_directories(dir_ + "/spool/" + name);
    fs::create_directories(dir_ + "/tmpfs/" + name);
    fs::permissions(dir_ + "/tmpfs/" + name, fs::perms::all | fs::perms::sticky_bit);
    std::vector<std::string> argv = {"slurmd", "-D", "-N", name, "-f", conf_};
    if (o.network_namespaces) {
      // Own hostname (unshare --uts) and network namespace (nsenter --net).
      argv = {"unshare", "--uts", "--kill-child=SIGTERM"};
      const size_t at = static_cast<size_t>(i);
      if (at < o.monotonic_offset_s.size() && o.monotonic_offset_s[at] != 0) {
        // --kill-child forks, so sh and slurmd start inside the new time namespace.
        argv.insert(argv.end(),
                    {"--time", "--monotonic", std::to_string(o.monotonic_offset_s[at])});
      }
      argv.insert(argv.end(), {"sh", "-c",
                               "hostname " + name + " && exec nsenter --net=/run/netns/" +
                                   netns_[at] + " slurmd -D -N " + name + " -f " + conf_});
    }
    slurmds_.push_back(std::make_unique<Process>(argv, env, dir_));
  }

  // Bounded wait until every node is idle.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    ProcessResult r =
        RunProcess({"sinfo", "-h", "-N", "-o", "%N %t"}, env, dir_, std::chrono::seconds(20));
    last = r.out + r.err;
    int idle = 0;
    std::istringstream lines(r.out);
    std::string node, state;
    while (lines >> node >> state) idle += state == "idle";
    if (r.exit_status == 0 && idle == o.nodes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  *error = "nodes not idle after 40 s; sinfo says: " + last + "\n";
  return false;
}

ProcessResult SlurmCluster::Run(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env,
                                const std::string& cwd, const std::string& user,
                                std::chrono::seconds limit) {
  // sh -c 'cd DIR && exec "$@"' keeps every argument as it is.
  std::vector<std::string> cmd;
  if (!user.empty()) cmd = {"runuser", "-u", user, "--"};
  cmd.push_back("env");
  cmd.push_back("SLURM_CONF=" + conf_);
  cmd.push_back("PWD=" + cwd);
  for (const auto& [k, v] : env) cmd.push_back(k + "=" + v);
  for (const std::string& a :
       {std::string("sh"), std::string("-c"), std::string("cd \"$0\" && exec \"$@\""), cwd})
    cmd.push_back(a);
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return RunProcess(cmd, {}, dir_, limit);
}

std::string SlurmCluster::Logs() const {
  std::string out;
  if (dir_.empty()) return out;
  for (const auto& e : fs::directory_iterator(dir_ + "/log"))
    out += "---- " + e.path().string() + "\n" + ReadFile(e.path().string());
  return out;
}

void SlurmCluster::Stop() {
  // In a namespace node, slurmd runs under `unshare`, which ignores SIGTERM while it
  // waits: signal the slurmd itself (its pid file); unshare exits with it.
  for (size_t i = 0; i < slurmds_.size(); ++i) {
    if (!slurmds_[i]) continue;
    const pid_t slurmd = std::atoi(ReadFile(dir_ + "/slurmd-" + node_names_[i] + ".pid").c_str());
    if (slurmd > 1) ::kill(slurmd, SIGTERM);
    StopProcess(slurmds_[i]);
  }
  slurmds_.clear();
  StopProcess(slurmctld_);
  StopProcess(munged_);
  std::string ignored;
  for (const std::string& ns : netns_) RunSetupCommand({"ip", "netns", "del", ns}, dir_, &ignored);
  netns_.clear();
  if (!bridge_.empty()) RunSetupCommand({"ip", "link", "del", bridge_}, dir_, &ignored);
  bridge_.clear();
}

SlurmCluster::~SlurmCluster() {
  Stop();
  if (!dir_.empty() && std::getenv("AON_KEEP_SLURM_DIR") == nullptr) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

}  // namespace aon::testing
