/*===- zenprofile.h - zenopt profile inside a running job (C API) ---------===*
 *
 * libzenprofile.so measures the cluster as `zenopt profile` does, from the processes of
 * a job that is already running (the zenopt Python package calls it through ctypes on
 * every rank: its ranks are profiled as they share the machine). Exports this function
 * only.
 *
 *===----------------------------------------------------------------------===*/
#ifndef ZENPROFILE_H
#define ZENPROFILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over MPI_COMM_WORLD, which must be initialised with MPI_THREAD_MULTIPLE (as
 * zenrt_world_init does). Measures the backend ("mpi" or "nccl") refining `base_cluster`
 * (a preset name or cluster file); rank 0 writes the cluster file `output`. `quick`
 * non-zero: the --quick sweep. Returns 0, or zenopt's exit code (65 bad input, 66
 * unreadable, 70 internal, 73 unwritable), the same on every rank; then rank 0's `error`
 * (of `error_size` bytes, NUL-terminated) says why. */
int zenprofile_cluster(const char *base_cluster, const char *backend, int quick,
                       const char *output, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* ZENPROFILE_H */
