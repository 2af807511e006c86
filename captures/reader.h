// Reads a capture file lazily (docs/capture-format.md): opening reads the manifest, layout and
// counters; everything else is read on request, chunk-wise, so showing a window of a map never
// loads the whole map. A file cut off by a crash opens up to its last complete step.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "captures/capture.h"
#include "captures/h5.h"

namespace luka::capture {

class CaptureFile final : public CaptureView {
 public:
  // Throws luka::Error naming the file for anything that is not a readable capture of a known
  // version (not HDF5, wrong format or version, truncated, missing groups).
  static std::unique_ptr<CaptureFile> open(const std::filesystem::path& path);

  // How often a metadata block whose checksum fails is read again, with a doubling sleep from
  // 1 ns in between, when the file is opened in single-writer-read mode: a block being rewritten
  // by a live writer reads whole on a later attempt. A file no process writes reads the same bytes
  // on every attempt, so 1 gives the same answer as the default without the sleeps (the fuzz
  // target does that).
  static constexpr int kSwmrReadAttempts = 20;
  static std::unique_ptr<CaptureFile> open(const std::filesystem::path& path, int swmr_read_attempts);
  ~CaptureFile() override;

  Summary summary() const override;
  std::vector<Token> tokens() const override;
  std::vector<Segment> segments() const override;
  MapWindow map_window(int layer, int head, int level, std::int64_t row0, std::int64_t col0, std::int64_t rows,
                       std::int64_t cols) const override;
  std::vector<float> row(std::int64_t step, int layer, int head) const override;
  std::vector<float> dense_row(std::int64_t step, int layer, int head) const override;
  std::vector<std::uint8_t> cover(std::int64_t step, int layer, int head) const override;
  std::vector<std::uint8_t> page_states(std::int64_t step, int layer, int head) const override;
  std::vector<float> summary_mass(std::int64_t step, int layer, int head) const override;
  std::vector<PageInfo> pages(int layer) const override;
  StepMetrics metrics(std::int64_t step, int layer) const override;

  // Per part ("maps", "rows", "covers", "metrics", "pages", "tokens"): bytes stored in the file,
  // and bytes the same arrays take uncompressed (their full extent x element size).
  struct PartSize {
    std::uint64_t stored = 0, logical = 0;
  };
  std::map<std::string, PartSize> storage() const;
  std::uint64_t file_bytes() const;

 private:
  CaptureFile() = default;
  std::int64_t step_tokens(std::int64_t step) const;  // checks the step
  std::vector<float> half_row(const schema::Dataset& rows, std::int64_t step, int layer, int head) const;
  hid_t dataset(const std::string& path) const;       // opened once, cached

  std::filesystem::path path_;
  std::string name_;
  h5::Handle file_;
  Summary summary_;
  std::int64_t version_ = 0;  // the file's format version
  std::vector<std::int64_t> step_tokens_;
  bool kascade_records_ = false;  // /decode/kascade_source and kascade_head exist
  mutable std::map<std::string, h5::Handle> datasets_;
};

}  // namespace luka::capture
