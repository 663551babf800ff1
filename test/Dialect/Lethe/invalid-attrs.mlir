// RUN: lethe-opt %s -split-input-file -verify-diagnostics

// One case per error of the verifier of Lethe's discardable attributes
// (`lethe.*` on ops, function arguments and results; LetheDialect.td lists
// them).

// expected-error @+1 {{attribute 'lethe.colour' is not a Lethe attribute}}
module attributes {lethe.colour = "blue"} {}

// -----

// expected-error @+1 {{attribute 'lethe.model' belongs on the module}}
func.func @model_on_function() attributes {lethe.model = "gpt2"} {
  return
}

// -----

// expected-error @+1 {{attribute 'lethe.totals' must be a #lethe.totals<...>, got 3 : i64}}
module attributes {lethe.totals = 3 : i64} {}

// -----

// expected-error @+1 {{'n_nodes' must be an i64 or an f64, got "9"}}
module attributes {lethe.totals = #lethe.totals<{n_nodes = "9"}>} {}

// -----

// expected-error @+1 {{attribute 'lethe.pipeline' must be a #lethe.pipeline<...>, got {stage = 0 : i64}}}
func.func @pipeline_dictionary() attributes {lethe.pipeline = {stage = 0 : i64}} {
  return
}

// -----

// expected-error @+1 {{stage must be in [0, 2), got 2}}
func.func @pipeline_stage() attributes {lethe.pipeline = #lethe.pipeline<schedule = "1f1b", stages = 2, stage = 2, microbatches = 4, vpp = 1>} {
  return
}

// -----

// expected-error @+1 {{stages, microbatches and vpp must be at least 1}}
func.func @pipeline_microbatches() attributes {lethe.pipeline = #lethe.pipeline<schedule = interleaved, stages = 2, stage = 0, microbatches = 0, vpp = 2>} {
  return
}

// -----

// expected-error @+1 {{attribute 'lethe.device_arena_bytes' must be at least 0, got -1}}
module attributes {lethe.device_arena_bytes = -1 : i64} {}

// -----

// expected-error @+1 {{attribute 'lethe.budget_bytes' must be an i64, got 1 : i32}}
module attributes {lethe.budget_bytes = 1 : i32} {}

// -----

// expected-error @+1 {{attribute 'lethe.arena_alignment' must be at least 1, got 0}}
module attributes {lethe.arena_alignment = 0 : i64} {}

// -----

// expected-error @+1 {{attribute 'lethe.predicted_step_us' must be a float, got "fast"}}
module attributes {lethe.predicted_step_us = "fast"} {}

// -----

// expected-error @+1 {{attribute 'lethe.plan' belongs on a function}}
module attributes {lethe.plan = {}} {}

// -----

// expected-error @+1 {{attribute 'lethe.contention' must be a #lethe<contention ...>, got "yield"}}
func.func @contention() attributes {lethe.contention = "yield"} {
  return
}

// -----

// expected-error @+1 {{attribute 'lethe.ranks_per_host' must be at least 1, got 0}}
func.func @ranks() attributes {lethe.ranks_per_host = 0 : i64} {
  return
}

// -----

func.func @name_on_node(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.name' belongs on a function argument or result}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.name = "relu"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @node_id_on_return(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.node_id' belongs on a 'lethe.node' or 'lethe.collective'}}
  "func.return"() {lethe.node_id = 3 : i64} : () -> ()
}

// -----

