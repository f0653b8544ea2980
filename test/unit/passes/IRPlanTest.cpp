//===- IRPlanTest.cpp - problem extraction: mixed-precision compute pricing -===//
#include "zen/Passes/BucketRewrites.h"
#include "zen/Analysis/IRPlan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

using namespace zen;
using namespace zen::plan;

namespace {

// A compute-bound forward GEMM (1 TFLOP), its backward, and an SGD step.
constexpr double kForwardFlops = 1e12, kForwardBytes = 4e6;
constexpr double kOptimizerFlops = 3145728, kOptimizerBytes = 20971520;

std::string trainingModule(const std::string &moduleAttributes) {
  return "module attributes {" + moduleAttributes + R"(} {
  func.func @train_step(%x: tensor<8x1024xf32>) {
    %w = zen.param "w" : tensor<1024x1024xf32>
    %y = zen.compute "MatMul" forward (%x, %w) {node = "fc", flops = 1000000000000 : i64, bytes = 4000000 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %d:2 = zen.compute "MatMulGrad" backward (%y, %x, %w) {node = "fc", flops = 2000000000000 : i64, bytes = 8000000 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g = zen.gradient %w, %d#1 {ready_order = 0 : i64} : tensor<1024x1024xf32>
    %s = zen.compute "SGD" optimizer (%w, %g) {node = "sgd.w", flops = 3145728 : i64, bytes = 20971520 : i64} : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
    return
  }
})";
}

struct Extraction {
  std::optional<Problem> problem;
  std::string errors;
};

Extraction extract(const std::string &moduleAttributes, const cost::CostModel &model) {
  mlir::MLIRContext context;
  context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
  Extraction result;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diagnostic) {
    result.errors += diagnostic.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(trainingModule(moduleAttributes), &context);
  if (!module) {
    ADD_FAILURE() << "test module does not parse: " << result.errors;
    return result;
  }
  mlir::FailureOr<TrainingFunction> training = extractTraining(*module, model);
  if (mlir::succeeded(training))
    result.problem = training->problem;
  return result;
}

TEST(ComputeDtype, ParsesThePrecisions) {
  EXPECT_EQ(parseComputeDtype("fp32"), cost::DType::F32);
  EXPECT_EQ(parseComputeDtype("tf32"), cost::DType::TF32);
  EXPECT_EQ(parseComputeDtype("bf16"), cost::DType::BF16);
  EXPECT_EQ(parseComputeDtype("fp16"), cost::DType::F16);
  for (const char *bad : {"int8", "f32", "fp64", "", "BF16"})
    EXPECT_FALSE(parseComputeDtype(bad)) << bad;
}

TEST(ComputeDtype, PricesForwardAndBackwardAtThePrecision) {
  cost::CostModel model(cost::loadCluster("a100x64"));
  // A100: 19.5 TFLOP/s fp32, 156 tf32, 312 bf16/fp16, all at 60% efficiency.
  auto forwardUs = [&](const std::string &attributes) {
    Extraction extracted = extract(attributes, model);
    EXPECT_TRUE(extracted.problem) << extracted.errors;
    return extracted.problem ? extracted.problem->forward.at(0).durationUs : 0.0;
  };
  const double fp32 = forwardUs("");
  EXPECT_NEAR(fp32, kForwardFlops / (19.5e12 * 0.6) * 1e6, 1e-6);
  EXPECT_DOUBLE_EQ(forwardUs("zen.compute_dtype = \"fp32\""), fp32);
  EXPECT_NEAR(forwardUs("zen.compute_dtype = \"tf32\""), kForwardFlops / (156e12 * 0.6) * 1e6,
              1e-6);
  EXPECT_NEAR(forwardUs("zen.compute_dtype = \"bf16\""), kForwardFlops / (312e12 * 0.6) * 1e6,
              1e-6);
  EXPECT_NEAR(forwardUs("zen.compute_dtype = \"fp16\""), kForwardFlops / (312e12 * 0.6) * 1e6,
              1e-6);

  Extraction mixed = extract("zen.compute_dtype = \"bf16\"", model);
  Extraction full = extract("", model);
  ASSERT_TRUE(mixed.problem && full.problem);
  EXPECT_EQ(mixed.problem->computeDtype, cost::DType::BF16);
  EXPECT_EQ(full.problem->computeDtype, cost::DType::F32);
  // bf16 moves half the bytes; the FLOPs are the model's.
  EXPECT_EQ(mixed.problem->forward.at(0).bytes, static_cast<int64_t>(kForwardBytes / 2));
  EXPECT_EQ(mixed.problem->forward.at(0).flops, static_cast<int64_t>(kForwardFlops));
  EXPECT_LT(mixed.problem->backward.at(0).durationUs, full.problem->backward.at(0).durationUs / 10);
  // Gradients stay fp32 on the wire, and the optimizer step runs at fp32.
  ASSERT_EQ(mixed.problem->gradients.size(), 1u);
  EXPECT_EQ(mixed.problem->gradients[0].bytes, full.problem->gradients[0].bytes);
  EXPECT_EQ(mixed.problem->gradients[0].bytes, 4 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(mixed.problem->gradients[0].optimizerUs,
                   model.computeUs(kOptimizerFlops, kOptimizerBytes, cost::DType::F32));
  EXPECT_DOUBLE_EQ(mixed.problem->gradients[0].optimizerUs, full.problem->gradients[0].optimizerUs);
}

TEST(ComputeDtype, RejectsAnythingElse) {
  cost::CostModel model(cost::loadCluster("a100x64"));
  Extraction extracted = extract("zen.compute_dtype = \"int8\"", model);
  EXPECT_FALSE(extracted.problem);
  EXPECT_NE(extracted.errors.find("zen.compute_dtype must be"), std::string::npos)
      << extracted.errors;
  // The attribute is declared as a string: the dialect's verifier rejects anything else.
  mlir::MLIRContext context;
  context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diagnostic) {
    errors += diagnostic.str();
    return mlir::success();
  });
  EXPECT_FALSE(mlir::parseSourceString<mlir::ModuleOp>(
      trainingModule("zen.compute_dtype = 16 : i64"), &context));
  EXPECT_NE(errors.find("'zen.compute_dtype' must be a string"), std::string::npos) << errors;
}

