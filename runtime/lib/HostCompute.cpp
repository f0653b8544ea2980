//===- HostCompute.cpp - Host memory with the CPU kernels -------------------===//
#include "Compute.h"

#include "zenrt/Kernels.h"

#include <Eigen/Dense>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace zenrt {
namespace {

using ConstMatrix = Eigen::Map<const Eigen::MatrixXf>;
using Matrix = Eigen::Map<Eigen::MatrixXf>;

class HostCompute final : public Compute {
public:
  bool onDevice() const override { return false; }
  std::shared_ptr<void> allocateBytes(size_t bytes) override {
    void *data = std::calloc(bytes ? bytes : 1, 1);
    if (!data)
      throw AllocationError(bytes);
    return std::shared_ptr<void>(data, std::free);
  }
  std::string rejectGradient(const void *) const override { return ""; }

  void copy(void *to, const void *from, size_t bytes) override { std::memcpy(to, from, bytes); }
  void zero(void *to, size_t bytes) override { std::memset(to, 0, bytes); }
  void upload(void *to, const void *from, size_t bytes) override {
    std::memcpy(to, from, bytes);
  }
  void synchronize() override {}

  void floatToHalf(const float *in, uint16_t *out, size_t n) override {
    kernels::floatToHalf(in, out, n);
  }
  void halfToFloat(const uint16_t *in, float *out, size_t n) override {
    kernels::halfToFloat(in, out, n);
  }
  void floatToBF16(const float *in, uint16_t *out, size_t n) override {
    kernels::floatToBF16(in, out, n);
  }
  void bf16ToFloat(const uint16_t *in, float *out, size_t n) override {
    kernels::bf16ToFloat(in, out, n);
  }
  void quantizeInt8(const float *in, size_t n, uint8_t *payload) override {
    kernels::quantizeInt8(in, n, payload);
  }
  void dequantizeInt8(const uint8_t *payload, size_t n, float *out, bool accumulate) override {
    kernels::dequantizeInt8(payload, n, out, accumulate);
  }
  void compressSign(const float *in, size_t n, uint8_t *payload) override {
    kernels::compressSign(in, n, payload);
  }
  void decompressSign(const uint8_t *payload, size_t n, float *out, bool accumulate) override {
    kernels::decompressSign(payload, n, out, accumulate);
  }
  void selectTopK(const float *in, size_t n, size_t k, uint32_t *indices,
                  float *values) override {
    kernels::selectTopK(in, n, k, indices, values, topKScratch);
  }
  void gather(const float *in, const uint32_t *indices, size_t k, float *values) override {
    kernels::gather(in, indices, k, values);
  }
  void scatter(const float *values, const uint32_t *indices, size_t k, float *out,
               bool accumulate) override {
    kernels::scatter(values, indices, k, out, accumulate);
  }
  void scale(float *data, size_t n, float factor) override { kernels::scale(data, n, factor); }
  void subtract(const float *a, const float *b, float *out, size_t n) override {
    kernels::subtract(a, b, out, n);
  }
  void add(const float *in, float *inout, size_t n) override { kernels::add(in, inout, n); }

  void multiply(const float *m, size_t rows, size_t cols, const float *in, float *out,
                size_t rank, bool transposeM) override {
    ConstMatrix matrix(m, long(rows), long(cols));
    if (transposeM)
      Matrix(out, long(cols), long(rank)).noalias() =
          matrix.transpose() * ConstMatrix(in, long(rows), long(rank));
    else
      Matrix(out, long(rows), long(rank)).noalias() =
          matrix * ConstMatrix(in, long(cols), long(rank));
  }
  void orthonormalise(float *p, size_t rows, size_t rank) override {
    Matrix factor(p, long(rows), long(rank));
    Eigen::HouseholderQR<Eigen::MatrixXf> qr(factor);
    factor = qr.householderQ() * Eigen::MatrixXf::Identity(long(rows), long(rank));
  }
  void outerProduct(const float *p, const float *q, size_t rows, size_t cols, size_t rank,
                    float *out) override {
    Matrix(out, long(rows), long(cols)).noalias() =
        ConstMatrix(p, long(rows), long(rank)) * ConstMatrix(q, long(cols), long(rank)).transpose();
  }

private:
  std::vector<uint32_t> topKScratch;
};

}  // namespace

std::unique_ptr<Compute> createHostCompute() { return std::make_unique<HostCompute>(); }

}  // namespace zenrt
