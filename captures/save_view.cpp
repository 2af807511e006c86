#include "captures/save_view.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <system_error>

#include "core/util/half.h"
#include "captures/writer.h"
#include "core/util/error.h"

namespace luka::capture {
namespace {

// One recorded layer at one step, read through the view: the record CaptureWriter::step takes.
LayerStep read_layer_step(const CaptureView& view, const Layout& layout, std::int64_t step, int layer) {
  const StepMetrics m = view.metrics(step, layer);
  LayerStep ls;
  ls.mode = m.mode;
  ls.paged_end = m.paged_end;
  ls.seconds = m.seconds;
  ls.cover_size = m.cover_size;
  ls.fidelity = m.fidelity;
  ls.kascade_source = m.kascade_source;
  ls.kascade_head = m.kascade_head;
  // The dense shadow ran at this step where some head's fidelity is a number (its rows are
  // written only then; other steps' dense rows read as 0).
  const bool shadow = std::any_of(m.fidelity.begin(), m.fidelity.end(), [](float f) { return !std::isnan(f); });
  const auto append_halves = [](std::vector<std::uint16_t>& out, const std::vector<float>& row) {
    const std::size_t at = out.size();
    out.resize(at + row.size());
    floats_to_halves(row.data(), out.data() + at, row.size());
  };
  for (const int head : layout.heads) {
    if (layout.rows) {
      append_halves(ls.effective, view.row(step, layer, head));
      if (shadow) append_halves(ls.dense, view.dense_row(step, layer, head));
    }
    if (layout.covers) {
      const auto cover = view.cover(step, layer, head);
      ls.cover.insert(ls.cover.end(), cover.begin(), cover.end());
      const auto states = view.page_states(step, layer, head);
      ls.page_state.insert(ls.page_state.end(), states.begin(), states.end());
      append_halves(ls.summary_mass, view.summary_mass(step, layer, head));
    }
  }
  return ls;
}

// Bands of one stored pyramid level, as the recorder emits them: whole chunk rows, each holding
// the columns up to its last non-zero one (the rest reads as 0, the chunks right of the diagonal
// are never written).
template <class Check>
void write_level(const CaptureView& view, const Layout& layout, int layer_index, int level, CaptureWriter& writer, Check&& check,
                 const std::function<void(std::int64_t)>& done_rows) {
  const int layer = layout.layers[static_cast<std::size_t>(layer_index)];
  const std::int64_t S = level_size(layout.prompt_tokens, level);
  const std::int64_t c = map_chunk(layout, layer_index, level);
  const std::size_t H = layout.heads.size();
  std::vector<std::uint16_t> band;
  for (std::int64_t row0 = 0; row0 < S; row0 += c) {
    check();
    const std::int64_t rows = std::min(c, S - row0);
    band.assign(H * static_cast<std::size_t>(rows * S), 0);
    for (std::size_t h = 0; h < H; ++h) {
      const MapWindow w = view.map_window(layer, layout.heads[h], level, row0, 0, rows, S);
      if (w.rows != rows || w.cols != S) fail("capture", "the map of layer " + std::to_string(layer) + " level " + std::to_string(level) + " is short");
      floats_to_halves(w.values.data(), band.data() + h * static_cast<std::size_t>(rows * S), w.values.size());
    }
    // Any set bit counts (a negative zero included), so what is left out reads back identical.
    std::int64_t cols = 0;
    for (std::size_t h = 0; h < H; ++h)
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::uint16_t* row = band.data() + (h * static_cast<std::size_t>(rows) + static_cast<std::size_t>(r)) * static_cast<std::size_t>(S);
        for (std::int64_t j = S; j > cols; --j)
          if (row[j - 1] != 0) {
            cols = j;
            break;
          }
      }
    if (cols > 0) {
      MapRows mr;
      mr.layer = layer;
      mr.level = level;
      mr.row0 = row0;
      mr.rows = rows;
      mr.cols = cols;
      mr.data.resize(H * static_cast<std::size_t>(rows * cols));
      for (std::size_t h = 0; h < H; ++h)
        for (std::int64_t r = 0; r < rows; ++r)
          std::copy_n(band.data() + (h * static_cast<std::size_t>(rows) + static_cast<std::size_t>(r)) * static_cast<std::size_t>(S), cols,
                      mr.data.data() + (h * static_cast<std::size_t>(rows) + static_cast<std::size_t>(r)) * static_cast<std::size_t>(cols));
      writer.map_rows(mr, nullptr);
    }
    done_rows(rows);
  }
}

}  // namespace

