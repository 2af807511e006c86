#include "captures/pipeline.h"

#include <algorithm>
#include <chrono>

#include <pthread.h>

#include "core/util/half.h"
#include "core/util/error.h"

namespace luka::capture {

CapturePipeline::CapturePipeline(std::vector<CaptureSink*> sinks, std::size_t queue_bytes)
    : sinks_(std::move(sinks)), budget_(queue_bytes), thread_([this] { run(); }) {}

CapturePipeline::~CapturePipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

std::size_t CapturePipeline::bytes_of(const Message& m) {
  if (const auto* r = std::get_if<Band>(&m)) {
    std::size_t b = r->rows.data.size() * sizeof(std::uint16_t);
    if (r->chunks)
      for (const auto& c : r->chunks->tiles) b += c.size();
    return b;
  }
  if (const auto* s = std::get_if<StepRecord>(&m)) {
    std::size_t b = 0;
    for (const LayerStep& l : s->step.layers) b += (l.effective.size() + l.dense.size()) * 2 + l.cover.size() + l.page_state.size() * 3;
    if (const std::optional<StepChunks>& c = s->chunks)
      for (const auto* part : {&c->effective, &c->dense, &c->cover, &c->page_state, &c->summary_mass})
        for (const auto& chunk : *part) b += chunk.size();
    return b;
  }
  return 0;
}

void CapturePipeline::rethrow() {
  if (error_) std::rethrow_exception(error_);
}

double CapturePipeline::push(Message m, bool wake) {
  const std::size_t b = bytes_of(m);
  std::unique_lock<std::mutex> lock(mu_);
  rethrow();
  // Wait for room (a single record larger than the budget goes through once the queue is empty).
  const auto room = [&] { return error_ || bytes_ == 0 || bytes_ + b <= budget_; };
  double waited = 0;
  if (!room()) {
    const auto t0 = std::chrono::steady_clock::now();
    woken_ = true;
    work_cv_.notify_one();  // what waits unwoken gets written now
    cv_.wait(lock, room);
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  rethrow();
  queue_.push_back(std::move(m));
  bytes_ += b;
  if (wake) woken_ = true;
  lock.unlock();
  if (wake) work_cv_.notify_one();
  return waited;
}

CapturePipeline::Message CapturePipeline::take_front() {
  Message m = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  return m;
}

void CapturePipeline::done_with(std::size_t b, std::exception_ptr err) {
  bytes_ -= b;
  busy_ = false;
  if (err && !error_) error_ = err;
  if (error_) {  // drop what is queued: the producer sees the error at its next call
    queue_.clear();
    bytes_ = 0;
  }
  if (queue_.empty()) woken_ = false;  // what is queued from now on waits for a wake of its own
}

void CapturePipeline::help_inline() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!busy_ && !error_ && !queue_.empty()) {
    Message m = take_front();
    lock.unlock();
    const std::size_t b = bytes_of(m);
    const std::exception_ptr err = handle_caught(m);
    lock.lock();
    done_with(b, err);
  }
  // The I/O thread is not woken for nothing: woken late, it would take the next record queued
  // for the next region. (Records are pushed between regions, so none is left here as a rule.)
  if (!busy_ && !queue_.empty()) {
    woken_ = true;
    work_cv_.notify_one();
  }
}

void CapturePipeline::encode_and_write(std::int64_t n, const std::function<void(std::int64_t)>& item) {
  parallel_(1 + n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      if (i == 0)
        help_inline();
      else
        item(i - 1);
    }
  });
}

void CapturePipeline::begin(Manifest manifest, Layout layout, std::vector<Token> prompt, std::vector<Segment> segments) {
  layout_ = layout;
  encode_ = false;
  keep_halves_ = false;
  for (const CaptureSink* s : sinks_) (s->takes_chunks() ? encode_ : keep_halves_) = true;
  encode_steps_ = false;
  for (const CaptureSink* s : sinks_) encode_steps_ = encode_steps_ || s->takes_step_chunks();
  pyramids_.clear();
  pyramids_.resize(layout_.layers.size());
  if (!layout_.levels.empty() && layout_.prompt_tokens > 0) {
    for (std::size_t i = 0; i < layout_.layers.size(); ++i) {
      const int index = static_cast<int>(i);
      pyramids_[i] = std::make_unique<PyramidBuilder>(
          static_cast<int>(layout_.heads.size()), layout_.prompt_tokens, layout_.levels,
          [this, index](int level) { return map_chunk(layout_, index, level); },
          [this, index](const BandView& band) { emit_band(index, band); }, parallel_);
    }
  }
  push(Begin{std::move(manifest), std::move(layout), std::move(prompt), std::move(segments)});
}

