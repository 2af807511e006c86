#include "app/studio/data/map_fetcher.h"

#include <algorithm>
#include <cmath>

#include "app/figures/capture_figure.h"

namespace luka::studio {

bool MapRequest::same_window(const MapRequest& o) const {
  return view == o.view && layer == o.layer && head == o.head && level == o.level && kind == o.kind && steps == o.steps && r0 == o.r0 &&
         c0 == o.c0 && rows == o.rows && cols == o.cols && log == o.log && log_min == o.log_min && decode_rows == o.decode_rows &&
         first == o.first && last == o.last && pool_level == o.pool_level && minus == o.minus;
}

void MapFetcher::request(TaskManager& tasks, MapRequest r) {
  if (job_.active()) {
    pending_ = std::move(r);
    return;
  }
  start(tasks, std::move(r));
}

bool MapFetcher::idle() const { return !job_.active() && !pending_; }

namespace {

// Reads and renders one request (on the worker thread).
MapResult fetch(const MapRequest& r) {
  MapResult out;
  out.request = r;
  try {
    const auto kind = r.minus ? figures::MapView::kDifference : r.kind;
    if (r.minus) figures::check_comparable(*r.view, *r.minus);
    if (r.decode_rows) {
      figures::DecodeRows d = figures::decode_rows(*r.view, r.layer, r.head, r.minus ? figures::MapView::kEffective : kind, r.first, r.last,
                                                   r.pool_level, r.c0, r.cols);
      if (r.minus) {
        const figures::DecodeRows b = figures::decode_rows(*r.minus, r.layer, r.head, figures::MapView::kEffective, r.first, r.last, r.pool_level, r.c0, r.cols);
        figures::subtract(d, b);
      }
      viz::HeatmapOptions o = figures::decode_rows_options(kind, d, r.log, r.log_min);
      o.empty = {24, 24, 28};
      out.request.c0 = d.col0;  // as clipped
      out.request.cols = d.cols;
      out.scale = o.scale;
      out.diff_max = static_cast<float>(o.scale.vmax);
      if (d.cols > 0 && d.steps > 0) {
        out.values = d.prefill;  // row 0: the collapsed prefill
        out.values.insert(out.values.end(), d.values.begin(), d.values.end());
        out.image = viz::render_heatmap(out.values.data(), d.steps + 1, d.cols, static_cast<int>(d.cols), static_cast<int>(d.steps + 1), o);
      }
      return out;
    }
    figures::FullWindow w = figures::full_window(*r.view, r.layer, r.head, r.level, r.steps, r.minus ? figures::MapView::kEffective : kind, r.r0, r.c0,
                                                 r.rows, r.cols);
    if (r.minus) {
      const figures::FullWindow b = figures::full_window(*r.minus, r.layer, r.head, r.level, r.steps, figures::MapView::kEffective, r.r0, r.c0, r.rows, r.cols);
      for (std::size_t i = 0; i < w.values.size() && i < b.values.size(); ++i) w.values[i] -= b.values[i];
    }
    viz::HeatmapOptions o = figures::map_view_options(kind, w.values, r.log, r.log_min);
    o.row0 = w.row0;
    o.col0 = w.col0;
    o.empty = {24, 24, 28};
    out.diff_max = static_cast<float>(o.scale.vmax);
    out.scale = o.scale;
    if (w.rows > 0 && w.cols > 0)
      out.image = viz::render_heatmap(w.values.data(), w.rows, w.cols, static_cast<int>(w.cols), static_cast<int>(w.rows), o);
    out.values = w.values;
    out.request.r0 = w.row0;  // as clipped
    out.request.c0 = w.col0;
    out.request.rows = w.rows;
    out.request.cols = w.cols;
  } catch (const std::exception& e) {
    out.request = r;
    out.error = e.what();
  }
  return out;
}

}  // namespace

void MapFetcher::start(TaskManager& tasks, MapRequest r) {
  TaskOptions o;
  o.lane = kMapLane;
  const std::string name = "map of layer " + std::to_string(r.layer) + " head " + std::to_string(r.head);
  job_.start(tasks, name, [r = std::move(r)] { return fetch(r); }, o);
}

std::optional<MapResult> MapFetcher::poll(TaskManager& tasks) {
  std::optional<TaskResult<MapResult>> got = job_.take();
  if (!got) return std::nullopt;
  if (pending_) {  // a newer request supersedes this result
    MapRequest next = std::move(*pending_);
    pending_.reset();
    start(tasks, std::move(next));
    return std::nullopt;
  }
  if (!got->value) return std::nullopt;  // cancelled (shutting down): fetch() itself never throws
  return std::move(*got->value);
}

}  // namespace luka::studio
