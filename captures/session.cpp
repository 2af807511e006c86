#include "captures/session.h"

#include "core/util/error.h"

namespace luka::capture {

CaptureSession::CaptureSession(std::vector<CaptureSink*> sinks, std::size_t queue_bytes)
    : sinks_(std::move(sinks)), budget_(queue_bytes), thread_([this] { run(); }) {}

CaptureSession::~CaptureSession() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::size_t CaptureSession::bytes_of(const Message& m) {
  if (const auto* r = std::get_if<Rows>(&m)) return r->data.size() * sizeof(float);
  if (const auto* s = std::get_if<Step>(&m)) {
    std::size_t b = 0;
    for (const LayerStep& l : s->layers) b += l.effective.size() * 2 + l.cover.size() + l.page_state.size() * 3;
    return b;
  }
  return 0;
}

void CaptureSession::rethrow() {
  if (error_) std::rethrow_exception(error_);
}

void CaptureSession::push(Message m) {
  const std::size_t b = bytes_of(m);
  std::unique_lock<std::mutex> lock(mu_);
  rethrow();
  // Wait for room (a single record larger than the budget goes through once the queue is empty).
  cv_.wait(lock, [&] { return error_ || bytes_ == 0 || bytes_ + b <= budget_; });
  rethrow();
  queue_.push_back(std::move(m));
  bytes_ += b;
  lock.unlock();
  cv_.notify_all();
}

void CaptureSession::begin(Manifest manifest, Layout layout, std::vector<Token> prompt, std::vector<Segment> segments) {
  push(Begin{std::move(manifest), std::move(layout), std::move(prompt), std::move(segments)});
}
void CaptureSession::prefill_rows(int layer, std::int64_t row0, std::int64_t m, std::vector<float> data) {
  push(Rows{layer, row0, m, std::move(data)});
}
void CaptureSession::end_prefill() { push(EndPrefill{}); }
void CaptureSession::step(Step step) { push(std::move(step)); }
void CaptureSession::finish(std::vector<Token> trailing) {
  push(Finish{std::move(trailing)});
  drain();
}

void CaptureSession::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return error_ || (queue_.empty() && !busy_); });
  rethrow();
}

std::size_t CaptureSession::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void CaptureSession::run() {
  for (;;) {
    Message m;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      m = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    const std::size_t b = bytes_of(m);
    std::exception_ptr err;
    try {
      handle(m);
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      bytes_ -= b;
      busy_ = false;
      if (err && !error_) error_ = err;
      if (error_) {  // drop what is queued: the producer sees the error at its next call
        queue_.clear();
        bytes_ = 0;
      }
    }
    cv_.notify_all();
  }
}

void CaptureSession::handle(Message& m) {
  if (auto* b = std::get_if<Begin>(&m)) {
    layout_ = b->layout;
    pyramids_.clear();
    pyramids_.resize(layout_.layers.size());
    if (!layout_.levels.empty() && layout_.prompt_tokens > 0) {
      for (std::size_t i = 0; i < layout_.layers.size(); ++i) {
        const int index = static_cast<int>(i);
        pyramids_[i] = std::make_unique<PyramidBuilder>(
            layout_.layers[i], static_cast<int>(layout_.heads.size()), layout_.prompt_tokens, layout_.levels,
            [this, index](int level) { return map_chunk(layout_, index, level); },
            [this](MapRows&& rows) {
              for (CaptureSink* s : sinks_) s->map_rows(rows);
            });
      }
    }
    for (CaptureSink* s : sinks_) s->begin(b->manifest, b->layout, b->prompt, b->segments);
  } else if (auto* r = std::get_if<Rows>(&m)) {
    const int i = recorded_index(layout_.layers, r->layer, "layer");
    PyramidBuilder* p = pyramids_[static_cast<std::size_t>(i)].get();
    if (!p) fail("capture", "prefill rows for a capture without maps");
    p->add_rows(r->row0, r->m, r->data.data());
    if (p->rows_done() == layout_.prompt_tokens) p->finish();
  } else if (std::holds_alternative<EndPrefill>(m)) {
    for (const auto& p : pyramids_)
      if (p && p->rows_done() != layout_.prompt_tokens) fail("capture", "the prefill map is incomplete");
    for (CaptureSink* s : sinks_) s->end_prefill();
  } else if (auto* s = std::get_if<Step>(&m)) {
    for (CaptureSink* sink : sinks_) sink->step(*s);
  } else if (auto* f = std::get_if<Finish>(&m)) {
    for (CaptureSink* sink : sinks_) sink->finish(f->trailing);
  }
}

}  // namespace luka::capture
