/*===- lethe-capi-test.c - Exercises the C API --------------------------===*\
|*                                                                          *|
|* Usage: lethe-capi-test GRAPH.json TRACE-OUT PLAN-TRACE-OUT               *|
|* Prints one line per check; lit's FileCheck compares them.               *|
\*===----------------------------------------------------------------------===*/

#include "lethe-c/Lethe.h"

#include <stdio.h>
#include <string.h>

/* Prints "label: ok" or "label: error: <first line of the message>". */
static int report(const char *label, LetheStatus status) {
  if (letheStatusIsSuccess(status)) {
    printf("%s: ok\n", label);
    return 1;
  }
  const char *message = status.message.data;
  const char *end = strchr(message, '\n');
  printf("%s: error: %.*s\n", label,
         (int)(end ? (size_t)(end - message) : status.message.length), message);
  letheStatusDestroy(status);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s GRAPH.json TRACE-OUT PLAN-TRACE-OUT\n",
            argv[0]);
    return 2;
  }
  printf("version %s\n", letheVersion());
  LetheString defaults = {NULL, 0};
  if (report("defaults", lethePlanOptionDefaults(&defaults))) {
    printf("defaults: %s\n", defaults.data);
    letheStringDestroy(defaults);
  }
  report("defaults null", lethePlanOptionDefaults(NULL));

  LetheGraph graph = NULL;
  if (!report("load", letheGraphLoadFile(argv[1], NULL, &graph)))
    return 1;
  LetheString json = {NULL, 0};
  if (report("report", letheGraphReport(graph, 3, &json))) {
    /* The document is `lethe report --json`'s: show its first fields. */
    const char *peak = strstr(json.data, "\"baseline_peak_bytes\"");
    printf("report has peak: %s\n", peak ? "yes" : "no");
    printf("report length > 100: %s\n", json.length > 100 ? "yes" : "no");
    letheStringDestroy(json);
  }
  LetheString mlir = {NULL, 0};
  if (report("print", letheGraphPrint(graph, &mlir))) {
    printf("print has lethe.node: %s\n",
           strstr(mlir.data, "lethe.node") ? "yes" : "no");
    letheStringDestroy(mlir);
  }
  report("trace", letheGraphWriteTrace(graph, argv[2]));

  /* Plans: at half the unplanned peak, and below what any plan can meet. */
  LethePlanOptions options = {0};
  options.budget = "50%";
  LethePlan plan = NULL;
  if (report("plan 50%", letheGraphPlan(graph, &options, &plan))) {
    printf("plan 50%% feasible: %s\n", lethePlanIsFeasible(plan) ? "yes" : "no");
    LetheString planJson = {NULL, 0};
    if (report("plan json", lethePlanJson(plan, &planJson))) {
      printf("plan json has values: %s\n",
             strstr(planJson.data, "\"values\"") ? "yes" : "no");
      letheStringDestroy(planJson);
    }
    report("plan trace", lethePlanWriteTrace(plan, argv[3]));
    lethePlanDestroy(plan);
  }
  /* With a lower bound on any plan's overhead (docs/Bound.md). */
  options.bound = 1;
  if (report("plan 50% with bound", letheGraphPlan(graph, &options, &plan))) {
    LetheString planJson = {NULL, 0};
    if (report("bound json", lethePlanJson(plan, &planJson))) {
      printf("bound json has lower_bound_overhead and gap: %s\n",
             strstr(planJson.data, "\"lower_bound_overhead\"") &&
                     strstr(planJson.data, "\"gap\"")
                 ? "yes"
                 : "no");
      letheStringDestroy(planJson);
    }
    lethePlanDestroy(plan);
  }
  options.bound = 0;
  /* The whole pipeline: the allocated program and its simulated run. */
  LetheString program = {NULL, 0}, compiled = {NULL, 0};
  if (report("compile 50%",
             letheGraphCompile(graph, &options, &program, &compiled))) {
    printf("program has arena offsets: %s\n",
           strstr(program.data, "lethe.offsets") ? "yes" : "no");
    printf("compile json has arena_bytes: %s\n",
           strstr(compiled.data, "\"arena_bytes\"") ? "yes" : "no");
    letheStringDestroy(program);
    letheStringDestroy(compiled);
  }
  options.budget = "1KiB";
  report("compile 1KiB", letheGraphCompile(graph, &options, NULL, NULL));
  if (report("plan 1KiB", letheGraphPlan(graph, &options, &plan))) {
    printf("plan 1KiB feasible: %s\n", lethePlanIsFeasible(plan) ? "yes" : "no");
    lethePlanDestroy(plan);
  }
  /* Every lethe-plan option, as the pass takes them. */
  if (report(
          "plan text 50% alignment=1",
          letheGraphPlanWithOptions(graph, "budget=50% alignment=1", &plan))) {
    printf("plan text feasible: %s\n",
           lethePlanIsFeasible(plan) ? "yes" : "no");
    lethePlanDestroy(plan);
  }
  if (report("compile text 50%", letheGraphCompileWithOptions(
                                     graph, "budget=50%", NULL, &compiled))) {
    printf("compile text json has arena_bytes: %s\n",
           strstr(compiled.data, "\"arena_bytes\"") ? "yes" : "no");
    letheStringDestroy(compiled);
  }
  report("bad option text",
         letheGraphPlanWithOptions(graph, "budget=50% polcy=auto", &plan));
  report("bad alignment",
         letheGraphPlanWithOptions(graph, "alignment=24", &plan));
  report("other device",
         letheGraphPlanWithOptions(graph, "device=h100", &plan));
  options.budget = "50%";
  options.policy = "sometimes";
  report("bad policy", letheGraphPlan(graph, &options, &plan));
  options.policy = NULL;
  options.budget = "lots";
  report("bad budget", letheGraphPlan(graph, &options, &plan));
  report("trace to a missing directory",
         letheGraphWriteTrace(graph, "/nonexistent/dir/trace.json"));
  letheGraphDestroy(graph);

  /* Errors come back as messages; nothing aborts. */
  LetheGraph bad = NULL;
  report("missing file",
         letheGraphLoadFile("/nonexistent/graph.json", NULL, &bad));
  report("unknown device", letheGraphLoadFile(argv[1], "tpu-v9", &bad));
  const char *notJson = "{\"nodes\": [";
  report("malformed json", letheGraphLoadString(notJson, strlen(notJson),
                                                "json", "inline.json", NULL,
                                                &bad));
  const char *dangling =
      "{\"nodes\": [{\"id\": 0, \"name\": \"x\", \"op\": \"aten.relu.default\","
      " \"kind\": \"op\", \"phase\": \"fwd\", \"inputs\": [[7, 0]],"
      " \"outputs\": [{\"shape\": [2], \"dtype\": \"float32\", \"bytes\": 8}]}],"
      " \"saved\": []}";
  report("dangling input", letheGraphLoadString(dangling, strlen(dangling),
                                                "json", "inline.json", NULL,
                                                &bad));
  report("unknown format",
         letheGraphLoadString("x", 1, "onnx", NULL, NULL, &bad));
  report("bad mlir", letheGraphLoadString("func.func @f(", 13, "mlir",
                                          "inline.mlir", NULL, &bad));
  printf("bad graph left null: %s\n", bad == NULL ? "yes" : "no");
  const char *tiny =
      "func.func @step(%a: tensor<4xf32> {lethe.kind = \"input\"}) -> "
      "tensor<4xf32> {\n  %0 = lethe.node \"aten.relu.default\" fwd (%a) "
      "{time_us = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>\n"
      "  return %0 : tensor<4xf32>\n}\n";
  if (report("load mlir string",
             letheGraphLoadString(tiny, strlen(tiny), "mlir", "tiny.mlir",
                                  "h100", &graph)))
    letheGraphDestroy(graph);
  return 0;
}
