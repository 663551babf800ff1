//===- Svg.cpp - Line plots as standalone SVG -----------------------------===//

#include "lethe/Support/Svg.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

using namespace lethe;

std::vector<double> lethe::niceTicks(double low, double high, int target) {
  std::vector<double> ticks;
  if (!(high > low) || target < 1)
    return {low};
  double raw = (high - low) / target;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (factor * magnitude >= raw) {
      step = factor * magnitude;
      break;
    }
  double first = std::ceil(low / step - 1e-9) * step;
  for (double tick = first; tick <= high + step * 1e-9; tick += step)
    ticks.push_back(std::abs(tick) < step * 1e-9 ? 0.0 : tick);
  return ticks;
}

static std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

static std::string formatTick(double value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (value == std::floor(value) && std::abs(value) < 1e15)
    os << static_cast<long long>(value);
  else
    os << llvm::format("%g", value);
  return text;
}

void lethe::writeSvg(const LinePlot &plot, llvm::raw_ostream &os) {
  const double left = 80, right = 190, top = 40, bottom = 56;
  const double plotW = plot.width - left - right;
  const double plotH = plot.height - top - bottom;

  double xMin = 0, xMax = 0, yMin = 0, yMax = 0;
  bool any = false;
  for (const PlotSeries &series : plot.series)
    for (auto [x, y] : series.points) {
      xMin = any ? std::min(xMin, x) : x;
      xMax = any ? std::max(xMax, x) : x;
      yMax = any ? std::max(yMax, y) : y;
      any = true;
    }
  for (const PlotLine &line : plot.lines)
    yMax = std::max(yMax, line.y);
  xMin = std::min(xMin, 0.0);
  if (xMax <= xMin)
    xMax = xMin + 1;
  if (yMax <= yMin)
    yMax = yMin + 1;
  std::vector<double> xTicks = niceTicks(xMin, xMax);
  std::vector<double> yTicks = niceTicks(yMin, yMax * 1.05);
  xMax = std::max(xMax, xTicks.back());
  yMax = std::max(yMax * 1.05, yTicks.back());

  auto px = [&](double x) { return left + (x - xMin) / (xMax - xMin) * plotW; };
  auto py = [&](double y) {
    return top + plotH - (y - yMin) / (yMax - yMin) * plotH;
  };
  auto num = [](double v) { return llvm::format("%.2f", v); };

  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << plot.width
     << "\" height=\"" << plot.height << "\" viewBox=\"0 0 " << plot.width
     << " " << plot.height
     << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!plot.title.empty())
    os << "<text x=\"" << num(left + plotW / 2) << "\" y=\"22\" "
       << "text-anchor=\"middle\" font-size=\"15\">" << escape(plot.title)
       << "</text>\n";

  // Grid and ticks.
  for (double tick : yTicks) {
    os << "<line x1=\"" << num(left) << "\" y1=\"" << num(py(tick))
       << "\" x2=\"" << num(left + plotW) << "\" y2=\"" << num(py(tick))
       << "\" stroke=\"#e5e5e5\"/>\n";
    os << "<text x=\"" << num(left - 6) << "\" y=\"" << num(py(tick) + 4)
       << "\" text-anchor=\"end\">" << formatTick(tick) << "</text>\n";
  }
  for (double tick : xTicks) {
    os << "<line x1=\"" << num(px(tick)) << "\" y1=\"" << num(top + plotH)
       << "\" x2=\"" << num(px(tick)) << "\" y2=\"" << num(top + plotH + 5)
       << "\" stroke=\"#333\"/>\n";
    os << "<text x=\"" << num(px(tick)) << "\" y=\"" << num(top + plotH + 18)
       << "\" text-anchor=\"middle\">" << formatTick(tick) << "</text>\n";
  }
  os << "<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\""
     << num(plotW) << "\" height=\"" << num(plotH)
     << "\" fill=\"none\" stroke=\"#333\"/>\n";
  os << "<text x=\"" << num(left + plotW / 2) << "\" y=\""
     << num(plot.height - 14) << "\" text-anchor=\"middle\">"
     << escape(plot.xLabel) << "</text>\n";
  os << "<text transform=\"translate(18," << num(top + plotH / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">" << escape(plot.yLabel)
     << "</text>\n";

  // Series.
  for (const PlotSeries &series : plot.series) {
    if (series.points.empty())
      continue;
    std::string path;
    llvm::raw_string_ostream d(path);
    d << "M" << num(px(series.points.front().first)) << ","
      << num(py(series.points.front().second));
    for (size_t i = 1; i < series.points.size(); ++i) {
      auto [x, y] = series.points[i];
      if (series.step)
        d << " H" << num(px(x));
      d << " " << (series.step ? "V" : "L");
      if (series.step)
        d << num(py(y));
      else
        d << num(px(x)) << "," << num(py(y));
    }
    if (series.fill) {
      os << "<path d=\"" << path << " V" << num(py(yMin)) << " H"
         << num(px(series.points.front().first)) << " Z\" fill=\""
         << series.color << "\" fill-opacity=\"0.12\" stroke=\"none\"/>\n";
    }
    os << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << series.color
       << "\" stroke-width=\"1.5\"/>\n";
  }
  for (const PlotLine &line : plot.lines)
    os << "<line x1=\"" << num(left) << "\" y1=\"" << num(py(line.y))
       << "\" x2=\"" << num(left + plotW) << "\" y2=\"" << num(py(line.y))
       << "\" stroke=\"" << line.color
       << "\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";

  // Legend.
  double legendY = top + 8;
  auto legendEntry = [&](const std::string &label, const std::string &color,
                         bool dashed) {
    double x = left + plotW + 16;
    os << "<line x1=\"" << num(x) << "\" y1=\"" << num(legendY) << "\" x2=\""
       << num(x + 24) << "\" y2=\"" << num(legendY) << "\" stroke=\"" << color
       << "\" stroke-width=\"2\"" << (dashed ? " stroke-dasharray=\"6,4\"" : "")
       << "/>\n";
    os << "<text x=\"" << num(x + 30) << "\" y=\"" << num(legendY + 4) << "\">"
       << escape(label) << "</text>\n";
    legendY += 20;
  };
  for (const PlotSeries &series : plot.series)
    legendEntry(series.label, series.color, false);
  for (const PlotLine &line : plot.lines)
    legendEntry(line.label, line.color, true);
  os << "</svg>\n";
}
