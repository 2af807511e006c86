#include "app/studio/script.h"

#include "core/device/device.h"
#include "core/util/text_file.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <imgui.h>

#include "app/figures/capture_figure.h"
#include "app/studio/session_state.h"
#include "app/studio/shortcuts.h"
#include "core/prompt/prompt_file.h"
#include "core/prompt/wikisalad.h"
#include "core/util/error.h"

namespace luka::studio {
namespace {

const std::set<std::string> kCommands = {"load_model", "device", "open_capture", "run", "step", "resume", "stop", "set_mode", "preset",
                                         "select", "scale", "zoom", "fit", "layout", "print_geometry", "compare", "compare_run", "wait_compare", "compare_difference", "mouse", "search", "expect_found", "track", "expect_track", "save_session", "load_session", "show_topics", "show_head_scores", "expect_head_scores", "calibration", "head_scores_source", "weights", "expect_calibration", "frames", "wait_idle", "wait_paused", "wait_steps",
                                         "expect_mode", "expect_steps", "expect_status", "expect_glyph", "free_text", "expect_segments", "set", "sampling", "expect_refined", "expect_kept", "view", "grid", "pattern", "wikisalad", "save_prompt", "expect_pattern", "show_timeline", "show_fidelity", "shadow", "expect_fidelity", "export", "measure", "print_first_map", "screenshot", "quit", "key", "expect_ui", "mixed", "hover", "expect_tooltip", "expect_prompt_drawn", "hold_prefill", "release_prefill", "wait_prefill_held", "expect_overlay", "print_status", "hold_tasks", "expect_task", "timeline_difference", "expect_timeline_tooltip", "replay_full_text",
                                         "click", "prompt_file", "expect_prompt_notice", "hold_load", "release_load",
                                         "expect_drawn", "select_step", "chat", "query_agnostic"};

// Capture files: save the view, leave a replay, and check the prompt panel and recent list.
const std::set<std::string> kFileCommands = {"save_capture", "leave_replay", "expect_prompt", "expect_locked", "expect_recent"};

AttentionMode parse_mode(const std::string& s, const std::string& where) {
  if (s == "dense") return AttentionMode::kDense;
  if (s == "lined") return AttentionMode::kLined;
  if (s == "clustered") return AttentionMode::kClustered;
  if (s == "kascade") return AttentionMode::kKascade;
  if (s == "press") return AttentionMode::kPress;
  if (s == "quest") return AttentionMode::kQuest;
  fail(where, "unknown mode '" + s + "' (dense, lined, clustered, kascade, press, quest)");
}

}  // namespace

Script Script::load(const std::filesystem::path& path) {
  std::istringstream in(read_text_file(path, "script"));
  Script s;
  s.file_ = path.string();
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    if (const auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream words(text);
    Line line{number, {}};
    for (std::string w; words >> w;) line.words.push_back(w);
    if (line.words.empty()) continue;
    if (!kCommands.count(line.words[0]) && !kFileCommands.count(line.words[0])) fail(s.where(line), "unknown command '" + line.words[0] + "'");
    s.lines_.push_back(std::move(line));
  }
  return s;
}

std::string Script::where(const Line& l) const { return file_ + ":" + std::to_string(l.number); }

bool Script::advance(UiState& ui, std::string& screenshot) {
  try {
    return run_lines(ui, screenshot);
  } catch (const std::exception& e) {
    // Every error names the script's file and line: those from fail(where(l), ...) already do,
    // the rest (a number that does not parse, a --set override, a session file) get them here.
    const std::string what = e.what();
    if (current_ >= lines_.size() || what.rfind(file_ + ":", 0) == 0) throw;
    throw Error(where(lines_[current_]) + ": " + lines_[current_].words[0] + ": " + what);
  }
}

bool Script::run_lines(UiState& ui, std::string& screenshot) {
  using Clock = std::chrono::steady_clock;
  screenshot.clear();
  if (frames_left_ > 0) {
    --frames_left_;
    return true;
  }
  while (next_ < lines_.size()) {
    current_ = next_;
    const Line& l = lines_[next_];
    const auto& w = l.words;
    const std::string& cmd = w[0];
    const auto arg = [&](std::size_t i) -> const std::string& {
      if (i >= w.size()) fail(where(l), cmd + ": missing argument " + std::to_string(i));
      return w[i];
    };
    const auto number = [&](std::size_t i) { return std::stod(arg(i)); };
    // Saves the current view as a capture file and holds this line until it is written.
    if (cmd == "save_capture") {
      if (!waiting_) {
        ui.files.save_pending = arg(1);
        ui.controller.save_capture(arg(1));
        waiting_ = true;
        wait_start_ = Clock::now();
      }
      const Status s = ui.controller.status();
      if (s.saving) {
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > 300) fail(where(l), "save_capture timed out");
        return true;
      }
      waiting_ = false;
      if (s.save_failed) fail(where(l), s.save_message);
      ++next_;
      continue;
    }
    // Holds this line until the last frame drew the text (the rest of the line), for up to 10 s:
    // what a capture shows is read off the UI thread. expect_prompt: the prompt panel's prompt as
    // stored; expect_prompt_drawn: its read-only text as drawn (shaped, in visual order);
    // expect_tooltip: the map's tooltip; expect_timeline_tooltip: the cover timeline's;
    // expect_overlay: the message over a map still computing.
    if (cmd == "expect_prompt" || cmd == "expect_prompt_drawn" || cmd == "expect_tooltip" || cmd == "expect_timeline_tooltip" || cmd == "expect_overlay" ||
        cmd == "expect_task") {
      if (!waiting_) {
        waiting_ = true;
        wait_start_ = Clock::now();
      }
      std::string want;
      for (std::size_t i = 1; i < w.size(); ++i) want += (i > 1 ? " " : "") + w[i];
      const std::string& got = cmd == "expect_prompt" ? ui.prompt.shown : cmd == "expect_prompt_drawn" ? ui.prompt.drawn
                               : cmd == "expect_tooltip"  ? ui.map.tooltip
                               : cmd == "expect_timeline_tooltip" ? ui.timeline.tooltip
                               : cmd == "expect_task"     ? ui.task_list_drawn
                                                          : ui.map.computing;
      if (got.find(want) == std::string::npos) {
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > 10) {
          const char* what = cmd == "expect_prompt" ? "the prompt panel shows" : cmd == "expect_prompt_drawn" ? "the prompt panel draws"
                             : cmd == "expect_tooltip" ? "the map's tooltip shows" : cmd == "expect_timeline_tooltip" ? "the timeline's tooltip shows"
                             : cmd == "expect_task" ? "the background work list shows" : "the map's overlay shows";
          fail(where(l), std::string(what) + " '" + got.substr(0, 400) + "', expected it to contain '" + want + "'");
        }
        return true;
      }
      waiting_ = false;
      ++next_;
      continue;
    }
    // Points the mouse at a generated token in the output panel (hover output TOKEN), at a decode
    // step's row in the decode-rows view (hover step STEP), or at a cell of the cover timeline's
    // A ≠ B raster (hover timeline_diff STEP TOKEN), once they are drawn (up to 10 s).
    if (cmd == "hover") {
      if (!waiting_) {
        waiting_ = true;
        wait_start_ = Clock::now();
      }
      std::optional<std::pair<double, double>> at;
      std::string why;
      if (arg(1) == "output") {
        const auto it = ui.drawn.find("output_token/" + arg(2));
        if (it != ui.drawn.end() && it->second.frame == ImGui::GetFrameCount())
          at = std::make_pair((it->second.x0 + it->second.x1) / 2.0, (it->second.y0 + it->second.y1) / 2.0);
        else why = "generated token " + arg(2) + " is not in the output panel";
      } else if (arg(1) == "step") {
        const HeatmapView::Geometry& g = ui.heatmap.geometry;
        const double y = g.top + (number(2) - 0.5 - g.row0) / g.rows_per_pixel;
        if (!g.decode_rows || g.rows_per_pixel <= 0) why = "the map is not in the decode-rows layout";
        else if (y < g.top || y >= g.top + g.height) why = "step " + arg(2) + " is not in view";
        else at = std::make_pair(g.left + g.width / 4.0, y);  // a quarter across: clear of the decode-start line
      } else if (arg(1) == "timeline_diff") {
        const TimelinePanel::Lower& r = ui.timeline.lower;
        const double s = number(2), t = number(3);
        if (r.frame != ImGui::GetFrameCount() || !r.difference) why = "the cover timeline's A ≠ B raster is not drawn";
        else if (s < 1 || s > static_cast<double>(r.steps) || t < 0 || t >= static_cast<double>(r.tokens)) why = "step " + arg(2) + " token " + arg(3) + " is not in the raster";
        else at = std::make_pair(r.left + (t + 0.5) * r.width / static_cast<double>(r.tokens), r.top + (s - 0.5) * r.height / static_cast<double>(r.steps));
      } else {
        fail(where(l), "hover output TOKEN, hover step STEP or hover timeline_diff STEP TOKEN");
      }
      if (!at) {
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > 10) fail(where(l), "hover: " + why);
        return true;
      }
      ui.move_mouse = at;
      waiting_ = false;
      ++next_;
      continue;
    }
    // expect_drawn NAME TEXT...: the last frame drew NAME (print_geometry's names) with a text
    // containing TEXT (empty: drawn at all); holds the line up to 10 s.
    if (cmd == "expect_drawn") {
      if (!waiting_) {
        waiting_ = true;
        wait_start_ = Clock::now();
      }
      std::string want;
      for (std::size_t i = 2; i < w.size(); ++i) want += (i > 2 ? " " : "") + w[i];
      const auto it = ui.drawn.find(arg(1));
      const bool drawn = it != ui.drawn.end() && it->second.frame == ImGui::GetFrameCount();
      if (!drawn || it->second.text.find(want) == std::string::npos) {
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > 10)
          fail(where(l), drawn ? arg(1) + " shows '" + it->second.text + "', expected it to contain '" + want + "'"
                               : arg(1) + " is not drawn");
        return true;
      }
      waiting_ = false;
      ++next_;
      continue;
    }
    // Clicks a thing the last frame drew by name (print_geometry lists them, e.g. prompt_file_open)
    // through ImGui's own mouse input, as a user's click: the widget's ID decides which button
    // takes it. Holds the line until the click is fed (three frames), once the thing is drawn
    // (up to 10 s).
    if (cmd == "click") {
      if (!waiting_) {
        const auto it = ui.drawn.find(arg(1));
        if (it == ui.drawn.end() || it->second.frame != ImGui::GetFrameCount()) {
          if (!click_wait_) click_wait_ = Clock::now();
          if (std::chrono::duration<double>(Clock::now() - *click_wait_).count() > 10)
            fail(where(l), "click: nothing named '" + arg(1) + "' is drawn");
          return true;
        }
        click_wait_.reset();
        const DrawnRect& r = it->second;
        ui.click = UiState::ScriptedClick{(r.x0 + r.x1) / 2.0, (r.y0 + r.y1) / 2.0, 0};
        waiting_ = true;
        return true;
      }
      if (ui.click) return true;
      waiting_ = false;
      ++next_;
      continue;
    }
    // Waits: hold this line until the condition holds (or its timeout, default 300 s, passes).
    if (cmd == "wait_compare") {  // [SECONDS]: until B's run is over; fails if it failed
      if (!waiting_) {
        waiting_ = true;
        wait_start_ = Clock::now();
      }
      const Status s = ui.controller.status();
      if (s.compare.failed) fail(where(l), s.compare.message);
      if (s.compare.running || ui.compare.adopted != ui.controller.compare_view()) {
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > (w.size() > 1 ? number(1) : 300)) fail(where(l), "wait_compare timed out");
        return true;
      }
      waiting_ = false;
      ++next_;
      continue;
    }
    if (cmd == "wait_idle" || cmd == "wait_paused" || cmd == "wait_steps" || cmd == "wait_prefill_held") {
      if (!waiting_) {
        waiting_ = true;
        wait_start_ = Clock::now();
      }
      const Status s = ui.controller.status();
      bool done = false;
      double timeout = 300;
      if (cmd == "wait_idle") {
        done = !ui.controller.busy();
        if (w.size() > 1) timeout = number(1);
      } else if (cmd == "wait_paused") {
        done = s.state == RunState::kPaused || !ui.controller.busy();
        if (w.size() > 1) timeout = number(1);
      } else if (cmd == "wait_prefill_held") {
        done = s.prefill_held;
        if (w.size() > 1) timeout = number(1);
        if (!done && !ui.controller.busy() && s.state != RunState::kLoading) fail(where(l), "the run ended without holding its prefill (" + s.message + ")");
      } else {
        const auto view = ui.controller.view();
        done = view && view->summary().complete_steps >= static_cast<std::int64_t>(number(1));
        if (w.size() > 2) timeout = number(2);
        if (!done && !ui.controller.busy() && s.state != RunState::kLoading)
          fail(where(l), "the run ended before " + arg(1) + " steps (" + s.message + ")");
      }
      if (s.state == RunState::kError) fail(where(l), "the session failed: " + s.message);
      if (!done) {
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > timeout) fail(where(l), cmd + " timed out");
        return true;
      }
      waiting_ = false;
      ++next_;
      continue;
    }
    ++next_;
    if (cmd == "load_model") {
      ui.model.path = arg(1);
      ui.controller.load_model(arg(1), load_options(ui), parse_device(ui.model.device));
    } else if (cmd == "weights") {  // auto|dequantized|quantized: for the next load_model
      const auto w = parse_choice<WeightFormat>(arg(1));
      if (!w) fail(where(l), "weights: " + choice_words<WeightFormat>());
      ui.model.weights = *w;
    } else if (cmd == "device") {
      parse_device(arg(1));  // a bad value fails the script here
      ui.model.device = arg(1);
    } else if (cmd == "open_capture") {
      ui.files.open_pending = arg(1);
      ui.controller.open_capture(arg(1));
    } else if (cmd == "leave_replay") {
      ui.controller.leave_replay();
    } else if (cmd == "expect_locked") {  // on|off: the run controls and the layer modes are off (replay)
      const bool want = arg(1) == "on";
      if (ui.run.locked != want) fail(where(l), std::string("the run controls are ") + (ui.run.locked ? "locked" : "unlocked") + ", expected " + arg(1));
      const LukaConfig before = ui.controller.config();
      if (!before.layers.empty()) {  // a mode change is taken only when unlocked
        const AttentionMode m = before.layers[0].mode == AttentionMode::kDense ? AttentionMode::kLined : AttentionMode::kDense;
        ui.controller.set_layer_mode(0, m);
        const bool changed = ui.controller.config().layers[0].mode == m;
        ui.controller.set_layer_mode(0, before.layers[0].mode);
        if (changed == want) fail(where(l), std::string("a layer mode change was ") + (changed ? "taken" : "refused") + ", expected the modes " + arg(1));
      }
    } else if (cmd == "expect_recent") {  // INDEX PATH: the recent-files list has PATH at INDEX (0: newest)
      const auto& paths = ui.files.recent.paths();
      const std::size_t i = static_cast<std::size_t>(number(1));
      const std::string want = std::filesystem::absolute(arg(2)).lexically_normal().string();
      if (i >= paths.size() || paths[i] != want)
        fail(where(l), "recent file " + arg(1) + " is '" + (i < paths.size() ? paths[i] : std::string("none")) + "', expected '" + want + "'");
    } else if (cmd == "run") {
      // run [N] [paused] [ignore_eos]
      const int n = w.size() > 1 ? static_cast<int>(number(1)) : ui.run.max_new_tokens;
      bool paused = false, ignore_eos = false;
      for (std::size_t i = 2; i < w.size(); ++i) {
        if (w[i] == "paused") paused = true;
        else if (w[i] == "ignore_eos") ignore_eos = true;
        else fail(where(l), "run: unknown word '" + w[i] + "' (paused, ignore_eos)");
      }
      RunRequest r = run_request(ui, paused);
      r.max_new_tokens = n;
      r.ignore_stop_tokens = ignore_eos;
      ui.controller.run(r);
    } else if (cmd == "step") {
      ui.controller.step();
    } else if (cmd == "resume") {
      ui.controller.resume();
    } else if (cmd == "stop") {
      ui.controller.stop();
    } else if (cmd == "set_mode") {
      ui.controller.set_layer_mode(static_cast<int>(number(1)), parse_mode(arg(2), where(l)));
    } else if (cmd == "preset") {
      ui.controller.set_config(LukaConfig::preset(arg(1), static_cast<std::int64_t>(ui.controller.config().layers.size())));
    } else if (cmd == "select") {
      ui.selection.layer = static_cast<int>(number(1));
      ui.selection.head = static_cast<int>(number(2));
    } else if (cmd == "scale") {
      ui.heatmap.log_scale = arg(1) == "log";
    } else if (cmd == "zoom") {
      ui.heatmap.zoom(number(1));
    } else if (cmd == "measure") {
      ui.timing.measure_frames = static_cast<int>(number(1));
      ui.timing.frame_ms.clear();
      frames_left_ = ui.timing.measure_frames;
      return true;
    } else if (cmd == "print_first_map") {
      std::printf("first map frame %.1f ms after start\n", ui.timing.first_map_ms);
      std::fflush(stdout);
    } else if (cmd == "export") {
      export_figure(ui, arg(1));
      if (ui.notice.rfind("wrote ", 0) != 0) fail(where(l), "export failed: " + ui.notice);
    } else if (cmd == "show_fidelity") {
      ui.window.select_tab = BottomTab::kFidelity;
    } else if (cmd == "shadow") {
      LukaConfig cfg = ui.controller.config();
      for (auto& layer : cfg.layers) layer.dense_shadow = arg(1) == "on";
      ui.controller.set_config(cfg);
    } else if (cmd == "pattern") {
      apply_pattern(ui.prompt.interwoven, arg(1));
    } else if (cmd == "wikisalad") {
      ui.prompt.interwoven = from_wikisalad(arg(1), static_cast<int>(number(2)));
    } else if (cmd == "save_prompt") {
      save_prompt_file(ui.prompt.interwoven, arg(1));
    } else if (cmd == "expect_pattern") {
      if (ui.prompt.interwoven.pattern != arg(1)) fail(where(l), "the prompt's pattern is " + ui.prompt.interwoven.pattern + ", expected " + arg(1));
      // The pattern field shows it once a frame has drawn the prompt panel.
      if (ui.prompt.pattern_edit != arg(1)) fail(where(l), "the pattern field shows " + ui.prompt.pattern_edit + ", expected " + arg(1));
    } else if (cmd == "expect_glyph") {  // a code point, e.g. 706F: the font atlas can draw it
      const auto cp = static_cast<ImWchar>(std::stoul(arg(1), nullptr, 16));
      ImFontAtlas* atlas = ImGui::GetIO().Fonts;
      if (!atlas->IsBuilt()) atlas->Build();
      if (atlas->Fonts.empty() || !atlas->Fonts[0]->FindGlyphNoFallback(cp)) fail(where(l), "the fonts have no glyph for U+" + arg(1));
    } else if (cmd == "expect_segments") {
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "no capture to check");
      const auto n = view->segments().size();
      if (static_cast<double>(n) != number(1)) fail(where(l), "the capture has " + std::to_string(n) + " segments, expected " + arg(1));
    } else if (cmd == "search") {  // the rest of the line is the text to find
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "search: no run or capture to search");
      ui.heatmap.search.clear();
      for (std::size_t i = 1; i < w.size(); ++i) ui.heatmap.search += (i > 1 ? " " : "") + w[i];
      run_search(ui, *view);
    } else if (cmd == "track") {  // the rest of the line is the span or text:STRING
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "track: no run or capture");
      ui.timeline.track_spec.clear();
      for (std::size_t i = 1; i < w.size(); ++i) ui.timeline.track_spec += (i > 1 ? " " : "") + w[i];
      set_track(ui, *view);
      if (!ui.timeline.track) fail(where(l), "track: " + ui.timeline.track_note);
    } else if (cmd == "expect_track") {
      if (!ui.timeline.track || static_cast<double>(ui.timeline.track->begin) != number(1) || static_cast<double>(ui.timeline.track->end - 1) != number(2))
        fail(where(l), "tracked " + (ui.timeline.track ? ui.timeline.track_note : std::string("nothing")) + ", expected tokens " + arg(1) + "-" + arg(2));
    } else if (cmd == "expect_found") {
      if (static_cast<double>(ui.heatmap.found) != number(1))
        fail(where(l), "the search found token " + std::to_string(ui.heatmap.found) + ", expected " + arg(1));
    } else if (cmd == "prompt_file") {  // PATH: the prompt builder's file field (Open and Save read it)
      ui.prompt.file = arg(1);
    } else if (cmd == "expect_prompt_notice") {  // TEXT...: the builder's last notice contains it
      std::string want;
      for (std::size_t i = 1; i < w.size(); ++i) want += (i > 1 ? " " : "") + w[i];
      if (ui.prompt.notice.find(want) == std::string::npos)
        fail(where(l), "the prompt builder says '" + ui.prompt.notice + "', expected '" + want + "'");
    } else if (cmd == "free_text") {  // the rest of the line is the prompt
      std::string text;
      for (std::size_t i = 1; i < w.size(); ++i) text += (i > 1 ? " " : "") + w[i];
      ui.prompt.free_text = text;
      ui.prompt.mode = PromptMode::kFreeText;
    } else if (cmd == "set") {  // a --set override, e.g. layer=5,mode=clustered,top_k=0
      LukaConfig cfg = ui.controller.config();
      cfg.apply_override(arg(1));
      ui.controller.set_config(cfg);
    } else if (cmd == "sampling") {  // TEMPERATURE TOP_K TOP_P SEED
      ui.run.sampling.temperature = static_cast<float>(number(1));
      ui.run.sampling.top_k = static_cast<int>(number(2));
      ui.run.sampling.top_p = static_cast<float>(number(3));
      ui.run.sampling.seed = static_cast<std::uint64_t>(number(4));
    } else if (cmd == "expect_refined") {  // STEP LAYER HEAD N: refined pages of a head at a step
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "no capture to check");
      const auto r = view->refined_pages(static_cast<std::int64_t>(number(1)), static_cast<int>(number(2)), static_cast<int>(number(3)));
      if (static_cast<double>(r.size()) != number(4))
        fail(where(l), "step " + arg(1) + " layer " + arg(2) + " head " + arg(3) + " refined " + std::to_string(r.size()) + " pages, expected " + arg(4));
    } else if (cmd == "expect_kept") {  // STEP LAYER HEAD KEPT DROPPED: tokens a head attended and left out at a step
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "no capture to check");
      const auto cover = view->cover(static_cast<std::int64_t>(number(1)), static_cast<int>(number(2)), static_cast<int>(number(3)));
      std::int64_t kept = 0, dropped = 0;
      for (const std::uint8_t c : cover) {
        kept += c == capture::kRaw || c == capture::kRefined || c == capture::kHeavy;
        dropped += c == capture::kDropped;
      }
      if (static_cast<double>(kept) != number(4) || static_cast<double>(dropped) != number(5))
        fail(where(l), "step " + arg(1) + " layer " + arg(2) + " head " + arg(3) + " kept " + std::to_string(kept) + " and dropped " +
                           std::to_string(dropped) + " tokens, expected " + arg(4) + " and " + arg(5));
    } else if (cmd == "grid") {
      ui.heatmap.mode = parse_choice<MapMode>(arg(1)).value_or(MapMode::kMap);  // heads, layers; off (or anything else): the map
    } else if (cmd == "view") {
      ui.heatmap.view = figures::parse_map_view(arg(1));
    } else if (cmd == "expect_head_scores") {  // the Head scores table's rows, once computed
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "expect_head_scores: no run or capture");
      const auto& out = head_scores(ui, view);
      if (!ui.analysis.head_scores.fresh(capture_key(view.get()))) {  // still computing: hold this line
        if (!waiting_) {
          waiting_ = true;
          wait_start_ = Clock::now();
        }
        if (std::chrono::duration<double>(Clock::now() - wait_start_).count() > 300) fail(where(l), "expect_head_scores timed out");
        --next_;
        return true;
      }
      waiting_ = false;
      if (!out.error.empty()) fail(where(l), "head scores: " + out.error);
      const std::size_t rows = out.value ? out.value->heads.size() : 0;
      if (static_cast<double>(rows) != number(1)) fail(where(l), "head scores have " + std::to_string(rows) + " rows, expected " + arg(1));
    } else if (cmd == "calibration") {  // FILE: a luka calibrate file for the runs started next
      try {
        attach_calibration(ui, arg(1));
      } catch (const std::exception& e) {
        fail(where(l), e.what());
      }
    } else if (cmd == "head_scores_source") {  // prefill|decode|calibration
      const std::string v = arg(1);
      const auto source = parse_choice<HeadScoreSource>(v);
      if (!source) fail(where(l), "head_scores_source: " + choice_words<HeadScoreSource>());
      ui.analysis.source = *source;
    } else if (cmd == "expect_calibration") {  // ROWS [CANDIDATES]: the view's calibration, as the Head scores tab shows it
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "expect_calibration: no run or capture");
      const auto cal = view_calibration(ui, *view);
      if (!cal) fail(where(l), "the capture has no calibration" + (ui.analysis.calibration_error.empty() ? std::string() : ": " + ui.analysis.calibration_error));
      if (static_cast<double>(cal->heads.size()) != number(1))
        fail(where(l), "the calibration has " + std::to_string(cal->heads.size()) + " rows, expected " + arg(1));
      if (w.size() > 2 && static_cast<double>(cal->candidates.size()) != number(2))
        fail(where(l), "the calibration has " + std::to_string(cal->candidates.size()) + " candidates, expected " + arg(2));
    } else if (cmd == "save_session") {
      save_session(ui, arg(1));
    } else if (cmd == "load_session") {
      const std::string note = load_session(ui, arg(1));
      if (!note.empty()) fail(where(l), "load_session: " + note);
      ui.heatmap.requested.reset();  // fetch for the restored view
    } else if (cmd == "show_topics") {
      ui.window.select_tab = BottomTab::kTopics;
    } else if (cmd == "show_head_scores") {
      ui.window.select_tab = BottomTab::kHeadScores;
    } else if (cmd == "show_timeline") {
      ui.window.select_tab = BottomTab::kTimeline;
    } else if (cmd == "fit") {
      ui.heatmap.fit();
    } else if (cmd == "mouse") {
      ui.move_mouse = std::make_pair(number(1), number(2));
    } else if (cmd == "print_geometry") {  // the map's, then (comparing) the right canvas's, then what else the last frame drew
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
    } else if (cmd == "print_status") {
      const Status st = ui.controller.status();
      std::printf("status state %s prefill_fraction %.9g prefill_held %d message %s\n", to_string(st.state), st.prefill_fraction,
                  st.prefill_held ? 1 : 0, st.message.c_str());
      std::fflush(stdout);
    } else if (cmd == "hold_tasks") {  // on|off: the task pool starts nothing while on (the background work list stays up)
      if (arg(1) != "on" && arg(1) != "off") fail(where(l), "hold_tasks on or off");
      ui.tasks.hold_pool(arg(1) == "on");
    } else if (cmd == "chat") {  // on|off: the prompt in the model's chat format
      if (arg(1) != "on" && arg(1) != "off") fail(where(l), "chat on or off");
      ui.prompt.chat = arg(1) == "on";
    } else if (cmd == "query_agnostic") {  // on|off: the prompt builder's segments prefilled before its question
      if (arg(1) != "on" && arg(1) != "off") fail(where(l), "query_agnostic on or off");
      ui.prompt.query_agnostic = arg(1) == "on";
    } else if (cmd == "select_step") {  // N: the decode step every panel shows (0: the latest), as its slider sets it
      ui.selection.step = static_cast<std::int64_t>(number(1));
    } else if (cmd == "hold_load") {  // the next load waits, deaf to quit and cancel, as a blocked one would
      ui.controller.hold_load();
    } else if (cmd == "release_load") {
      ui.controller.release_load();
    } else if (cmd == "hold_prefill") {  // FRACTION: the next prefill waits there (release_prefill)
      ui.controller.hold_prefill(number(1));
    } else if (cmd == "release_prefill") {
      ui.controller.release_prefill();
    } else if (cmd == "compare") {  // a capture to compare with, or "off"; holds the line until it is open
      if (!waiting_) {
        ui.compare.path = arg(1) == "off" ? "" : arg(1);
        open_compare(ui);
        waiting_ = true;
      }
      take_compare(ui);
      if (ui.compare.opening.active()) {
        --next_;
        return true;
      }
      waiting_ = false;
      if (arg(1) != "off" && !ui.compare.view) fail(where(l), "compare: " + ui.compare.note);
    } else if (cmd == "compare_run") {  // CHOICE: B runs A's tokens under a preset, or "layers panel" (two words)
      std::string choice = arg(1);
      for (std::size_t i = 2; i < w.size(); ++i) choice += " " + w[i];
      run_compare(ui, choice);
      const Status st = ui.controller.status();
      if (st.compare.failed) fail(where(l), st.compare.message);
    } else if (cmd == "compare_difference") {
      ui.compare.difference = arg(1) == "on";
    } else if (cmd == "replay_full_text") {  // on|off: the replay prompt's "full text" box
      ui.prompt.replay_full_text = arg(1) == "on";
    } else if (cmd == "timeline_difference") {  // on|off: the cover timeline's A ≠ B raster (comparing)
      ui.compare.timeline_difference = arg(1) == "on";
    } else if (cmd == "layout") {
      const auto layout = parse_choice<MapLayout>(arg(1));
      if (!layout) fail(where(l), "layout is " + choice_words<MapLayout>());
      ui.heatmap.layout = *layout;
    } else if (cmd == "frames") {
      frames_left_ = static_cast<int>(number(1));
      return true;
    } else if (cmd == "expect_mode" || cmd == "expect_steps") {
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "no capture to check");
      if (cmd == "expect_steps") {
        const auto got = view->summary().complete_steps;
        if (got != static_cast<std::int64_t>(number(1))) fail(where(l), "expected " + arg(1) + " steps, the capture has " + std::to_string(got));
      } else {
        const capture::StepMetrics m = view->metrics(static_cast<std::int64_t>(number(1)), static_cast<int>(number(2)));
        if (capture::mode_name(m.mode) != arg(3))
          fail(where(l), "step " + arg(1) + " layer " + arg(2) + " ran " + capture::mode_name(m.mode) + ", expected " + arg(3));
      }
    } else if (cmd == "expect_fidelity") {
      const auto view = ui.controller.view();
      if (!view) fail(where(l), "no capture to check");
      const capture::StepMetrics m = view->metrics(static_cast<std::int64_t>(number(1)), static_cast<int>(number(2)));
      bool any = false;
      for (std::size_t h = 0; h < m.cover_size.size(); ++h) {
        const float kl = m.fidelity[h * 4], recall = m.fidelity[h * 4 + 1];
        if (std::isnan(kl)) continue;
        any = true;
        if (!(kl >= -1e-4f) || !(recall >= 0.f && recall <= 1.0001f)) fail(where(l), "fidelity out of range");
      }
      if (!any) fail(where(l), "no fidelity at step " + arg(1) + " layer " + arg(2) + " (dense shadow off?)");
    } else if (cmd == "expect_status") {
      std::string want;
      for (std::size_t i = 1; i < w.size(); ++i) want += (i > 1 ? " " : "") + w[i];
      const Status s = ui.controller.status();
      if (s.message.find(want) == std::string::npos) fail(where(l), "status is '" + s.message + "', expected it to contain '" + want + "'");
    } else if (cmd == "screenshot") {
      // Wait until the map shows what was last asked for and the background reads are in (they
      // run off the UI thread), unless hold_tasks holds them. The map's own read counts only while
      // the map is on screen: a grid does not draw it, so nothing would take its result.
      const bool map_shown = ui.heatmap.mode == MapMode::kMap;
      if ((map_shown && (!ui.heatmap.fetcher.idle() || (ui.heatmap.requested && ui.heatmap.requested->view.get() != ui.heatmap.fetched_view))) ||
          (ui.compare.view && !ui.compare.map.fetcher.idle()) || (!background_idle(ui) && !ui.tasks.pool_held())) {
        --next_;
        return true;
      }
      // Then two more frames: what the commands before asked for (a tab, a window that appears,
      // a layout) takes ImGui a frame to lay out, and a new window is hidden in its first frame
      // while it measures itself.
      if (shot_frames_ < 0) shot_frames_ = 2;
      if (shot_frames_ > 0) {
        --shot_frames_;
        --next_;
        return true;
      }
      shot_frames_ = -1;
      screenshot = arg(1);
      return true;  // taken after this frame is drawn
    } else if (cmd == "mixed") {  // A B: the layers panel's mixed(a,b) button (an error shows in the panel)
      ui.layers.mixed_a = static_cast<int>(number(1));
      ui.layers.mixed_b = static_cast<int>(number(2));
      apply_mixed_preset(ui);
    } else if (cmd == "key") {  // a key press, seen by the next frame's shortcuts
      bool pressed = false;
      try {
        pressed = press_key(arg(1));
      } catch (const std::exception& e) {
        fail(where(l), e.what());
      }
      if (!pressed) --next_;  // the same key went up after the last frame: press it after the next
      return true;
    } else if (cmd == "expect_ui") {  // FIELD VALUE: layer N, head N, scale log|linear, view NAME, layout auto|full|rows, grid map|heads|layers, dtype NAME, prompt interwoven|free_text, help shown|hidden, hover TOKEN|none, state NAME, calibration attached|none, compare NOTE|none
      const std::string& field = arg(1);
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
      } else fail(where(l), "expect_ui: unknown field '" + field + "' (layer, head, scale, view, layout, grid, dtype, prompt, help, hover, state, weights, calibration, compare)");
      std::string want = arg(2);  // the rest of the line
      for (std::size_t i = 3; i < w.size(); ++i) want += " " + w[i];
      if (got != want) fail(where(l), field + " is " + got + ", expected " + want);
    } else if (cmd == "quit") {
      next_ = lines_.size();
      return false;
    }
  }
  return false;
}

}  // namespace luka::studio
