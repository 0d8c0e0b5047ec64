#include "aon/clocksync/rank_sync.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "aon/base/timebase.h"

namespace aon::clocksync {
namespace {

constexpr const char* kEndpointKey = "aon.clock.endpoint";  // rank 0: "ip,ip,...:port"
constexpr const char* kClockIdKey = "aon.clock.id";         // node leaders: TimebaseClockId()

// IPv4 addresses of this host, loopback last (other nodes cannot use it, but
// ranks on this node can).
std::vector<std::string> LocalAddresses() {
  std::vector<std::string> out, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {"127.0.0.1"};
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    (std::strncmp(buf, "127.", 4) == 0 ? loopback : out).push_back(buf);
  }
  freeifaddrs(list);
  out.insert(out.end(), loopback.begin(), loopback.end());
  return out;
}

std::string PmixError(const char* what, pmix_status_t rc) {
  return std::string(what) + ": " + PMIx_Error_string(rc);
}

// Job data of our own namespace (cached by the client at init on both Open MPI
// and Slurm; a 2 s timeout in case a server has to be asked).
pmix_value_t* GetJobValue(const pmix_proc_t& proc, const char* key) {
  pmix_info_t info;
  int timeout_s = 2;
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  pmix_value_t* value = nullptr;
  pmix_status_t rc = PMIx_Get(&proc, key, &info, 1, &value);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS && value != nullptr) {
    PMIX_VALUE_RELEASE(value);
    value = nullptr;
  }
  return value;
}

// The node leader: the lowest rank among our namespace's local peers (rank 0
// on its own node). Without PMIX_LOCAL_PEERS, a rank of local rank 0 is its
// node's leader and any other does not know its leader (-1: it measures).
int64_t ElectNodeLeader(const pmix_proc_t& me, std::string* how) {
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  if (pmix_value_t* peers = GetJobValue(job, PMIX_LOCAL_PEERS)) {
    int64_t lowest = -1;
    bool has_me = false, parsed = peers->type == PMIX_STRING && peers->data.string != nullptr;
    if (parsed) {
      const std::string list = peers->data.string;
      size_t pos = 0;
      while (pos <= list.size() && parsed) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        const std::string item = list.substr(pos, comma - pos);
        pos = comma + 1;
        char* end = nullptr;
        const unsigned long long r = std::strtoull(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0') {
          parsed = false;
          break;
        }
        if (lowest < 0 || static_cast<int64_t>(r) < lowest) lowest = static_cast<int64_t>(r);
        has_me |= r == me.rank;
      }
    }
    PMIX_VALUE_RELEASE(peers);
    if (parsed && has_me) {
      *how = "lowest rank of PMIX_LOCAL_PEERS";
      return lowest;
    }
  }
  if (pmix_value_t* local = GetJobValue(me, PMIX_LOCAL_RANK)) {
    const bool first = local->type == PMIX_UINT16 && local->data.uint16 == 0;
    PMIX_VALUE_RELEASE(local);
    if (first) {
      *how = "local rank 0 (no usable PMIX_LOCAL_PEERS)";
      return me.rank;
    }
  }
  *how = "no usable PMIX_LOCAL_PEERS and not local rank 0: node leader unknown";
  return -1;
}

Status Publish(const std::vector<std::pair<const char*, std::string>>& entries) {
  for (const auto& [key, text] : entries) {
    pmix_value_t value;
    PMIX_VALUE_LOAD(&value, text.c_str(), PMIX_STRING);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &value);
    PMIX_VALUE_DESTRUCT(&value);
    if (rc != PMIX_SUCCESS) return Unavailable(PmixError("PMIx_Put", rc));
  }
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return Unavailable(PmixError("PMIx_Commit", rc));
  return Status::Ok();
}

}  // namespace

