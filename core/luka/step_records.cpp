#include "core/luka/step_records.h"

#include <algorithm>

#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

LukaStep step_from_records(const LayerConfig& config, std::int64_t step, std::int64_t T, const std::vector<Page>& pages,
                           const StepRecords& r) {
  LukaStep s;
  s.mode = config.mode;
  s.step = step;
  s.tokens = T;
  const std::int64_t P = static_cast<std::int64_t>(pages.size());
  s.paged_end = pages.empty() ? 0 : pages.back().end;
  s.effective = r.effective.to(at::kCPU, at::kFloat).contiguous();
  const std::int64_t H = s.effective.size(0);
  s.cover_size.assign(static_cast<std::size_t>(H), T);
  if (config.mode == AttentionMode::kClustered) {
    s.summary_mass = r.summary_mass.to(at::kCPU, at::kFloat).narrow(1, 0, P).contiguous();
    const at::Tensor ref = r.refined.to(at::kCPU, at::kInt).contiguous(), count = r.refined_count.to(at::kCPU, at::kInt).contiguous();
    s.refined.assign(static_cast<std::size_t>(H), {});
    for (std::int64_t h = 0; h < H; ++h) {
      auto& picked = s.refined[static_cast<std::size_t>(h)];
      const int* row = ref.const_data_ptr<int>() + h * ref.size(1);
      for (int i = 0; i < count.const_data_ptr<int>()[h]; ++i) picked.push_back(row[i]);
      std::sort(picked.begin(), picked.end());
      std::int64_t children = 0;
      for (const std::int64_t p : picked) children += pages[static_cast<std::size_t>(p)].size();
      s.cover_size[static_cast<std::size_t>(h)] = P - static_cast<std::int64_t>(picked.size()) + children + (T - s.paged_end);
    }
  } else if (config.mode == AttentionMode::kLined) {
    const rules::LinedCover lc = rules::lined_cover(to_rule(config.lined), T);
    s.window_start = lc.window_start;
    const at::Tensor hv = r.heavy.to(at::kCPU, at::kInt).contiguous();
    const std::int64_t m = hv.defined() && hv.dim() == 2 ? hv.size(1) : 0;
    s.heavy.assign(static_cast<std::size_t>(H), {});
    for (std::int64_t h = 0; h < H; ++h) {
      auto& picked = s.heavy[static_cast<std::size_t>(h)];
      for (std::int64_t i = 0; i < m; ++i) {
        const int t = hv.const_data_ptr<int>()[h * m + i];
        if (t >= 0 && t < lc.window_start) picked.push_back(t);  // a pick inside the window is in the cover once
      }
      std::sort(picked.begin(), picked.end());
      s.cover_size[static_cast<std::size_t>(h)] = static_cast<std::int64_t>(picked.size()) + (T - lc.window_start);
    }
  }
  return s;
}

StepRecords records_from_step(const LukaStep& s, std::int64_t P) {
  StepRecords r;
  r.effective = s.effective;
  const std::int64_t H = s.effective.size(0);
  if (s.mode == AttentionMode::kClustered) {
    r.summary_mass = s.summary_mass.defined() ? s.summary_mass : at::zeros({H, P}, at::kFloat);
    std::int64_t width = 1;
    for (const auto& picked : s.refined) width = std::max<std::int64_t>(width, static_cast<std::int64_t>(picked.size()));
    r.refined = at::full({H, width}, -1, at::kInt);
    r.refined_count = at::zeros({H}, at::kInt);
    for (std::int64_t h = 0; h < H; ++h) {
      const auto& picked = s.refined[static_cast<std::size_t>(h)];
      r.refined_count[h] = static_cast<int>(picked.size());
      // The kernels write picks in their own order: reversed here, so the reader must sort.
      for (std::size_t i = 0; i < picked.size(); ++i) r.refined[h][static_cast<std::int64_t>(i)] = static_cast<int>(picked[picked.size() - 1 - i]);
    }
  } else if (s.mode == AttentionMode::kLined) {
    std::int64_t m = 0;
    for (const auto& picked : s.heavy) m = std::max<std::int64_t>(m, static_cast<std::int64_t>(picked.size()));
    r.heavy = at::full({H, m}, -1, at::kInt);
    for (std::int64_t h = 0; h < H; ++h) {
      const auto& picked = s.heavy[static_cast<std::size_t>(h)];
      for (std::size_t i = 0; i < picked.size(); ++i) r.heavy[h][static_cast<std::int64_t>(i)] = static_cast<int>(picked[picked.size() - 1 - i]);
    }
  }
  return r;
}

LukaStep PendingStep::take() {
  if (!armed_) fail("step records", "no step records pending");
  armed_ = false;
  if (wait_) wait_();
  LukaStep s = step_from_records(config_, step_, tokens_, pages_, records_);
  s.seconds = seconds_;
  records_ = StepRecords{};
  wait_ = nullptr;
  return s;
}

}  // namespace luka
