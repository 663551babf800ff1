//===- PlanStepTest.cpp - The planner's options, declared once ------------===//
//
// The options every route plans with are the lethe-plan pass's (Passes.td):
// parsed into PlanOptions with errors that name the option, and read from
// text by the pass's own parser, so that the C API's and Python's text
// gives the struct the pass would have.
//
//===----------------------------------------------------------------------===//

#include "lethe/Dialect/Lethe/Transforms/PlanStep.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <limits>

using namespace lethe;

namespace {

std::string errorOf(const PlanActivationsOptions &text) {
  DeviceProfile device;
  llvm::Expected<PlanOptions> options = parsePlanOptions(text, 1000, device);
  if (options)
    return "";
  return llvm::toString(options.takeError());
}

TEST(PlanStepTest, ParsesEveryOption) {
  DeviceProfile device;
  device.hostMemoryBytes = 64e9;
  PlanActivationsOptions text;
  text.budget = "60%";
  text.policy = "every-n";
  text.everyN = 3;
  text.keepOps = {"mm", "attention"};
  text.offloadKept = true;
  text.minOffloadBytes = "4KiB";
  text.solver = "exact";
  text.replayRng = true;
  llvm::Expected<PlanOptions> options = parsePlanOptions(text, 2000, device);
  ASSERT_TRUE(static_cast<bool>(options))
      << llvm::toString(options.takeError());
  EXPECT_EQ(options->budgetBytes, 1200);
  EXPECT_EQ(options->policy, Policy::EveryN);
  EXPECT_EQ(options->everyN, 3);
  EXPECT_EQ(options->keepOpKinds,
            std::vector<std::string>(text.keepOps.begin(), text.keepOps.end()));
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

TEST(PlanStepTest, ErrorsNameTheOption) {
  PlanActivationsOptions text;
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
  text = {};
  text.alignment = 24;
  EXPECT_NE(errorOf(text).find("alignment must be a power of two"),
            std::string::npos);
}

/// `key=value` of each option in the pass's textual form.
llvm::StringMap<std::string> printedOptions(const PlanActivationsOptions &o) {
  std::string text;
  llvm::raw_string_ostream os(text);
  createPlanActivations(o)->printAsTextualPipeline(os);
  // lethe-plan{alignment=1 bound=true budget=... ...}
  llvm::StringRef body = llvm::StringRef(text).split('{').second;
  body = body.rsplit('}').first;
  llvm::StringMap<std::string> options;
  while (!body.empty()) {
    auto [key, rest] = body.split('=');
    // A value is up to the next space outside braces.
    size_t end = 0;
    int depth = 0;
    for (; end < rest.size(); ++end) {
      char c = rest[end];
      if (c == '{')
        ++depth;
      else if (c == '}')
        --depth;
      else if (c == ' ' && depth == 0)
        break;
    }
    options[key.trim()] = rest.take_front(end).str();
    body = rest.drop_front(end).ltrim();
  }
  return options;
}

TEST(PlanStepTest, TextRoundTripsEveryOption) {
  // Every option away from its default, so that a field the pass does not
  // copy back (PlanActivationsPass::options) or the parser drops shows.
  PlanActivationsOptions given;
  given.budget = "800 MB";
  given.policy = "every-n";
  given.device = "h100";
  given.everyN = 3;
  given.keepOps = {"mm", "attention"};
  given.offloadKept = true;
  given.minOffloadBytes = "4KiB";
  given.hostBudget = "2GB";
  given.solver = "exact";
  given.replayRng = true;
  given.bound = true;
  given.threads = 2;
  given.alignment = 1;
  given.planFile = "plan.json";
  llvm::StringMap<std::string> defaults =
      printedOptions(PlanActivationsOptions());
  llvm::StringMap<std::string> printed = printedOptions(given);
  // (An empty list option is not printed.)
  ASSERT_GE(printed.size(), defaults.size());
  for (const auto &option : defaults)
    EXPECT_NE(printed.lookup(option.getKey()), option.getValue())
        << "option '" << option.getKey().str()
        << "' keeps its default here: set it above";

  std::string text;
  for (const auto &option : printed)
    text += (option.getKey() + "=" + option.getValue() + " ").str();
  llvm::Expected<PlanActivationsOptions> parsed =
      parsePlanActivationsOptions(text);
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(printedOptions(*parsed), printed);
  EXPECT_EQ(parsed->budget, "800 MB");
  EXPECT_EQ(parsed->keepOps.size(), 2u);

  // Options not named keep the pass's defaults.
  parsed = parsePlanActivationsOptions("policy=full");
  ASSERT_TRUE(static_cast<bool>(parsed));
  PlanActivationsOptions expected;
  expected.policy = "full";
  EXPECT_EQ(printedOptions(*parsed), printedOptions(expected));
}

TEST(PlanStepTest, FlagsAreThePassOptions) {
  // The driver's planning flags are the pass's options: every one of them,
  // with the pass's defaults, and a value given to a flag reaches the
  // struct every route plans with.
  PlanOptionFlags flags;
  PlanActivationsOptions list;
  list.keepOps = {"mm"}; // (An empty list option is not printed.)
  llvm::StringMap<std::string> printed = printedOptions(list);
  std::vector<std::string> names;
  for (const llvm::cl::Option *option : flags.getOptions())
    names.push_back(option->ArgStr.str());
  std::vector<std::string> expected;
  for (const auto &option : printed)
    expected.push_back(option.getKey().str());
  llvm::sort(expected);
  EXPECT_EQ(names, expected);
  EXPECT_EQ(printedOptions(flags.getValues()),
            printedOptions(PlanActivationsOptions()));
  EXPECT_EQ(flags.lookup("polcy"), nullptr);

  // Each option away from its default, as a command line gives it.
  const std::pair<const char *, const char *> given[] = {
      {"budget", "800MB"},
      {"policy", "every-n"},
      {"device", "h100"},
      {"n", "3"},
      {"keep-ops", "mm,bmm"},
      {"offload-kept", "true"},
      {"min-offload-bytes", "4KiB"},
      {"host-budget", "2GB"},
      {"solver", "exact"},
      {"replay-rng", "true"},
      {"bound", "true"},
      {"threads", "2"},
      {"alignment", "1"},
      {"plan-file", "plan.json"}};
  for (auto [name, value] : given) {
    llvm::cl::Option *option = flags.lookup(name);
    ASSERT_NE(option, nullptr) << name;
    EXPECT_FALSE(option->addOccurrence(1, name, value)) << name;
  }
  PlanActivationsOptions values = flags.getValues();
  llvm::StringMap<std::string> defaults =
      printedOptions(PlanActivationsOptions());
  for (const auto &option : printedOptions(values))
    EXPECT_NE(option.getValue(), defaults.lookup(option.getKey()))
        << "option '" << option.getKey().str() << "' was not given above";
  EXPECT_EQ(values.budget, "800MB");
  EXPECT_EQ(values.everyN, 3);
  EXPECT_EQ(values.keepOps.size(), 2u);
  EXPECT_EQ(values.alignment, 1);
  EXPECT_EQ(values.planFile, "plan.json");
  EXPECT_EQ(values.threads, 2u);
}

TEST(PlanStepTest, TextErrorsNameTheOption) {
  llvm::Expected<PlanActivationsOptions> parsed =
      parsePlanActivationsOptions("polcy=full");
  ASSERT_FALSE(static_cast<bool>(parsed));
  EXPECT_NE(llvm::toString(parsed.takeError()).find("polcy"),
            std::string::npos);
  parsed = parsePlanActivationsOptions("n=many");
  ASSERT_FALSE(static_cast<bool>(parsed));
  std::string message = llvm::toString(parsed.takeError());
  EXPECT_NE(message.find("invalid option 'n=many'"), std::string::npos)
      << message;
}

} // namespace
