//===- Svg.h - Line plots as standalone SVG ---------------------*- C++ -*-===//
//
// A small writer for the plots Lethe draws (memory over time, planned vs
// unplanned, with the budget): axes with round ticks, step or straight
// series, horizontal reference lines and a legend. No dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef LETHE_SUPPORT_SVG_H
#define LETHE_SUPPORT_SVG_H

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <utility>
#include <vector>

namespace lethe {

struct PlotSeries {
  std::string label;
  /// Any SVG colour ("#1f77b4").
  std::string color = "#1f77b4";
  /// (x, y) in data units, x non-decreasing.
  std::vector<std::pair<double, double>> points;
  /// Draw as a step function (the value holds until the next point).
  bool step = true;
  /// Fill the area under the curve, lightly.
  bool fill = false;
};

struct PlotLine {
  std::string label;
  std::string color = "#d62728";
  double y = 0.0;
};

struct LinePlot {
  std::string title;
  std::string xLabel;
  std::string yLabel;
  std::vector<PlotSeries> series;
  /// Horizontal reference lines (a budget), drawn dashed.
  std::vector<PlotLine> lines;
  int width = 960;
  int height = 440;
};

/// Round tick positions covering [low, high], about `target` of them.
std::vector<double> niceTicks(double low, double high, int target = 6);

/// Writes `plot` as a standalone SVG document.
void writeSvg(const LinePlot &plot, llvm::raw_ostream &os);

} // namespace lethe

#endif // LETHE_SUPPORT_SVG_H
