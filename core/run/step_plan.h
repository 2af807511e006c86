// The plan of a static decode step (issue 44): for a model's shape, the run's maximum context
// (prompt + max new tokens) and each layer's LuKA config, every buffer the step reserves up front,
// which steps make pages (and so replay the page-creation variant of the step), which of the
// step's arguments move from one step to the next, and whether a config change needs the step
// recorded again. Plain C++ (no LibTorch): the CPU static step (core/run/static_step) allocates
// exactly these buffers, and a CUDA graph would be captured over them.
//
// The choice between a step whose moving arguments live in device memory and one whose kernel
// nodes are updated between replays (as llama.cpp's CUDA graphs do) is made here, once:
//   - positions, lengths and the token fed are device scalars, advanced by the step itself, and
//     every kernel runs a grid sized for the maximum context that exits early past the length.
//     A graph then replays unchanged; updating nodes instead would cost the host one
//     cudaGraphExecKernelNodeSetParams per attention node per step (about 5 per layer, 140 on
//     Qwen3-0.6B), the per-launch host cost the graph is there to remove.
//   - page creation is a second captured variant, not a device-side predicate in every step:
//     pages are made every `interval` steps (16 by default), and a predicate would leave a
//     layer's page kernels in the graph of every step as empty launches. Which steps make pages
//     is known on the host before the run (kernels/common/luka_rules.h's schedule depends only
//     on the context length and the step), so the host picks the variant without reading the
//     device. The count of pages each layer makes at each step goes into a device table
//     (`page_schedule`) that the step reads at its own step counter.
// Layers whose schedule depends on the tokens themselves (the delimiter segmenter, the gsc
// compressor) or on data outside the step (a DAR basis, the dense shadow's host records, the
// random compressor's draws), and modes the static step does not run (press, quest), cannot be
// planned this way: they are listed in `StepPlan::eager_layers` with the reason, and a run with
// any of them keeps the eager step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/luka/config.h"

namespace luka {

struct ModelConfig;

// What the step's buffers depend on in a model.
struct ModelShape {
  std::int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, hidden = 0, intermediate = 0, vocab = 0;
  std::int64_t dtype_bytes = 4;  // the compute dtype: 4 (fp32) or 2 (bf16, fp16)
};
ModelShape model_shape(const ModelConfig& config, std::int64_t dtype_bytes);

// The run the step is planned for: `prompt` tokens prefilled, then at most `max_new_tokens`
// decode steps. The context the step reserves is prompt + max_new_tokens positions.
struct RunLength {
  std::int64_t prompt = 0;
  std::int64_t max_new_tokens = 0;
  std::int64_t context() const { return prompt + max_new_tokens; }
};

enum class ElemKind { kCompute, kF32, kI64, kI32, kBool, kF64 };  // the compute dtype, or a fixed one

// One buffer of the step: [shape] elements of `kind`, for a layer (-1: the whole model).
struct StepBuffer {
  std::string name;
  int layer = -1;
  std::vector<std::int64_t> shape;
  ElemKind kind = ElemKind::kCompute;
  std::int64_t elem_bytes = 4;
  std::int64_t elements() const;
  std::int64_t bytes() const { return elements() * elem_bytes; }
};

// The two recorded variants of a step.
enum class StepVariant { kPlain, kPages };
const char* to_string(StepVariant variant);  // "plain", "pages"

struct StepPlan {
  ModelShape shape;
  RunLength run;
  std::int64_t context = 0;  // positions reserved: run.context()
  // Per layer: the LuKA config the plan was made for (none: plain attention, no LuKA state).
  std::vector<LayerConfig> layers;
  bool luka = false;
  std::vector<StepBuffer> buffers;
  // Per layer, the pages that exist after the prefill and at the end of the run (summary rows
  // reserved = the latter), and the decode steps (1-based) after which it makes pages with how
  // many: page_counts[l][s - 1] for step s.
  std::vector<std::int64_t> prefill_pages, max_pages;
  std::vector<std::vector<std::int64_t>> page_counts;
  // The decode steps (1-based, ascending) that replay the page variant: some layer makes pages.
  std::vector<std::int64_t> page_steps;
  // Step records for captures (plan_step's `records`): per recorded LuKA layer its effective
  // rows, and a clustered layer's α of its pages, kept through the step ("record_effective",
  // "record_alpha"; the refined pages, heavy hitters and Kascade sets are the layer's own
  // buffers). `records` says whether any layer is recorded.
  std::vector<bool> recorded;
  bool records = false;
  // Layers the static step cannot run (see the header's comment): "layer N: why".
  std::vector<std::string> eager_layers;
  // The step's arguments that change from one step to the next, all held in device buffers
  // (positions, lengths, the token, the step counter): none is a kernel-node parameter.
  std::vector<std::string> moving_arguments;

  // The variant decode step `step` (1-based) replays.
  StepVariant variant(std::int64_t step) const;
  std::int64_t total_bytes() const;
  // The buffer named `name` of `layer`; throws luka::Error when the plan has none.
  const StepBuffer& buffer(const std::string& name, int layer = -1) const;
  bool has_buffer(const std::string& name, int layer = -1) const;
  bool static_step() const { return eager_layers.empty(); }
};

// `layers`: one LayerConfig per model layer for a LuKA run, or empty for plain dense attention;
// `recorded`: per layer, whether to reserve the step records a capture reads (a LuKA run only;
// empty: none). Throws luka::Error for a layer count that is not the model's, a context beyond
// 2^31 positions (the page table is int32) or a run of no decode step.
StepPlan plan_step(const ModelShape& shape, const RunLength& run, const std::vector<LayerConfig>& layers,
                   const std::vector<bool>& recorded = {});

// What a change of the layers' configs (a --schedule entry, the Studio's live switch) costs the
// recorded step before the next replay.
enum class StepChange {
  kNone,       // the same step replays
  kRecapture,  // a kernel's fixed argument changed (mode, a parameter): record the variants again
  kReplan,     // buffers change size too (page size, a mode that needs state the plan lacks):
               // reserve again, then record
};
const char* to_string(StepChange change);  // "none", "recapture", "replan"
StepChange step_change(const StepPlan& current, const std::vector<LayerConfig>& next);

}  // namespace luka
