#include "app/figures/capture_figure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "core/util/error.h"

namespace luka::figures {

const char* to_string(MapView v) {
  switch (v) {
    case MapView::kEffective: return "effective";
    case MapView::kDense: return "dense";
    case MapView::kDifference: return "difference";
  }
  return "?";
}

MapView parse_map_view(const std::string& s) {
  if (s == "effective") return MapView::kEffective;
  if (s == "dense") return MapView::kDense;
  if (s == "difference") return MapView::kDifference;
  fail("view", "unknown view '" + s + "' (effective, dense, difference)");
}

viz::HeatmapOptions map_view_options(MapView view, const std::vector<float>& values, bool log_scale, double log_min) {
  viz::HeatmapOptions o;
  o.causal = true;
  if (view == MapView::kDifference) {
    float vmax = 0;
    for (const float v : values)
      if (!std::isnan(v)) vmax = std::max(vmax, std::abs(v));
    o.colormap = &viz::Colormap::get(viz::ColormapId::kBalance);
    o.scale.kind = viz::ColorScale::kSymmetric;
    o.scale.vmax = std::max(1e-6f, vmax);
  } else if (log_scale) {
    o.scale.kind = viz::ColorScale::kLog;
    o.scale.vmin = log_min;
  }
  return o;
}

int default_figure_level(const capture::Layout& lay, std::int64_t max_cells) {
  if (lay.levels.empty()) return 0;
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (capture::level_size(lay.prompt_tokens, *it) <= max_cells) level = *it;
  return level;
}

FullWindow full_window(const capture::CaptureView& view, int layer, int head, int level, std::int64_t steps, MapView mv,
                       std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols) {
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  if (std::find(lay.levels.begin(), lay.levels.end(), level) == lay.levels.end())
    fail("capture", "map level " + std::to_string(level) + " is not stored");
  if (steps < 0 || steps > sum.complete_steps)
    fail("capture", "step " + std::to_string(steps) + " is not in 0.." + std::to_string(sum.complete_steps));
  if (steps > 0 && !lay.rows) fail("capture", "effective rows were not recorded");
  const std::int64_t n = lay.prompt_tokens, scale = std::int64_t{1} << level;
  FullWindow w;
  w.size = (n + steps + scale - 1) / scale;
  w.row0 = std::clamp<std::int64_t>(row0, 0, w.size);
  w.col0 = std::clamp<std::int64_t>(col0, 0, w.size);
  w.rows = std::clamp<std::int64_t>(row0 + rows, 0, w.size) - w.row0;
  w.cols = std::clamp<std::int64_t>(col0 + cols, 0, w.size) - w.col0;
  if (w.rows <= 0 || w.cols <= 0) {
    w.rows = w.cols = 0;
    return w;
  }
  w.values.assign(static_cast<std::size_t>(w.rows * w.cols), 0.f);
  // Prefill queries: the stored pyramid (its level size covers the prompt only).
  const std::int64_t psize = capture::level_size(n, level);
  if (mv != MapView::kDifference && w.row0 < psize && w.col0 < psize) {
    const capture::MapWindow m = view.map_window(layer, head, level, w.row0, w.col0, w.rows, w.cols);
    for (std::int64_t r = 0; r < m.rows; ++r)
      std::copy_n(m.values.data() + r * m.cols, m.cols, w.values.data() + r * w.cols);
  }
  // Decode queries: step s is query n + s - 1 over keys [0, n + s).
  const std::int64_t first = std::max<std::int64_t>(1, w.row0 * scale - n + 1);
  const std::int64_t last = std::min<std::int64_t>(steps, (w.row0 + w.rows) * scale - n);
  for (std::int64_t s = first; s <= last; ++s) {
    const std::int64_t r = (n + s - 1) / scale - w.row0;
    std::vector<float> row;
    bool missing = false;
    if (mv == MapView::kEffective) {
      row = view.row(s, layer, head);
    } else {
      try {
        row = view.dense_row(s, layer, head);
        if (mv == MapView::kDifference) {
          const std::vector<float> eff = view.row(s, layer, head);
          for (std::size_t t = 0; t < row.size(); ++t) row[t] = eff[t] - row[t];
        }
      } catch (const Error&) {
        missing = true;  // the dense shadow was off at this step
      }
    }
    float* out = w.values.data() + r * w.cols;
    if (missing) {
      std::fill(out, out + w.cols, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(row.size()); ++t) {
      const std::int64_t c = t / scale - w.col0;
      if (c < 0 || c >= w.cols) continue;
      float& cell = out[c];
      if (std::isnan(cell)) continue;
      if (mv == MapView::kDifference ? std::abs(row[t]) > std::abs(cell) : row[t] > cell) cell = row[t];
    }
  }
  return w;
}

DecodeRows decode_rows(const capture::CaptureView& view, int layer, int head, MapView mv, std::int64_t first, std::int64_t last,
                       int pool_level, std::int64_t col0, std::int64_t cols) {
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  const std::int64_t n = lay.prompt_tokens;
  if (first < 1 || last < first || last > sum.complete_steps)
    fail("capture", "decode rows " + std::to_string(first) + ".." + std::to_string(last) + " are not in 1.." + std::to_string(sum.complete_steps));
  if (!lay.rows) fail("capture", "effective rows were not recorded");
  if (pool_level < 0 || pool_level > 30) fail("capture", "pool level " + std::to_string(pool_level) + " is out of range");
  DecodeRows d;
  d.first = first;
  d.steps = last - first + 1;
  d.pool = std::int64_t{1} << pool_level;
  d.keys = n + last;
  const std::int64_t size = (d.keys + d.pool - 1) / d.pool;
  d.col0 = std::clamp<std::int64_t>(col0, 0, size);
  d.cols = std::clamp<std::int64_t>(col0 + cols, 0, size) - d.col0;
  if (d.cols <= 0) {
    d.cols = 0;
    d.steps = 0;
    return d;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Pools a row of keys [0, row.size()) into out[cols]: NaN beyond the row, else max (or largest magnitude).
  const auto pool_into = [&](const std::vector<float>& row, float* out, bool magnitude) {
    for (std::int64_t c = 0; c < d.cols; ++c) {
      const std::int64_t k0 = (d.col0 + c) * d.pool, k1 = std::min<std::int64_t>(k0 + d.pool, static_cast<std::int64_t>(row.size()));
      if (k0 >= k1) {
        out[c] = nan;
        continue;
      }
      float v = row[static_cast<std::size_t>(k0)];
      for (std::int64_t k = k0 + 1; k < k1; ++k) {
        const float x = row[static_cast<std::size_t>(k)];
        if (magnitude ? std::abs(x) > std::abs(v) : x > v) v = x;
      }
      out[c] = v;
    }
  };
  const bool diff = mv == MapView::kDifference;
  d.prefill.assign(static_cast<std::size_t>(d.cols), 0.f);
  if (n > 0) {
    std::vector<float> last_query(static_cast<std::size_t>(n), 0.f);
    if (!diff && !lay.levels.empty()) {
      // The finest stored level: level 0 is the row itself; a coarser one gives the max over the
      // last 2^level queries, each cell repeated over its keys.
      const int lv = lay.levels.front();
      const std::int64_t sz = capture::level_size(n, lv);
      const capture::MapWindow m = view.map_window(layer, head, lv, (n - 1) >> lv, 0, 1, sz);
      for (std::int64_t k = 0; k < n; ++k)
        if (static_cast<std::size_t>(k >> lv) < m.values.size()) last_query[static_cast<std::size_t>(k)] = m.values[static_cast<std::size_t>(k >> lv)];
    }
    pool_into(last_query, d.prefill.data(), diff);
  }
  d.values.assign(static_cast<std::size_t>(d.steps * d.cols), nan);
  d.missing.assign(static_cast<std::size_t>(d.steps), 0);
  for (std::int64_t i = 0; i < d.steps; ++i) {
    const std::int64_t s = first + i;
    std::vector<float> row;
    if (mv == MapView::kEffective) {
      row = view.row(s, layer, head);
    } else {
      try {
        row = view.dense_row(s, layer, head);
      } catch (const Error&) {
        d.missing[static_cast<std::size_t>(i)] = 1;  // the dense shadow was off at this step
        continue;
      }
      if (diff) {
        const std::vector<float> eff = view.row(s, layer, head);
        for (std::size_t t = 0; t < row.size(); ++t) row[t] = eff[t] - row[t];
      }
    }
    pool_into(row, d.values.data() + i * d.cols, diff);
  }
  return d;
}

void check_comparable(const capture::CaptureView& a, const capture::CaptureView& b) {
  const std::int64_t na = a.summary().layout.prompt_tokens, nb = b.summary().layout.prompt_tokens;
  if (na != nb) fail("compare", "the captures ran different prompts (" + std::to_string(na) + " and " + std::to_string(nb) + " prompt tokens)");
  const std::vector<capture::Token> ta = a.tokens(), tb = b.tokens();
  for (std::int64_t i = 0; i < na; ++i)
    if (ta.at(static_cast<std::size_t>(i)).id != tb.at(static_cast<std::size_t>(i)).id)
      fail("compare", "the captures ran different prompts (they differ at token " + std::to_string(i) + ")");
}

void subtract(DecodeRows& a, const DecodeRows& b) {
  if (a.steps != b.steps || a.cols != b.cols || a.col0 != b.col0 || a.pool != b.pool)
    fail("compare", "decode rows of different shapes cannot be subtracted");
  for (std::size_t i = 0; i < a.values.size(); ++i) a.values[i] -= b.values[i];
  for (std::size_t i = 0; i < a.prefill.size(); ++i) a.prefill[i] -= b.prefill[i];
  for (std::size_t i = 0; i < a.missing.size(); ++i) a.missing[i] |= b.missing[i];
}

viz::HeatmapOptions decode_rows_options(MapView mv, const DecodeRows& rows, bool log_scale, double log_min) {
  viz::HeatmapOptions o;
  float vmax = 0;
  const auto scan = [&](const std::vector<float>& v) {
    for (const float x : v)
      if (!std::isnan(x)) vmax = std::max(vmax, mv == MapView::kDifference ? std::abs(x) : x);
  };
  scan(rows.values);
  if (mv != MapView::kDifference) scan(rows.prefill);  // the difference's prefill row is 0
  if (mv == MapView::kDifference) {
    o.colormap = &viz::Colormap::get(viz::ColormapId::kBalance);
    o.scale.kind = viz::ColorScale::kSymmetric;
    o.scale.vmax = std::max(1e-6f, vmax);
  } else if (log_scale) {
    o.scale.kind = viz::ColorScale::kLog;
    o.scale.vmax = std::max(1e-6, static_cast<double>(vmax));
    o.scale.vmin = std::min(log_min, o.scale.vmax / 10);
  } else {
    o.scale.vmax = std::max(1e-6, static_cast<double>(vmax));
  }
  return o;
}

namespace {

// A layer's modes over decode steps 1..steps, as a run of phrases: "lined to step 9" for one
// mode, "clustered to step 6, lined from step 7" for a switch, "... steps 4-6 ..." between two.
std::string modes_over_run(const capture::CaptureView& view, int layer, std::int64_t steps) {
  std::vector<std::pair<std::int8_t, std::int64_t>> runs;  // mode, first step
  for (std::int64_t s = 1; s <= steps; ++s) {
    const std::int8_t m = view.metrics(s, layer).mode;
    if (runs.empty() || runs.back().first != m) runs.emplace_back(m, s);
  }
  std::string out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::int64_t first = runs[i].second, last = i + 1 < runs.size() ? runs[i + 1].second - 1 : steps;
    std::string phrase = capture::mode_name(runs[i].first);
    if (i == 0) phrase += " to step " + std::to_string(last);
    else if (i + 1 == runs.size()) phrase += " from step " + std::to_string(first);
    else phrase += " steps " + std::to_string(first) + "-" + std::to_string(last);
    out += (out.empty() ? "" : ", ") + phrase;
  }
  return out;
}

}  // namespace

viz::Figure figure_from_capture(const capture::CaptureView& view, int layer, int head, int level, std::int64_t steps, bool log_scale,
                                MapView mv) {
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  capture::recorded_index(lay.layers, layer, "layer");
  capture::recorded_index(lay.heads, head, "head");
  if (lay.levels.empty()) fail("capture", "this capture has no prefill maps");
  if (mv != MapView::kEffective && steps == 0) fail("capture", std::string("the ") + to_string(mv) + " view needs decode steps (--step)");
  if (mv != MapView::kEffective) {
    bool any = false;
    const int hi = capture::recorded_index(lay.heads, head, "head");
    for (std::int64_t s = 1; s <= steps && !any; ++s) any = !std::isnan(view.metrics(s, layer).fidelity.at(static_cast<std::size_t>(hi) * 4));
    if (!any)
      fail("capture", std::string("the ") + to_string(mv) + " view needs the dense shadow's rows; this capture ran without it at layer " +
                          std::to_string(layer) + " (record with --set dense_shadow=true)");
  }
  const FullWindow w = full_window(view, layer, head, level, steps, mv, 0, 0, 1 << 30, 1 << 30);
  viz::Figure f;
  f.rows = w.rows;
  f.cols = w.cols;
  f.values = w.values;
  const std::string mode = steps > 0 ? modes_over_run(view, layer, steps) : "prefill";
  if (steps > 0) f.decode_start = lay.prompt_tokens;
  f.cell = static_cast<double>(std::int64_t{1} << level);
  f.tokens = lay.prompt_tokens + steps;
  for (const capture::Token& t : view.tokens()) f.labels.push_back(t.piece);
  for (const capture::Segment& s : view.segments()) f.bands.push_back({s.begin, s.end, s.colour, s.label});
  f.options = map_view_options(mv, f.values, log_scale);
  f.options.empty = {245, 245, 245};
  f.scale_label = mv == MapView::kDifference ? "effective - dense" : log_scale ? "attention (log10)" : "attention";
  const std::string model = std::filesystem::path(sum.manifest.model_path).filename().string();
  char title[512];
  const char* what = mv == MapView::kEffective ? "effective attention" : mv == MapView::kDense ? "dense attention (shadow)" : "effective − dense";
  std::snprintf(title, sizeof title, "%s (%s) · layer %d · head %d · %s%s · %s%s", model.c_str(), sum.manifest.architecture.c_str(),
                layer, head, mode.c_str(), "", what,
                level ? (" · max over " + std::to_string(1 << level) + "×" + std::to_string(1 << level) + " tokens").c_str() : "");
  f.title = title;
  return f;
}

viz::Figure comparison_figure(const capture::CaptureView& a, const capture::CaptureView& b, int layer, int head, int level,
                              std::int64_t steps) {
  check_comparable(a, b);
  const std::int64_t both = std::min(a.summary().complete_steps, b.summary().complete_steps);
  if (steps > both)
    fail("compare", "the captures have " + std::to_string(both) + " decode steps in common, not " + std::to_string(steps));
  capture::recorded_index(b.summary().layout.layers, layer, "layer");
  capture::recorded_index(b.summary().layout.heads, head, "head");
  viz::Figure f = figure_from_capture(a, layer, head, level, steps, /*log_scale=*/false, MapView::kEffective);
  const FullWindow wb = full_window(b, layer, head, level, steps, MapView::kEffective, 0, 0, 1 << 30, 1 << 30);
  if (wb.rows != f.rows || wb.cols != f.cols) fail("compare", "the two maps differ in shape at level " + std::to_string(level));
  for (std::size_t i = 0; i < f.values.size(); ++i) f.values[i] = wb.values[i] - f.values[i];  // NaN stays NaN
  f.options = map_view_options(MapView::kDifference, f.values, /*log_scale=*/false);
  f.options.empty = {245, 245, 245};
  f.scale_label = "B - A (effective attention)";
  const std::string model = std::filesystem::path(a.summary().manifest.model_path).filename().string();
  const std::string modes_a = steps > 0 ? modes_over_run(a, layer, steps) : "prefill";
  const std::string modes_b = steps > 0 ? modes_over_run(b, layer, steps) : "prefill";
  f.title = "B − A · " + model + " · layer " + std::to_string(layer) + " · head " + std::to_string(head) + " · A: " + modes_a +
            " · B: " + modes_b + (level ? " · each map's max over " + std::to_string(1 << level) + "×" + std::to_string(1 << level) + " tokens" : "");
  return f;
}

viz::GridFigure grid_from_capture(const capture::CaptureView& view, bool heads, int layer, int head, std::int64_t steps, bool log_scale,
                                  MapView mv) {
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  if (lay.levels.empty()) fail("capture", "this capture has no prefill maps");
  if (heads) capture::recorded_index(lay.layers, layer, "layer");
  else capture::recorded_index(lay.heads, head, "head");
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (capture::level_size(lay.prompt_tokens + steps, *it) <= 256) level = *it;
  viz::GridFigure g;
  const std::vector<int>& items = heads ? lay.heads : lay.layers;
  float vmax = 0;
  for (const int item : items) {
    viz::Figure f = figure_from_capture(view, heads ? layer : item, heads ? item : head, level, steps, log_scale, mv);
    f.title = (heads ? "head " : "layer ") + std::to_string(item);
    if (steps && !heads) f.title += " · " + modes_over_run(view, item, steps);
    vmax = std::max(vmax, static_cast<float>(f.options.scale.vmax));
    g.panels.push_back(std::move(f));
  }
  if (mv == MapView::kDifference)  // one symmetric scale for all panels
    for (viz::Figure& f : g.panels) f.options.scale.vmax = vmax;
  g.columns = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(items.size()))));
  g.scale_label = g.panels.front().scale_label;
  const std::string model = std::filesystem::path(sum.manifest.model_path).filename().string();
  const char* what = mv == MapView::kEffective ? "effective attention" : mv == MapView::kDense ? "dense attention (shadow)" : "effective − dense";
  g.title = model + " (" + sum.manifest.architecture + ") · " + (heads ? "layer " + std::to_string(layer) + " · every head" : "head " + std::to_string(head) + " · every layer") +
            (steps && heads   ? " · " + modes_over_run(view, layer, steps)
             : steps          ? " · to step " + std::to_string(steps)
                              : "") +
            " · " + what;
  return g;
}

}  // namespace luka::figures
