#include "app/studio/views/session_state.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <optional>

#include "app/studio/data/recent_files.h"
#include "core/prompt/prompt_file.h"
#include "core/util/error.h"
#include "core/util/output_file.h"
#include "core/util/text_file.h"

namespace luka::studio {
namespace {

// Version 2 writes the settings that are one of a few values as words ("dtype": "bf16"); version 1
// wrote them as numbers, which are still read.
constexpr int kVersion = 2;

std::filesystem::path prompt_file_beside(const std::filesystem::path& file) {
  return file.parent_path() / (file.stem().string() + "-prompt.json");
}

// Reads j[key] into `out` when it is there with the right type (and passes `ok`); else leaves it.
template <class T, class Ok>
void take(const nlohmann::json& j, const char* key, T& out, Ok ok) {
  if (!j.is_object() || !j.contains(key)) return;
  try {
    const T v = j.at(key).get<T>();
    if (ok(v)) out = v;
  } catch (const nlohmann::json::exception&) {
  }
}
template <class T>
void take(const nlohmann::json& j, const char* key, T& out) {
  take(j, key, out, [](const T&) { return true; });
}

// Reads an enum setting: its word, or the number a version 1 file stored (the value's place in
// Choices<E>::all); anything else leaves it.
template <class E>
void take_choice(const nlohmann::json& j, const char* key, E& out) {
  if (!j.is_object() || !j.contains(key)) return;
  const nlohmann::json& v = j.at(key);
  std::optional<E> got;
  if (v.is_string()) got = parse_choice<E>(v.get<std::string>());
  else if (v.is_number_integer()) got = choice_at<E>(v.get<long long>());
  if (got) out = *got;
}

}  // namespace

std::filesystem::path default_session_file() {
  const std::filesystem::path dir = config_folder();
  return dir.empty() ? dir : dir / "session.json";
}

void save_session(const UiState& ui, const std::filesystem::path& file) {
  nlohmann::json j;
  j["version"] = kVersion;
  j["model_path"] = ui.model.path;
  j["dtype"] = choice_word(ui.model.dtype);
  j["weights"] = choice_word(ui.model.weights);
  j["threads"] = ui.model.threads;
  j["device"] = ui.model.device;
  j["chat"] = ui.prompt.chat;
  j["prompt_mode"] = choice_word(ui.prompt.mode);
  j["free_text"] = ui.prompt.free_text;
  j["replay_full_text"] = ui.prompt.replay_full_text;
  j["max_new_tokens"] = ui.run.max_new_tokens;
  j["sampling"] = {{"temperature", ui.run.sampling.temperature}, {"top_k", ui.run.sampling.top_k}, {"top_p", ui.run.sampling.top_p}, {"seed", ui.run.sampling.seed}};
  const Status st = ui.controller.status();
  if (!st.replay && !ui.controller.config().layers.empty()) j["layers_config"] = ui.controller.config().to_json();
  j["selection"] = {{"layer", ui.selection.layer}, {"head", ui.selection.head}, {"step", ui.selection.step}};
  const HeatmapView& hv = ui.heatmap;
  j["map"] = {{"view", choice_word(hv.view)}, {"log_scale", hv.log_scale}, {"layout", choice_word(hv.layout)}, {"mode", choice_word(hv.mode)},
              {"overlays", hv.overlays}, {"x0", hv.x0},                 {"y0", hv.y0},             {"tokens_per_pixel", hv.tokens_per_pixel},
              {"tokens_per_pixel_y", hv.tokens_per_pixel_y},           {"rows_x0", hv.rows_x0},   {"rows_keys_per_pixel", hv.rows_keys_per_pixel},
              {"rows_y0", hv.rows_y0},   {"row_px", hv.row_px},         {"rows_follow", hv.rows_follow}};
  j["panels"] = {{"left", ui.window.split.left}, {"prompt", ui.window.split.prompt}, {"map", ui.window.split.map}};
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  bool have_prompt = false;
  try {
    save_prompt_file(ui.prompt.interwoven, prompt_file_beside(file));
    have_prompt = true;
  } catch (const Error&) {  // a prompt being edited may be inconsistent: keep the session without it
  }
  j["prompt_file"] = have_prompt ? prompt_file_beside(file).filename().string() : "";
  write_file_atomically(file, j.dump(2) + "\n");
}

std::string load_session(UiState& ui, const std::filesystem::path& file) {
  std::error_code ec;
  if (file.empty() || !std::filesystem::exists(file, ec)) return "";
  nlohmann::json j;
  try {
    j = read_json_file(file, "session");
  } catch (const Error& e) {
    return std::string(e.what()) + "; starting from the defaults";
  }
  const int version = j.is_object() && j.contains("version") && j["version"].is_number_integer() ? j["version"].get<int>() : 0;
  if (version < 1 || version > kVersion) return file.string() + ": not a session of this version; starting from the defaults";
  std::string note;
  take(j, "model_path", ui.model.path);
  take_choice(j, "dtype", ui.model.dtype);
  take_choice(j, "weights", ui.model.weights);
  take(j, "threads", ui.model.threads, [](int v) { return v >= 0 && v <= 1024; });
  take(j, "device", ui.model.device);
  take(j, "chat", ui.prompt.chat);
  take_choice(j, "free_text_mode", ui.prompt.mode);  // version 1: 0 interwoven, 1 free text
  take_choice(j, "prompt_mode", ui.prompt.mode);
  take(j, "free_text", ui.prompt.free_text);
  take(j, "replay_full_text", ui.prompt.replay_full_text);
  take(j, "max_new_tokens", ui.run.max_new_tokens, [](int v) { return v >= 1 && v <= 1 << 20; });
  if (j.contains("sampling")) {
    const auto& s = j["sampling"];
    take(s, "temperature", ui.run.sampling.temperature, [](float v) { return v >= 0 && v <= 100; });
    take(s, "top_k", ui.run.sampling.top_k, [](int v) { return v >= 0; });
    take(s, "top_p", ui.run.sampling.top_p, [](float v) { return v > 0 && v <= 1; });
    take(s, "seed", ui.run.sampling.seed);
  }
  take(j, "layers_config", ui.layers.pending_config);
  if (j.contains("selection")) {
    const auto& s = j["selection"];
    take(s, "layer", ui.selection.layer, [](int v) { return v >= 0; });
    take(s, "head", ui.selection.head, [](int v) { return v >= 0; });
    take(s, "step", ui.selection.step, [](std::int64_t v) { return v >= 0; });
  }
  if (j.contains("map")) {
    const auto& m = j["map"];
    HeatmapView& hv = ui.heatmap;
    const auto finite = [](double v) { return std::isfinite(v); };
    const auto positive = [](double v) { return std::isfinite(v) && v >= 0; };
    take_choice(m, "view", hv.view);
    take(m, "log_scale", hv.log_scale);
    take_choice(m, "layout", hv.layout);
    take_choice(m, "mode", hv.mode);
    take(m, "overlays", hv.overlays);
    take(m, "x0", hv.x0, finite);
    take(m, "y0", hv.y0, finite);
    take(m, "tokens_per_pixel", hv.tokens_per_pixel, positive);
    take(m, "tokens_per_pixel_y", hv.tokens_per_pixel_y, positive);
    take(m, "rows_x0", hv.rows_x0, finite);
    take(m, "rows_keys_per_pixel", hv.rows_keys_per_pixel, positive);
    take(m, "rows_y0", hv.rows_y0, positive);
    take(m, "row_px", hv.row_px, positive);
    take(m, "rows_follow", hv.rows_follow);
    hv.fitted = hv.rows_fitted = false;  // the zoom as saved stays as the view grows (0 still fits)
  }
  if (j.contains("panels")) {
    const auto& p = j["panels"];
    const auto fraction = [](float v) { return v >= 0.15f && v <= 0.85f; };
    take(p, "left", ui.window.split.left, [&](float v) { return v == 0 || fraction(v); });  // 0: the default width
    take(p, "prompt", ui.window.split.prompt, fraction);
    take(p, "map", ui.window.split.map, fraction);
  }
  std::string prompt_name;
  take(j, "prompt_file", prompt_name);
  if (!prompt_name.empty()) {
    try {
      ui.prompt.interwoven = load_prompt_file(file.parent_path() / prompt_name);
      ui.prompt.pattern_shown.clear();  // the pattern field follows the restored prompt
    } catch (const Error& e) {
      note = std::string("the last prompt was not restored: ") + e.what();
    }
  }
  return note;
}

void apply_pending_config(UiState& ui) {
  if (ui.layers.pending_config.empty() || ui.controller.status().state != RunState::kReady || ui.controller.status().replay) return;
  const std::size_t layers = ui.controller.config().layers.size();
  if (layers == 0) return;
  try {
    ui.controller.set_config(LukaConfig::from_json(ui.layers.pending_config, static_cast<std::int64_t>(layers), "the last session's LuKA config"));
  } catch (const Error& e) {
    ui.notice = e.what();  // another model: keep its defaults
  }
  ui.layers.pending_config.clear();
}

}  // namespace luka::studio
