// The capture pipeline of a run (DESIGN.md §2 threads, §6): the model thread hands records to a
// bounded queue; one I/O thread builds the prefill map pyramids, converts to half and feeds the
// sinks (an HDF5 CaptureWriter, a LiveCapture, or both). When the queue holds more than its byte
// budget the model thread waits, so a slow disk slows the run instead of exhausting memory.
// An error on the I/O thread (disk full, ...) is rethrown to the model thread at its next call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "captures/capture.h"
#include "captures/pyramid.h"

namespace luka::capture {

class CaptureSession {
 public:
  explicit CaptureSession(std::vector<CaptureSink*> sinks, std::size_t queue_bytes = std::size_t{512} << 20);
  ~CaptureSession();  // finishes the I/O thread (without calling finish() on the sinks)
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  void begin(Manifest manifest, Layout layout, std::vector<Token> prompt, std::vector<Segment> segments);
  // Rows [row0, row0 + m) of the prefill map of a recorded layer: [recorded heads][m][n] fp32,
  // n = layout.prompt_tokens. Layers may interleave; each layer's rows arrive in order.
  void prefill_rows(int layer, std::int64_t row0, std::int64_t m, std::vector<float> data);
  void end_prefill();
  void step(Step step);
  void finish(std::vector<Token> trailing);
  // Waits until the I/O thread has handled everything queued; rethrows its error.
  void drain();
  std::size_t queued_bytes() const;

 private:
  struct Begin { Manifest manifest; Layout layout; std::vector<Token> prompt; std::vector<Segment> segments; };
  struct Rows { int layer; std::int64_t row0, m; std::vector<float> data; };
  struct EndPrefill {};
  struct Finish { std::vector<Token> trailing; };
  using Message = std::variant<Begin, Rows, EndPrefill, Step, Finish>;
  static std::size_t bytes_of(const Message& m);

  void push(Message m);
  void run();
  void handle(Message& m);
  void rethrow();

  std::vector<CaptureSink*> sinks_;
  std::size_t budget_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> queue_;
  std::size_t bytes_ = 0;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  // I/O thread state.
  Layout layout_;
  std::vector<std::unique_ptr<PyramidBuilder>> pyramids_;  // per recorded layer
  std::thread thread_;
};

}  // namespace luka::capture
