// What the Studio's panels share on the UI thread: the session, the prompt being edited, and the
// selection and view settings. Panels are functions of this state, one file each.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/studio/map_fetcher.h"
#include "app/studio/session.h"
#include "app/studio/texture.h"
#include "core/prompt/interwoven_prompt.h"

namespace luka::studio {

// Capture reads in flight on background threads (scripts wait for none before a screenshot).
std::atomic<int>& async_reads();

// A value read from the capture off the UI thread and kept while its key (view, step,
// selection...) is the same, so a steady frame reads nothing and a changed one never waits:
// get() starts the read for a new key and returns the last value it has (possibly for an older
// key, or empty at first) until the read is done. `make` runs on another thread: it must capture
// what it needs by value (the view's shared_ptr, indices), never UI state by reference.
template <class T>
struct Cached {
  std::string key, running_key;
  T value{};
  std::future<T> job;
  template <class Make>
  const T& get(const std::string& k, Make make) {
    if (job.valid() && job.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      try {
        value = job.get();
      } catch (const std::exception&) {
        value = T{};
      }
      key = running_key;
    }
    if (k != key && !job.valid()) {
      running_key = k;
      ++async_reads();
      job = std::async(std::launch::async, [make]() mutable {
        struct Done {
          ~Done() { --async_reads(); }
        } done;
        return make();
      });
    }
    return value;
  }
  bool fresh(const std::string& k) const { return k == key; }
};

// "view pointer/complete steps/tokens": changes whenever the capture grows or is replaced.
std::string capture_key(const capture::CaptureView* view);

struct HeatmapView {
  // Visible region in token coordinates: top-left corner and tokens per screen pixel (0: fit).
  double x0 = 0, y0 = 0, tokens_per_pixel = 0;
  bool log_scale = true;
  double log_min = 1e-4;
  // The texture and the window it shows, refetched when any of these change.
  Texture texture;
  const capture::CaptureView* fetched_view = nullptr;
  int fetched_layer = -1, fetched_head = -1, fetched_level = -1;
  std::int64_t fetched_r0 = -1, fetched_c0 = -1, fetched_rows = 0, fetched_cols = 0, fetched_steps = -1;
  bool fetched_log = true;
  int view = 0, fetched_view_kind = 0;  // figures::MapView: effective, dense, difference
  float diff_max = 0;
  int mode = 0;  // 0 map, 1 head grid, 2 layer strip
  bool overlays = true;  // page grid, refined pages and heavy hitters at the selected step
  std::vector<std::unique_ptr<Texture>> thumbs;  // head grid / layer strip thumbnails
  std::string thumbs_key;
  std::future<std::vector<viz::Image>> thumbs_job;  // thumbnails being read
  std::vector<float> values;  // the fetched window, for hover read-out
  MapFetcher fetcher;
  std::optional<MapRequest> requested;  // the window last asked for
  std::string error;
};

struct TimelineData {
  std::vector<std::uint8_t> codes;  // [steps][tokens] cover states, for hover
  std::int64_t steps = 0, tokens = 0;
  viz::Image image;
  std::string error;
};

struct TimelineView {
  Texture texture;
  Cached<TimelineData> data;
  std::string uploaded;  // the key whose image the texture holds
};

// The model panel's device picker: auto, cpu, then each GPU the CUDA plugin sees (listed off the
// UI thread: loading the plugin takes a moment). `values` are --device values, `labels` what the
// picker shows (a GPU's name and free memory); `note` says why no GPU is listed.
struct DeviceChoices {
  std::vector<std::string> values, labels;
  std::string note;
};
DeviceChoices list_devices();

struct UiState {
  Session session;
  std::string model_path;
  int dtype = 0;    // 0 fp32, 1 bf16, 2 fp16 (GPU only)
  int threads = 0;  // LibTorch threads, 0: all cores
  std::string device = "auto";  // the --device value the next load uses
  Cached<DeviceChoices> devices;
  InterwovenPrompt prompt;
  bool chat = false;
  int free_text_mode = 0;  // 0: the interwoven prompt, 1: free text
  std::string free_text = "The capital of France is";
  // The pattern field: the prompt's own pattern whenever that changes (opened, built, a WikiSalad
  // example), the user's edit in between. pattern_shown is the prompt pattern last mirrored.
  std::string pattern_edit, pattern_shown, prompt_path = "prompt.json", prompt_notice;
  std::string wikisalad_path = "../shared/data/wikisalad/easy_2topic_short.json";
  int wikisalad_example = 0;
  int max_new_tokens = 32;
  SamplingParams sampling;
  int layer = 0, head = 0;
  int mixed_a = 2, mixed_b = 2;  // the layers panel's mixed(a,b) preset
  std::int64_t step = 0;  // selected decode step for rows (0: the latest)
  HeatmapView heatmap;
  TimelineView timeline;
  std::string figure_path = "luka-figure.png";
  std::future<std::string> export_job;  // an export being written: its outcome for `notice`
  bool show_timeline = false;
  bool show_fidelity = false;
  // Timing (bench/run_studio_bench.sh): frame times while measuring, and when the first map was drawn.
  int measure_frames = 0;
  std::vector<double> frame_ms;
  double first_map_ms = -1;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();  // select the timeline tab at the next frame (scripts)
  std::string notice;     // a one-line message for the user (errors from UI actions)
  // Capture reads the panels share, refreshed when the capture changes.
  Cached<std::vector<capture::Token>> tokens;
  Cached<std::vector<capture::Segment>> segments;
  Cached<std::vector<std::string>> layer_costs;       // layers panel: cover, refined, ms per layer
  Cached<std::vector<capture::StepMetrics>> step_metrics;  // fidelity panel: per recorded layer
  Cached<std::vector<float>> output_row;              // output panel: the selected step's row
  Cached<std::string> output_row_label;
  struct Overlay {
    std::vector<capture::PageInfo> pages;
    std::vector<std::int64_t> refined, heavy;
  };
  Cached<Overlay> overlay;
};

void draw_model_panel(UiState& ui);
void draw_prompt_panel(UiState& ui);
void draw_layers_panel(UiState& ui);
void draw_heatmap_panel(UiState& ui);
void draw_output_panel(UiState& ui);
void draw_timeline_panel(UiState& ui);
void draw_fidelity_panel(UiState& ui);
// Small multiples inside the heatmap panel: heads of the layer (heads = true) or layers of the head.
void draw_thumbnails(UiState& ui, const capture::CaptureView& view, bool heads);

// Writes the selected layer and head as a figure (format by extension); the outcome goes to ui.notice.
void export_figure(UiState& ui, const std::filesystem::path& path);

// "#rrggbb" -> packed ImGui colour (alpha 255); grey for anything else.
unsigned int parse_colour(const std::string& hex);

}  // namespace luka::studio
