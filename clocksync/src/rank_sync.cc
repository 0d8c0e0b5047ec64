#include "aon/rank_sync.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "aon/timebase.h"

namespace aon::clocksync {
namespace {

constexpr const char* kEndpointKey = "aon.clock.endpoint";

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
    pmix_value_t value;
    PMIX_VALUE_LOAD(&value, endpoints.c_str(), PMIX_STRING);
    rc = PMIx_Put(PMIX_GLOBAL, kEndpointKey, &value);
    PMIX_VALUE_DESTRUCT(&value);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) s->failure_ = PmixError("publishing rank 0's clock endpoint", rc);
    return s;  // the reference: nothing to measure
  }
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

RankClockSync::~RankClockSync() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void RankClockSync::Run() {
  // Rank 0 may publish after we ask: some PMIx servers answer NOT_FOUND at once
  // rather than wait (seen with Open MPI 4.1's under load), so ask again, with
  // short waits, until it is there, the process ends, or a minute has passed.
  pmix_proc_t root;
  PMIX_LOAD_PROCID(&root, nspace_.c_str(), 0);
  pmix_value_t* value = nullptr;
  pmix_status_t rc = PMIX_ERR_NOT_FOUND;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int pause_ms = 5;
  while (!stop_.load() && std::chrono::steady_clock::now() < give_up) {
    pmix_info_t info;
    int timeout_s = 2;
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
    rc = PMIx_Get(&root, kEndpointKey, &info, 1, &value);
    PMIX_INFO_DESTRUCT(&info);
    if (rc == PMIX_SUCCESS) break;
    if (value) PMIX_VALUE_RELEASE(value);
    value = nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, 200);
  }
  if (rc != PMIX_SUCCESS || value == nullptr || value->type != PMIX_STRING) {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = PmixError("fetching rank 0's clock endpoint", rc);
    fetch_done_ = true;
    if (value) PMIX_VALUE_RELEASE(value);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    root_endpoints_ = value->data.string;
  }
  PMIX_VALUE_RELEASE(value);
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
    r.note = "rank 0: the job's reference clock";
    return r;
  }
  // A short process may end before its first measurement: give the rendezvous
  // a moment (rank 0 waits in MPI_Finalize for everyone) before giving up.
  for (int i = 0; i < 200 && !fetch_done_.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
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
  r.offset_ns = model->offset_ns;
  r.drift = model->drift;
  r.reference_ns = model->reference_ns;
  r.bound_ns = static_cast<int64_t>(model->bound_ns);
  r.note = "synchronized to rank 0 by " + std::to_string(r.measurements) +
           " ping-pong measurements";
  return r;
}

}  // namespace aon::clocksync
