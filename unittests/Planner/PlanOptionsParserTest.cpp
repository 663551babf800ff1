//===- PlanOptionsParserTest.cpp - Planner options as text ----------------===//

#include "lethe/Planner/PlanOptionsParser.h"

#include <gtest/gtest.h>

#include <limits>

using namespace lethe;

namespace {

std::string errorOf(const PlanOptionText &text) {
  DeviceProfile device;
  llvm::Expected<PlanOptions> options = parsePlanOptions(text, 1000, device);
  if (options)
    return "";
  return llvm::toString(options.takeError());
}

TEST(PlanOptionsParserTest, ParsesEveryOption) {
  DeviceProfile device;
  device.hostMemoryBytes = 64e9;
  PlanOptionText text;
  text.budget = "60%";
  text.policy = "every-n";
  text.everyN = 3;
  text.keepOps = {"mm", "attention"};
  text.offloadKept = true;
  text.minOffloadBytes = "4KiB";
  text.solver = "exact";
  text.replayRng = true;
  llvm::Expected<PlanOptions> options = parsePlanOptions(text, 2000, device);
  ASSERT_TRUE(static_cast<bool>(options)) << llvm::toString(options.takeError());
  EXPECT_EQ(options->budgetBytes, 1200);
  EXPECT_EQ(options->policy, Policy::EveryN);
  EXPECT_EQ(options->everyN, 3);
  EXPECT_EQ(options->keepOpKinds, text.keepOps);
  EXPECT_TRUE(options->offloadKept);
  EXPECT_EQ(options->minOffloadBytes, 4096);
  EXPECT_EQ(options->solver, SolverKind::Exact);
  EXPECT_TRUE(options->replayRng);
  // The host budget defaults to the profile's pinned memory.
  EXPECT_EQ(options->hostBudgetBytes, 64000000000);

  text.budget = "1.5GiB";
  text.hostBudget = "2GB";
  options = parsePlanOptions(text, 2000, device);
  ASSERT_TRUE(static_cast<bool>(options));
  EXPECT_EQ(options->budgetBytes, 1610612736);
  EXPECT_EQ(options->hostBudgetBytes, 2000000000);

  text.budget = "";
  options = parsePlanOptions(text, 2000, device);
  ASSERT_TRUE(static_cast<bool>(options));
  EXPECT_EQ(options->budgetBytes, std::numeric_limits<int64_t>::max());
}

TEST(PlanOptionsParserTest, ErrorsNameTheOption) {
  PlanOptionText text;
  text.policy = "greedy";
  EXPECT_NE(errorOf(text).find("unknown policy 'greedy'"), std::string::npos);
  text = {};
  text.solver = "magic";
  EXPECT_NE(errorOf(text).find("unknown solver 'magic'"), std::string::npos);
  text = {};
  text.budget = "lots";
  EXPECT_NE(errorOf(text).find("invalid budget 'lots'"), std::string::npos);
  text = {};
  text.minOffloadBytes = "-1";
  EXPECT_NE(errorOf(text).find("invalid min-offload-bytes"), std::string::npos);
  text = {};
  text.hostBudget = "x";
  EXPECT_NE(errorOf(text).find("invalid host-budget"), std::string::npos);
  text = {};
  text.everyN = 0;
  EXPECT_NE(errorOf(text).find("n must be at least 1"), std::string::npos);
}

} // namespace
