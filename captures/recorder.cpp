#include "captures/recorder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "core/util/half.h"
#include "core/gguf/gguf.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/sha256.h"

namespace luka::capture {
namespace {

std::int8_t mode_code(AttentionMode m) {
  switch (m) {
    case AttentionMode::kDense: return kModeDense;
    case AttentionMode::kLined: return kModeLined;
    case AttentionMode::kClustered: return kModeClustered;
    case AttentionMode::kKascade: return kModeKascade;
    case AttentionMode::kPress: return kModePress;
    case AttentionMode::kQuest: return kModeQuest;
  }
  return kModeDense;
}

std::vector<int> all(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

// sha256 of the headers of the weight files: GGUF header + metadata + tensor infos, or each
// safetensors shard's length prefix and JSON header, in file-name order.
std::string weights_hash(const Model& model) {
  if (model.is_gguf()) {
    const auto f = gguf::File::open(model.path());
    return sha256_file(model.path(), f->header_bytes());
  }
  std::vector<std::filesystem::path> shards;
  for (const auto& e : std::filesystem::directory_iterator(model.path()))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  Sha256 h;
  for (const auto& p : shards) {
    std::ifstream in(p, std::ios::binary);
    unsigned char len[8] = {};
    in.read(reinterpret_cast<char*>(len), 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    if (!in || n > (std::uint64_t{1} << 30)) fail(p.string(), "cannot read the safetensors header for hashing");
    std::string header(static_cast<std::size_t>(n), '\0');
    in.read(header.data(), static_cast<std::streamsize>(n));
    h.update(p.filename().string());
    h.update(len, 8);
    h.update(header);
  }
  return h.hex();
}

std::string config_json(const ModelConfig& c) {
  nlohmann::json j;
  j["model_type"] = c.model_type;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["torch_dtype"] = c.torch_dtype;
  j["eos_token_ids"] = c.eos_token_ids;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  return j.dump();
}

}  // namespace

Layout make_layout(const Model& model, const LukaConfig& config, const RecordSpec& spec, std::int64_t prompt_tokens,
                   std::int64_t max_tokens) {
  const ModelConfig& c = model.config();
  Layout l;
  l.num_layers = static_cast<int>(c.num_layers);
  l.num_heads = static_cast<int>(c.num_heads);
  l.num_kv_heads = static_cast<int>(c.num_kv_heads);
  l.layers = spec.layers.empty() ? all(l.num_layers) : spec.layers;
  l.heads = spec.heads.empty() ? all(l.num_heads) : spec.heads;
  for (const int x : l.layers)
    if (x >= l.num_layers)
      fail("--record", "layer " + std::to_string(x) + " is out of range (the model has " + std::to_string(l.num_layers) + " layers)");
  for (const int x : l.heads)
    if (x >= l.num_heads)
      fail("--record", "head " + std::to_string(x) + " is out of range (the model has " + std::to_string(l.num_heads) + " heads)");
  if (config.layers.size() != static_cast<std::size_t>(l.num_layers)) fail("capture", "LuKA config does not match the model's layers");
  for (const int x : l.layers) l.page_size.push_back(config.layers[static_cast<std::size_t>(x)].clustered.page_size);
  l.prompt_tokens = prompt_tokens;
  l.max_tokens = max_tokens;
  if (spec.maps) l.levels = stored_levels(prompt_tokens, spec.map_cap, spec.map_min);
  l.rows = spec.rows;
  l.covers = spec.covers;
  l.deflate = spec.deflate;
  return l;
}

ParallelFor model_parallel_for() {
  // Items are handed out one at a time from a shared counter rather than in equal contiguous
  // ranges: their costs differ (diagonal chunks, heads of a group), and a thread that finishes
  // early takes the next item instead of waiting at the region's end for the other.
  return [](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
    const std::int64_t threads = std::min<std::int64_t>(n, at::get_num_threads());
    if (threads <= 1) {
      if (n > 0) body(0, n);
      return;
    }
    std::atomic<std::int64_t> next{0};
    at::parallel_for(0, threads, 1, [&](std::int64_t, std::int64_t) {
      for (std::int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n; i = next.fetch_add(1, std::memory_order_relaxed))
        body(i, i + 1);
    });
  };
}

std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Manifest make_manifest(const Model& model, const Tokenizer& tokenizer, const LukaConfig& config) {
  Manifest m;
  m.created = utc_timestamp();
  std::error_code ec;
  const auto resolved = std::filesystem::weakly_canonical(model.path(), ec);  // through links like models/default
  m.model_path = (ec ? std::filesystem::absolute(model.path()) : resolved).string();
  m.architecture = model.config().model_type;
  m.model_config = config_json(model.config());
  m.weights_hash = weights_hash(model);
  const auto& src = tokenizer.source();
  m.tokenizer_hash = model.is_gguf() && src == model.path() ? m.weights_hash : sha256_file(src);
  m.luka_config = config.to_json();
  m.dtype = to_string(model.dtype());
  m.device = model.on_cuda() ? "cuda" : "cpu";  // the command names the GPU (cuda:N) when it knows it
  return m;
}

CaptureRecorder::CaptureRecorder(CapturePipeline& pipeline, Layout layout, std::vector<std::shared_ptr<LukaLayer>> layers)
    : pipeline_(pipeline), layout_(std::move(layout)), layers_(std::move(layers)), pages_reported_(layout_.layers.size(), 0) {
  for (const int x : layout_.layers)
    if (x < 0 || static_cast<std::size_t>(x) >= layers_.size() || !layers_[static_cast<std::size_t>(x)])
      fail("capture", "recorded layer " + std::to_string(x) + " has no LuKA attention");
  for (const int x : layout_.layers) layers_[static_cast<std::size_t>(x)]->set_step_records(true);
}

CaptureRecorder::~CaptureRecorder() {
  for (const int x : layout_.layers) {
    layers_[static_cast<std::size_t>(x)]->set_prefill_observer({});
    layers_[static_cast<std::size_t>(x)]->set_step_records(false);
  }
}

void CaptureRecorder::start_prefill() {
  if (layout_.levels.empty()) return;
  const std::int64_t n = layout_.prompt_tokens;
  const std::vector<int> heads = layout_.heads;
  // The layers pool the map to the finest stored level where they compute it (on the GPU: p²
  // times less to copy); a layer may hand a finer level when its query blocks need it.
  const int stored = *std::min_element(layout_.levels.begin(), layout_.levels.end());
  prefill_rows_done_.assign(layers_.size(), 0);
  for (const int x : layout_.layers) {
    layers_[static_cast<std::size_t>(x)]->set_prefill_observer(
        [this, n, heads, stored, last = heads.empty() ? -1 : *std::max_element(heads.begin(), heads.end())](
            int layer, std::int64_t q0, std::int64_t head0, const at::Tensor& probs) {
          const std::int64_t G = probs.size(0), rows = probs.size(1), S = probs.size(2);
          // The keys the block's forward saw: the context alone in a query-agnostic prompt's first
          // forward (set_prefill_split), else the whole prompt. Its rows are the map's rows, padded
          // with zeros to the prompt's width.
          const std::int64_t T = prefill_split_ > 0 && q0 < prefill_split_ ? prefill_split_ : n;
          int level = 0;  // the level whose width the block has
          while (level < stored && level_size(T, level) != S) ++level;
          const std::int64_t p = std::int64_t{1} << level;
          if (level_size(T, level) != S || q0 % p != 0 || heads.empty()) return;  // not the recorded prompt
          const std::int64_t r0 = q0 / p, m = std::min(rows * p, T - q0);        // level rows; prompt rows
          if (m <= 0 || level_size(m, level) != rows) return;
          const std::int64_t W = level_size(n, level);  // the map's width at this level
          // The recorded heads of this group, rounded to half on the model's threads. Level row R
          // is zero right of column R: only columns 0 .. R are converted.
          const at::Tensor block = probs.contiguous();
          const std::size_t per_head = static_cast<std::size_t>(rows * W), src_per_head = static_cast<std::size_t>(rows * S);
          halves_.resize(heads.size() * per_head);
          std::vector<std::size_t> slots;  // (index in `heads`) for the heads of this group
          for (std::size_t j = 0; j < heads.size(); ++j)
            if (heads[j] >= head0 && heads[j] < head0 + G) slots.push_back(j);
          const float* src = block.const_data_ptr<float>();
          std::uint16_t* dst = halves_.data();
          // One work item per head and 8 rows: enough items to balance the threads, few enough
          // that taking one (an atomic on a line both cores use) costs little beside its work.
          constexpr std::int64_t kRows = 8;
          const std::int64_t groups = (rows + kRows - 1) / kRows;
          pipeline_.parallel()(static_cast<std::int64_t>(slots.size()) * groups, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t t = b; t < e; ++t) {
              const std::size_t j = slots[static_cast<std::size_t>(t / groups)];
              const std::int64_t i0 = (t % groups) * kRows;
              for (std::int64_t r = i0; r < std::min(rows, i0 + kRows); ++r) {
                const std::size_t cols = static_cast<std::size_t>(std::min(S, r0 + r + 1));
                std::uint16_t* row = dst + j * per_head + static_cast<std::size_t>(r * W);
                floats_to_halves(src + static_cast<std::size_t>(heads[j] - head0) * src_per_head + static_cast<std::size_t>(r * S), row, cols);
                std::fill(row + cols, row + W, std::uint16_t{0});
              }
            }
          });
          if (head0 + G > last) {  // the block's last recorded head
            pipeline_.prefill_level_rows(layer, level, r0, rows, halves_);
            if (prefill_progress_ && static_cast<std::size_t>(layer) < prefill_rows_done_.size()) {
              std::int64_t& done = prefill_rows_done_[static_cast<std::size_t>(layer)];
              done = std::max(done, q0 + m);
              std::int64_t total = 0;
              for (const std::int64_t d : prefill_rows_done_) total += d;
              prefill_progress_(static_cast<double>(total) / static_cast<double>(n * static_cast<std::int64_t>(layout_.layers.size())));
            }
          }
        },
        stored);
  }
}

void CaptureRecorder::end_prefill() {
  for (const int x : layout_.layers) layers_[static_cast<std::size_t>(x)]->set_prefill_observer({});
  pipeline_.end_prefill();
}

void CaptureRecorder::record_step(std::int64_t step, std::vector<Token> new_tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  Step s;
  s.step = step;
  s.new_tokens = std::move(new_tokens);
  const std::size_t L = layout_.layers.size(), Hr = layout_.heads.size();
  // Per layer, on this thread: the checks, the scalars and the new pages; the step's tensors in
  // the layout the conversion below reads.
  struct Source {
    const LukaStep* step = nullptr;
    const std::vector<Page>* pages = nullptr;
    std::size_t pages_before = 0;  // pages that existed during this step's attention: made before it
    at::Tensor effective, dense, mass;
  };
  std::vector<Source> src(L);
  s.layers.resize(L);
  for (std::size_t i = 0; i < L; ++i) {
    const LukaLayer& la = *layers_[static_cast<std::size_t>(layout_.layers[i])];
    const LukaStep& ls = la.last_step();
    if (ls.step != step || !ls.effective.defined()) fail("capture", "layer " + std::to_string(layout_.layers[i]) + " did not run decode step " + std::to_string(step));
    s.tokens = ls.tokens;
    LayerStep& out = s.layers[i];
    out.mode = mode_code(ls.mode);
    out.paged_end = ls.paged_end;
    out.seconds = ls.seconds;
    // Kascade, press and Quest name the keys each head attended (LukaStep::selected).
    const bool sets = ls.mode == AttentionMode::kKascade || ls.mode == AttentionMode::kPress || ls.mode == AttentionMode::kQuest;
    const std::size_t per_head = ls.mode == AttentionMode::kLined       ? ls.heavy.size()
                                 : ls.mode == AttentionMode::kClustered ? ls.refined.size()
                                 : sets                                 ? ls.selected.size()
                                                                        : ls.cover_size.size();
    for (const int h : layout_.heads) {
      if (static_cast<std::size_t>(h) >= ls.cover_size.size() || static_cast<std::size_t>(h) >= per_head)
        fail("capture", "layer " + std::to_string(layout_.layers[i]) + " has no head " + std::to_string(h) + " at step " + std::to_string(step));
      out.cover_size.push_back(static_cast<std::int32_t>(ls.cover_size[static_cast<std::size_t>(h)]));
    }
    if (ls.mode == AttentionMode::kKascade) {
      out.kascade_source = static_cast<std::int32_t>(ls.kascade_source);
      const std::size_t groups = ls.head_map.size(), heads = ls.selected.size();
      for (const int h : layout_.heads)
        out.kascade_head.push_back(groups ? static_cast<std::int32_t>(ls.head_map[static_cast<std::size_t>(h) / (heads / groups)]) : -1);
    }
    out.fidelity.assign(Hr * 4, std::numeric_limits<float>::quiet_NaN());
    if (ls.fidelity.defined()) {
      const at::Tensor f = ls.fidelity.contiguous();  // [H, 4] fp32
      const float* fp = f.const_data_ptr<float>();
      for (std::size_t j = 0; j < Hr; ++j) std::copy_n(fp + layout_.heads[j] * 4, 4, out.fidelity.data() + j * 4);
    }
    Source& in = src[i];
    in.step = &ls;
    in.pages = &la.pages();
    while (in.pages_before < in.pages->size() && (*in.pages)[in.pages_before].created_step < step) ++in.pages_before;
    if (layout_.rows) in.effective = ls.effective.contiguous();
    if (layout_.rows && ls.dense.defined()) in.dense = ls.dense.contiguous();
    if (layout_.covers && ls.mode == AttentionMode::kClustered) in.mass = ls.summary_mass.contiguous();
    for (std::size_t p = pages_reported_[i]; p < in.pages->size(); ++p)
      out.new_pages.push_back({(*in.pages)[p].start, (*in.pages)[p].end, (*in.pages)[p].created_step, (*in.pages)[p].members, (*in.pages)[p].raw});
    pages_reported_[i] = in.pages->size();
  }
  // The rows, covers and page states of every layer, converted on the model's threads.
  const std::int64_t T = s.tokens;
  const auto recorded_rows = [&](const at::Tensor& rows, std::vector<std::uint16_t>& out) {  // [H, T] fp32 -> [Hr, T] halves
    out.resize(Hr * static_cast<std::size_t>(T));
    for (std::size_t j = 0; j < Hr; ++j)
      floats_to_halves(rows.const_data_ptr<float>() + layout_.heads[j] * T, out.data() + j * T, static_cast<std::size_t>(T));
  };
  pipeline_.parallel()(static_cast<std::int64_t>(L), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t li = b; li < e; ++li) {
      const Source& in = src[static_cast<std::size_t>(li)];
      const LukaStep& ls = *in.step;
      LayerStep& out = s.layers[static_cast<std::size_t>(li)];
      if (in.effective.defined()) recorded_rows(in.effective, out.effective);
      if (in.dense.defined()) recorded_rows(in.dense, out.dense);
      if (!layout_.covers) continue;
      const std::vector<Page>& pages = *in.pages;
      const std::size_t P = in.pages_before;
      out.cover.assign(Hr * static_cast<std::size_t>(T), kRaw);
      out.page_state.assign(Hr * P, kNoPage);
      out.summary_mass.assign(Hr * P, 0);
      for (std::size_t j = 0; j < Hr; ++j) {
        const std::size_t h = static_cast<std::size_t>(layout_.heads[j]);
        std::uint8_t* cov = out.cover.data() + j * T;
        if (ls.mode == AttentionMode::kLined) {
          std::fill(cov, cov + ls.window_start, kDropped);
          for (const std::int64_t t : ls.heavy[h]) cov[t] = kHeavy;
        } else if (ls.mode == AttentionMode::kKascade || ls.mode == AttentionMode::kPress || ls.mode == AttentionMode::kQuest) {
          // The keys the head attended are its cover: Kascade's top-k set, the tokens a press
          // kept (the prompt's kept positions and every later one, or what decoding compression
          // left), the pages Quest selected and its recent window. The rest were left out.
          std::fill(cov, cov + T, kDropped);
          for (const std::int64_t t : ls.selected[h]) cov[t] = kRaw;
        } else if (ls.mode == AttentionMode::kClustered) {
          std::uint8_t* ps = out.page_state.data() + j * P;
          std::fill(cov, cov + ls.paged_end, kSummarized);
          std::fill(ps, ps + P, kPageSummarized);
          for (std::size_t p = 0; p < P; ++p)
            if (pages[p].raw) cov[pages[p].start] = kRaw;
          for (const std::int64_t p : ls.refined[h]) {
            ps[p] = kPageRefined;
            pages[static_cast<std::size_t>(p)].for_each_position([&](std::int64_t t) { cov[t] = kRefined; });
          }
          const std::int64_t np = std::min<std::int64_t>(static_cast<std::int64_t>(P), in.mass.size(1));
          floats_to_halves(in.mass.const_data_ptr<float>() + static_cast<std::int64_t>(h) * in.mass.size(1), out.summary_mass.data() + j * P,
                           static_cast<std::size_t>(np));
        }
      }
    }
  });
  pipeline_.step(std::move(s));
  step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void RecordingObserver::prefill_begin(std::int64_t) {
  if (recorder_) recorder_->start_prefill();
}

void RecordingObserver::prefill_end(std::int64_t, double) {
  if (recorder_) recorder_->end_prefill();
}

bool RecordingObserver::token(const ChosenToken& t) {
  pending.push_back({t.id, piece_(t.id), true, -1, static_cast<float>(t.probability)});
  return !t.stop;
}

void RecordingObserver::after_step(std::int64_t step, double) {
  if (recorder_) recorder_->record_step(step, std::move(pending));
  pending.clear();
}

}  // namespace luka::capture