func.func @cost_source(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.cost_source' must be a #lethe<cost_source ...>, got "analytic"}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.cost_source = "analytic"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @saved_out_of_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.saved' names result 1 of 1}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.saved = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @decisions_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.decisions' has 2 entries for 1 results}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = [#lethe<decision retain>, unit]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @decisions_entry(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.decisions' entry 0 must be a #lethe<decision ...> or unit, got "retain"}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = ["retain"]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @placement_alone(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.placement' needs 'lethe.decisions' on the same op}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.placement = [unit]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @placement_of_retained(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.placement' entry 0 places a result that is neither recomputed nor offloaded}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = [#lethe<decision retain>], lethe.placement = [#lethe.placement<restore_before = 1, nodes = []>]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @placement_offload_fields(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.placement' entry 0 places an offload without 'release_after' and 'prefetch_after'}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 1, nodes = []>]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @placement_dictionary(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.placement' entry 0 must be a #lethe.placement<...> or unit, got {nodes = array<i64: 0>, restore_before = 1 : i64}}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = [#lethe<decision recompute>], lethe.placement = [{restore_before = 1 : i64, nodes = array<i64: 0>}]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @placement_half_offload(%x: tensor<4xf32>) {
  // expected-error @+1 {{an offload needs both release_after and prefetch_after}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.decisions = [#lethe<decision offload>], lethe.placement = [#lethe.placement<restore_before = 3, release_after = 1, nodes = []>]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{attribute 'lethe.plan' must be a #lethe.plan<...>, got {peak_bytes = 3072 : i64}}}
func.func @plan_dictionary() attributes {lethe.plan = {peak_bytes = 3072 : i64}} {
  return
}

// -----

// expected-error @+1 {{budget_bytes, peak_bytes and baseline_peak_bytes must be at least 0}}
func.func @plan_peak() attributes {lethe.plan = #lethe.plan<policy = auto, budget_bytes = 4096, feasible = true, peak_bytes = -1, baseline_peak_bytes = 8192, step_us = 1.0, baseline_step_us = 1.0, overhead = 0.0>} {
  return
}

// -----

// expected-error @+1 {{step_us and baseline_step_us must be at least 0}}
func.func @plan_step() attributes {lethe.plan = #lethe.plan<policy = auto, budget_bytes = 4096, feasible = true, peak_bytes = 1, baseline_peak_bytes = 8192, step_us = -1.0, baseline_step_us = 1.0, overhead = 0.0>} {
  return
}

// -----

// expected-error @+2 {{expected ::lethe::Policy to be one of: none, full, every-n, selective-op, offload-all, auto, given}}
// expected-error @+1 {{failed to parse Lethe_PlanAttr parameter 'policy'}}
func.func @plan_policy() attributes {lethe.plan = #lethe.plan<policy = sometimes, budget_bytes = 4096, feasible = true, peak_bytes = 1, baseline_peak_bytes = 8192, step_us = 1.0, baseline_step_us = 1.0, overhead = 0.0>} {
  return
}

// -----

func.func @stream(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.stream' must be a #lethe<stream ...>, got "compute"}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.stream = "compute"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @offsets(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'lethe.offsets' must be an array<i64>, got [0]}}
  %0 = lethe.node "aten.relu.default" fwd (%x) {lethe.offsets = [0]} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{argument #0 attribute 'lethe.kind' must be one of 'param', 'input', 'buffer', 'tangent', got 'weight'}}
func.func @arg_kind(%x: tensor<4xf32> {lethe.kind = "weight"}) {
  return
}

// -----

// expected-error @+1 {{argument #0 attribute 'lethe.saved' must be unit, got true}}
func.func @arg_saved(%x: tensor<4xf32> {lethe.saved = true}) {
  return
}

// -----

// expected-error @+1 {{argument #0 attribute 'lethe.grad_of' is not a Lethe argument attribute}}
func.func @arg_grad_of(%x: tensor<4xf32> {lethe.grad_of = "w"}) {
  return
}

// -----

// expected-error @+1 {{result #0 attribute 'lethe.grad_of' must be a string, got 1 : i64}}
func.func @result_grad_of(%x: tensor<4xf32>) -> (tensor<4xf32> {lethe.grad_of = 1 : i64}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{result #0 attribute 'lethe.kind' is not a Lethe result attribute}}
func.func @result_kind(%x: tensor<4xf32>) -> (tensor<4xf32> {lethe.kind = "param"}) {
  return %x : tensor<4xf32>
}
