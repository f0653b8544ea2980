//===- SyncSchemeTest.cpp - every scheme the runtime executes is priced, plannable, lowered -===//
//
// Table-driven over zen/SyncScheme.h: for every compression method and every
// scheme, the runtime's plan validator, the planner, the cost model, the IR and
// the plan file agree on whether the method can be synchronised that way, and a
// supported pair survives IR -> plan file -> runtime plan unchanged.
//
//===----------------------------------------------------------------------===//
#include "zen/Codegen/PlanEmitter.h"
#include "zen/Passes/BucketRewrites.h"
#include "zen/Analysis/IRPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace zen;
using namespace zen::plan;

namespace {

// Two layers, so a plan has a forward to overlap a decoupled all-gather with.
constexpr const char *kTraining = R"(module attributes {zen.cluster = "a100x64"} {
  func.func @train_step(%x: tensor<8x1024xf32>) {
    %w1 = zen.param "w1" : tensor<1024x1024xf32>
    %w2 = zen.param "w2" : tensor<1024x1024xf32>
    %y1 = zen.compute "MatMul" forward (%x, %w1) {node = "fc1", flops = 16777216 : i64, bytes = 4259840 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %y2 = zen.compute "MatMul" forward (%y1, %w2) {node = "fc2", flops = 16777216 : i64, bytes = 4259840 : i64} : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
    %d2:2 = zen.compute "MatMulGrad" backward (%y2, %y1, %w2) {node = "fc2", flops = 33554432 : i64, bytes = 8519680 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g2 = zen.gradient %w2, %d2#1 {ready_order = 0 : i64} : tensor<1024x1024xf32>
    %d1:2 = zen.compute "MatMulGrad" backward (%d2#0, %x, %w1) {node = "fc1", flops = 33554432 : i64, bytes = 8519680 : i64} : (tensor<8x1024xf32>, tensor<8x1024xf32>, tensor<1024x1024xf32>) -> (tensor<8x1024xf32>, tensor<1024x1024xf32>)
    %g1 = zen.gradient %w1, %d1#1 {ready_order = 1 : i64} : tensor<1024x1024xf32>
    return
  }
})";

cost::CompressionSpec specFor(vocab::CompressionMethod method) {
  cost::CompressionSpec spec;
  spec.method = method;
  spec.ratio = vocab::takesRatio(method) ? 0.01 : 0;
  spec.rank = vocab::takesRank(method) ? 4 : 0;
  spec.errorFeedback = vocab::wantsErrorFeedback(method);
  return spec;
}

PlanChoice oneBucket(const Problem &problem, const cost::CompressionSpec &spec,
                     vocab::SyncScheme scheme) {
  PlanChoice choice;
  choice.strategy = "test";
  BucketChoice bucket;
  bucket.begin = 0;
  bucket.end = static_cast<int>(problem.gradients.size());
  bucket.compression = spec;
  bucket.scheme = scheme;
  bucket.stream = bucket.gatherStream = 1;
  choice.buckets.push_back(bucket);
  return choice;
}

struct Case {
  vocab::CompressionMethod method;
  vocab::SyncScheme scheme;
};

std::string nameOf(const Case &c) {
  return std::string(vocab::toString(c.method)) + " by " + vocab::toString(c.scheme);
}

class SyncSchemeTable : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<ZenDialect, mlir::func::FuncDialect>();
  }
  mlir::MLIRContext context;
  cost::CostModel model{cost::loadCluster("a100x64")};
};

TEST_F(SyncSchemeTable, EverySupportedSchemeIsPricedPlannedAndRoundTrips) {
  int supported = 0;
  for (const vocab::CompressionTraits &method : vocab::kCompressionMethods)
    for (const vocab::SyncSchemeTraits &scheme : vocab::kSyncSchemes) {
      const Case c{method.value, scheme.value};
      SCOPED_TRACE(nameOf(c));
      std::string diagnostics;
      mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diagnostic) {
        diagnostics += diagnostic.str() + "\n";
        return mlir::success();
      });
      mlir::OwningOpRef<mlir::ModuleOp> module =
          mlir::parseSourceString<mlir::ModuleOp>(kTraining, &context);
      ASSERT_TRUE(module) << diagnostics;
      mlir::FailureOr<TrainingFunction> training = extractTraining(*module, model);
      ASSERT_TRUE(mlir::succeeded(training)) << diagnostics;
      training->problem.group = model.worldGroup();  // all 64 GPUs: collectives cost time
      const Problem &problem = training->problem;
      const cost::CompressionSpec spec = specFor(c.method);
      const PlanChoice choice = oneBucket(problem, spec, c.scheme);

      // The planner refuses exactly the pairs the table does not support.
      const std::string invalid = validateChoice(problem, choice);
      if (!vocab::supports(c.method, c.scheme)) {
        EXPECT_NE(invalid.find("which the executor does not implement"), std::string::npos)
            << invalid;
        continue;
      }
      ++supported;
      ASSERT_EQ(invalid, "");

      // Priced: one finite, positive price; a second step only for decompositions.
      const double bytes = problem.totalGradientBytes();
      cost::SyncCost price =
          model.syncCost(spec, c.scheme, static_cast<int64_t>(bytes / 4), bytes, problem.group);
      EXPECT_TRUE(std::isfinite(price.reduction.timeUs) && price.reduction.timeUs > 0);
      EXPECT_EQ(price.gather.timeUs > 0, scheme.steps == 2);
      Evaluation evaluation = evaluate(problem, choice, model);
      EXPECT_TRUE(std::isfinite(evaluation.iterationUs) && evaluation.iterationUs > 0);

      // IR: the rewrite builds the scheme's collectives, tagged with it, and
      // reading the IR back gives the same decision.
      ASSERT_TRUE(mlir::succeeded(applyPlan(*training, choice, problem.group))) << diagnostics;
      ASSERT_TRUE(mlir::succeeded(mlir::verify(*module))) << diagnostics;
      cost::Group group;
      mlir::FailureOr<std::vector<BucketOps>> buckets = readBuckets(*training, group);
      ASSERT_TRUE(mlir::succeeded(buckets)) << diagnostics;
      ASSERT_EQ(buckets->size(), 1u);
      EXPECT_EQ((*buckets)[0].settings.scheme, c.scheme);
      EXPECT_EQ((*buckets)[0].settings.compression.method, c.method);
      int collectives = 0;
      module->walk([&](mlir::Operation *op) {
        if (std::optional<vocab::CollectiveKind> kind = collectiveKindOf(op)) {
          ASSERT_LT(collectives, scheme.steps);
          EXPECT_EQ(*kind, scheme.sequence[collectives]);
          EXPECT_EQ(op->hasAttr("sync"), collectives == 0);
          ++collectives;
        }
      });
      EXPECT_EQ(collectives, scheme.steps);

      // Plan file: lowered from that IR, written, read back by the runtime.
      mlir::FailureOr<zenrt::Plan> lowered = codegen::emitPlan(*module, model, "test");
      ASSERT_TRUE(mlir::succeeded(lowered)) << diagnostics;
      zenrt::Plan reread = zenrt::parsePlan(zenrt::writePlan(*lowered), "plan.json");
      ASSERT_EQ(reread.buckets.size(), 1u);
      EXPECT_EQ(zenrt::syncSchemeOf(reread.buckets[0]), c.scheme);
      EXPECT_EQ(reread.buckets[0].compression.method, c.method);
    }
  // none (2 schemes), fp16, bf16, int8 (2), topk, randomk (2), sign, powersgd.
  EXPECT_EQ(supported, 11);
}

} // namespace