SaveResult save_view(const CaptureView& view, const std::filesystem::path& path, const SaveOptions& options) {
  const std::string name = path.string();
  if (path.empty()) fail("save capture", "no file name given");
  const auto check = [&] {
    if (options.cancel && options.cancel->load()) fail(name, "save cancelled");
  };
  // One snapshot of the counters: a run still going adds steps and tokens after it, which are
  // left out, so that the file is consistent.
  const Summary sum = view.summary();
  Layout layout = sum.layout;
  const std::int64_t steps = sum.complete_steps;
  std::vector<Token> tokens = view.tokens();
  if (static_cast<std::int64_t>(tokens.size()) < sum.num_tokens || static_cast<std::int64_t>(tokens.size()) < layout.prompt_tokens)
    fail(name, "the capture to save lists fewer tokens than its summary");
  tokens.resize(static_cast<std::size_t>(sum.num_tokens));
  // Step rows are chunked by the run's length; a file read back does not store it.
  if (layout.max_tokens <= 0) layout.max_tokens = sum.num_tokens;

  // Work, in bytes roughly: map levels, then steps.
  const std::size_t H = layout.heads.size(), L = layout.layers.size();
  double total = 0, done = 0;
  for (const int level : layout.levels) {
    const double s = static_cast<double>(level_size(layout.prompt_tokens, level));
    total += static_cast<double>(L * H) * s * s;
  }
  const std::int64_t prompt = layout.prompt_tokens;
  for (std::int64_t s = 1; s <= steps; ++s) total += 3.0 * static_cast<double>(L * H) * static_cast<double>(prompt + s);
  const auto advance = [&](double units) {
    done += units;
    if (options.progress && total > 0) options.progress(std::min(1.0, done / total));
  };

  auto writer = std::make_unique<CaptureWriter>(path);
  try {
    check();
    const std::vector<Token> prompt_tokens(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(prompt));
    writer->begin(sum.manifest, layout, prompt_tokens, view.segments());
    for (std::size_t i = 0; i < L; ++i)
      for (const int level : layout.levels) {
        const double row_units = static_cast<double>(H) * static_cast<double>(level_size(prompt, level));
        write_level(view, layout, static_cast<int>(i), level, *writer, check,
                    [&](std::int64_t rows) { advance(row_units * static_cast<double>(rows)); });
      }
    writer->end_prefill();

    // Pages go with the first step at which they exist (created_step < step), in the view's order;
    // pages of steps after the snapshot (a run that went on) are left out with those steps.
    std::vector<std::vector<PageInfo>> pages(L);
    std::vector<std::size_t> next_page(L, 0);
    for (std::size_t i = 0; i < L; ++i) pages[i] = view.pages(layout.layers[i]);
    std::size_t next_token = static_cast<std::size_t>(prompt);
    for (std::int64_t s = 1; s <= steps; ++s) {
      check();
      Step st;
      st.step = s;
      st.tokens = L ? view.metrics(s, layout.layers[0]).tokens : prompt + s;
      // The step's query token: the s-th generated one.
      if (next_token < tokens.size()) st.new_tokens.push_back(tokens[next_token++]);
      st.layers.reserve(L);
      for (std::size_t i = 0; i < L; ++i) {
        LayerStep ls = read_layer_step(view, layout, s, layout.layers[i]);
        auto& ps = pages[i];
        while (next_page[i] < ps.size() && ps[next_page[i]].created_step < s) ls.new_pages.push_back(ps[next_page[i]++]);
        st.layers.push_back(std::move(ls));
      }
      writer->step(st, nullptr);
      advance(3.0 * static_cast<double>(L * H) * static_cast<double>(prompt + s));
    }
    writer->finish(std::vector<Token>(tokens.begin() + static_cast<std::ptrdiff_t>(next_token), tokens.end()));
  } catch (...) {
    // Nothing half-written stays behind: the target keeps what it had.
    const bool created = writer->created_partial();
    const std::filesystem::path partial = writer->partial_path();
    writer.reset();
    std::error_code ec;
    if (created) std::filesystem::remove(partial, ec);
    throw;
  }
  SaveResult r;
  r.steps = steps;
  r.tokens = static_cast<std::int64_t>(tokens.size());
  std::error_code ec;
  r.bytes = std::filesystem::file_size(path, ec);
  if (ec) r.bytes = 0;
  if (options.progress) options.progress(1.0);
  return r;
}

}  // namespace luka::capture
