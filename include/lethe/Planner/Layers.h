//===- Layers.h - Find the repeated layers of a forward pass ----*- C++ -*-===//
//
// `full`, `every-n` and `selective-op` work per layer, like activation
// checkpointing wrappers around transformer blocks. Layers come from module
// scopes when the graph has them, and from repeated structure otherwise.
//
// Scopes: a scope component numbers a module among its siblings when it is
// a number (`h.3`, `layers.3`, `layer1.0`) or a name ending in one
// (`layer3`, `encoder_layer_3`, `block3`); siblings share the parent path
// and the name's stem. Such a group of siblings is a layer group when it
// looks like a stack of blocks: each sibling reads what the previous one
// computed (serial, unlike parallel experts or heads) and two siblings are
// the same computation (equal op kinds and sizes, unlike the stages of a
// CNN), or one of two neighbours holds 90% of the other's ops (a block and
// its variant: Swin's shifted-window blocks). A node belongs to the outermost layer group on its path
// (`stages.1.blocks.2`: the blocks when the stages differ). Where no group
// passes, groups that are serial or repeated, and not made of single ops,
// are taken.
//
// Structure: the forward's op sequence (kind and sizes of every op) is
// searched for its longest periodic run; the run is cut into layers of one
// period each, at the phase where the fewest forward values cross the cut
// (the residual stream). Further runs elsewhere in the forward (the stages
// of a CNN) add their layers.
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
  /// Layer names in program order ("encoder.layers.encoder_layer_3", or
  /// "layer 3" when found from structure).
  std::vector<std::string> names;
  /// Whether the layers came from module scopes.
  bool fromScopes = false;

  size_t numLayers() const { return names.size(); }
};

LayerInfo findLayers(const TrainingGraph &graph);

} // namespace lethe

#endif // LETHE_PLANNER_LAYERS_H