void CapturePipeline::emit_band(int layer_index, const BandView& v) {
  const std::int64_t H = static_cast<std::int64_t>(layout_.heads.size());
  Band band;
  MapRows& r = band.rows;
  r.layer = layout_.layers[static_cast<std::size_t>(layer_index)];
  r.level = v.level;
  r.row0 = v.row0;
  r.rows = v.rows;
  r.cols = v.cols;
  if (encode_) {  // each chunk gathered, shuffled and compressed straight from the builder's rows
    const std::int64_t c = map_chunk(layout_, layer_index, v.level);
    const std::int64_t per_head = (v.cols + c - 1) / c;
    MapChunks& chunks = band.chunks.emplace();
    chunks.chunk = c;
    chunks.tiles.assign(static_cast<std::size_t>(H * per_head), {});
    const int level = layout_.deflate;
    encode_and_write(H * per_head, [&](std::int64_t t) {
      const std::int64_t h = t / per_head, c0 = (t % per_head) * c;
      chunks.tiles[static_cast<std::size_t>(t)] = encode_tile(v.data + h * v.head_stride + c0, sizeof(std::uint16_t), v.rows,
                                                          std::min(c, v.cols - c0), v.row_stride, c, c, level);
    });
  }
  if (keep_halves_) {
    r.data.resize(static_cast<std::size_t>(H * v.rows * v.cols));
    parallel_(H * v.rows, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t)
        std::copy_n(v.data + (t / v.rows) * v.head_stride + (t % v.rows) * v.row_stride, v.cols, r.data.data() + t * v.cols);
    });
  }
  push(std::move(band), /*wake=*/!encode_);  // encoded bands: written by the next band's region
}

void CapturePipeline::prefill_rows(int layer, std::int64_t row0, std::int64_t m, const std::vector<std::uint16_t>& halves) {
  prefill_level_rows(layer, 0, row0, m, halves);
}

void CapturePipeline::prefill_level_rows(int layer, int level, std::int64_t row0, std::int64_t m,
                                         const std::vector<std::uint16_t>& halves) {
  const int i = recorded_index(layout_.layers, layer, "layer");
  PyramidBuilder* p = pyramids_[static_cast<std::size_t>(i)].get();
  if (!p) fail("capture", "prefill rows for a capture without maps");
  if (m < 0 || halves.size() != layout_.heads.size() * static_cast<std::size_t>(m * level_size(layout_.prompt_tokens, level)))
    fail("capture", "prefill rows of the wrong size");
  p->add_level_rows(level, row0, m, halves.data());
  if (p->rows_done() == layout_.prompt_tokens) p->finish();
}

void CapturePipeline::prefill_rows(int layer, std::int64_t row0, std::int64_t m, const std::vector<float>& data) {
  std::vector<std::uint16_t> halves(data.size());
  floats_to_halves(data.data(), halves.data(), data.size());
  prefill_rows(layer, row0, m, halves);
}

void CapturePipeline::end_prefill() {
  for (const auto& p : pyramids_)
    if (p && p->rows_done() != layout_.prompt_tokens) fail("capture", "the prefill map is incomplete");
  push(EndPrefill{});
}

namespace {

// One part of layers [g0, g0 + Lc) of a step (`part` of each LayerStep: [H][X] with X its
// tokens or pages, or empty) as the chunks [Lc * H][w] of the dataset's step row, written to
// out[0 .. n - 1] along the token (page) axis, zero-padded: the rows of layer g0 + j, head h at
// row j * H + h. A chunk without any layer's data stays empty (it is not written and reads as 0).
template <class T>
void encode_layers(const std::vector<LayerStep>& layers, const std::vector<T> LayerStep::*part, std::size_t g0, std::size_t Lc,
                   std::size_t H, std::int64_t w, std::int64_t n, int level, std::vector<std::uint8_t>* out) {
  if (H == 0) return;
  const std::size_t g1 = std::min(layers.size(), g0 + Lc), width = static_cast<std::size_t>(w);
  thread_local std::vector<T> block;
  for (std::int64_t k = 0; k < n; ++k) {
    bool any = false;
    for (std::size_t i = g0; i < g1; ++i) {
      const std::vector<T>& v = layers[i].*part;
      const std::int64_t X = static_cast<std::int64_t>(v.size() / H);
      if (X <= k * w) continue;
      if (!any) block.assign(Lc * H * width, T{});
      any = true;
      const std::size_t c0 = static_cast<std::size_t>(k * w), cols = static_cast<std::size_t>(std::min(X - k * w, w));
      for (std::size_t h = 0; h < H; ++h)
        std::copy_n(v.data() + h * static_cast<std::size_t>(X) + c0, cols, block.data() + ((i - g0) * H + h) * width);
    }
    if (any) {
      const auto rows = static_cast<std::int64_t>(Lc * H);
      out[k] = encode_tile(block.data(), sizeof(T), rows, w, w, rows, w, level);
    }
  }
}

}  // namespace

