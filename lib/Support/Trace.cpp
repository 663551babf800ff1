//===- Trace.cpp - Chrome-trace / Perfetto timelines ----------------------===//

#include "lethe/Support/Trace.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

using namespace lethe;

void lethe::writeChromeTrace(const Timeline &timeline, llvm::raw_ostream &os) {
  // Thread ids fix the track order in the viewer.
  llvm::StringMap<int> trackIds;
  std::vector<std::string> trackOrder = {"compute", "d2h", "h2d", "comm"};
  for (const TraceSlice &slice : timeline.slices)
    if (!llvm::is_contained(trackOrder, slice.track))
      trackOrder.push_back(slice.track);
  for (auto [index, name] : llvm::enumerate(trackOrder))
    trackIds[name] = static_cast<int>(index);

  llvm::json::OStream json(os);
  json.object([&] {
    json.attribute("displayTimeUnit", "ms");
    json.attributeArray("traceEvents", [&] {
      json.object([&] {
        json.attribute("ph", "M");
        json.attribute("pid", 0);
        json.attribute("name", "process_name");
        json.attributeObject("args", [&] { json.attribute("name", "device"); });
      });
      for (const std::string &name : trackOrder) {
        json.object([&] {
          json.attribute("ph", "M");
          json.attribute("pid", 0);
          json.attribute("tid", trackIds[name]);
          json.attribute("name", "thread_name");
          json.attributeObject("args", [&] { json.attribute("name", name); });
        });
        json.object([&] {
          json.attribute("ph", "M");
          json.attribute("pid", 0);
          json.attribute("tid", trackIds[name]);
          json.attribute("name", "thread_sort_index");
          json.attributeObject(
              "args", [&] { json.attribute("sort_index", trackIds[name]); });
        });
      }
      for (const TraceSlice &slice : timeline.slices) {
        json.object([&] {
          json.attribute("ph", "X");
          json.attribute("pid", 0);
          json.attribute("tid", trackIds[slice.track]);
          json.attribute("name", slice.name);
          if (!slice.category.empty())
            json.attribute("cat", slice.category);
          json.attribute("ts", slice.startUs);
          json.attribute("dur", slice.durationUs);
          if (!slice.args.empty())
            json.attributeObject("args", [&] {
              for (const auto &[key, value] : slice.args)
                json.attribute(key, value);
            });
        });
      }
      for (const MemorySample &sample : timeline.memory) {
        json.object([&] {
          json.attribute("ph", "C");
          json.attribute("pid", 0);
          json.attribute("name", "device memory");
          json.attribute("ts", sample.timeUs);
          json.attributeObject("args", [&] {
            json.attribute("allocated", sample.bytes);
            if (timeline.budgetBytes > 0)
              json.attribute("budget", timeline.budgetBytes);
          });
        });
      }
    });
  });
  os << "\n";
}
