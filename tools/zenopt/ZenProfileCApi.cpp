//===- ZenProfileCApi.cpp - libzenprofile: zenopt profile inside a job -----===//
#include "zenprofile.h"

#include "ExitCodes.h"
#include "ProfileJob.h"

#include <cstring>
#include <exception>

extern "C" int zenprofile_cluster(const char *base_cluster, const char *backend, int quick,
                                  const char *output, char *error, size_t error_size) {
  using namespace zen::cli;
  std::string message;
  int code = ExitSoftware;
  try {
    ProfileJob job;
    job.baseCluster = base_cluster ? base_cluster : "cpu-local";
    job.output = output ? output : "";
    job.profile.backend = backend ? backend : "mpi";
    job.profile.quick = quick != 0;
    if (job.profile.backend != "mpi" && job.profile.backend != "nccl") {
      message = "backend '" + job.profile.backend + "': expected mpi or nccl";
      code = ExitUsage;
    } else if (job.profile.backend == "nccl" && !zen::cost::haveNcclBackend()) {
      message = "backend nccl: this libzenprofile was built without CUDA and NCCL";
      code = ExitUsage;
    } else {
      code = runProfileJob(job, message);
    }
  } catch (const std::exception &failure) {  // nothing may cross the C boundary
    message = std::string("internal error: ") + failure.what();
    code = ExitSoftware;
  }
  if (error && error_size > 0) {
    std::strncpy(error, message.c_str(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  return code;
}
