// Writes a capture to HDF5 (docs/capture-format.md). Synchronous: CapturePipeline calls it from
// its I/O thread. The file is created with the latest format and written in SWMR mode, so its
// on-disk state stays consistent between flushes; every decode step is flushed and then counted
// in /complete_steps, so a run cut off by a crash opens and reads up to its last complete step.
// It is written to "<path>.partial" beside the target and renamed over it by finish(): a file at
// the path stays whole until the new capture is complete, and a failed or killed run leaves its
// complete steps readable in the .partial file. The target path is locked while written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "captures/capture.h"
#include "captures/h5.h"

namespace luka {
class OutputLock;
}

namespace luka::capture {

class CaptureWriter final : public CaptureSink {
 public:
  explicit CaptureWriter(std::filesystem::path path);
  ~CaptureWriter() override;

  void begin(const Manifest& manifest, const Layout& layout, const std::vector<Token>& prompt,
             const std::vector<Segment>& segments) override;
  void map_rows(const MapRows& rows, const MapChunks* chunks) override;
  bool takes_chunks() const override { return true; }
  void end_prefill() override;
  void step(const Step& step, const StepChunks* chunks) override;
  void finish(const std::vector<Token>& trailing) override;

  const std::filesystem::path& path() const { return path_; }
  // Where the capture is while written; renamed to path() when finished.
  const std::filesystem::path& partial_path() const { return partial_; }
  std::int64_t complete_steps() const { return complete_steps_; }
  // Whether this writer created its .partial file (false when the lock or the create failed).
  bool created_partial() const { return created_partial_; }

 private:
  struct LayerSets {
    h5::Handle page_start, page_end, page_created, page_raw, page_member_end, page_members;
    std::int64_t members = 0;  // positions listed so far
    std::vector<h5::Handle> levels;  // per stored level
    std::int64_t pages = 0;          // rows of the page table
  };
  void append_tokens(const std::vector<Token>& tokens);
  // A step's encoded chunks of one part (Step::Chunks): `per_row` chunks of `width` along the
  // token (page) axis for each group of layer_chunk() layers; empty ones are skipped.
  void write_chunks(hid_t dataset, hsize_t step, std::int64_t width, std::int64_t per_row, const std::vector<std::vector<std::uint8_t>>& chunks);
  void flush();
  void close_datasets();  // every handle but the file's
  template <typename F>
  void for_each_handle(F&& f);  // every dataset handle

  std::filesystem::path path_;
  std::filesystem::path target_;   // path_, or where a link at path_ points
  std::filesystem::path partial_;  // target_ + ".partial"
  std::string name_;  // for messages
  std::unique_ptr<OutputLock> lock_;  // held from begin() to the writer's end
  h5::Handle file_;
  Layout layout_;
  h5::Handle tok_id_, tok_generated_, tok_segment_, tok_prob_, tok_piece_end_, tok_piece_bytes_;
  h5::Handle step_tokens_, complete_;
  // Per-step arrays of every recorded layer: [S, L] scalars, [S, L, H] and [S, L, H, 4] metrics,
  // [S, L, H, tokens or pages] rows. One dataset per quantity keeps a step's flush small.
  h5::Handle mode_, paged_end_, seconds_, cover_size_, fidelity_, kascade_source_, kascade_head_, effective_, dense_, cover_, page_state_, summary_mass_;
  std::int64_t page_extent_ = 0;   // page axis of page_state / summary_mass
  std::int64_t token_extent_ = 0;  // token axis of effective / dense / cover
  std::vector<LayerSets> layers_;
  std::int64_t tokens_ = 0, piece_bytes_ = 0;
  std::int64_t token_cap_ = 0, piece_cap_ = 0, step_cap_ = 0;  // extents allocated ahead (trimmed by finish)
  std::int64_t complete_steps_ = 0;
  bool created_partial_ = false;
  bool finished_ = false;
};

}  // namespace luka::capture
