// Quest as a decode-time mode of the CPU core (Tang et al., ICML 2024; core/press/quest.h,
// docs/methods.md): the raw cache cut into pages of quest_page_size positions, each bounded by the
// per-channel minimum and maximum of its keys; at every decode step each query head attends
// exactly to the quest_pages pages of highest upper bound and to the last quest_window positions.
// Unselected pages are left out of the softmax, not summarized (the difference from the clustered
// mode). The attended positions are the step's cover (LukaStep::selected), as in press mode, so
// captures and the map's overlays show what Quest read.
//
// The bounds of full pages never change (the raw cache keeps every token), so they are kept between
// steps and only the pages completed since the last step are bounded; the last, partial page is
// bounded afresh each step. Switching to quest mid-run bounds the pages completed meanwhile.
#include <string>

#include "core/luka/luka_attention.h"
#include "core/press/quest.h"
#include "core/util/error.h"

namespace luka {

void LukaAttention::decode_quest(Step& s) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), KV = in.k.size(0);
  const QuestConfig& c = config_.quest;
  const std::int64_t S = c.page_size, full = (T / S) * S;
  const std::string where = "luka layer " + std::to_string(layer_) + ": quest";
  // Kept bounds are stale after a new page size, another cache layout or a new sequence.
  if (quest_page_size_ != S || !quest_min_.defined() || quest_min_.size(0) != KV || quest_min_.size(2) != D ||
      quest_paged_ > full) {
    quest_min_ = at::empty({KV, 0, D}, at::kFloat);
    quest_max_ = at::empty({KV, 0, D}, at::kFloat);
    quest_paged_ = 0;
    quest_page_size_ = S;
  }
  press::QuestPages pages;
  try {
    if (full > quest_paged_) {
      const press::QuestPages more = press::quest_pages(in.k.narrow(1, quest_paged_, full - quest_paged_), S);
      quest_min_ = at::cat({quest_min_, more.min}, 1);
      quest_max_ = at::cat({quest_max_, more.max}, 1);
      quest_paged_ = full;
    }
    pages.page_size = S;
    pages.tokens = T;
    pages.min = quest_min_;
    pages.max = quest_max_;
    if (T > full) {
      const press::QuestPages last = press::quest_pages(in.k.narrow(1, full, T - full), S);
      pages.min = at::cat({quest_min_, last.min}, 1);
      pages.max = at::cat({quest_max_, last.max}, 1);
    }
    last_.selected = press::quest_select(pages, in.q.reshape({H, D}), c.pages, c.window);
  } catch (const Error& e) {
    fail(where, e.what());
  }
  std::vector<const std::vector<std::int64_t>*> per_head(static_cast<std::size_t>(H));
  for (std::int64_t h = 0; h < H; ++h) {
    per_head[static_cast<std::size_t>(h)] = &last_.selected[static_cast<std::size_t>(h)];
    const auto& set = last_.selected[static_cast<std::size_t>(h)];
    last_.cover_size[static_cast<std::size_t>(h)] = static_cast<std::int64_t>(set.size());
  }
  attend_sets(s, per_head, false);
}

}  // namespace luka
