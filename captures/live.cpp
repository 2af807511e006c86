#include "captures/live.h"

#include <algorithm>

#include "captures/half.h"
#include "core/util/error.h"

namespace luka::capture {

void LiveCapture::begin(const Manifest& manifest, const Layout& layout, const std::vector<Token>& prompt,
                        const std::vector<Segment>& segments) {
  std::lock_guard<std::mutex> lock(mu_);
  summary_ = Summary{};
  summary_.manifest = manifest;
  summary_.layout = layout;
  summary_.num_tokens = static_cast<std::int64_t>(prompt.size());
  tokens_ = prompt;
  segments_ = segments;
  maps_.clear();
  steps_.clear();
  pages_.assign(layout.layers.size(), {});
}

void LiveCapture::map_rows(const MapRows& r) {
  std::lock_guard<std::mutex> lock(mu_);
  const int i = recorded_index(summary_.layout.layers, r.layer, "layer");
  const std::int64_t S = level_size(summary_.layout.prompt_tokens, r.level);
  const std::int64_t H = static_cast<std::int64_t>(summary_.layout.heads.size());
  auto& m = maps_[{i, r.level}];
  if (m.empty()) m.assign(static_cast<std::size_t>(H * S * S), 0);
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t row = 0; row < r.rows; ++row)
      std::copy_n(r.data.data() + (h * r.rows + row) * r.cols, r.cols, m.data() + (h * S + r.row0 + row) * S);
}

void LiveCapture::step(const Step& s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < s.layers.size() && i < pages_.size(); ++i)
    pages_[i].insert(pages_[i].end(), s.layers[i].new_pages.begin(), s.layers[i].new_pages.end());
  steps_.push_back(s);
  tokens_.insert(tokens_.end(), s.new_tokens.begin(), s.new_tokens.end());
  summary_.complete_steps = static_cast<std::int64_t>(steps_.size());
  summary_.num_tokens = static_cast<std::int64_t>(tokens_.size());
}

void LiveCapture::finish(const std::vector<Token>& trailing) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_.insert(tokens_.end(), trailing.begin(), trailing.end());
  summary_.num_tokens = static_cast<std::int64_t>(tokens_.size());
  summary_.finished = true;
}

Summary LiveCapture::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return summary_;
}

std::vector<Token> LiveCapture::tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

std::vector<Segment> LiveCapture::segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segments_;
}

const std::vector<std::uint16_t>& LiveCapture::level_map(int layer_index, int level) const {
  static const std::vector<std::uint16_t> empty;
  const auto it = maps_.find({layer_index, level});
  return it == maps_.end() ? empty : it->second;
}

MapWindow LiveCapture::map_window(int layer, int head, int level, std::int64_t row0, std::int64_t col0, std::int64_t rows,
                                  std::int64_t cols) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int li = recorded_index(summary_.layout.layers, layer, "layer");
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (std::find(summary_.layout.levels.begin(), summary_.layout.levels.end(), level) == summary_.layout.levels.end())
    fail("capture", "map level " + std::to_string(level) + " is not stored");
  const std::int64_t S = level_size(summary_.layout.prompt_tokens, level);
  MapWindow w;
  w.row0 = std::clamp<std::int64_t>(row0, 0, S);
  w.col0 = std::clamp<std::int64_t>(col0, 0, S);
  w.rows = std::max<std::int64_t>(0, std::clamp<std::int64_t>(row0 + rows, 0, S) - w.row0);
  w.cols = std::max<std::int64_t>(0, std::clamp<std::int64_t>(col0 + cols, 0, S) - w.col0);
  if (w.rows == 0 || w.cols == 0) {
    w.rows = w.cols = 0;
    return w;
  }
  w.values.assign(static_cast<std::size_t>(w.rows * w.cols), 0.f);
  const auto& m = level_map(li, level);
  if (m.empty()) return w;  // not streamed in yet
  for (std::int64_t r = 0; r < w.rows; ++r)
    halves_to_floats(m.data() + (hi * S + w.row0 + r) * S + w.col0, w.values.data() + r * w.cols, static_cast<std::size_t>(w.cols));
  return w;
}

const Step& LiveCapture::step_at(std::int64_t step) const {
  if (step < 1 || step > static_cast<std::int64_t>(steps_.size()))
    fail("capture", "decode step " + std::to_string(step) + " is not in the capture (it has " +
                        std::to_string(steps_.size()) + " complete steps)");
  return steps_[static_cast<std::size_t>(step - 1)];
}

namespace {

// Head `i`'s slice of a [heads][n] array, n = size / heads.
template <class T>
std::vector<T> head_slice(const std::vector<T>& v, int i, std::size_t heads) {
  const std::size_t n = v.size() / heads;
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(i * n), v.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
}

std::vector<float> head_floats(const std::vector<std::uint16_t>& v, int i, std::size_t heads) {
  const std::size_t n = v.size() / heads;
  std::vector<float> out(n);
  halves_to_floats(v.data() + i * n, out.data(), n);
  return out;
}

}  // namespace

const LayerStep& LiveCapture::layer_step(std::int64_t step, int layer) const {
  return step_at(step).layers[static_cast<std::size_t>(recorded_index(summary_.layout.layers, layer, "layer"))];
}

std::vector<float> LiveCapture::row(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.rows) fail("capture", "effective rows were not recorded");
  return head_floats(ls.effective, hi, summary_.layout.heads.size());
}

std::vector<float> LiveCapture::dense_row(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (ls.dense.empty())
    fail("capture", "no dense attention at step " + std::to_string(step) + " of layer " + std::to_string(layer) + " (the dense shadow was off)");
  return head_floats(ls.dense, hi, summary_.layout.heads.size());
}

std::vector<std::uint8_t> LiveCapture::cover(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail("capture", "covers were not recorded");
  return head_slice(ls.cover, hi, summary_.layout.heads.size());
}

std::vector<std::uint8_t> LiveCapture::page_states(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail("capture", "covers were not recorded");
  return head_slice(ls.page_state, hi, summary_.layout.heads.size());
}

std::vector<float> LiveCapture::summary_mass(std::int64_t step, int layer, int head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  const int hi = recorded_index(summary_.layout.heads, head, "head");
  if (!summary_.layout.covers) fail("capture", "covers were not recorded");
  return head_floats(ls.summary_mass, hi, summary_.layout.heads.size());
}

std::vector<PageInfo> LiveCapture::pages(int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pages_[recorded_index(summary_.layout.layers, layer, "layer")];
}

StepMetrics LiveCapture::metrics(std::int64_t step, int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const LayerStep& ls = layer_step(step, layer);
  return StepMetrics{ls.mode, step_at(step).tokens, ls.paged_end, ls.seconds, ls.cover_size, ls.fidelity};
}

}  // namespace luka::capture
