// The static decode step (issue 44): one decode step written so that it can be recorded once and
// replayed, on the device the weights are on. Every buffer is reserved up front from the step's
// plan (core/run/step_plan.h) for the run's maximum context; the token fed, its position and the
// step counter are tensors the step itself advances (the greedy argmax is written into `token`,
// and `ids` keeps every chosen id), and every op writes into a reserved buffer (ATen's out=
// variants), with attention over all reserved keys and the keys past the length masked to -inf.
// So a step reads nothing back to the host and, after the first, allocates nothing: on the CPU a
// test counts the allocations through c10's CPU allocator; on a GPU the same ops are what a CUDA
// graph would record.
//
// LuKA layers in dense, lined, clustered and Kascade mode run here too (the last three through
// core/run/static_luka.h: heavy hitters, refined pages and Kascade sets chosen by top-k over unique
// keys, the cover as a mask over every reserved key and page, the lined budget and the Kascade k
// per step from tables the step counter indexes, the page count and paged end as device scalars):
// their accumulators (importance, h2o_score) are updated from the step's effective rows, and after
// the steps the plan's schedule names, their pages are made at offsets read on the device (the
// page variant). So plain, dense, lined, clustered, mixed and Kascade runs allocate nothing after
// the first step. Any other layer (press, quest, or a config whose pages the step cannot make: the
// delimiter segmenter, gsc or random compressors, DAR, the dense shadow) runs through its own
// LayerAttention on views of the reserved cache, as Decoder::decode runs it: the same results, but
// that layer's code allocates and needs the length on the host (kept beside the device scalars).
//
// The per-layer ops (norms, projections, q/k norm + RoPE + KV append, SwiGLU) run through the
// seam of core/run/step_kernels.h: by default its ATen ops on CPU tensors; given another kind
// (the fused ops' CPU twins, or the fused CUDA kernels on a GPU), the same step runs those, so the
// code a CUDA graph records is the code the CPU tests run.
//
// Captures: when a LuKA layer the step runs was asked for step records (set_step_records, as the
// capture recorder asks), the plan keeps each such layer's effective rows (and a clustered
// layer's α of its pages) through the step, beside its refined pages and heavy hitters, and
// publish_records() turns them into the LukaStep core/luka records, with the layer's pages, and
// hands them to the layer: a capture reads a static or recorded run as it reads an eager one. The step's own work is the same; the
// records add a copy of the effective rows per layer on the device and their read after the step.
//
// The step starts from a decoder that has prefilled the prompt: start() copies its caches. The
// decoder's LuKA layers (shared with it) then advance with the static step, and the decoder itself
// does not: reset it before its next use.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device/decode_engine.h"
#include "core/run/step_kernels.h"
#include "core/run/step_plan.h"

namespace luka {

class Decoder;
class LayerAttention;
struct LukaStep;

// Makes the step's per-layer ops on its reserved tensors (make_cpu_step_kernels,
// make_cpu_fused_step_kernels, make_cuda_step_kernels).
using StepKernelsFactory = std::function<std::unique_ptr<StepKernels>(const StepTensors&)>;

class StaticDecodeStep {
 public:
  // Reserves the plan's buffers for `decoder`'s model (fp32, bf16 or fp16 weights held as
  // tensors: not GGUF blocks only; a 16-bit step attends in fp32, as the decoder does) and `layers` (its LuKA layer configs, or empty for plain attention), and makes
  // its per-layer ops with `kernels` (empty: the ATen ops, on CPU tensors only). Throws
  // luka::Error naming what the step cannot run.
  StaticDecodeStep(const Decoder& decoder, const RunLength& run, const std::vector<LayerConfig>& layers = {},
                   const StepKernelsFactory& kernels = {})
      : StaticDecodeStep(decoder, run, layers, kernels, nullptr) {}
  // `from`'s sequence continued under other layer configs (a --schedule entry or a live change,
  // which the decoder's LuKA layers have taken): the plan for `layers` over from's run, with every
  // buffer of the same name, layer, shape and type taken over from `from` (the caches, the LuKA
  // accumulators and pages, the token, position and step: no copy), the rest reserved anew, and
  // the next step from's next. So the steps after it give what Decoder::decode gives after the same
  // change. A step not yet started is simply made anew. Throws luka::Error for a change it cannot
  // continue under: one that moves a layer's page schedule (its pages so far follow the old one),
  // or a step with layers that run through their own attention (their state stayed with the
  // decoder).
  StaticDecodeStep(const Decoder& decoder, StaticDecodeStep& from, const std::vector<LayerConfig>& layers,
                   const StepKernelsFactory& kernels = {});
  ~StaticDecodeStep();
  // The per-layer ops hold the step's tensors by reference: a step stays where it was made.
  StaticDecodeStep(const StaticDecodeStep&) = delete;
  StaticDecodeStep& operator=(const StaticDecodeStep&) = delete;

