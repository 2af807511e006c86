// What the Studio's panels share on the UI thread: the session, the prompt being edited, and the
// selection and view settings. Panels are functions of this state, one file each.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/studio/data/choices.h"
#include "app/studio/data/map_fetcher.h"
#include "app/studio/data/recent_files.h"
#include "app/studio/data/run_controller.h"
#include "app/studio/data/tasks.h"
#include "app/studio/views/texture.h"
#include "captures/analysis.h"
#include "captures/survival.h"
#include "core/eval/calibration.h"
#include "core/prompt/interwoven_prompt.h"
#include "viz/token_text.h"

namespace luka::studio {

// A value read from the capture in the background (a task on the pool) and kept while its key
// (view, step, selection...) is the same, so a steady frame reads nothing and a changed one never
// waits: get() starts the read for a new key and returns the last value it has (possibly for an
// older key, or empty at first) until the read's outcome is handed back (TaskManager::poll, each
// frame). `make` runs on another thread: it must capture what it needs by value (the view's
// shared_ptr, indices), never UI state by reference; it may take a TaskContext& to report its
// progress and see a cancel. A read that throws leaves an empty value.
template <class T>
struct Cached {
  std::string key, running_key;
  T value{};
  Pending<T> job;
  template <class Make>
  const T& get(TaskManager& tasks, const std::string& k, Make make, const char* name = "reading the capture") {
    if (auto r = job.take()) {
      value = r->value ? std::move(*r->value) : T{};
      key = running_key;
    }
    if (k != key && !job.active()) {
      running_key = k;
      job.start(tasks, name, std::move(make));
    }
    return value;
  }
  bool fresh(const std::string& k) const { return k == key; }
  // The progress of the read in flight (0..1; < 0: none, or it cannot tell).
  double progress() const { return job.active() ? job.task().fraction() : -1; }
};

// "view pointer/complete steps/tokens": changes whenever the capture grows or is replaced.
std::string capture_key(const capture::CaptureView* view);

// The map's overlays at the selected step: pages, and the head's refined pages and heavy hitters.
struct MapOverlay {
  std::vector<capture::PageInfo> pages;
  std::vector<std::int64_t> refined, heavy;
  std::vector<std::int64_t> selected;  // a Kascade step's top-k set (the keys it attended)
  bool clustered = false;              // the layer ran clustered at the step: its pages are in use
};

// An analysis run off the UI thread (captures/analysis.h), or why it failed.
template <class T>
struct AnalysisOutcome {
  std::shared_ptr<const T> value;
  std::string error;
};

struct HeatmapView {
  // Visible region of the full map in token coordinates: top-left corner and tokens per screen
  // pixel across (keys) and down (queries); 0: fit the map to the panel.
  double x0 = 0, y0 = 0, tokens_per_pixel = 0, tokens_per_pixel_y = 0;
  // The map was fitted and the user has not zoomed or panned it since: it stays fitted as a live
  // run grows (a run is first shown at its prefill, before its decode steps exist).
  bool fitted = false;
  MapLayout layout = MapLayout::kAuto;
  // Decode rows: first key and keys per pixel across (0: fit), first visible step - 1 (may be
  // fractional) and pixels per step down (0: fit), and whether the view follows the newest step.
  double rows_x0 = 0, rows_keys_per_pixel = 0, rows_y0 = 0, row_px = 0;
  bool rows_follow = true;
  bool rows_fitted = false;  // as `fitted`, for the rows' keys across
  // The token search box: its text, the token found (-1: none) and what the search said.
  std::string search;
  std::int64_t found = -1;
  std::string search_note;
  bool center_on_found = false;  // scroll the map to the found token at the next frame
  bool fetched_decode_rows = false;
  std::int64_t fetched_first = 0, fetched_last = 0;
  int fetched_pool = 0;
  viz::ColorScale scale;  // of the image shown, for the colour bar
  // Where the map was last drawn, in screen pixels, and its transform (scripts: print_geometry).
  // Across: key = key0 + (x - left) * keys_per_pixel. Down, full map: query = row0 + (y - top) *
  // rows_per_pixel; decode rows (top: the first step row's top): step = floor(row0 + (y - top) *
  // rows_per_pixel) + 1.
  struct Geometry {
    bool decode_rows = false;
    float left = 0, top = 0, width = 0, height = 0;
    double key0 = 0, keys_per_pixel = 0, row0 = 0, rows_per_pixel = 0;
  } geometry;
  // Zoom in by `factor` (both layouts, about the top-left corner), or fit the map to the panel.
  void zoom(double factor) {
    tokens_per_pixel /= factor;
    tokens_per_pixel_y /= factor;
    rows_keys_per_pixel /= factor;
    fitted = rows_fitted = false;
  }
  void fit() {
    tokens_per_pixel = tokens_per_pixel_y = rows_keys_per_pixel = row_px = 0;
    rows_follow = true;
  }
  // The capture the zoom was last set for, and its prompt length: a new run, or a capture of
  // another length, refits; the same run growing keeps the zoom (draw_heatmap_panel).
  // (Held weakly: a new capture may come at a freed one's address.)
  std::weak_ptr<const capture::CaptureView> zoom_view;
  bool zoom_seen = false;  // a capture has been shown since start
  std::int64_t zoom_prompt = -1;
  bool log_scale = true;
  double log_min = 1e-4;
  // The texture and the window it shows, refetched when any of these change.
  Texture texture;
  const capture::CaptureView* fetched_view = nullptr;
  int fetched_layer = -1, fetched_head = -1, fetched_level = -1;
  std::int64_t fetched_r0 = -1, fetched_c0 = -1, fetched_rows = 0, fetched_cols = 0, fetched_steps = -1;
  bool fetched_log = true;
  figures::MapView view = figures::MapView::kEffective, fetched_view_kind = figures::MapView::kEffective;
  float diff_max = 0;
  MapMode mode = MapMode::kMap;
  bool overlays = true;  // page grid, refined pages and heavy hitters at the selected step
  std::vector<std::unique_ptr<Texture>> thumbs;  // head grid / layer strip thumbnails
  // Layer strip: per thumbnail, the layer whose Kascade top-k it attended at the last step (itself
  // for an anchor; -1 when not Kascade), shown as "← source" under its name.
  std::vector<int> thumb_sources;
  std::string thumbs_key;
  struct Thumbnails {
    std::vector<viz::Image> images;
    std::vector<int> sources;
  };
  Pending<Thumbnails> thumbs_job;  // thumbnails being read
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

// One recorded layer at a decode step as the fidelity tab shows it: the layer's mode and its
// metrics, means over the recorded heads (the fidelity ones over the heads where the dense shadow
// ran); NaN where the capture has no value (no shadow, no covers, layer not recorded there).
struct LayerFidelity {
  enum Metric { kKl, kRecall, kTop32, kRelL2, kCover, kRefined, kMs, kCount };
  bool recorded = false;
  std::int8_t mode = 0;
  double value[kCount] = {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN};
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
};

// The cover timeline's "A ≠ B" raster (comparing): the cells of the steps both runs have whose
// state differs between them, marked over A's states dimmed; rebuilt when either raster changes.
struct TimelineDifference {
  Texture texture;
  std::string key;  // the two rasters' keys it was built from
  std::int64_t steps = 0, tokens = 0, differing = 0;
};

// A second capture beside the map (the compare field): its own canvas, whose zoom, layer, head
// and view follow the main map's, showing either that capture or the difference B - A of the
// effective attention of the two (same prompt tokens; the steps both have).
struct CompareState {
  std::string path;
  std::shared_ptr<const capture::CaptureView> view;
  // The controller's last compare run (B: A's tokens under another config), once taken as `view`.
  std::shared_ptr<const capture::CaptureView> adopted;
  std::shared_ptr<const capture::CaptureView> adopted_for;  // the view (A) whose tokens it ran
  std::string note;      // the capture's name, or why it did not open
  // The file being opened as B, on the "io" lane (a large capture takes a moment to open).
  Pending<std::shared_ptr<const capture::CaptureView>> opening;
  bool difference = false;  // the right canvas shows B - A instead of B
  HeatmapView map;
  Cached<std::vector<capture::Token>> tokens;
  Cached<std::vector<capture::Segment>> segments;
  Cached<MapOverlay> overlay;
  Cached<std::vector<std::string>> row_cover;
  TimelineView timeline;                              // its cover timeline, under the main one
  // The timeline shows where the two runs' cover states differ instead of B's own raster.
  bool timeline_difference = false;
  TimelineDifference timeline_diff;
  Cached<std::vector<LayerFidelity>> fidelity;  // its fidelity and cost, differenced with the main one's
};

// The model panel's device picker: auto, cpu, then each GPU the CUDA plugin sees (listed off the
// UI thread: loading the plugin takes a moment). `values` are --device values, `labels` what the
// picker shows (a GPU's name and free memory); `note` says why no GPU is listed.
struct DeviceChoices {
  std::vector<std::string> values, labels;
  std::string note;
};
DeviceChoices list_devices();

// Where a panel drew a thing, in screen pixels, and in which frame (ImGui's frame count): scripts
// report it (print_geometry) and point the mouse at it (hover).
struct DrawnRect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int frame = -1;
  std::string text;  // what it says, for things that show a value (a table cell)
};

// Read-only text laid out for drawing (viz::display_lines), by wrap width and text, so a steady
// frame shapes nothing.
struct DisplayTextCache {
  std::map<std::pair<int, std::string>, std::vector<viz::VisualLine>> lines;
};

// [SECTION] the panels' state
// Each panel's settings and caches in a struct of its own; what several panels share (the
// selection, the capture's tokens and segments) sits in UiState itself.

// The model panel: what the next Load uses.
struct ModelPanel {
  std::string path;
  DType dtype = DType::kF32;  // fp16 computes on the GPU only
  WeightFormat weights = WeightFormat::kAuto;  // a GGUF file's linear weights (--weights)
  int threads = 0;  // LibTorch threads, 0: all cores
  std::string device = "auto";  // the --device value the next load uses
  Cached<DeviceChoices> devices;
};

// The prompt panel's prompt: the interwoven prompt or free text.
struct PromptPanel {
  InterwovenPrompt interwoven;
  PromptMode mode = PromptMode::kInterwoven;
  std::string free_text = "The capital of France is";
  bool chat = false;
  bool query_agnostic = false;  // the segments prefilled before the question (RunRequest::query_agnostic)
  // The pattern field: the prompt's own pattern whenever that changes (opened, built, a WikiSalad
  // example), the user's edit in between. pattern_shown is the prompt pattern last mirrored.
  std::string pattern_edit, pattern_shown;
  std::string file = "prompt.json";  // the prompt file field (open and save)
  std::string notice;                // the last prompt file or builder action's outcome
  int editing_segment = -1;          // the segment whose text is in the editor (-1: all shown wrapped)
  std::string wikisalad_path = "../shared/data/wikisalad/easy_2topic_short.json";
  int wikisalad_example = 0;
  // A replayed capture's prompt: each run of tokens at most kReplayRunLines lines (the whole run in
  // its tooltip), or every run in full.
  static constexpr std::size_t kReplayRunLines = 2;
  bool replay_full_text = false;
  // What the panel drew last frame, for scripts: the prompt text shown (the capture's own in
  // replay), and its read-only text as drawn (shaped, in visual order; lines joined by '\n'): the
  // replay's prompt, or the free text's right-to-left preview.
  std::string shown, drawn;
};

// The prompt panel's run controls: what the Run buttons (and Space, and scripts) start.
struct RunSettings {
  int max_new_tokens = 32;
  std::string record;  // what live runs record (RunRequest::record); "": everything
  SamplingParams sampling;
  // A `luka calibrate` file (--calibration, or the script's `calibration FILE`) attached to the
  // manifest of the runs started here (RunRequest::calibration), as compact JSON, and its path.
  std::string calibration, calibration_path;
  bool locked = false;  // the run controls were off last frame (a replay)
};

// Capture files (prompt panel): the path field of Open and Save as, the recently opened or saved
// files, and the open or save whose success adds its file to that list.
struct CaptureFiles {
  std::string path = "capture.h5";
  RecentFiles recent;
  std::string open_pending, save_pending;
};

// What every panel shows: the layer and head, the decode step, and the generated token hovered in
// the output panel.
struct Selection {
  int layer = 0, head = 0;
  std::int64_t step = 0;  // selected decode step for rows (0: the latest)
  // The generated token under the cursor in the output panel (-1: none): the output panel sets it
  // while it is hovered, the map marks the row that produced it and clears it every frame.
  std::int64_t hover_token = -1;
};

// The layers table's columns at one step, per layer ("-": not recorded), and the tokens paged
// of the tokens so far (the parameters' note on clustered layers).
struct LayerCosts {
  bool have = false;  // read for this capture and step
  std::vector<std::string> cover, refined, ms;
  std::vector<std::int64_t> paged, tokens;
};

// The layers panel.
struct LayersPanel {
  int mixed_a = 2, mixed_b = 2;  // the mixed(a,b) preset
  std::string notice;            // the last error (a bad preset or parameter)
  Cached<LayerCosts> costs;
  std::string pending_config;  // the last session's LuKA config (JSON), applied once a model is loaded
};

// The map panel, besides its canvas (HeatmapView) and the compare canvas.
struct MapPanel {
  std::string figure_path = "luka-figure.png";
  Pending<std::string> export_job;  // an export being written: its outcome for `notice`
  Cached<MapOverlay> overlay;
  Cached<std::vector<std::string>> row_cover;  // decode rows: the hovered step's cover, in words
  // As drawn last frame, for scripts: the tooltip (hover: the tokens, the value, a decode step's
  // cover), and the message over a map still computing (the prefill's progress).
  std::string tooltip, computing;
};

// The cover timeline tab, and the tokens tracked there (the "track" field, as `luka inspect
// --track`): marked on the map and the timeline, with their states at the selected step.
struct TimelinePanel {
  TimelineView view;
  std::string track_spec;
  std::optional<capture::TokenSpan> track;
  std::string track_note;
  // As drawn last frame, for scripts: the hover's tooltip, and where the lower raster (B's, or
  // A ≠ B) was drawn with its size in cells (hover timeline).
  std::string tooltip;
  struct Lower {
    bool difference = false;
    float left = 0, top = 0, width = 0, height = 0;
    std::int64_t tokens = 0, steps = 0;
    int frame = -1;
  } lower;
};

// The output tab: the selected step's row.
struct OutputPanel {
  Cached<std::vector<float>> row;
  Cached<std::string> row_label;
};

// The fidelity and cost tab.
struct FidelityPanel {
  Cached<std::vector<LayerFidelity>> layers;  // per recorded layer
};

// The Topics and Head scores tabs.
struct AnalysisPanel {
  Cached<AnalysisOutcome<capture::TopicAnalysis>> topics;
  Cached<AnalysisOutcome<capture::HeadScoreAnalysis>> head_scores;
  HeadScoreSource source = HeadScoreSource::kPrefill;
  // The Topics tab's decode leakage: the topic it is shown against (-1: the question's, that of the
  // prompt's last segment, as luka inspect's --decode-topic default).
  int leakage_topic = -1;
  // The calibration the table shows: the view's, parsed once per capture.
  std::string calibration_of;  // the view `calibration_table` was parsed from (view_calibration)
  std::shared_ptr<const eval::Calibration> calibration_table;
  std::string calibration_error;
};

// The bottom panel's tabs.
enum class BottomTab { kOutput, kTimeline, kFidelity, kTopics, kHeadScores };

// The window: the panels' split, as fractions of the window (the left column's width, 0: 34% of
// the window, at most 420 px; the prompt panel's bottom and the map panel's bottom; dragging a
// panel's edge moves them and the session keeps them), a tab to bring forward, the help overlay.
struct WindowLayout {
  struct Split {
    float left = 0, prompt = 0.58f, map = 0.74f;
  } split;
  std::optional<BottomTab> select_tab;  // selected at the next frame (scripts, shortcuts)
  bool show_shortcuts = false;          // the keyboard shortcuts' help overlay (F1)
  float model_height = 0;               // what the model panel's content took last frame (0: not drawn yet)
};

// Timing (bench/run_studio_bench.sh): frame times while measuring, and when the first map was drawn.
struct FrameTiming {
  int measure_frames = 0;
  std::vector<double> frame_ms;
  double first_map_ms = -1;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

struct UiState {
  TaskManager tasks;  // all background work; poll()ed at the start of each frame
  RunController controller{tasks};
  ModelPanel model;
  PromptPanel prompt;
  RunSettings run;
  CaptureFiles files;
  Selection selection;
  LayersPanel layers;
  HeatmapView heatmap;  // the map's canvas
  CompareState compare;
  MapPanel map;
  TimelinePanel timeline;
  OutputPanel output;
  FidelityPanel fidelity;
  AnalysisPanel analysis;
  WindowLayout window;
  FrameTiming timing;
  std::string notice;  // a one-line message for the user (errors from UI actions)
  // Capture reads the panels share, refreshed when the capture changes.
  Cached<std::vector<capture::Token>> tokens;
  Cached<std::vector<capture::Segment>> segments;
  DisplayTextCache display_text;
  // Scripts: warp the cursor here before the next frame.
  std::optional<std::pair<double, double>> move_mouse;
  // Scripts: a left click at (x, y) through ImGui's input, one frame each: over the point (so
  // ImGui sees the hover), button down, button up (a button fires on release). `frame` is the
  // next one to feed; the script waits until all three are fed.
  struct ScriptedClick {
    double x = 0, y = 0;
    int frame = 0;
  };
  std::optional<ScriptedClick> click;
  // The background work list as drawn last frame: one line per task, "NAME: TEXT PERCENT".
  std::string task_list_drawn;
  // Things drawn last frame, by name (print_geometry): "layers_panel", "mixed_button",
  // "topics_matrix", "timeline", "timeline_bands", "thumbnail/I", "output_token/TOKEN",
  // "prefill_bar", "head_score/LAYER/HEAD/COLUMN" (a visible cell's text), "task_list" (the
  // background work list), "timeline_diff" and "timeline_differs_swatch" (comparing),
  // "fidelity_delta/LAYER/METRIC" (a Δ cell's text, with its text).
  std::map<std::string, DrawnRect> drawn;
  void mark_drawn(const std::string& name, float x0, float y0, float x1, float y1, std::string text = {});
  // The last ImGui item's rectangle (a button the script's `click` presses).
  void mark_item_drawn(const std::string& name);
};

void draw_model_panel(UiState& ui);
void draw_prompt_panel(UiState& ui);
void draw_layers_panel(UiState& ui);
// The layers panel's mixed(a,b) button: applies ui.layers.mixed_a/b, or says why not in ui.layers.notice.
void apply_mixed_preset(UiState& ui);
void draw_heatmap_panel(UiState& ui);
// Background work that has run longer than 0.2 s, with its progress and a Cancel button, in a
// corner of the window (the model's load and run show in the model panel instead).
void draw_task_list(UiState& ui);
// No background work other than the model's is waiting, running or waiting to be handed back
// (scripts wait for this before a screenshot).
bool background_idle(const UiState& ui);
// The run the Run buttons (and Space, and scripts) start from the UI's settings: the prompt or
// free text, chat, new tokens, sampling and what to record.
// Reads a `luka calibrate` file into ui.run.calibration (compact JSON) for the runs started next;
// throws luka::Error naming the file when it is not a calibration.
void attach_calibration(UiState& ui, const std::filesystem::path& file);
// The calibration attached to `view`'s capture, parsed once per capture (null: none, or
// ui.analysis.calibration_error says why it cannot be read).
std::shared_ptr<const eval::Calibration> view_calibration(UiState& ui, const capture::CaptureView& view);
// The model panel's load settings: dtype, threads and weight format.
LoadOptions load_options(const UiState& ui);
RunRequest run_request(const UiState& ui, bool paused, bool force = false);

// The track field's action: parses ui.timeline.track_spec against the view's tokens ("A-B", "A" or
// "text:STRING"; empty clears); an error goes to ui.timeline.track_note.
void set_track(UiState& ui, const capture::CaptureView& view);
// Opens ui.compare.path as the capture to compare with (empty: closes it); the outcome goes to
// ui.compare.note.
void open_compare(UiState& ui);
// Takes the outcome of open_compare's read, once it is in: B, or why it did not open.
void take_compare(UiState& ui);
// Starts B as a second run of the view's tokens (RunController::run_compare) under `choice`: a
// preset's name, or "layers panel" for the config the layers panel shows. The compare canvas
// takes B when it starts; the outcome goes to the controller's Status::compare.
void run_compare(UiState& ui, const std::string& choice);
// The choices run_compare offers, in the order of the Run B menu.
std::vector<std::string> compare_choices(const UiState& ui);
// The search box's action: the next token matching ui.heatmap.search, marked and scrolled to.
void run_search(UiState& ui, const capture::CaptureView& view);
void draw_output_panel(UiState& ui);
void draw_timeline_panel(UiState& ui);
void draw_fidelity_panel(UiState& ui);
void draw_topics_panel(UiState& ui);
void draw_head_scores_panel(UiState& ui);
// The head scores of `view` (every recorded layer and head), computed off the UI thread once per
// capture state; empty until ready.
const AnalysisOutcome<capture::HeadScoreAnalysis>& head_scores(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view);
// Small multiples inside the heatmap panel: heads of the layer (heads = true) or layers of the head.
void draw_thumbnails(UiState& ui, const capture::CaptureView& view, bool heads);

// Writes the selected layer and head as a figure (format by extension); the outcome goes to ui.notice.
void export_figure(UiState& ui, const std::filesystem::path& path);

// "#rrggbb" -> packed ImGui colour (alpha 255); grey for anything else.
unsigned int parse_colour(const std::string& hex);

// A token's piece as the panels show it: viz::token_text (partial UTF-8 as <0xNN> bytes, controls
// escaped) with emoji beyond U+FFFF at the private-use code points the font atlas draws them at
// (emoji_glyphs.h) and other code points beyond U+FFFF as <U+XXXXX>, Arabic letters joined and
// right-to-left runs in visual order; at most max_chars characters (0: all).
std::string token_label(const std::string& piece, std::size_t max_chars = 0);

// Read-only text of several lines (a prompt shown, generated text; never an editable buffer) as
// the panels draw it: token_label's characters, Arabic joined over the whole text and each
// right-to-left paragraph in visual order line by line, wrapped to `width` pixels of the current
// font (viz::display_lines).
const std::vector<viz::VisualLine>& display_lines(DisplayTextCache& cache, const std::string& text, float width);
// Draws `text` so at the cursor, wrapped to the space left on the line, right-to-left paragraphs
// aligned right; returns the lines drawn, joined by '\n'.
std::string draw_display_text(DisplayTextCache& cache, const std::string& text);
// The same, at most `max_lines` lines (0: all): when the text has more, the last line drawn ends in
// an ellipsis (begins with one, right to left) and *clipped is set.
std::string draw_display_text(DisplayTextCache& cache, const std::string& text, std::size_t max_lines, bool* clipped);

// The first token after `after` (wrapping around) whose label contains `text`, ignoring ASCII
// case; -1 when none does or `text` is empty.
std::int64_t find_token(const std::vector<capture::Token>& tokens, const std::string& text, std::int64_t after);

}  // namespace luka::studio
