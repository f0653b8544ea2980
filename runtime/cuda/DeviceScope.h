//===- DeviceScope.h - Make the runtime's CUDA device current (internal) ---===//
//
// The executor's device work runs on the progress thread and on the caller's
// thread (mark_ready copies, waiters driving progress): switch to the runtime's
// device for the call and give the caller its own current device back.
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_CUDA_DEVICESCOPE_H
#define ZENRT_CUDA_DEVICESCOPE_H

#include "../lib/Backend.h"
#include "zenrt/zenrt.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace zenrt {

class DeviceScope {
public:
  explicit DeviceScope(int device) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device)
      return;
    cudaError_t code = cudaSetDevice(device);
    if (code != cudaSuccess)
      throw RuntimeError(ZENRT_ERR_BACKEND,
                         std::string("cudaSetDevice: ") + cudaGetErrorString(code));
    previous = current;
  }
  ~DeviceScope() {
    if (previous >= 0)
      cudaSetDevice(previous);
  }
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

private:
  int previous = -1;  // the device to restore, -1: nothing changed
};

/// Why `data` is not memory of CUDA device `device` ("" when it is); `notDevice` says
/// what a pointer to other memory is.
inline std::string deviceMemoryProblem(int device, const void *data, const std::string &notDevice) {
  cudaPointerAttributes attributes{};
  cudaError_t code = cudaPointerGetAttributes(&attributes, data);
  if (code != cudaSuccess) {
    cudaGetLastError();  // clear the error the failed query recorded
    return std::string("not a CUDA pointer (") + cudaGetErrorString(code) + ")";
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    return notDevice;
  if (attributes.device != device)
    return "memory of CUDA device " + std::to_string(attributes.device) +
           ", but this rank runs on device " + std::to_string(device);
  return "";
}

/// Runs `body` with `device` current; the CUDA kernels' launchers throw std::runtime_error,
/// which becomes a backend error.
template <typename Body> void runOnDevice(int device, Body body) {
  DeviceScope scope(device);
  try {
    body();
  } catch (const RuntimeError &) {
    throw;
  } catch (const std::runtime_error &e) {
    throw RuntimeError(ZENRT_ERR_BACKEND, e.what());
  }
}

}  // namespace zenrt

#endif  // ZENRT_CUDA_DEVICESCOPE_H
