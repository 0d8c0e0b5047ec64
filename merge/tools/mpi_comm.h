// MergeComm over MPI_COMM_WORLD, for aon-merge run as several processes
// (mpirun -np N aon-merge ..., srun aon-merge ...). Only aon-merge links MPI.
#pragma once

#include <memory>

#include "aon/merge/merge_comm.h"

namespace aon::merge {

// True when this process was started by an MPI launcher (mpirun, or srun with a
// PMI/PMIx plugin) as one of several: then MPI is worth initializing.
bool LaunchedAsMpiJob();

// MPI_Init (once); MPI_Finalize when the returned object is destroyed.
std::unique_ptr<MergeComm> InitMpiComm(int* argc, char*** argv);

}  // namespace aon::merge
