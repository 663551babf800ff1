//===- Layers.h - Find the repeated layers of a forward pass ----*- C++ -*-===//
//
// `full`, `every-n` and `selective-op` work per layer, like activation
// checkpointing wrappers around transformer blocks. Layers come from module
// scopes when the graph has them: a scope component that is a number under
// a parent path holding at least two numbered children names a layer
// (`transformer.h.3`, `layer2.1`); the outermost such component wins. When
// scopes are missing, layers come from repeated structure: the forward is
// cut where the fewest forward values cross (the residual stream), the
// pieces between cuts get a signature from their op kinds, and the longest
// periodic run of signatures is split into layers of one period each.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_PLANNER_LAYERS_H
#define LETHE_PLANNER_LAYERS_H

#include "lethe/Analysis/TrainingGraph.h"

#include <string>
#include <vector>

namespace lethe {

struct LayerInfo {
  /// Layer of every node (forward nodes only), or -1.
  std::vector<int32_t> layerOf;
  /// Layer names in program order ("transformer.h.3", or "layer 3" when
  /// found from structure).
  std::vector<std::string> names;
  /// Whether the layers came from module scopes.
  bool fromScopes = false;

  size_t numLayers() const { return names.size(); }
};

LayerInfo findLayers(const TrainingGraph &graph);

} // namespace lethe

#endif // LETHE_PLANNER_LAYERS_H
