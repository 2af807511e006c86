// The capture pipeline of a run (docs/design.md §2 threads, §6): the model thread hands records to a
// bounded queue; one I/O thread feeds them to the sinks (an HDF5 CaptureWriter, a LiveCapture, or
// both). The prefill map pyramids are built, and their chunks compressed, on the producer's side
// with its ParallelFor (the model's threads): that work then uses every core the model uses
// instead of competing with it from a thread of its own, and the I/O thread is left with writing.
// Encoded records (map bands, steps) do not wake the I/O thread: one work item of the next
// band's or step's parallel region writes them while the other threads encode, so a woken I/O
// thread does not take a core from the model mid-step. end_prefill, finish and drain wake it for
// what is left, so a step's data lands during the next step (or at finish).
// When the queue holds more than its byte budget the model thread waits, so a slow disk slows the
// run instead of exhausting memory. An error on the I/O thread (disk full, ...) is rethrown to
// the model thread at its next call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "captures/capture.h"
#include "captures/chunk_codec.h"
#include "captures/pyramid.h"

namespace luka::capture {

class CapturePipeline {
 public:
  explicit CapturePipeline(std::vector<CaptureSink*> sinks, std::size_t queue_bytes = std::size_t{512} << 20);
  ~CapturePipeline();  // finishes the I/O thread (without calling finish() on the sinks)
  CapturePipeline(const CapturePipeline&) = delete;
  CapturePipeline& operator=(const CapturePipeline&) = delete;

  // How the producer's side runs its parallel work (pyramids, chunk compression); serial by default.
  void set_parallel(ParallelFor parallel) { parallel_ = std::move(parallel); }
  const ParallelFor& parallel() const { return parallel_; }

  // Where a decode step's records are compressed. kProducer (the default): in step(), on the
  // producer's threads; a CPU run's model threads do it between steps, on the cores that would
  // otherwise wait for the step's last layer. kWriter: on the I/O thread (with the ParallelFor)
  // once step() has returned; a GPU run's host thread, which launches every kernel of a step and
  // so bounds its time, then goes straight on to the next step. Set before begin().
  enum class StepEncoding { kProducer, kWriter };
  void set_step_encoding(StepEncoding e) { step_encoding_ = e; }
  // The producer's time in step(), and of it waiting for room in the queue, over the run so far.
  struct ProducerTime {
    double step_seconds = 0, wait_seconds = 0;
    std::int64_t steps = 0;
  };
  ProducerTime producer_time() const;

  void begin(Manifest manifest, Layout layout, std::vector<Token> prompt, std::vector<Segment> segments);
  // Rows [row0, row0 + m) of the prefill map of a recorded layer: [recorded heads][m][n] IEEE half
  // (or fp32, rounded here), n = layout.prompt_tokens. Layers may interleave; each layer's rows
  // arrive in order. Builds the layer's pyramid and queues its finished bands.
  void prefill_rows(int layer, std::int64_t row0, std::int64_t m, const std::vector<std::uint16_t>& halves);
  void prefill_rows(int layer, std::int64_t row0, std::int64_t m, const std::vector<float>& data);
  // Rows [row0, row0 + m) of the pyramid's level `level` (the map max-pooled already by
  // 2^level: [recorded heads][m][level_size(n, level)] IEEE half), at most the lowest stored level.
  void prefill_level_rows(int layer, int level, std::int64_t row0, std::int64_t m, const std::vector<std::uint16_t>& halves);
  void end_prefill();
  void step(Step step);
  void finish(std::vector<Token> trailing);
  // Waits until the I/O thread has handled everything queued; rethrows its error.
  void drain();
  std::size_t queued_bytes() const;

 private:
  struct Begin { Manifest manifest; Layout layout; std::vector<Token> prompt; std::vector<Segment> segments; };
  struct EndPrefill {};
  struct Finish { std::vector<Token> trailing; };
  struct Band { MapRows rows; std::optional<MapChunks> chunks; };
  struct StepRecord { Step step; std::optional<StepChunks> chunks; };
  using Message = std::variant<Begin, Band, EndPrefill, StepRecord, Finish>;
  static std::size_t bytes_of(const Message& m);

  // Queues m. `wake`: wake the I/O thread for it; without, m waits for the producer's next
  // parallel region to handle it inline (help_inline), for the next woken push, or for the
  // queue to fill up. Returns the seconds it waited for room.
  double push(Message m, bool wake = true);
  void emit_band(int layer_index, const BandView& band);  // producer side: encode, then queue
  // Handles what is queued on the calling thread (a work item of the producer's parallel region)
  // while the I/O thread is idle; returns at once when the I/O thread is busy.
  void help_inline();
  // item(0 .. n-1) on the producer's threads, plus work item 0: help_inline, taken by whichever
  // thread comes first while the others encode, so the records queued before (the previous band
  // or step) are written without waking the I/O thread to take a model thread's core.
  void encode_and_write(std::int64_t n, const std::function<void(std::int64_t)>& item);
  // Fills record.chunks with the ParallelFor; `help`: through encode_and_write (producer side).
  void encode_step(StepRecord& record, bool help);
  void run();
  // Takes the front message off the queue; mu_ held, the queue not empty, the caller handles it.
  Message take_front();
  // After handling a message of b bytes: error and queue bookkeeping; mu_ held.
  void done_with(std::size_t b, std::exception_ptr err);
  void handle(Message& m);
  std::exception_ptr handle_caught(Message& m);  // handle(m), mu_ not held; its error, if any
  void rethrow();

  std::vector<CaptureSink*> sinks_;
  std::size_t budget_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // the producer waits on it: room in the queue, drained
  std::condition_variable work_cv_;  // the I/O thread waits on it: a record to handle, stop
  std::deque<Message> queue_;
  std::size_t bytes_ = 0;
  bool busy_ = false, stop_ = false;
  // A wake of the I/O thread is pending: set with every notify of work_cv_, cleared when the queue
  // runs empty. The I/O thread takes records only then, so which thread writes a record depends
  // on the order of calls alone (tests/captures: CapturePipeline.EncodedRecords...), not on timing.
  bool woken_ = false;
  std::exception_ptr error_;
  // Producer state.
  ParallelFor parallel_ = serial_for;
  Layout layout_;
  bool encode_ = false, keep_halves_ = true;  // some sink takes chunks / some sink takes halves
  bool encode_steps_ = false;                 // some sink takes the steps' chunks
  StepEncoding step_encoding_ = StepEncoding::kProducer;
  ProducerTime producer_;  // mu_
  std::vector<std::unique_ptr<PyramidBuilder>> pyramids_;  // per recorded layer
  std::thread thread_;
};

}  // namespace luka::capture
