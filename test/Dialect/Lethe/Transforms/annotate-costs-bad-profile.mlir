// RUN: lethe-opt %s --lethe-annotate-costs='device=%S/Inputs/bad-profile.json' -verify-diagnostics
// RUN: not lethe-opt %s --lethe-annotate-costs='device=%S/Inputs/missing.json' -o %t.out 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not test -e %t.out

// A bad profile file: the error names the file and the field, and lists the
// built-in profiles; nothing is written.
// expected-error @+1 {{bad-profile.json: field 'hbm_gb_per_s': expected a positive number, got -4200 (built-in profiles: a100, h100, h200, h200-nvlink, h200-pcie)}}
module {
  func.func @step(%a: tensor<4xf32>) {
    %0 = lethe.node "aten.relu.default" fwd (%a) : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}

// MISSING: error: cannot load device profile: device profile '{{.*}}missing.json': cannot open: No such file or directory (built-in profiles: a100, h100, h200, h200-nvlink, h200-pcie)
