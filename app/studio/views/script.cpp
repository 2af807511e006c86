// Index of this file:
//   [SECTION] commands that hold their line until something happens (up to a timeout)
//   [SECTION] the model, runs and layer modes
//   [SECTION] files, prompts and replay
//   [SECTION] the map, its views, search and tracking
//   [SECTION] checks of the capture a run or replay shows
//   [SECTION] the analysis tabs

#include "app/studio/views/script_commands.h"

#include "core/device/device.h"
#include "core/util/text_file.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include <imgui.h>

#include "app/figures/capture_figure.h"
#include "app/studio/views/session_state.h"
#include "app/studio/views/shortcuts.h"
#include "core/prompt/prompt_file.h"
#include "core/prompt/wikisalad.h"
#include "core/util/error.h"

namespace luka::studio::script_detail {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

AttentionMode parse_mode(const std::string& s, const std::string& where) {
  if (s == "dense") return AttentionMode::kDense;
  if (s == "lined") return AttentionMode::kLined;
  if (s == "clustered") return AttentionMode::kClustered;
  if (s == "kascade") return AttentionMode::kKascade;
  if (s == "press") return AttentionMode::kPress;
  if (s == "quest") return AttentionMode::kQuest;
  fail(where, "unknown mode '" + s + "' (dense, lined, clustered, kascade, press, quest)");
}

// [SECTION] commands that hold their line until something happens (up to a timeout)

// Saves the current view as a capture file and holds this line until it is written.
Flow save_capture(Context& c) {
  if (!c.waiting) {
    c.ui.files.save_pending = c.arg(1);
    c.ui.controller.save_capture(c.arg(1));
  }
  const Status s = c.ui.controller.status();
  if (s.saving) {
    if (c.past(300)) fail(c.where, "save_capture timed out");
    return Flow::kHold;
  }
  c.waiting = false;
  if (s.save_failed) fail(c.where, s.save_message);
  return Flow::kNext;
}

// Holds the line until the last frame drew a text containing the rest of the line, for up to 10
// s: what a capture shows is read off the UI thread. `what` says where it was drawn.
Flow expect_text(Context& c, const std::string& got, const char* what) {
  const std::string want = c.rest(1);
  if (got.find(want) == std::string::npos) {
    if (c.past(10)) fail(c.where, std::string(what) + " '" + got.substr(0, 400) + "', expected it to contain '" + want + "'");
    return Flow::kHold;
  }
  return c.done();
}

// Points the mouse at a generated token in the output panel (hover output TOKEN), at a decode
// step's row in the decode-rows view (hover step STEP), or at a cell of the cover timeline's A ≠ B
// raster (hover timeline_diff STEP TOKEN), once they are drawn (up to 10 s).
Flow hover(Context& c) {
  UiState& ui = c.ui;
  std::optional<std::pair<double, double>> at;
  std::string why;
  if (c.arg(1) == "output") {
    const auto it = ui.drawn.find("output_token/" + c.arg(2));
    if (it != ui.drawn.end() && it->second.frame == ImGui::GetFrameCount())
      at = std::make_pair((it->second.x0 + it->second.x1) / 2.0, (it->second.y0 + it->second.y1) / 2.0);
    else why = "generated token " + c.arg(2) + " is not in the output panel";
  } else if (c.arg(1) == "step") {
    const HeatmapView::Geometry& g = ui.heatmap.geometry;
    const double y = g.top + (c.number(2) - 0.5 - g.row0) / g.rows_per_pixel;
    if (!g.decode_rows || g.rows_per_pixel <= 0) why = "the map is not in the decode-rows layout";
    else if (y < g.top || y >= g.top + g.height) why = "step " + c.arg(2) + " is not in view";
    else at = std::make_pair(g.left + g.width / 4.0, y);  // a quarter across: clear of the decode-start line
  } else if (c.arg(1) == "timeline_diff") {
    const TimelinePanel::Lower& r = ui.timeline.lower;
    const double s = c.number(2), t = c.number(3);
    if (r.frame != ImGui::GetFrameCount() || !r.difference) why = "the cover timeline's A ≠ B raster is not drawn";
    else if (s < 1 || s > static_cast<double>(r.steps) || t < 0 || t >= static_cast<double>(r.tokens)) why = "step " + c.arg(2) + " token " + c.arg(3) + " is not in the raster";
    else at = std::make_pair(r.left + (t + 0.5) * r.width / static_cast<double>(r.tokens), r.top + (s - 0.5) * r.height / static_cast<double>(r.steps));
  } else {
    fail(c.where, "hover output TOKEN, hover step STEP or hover timeline_diff STEP TOKEN");
  }
  if (!at) {
    if (c.past(10)) fail(c.where, "hover: " + why);
    return Flow::kHold;
  }
  ui.move_mouse = at;
  return c.done();
}

// expect_drawn NAME TEXT...: the last frame drew NAME (print_geometry's names) with a text
// containing TEXT (empty: drawn at all); holds the line up to 10 s.
Flow expect_drawn(Context& c) {
  const std::string want = c.rest(2);
  const auto it = c.ui.drawn.find(c.arg(1));
  const bool drawn = it != c.ui.drawn.end() && it->second.frame == ImGui::GetFrameCount();
  if (!drawn || it->second.text.find(want) == std::string::npos) {
    if (c.past(10))
      fail(c.where, drawn ? c.arg(1) + " shows '" + it->second.text + "', expected it to contain '" + want + "'"
                          : c.arg(1) + " is not drawn");
    return Flow::kHold;
  }
  return c.done();
}

// Clicks a thing the last frame drew by name (print_geometry lists them, e.g. prompt_file_open)
// through ImGui's own mouse input, as a user's click: the widget's ID decides which button takes
// it. Holds the line until the click is fed (three frames), once the thing is drawn (up to 10 s).
Flow click(Context& c) {
  if (!c.waiting) {
    const auto it = c.ui.drawn.find(c.arg(1));
    if (it == c.ui.drawn.end() || it->second.frame != ImGui::GetFrameCount()) {
      if (!c.click_wait) c.click_wait = Clock::now();
      if (seconds_since(*c.click_wait) > 10) fail(c.where, "click: nothing named '" + c.arg(1) + "' is drawn");
      return Flow::kHold;
    }
    c.click_wait.reset();
    const DrawnRect& r = it->second;
    c.ui.click = UiState::ScriptedClick{(r.x0 + r.x1) / 2.0, (r.y0 + r.y1) / 2.0, 0};
    c.waiting = true;
    return Flow::kHold;
  }
  if (c.ui.click) return Flow::kHold;
  return c.done();
}

// wait_compare [SECONDS]: until B's run is over (default 300 s); fails if it failed.
Flow wait_compare(Context& c) {
  const Status s = c.ui.controller.status();
  if (s.compare.failed) fail(c.where, s.compare.message);
  if (s.compare.running || c.ui.compare.adopted != c.ui.controller.compare_view()) {
    if (c.past(c.w.size() > 1 ? c.number(1) : 300)) fail(c.where, "wait_compare timed out");
    return Flow::kHold;
  }
  return c.done();
}

// The run waits: until the controller is idle, paused (or idle), holding its prefill, or has
// made N steps; [SECONDS] (default 300) is the timeout.
Flow wait_until(Context& c, Until until) {
  const Status s = c.ui.controller.status();
  const bool busy = c.ui.controller.busy(), loading = s.state == RunState::kLoading;
  bool done = false;
  std::size_t timeout_arg = 1;
  switch (until) {
    case Until::kIdle:
      done = !busy;
      break;
    case Until::kPaused:
      done = s.state == RunState::kPaused || !busy;
      break;
    case Until::kPrefillHeld:
      done = s.prefill_held;
      if (!done && !busy && !loading) fail(c.where, "the run ended without holding its prefill (" + s.message + ")");
      break;
    case Until::kSteps: {
      const auto view = c.ui.controller.view();
      done = view && view->summary().complete_steps >= static_cast<std::int64_t>(c.number(1));
      timeout_arg = 2;
      if (!done && !busy && !loading) fail(c.where, "the run ended before " + c.arg(1) + " steps (" + s.message + ")");
      break;
    }
  }
  if (s.state == RunState::kError) fail(c.where, "the session failed: " + s.message);
  if (!done) {
    if (c.past(c.w.size() > timeout_arg ? c.number(timeout_arg) : 300)) fail(c.where, c.cmd() + " timed out");
    return Flow::kHold;
  }
  return c.done();
}

// expect_head_scores ROWS: the Head scores table's rows, once computed (held until then).
Flow expect_head_scores(Context& c) {
  const auto view = c.view("expect_head_scores: no run or capture");
  const auto& out = head_scores(c.ui, view);
  if (!c.ui.analysis.head_scores.fresh(capture_key(view.get()))) {  // still computing
    if (c.past(300)) fail(c.where, "expect_head_scores timed out");
    return Flow::kHold;
  }
  c.waiting = false;
  if (!out.error.empty()) fail(c.where, "head scores: " + out.error);
  const std::size_t rows = out.value ? out.value->heads.size() : 0;
  if (static_cast<double>(rows) != c.number(1)) fail(c.where, "head scores have " + std::to_string(rows) + " rows, expected " + c.arg(1));
  return Flow::kNext;
}

// compare PATH|off: a capture to compare with, or none; holds the line until it is open.
Flow compare(Context& c) {
  if (!c.waiting) {
    c.ui.compare.path = c.arg(1) == "off" ? "" : c.arg(1);
    open_compare(c.ui);
    c.waiting = true;
  }
  take_compare(c.ui);
  if (c.ui.compare.opening.active()) return Flow::kHold;
  c.waiting = false;
  if (c.arg(1) != "off" && !c.ui.compare.view) fail(c.where, "compare: " + c.ui.compare.note);
  return Flow::kNext;
}

// screenshot PATH: waits until the map shows what was last asked for and the background reads
// are in (they run off the UI thread), unless hold_tasks holds them. The map's own read counts
// only while the map is on screen: a grid does not draw it, so nothing would take its result.
// Then two more frames: what the commands before asked for (a tab, a window that appears, a
// layout) takes ImGui a frame to lay out, and a new window is hidden in its first frame while it
// measures itself. The shot is taken after the frame is drawn.
Flow screenshot(Context& c) {
  UiState& ui = c.ui;
  const bool map_shown = ui.heatmap.mode == MapMode::kMap;
  if ((map_shown && (!ui.heatmap.fetcher.idle() || (ui.heatmap.requested && ui.heatmap.requested->view.get() != ui.heatmap.fetched_view))) ||
      (ui.compare.view && !ui.compare.map.fetcher.idle()) || (!background_idle(ui) && !ui.tasks.pool_held()))
    return Flow::kHold;
  if (c.shot_frames < 0) c.shot_frames = 2;
  if (c.shot_frames > 0) {
    --c.shot_frames;
    return Flow::kHold;
  }
  c.shot_frames = -1;
  c.screenshot = c.arg(1);
  return Flow::kYield;
}

// key NAME: a key press, seen by the next frame's shortcuts (held a frame when the same key went
// up after the last one).
Flow key(Context& c) {
  bool pressed = false;
  try {
    pressed = press_key(c.arg(1));
  } catch (const std::exception& e) {
    fail(c.where, e.what());
  }
  return pressed ? Flow::kYield : Flow::kHold;
}

// [SECTION] the model, runs and layer modes

Flow load_model(Context& c) {
  c.ui.model.path = c.arg(1);
  c.ui.controller.load_model(c.arg(1), load_options(c.ui), parse_device(c.ui.model.device));
  return Flow::kNext;
}

// weights auto|dequantized|quantized: for the next load_model.
Flow weights(Context& c) {
  const auto w = parse_choice<WeightFormat>(c.arg(1));
  if (!w) fail(c.where, "weights: " + choice_words<WeightFormat>());
  c.ui.model.weights = *w;
  return Flow::kNext;
}

Flow device(Context& c) {
  parse_device(c.arg(1));  // a bad value fails the script here
  c.ui.model.device = c.arg(1);
  return Flow::kNext;
}

// run [N] [paused] [ignore_eos]
Flow run(Context& c) {
  const int n = c.w.size() > 1 ? static_cast<int>(c.number(1)) : c.ui.run.max_new_tokens;
  bool paused = false, ignore_eos = false;
  for (std::size_t i = 2; i < c.w.size(); ++i) {
    if (c.w[i] == "paused") paused = true;
    else if (c.w[i] == "ignore_eos") ignore_eos = true;
    else fail(c.where, "run: unknown word '" + c.w[i] + "' (paused, ignore_eos)");
  }
  RunRequest r = run_request(c.ui, paused);
  r.max_new_tokens = n;
  r.ignore_stop_tokens = ignore_eos;
  c.ui.controller.run(r);
  return Flow::kNext;
}

Flow set_mode(Context& c) {
  c.ui.controller.set_layer_mode(static_cast<int>(c.number(1)), parse_mode(c.arg(2), c.where));
  return Flow::kNext;
}

Flow preset(Context& c) {
  c.ui.controller.set_config(LukaConfig::preset(c.arg(1), static_cast<std::int64_t>(c.ui.controller.config().layers.size())));
  return Flow::kNext;
}

// set OVERRIDE: a --set override, e.g. layer=5,mode=clustered,top_k=0.
Flow set(Context& c) {
  LukaConfig cfg = c.ui.controller.config();
  cfg.apply_override(c.arg(1));
  c.ui.controller.set_config(cfg);
  return Flow::kNext;
}

Flow shadow(Context& c) {
  LukaConfig cfg = c.ui.controller.config();
  for (auto& layer : cfg.layers) layer.dense_shadow = c.arg(1) == "on";
  c.ui.controller.set_config(cfg);
  return Flow::kNext;
}

// sampling TEMPERATURE TOP_K TOP_P SEED
Flow sampling(Context& c) {
  c.ui.run.sampling.temperature = static_cast<float>(c.number(1));
  c.ui.run.sampling.top_k = static_cast<int>(c.number(2));
  c.ui.run.sampling.top_p = static_cast<float>(c.number(3));
  c.ui.run.sampling.seed = static_cast<std::uint64_t>(c.number(4));
  return Flow::kNext;
}

// mixed A B: the layers panel's mixed(a,b) button (an error shows in the panel).
Flow mixed(Context& c) {
  c.ui.layers.mixed_a = static_cast<int>(c.number(1));
  c.ui.layers.mixed_b = static_cast<int>(c.number(2));
  apply_mixed_preset(c.ui);
  return Flow::kNext;
}

// on|off switches: the word, checked.
bool on_off(Context& c) {
  if (c.arg(1) != "on" && c.arg(1) != "off") fail(c.where, c.cmd() + " on or off");
  return c.arg(1) == "on";
}

// [SECTION] files, prompts and replay

// expect_locked on|off: the run controls and the layer modes are off (replay).
Flow expect_locked(Context& c) {
  const bool want = c.arg(1) == "on";
  if (c.ui.run.locked != want)
    fail(c.where, std::string("the run controls are ") + (c.ui.run.locked ? "locked" : "unlocked") + ", expected " + c.arg(1));
  const LukaConfig before = c.ui.controller.config();
  if (!before.layers.empty()) {  // a mode change is taken only when unlocked
    const AttentionMode m = before.layers[0].mode == AttentionMode::kDense ? AttentionMode::kLined : AttentionMode::kDense;
    c.ui.controller.set_layer_mode(0, m);
    const bool changed = c.ui.controller.config().layers[0].mode == m;
    c.ui.controller.set_layer_mode(0, before.layers[0].mode);
    if (changed == want)
      fail(c.where, std::string("a layer mode change was ") + (changed ? "taken" : "refused") + ", expected the modes " + c.arg(1));
  }
  return Flow::kNext;
}

// expect_recent INDEX PATH: the recent-files list has PATH at INDEX (0: newest).
Flow expect_recent(Context& c) {
  const auto& paths = c.ui.files.recent.paths();
  const std::size_t i = static_cast<std::size_t>(c.number(1));
  const std::string want = std::filesystem::absolute(c.arg(2)).lexically_normal().string();
  if (i >= paths.size() || paths[i] != want)
    fail(c.where, "recent file " + c.arg(1) + " is '" + (i < paths.size() ? paths[i] : std::string("none")) + "', expected '" + want + "'");
  return Flow::kNext;
}

Flow expect_pattern(Context& c) {
  if (c.ui.prompt.interwoven.pattern != c.arg(1))
    fail(c.where, "the prompt's pattern is " + c.ui.prompt.interwoven.pattern + ", expected " + c.arg(1));
  // The pattern field shows it once a frame has drawn the prompt panel.
  if (c.ui.prompt.pattern_edit != c.arg(1)) fail(c.where, "the pattern field shows " + c.ui.prompt.pattern_edit + ", expected " + c.arg(1));
  return Flow::kNext;
}

// expect_prompt_notice TEXT...: the builder's last notice contains it.
Flow expect_prompt_notice(Context& c) {
  const std::string want = c.rest(1);
  if (c.ui.prompt.notice.find(want) == std::string::npos)
    fail(c.where, "the prompt builder says '" + c.ui.prompt.notice + "', expected '" + want + "'");
  return Flow::kNext;
}

// free_text TEXT...: the rest of the line is the prompt.
Flow free_text(Context& c) {
  c.ui.prompt.free_text = c.rest(1);
  c.ui.prompt.mode = PromptMode::kFreeText;
  return Flow::kNext;
}

// [SECTION] the map, its views, search and tracking

// a code point, e.g. 706F: the font atlas can draw it.
Flow expect_glyph(Context& c) {
  const auto cp = static_cast<ImWchar>(std::stoul(c.arg(1), nullptr, 16));
  ImFontAtlas* atlas = ImGui::GetIO().Fonts;
  if (!atlas->IsBuilt()) atlas->Build();
  if (atlas->Fonts.empty() || !atlas->Fonts[0]->FindGlyphNoFallback(cp)) fail(c.where, "the fonts have no glyph for U+" + c.arg(1));
  return Flow::kNext;
}

// search TEXT...: the rest of the line is the text to find.
Flow search(Context& c) {
  const auto view = c.view("search: no run or capture to search");
  c.ui.heatmap.search = c.rest(1);
  run_search(c.ui, *view);
  return Flow::kNext;
}

// track A-B|text:STRING: the rest of the line is the span or text.
Flow track(Context& c) {
  const auto view = c.view("track: no run or capture");
  c.ui.timeline.track_spec = c.rest(1);
  set_track(c.ui, *view);
  if (!c.ui.timeline.track) fail(c.where, "track: " + c.ui.timeline.track_note);
  return Flow::kNext;
}

Flow expect_track(Context& c) {
  const auto& t = c.ui.timeline.track;
  if (!t || static_cast<double>(t->begin) != c.number(1) || static_cast<double>(t->end - 1) != c.number(2))
    fail(c.where, "tracked " + (t ? c.ui.timeline.track_note : std::string("nothing")) + ", expected tokens " + c.arg(1) + "-" + c.arg(2));
  return Flow::kNext;
}

Flow expect_found(Context& c) {
  if (static_cast<double>(c.ui.heatmap.found) != c.number(1))
    fail(c.where, "the search found token " + std::to_string(c.ui.heatmap.found) + ", expected " + c.arg(1));
  return Flow::kNext;
}

Flow layout(Context& c) {
  const auto layout = parse_choice<MapLayout>(c.arg(1));
  if (!layout) fail(c.where, "layout is " + choice_words<MapLayout>());
  c.ui.heatmap.layout = *layout;
  return Flow::kNext;
}

// print_geometry: the map's, then (comparing) the right canvas's, then what else the last frame drew.
Flow print_geometry(Context& c) {
  UiState& ui = c.ui;
  std::printf("print_geometry frame %d\n", ImGui::GetFrameCount());
  for (const HeatmapView* hv : {&ui.heatmap, ui.compare.view ? &ui.compare.map : nullptr}) {
    if (!hv) continue;
    const HeatmapView::Geometry& g = hv->geometry;
    std::printf("geometry %s left %.3f top %.3f width %.3f height %.3f key0 %.9g keys_per_pixel %.9g row0 %.9g rows_per_pixel %.9g\n",
                g.decode_rows ? "rows" : "full", g.left, g.top, g.width, g.height, g.key0, g.keys_per_pixel, g.row0, g.rows_per_pixel);
  }
  for (const auto& [name, r] : ui.drawn)
    if (r.frame == ImGui::GetFrameCount())
      std::printf("rect %s x0 %.3f y0 %.3f x1 %.3f y1 %.3f%s%s\n", name.c_str(), r.x0, r.y0, r.x1, r.y1, r.text.empty() ? "" : " text ", r.text.c_str());
  std::fflush(stdout);
  return Flow::kNext;
}

Flow print_status(Context& c) {
  const Status st = c.ui.controller.status();
  std::printf("status state %s prefill_fraction %.9g prefill_held %d message %s\n", to_string(st.state), st.prefill_fraction,
              st.prefill_held ? 1 : 0, st.message.c_str());
  std::fflush(stdout);
  return Flow::kNext;
}

// compare_run CHOICE: B runs A's tokens under a preset, or "layers panel" (two words).
Flow compare_run(Context& c) {
  c.arg(1);  // one word at least
  run_compare(c.ui, c.rest(1));
  const Status st = c.ui.controller.status();
  if (st.compare.failed) fail(c.where, st.compare.message);
  return Flow::kNext;
}

// [SECTION] checks of the capture a run or replay shows

// expect_refined STEP LAYER HEAD N: refined pages of a head at a step.
Flow expect_refined(Context& c) {
  const auto r = c.view()->refined_pages(static_cast<std::int64_t>(c.number(1)), static_cast<int>(c.number(2)), static_cast<int>(c.number(3)));
  if (static_cast<double>(r.size()) != c.number(4))
    fail(c.where, "step " + c.arg(1) + " layer " + c.arg(2) + " head " + c.arg(3) + " refined " + std::to_string(r.size()) + " pages, expected " + c.arg(4));
  return Flow::kNext;
}

// expect_kept STEP LAYER HEAD KEPT DROPPED: tokens a head attended and left out at a step.
Flow expect_kept(Context& c) {
  const auto cover = c.view()->cover(static_cast<std::int64_t>(c.number(1)), static_cast<int>(c.number(2)), static_cast<int>(c.number(3)));
  std::int64_t kept = 0, dropped = 0;
  for (const std::uint8_t v : cover) {
    kept += v == capture::kRaw || v == capture::kRefined || v == capture::kHeavy;
    dropped += v == capture::kDropped;
  }
  if (static_cast<double>(kept) != c.number(4) || static_cast<double>(dropped) != c.number(5))
    fail(c.where, "step " + c.arg(1) + " layer " + c.arg(2) + " head " + c.arg(3) + " kept " + std::to_string(kept) + " and dropped " +
                      std::to_string(dropped) + " tokens, expected " + c.arg(4) + " and " + c.arg(5));
  return Flow::kNext;
}

Flow expect_segments(Context& c) {
  const auto n = c.view()->segments().size();
  if (static_cast<double>(n) != c.number(1)) fail(c.where, "the capture has " + std::to_string(n) + " segments, expected " + c.arg(1));
  return Flow::kNext;
}

Flow expect_steps(Context& c) {
  const auto got = c.view()->summary().complete_steps;
  if (got != static_cast<std::int64_t>(c.number(1))) fail(c.where, "expected " + c.arg(1) + " steps, the capture has " + std::to_string(got));
  return Flow::kNext;
}

// expect_mode STEP LAYER MODE
Flow expect_mode(Context& c) {
  const capture::StepMetrics m = c.view()->metrics(static_cast<std::int64_t>(c.number(1)), static_cast<int>(c.number(2)));
  if (capture::mode_name(m.mode) != c.arg(3))
    fail(c.where, "step " + c.arg(1) + " layer " + c.arg(2) + " ran " + capture::mode_name(m.mode) + ", expected " + c.arg(3));
  return Flow::kNext;
}

// expect_fidelity STEP LAYER: the dense shadow's fidelity is there and in range.
Flow expect_fidelity(Context& c) {
  const capture::StepMetrics m = c.view()->metrics(static_cast<std::int64_t>(c.number(1)), static_cast<int>(c.number(2)));
  bool any = false;
  for (std::size_t h = 0; h < m.cover_size.size(); ++h) {
    const float kl = m.fidelity[h * 4], recall = m.fidelity[h * 4 + 1];
    if (std::isnan(kl)) continue;
    any = true;
    if (!(kl >= -1e-4f) || !(recall >= 0.f && recall <= 1.0001f)) fail(c.where, "fidelity out of range");
  }
  if (!any) fail(c.where, "no fidelity at step " + c.arg(1) + " layer " + c.arg(2) + " (dense shadow off?)");
  return Flow::kNext;
}

// expect_status TEXT...
Flow expect_status(Context& c) {
  const std::string want = c.rest(1);
  const Status s = c.ui.controller.status();
  if (s.message.find(want) == std::string::npos) fail(c.where, "status is '" + s.message + "', expected it to contain '" + want + "'");
  return Flow::kNext;
}

// [SECTION] the analysis tabs

// calibration FILE: a luka calibrate file for the runs started next.
Flow calibration(Context& c) {
  try {
    attach_calibration(c.ui, c.arg(1));
  } catch (const std::exception& e) {
    fail(c.where, e.what());
  }
  return Flow::kNext;
}

// head_scores_source prefill|decode|calibration
Flow head_scores_source(Context& c) {
  const auto source = parse_choice<HeadScoreSource>(c.arg(1));
  if (!source) fail(c.where, "head_scores_source: " + choice_words<HeadScoreSource>());
  c.ui.analysis.source = *source;
  return Flow::kNext;
}

// expect_calibration ROWS [CANDIDATES]: the view's calibration, as the Head scores tab shows it.
Flow expect_calibration(Context& c) {
  const auto view = c.view("expect_calibration: no run or capture");
  const auto cal = view_calibration(c.ui, *view);
  if (!cal)
    fail(c.where, "the capture has no calibration" +
                      (c.ui.analysis.calibration_error.empty() ? std::string() : ": " + c.ui.analysis.calibration_error));
  if (static_cast<double>(cal->heads.size()) != c.number(1))
    fail(c.where, "the calibration has " + std::to_string(cal->heads.size()) + " rows, expected " + c.arg(1));
  if (c.w.size() > 2 && static_cast<double>(cal->candidates.size()) != c.number(2))
    fail(c.where, "the calibration has " + std::to_string(cal->candidates.size()) + " candidates, expected " + c.arg(2));
  return Flow::kNext;
}

Flow load_session_command(Context& c) {
  const std::string note = load_session(c.ui, c.arg(1));
  if (!note.empty()) fail(c.where, "load_session: " + note);
  c.ui.heatmap.requested.reset();  // fetch for the restored view
  return Flow::kNext;
}

// expect_ui FIELD VALUE: layer N, head N, scale log|linear, view NAME, layout auto|full|rows, grid
// map|heads|layers, dtype NAME, prompt interwoven|free_text, help shown|hidden, hover TOKEN|none,
// state NAME, weights quantized|dequantized, calibration attached|none, compare NOTE|none.
Flow expect_ui(Context& c) {
  UiState& ui = c.ui;
  const std::string& field = c.arg(1);
  std::string got;
  if (field == "layer") got = std::to_string(ui.selection.layer);
  else if (field == "head") got = std::to_string(ui.selection.head);
  else if (field == "scale") got = ui.heatmap.log_scale ? "log" : "linear";
  else if (field == "view") got = figures::to_string(ui.heatmap.view);
  else if (field == "layout") got = choice_word(ui.heatmap.layout);
  else if (field == "grid") got = choice_word(ui.heatmap.mode);  // map, heads, layers
  else if (field == "dtype") got = choice_word(ui.model.dtype);  // for the next load
  else if (field == "prompt") got = choice_word(ui.prompt.mode);
  else if (field == "help") got = ui.window.show_shortcuts ? "shown" : "hidden";
  else if (field == "hover") got = ui.selection.hover_token >= 0 ? std::to_string(ui.selection.hover_token) : "none";  // the generated token the map marks
  else if (field == "state") got = to_string(ui.controller.status().state);
  else if (field == "compare") got = ui.compare.view ? ui.compare.note : "none";  // what B is (a file's name, or "dense (A's tokens)")
  else if (field == "weights")  // of the loaded model, as its summary says
    got = ui.controller.status().model_summary.find("(quantized weights)") != std::string::npos ? "quantized" : "dequantized";
  else if (field == "calibration") {  // attached|none: the view's capture carries one
    const auto view = ui.controller.view();
    got = view && view_calibration(ui, *view) ? "attached" : "none";
  } else fail(c.where, "expect_ui: unknown field '" + field + "' (layer, head, scale, view, layout, grid, dtype, prompt, help, hover, state, weights, calibration, compare)");
  c.arg(2);  // one word at least
  const std::string want = c.rest(2);
  if (got != want) fail(c.where, field + " is " + got + ", expected " + want);
  return Flow::kNext;
}

}  // namespace luka::studio::script_detail