std::unique_ptr<RankClockSync> RankClockSync::Start(int period_ms, int rounds) {
  std::unique_ptr<RankClockSync> s(new RankClockSync());
  s->period_ms_ = period_ms;
  s->rounds_ = rounds;
  if (std::getenv("PMIX_NAMESPACE") == nullptr && std::getenv("PMIX_RANK") == nullptr) {
    s->failure_ = "no PMIx launcher (torchrun or a plain program): clocks not synchronized";
    return s;
  }
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    s->failure_ = PmixError("PMIx_Init", rc) + ": clocks not synchronized";
    return s;
  }
  s->pmix_initialized_ = true;
  s->nspace_ = me.nspace;
  s->rank_ = me.rank;
  if (std::strncmp(me.nspace, "singleton", 9) == 0) {
    s->failure_ = "PMIx singleton (no launcher): clocks not synchronized";
    return s;
  }
  s->clock_id_ = TimebaseClockId();
  if (pmix_value_t* host = GetJobValue(me, PMIX_HOSTNAME)) {
    if (host->type == PMIX_STRING && host->data.string != nullptr) s->host_ = host->data.string;
    PMIX_VALUE_RELEASE(host);
  }
  std::string how;
  s->node_leader_ = ElectNodeLeader(me, &how);
  s->is_root_ = me.rank == 0;
  if (s->is_root_) {
    auto server = PingServer::Start("0.0.0.0", 0, [] { return TimebaseNowNs(); });
    if (!server.ok()) {
      s->failure_ = "rank 0 cannot serve its clock: " + server.status().message();
      return s;
    }
    s->server_ = std::move(server).value();
    std::string endpoints;
    for (const std::string& a : LocalAddresses()) endpoints += (endpoints.empty() ? "" : ",") + a;
    endpoints += ":" + std::to_string(s->server_->port());
    Status published = Publish({{kEndpointKey, endpoints}, {kClockIdKey, s->clock_id_}});
    if (!published.ok()) {
      s->failure_ = "publishing rank 0's clock endpoint: " + published.message();
    }
    return s;  // the reference: nothing to measure
  }
  if (s->node_leader_ == static_cast<int64_t>(me.rank)) {
    // Our followers compare their clock id with this one. If it cannot be
    // published they measure for themselves: slower, never wrong.
    Status published = Publish({{kClockIdKey, s->clock_id_}});
    if (!published.ok()) {
      s->role_note_ = "publishing the node leader's clock id: " + published.message();
    }
  } else if (s->node_leader_ < 0) {
    s->role_note_ = how;
  }
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

RankClockSync::~RankClockSync() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::string RankClockSync::Fetch(uint32_t rank, const char* key, std::chrono::seconds limit,
                                 std::string* error) {
  // The owner may publish after we ask: some PMIx servers answer NOT_FOUND at
  // once rather than wait (seen with Open MPI 4.1's under load), so ask again,
  // with short waits, until it is there, the process ends, or `limit` passed.
  pmix_proc_t owner;
  PMIX_LOAD_PROCID(&owner, nspace_.c_str(), rank);
  pmix_value_t* value = nullptr;
  pmix_status_t rc = PMIX_ERR_NOT_FOUND;
  const auto give_up = std::chrono::steady_clock::now() + limit;
  int pause_ms = 5;
  while (!stop_.load() && std::chrono::steady_clock::now() < give_up) {
    pmix_info_t info;
    int timeout_s = 2;
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    rc = PMIx_Get(&owner, key, &info, 1, &value);
    PMIX_INFO_DESTRUCT(&info);
    if (rc == PMIX_SUCCESS) break;
    if (value) PMIX_VALUE_RELEASE(value);
    value = nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, 200);
  }
  std::string text;
  if (rc == PMIX_SUCCESS && value != nullptr && value->type == PMIX_STRING &&
      value->data.string != nullptr) {
    text = value->data.string;
  } else {
    *error = "fetching rank " + std::to_string(rank) + "'s " + key + ": " +
             (rc == PMIX_SUCCESS ? std::string("not a string") : PMIx_Error_string(rc));
    rc = PMIX_ERROR;
  }
  if (value) PMIX_VALUE_RELEASE(value);
  return rc == PMIX_SUCCESS ? text : std::string();
}

