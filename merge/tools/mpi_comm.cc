#include "mpi_comm.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace aon::merge {
namespace {

// Counts past INT_MAX would overflow MPI's int counts; the merge sizes its
// rounds far below that (a round's records fit the memory budget), so getting
// here means a bug: stop every process rather than exchange garbage.
int CheckedCount(uint64_t n, const char* what) {
  if (n > static_cast<uint64_t>(INT_MAX)) {
    std::string msg = std::string("aon-merge: internal error: ") + what + " of " +
                      std::to_string(n) + " words exceeds one MPI exchange\n";
    std::fputs(msg.c_str(), stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return static_cast<int>(n);
}

class MpiComm final : public MergeComm {
 public:
  MpiComm() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiComm() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> Allgather(std::string_view mine) override {
    const int n = CheckedCount(mine.size(), "an allgather");
    std::vector<int> sizes(size_);
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> displs(size_);
    uint64_t total = 0;
    for (int p = 0; p < size_; ++p) {
      displs[p] = CheckedCount(total, "an allgather");
      total += static_cast<uint64_t>(sizes[p]);
    }
    std::string all(total, '\0');
    MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE,
                   MPI_COMM_WORLD);
    std::vector<std::string> out(size_);
    for (int p = 0; p < size_; ++p) out[p] = all.substr(displs[p], sizes[p]);
    return out;
  }

  std::vector<uint64_t> Alltoall(std::span<const uint64_t> send,
                                 std::span<const uint64_t> send_counts,
                                 std::vector<uint64_t>* recv_counts) override {
    std::vector<int> scount(size_), sdispl(size_), rcount(size_), rdispl(size_);
    uint64_t offset = 0;
    for (int p = 0; p < size_; ++p) {
      scount[p] = CheckedCount(send_counts[p], "a record exchange");
      sdispl[p] = CheckedCount(offset, "a record exchange");
      offset += send_counts[p];
    }
    MPI_Alltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, MPI_COMM_WORLD);
    uint64_t total = 0;
    recv_counts->assign(size_, 0);
    for (int p = 0; p < size_; ++p) {
      rdispl[p] = CheckedCount(total, "a record exchange");
      total += static_cast<uint64_t>(rcount[p]);
      (*recv_counts)[p] = static_cast<uint64_t>(rcount[p]);
    }
    std::vector<uint64_t> recv(total);
    MPI_Alltoallv(send.data(), scount.data(), sdispl.data(), MPI_UINT64_T, recv.data(),
                  rcount.data(), rdispl.data(), MPI_UINT64_T, MPI_COMM_WORLD);
    return recv;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

long EnvLong(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtol(v, nullptr, 10) : 0;
}

}  // namespace

bool LaunchedAsMpiJob() {
  // Open MPI's mpirun, or a PMIx-launched job of more than one process
  // (srun --mpi=pmix, prterun).
  return EnvLong("OMPI_COMM_WORLD_SIZE") > 1 || EnvLong("PMIX_SIZE") > 1 ||
         (std::getenv("PMIX_RANK") != nullptr && EnvLong("SLURM_NTASKS") > 1);
}

std::unique_ptr<MergeComm> InitMpiComm(int* argc, char*** argv) {
  // The merge forks its openers (children that open rank files, so that a
  // crash inside libhdf5 costs one file) after MPI_Init, while its other
  // threads run. Over InfiniBand, memory MPI registered with the NIC stays
  // right in the parent across a fork only when libibverbs was told before its
  // first registration (ibv_fork_init(3): these variables do the same), so
  // they are set unless the user set them.
  setenv("RDMAV_FORK_SAFE", "1", 0);
  setenv("IBV_FORK_SAFE", "1", 0);
  MPI_Init(argc, argv);
  return std::make_unique<MpiComm>();
}

}  // namespace aon::merge
