#include "core/luka/methods/dar.h"

#include <map>
#include <mutex>

#include "core/util/error.h"
#include "core/util/npy.h"

namespace luka {

namespace {

// Mean, eigenvalues (descending) and eigenvectors (rows, same order) of rows x [T, D], in fp64.
at::Tensor principal(const at::Tensor& x) {
  const at::Tensor d = x.to(at::kDouble);
  const std::int64_t T = d.size(0), D = d.size(1);
  const at::Tensor mean = d.mean(0);
  const at::Tensor c = d - mean;
  const at::Tensor cov = at::matmul(c.transpose(0, 1), c).div_(static_cast<double>(std::max<std::int64_t>(T, 1)));
  const auto [values, vectors] = at::linalg_eigh(cov);  // ascending, vectors as columns
  at::Tensor out = at::empty({D + 2, D}, at::kDouble);
  out[0].copy_(mean);
  out[1].copy_(values.flip(0).clamp_min(0.0));
  out.narrow(0, 2, D).copy_(vectors.flip(1).transpose(0, 1));
  return out;
}

}  // namespace

at::Tensor rope_rotate(const at::Tensor& x, std::int64_t pos0, const at::Tensor& inv_freq, int sign) {
  const std::int64_t m = x.size(1), D = x.size(2);
  if (inv_freq.numel() * 2 != D) fail("dar", "RoPE frequencies for head dimension " + std::to_string(inv_freq.numel() * 2) + ", rows of " + std::to_string(D));
  const at::Tensor inv = inv_freq.to(x.device(), at::kFloat);
  const at::Tensor pos = at::arange(pos0, pos0 + m, at::TensorOptions().dtype(at::kLong).device(x.device())).to(at::kFloat);
  const at::Tensor freqs = pos.unsqueeze(1) * inv.unsqueeze(0);  // [m, D/2]
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor half = at::cat({-xf.narrow(-1, D / 2, D / 2), xf.narrow(-1, 0, D / 2)}, -1);
  return (xf * emb.cos() + half * (emb.sin() * static_cast<double>(sign))).to(x.scalar_type());
}

DarBasis DarBasis::measure(const std::vector<at::Tensor>& keys, const std::vector<at::Tensor>& values,
                           const std::vector<at::Tensor>& keys_after_rope) {
  if (keys.empty() || keys.size() != values.size() || keys.size() != keys_after_rope.size())
    fail("dar basis", "needs the keys and values of every layer");
  const std::int64_t L = static_cast<std::int64_t>(keys.size()), KV = keys[0].size(0), D = keys[0].size(2);
  at::Tensor table = at::empty({L, 3, KV, D + 2, D}, at::kFloat);
  for (std::int64_t l = 0; l < L; ++l)
    for (int part = 0; part < 3; ++part) {
      const auto& rows = part == kKeys ? keys : part == kValues ? values : keys_after_rope;
      const at::Tensor& x = rows[static_cast<std::size_t>(l)];
      if (x.dim() != 3 || x.size(0) != KV || x.size(2) != D || x.size(1) < 1)
        fail("dar basis", "layer " + std::to_string(l) + ": rows of another shape than layer 0's");
      for (std::int64_t g = 0; g < KV; ++g) table[l][part][g].copy_(principal(x[g]));
    }
  return DarBasis(std::move(table));
}

std::shared_ptr<const DarBasis> DarBasis::load(const std::filesystem::path& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const DarBasis>> loaded;
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(path, ec).string();
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = loaded.find(key); it != loaded.end())
    if (auto kept = it->second.lock()) return kept;
  NpyArray a = read_npy_f32(path);
  if (a.shape.size() != 5 || a.shape[1] != 3 || a.shape[4] < 1 || a.shape[3] != a.shape[4] + 2)
    fail("dar basis " + path.string(), "is not a basis [layers, 3, kv_heads, head_dim + 2, head_dim] (luka calibrate --dar writes one)");
  at::Tensor table = at::from_blob(a.data.data(), a.shape, at::kFloat).clone();
  if (!table.isfinite().all().item<bool>()) fail("dar basis " + path.string(), "holds values that are not finite");
  auto basis = std::shared_ptr<const DarBasis>(new DarBasis(std::move(table)));
  loaded[key] = basis;
  return basis;
}

void DarBasis::write(const std::filesystem::path& path) const {
  const at::Tensor t = table_.contiguous();
  write_npy_f32(path, t.const_data_ptr<float>(), std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()));
}

at::Tensor DarBasis::explained(std::int64_t layer, int part, std::int64_t rank) const {
  const at::Tensor ev = table_[layer][part].select(1, 1).to(at::kDouble);  // [KV, D]
  return ev.narrow(1, 0, std::min(rank, head_dim())).sum(1) / ev.sum(1).clamp_min(1e-300);
}

at::Tensor DarBasis::project(std::int64_t layer, int part, std::int64_t rank, const at::Tensor& x) const {
  const std::int64_t D = head_dim();
  if (layer < 0 || layer >= layers())
    fail("dar basis", "has " + std::to_string(layers()) + " layers, asked for layer " + std::to_string(layer));
  if (x.dim() != 3 || x.size(0) != kv_heads() || x.size(2) != D)
    fail("dar basis", "is for " + std::to_string(kv_heads()) + " KV heads of dimension " + std::to_string(D) + ", the model's layer " +
                          std::to_string(layer) + " has " + std::to_string(x.size(0)) + " of " + std::to_string(x.size(2)));
  if (rank < 1 || rank > D) fail("dar basis", "rank " + std::to_string(rank) + " is outside 1.." + std::to_string(D));
  if (part < 0 || part > 2) fail("dar basis", "has no part " + std::to_string(part));
  const at::Tensor t = table_[layer][part];               // [KV, D + 2, D]
  const at::Tensor mean = t.select(1, 0).unsqueeze(1);    // [KV, 1, D]
  const at::Tensor b = t.narrow(1, 2, rank);              // [KV, r, D]
  const at::Tensor xf = x.to(at::kFloat) - mean;
  return (at::matmul(at::matmul(xf, b.transpose(1, 2)), b) + mean).to(x.scalar_type());
}

}  // namespace luka