void RankClockSync::Run() {
  const bool follower_candidate = node_leader_ >= 0 && node_leader_ != rank_;
  if (follower_candidate) {
    // A leader publishes right after its PMIx_Init; 10 s covers slow starts.
    std::string error;
    const std::string leader_clock =
        Fetch(static_cast<uint32_t>(node_leader_), kClockIdKey, std::chrono::seconds(10), &error);
    std::string why;
    if (!leader_clock.empty() && !clock_id_.empty() && leader_clock == clock_id_) {
      follows_ = static_cast<int32_t>(node_leader_);
      fetch_done_ = true;
      return;  // same clock as our leader: nothing to measure
    }
    if (stop_.load()) {
      fetch_done_ = true;
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    role_note_ = !error.empty() ? error
                 : clock_id_.empty()
                     ? std::string("own clock id unknown")
                     : "clock id differs from node leader rank " + std::to_string(node_leader_) +
                           "'s (another time namespace or kernel)";
  }
  std::string error;
  const std::string endpoints = Fetch(0, kEndpointKey, std::chrono::seconds(60), &error);
  if (endpoints.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = error;
    fetch_done_ = true;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    root_endpoints_ = endpoints;
  }
  Measure(2000);
  fetch_done_ = true;
  while (!stop_.load()) {
    for (int waited = 0; waited < period_ms_ && !stop_.load(); waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!stop_.load()) Measure(2000);
  }
}

void RankClockSync::Measure(int timeout_ms) {
  std::string endpoints;
  {
    std::lock_guard<std::mutex> lock(mu_);
    endpoints = root_endpoints_;
  }
  size_t colon = endpoints.rfind(':');
  if (colon == std::string::npos) return;
  const auto port = static_cast<uint16_t>(std::atoi(endpoints.c_str() + colon + 1));
  std::string addresses = endpoints.substr(0, colon), error;
  size_t pos = 0;
  while (pos <= addresses.size()) {
    size_t comma = addresses.find(',', pos);
    if (comma == std::string::npos) comma = addresses.size();
    std::string address = addresses.substr(pos, comma - pos);
    pos = comma + 1;
    auto samples = Ping(address, port, rounds_, [] { return TimebaseNowNs(); }, timeout_ms);
    if (!samples.ok()) {
      error = samples.status().message();
      continue;
    }
    auto m = EstimateOffset(*samples);
    std::lock_guard<std::mutex> lock(mu_);
    if (m.ok()) measurements_.push_back(*m);
    // Keep using the address that worked first next time.
    root_endpoints_ = address + "," + addresses + ":" + std::to_string(port);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = error;
}

SyncResult RankClockSync::Finish() {
  SyncResult r = Model();
  if (pmix_initialized_) {
    PMIx_Finalize(nullptr, 0);
    pmix_initialized_ = false;
  }
  return r;
}

SyncResult RankClockSync::Model() {
  SyncResult r;
  if (!failure_.empty()) {
    r.note = failure_;
    return r;
  }
  if (is_root_) {
    r.synchronized = true;
    r.bound_ns = 0;
    // How many ping connections it answered: node leaders and ranks measuring
    // for themselves, never followers (tests check this).
    r.note = "rank 0: the job's reference clock (served " + std::to_string(server_->served()) +
             " ping connections)";
    return r;
  }
  // A short process may end before its first fetch or measurement: give the
  // rendezvous a moment (rank 0 waits in MPI_Finalize for everyone) before
  // giving up.
  for (int i = 0; i < 200 && !fetch_done_.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  const std::string where = host_.empty() ? std::string() : " on " + host_;
  if (const int32_t leader = follows_.load(); leader >= 0) {
    r.leader_rank = leader;
    if (leader == 0) {
      // Rank 0's clock is the reference, and we read that very clock.
      r.synchronized = true;
      r.bound_ns = 0;
      r.note = "reads rank 0's clock (the reference)" + where + ": nothing to measure";
    } else {
      r.note = "reads node leader rank " + std::to_string(leader) + "'s clock" + where +
               ": its measurement applies (the merge copies it)";
    }
    return r;
  }
  Measure(300);  // at exit; rank 0 may already be gone
  std::lock_guard<std::mutex> lock(mu_);
  r.measurements = measurements_.size();
  auto model = FitClockModel(measurements_);
  if (!model.ok()) {
    r.note = "no clock measurement against rank 0" +
             (last_error_.empty() ? std::string() : " (" + last_error_ + ")") +
             ": clocks not synchronized";
    return r;
  }
  r.synchronized = true;
  static_cast<LinearClock&>(r) = *model;
  std::string role = " (node leader)";
  if (node_leader_ != rank_) {
    role = role_note_.empty() ? std::string() : " (not following a leader: " + role_note_ + ")";
  }
  r.note = "synchronized to rank 0 by " + std::to_string(r.measurements) +
           " ping-pong measurements" + where + role;
  return r;
}

}  // namespace aon::clocksync