void CapturePipeline::encode_step(StepRecord& record, bool help) {
  const Step& st = record.step;
  const std::size_t H = layout_.heads.size(), L = st.layers.size();
  const std::size_t Lc = static_cast<std::size_t>(layer_chunk(layout_));
  const std::int64_t ct = token_chunk(layout_);
  std::int64_t P = 0;  // the most pages of any layer
  for (const LayerStep& ls : st.layers) P = std::max<std::int64_t>(P, H ? static_cast<std::int64_t>(ls.page_state.size() / H) : 0);
  StepChunks& c = record.chunks.emplace();
  c.token_chunks = (st.tokens + ct - 1) / ct;
  c.page_chunks = (P + kPageChunk - 1) / kPageChunk;
  const std::int64_t groups = static_cast<std::int64_t>((L + Lc - 1) / Lc);
  for (auto* part : {&c.effective, &c.dense, &c.cover}) part->assign(static_cast<std::size_t>(groups * c.token_chunks), {});
  for (auto* part : {&c.page_state, &c.summary_mass}) part->assign(static_cast<std::size_t>(groups * c.page_chunks), {});
  constexpr std::int64_t kParts = 5;  // effective, dense, cover, page_state, summary_mass
  const int level = layout_.deflate;
  const auto item = [&](std::int64_t t) {
    const std::int64_t g = t / kParts, nt = c.token_chunks, np = c.page_chunks;
    const std::size_t g0 = static_cast<std::size_t>(g) * Lc;
    const auto& ls = st.layers;
    switch (t % kParts) {
      case 0: encode_layers(ls, &LayerStep::effective, g0, Lc, H, ct, nt, level, c.effective.data() + g * nt); break;
      case 1: encode_layers(ls, &LayerStep::dense, g0, Lc, H, ct, nt, level, c.dense.data() + g * nt); break;
      case 2: encode_layers(ls, &LayerStep::cover, g0, Lc, H, ct, nt, level, c.cover.data() + g * nt); break;
      case 3: encode_layers(ls, &LayerStep::page_state, g0, Lc, H, kPageChunk, np, level, c.page_state.data() + g * np); break;
      case 4: encode_layers(ls, &LayerStep::summary_mass, g0, Lc, H, kPageChunk, np, level, c.summary_mass.data() + g * np); break;
    }
  };
  if (help) {
    encode_and_write(groups * kParts, item);
  } else {
    parallel_(groups * kParts, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t t = b; t < e; ++t) item(t);
    });
  }
}

void CapturePipeline::step(Step step) {
  const auto t0 = std::chrono::steady_clock::now();
  StepRecord record{std::move(step), std::nullopt};
  const bool here = encode_steps_ && step_encoding_ == StepEncoding::kProducer;
  if (here) encode_step(record, /*help=*/true);
  // Encoded here: written in the next step's region (or by finish); else the I/O thread encodes it.
  const double waited = push(std::move(record), /*wake=*/!here);
  std::lock_guard<std::mutex> lock(mu_);
  producer_.step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  producer_.wait_seconds += waited;
  ++producer_.steps;
}

CapturePipeline::ProducerTime CapturePipeline::producer_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return producer_;
}

void CapturePipeline::finish(std::vector<Token> trailing) {
  push(Finish{std::move(trailing)});
  drain();
}

void CapturePipeline::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty()) woken_ = true;  // for records queued without waking the I/O thread
  work_cv_.notify_one();
  cv_.wait(lock, [&] { return error_ || (queue_.empty() && !busy_); });
  rethrow();
}

std::size_t CapturePipeline::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void CapturePipeline::run() {
  pthread_setname_np(pthread_self(), "luka-capture-io");  // how top and perf show it (15 characters at most)
  for (;;) {
    Message m;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Not while a producer thread handles a message inline: messages are handled in order. Only
      // when woken: a spurious wake-up leaves an unwoken record to the producer's next region.
      work_cv_.wait(lock, [&] { return !busy_ && (stop_ || (woken_ && !queue_.empty())); });
      if (queue_.empty()) return;  // stop_ and nothing left
      m = take_front();
    }
    const std::size_t b = bytes_of(m);
    const std::exception_ptr err = handle_caught(m);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_with(b, err);
    }
    cv_.notify_all();
  }
}

std::exception_ptr CapturePipeline::handle_caught(Message& m) {
  try {
    handle(m);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

void CapturePipeline::handle(Message& m) {
  if (auto* b = std::get_if<Begin>(&m)) {
    for (CaptureSink* s : sinks_) s->begin(b->manifest, b->layout, b->prompt, b->segments);
  } else if (auto* r = std::get_if<Band>(&m)) {
    for (CaptureSink* s : sinks_) s->map_rows(r->rows, s->takes_chunks() && r->chunks ? &*r->chunks : nullptr);
  } else if (std::holds_alternative<EndPrefill>(m)) {
    for (CaptureSink* s : sinks_) s->end_prefill();
  } else if (auto* s = std::get_if<StepRecord>(&m)) {
    if (encode_steps_ && !s->chunks) encode_step(*s, /*help=*/false);  // StepEncoding::kWriter
    for (CaptureSink* sink : sinks_) sink->step(s->step, sink->takes_step_chunks() && s->chunks ? &*s->chunks : nullptr);
  } else if (auto* f = std::get_if<Finish>(&m)) {
    for (CaptureSink* sink : sinks_) sink->finish(f->trailing);
  }
}

}  // namespace luka::capture
