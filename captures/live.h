// A run's capture held by the process: the Studio's live view. It is a CaptureSink fed by the
// CapturePipeline (its I/O thread, or a model thread writing inline) and a CaptureView read by the
// UI's threads; a mutex guards the state, and every query copies out what it returns.
//
// The prefill maps are kept as the capture file's own chunks (docs/capture-format.md): encoded
// by the pipeline on the model's threads (shuffle + deflate at the layout's level), lower
// triangle only, since chunks wholly right of the diagonal are never produced and read as 0.
// A dense [heads][S][S] array per level costs about 0.3 GB per layer for a 4K-token prompt;
// the encoded chunks about half of that without the upper triangle, still too much for 30 layers.
// So the chunks are held in memory up to a byte budget, coarsest levels first (the overview
// reads them), and the finer levels are streamed to an unlinked temporary file as they arrive.
// A map_window decodes only the chunks it touches, from memory or the file (a pread). Decoding
// is lossless: every read equals the dense arrays' and the file's, bit for bit.
// Decode steps (rows, covers, page states) are small and stay in memory as they arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "captures/capture.h"

namespace luka::capture {

class LiveCapture final : public CaptureSink, public CaptureView {
 public:
  // Encoded map chunks held in memory at most; the rest go to the spill file.
  static constexpr std::size_t kDefaultMapMemory = std::size_t{512} << 20;
  explicit LiveCapture(std::size_t map_memory = kDefaultMapMemory);
  // The folder the map chunks beyond the budget go to ($TMPDIR, else /var/tmp, else /tmp).
  static std::filesystem::path spill_folder();
  ~LiveCapture() override;

  void begin(const Manifest& manifest, const Layout& layout, const std::vector<Token>& prompt,
             const std::vector<Segment>& segments) override;
  void map_rows(const MapRows& rows, const MapChunks* chunks) override;
  bool takes_chunks() const override { return true; }
  bool takes_step_chunks() const override { return false; }  // steps are kept as arrays
  void end_prefill() override {}
  void step(const Step& step, const StepChunks* chunks) override;
  void finish(const std::vector<Token>& trailing) override;

  // Replaces the manifest's generation JSON: a live run's settings change while it runs (the
  // Studio's live mode switches), and a save of the view carries them.
  void set_generation(std::string generation);

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

  // What the capture holds in memory: the map chunks kept there, their index, and the decode
  // steps' arrays (tokens and strings not counted).
  std::size_t memory_bytes() const;
  // Map chunk bytes held in memory (at most the budget, unless the spill file could not be
  // written), and in the spill file.
  std::size_t map_memory_bytes() const;
  std::uint64_t spilled_bytes() const;
  // Why map chunks stayed in memory beyond the budget (the spill file could not be created or
  // written); empty when they did not.
  std::string spill_error() const;

 private:
  class SpillFile;
  // One encoded chunk: in memory (`bytes`), in the spill file (`size` bytes at `offset`), or not
  // written (reads as 0).
  struct StoredChunk {
    std::shared_ptr<const std::vector<std::uint8_t>> bytes;
    std::uint64_t offset = 0;
    std::uint32_t size = 0;
    bool spilled = false;
    bool written() const { return bytes || spilled; }
  };
  struct LevelChunks {
    std::int64_t size = 0, chunk = 0, per_side = 0;  // the level's rows (= columns), chunk rows, chunks per side
    bool in_memory = true;                           // preferred place of its chunks
    std::vector<StoredChunk> chunks;                 // [heads][per_side][per_side]
  };

  const Step& step_at(std::int64_t step) const;  // with the lock held
  const LayerStep& layer_step(std::int64_t step, int layer) const;  // with the lock held
  // Stores the band's encoded chunks [heads][column chunk] of chunk row row0 / chunk.
  void store_chunks(int layer_index, int level, std::int64_t row0, std::vector<std::vector<std::uint8_t>> owned,
                    const std::vector<std::vector<std::uint8_t>>* given);

  std::size_t map_budget_;
  mutable std::mutex mu_;
  Summary summary_;
  std::vector<Token> tokens_;
  std::vector<Segment> segments_;
  std::map<std::pair<int, int>, LevelChunks> maps_;  // (layer index, level) -> chunks
  std::shared_ptr<SpillFile> spill_;                 // created at the first spilled chunk of a run
  std::uint64_t run_ = 0;                            // counts begin() calls
  std::size_t map_bytes_ = 0;                        // encoded chunk bytes held in memory
  std::uint64_t spilled_ = 0;                        // bytes in the spill file
  std::string spill_error_;
  std::size_t step_bytes_ = 0;                       // the decode steps' arrays
  std::vector<Step> steps_;
  std::vector<std::vector<PageInfo>> pages_;  // per recorded layer
};

}  // namespace luka::capture