// zenopt verifies the imported module on another thread while the search reads it: the
// rewrite waits for that verification, and leaves the IR alone if it failed.
TEST(ApplyPlan, WaitsForTheModulesVerification) {
  cost::CostModel model(cost::loadCluster("a100x64"));
  for (bool verifies : {true, false}) {
    mlir::MLIRContext context;
    context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
    mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(trainingModule(""), &context);
    ASSERT_TRUE(module);
    mlir::FailureOr<TrainingFunction> training = extractTraining(*module, model);
    ASSERT_TRUE(mlir::succeeded(training));
    PlanChoice choice;
    choice.buckets.push_back(BucketChoice{0, 1});
    std::promise<bool> verification;
    context.getLoadedDialect<ZenDialect>()->setPendingVerification(
        verification.get_future().share());
    std::atomic<bool> answered{false};
    std::thread verifier([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      answered = true;
      verification.set_value(verifies);
    });
    const bool applied = mlir::succeeded(applyPlan(*training, choice, model.worldGroup()));
    EXPECT_TRUE(answered) << "applyPlan did not wait";
    verifier.join();
    EXPECT_EQ(applied, verifies);
    int collectives = 0;
    module->walk([&](AllReduceOp) { ++collectives; });
    EXPECT_EQ(collectives, verifies ? 1 : 0);
    // Once answered, it is not waited for again.
    EXPECT_TRUE(context.getLoadedDialect<ZenDialect>()->awaitVerification());
  }
}

} // namespace
