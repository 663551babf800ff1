//===- RepeatedLayers.h - Activations of identical layers -------*- C++ -*-===//
//
// A training step repeats one block tens to thousands of times (the layers
// of a transformer). Layers (lethe/Planner/Layers.h) that compute the same
// thing — the same ops in the same order, the same sizes, wired alike
// inside the layer, node times within 10% (measured times differ a little
// between copies) — hold the same activations: the k-th result of the
// layer's n-th op. Such a
// set of activations is a *class*; `auto` on a large step decides a class
// at once (one decision applied to every copy that frees memory where it is
// picked), so its greedy makes one pick where it made one per layer, and
// every plan it builds is still placed, scheduled and simulated whole
// (docs/Planner.md, "Repeated layers").
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_REPEATEDLAYERS_H
#define LETHE_PLANNER_REPEATEDLAYERS_H

#include "lethe/Planner/Activations.h"

#include <cstdint>
#include <vector>

namespace lethe {

struct RepeatedLayers {
  /// Per class (two activations or more), its activations in program order.
  std::vector<std::vector<int32_t>> classes;
  /// Layers that have an identical twin.
  size_t repeatedLayers = 0;
  /// Activations in some class.
  size_t tiedActivations = 0;
};

/// The classes of identical layers' activations. Two activations share a
/// class when their producers sit at the same position of identical layers,
/// they are the same result of it, and they have the same bytes, the same
/// options (recompute, offload, checkpoint) and the same recompute chain
/// length and time.
RepeatedLayers findRepeatedLayers(const ActivationAnalysis &analysis);

/// Whether `auto` ties the decisions of `repeated` on this step: the step is
/// large (kTieMinActivations activations or more, where the untied ladder
/// costs seconds) and most of its activations sit in classes of many copies.
bool shouldTieRepeatedLayers(const ActivationAnalysis &analysis,
                             const RepeatedLayers &repeated);

} // namespace lethe

#endif // LETHE_PLANNER_REPEATEDLAYERS_H
