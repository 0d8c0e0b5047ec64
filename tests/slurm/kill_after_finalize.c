/* Test shim, LD_PRELOADed into aon-synthetic-app: the rank named by
 * AON_TEST_KILL_RANK (its SLURM_PROCID) dies by SIGKILL right after MPI_Finalize,
 * before exit() and so before the agent writes its trace file. MPI_Finalize is
 * the one place where the other ranks no longer wait for it: killed earlier,
 * Slurm's PMIx plugin aborts the whole step (every rank SIGKILLed, nothing
 * captured by today's agent; the node collector of issue #3 changes that). */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int MPI_Finalize(void) {
  int rc = PMPI_Finalize();
  const char* victim = getenv("AON_TEST_KILL_RANK");
  const char* me = getenv("SLURM_PROCID");
  if (victim != NULL && me != NULL && strcmp(victim, me) == 0) raise(SIGKILL);
  return rc;
}
