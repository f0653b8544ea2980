//===- RowProduct.h - GEMMs whose rows do not depend on each other -*- C++ -*-===//
//
// The decomposed tensor-parallel regions (Hybrid.cpp) and the pipelined MoE layer (Moe.cpp)
// multiply chunks of rows and promise the same bits whatever the chunk size. Eigen's kernels
// add a row's products in one order for groups of 4 rows and in another for the rows left
// over (and a single row is a matrix-vector product), so blocks are padded with zero rows to a
// multiple of 4. Include after choosing Eigen's index type (the including file's first lines).
//
//===----------------------------------------------------------------------===//
#ifndef ZENRT_LIB_ROWPRODUCT_H
#define ZENRT_LIB_ROWPRODUCT_H

#include <Eigen/Core>

namespace zenrt::detail {

using RowMajorMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// rows x weights, each row's result independent of how many rows come with it.
template <typename Rows, typename Weights>
RowMajorMatrix rowProduct(const Rows &rows, const Weights &weights) {
  const auto count = rows.rows(), padded = (count + 3) / 4 * 4;
  if (padded == count)
    return rows * weights;
  RowMajorMatrix block = RowMajorMatrix::Zero(padded, rows.cols());
  block.topRows(count) = rows;
  RowMajorMatrix product = block * weights;
  return product.topRows(count);
}

} // namespace zenrt::detail

#endif // ZENRT_LIB_ROWPRODUCT_H
