#include "app/studio/session_state.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "app/studio/recent_files.h"
#include "core/prompt/prompt_file.h"
#include "core/util/error.h"
#include "core/util/output_file.h"
#include "core/util/text_file.h"

namespace luka::studio {
namespace {

constexpr int kVersion = 1;

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

}  // namespace

std::filesystem::path default_session_file() {
  const std::filesystem::path dir = config_folder();
  return dir.empty() ? dir : dir / "session.json";
}

void save_session(const UiState& ui, const std::filesystem::path& file) {
  nlohmann::json j;
  j["version"] = kVersion;
  j["model_path"] = ui.model_path;
  j["dtype"] = ui.dtype;
  j["weights"] = ui.weights;
  j["threads"] = ui.threads;
  j["device"] = ui.device;
  j["chat"] = ui.chat;
  j["free_text_mode"] = ui.free_text_mode;
  j["free_text"] = ui.free_text;
  j["max_new_tokens"] = ui.max_new_tokens;
  j["sampling"] = {{"temperature", ui.sampling.temperature}, {"top_k", ui.sampling.top_k}, {"top_p", ui.sampling.top_p}, {"seed", ui.sampling.seed}};
  const Status st = ui.session.status();
  if (!st.replay && !ui.session.config().layers.empty()) j["layers_config"] = ui.session.config().to_json();
  j["selection"] = {{"layer", ui.layer}, {"head", ui.head}, {"step", ui.step}};
  const HeatmapView& hv = ui.heatmap;
  j["map"] = {{"view", hv.view},         {"log_scale", hv.log_scale},   {"layout", hv.layout},     {"mode", hv.mode},
              {"overlays", hv.overlays}, {"x0", hv.x0},                 {"y0", hv.y0},             {"tokens_per_pixel", hv.tokens_per_pixel},
              {"tokens_per_pixel_y", hv.tokens_per_pixel_y},           {"rows_x0", hv.rows_x0},   {"rows_keys_per_pixel", hv.rows_keys_per_pixel},
              {"rows_y0", hv.rows_y0},   {"row_px", hv.row_px},         {"rows_follow", hv.rows_follow}};
  j["panels"] = {{"left", ui.panels.left}, {"prompt", ui.panels.prompt}, {"map", ui.panels.map}};
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  bool have_prompt = false;
  try {
    save_prompt_file(ui.prompt, prompt_file_beside(file));
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
  if (!j.is_object() || j.value("version", 0) != kVersion) return file.string() + ": not a session of this version; starting from the defaults";
  std::string note;
  take(j, "model_path", ui.model_path);
  take(j, "dtype", ui.dtype, [](int v) { return v >= 0 && v <= 2; });
  take(j, "weights", ui.weights, [](int v) { return v == 0 || v == 1; });
  take(j, "threads", ui.threads, [](int v) { return v >= 0 && v <= 1024; });
  take(j, "device", ui.device);
  take(j, "chat", ui.chat);
  take(j, "free_text_mode", ui.free_text_mode, [](int v) { return v == 0 || v == 1; });
  take(j, "free_text", ui.free_text);
  take(j, "max_new_tokens", ui.max_new_tokens, [](int v) { return v >= 1 && v <= 1 << 20; });
  if (j.contains("sampling")) {
    const auto& s = j["sampling"];
    take(s, "temperature", ui.sampling.temperature, [](float v) { return v >= 0 && v <= 100; });
    take(s, "top_k", ui.sampling.top_k, [](int v) { return v >= 0; });
    take(s, "top_p", ui.sampling.top_p, [](float v) { return v > 0 && v <= 1; });
    take(s, "seed", ui.sampling.seed);
  }
  take(j, "layers_config", ui.pending_config);
  if (j.contains("selection")) {
    const auto& s = j["selection"];
    take(s, "layer", ui.layer, [](int v) { return v >= 0; });
    take(s, "head", ui.head, [](int v) { return v >= 0; });
    take(s, "step", ui.step, [](std::int64_t v) { return v >= 0; });
  }
  if (j.contains("map")) {
    const auto& m = j["map"];
    HeatmapView& hv = ui.heatmap;
    const auto finite = [](double v) { return std::isfinite(v); };
    const auto positive = [](double v) { return std::isfinite(v) && v >= 0; };
    take(m, "view", hv.view, [](int v) { return v >= 0 && v <= 2; });
    take(m, "log_scale", hv.log_scale);
    take(m, "layout", hv.layout, [](int v) { return v >= 0 && v <= 2; });
    take(m, "mode", hv.mode, [](int v) { return v >= 0 && v <= 2; });
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
  }
  if (j.contains("panels")) {
    const auto& p = j["panels"];
    const auto fraction = [](float v) { return v >= 0.15f && v <= 0.85f; };
    take(p, "left", ui.panels.left, [&](float v) { return v == 0 || fraction(v); });  // 0: the default width
    take(p, "prompt", ui.panels.prompt, fraction);
    take(p, "map", ui.panels.map, fraction);
  }
  std::string prompt_name;
  take(j, "prompt_file", prompt_name);
  if (!prompt_name.empty()) {
    try {
      ui.prompt = load_prompt_file(file.parent_path() / prompt_name);
      ui.pattern_shown.clear();  // the pattern field follows the restored prompt
    } catch (const Error& e) {
      note = std::string("the last prompt was not restored: ") + e.what();
    }
  }
  return note;
}

void apply_pending_config(UiState& ui) {
  if (ui.pending_config.empty() || ui.session.status().state != RunState::kReady || ui.session.status().replay) return;
  const std::size_t layers = ui.session.config().layers.size();
  if (layers == 0) return;
  try {
    ui.session.set_config(LukaConfig::from_json(ui.pending_config, static_cast<std::int64_t>(layers), "the last session's LuKA config"));
  } catch (const Error& e) {
    ui.notice = e.what();  // another model: keep its defaults
  }
  ui.pending_config.clear();
}

}  // namespace luka::studio
