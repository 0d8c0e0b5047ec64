// The few collective operations the merge needs from its processes, so that the
// merge itself does not depend on MPI: aon-merge passes an MPI implementation
// (merge/tools/mpi_comm.cc) when it runs as several processes, and everything
// else (tests, aon-run's in-process use, one process) runs with SoloComm.
//
// Every call is collective: all processes make the same calls in the same order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aon::merge {

class MergeComm {
 public:
  virtual ~MergeComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every process's bytes, in process order (mine included).
  virtual std::vector<std::string> Allgather(std::string_view mine) = 0;
  // Personalized exchange of 8-byte words: words [send_offsets[p], send_offsets[p] +
  // send_counts[p]) of `send` go to process p. Returns what every process sent to
  // this one, concatenated in process order; *recv_counts gets the words per sender.
  virtual std::vector<uint64_t> Alltoall(std::span<const uint64_t> send,
                                         std::span<const uint64_t> send_counts,
                                         std::vector<uint64_t>* recv_counts) = 0;
};

// One process: the collectives are identities.
class SoloComm final : public MergeComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> Allgather(std::string_view mine) override {
    return {std::string(mine)};
  }
  std::vector<uint64_t> Alltoall(std::span<const uint64_t> send, std::span<const uint64_t>,
                                 std::vector<uint64_t>* recv_counts) override {
    *recv_counts = {send.size()};
    return {send.begin(), send.end()};
  }
};

}  // namespace aon::merge
