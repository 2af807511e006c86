// A run's capture held in memory: the Studio's live view. It is a CaptureSink fed by the
// CaptureSession's I/O thread and a CaptureView read by the UI thread; a mutex guards the state,
// and every query copies out what it returns.
#pragma once

#include <map>
#include <mutex>

#include "captures/capture.h"

namespace luka::capture {

class LiveCapture final : public CaptureSink, public CaptureView {
 public:
  void begin(const Manifest& manifest, const Layout& layout, const std::vector<Token>& prompt,
             const std::vector<Segment>& segments) override;
  void map_rows(const MapRows& rows) override;
  void end_prefill() override {}
  void step(const Step& step) override;
  void finish(const std::vector<Token>& trailing) override;

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

 private:
  const Step& step_at(std::int64_t step) const;  // with the lock held
  const LayerStep& layer_step(std::int64_t step, int layer) const;  // with the lock held
  const std::vector<std::uint16_t>& level_map(int layer_index, int level) const;

  mutable std::mutex mu_;
  Summary summary_;
  std::vector<Token> tokens_;
  std::vector<Segment> segments_;
  std::map<std::pair<int, int>, std::vector<std::uint16_t>> maps_;  // (layer index, level) -> [heads][S][S]
  std::vector<Step> steps_;
  std::vector<std::vector<PageInfo>> pages_;  // per recorded layer
};

}  // namespace luka::capture
