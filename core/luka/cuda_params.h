// LayerConfig → the GPU kernels' LayerParams (kernels/cuda/luka_layer.h). Only built with CUDA.
// The CPU-only experiment switches (oracle summary logits, lined sparse prefill, the authors' variants other than their page schedule) have no GPU counterpart;
// to_cuda_params names the first one set.
#pragma once

#include <string>

#include "core/luka/config.h"
#include "kernels/cuda/luka_layer.h"

namespace luka {

inline cuda::Share to_cuda(Selection s) {
  return s == Selection::kPerHead ? cuda::Share::kHead : s == Selection::kPerGroup ? cuda::Share::kGroup : cuda::Share::kLayer;
}

// Fills *out; returns "" or what the GPU path does not offer for this layer.
inline std::string to_cuda_params(const LayerConfig& c, cuda::LayerParams* out) {
  cuda::LayerParams p;
  p.mode = c.mode == AttentionMode::kDense ? cuda::Mode::kDense
           : c.mode == AttentionMode::kLined ? cuda::Mode::kLined
                                             : cuda::Mode::kClustered;
  p.window = c.lined.window;
  p.window_frac = c.lined.window_frac;
  p.rho = c.lined.rho;
  p.lined_share = to_cuda(c.lined.selection);
  p.decay = static_cast<float>(c.lined.decay);
  const ClusteredConfig& k = c.clustered;
  p.page_size = k.page_size;
  p.tail = k.tail;
  p.interval = k.interval;
  p.max_pages = k.max_pages;
  p.authors_schedule = k.schedule == PageSchedule::kAuthors;
  p.page_counter_start = k.page_counter_start;
  p.page_bypass = k.page_bypass;
  p.compressor = k.compressor == Compressor::kMean                ? cuda::Compressor::kMean
                 : k.compressor == Compressor::kAttentionWeighted ? cuda::Compressor::kAttentionWeighted
                                                                  : cuda::Compressor::kRandom;  // gsc refused below
  p.tau = static_cast<float>(k.tau);
  p.seed = k.seed;
  p.zero_v = k.zero_v;
  p.bias = k.bias == SummaryBias::kNone    ? cuda::SummaryBias::kNone
           : k.bias == SummaryBias::kFixed ? cuda::SummaryBias::kFixed
                                           : cuda::SummaryBias::kAdaptive;
  p.rule = k.rule == RefineRule::kThreshold ? cuda::Rule::kThreshold
           : k.rule == RefineRule::kTopK    ? cuda::Rule::kTopK
           : k.rule == RefineRule::kTopFrac ? cuda::Rule::kTopFrac
                                            : cuda::Rule::kTopP;
  p.epsilon = k.epsilon;
  p.top_k = static_cast<int>(k.top_k);
  p.top_frac = k.top_frac;
  p.top_p = k.top_p;
  p.always_refine_first = static_cast<int>(k.always_refine_first);
  p.share = to_cuda(k.selection);
  p.math = k.math == RefineMath::kExact ? cuda::Math::kExact : cuda::Math::kMassPreserving;
  *out = p;
  if (c.mode == AttentionMode::kKascade) return "mode kascade runs on the CPU path only";
  if (c.dar.window > 0) return "the dar probe runs on the CPU path only";
  if (c.mode == AttentionMode::kClustered && k.segmenter != Segmenter::kFixed) return "segmenter=delimiter runs on the CPU path only";
  if (c.mode == AttentionMode::kClustered && k.compressor == Compressor::kGsc) return "compressor=gsc runs on the CPU path only";
  if (c.mode == AttentionMode::kLined && c.lined.sparse_prefill) return "lined sparse_prefill runs on the CPU path only";
  if (k.page_size > cuda::kMaxPageTokens) return "pages above 1024 tokens run on the CPU path only";
  // The authors' variants (DESIGN.md §5.6) that change what the kernels compute.
  if (c.importance_source != ImportanceSource::kEffective) return "importance_source=cover runs on the CPU path only";
  if (k.bias == SummaryBias::kAdaptive && k.bias_entropy != BiasEntropy::kWeights)
    return "bias_entropy=importance_mean runs on the CPU path only";
  if (k.refine_on != RefineOn::kBiased && k.bias != SummaryBias::kNone) return "refine_on=unbiased runs on the CPU path only";
  if (k.page_rank != PageRank::kMax && (k.rule == RefineRule::kTopFrac || k.rule == RefineRule::kTopP))
    return "page_rank=sum runs on the CPU path only";
  if (c.lined.rounding != BudgetRounding::kCeil) return "lined_rounding=floor runs on the CPU path only";
  if (c.lined.heavy_late) return "heavy_late runs on the CPU path only";
  return {};
}

}  // namespace luka
