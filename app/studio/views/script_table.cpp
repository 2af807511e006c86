// The Studio's script (script.h): every command named once in one table, with its handler
// (script_commands.h), and the Script that loads a file against it and runs its lines frame by
// frame.
#include "app/studio/views/script.h"

#include <sstream>
#include <string>

#include <imgui.h>

#include "app/figures/capture_figure.h"
#include "app/studio/views/script_commands.h"
#include "app/studio/views/session_state.h"
#include "app/studio/views/shortcuts.h"
#include "core/device/device.h"
#include "core/prompt/prompt_file.h"
#include "core/prompt/wikisalad.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::studio {
namespace {

using namespace script_detail;

struct Command {
  const char* name;
  Flow (*run)(Context&);
};

const Command kCommands[] = {
    // Waits and what holds its line.
    {"save_capture", save_capture},
    {"expect_prompt", [](Context& c) { return expect_text(c, c.ui.prompt.shown, "the prompt panel shows"); }},
    {"expect_prompt_drawn", [](Context& c) { return expect_text(c, c.ui.prompt.drawn, "the prompt panel draws"); }},
    {"expect_tooltip", [](Context& c) { return expect_text(c, c.ui.map.tooltip, "the map's tooltip shows"); }},
    {"expect_timeline_tooltip", [](Context& c) { return expect_text(c, c.ui.timeline.tooltip, "the timeline's tooltip shows"); }},
    {"expect_overlay", [](Context& c) { return expect_text(c, c.ui.map.computing, "the map's overlay shows"); }},
    {"expect_task", [](Context& c) { return expect_text(c, c.ui.task_list_drawn, "the background work list shows"); }},
    {"hover", hover},
    {"expect_drawn", expect_drawn},
    {"click", click},
    {"wait_compare", wait_compare},
    {"wait_idle", [](Context& c) { return wait_until(c, Until::kIdle); }},
    {"wait_paused", [](Context& c) { return wait_until(c, Until::kPaused); }},
    {"wait_prefill_held", [](Context& c) { return wait_until(c, Until::kPrefillHeld); }},
    {"wait_steps", [](Context& c) { return wait_until(c, Until::kSteps); }},
    {"expect_head_scores", expect_head_scores},
    {"compare", compare},
    {"screenshot", screenshot},
    {"key", key},
    {"frames", [](Context& c) {
       c.frames_left = static_cast<int>(c.number(1));
       return Flow::kYield;
     }},
    {"measure", [](Context& c) {  // FRAMES: prints frame times
       c.ui.timing.measure_frames = static_cast<int>(c.number(1));
       c.ui.timing.frame_ms.clear();
       c.frames_left = c.ui.timing.measure_frames;
       return Flow::kYield;
     }},
    {"quit", [](Context&) { return Flow::kQuit; }},
    // The model, runs and layer modes.
    {"load_model", load_model},
    {"weights", weights},
    {"device", device},
    {"hold_load", [](Context& c) {  // the next load waits, deaf to quit and cancel, as a blocked one would
       c.ui.controller.hold_load();
       return Flow::kNext;
     }},
    {"release_load", [](Context& c) {
       c.ui.controller.release_load();
       return Flow::kNext;
     }},
    {"run", run},
    {"step", [](Context& c) {
       c.ui.controller.step();
       return Flow::kNext;
     }},
    {"resume", [](Context& c) {
       c.ui.controller.resume();
       return Flow::kNext;
     }},
    {"stop", [](Context& c) {
       c.ui.controller.stop();
       return Flow::kNext;
     }},
    {"hold_prefill", [](Context& c) {  // FRACTION: the next prefill waits there (release_prefill)
       c.ui.controller.hold_prefill(c.number(1));
       return Flow::kNext;
     }},
    {"release_prefill", [](Context& c) {
       c.ui.controller.release_prefill();
       return Flow::kNext;
     }},
    {"set_mode", set_mode},
    {"preset", preset},
    {"set", set},
    {"shadow", shadow},
    {"sampling", sampling},
    {"mixed", mixed},
    {"hold_tasks", [](Context& c) {  // on|off: the task pool starts nothing while on (the work list stays up)
       c.ui.tasks.hold_pool(on_off(c));
       return Flow::kNext;
     }},
    // Files, prompts and replay.
    {"open_capture", [](Context& c) {
       c.ui.files.open_pending = c.arg(1);
       c.ui.controller.open_capture(c.arg(1));
       return Flow::kNext;
     }},
    {"leave_replay", [](Context& c) {
       c.ui.controller.leave_replay();
       return Flow::kNext;
     }},
    {"expect_locked", expect_locked},
    {"expect_recent", expect_recent},
    {"pattern", [](Context& c) {
       apply_pattern(c.ui.prompt.interwoven, c.arg(1));
       return Flow::kNext;
     }},
    {"wikisalad", [](Context& c) {
       c.ui.prompt.interwoven = from_wikisalad(c.arg(1), static_cast<int>(c.number(2)));
       return Flow::kNext;
     }},
    {"save_prompt", [](Context& c) {
       save_prompt_file(c.ui.prompt.interwoven, c.arg(1));
       return Flow::kNext;
     }},
    {"expect_pattern", expect_pattern},
    {"prompt_file", [](Context& c) {  // PATH: the prompt builder's file field (Open and Save read it)
       c.ui.prompt.file = c.arg(1);
       return Flow::kNext;
     }},
    {"expect_prompt_notice", expect_prompt_notice},
    {"free_text", free_text},
    {"chat", [](Context& c) {  // on|off: the prompt in the model's chat format
       c.ui.prompt.chat = on_off(c);
       return Flow::kNext;
     }},
    {"query_agnostic", [](Context& c) {  // on|off: the builder's segments prefilled before its question
       c.ui.prompt.query_agnostic = on_off(c);
       return Flow::kNext;
     }},
    {"replay_full_text", [](Context& c) {  // on|off: the replay prompt's "full text" box
       c.ui.prompt.replay_full_text = c.arg(1) == "on";
       return Flow::kNext;
     }},
    {"save_session", [](Context& c) {
       save_session(c.ui, c.arg(1));
       return Flow::kNext;
     }},
    {"load_session", load_session_command},
    // The map, its views, search and tracking.
    {"select", [](Context& c) {
       c.ui.selection.layer = static_cast<int>(c.number(1));
       c.ui.selection.head = static_cast<int>(c.number(2));
       return Flow::kNext;
     }},
    {"select_step", [](Context& c) {  // N: the decode step every panel shows (0: the latest), as its slider sets it
       c.ui.selection.step = static_cast<std::int64_t>(c.number(1));
       return Flow::kNext;
     }},
    {"scale", [](Context& c) {
       c.ui.heatmap.log_scale = c.arg(1) == "log";
       return Flow::kNext;
     }},
    {"zoom", [](Context& c) {
       c.ui.heatmap.zoom(c.number(1));
       return Flow::kNext;
     }},
    {"fit", [](Context& c) {
       c.ui.heatmap.fit();
       return Flow::kNext;
     }},
    {"layout", layout},
    {"grid", [](Context& c) {  // heads, layers; off (or anything else): the map
       c.ui.heatmap.mode = parse_choice<MapMode>(c.arg(1)).value_or(MapMode::kMap);
       return Flow::kNext;
     }},
    {"view", [](Context& c) {
       c.ui.heatmap.view = figures::parse_map_view(c.arg(1));
       return Flow::kNext;
     }},
    {"mouse", [](Context& c) {
       c.ui.move_mouse = std::make_pair(c.number(1), c.number(2));
       return Flow::kNext;
     }},
    {"search", search},
    {"expect_found", expect_found},
    {"track", track},
    {"expect_track", expect_track},
    {"expect_glyph", expect_glyph},
    {"print_geometry", print_geometry},
    {"print_status", print_status},
    {"print_first_map", [](Context& c) {
       std::printf("first map frame %.1f ms after start\n", c.ui.timing.first_map_ms);
       std::fflush(stdout);
       return Flow::kNext;
     }},
    {"export", [](Context& c) {  // PATH.{png,svg,pdf}
       export_figure(c.ui, c.arg(1));
       if (c.ui.notice.rfind("wrote ", 0) != 0) fail(c.where, "export failed: " + c.ui.notice);
       return Flow::kNext;
     }},
    // Compare.
    {"compare_run", compare_run},
    {"compare_difference", [](Context& c) {
       c.ui.compare.difference = c.arg(1) == "on";
       return Flow::kNext;
     }},
    {"timeline_difference", [](Context& c) {  // on|off: the cover timeline's A ≠ B raster (comparing)
       c.ui.compare.timeline_difference = c.arg(1) == "on";
       return Flow::kNext;
     }},
    // Checks of the capture a run or replay shows.
    {"expect_refined", expect_refined},
    {"expect_kept", expect_kept},
    {"expect_segments", expect_segments},
    {"expect_steps", expect_steps},
    {"expect_mode", expect_mode},
    {"expect_fidelity", expect_fidelity},
    {"expect_status", expect_status},
    {"expect_ui", expect_ui},
    // The analysis tabs.
    {"show_fidelity", [](Context& c) {
       c.ui.window.select_tab = BottomTab::kFidelity;
       return Flow::kNext;
     }},
    {"show_topics", [](Context& c) {
       c.ui.window.select_tab = BottomTab::kTopics;
       return Flow::kNext;
     }},
    {"show_head_scores", [](Context& c) {
       c.ui.window.select_tab = BottomTab::kHeadScores;
       return Flow::kNext;
     }},
    {"show_timeline", [](Context& c) {
       c.ui.window.select_tab = BottomTab::kTimeline;
       return Flow::kNext;
     }},
    {"calibration", calibration},
    {"head_scores_source", head_scores_source},
    {"expect_calibration", expect_calibration},
};

const Command* find_command(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
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
    if (!find_command(line.words[0])) fail(s.where(line), "unknown command '" + line.words[0] + "'");
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
  screenshot.clear();
  if (frames_left_ > 0) {
    --frames_left_;
    return true;
  }
  while (next_ < lines_.size()) {
    current_ = next_;
    const Line& l = lines_[next_];
    Context c{ui, l.words, where(l), screenshot, waiting_, wait_start_, frames_left_, shot_frames_, click_wait_};
    switch (find_command(l.words[0])->run(c)) {
      case Flow::kNext:
        ++next_;
        continue;
      case Flow::kHold:
        return true;
      case Flow::kYield:
        ++next_;
        return true;
      case Flow::kQuit:
        next_ = lines_.size();
        return false;
    }
  }
  return false;
}

}  // namespace luka::studio
