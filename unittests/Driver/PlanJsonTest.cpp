//===- PlanJsonTest.cpp - The streamed plan document ----------------------===//
//
// writePlanJson streams `lethe plan --json` without building a json::Value:
// its members must come in the order llvm::json prints an Object's (sorted
// by key), or the document differs from what the Value printed before and
// from what a reader that re-prints it gets. Parsed and printed again by
// llvm::json, every document must come back byte for byte: plans with
// every decision kind and every optional member (the least budget, a lower
// bound, feasible or not).
//
//===----------------------------------------------------------------------===//

#include "../Planner/RandomGraph.h"

#include "lethe/Driver/Commands.h"
#include "lethe/Planner/Planner.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

using namespace lethe;
using namespace lethe::testing;

namespace {

/// The document as llvm::json prints it once parsed.
std::string reprinted(const std::string &text) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return "cannot parse: " + llvm::toString(parsed.takeError());
  return llvm::formatv("{0:2}", *parsed).str() + "\n";
}

TEST(PlanJsonTest, MembersInTheOrderLlvmJsonPrintsThem) {
  const DeviceProfile device = testDeviceProfile();
  size_t kinds[3] = {0, 0, 0};
  for (uint64_t seed = 0; seed < 12; ++seed) {
    TrainingGraph graph = randomLayeredGraph(7100 + seed);
    PlanOptions none;
    none.policy = Policy::None;
    llvm::Expected<Plan> unplanned = planTrainingStep(graph, device, none);
    ASSERT_TRUE(bool(unplanned)) << llvm::toString(unplanned.takeError());
    for (double fraction : {0.05, 0.4, 0.7}) {
      PlanOptions options;
      options.budgetBytes =
          static_cast<int64_t>(fraction * unplanned->peakBytes);
      llvm::Expected<Plan> plan = planTrainingStep(graph, device, options);
      ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
      for (const ActivationDecision &d : plan->decisions)
        ++kinds[static_cast<unsigned>(d.decision)];
      // Every optional member, whatever this plan had.
      for (int variant = 0; variant < 3; ++variant) {
        Plan shown = *plan;
        if (variant > 0) {
          shown.leastFeasibleBudget = shown.budgetBytes + 1;
          OverheadBound bound;
          bound.feasible = variant == 1;
          bound.overhead = 0.01;
          bound.rounds = 2;
          shown.lowerBound = bound;
        }
        std::string text;
        llvm::raw_string_ostream os(text);
        writePlanJson(os, shown, graph);
        EXPECT_EQ(text, reprinted(text))
            << "seed " << seed << " at " << fraction << ", variant " << variant;
      }
    }
  }
  // The documents held every decision kind.
  EXPECT_GT(kinds[0], 0u);
  EXPECT_GT(kinds[1], 0u);
  EXPECT_GT(kinds[2], 0u);
}

} // namespace
