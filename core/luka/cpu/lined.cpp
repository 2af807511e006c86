// Lined mode of the CPU core (docs/design.md §5.3): the recent window and the heavy hitters.
#include "core/luka/luka_attention.h"

#include <algorithm>
#include <vector>

#include <ATen/Parallel.h>

#include "core/luka/cpu/internal.h"
#include "kernels/common/luka_rules.h"
#include "kernels/cpu/vec.h"

namespace luka {

using namespace cpu_core;

// Lined (§5.3): the recent window and the heavy hitters by h2o_score (rules::lined_cover), one
// exact softmax over their union.
void LukaAttention::decode_lined(Step& s) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const LinedConfig& c = config_.lined;
  const rules::LinedCover lc = rules::lined_cover(to_rule(c), T);
  last_.window_start = lc.window_start;
  last_.heavy.assign(static_cast<std::size_t>(H), {});
  const float* h2o = h2o_.const_data_ptr<float>();
  const std::int64_t cap = h2o_.size(1);
  const auto units = selection_units(c.selection, H, G);
  // With decay 1 the previous lined step changed only its cover's scores, so each unit's set is
  // updated from it (HeavyHitterSet); after anything else (another mode, a prefill, a new config,
  // a reset) or with decay, where every score moves, it is ranked from scratch.
  const bool incremental = incremental_heavy_ && c.decay == 1.0;
  if (!incremental || heavy_tokens_ != T - 1 || heavy_sets_.size() != units.size()) {
    heavy_sets_.assign(units.size(), HeavyHitterSet{});
  }
  // One parallel region per step: each unit picks its heavy hitters, then its heads attend to
  // their cover (a fork and join per region is a large part of a lined step at these sizes).
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, static_cast<std::int64_t>(units.size()), 1, [&](std::int64_t u0, std::int64_t u1) {
      std::vector<std::int64_t> cover;
      std::vector<float> p;
      for (std::int64_t u = u0; u < u1; ++u) {
        const auto& unit = units[static_cast<std::size_t>(u)];
        std::vector<std::int64_t> heavy;
        if (incremental) {
          HeavyHitterSet::Rows rows;
          for (const std::int64_t h : unit) rows.push_back(h2o + h * cap);
          heavy = heavy_sets_[static_cast<std::size_t>(u)].select(rows, lc.select_end, lc.heavy, lc.window_start);
        } else if (unit.size() == 1) {
          heavy = select_heavy_hitters(h2o + unit[0] * cap, lc.select_end, lc.heavy);
        } else {
          std::vector<float> score(static_cast<std::size_t>(lc.select_end), 0.0f);
          for (const std::int64_t h : unit)
            for (std::int64_t t = 0; t < lc.select_end; ++t) score[t] += h2o[h * cap + t];
          heavy = select_heavy_hitters(score.data(), lc.select_end, lc.heavy);
        }
        // A pick inside the window (only when the window is the whole context) is in the cover once.
        heavy.erase(std::remove_if(heavy.begin(), heavy.end(), [&](std::int64_t t) { return t >= lc.window_start; }), heavy.end());
        cover = heavy;
        for (std::int64_t t = lc.window_start; t < T; ++t) cover.push_back(t);
        p.resize(cover.size());
        const std::int64_t n = static_cast<std::int64_t>(cover.size());
        for (const std::int64_t h : unit) {
          last_.heavy[h] = heavy;
          cpu::gather_dots(s.q + h * D, K.row(h / G, 0), K.row_stride, cover.data(), n, D, s.scale, p.data());
          softmax_inplace(p.data(), n);
          for (std::int64_t i = 0; i < n; ++i) e[h * T + cover[i]] = p[i];
          cpu::gather_axpy(p.data(), V.row(h / G, 0), V.row_stride, cover.data(), n, D, o + h * D);
        }
      }
    });
  });
  heavy_tokens_ = incremental ? T : -1;
  for (std::int64_t h = 0; h < H; ++h)
    last_.cover_size[static_cast<std::size_t>(h)] = static_cast<std::int64_t>(last_.heavy[h].size()) + (T - lc.window_start);
}

}  // namespace luka
