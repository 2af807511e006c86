#include "core/luka/dense_shadow.h"

#include <algorithm>

namespace luka {

// Dense attention on the same inputs, compared with what the mode produced (on the inputs'
// device; the results come back to the host).
void dense_shadow(const AttentionInputs& in, const at::Tensor& out, const std::vector<Page>& pages, LukaStep& step) {
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const at::TensorOptions on = in.q.options();
  const at::Tensor q = in.q.to(at::kDouble).view({H, 1, D});
  const at::Tensor k = in.k.to(at::kDouble).repeat_interleave(G, 0), v = in.v.to(at::kDouble).repeat_interleave(G, 0);
  const at::Tensor p = at::softmax(at::matmul(q, k.transpose(1, 2)).squeeze(1) * in.scale, -1);  // [H, T]
  const at::Tensor o_dense = at::matmul(p.unsqueeze(1), v).squeeze(1);                          // [H, D]
  const at::Tensor eff = step.effective.to(on.dtype(at::kDouble));
  // Exactly resolved tokens: everything for dense, the cover for lined, raw tail, raw pages and
  // refined children for clustered.
  at::Tensor exact = at::ones({H, T}, at::kBool);
  if (step.mode == AttentionMode::kLined) {
    exact = step.effective.gt(0);
  } else if (step.mode == AttentionMode::kClustered) {
    at::Tensor mask = at::zeros({H, T}, at::kBool);
    bool* m = mask.mutable_data_ptr<bool>();
    for (std::int64_t h = 0; h < H; ++h) {
      bool* mh = m + h * T;
      std::fill(mh + step.paged_end, mh + T, true);
      for (const std::int64_t page : step.refined[static_cast<std::size_t>(h)])
        pages[static_cast<std::size_t>(page)].for_each_position([&](std::int64_t t) { mh[t] = true; });
      for (const Page& page : pages)
        if (page.raw && page.start < step.paged_end) mh[page.start] = true;
    }
    exact = mask;
  }
  // KL is >= 0; where the rows agree, the fp32 effective row's rounding (its sum is 1 within
  // ~1e-7) would give values a little below 0.
  const at::Tensor kl =
      at::where(p.gt(0), p * (p.clamp_min(1e-300).log() - eff.clamp_min(1e-10).log()), at::zeros_like(p)).sum(1).clamp_min(0);
  const at::Tensor recall = (p * exact.to(on.dtype(at::kDouble))).sum(1);
  const std::int64_t kk = std::min(kFidelityTopK, T);
  const at::Tensor top_d = std::get<1>(p.topk(kk, 1)), top_e = std::get<1>(eff.topk(kk, 1));
  const at::Tensor overlap = top_d.unsqueeze(2).eq(top_e.unsqueeze(1)).any(2).to(at::kDouble).mean(1);
  const at::Tensor o = out.to(at::kDouble);
  const at::Tensor rel = (o - o_dense).norm(2, 1) / o_dense.norm(2, 1).clamp_min(1e-300);
  step.fidelity = at::stack({kl, recall, overlap, rel}, 1).to(at::kFloat).cpu();
  step.dense = p.to(at::kFloat).cpu();
}

}  // namespace luka
