#include "app/studio/map_fetcher.h"

#include <algorithm>
#include <cmath>

#include "app/figures/capture_figure.h"

namespace luka::studio {

bool MapRequest::same_window(const MapRequest& o) const {
  return view == o.view && layer == o.layer && head == o.head && level == o.level && kind == o.kind && steps == o.steps && r0 == o.r0 &&
         c0 == o.c0 && rows == o.rows && cols == o.cols && log == o.log && log_min == o.log_min;
}

MapFetcher::MapFetcher() : thread_([this] { run(); }) {}

MapFetcher::~MapFetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MapFetcher::request(MapRequest r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = std::move(r);
  }
  cv_.notify_all();
}

std::optional<MapResult> MapFetcher::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<MapResult> out = std::move(done_);
  done_.reset();
  return out;
}

bool MapFetcher::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !pending_ && !working_ && !done_;
}

void MapFetcher::run() {
  for (;;) {
    MapRequest r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return quit_ || pending_; });
      if (quit_) return;
      r = std::move(*pending_);
      pending_.reset();
      working_ = true;
    }
    MapResult out;
    try {
      const auto kind = static_cast<figures::MapView>(r.kind);
      const figures::FullWindow w = figures::full_window(*r.view, r.layer, r.head, r.level, r.steps, kind, r.r0, r.c0, r.rows, r.cols);
      viz::HeatmapOptions o = figures::map_view_options(kind, w.values, r.log, r.log_min);
      o.row0 = w.row0;
      o.col0 = w.col0;
      o.empty = {24, 24, 28};
      out.diff_max = static_cast<float>(o.scale.vmax);
      if (w.rows > 0 && w.cols > 0)
        out.image = viz::render_heatmap(w.values.data(), w.rows, w.cols, static_cast<int>(w.cols), static_cast<int>(w.rows), o);
      out.values = w.values;
      out.request = r;
      out.request.r0 = w.row0;  // as clipped
      out.request.c0 = w.col0;
      out.request.rows = w.rows;
      out.request.cols = w.cols;
    } catch (const std::exception& e) {
      out.request = r;
      out.error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    working_ = false;
    if (!pending_) done_ = std::move(out);  // a newer request supersedes this result
  }
}

}  // namespace luka::studio
