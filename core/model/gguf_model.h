// Models stored as GGUF: the metadata mapped onto a ModelConfig (gguf_config.h), and the tensors
// (blk.N.attn_q.weight, ...) dequantized into the compute dtype — one decoder for both formats.
#pragma once

#include <memory>

#include "core/gguf/gguf.h"
#include "core/model/config.h"
#include "core/model/dtype.h"
#include "core/model/gguf_config.h"
#include "core/model/weights.h"

namespace luka {

// Checks every tensor's shape against `config`. F32 (and BF16 in bf16) tensors stay in the
// mapping; everything else is dequantized (ggml's reference arithmetic) and converted. llama
// files store q/k rows permuted for llama.cpp's interleaved RoPE; they are permuted back to the
// rotate-half layout of Hugging Face. With WeightFormat::kQuantized the linear layers (and the
// lm_head) whose type quant_gemv reads are also kept as their blocks: in place in the mapping,
// or with their rows reordered the same way for llama's q/k.
LoadedWeights load_gguf_weights(std::shared_ptr<const gguf::File> file, const ModelConfig& config, DType dtype,
                                WeightFormat format = WeightFormat::kDequantized);

}  // namespace luka