  // After decoder.prefill(prompt) (position() == run.prompt == prompt.size()): copies its caches
  // into the reserved ones and sets the first token to feed (the one chosen from the prefill's
  // logits).
  void start(Decoder& decoder, const std::vector<std::int32_t>& prompt, std::int32_t first_token);
  // One decode step: feeds `token` at `position`, leaves the logits in logits(), writes their argmax
  // into `token` and ids()[step], and advances position and step. Throws luka::Error past the
  // planned steps.
  void step();
  // step() in parts, for a caller that records the device work once and replays it (a CUDA
  // graph: core/run/graphed_step.h): check_next_step() throws as step() would; enqueue_step() is
  // the step's device work alone (what is recorded; it reads nothing from the host, so a step with
  // eager layers, which read the ids there, is not recorded); end_step() advances the host's
  // counters and makes the pages due after the step, unless they were enqueued with it.
  void check_next_step() const;
  void enqueue_step();
  void end_step(bool pages_enqueued = false);
  // With step records on (StepPlan::records: a capture asked a LuKA layer for them), hands each
  // LuKA layer the step runs itself the last step's records as core/luka records a step
  // (LukaLayer::adopt_step), and its pages. It reads them from the device: after end_step,
  // outside a recorded step. step() calls it.
  void publish_records();
  // The pages each layer makes after the next step (the plan's count; 0 for most steps and for
  // layers without LuKA state): the variant that step replays. enqueue_pages() is that page work
  // alone, on the device, at offsets it reads there (so it records with the step: a caller that
  // enqueued it says so to end_step).
  std::vector<std::int64_t> pages_due() const;
  void enqueue_pages();
  // The token the last step chose (read from the device).
  std::int32_t token() const;

  const StepPlan& plan() const { return plan_; }
  // The last step's logits, float32 [vocab] (a view of the reserved buffer: copy it to keep it).
  at::Tensor logits() const;
  // The ids chosen by the steps so far (a copy, read from the device).
  std::vector<std::int32_t> ids() const;
  std::int64_t steps() const { return host_step_; }
  // A reserved buffer by its plan name, for tests.
  const at::Tensor& buffer(const std::string& name, int layer = -1) const;
  // Layers that run through their own (eager) attention.
  std::vector<int> eager_layers() const;
  // A LuKA layer the step runs itself (dense mode): its pages so far (-1 for other layers).
  std::int64_t pages(int layer) const;
  // The per-layer ops' name ("cpu", "cpu-fused", "cuda-fused").
  const char* kernels() const { return kernels_->name(); }

 private:
  struct LayerOps;
  StaticDecodeStep(const Decoder& decoder, const RunLength& run, const std::vector<LayerConfig>& layers,
                   const StepKernelsFactory& kernels, StaticDecodeStep* from);
  // from's buffer planned as `b` is here, of type `type` (undefined: none).
  at::Tensor reusable(const StepBuffer& b, at::ScalarType type) const;
  void continue_from(const StaticDecodeStep& from);
  void accumulate(LayerOps& o);
  LukaStep layer_records(const LayerOps& o, int layer) const;
  void kascade_records(const LayerOps& o, int layer, LukaStep& s) const;
  void enqueue_layer_pages(LayerOps& o, std::int64_t count);
  void set_page_state(LayerOps& o);

  StepPlan plan_;
  std::vector<at::Tensor> tensors_;  // one per plan_.buffers entry, in its order
  std::vector<LayerOps> layers_;
  StepTensors seam_;  // views of the reserved buffers the per-layer ops read and write
  std::unique_ptr<StepKernels> kernels_;
  at::Tensor token_, position_, step_, ids_, key_positions_, mask_, x_, h_, q_, scores_, probabilities_, attention_,
      logits_, group_sum_, page_index_, page_slots_, page_counting_, page_importance_, page_logits_, page_weights_,
      page_keys_, page_values_, page_summary_, page_bias_;
  at::Tensor embed_, final_norm_, lm_head_t_;
  // A 16-bit step: the logits in the compute dtype, and the fp32 query, keys, values and output
  // its attention runs on (plan "q_f32", "keys_f32", "values_f32", "attention_f32").
  bool wide_ = false;
  at::Tensor logits_compute_, q32_, keys32_, values32_, attention32_;
  double scale_ = 1;
  // Views of the plan's "constants": [1] fp32 each, and the int64 1.
  at::Tensor scale_t_, group_n_t_, one_;
  std::int64_t host_position_ = 0, host_step_ = 0;
  std::vector<std::int32_t> host_ids_;  // the sequence on the host, for eager layers (reserved)
  bool has_eager_ = false;
  bool started_ = false;
};

// The static step as the run loop's decode engine (core/device/decode_engine.h), its per-layer
// ops from `kernels` (empty: the ATen ops, CPU tensors only).
DecodeEngineFactory static_step_engine(StepKernelsFactory kernels = {});

}  // namespace luka
