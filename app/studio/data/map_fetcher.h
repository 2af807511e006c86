// Reads map windows off the UI thread: the heatmap panel posts the window it wants (the latest
// request replaces any not yet started), a task on the "maps" lane reads it from the capture and
// renders the image, and the panel uploads the result when it is handed back — so the UI never
// waits on the disk, and analyses on the pool never hold up the map.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/figures/capture_figure.h"
#include "app/studio/data/tasks.h"
#include "captures/capture.h"
#include "viz/heatmap.h"

namespace luka::studio {

struct MapRequest {
  std::shared_ptr<const capture::CaptureView> view;
  int layer = 0, head = 0, level = 0;
  figures::MapView kind = figures::MapView::kEffective;
  std::int64_t steps = 0, r0 = 0, c0 = 0, rows = 0, cols = 0;
  bool log = true;
  double log_min = 1e-4;
  // The decode-rows view instead of the query x key map: steps first..last, keys pooled
  // 2^pool_level per column, columns [c0, c0 + cols) (r0, rows and level unused).
  bool decode_rows = false;
  // Set: the map is view's effective attention minus this capture's (same prompt), in the
  // difference colours; `kind` is then unused.
  std::shared_ptr<const capture::CaptureView> minus;
  std::int64_t first = 0, last = 0;
  int pool_level = 0;
  bool same_window(const MapRequest& o) const;
};

struct MapResult {
  MapRequest request;
  viz::Image image;
  std::vector<float> values;  // decode rows: the prefill row, then one row per step
  float diff_max = 0;
  viz::ColorScale scale;  // the colour scale the image was drawn with
  std::string error;
};

inline constexpr char kMapLane[] = "maps";

class MapFetcher {
 public:
  void request(TaskManager& tasks, MapRequest r);
  // A finished result, once (after TaskManager::poll handed it over); a result a newer request
  // superseded is dropped and that request started.
  std::optional<MapResult> poll(TaskManager& tasks);
  bool idle() const;  // nothing requested, running or waiting to be polled

 private:
  void start(TaskManager& tasks, MapRequest r);
  Pending<MapResult> job_;
  std::optional<MapRequest> pending_;  // asked for while another was read: the latest only
};

}  // namespace luka::studio
