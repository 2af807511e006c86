// The distance-adaptive-dimension probe (DarConfig in config.h, docs/methods.md): the basis it
// projects onto and the projection itself.
//
// The basis of a model: per layer, for its keys before RoPE, its values and its keys after RoPE (as
// the cache holds them), per KV head, the mean and the principal directions of a dense prefill's
// rows. One float32 .npy of shape [layers, 3, kv_heads, head_dim + 2, head_dim]: for layer l, part
// p (kKeys, kValues, kKeysAfterRope) and KV head g, row 0 is the mean, row 1 the covariance's
// eigenvalues in descending order, and rows 2 .. head_dim + 1 the unit eigenvectors in that order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace luka {

// RoPE applied to rows x [kv_heads, m, head_dim] at positions pos0 .. pos0+m-1 (sign +1), or
// undone (sign −1), in fp32 as transformers computes the angles (rotate_half pairs); x's dtype.
at::Tensor rope_rotate(const at::Tensor& x, std::int64_t pos0, const at::Tensor& inv_freq, int sign);

class DarBasis {
 public:
  enum Part { kKeys = 0, kValues = 1, kKeysAfterRope = 2 };
  // From per-layer rows [kv_heads, tokens, head_dim] (any float dtype; fp64 inside): the keys
  // before RoPE, the values and the keys after RoPE.
  static DarBasis measure(const std::vector<at::Tensor>& keys, const std::vector<at::Tensor>& values,
                          const std::vector<at::Tensor>& keys_after_rope);
  // Reads a basis file; files already read are shared (the layers of a model read one file).
  // Throws luka::Error naming the path for a missing or malformed file.
  static std::shared_ptr<const DarBasis> load(const std::filesystem::path& path);
  void write(const std::filesystem::path& path) const;

  std::int64_t layers() const { return table_.size(0); }
  std::int64_t kv_heads() const { return table_.size(2); }
  std::int64_t head_dim() const { return table_.size(4); }
  const at::Tensor& table() const { return table_; }  // [layers, 2, kv_heads, head_dim + 2, head_dim] fp32
  // The fraction of the variance the first `rank` directions hold, per KV head: [kv_heads] fp64.
  at::Tensor explained(std::int64_t layer, int part, std::int64_t rank) const;

  // x [kv_heads, m, head_dim] projected onto the first `rank` directions of `part` of `layer`: mean + ((x − mean) Bᵀ) B, computed in fp32, returned in x's dtype. Throws
  // luka::Error when the layer, head count or dimension do not match.
  at::Tensor project(std::int64_t layer, int part, std::int64_t rank, const at::Tensor& x) const;

 private:
  explicit DarBasis(at::Tensor table) : table_(std::move(table)) {}
  at::Tensor table_;
};

}  // namespace luka
