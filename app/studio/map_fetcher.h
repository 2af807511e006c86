// Reads map windows off the UI thread: the heatmap panel posts the window it wants (the latest
// request replaces any not yet started), a worker reads it from the capture and renders the
// image, and the panel uploads the result when it is ready — so the UI never waits on the disk.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "captures/capture.h"
#include "viz/heatmap.h"

namespace luka::studio {

struct MapRequest {
  std::shared_ptr<const capture::CaptureView> view;
  int layer = 0, head = 0, level = 0, kind = 0;  // kind: figures::MapView
  std::int64_t steps = 0, r0 = 0, c0 = 0, rows = 0, cols = 0;
  bool log = true;
  double log_min = 1e-4;
  bool same_window(const MapRequest& o) const;
};

struct MapResult {
  MapRequest request;
  viz::Image image;
  std::vector<float> values;
  float diff_max = 0;
  std::string error;
};

class MapFetcher {
 public:
  MapFetcher();
  ~MapFetcher();
  MapFetcher(const MapFetcher&) = delete;
  MapFetcher& operator=(const MapFetcher&) = delete;
  void request(MapRequest r);
  std::optional<MapResult> poll();  // a finished result, once
  bool idle() const;                // nothing requested, running or waiting to be polled

 private:
  void run();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<MapRequest> pending_;
  std::optional<MapResult> done_;
  bool working_ = false, quit_ = false;
  std::thread thread_;
};

}  // namespace luka::studio
