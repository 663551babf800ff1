// RUN: lethe-opt %s --lethe-annotate-costs='device=h300' -verify-diagnostics

// An unknown device name lists the built-in profiles.
// expected-error @+1 {{cannot load device profile: unknown device 'h300': give a built-in profile name or the path of a JSON profile (built-in profiles: a100, h100, h200, h200-nvlink, h200-pcie)}}
module {
  func.func @step(%a: tensor<4xf32>) {
    %0 = lethe.node "aten.relu.default" fwd (%a) : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}
