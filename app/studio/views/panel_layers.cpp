// Layers panel: presets, the selected layer's parameters, and one row per layer with its mode
// (switchable live: a change takes effect at the next decode step) and what the layer's last
// recorded step cost.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "app/studio/views/flow_layout.h"
#include "app/studio/data/method_presets.h"
#include "app/studio/views/ui_state.h"

namespace luka::studio {

namespace {

// What the table shows per layer at a step: cover and refined pages there, and the attention's
// milliseconds as the mean of the kMsSteps steps up to it; and, for the parameters' note, the
// tokens paged of the tokens so far.
constexpr std::int64_t kMsSteps = 8;

const LayerCosts& layer_costs(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view, std::int64_t step,
                              const std::vector<int>& recorded, int L) {
  const std::string key = capture_key(view.get()) + "/" + std::to_string(L) + "/" + std::to_string(step);
  return ui.layers.costs.get(ui.tasks, key, [view, step, recorded, L] {
    LayerCosts out;
    const std::size_t n = static_cast<std::size_t>(L);
    out.cover.assign(n, "-");
    out.refined.assign(n, "-");
    out.ms.assign(n, "-");
    out.paged.assign(n, 0);
    out.tokens.assign(n, 0);
    out.have = true;
    if (step == 0) return out;
    for (const int rl : recorded) {
      if (rl >= L) continue;
      const std::size_t i = static_cast<std::size_t>(rl);
      try {
        const capture::StepMetrics m = view->metrics(step, rl);
        double mean = 0;
        for (const auto c : m.cover_size) mean += c;
        mean /= static_cast<double>(std::max<std::size_t>(1, m.cover_size.size()));
        out.cover[i] = std::to_string(static_cast<long long>(std::lround(mean))) + "/" + std::to_string(m.tokens);
        out.paged[i] = m.paged_end;
        out.tokens[i] = m.tokens;
        double seconds = 0;
        std::int64_t steps = 0;
        for (std::int64_t s = std::max<std::int64_t>(1, step - kMsSteps + 1); s <= step; ++s, ++steps)
          seconds += s == step ? m.seconds : view->metrics(s, rl).seconds;
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.2f", 1e3 * seconds / static_cast<double>(std::max<std::int64_t>(1, steps)));
        out.ms[i] = ms;
        if (m.mode == capture::kModeClustered && view->summary().layout.covers)
          out.refined[i] = std::to_string(view->refined_pages(step, rl, view->summary().layout.heads.front()).size());
      } catch (const std::exception&) {
      }
    }
    return out;
  });
}

}  // namespace

const std::vector<MethodPreset>& method_presets() {
  static const std::vector<MethodPreset> kPresets = {
      {"streaming_llm", "StreamingLLM: the first 4 tokens (sinks) and the most recent ones of the prompt"},
      {"snapkv", "SnapKV: the prompt tokens the last 64 prompt queries attend to most, pooled over 5"},
      {"tova", "TOVA: the prompt tokens the last prompt query attends to most"},
      {"knorm", "Knorm: the prompt tokens with the smallest key norms"},
      {"expected_attention", "ExpectedAttention: the attention expected from the next 512 queries (RoPE statistics)"},
      {"random", "random prompt tokens (a baseline)"},
      {"pyramidkv", "PyramidKV: SnapKV with layer budgets in a pyramid (more in the lower layers)"},
      {"adakv", "AdaKV: SnapKV with head-wise budgets inside each layer's"},
      {"decoding", "compression during decoding: Knorm every 512 steps down to 2,048 tokens per KV head"},
      {"tova_decoding", "TOVA's own policy: one token evicted per step once the cache holds 2,048"},
      {"quest", "Quest: per step, the 64 pages of 16 tokens of highest key bound and the last 16 tokens (all layers but the first two)"}};
  return kPresets;
}

void apply_mixed_preset(UiState& ui) {
  const std::string mixed = "mixed(" + std::to_string(ui.layers.mixed_a) + "," + std::to_string(ui.layers.mixed_b) + ")";
  try {
    ui.controller.set_config(LukaConfig::preset(mixed, static_cast<std::int64_t>(ui.controller.config().layers.size())));
    ui.layers.notice.clear();
  } catch (const std::exception& e) {
    ui.layers.notice = e.what();
  }
}

namespace {

// The lined row: the recent window and the heavy-hitter fraction (dimmed when the layer runs another mode).
bool lined_parameters(LayerConfig& lc, bool in_use, float number) {
  bool changed = false;
  const bool lined = in_use;
  const ImVec4 unused = ImGui::GetStyle().Colors[ImGuiCol_TextDisabled];
  ImGui::TextColored(lined ? ImGui::GetStyle().Colors[ImGuiCol_Text] : unused, "lined%s", lined ? " (in use):" : ":");
  same_line_if_fits(labelled(number, "window"));
  ImGui::SetNextItemWidth(number);
  int window = static_cast<int>(lc.lined.window);
  if (ImGui::InputInt("window", &window, 0)) lc.lined.window = std::max(1, window), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("lined: the recent-token window");
  same_line_if_fits(labelled(number, "rho"));
  ImGui::SetNextItemWidth(number);
  float rho = static_cast<float>(lc.lined.rho);
  if (ImGui::InputFloat("rho", &rho, 0, 0, "%.3f")) lc.lined.rho = std::clamp(rho, 0.001f, 1.f), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("lined: the fraction of older tokens kept as heavy hitters");
  return changed;
}

// The clustered row: page size, tail, pages refined per step, compressor, delimiter pages, refinement math.
bool clustered_parameters(LayerConfig& lc, bool in_use, float number) {
  bool changed = false;
  const bool clustered = in_use;
  const ImVec4 used = ImGui::GetStyle().Colors[ImGuiCol_Text], unused = ImGui::GetStyle().Colors[ImGuiCol_TextDisabled];
  ImGui::TextColored(clustered ? used : unused, "clustered%s", clustered ? " (in use):" : ":");
  same_line_if_fits(labelled(number, "page"));
  ImGui::SetNextItemWidth(number);
  int page = static_cast<int>(lc.clustered.page_size);
  if (ImGui::InputInt("page", &page, 0)) lc.clustered.page_size = std::max(1, page), changed = true;
  same_line_if_fits(labelled(number, "tail"));
  ImGui::SetNextItemWidth(number);
  int tail = static_cast<int>(lc.clustered.tail);
  if (ImGui::InputInt("tail", &tail, 0)) lc.clustered.tail = std::max(0, tail), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("clustered: the latest tokens kept raw");
  same_line_if_fits(labelled(number, "top_k"));
  ImGui::SetNextItemWidth(number);
  int top_k = static_cast<int>(lc.clustered.top_k);
  if (ImGui::InputInt("top_k", &top_k, 0)) lc.clustered.top_k = std::max(0, top_k), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("clustered: pages refined to their raw tokens per step");
  static const char* kCompressors[] = {"mean", "attn-weighted", "random", "gsc"};
  const float combo = ImGui::CalcTextSize("attn-weighted").x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x;
  same_line_if_fits(combo);
  ImGui::SetNextItemWidth(combo);
  int comp = static_cast<int>(lc.clustered.compressor);
  if (ImGui::Combo("##comp", &comp, kCompressors, 4)) lc.clustered.compressor = static_cast<Compressor>(comp), changed = true;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("clustered: how a page is summarized (gsc: SemantiCache's clusters, each one page, merged by the mean)");
  if (lc.clustered.compressor == Compressor::kGsc) {
    same_line_if_fits(labelled(number, "gsc tau"));
    ImGui::SetNextItemWidth(number);
    float gsc_tau = static_cast<float>(lc.clustered.gsc_tau);
    if (ImGui::InputFloat("gsc tau", &gsc_tau, 0, 0, "%.2f")) lc.clustered.gsc_tau = std::clamp(gsc_tau, -1.f, 1.f), changed = true;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("gsc: a token joins a seed's cluster when their keys' cosine exceeds it");
  }
  same_line_if_fits(labelled(ImGui::GetFrameHeight(), "delimiters"));
  bool delimiters = lc.clustered.segmenter == Segmenter::kDelimiter;
  if (ImGui::Checkbox("delimiters", &delimiters)) lc.clustered.segmenter = delimiters ? Segmenter::kDelimiter : Segmenter::kFixed, changed = true;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("clustered: cut pages at delimiter tokens (. , ? ! ; : space tab newline), each delimiter kept raw (SemantiCache)");
  same_line_if_fits(labelled(ImGui::GetFrameHeight(), "exact"));
  bool exact = lc.clustered.math == RefineMath::kExact;
  if (ImGui::Checkbox("exact", &exact)) lc.clustered.math = exact ? RefineMath::kExact : RefineMath::kMassPreserving, changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("clustered: exact refinement (off: mass-preserving)");
  return changed;
}

// A press layer's row: the scorer, the budget's allocation, the scorer's own window or sinks, and
// the budget as a ratio removed or a token count (which wins when set); compression during decoding.
bool press_parameters(LayerConfig& lc, float number) {
  bool changed = false;
  ImGui::TextUnformatted("press (in use):");
  static const char* kMethods[] = {"streaming_llm", "snapkv", "tova", "knorm", "expected_attention", "random"};
  static const PressMethod kMethodValues[] = {PressMethod::kStreamingLlm, PressMethod::kSnapKv, PressMethod::kTova,
                                              PressMethod::kKnorm, PressMethod::kExpectedAttention, PressMethod::kRandom};
  const float method_combo = ImGui::CalcTextSize("expected_attention").x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x;
  same_line_if_fits(method_combo);
  ImGui::SetNextItemWidth(method_combo);
  int method = 0;
  for (int i = 0; i < 6; ++i)
    if (kMethodValues[i] == lc.press.method) method = i;
  if (ImGui::Combo("##press_method", &method, kMethods, 6)) lc.press.method = kMethodValues[method], changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("press: how the prompt's tokens are scored (kvpress's press); a change applies from the next prompt");
  // How the budget is shared: the same per head (kvpress's ScorerPress), in a pyramid over the
  // layers (PyramidKV), or over a layer's heads by score (AdaKV). Compression during decoding
  // takes the uniform share only.
  static const char* kAllocations[] = {"uniform", "pyramidkv", "adakv"};
  static const PressAllocation kAllocationValues[] = {PressAllocation::kUniform, PressAllocation::kPyramid, PressAllocation::kAdaKv};
  const float allocation_combo = ImGui::CalcTextSize("pyramidkv").x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x;
  same_line_if_fits(allocation_combo);
  ImGui::SetNextItemWidth(allocation_combo);
  int allocation = 0;
  for (int i = 0; i < 3; ++i)
    if (kAllocationValues[i] == lc.press.allocation) allocation = i;
  ImGui::BeginDisabled(lc.press.interval > 0);
  if (ImGui::Combo("##press_allocation", &allocation, kAllocations, 3)) lc.press.allocation = kAllocationValues[allocation], changed = true;
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("press: how the budget is shared: the same for every KV head (uniform), more in lower layers\n"
                      "(pyramidkv), or over the layer's heads by score (adakv); compression during decoding is uniform");
  // The scorer's own main parameter: SnapKV's observation window, the sinks StreamingLLM and
  // ExpectedAttention always keep.
  if (lc.press.method == PressMethod::kSnapKv) {
    same_line_if_fits(labelled(number, "window##press"));
    ImGui::SetNextItemWidth(number);
    int window = static_cast<int>(lc.press.window_size);
    if (ImGui::InputInt("window##press", &window, 0)) lc.press.window_size = std::max(1, window), changed = true;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("snapkv: the prompt's last queries whose attention scores the tokens (press_window); always kept");
  } else if (lc.press.method == PressMethod::kStreamingLlm || lc.press.method == PressMethod::kExpectedAttention) {
    same_line_if_fits(labelled(number, "sinks"));
    ImGui::SetNextItemWidth(number);
    int sinks = static_cast<int>(lc.press.n_sink);
    if (ImGui::InputInt("sinks", &sinks, 0)) lc.press.n_sink = std::max(0, sinks), changed = true;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("the first tokens always kept (press_sink)");
  }
  same_line_if_fits(labelled(number, "ratio"));
  ImGui::SetNextItemWidth(number);
  float ratio = static_cast<float>(lc.press.compression_ratio);
  if (ImGui::InputFloat("ratio", &ratio, 0, 0, "%.2f")) lc.press.compression_ratio = std::clamp(ratio, 0.f, 0.99f), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("press: the fraction of the prompt's tokens evicted (compression_ratio)");
  same_line_if_fits(labelled(number, "budget"));
  ImGui::SetNextItemWidth(number);
  int budget = static_cast<int>(lc.press.budget_tokens);
  if (ImGui::InputInt("budget", &budget, 0)) lc.press.budget_tokens = std::max(0, budget), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("press: prompt tokens kept per KV head instead of the ratio (0: use the ratio)");
  same_line_if_fits(labelled(number, "every"));
  ImGui::SetNextItemWidth(number);
  int interval = static_cast<int>(lc.press.interval);
  if (ImGui::InputInt("every", &interval, 0)) lc.press.interval = std::max(0, interval), changed = true;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("press: compress during decoding every this many steps down to press_target_size (%lld) per KV head; 0: never",
                      static_cast<long long>(lc.press.target_size));
  return changed;
}

// A Quest layer's row: pages of page_size tokens, how many are attended per step, the recent window.
bool quest_parameters(LayerConfig& lc, float number) {
  bool changed = false;
  ImGui::TextUnformatted("quest (in use):");
  same_line_if_fits(labelled(number, "page##quest"));
  ImGui::SetNextItemWidth(number);
  int quest_page = static_cast<int>(lc.quest.page_size);
  if (ImGui::InputInt("page##quest", &quest_page, 0)) lc.quest.page_size = std::max(1, quest_page), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("quest: tokens per page, each bounded by its keys' per-channel min and max");
  same_line_if_fits(labelled(number, "pages"));
  ImGui::SetNextItemWidth(number);
  int quest_pages = static_cast<int>(lc.quest.pages);
  if (ImGui::InputInt("pages", &quest_pages, 0)) lc.quest.pages = std::max(0, quest_pages), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("quest: the pages of highest bound each head attends to per step; the others are left out");
  same_line_if_fits(labelled(number, "window##quest"));
  ImGui::SetNextItemWidth(number);
  int quest_window = static_cast<int>(lc.quest.window);
  if (ImGui::InputInt("window##quest", &quest_window, 0)) lc.quest.window = std::max(1, quest_window), changed = true;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("quest: the latest tokens always attended");
  return changed;
}

}  // namespace

namespace {

// The presets row: the whole-model presets, kvpress's methods and Quest, and mixed(a,b).
void preset_row(UiState& ui, int L) {
  ImGui::TextUnformatted("preset");
  for (const char* name : {"dense", "lined", "clustered", "paper", "kascade", "semanticache"}) {
    same_line_if_fits(button_width(name));
    if (ImGui::SmallButton(name)) {
      ui.controller.set_config(LukaConfig::preset(name, L));
      ui.layers.notice.clear();
    }
    if (ImGui::IsItemHovered() && std::string(name) == "kascade")
      ImGui::SetTooltip("Kascade: anchors at the paper's relative depths compute top-k, the layers after them reuse it");
    if (ImGui::IsItemHovered() && std::string(name) == "semanticache")
      ImGui::SetTooltip("SemantiCache: every layer clustered by delimiter chunks and GSC clusters, proportional attention");
  }
  // kvpress's methods and Quest (docs/methods.md): one preset each, in a list, as there are eleven.
  {
    const char* label = "kvpress / quest";
    same_line_if_fits(ImGui::CalcTextSize(label).x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x);
    ImGui::SetNextItemWidth(ImGui::CalcTextSize(label).x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x);
    if (ImGui::BeginCombo("##methods", label)) {
      for (const MethodPreset& m : method_presets()) {
        if (ImGui::Selectable(m.name)) {
          ui.controller.set_config(LukaConfig::preset(m.name, L));
          ui.layers.notice.clear();
        }
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", m.tip);
      }
      ImGui::EndCombo();
    }
    ui.mark_item_drawn("method_presets");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("kvpress's presses (every layer), compression during decoding, and Quest");
  }
  // mixed(a,b): the first a and last b layers lined, the rest clustered.
  const std::string mixed = "mixed(" + std::to_string(ui.layers.mixed_a) + "," + std::to_string(ui.layers.mixed_b) + ")";
  const float drag = ImGui::CalcTextSize("000").x + 2 * ImGui::GetStyle().FramePadding.x;
  same_line_if_fits(2 * drag + button_width(mixed.c_str()) + 2 * ImGui::GetStyle().ItemSpacing.x);
  ImGui::SetNextItemWidth(drag);
  ImGui::DragInt("##mixed_a", &ui.layers.mixed_a, 0.2f, 0, L);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("mixed(a,b): the first a layers lined (drag or double-click to type)");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(drag);
  ImGui::DragInt("##mixed_b", &ui.layers.mixed_b, 0.2f, 0, L);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("mixed(a,b): the last b layers lined, the layers between them clustered");
  ImGui::SameLine();
  if (ImGui::SmallButton(mixed.c_str())) apply_mixed_preset(ui);
  {
    const ImVec2 b0 = ImGui::GetItemRectMin(), b1 = ImGui::GetItemRectMax();
    const ImVec2 w0 = ImGui::GetWindowPos(), c0 = ImGui::GetWindowContentRegionMin(), c1 = ImGui::GetWindowContentRegionMax();
    ui.mark_drawn("mixed_button", b0.x, b0.y, b1.x, b1.y);
    ui.mark_drawn("layers_panel", w0.x + c0.x, w0.y + c0.y, w0.x + c1.x, w0.y + c1.y);  // its content region
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the first %d and last %d layers lined, the rest clustered", ui.layers.mixed_a, ui.layers.mixed_b);
}

// The selected layer's parameters (live, like the mode): the window and heavy-hitter fraction of
// lined attention; page size, tail, refinement and compressor of clustered attention; a press's or
// Quest's where the layer runs them; and, clustered, how many tokens are paged and why.
void layer_parameters(UiState& ui, LukaConfig& cfg, const LayerCosts& costs, bool have_costs, std::int64_t last) {
  const int L = static_cast<int>(cfg.layers.size());
  LayerConfig lc = cfg.layers[static_cast<std::size_t>(std::clamp(ui.selection.layer, 0, L - 1))];
  bool changed = false;
  const float number = ImGui::CalcTextSize("00000").x + 2 * ImGui::GetStyle().FramePadding.x;
  // Which mode the layer runs, and so which of the two rows below is in use.
  const bool lined = lc.mode == AttentionMode::kLined, clustered = lc.mode == AttentionMode::kClustered;
  const bool press = lc.mode == AttentionMode::kPress, quest = lc.mode == AttentionMode::kQuest;
  std::string runs = luka::to_string(lc.mode);
  if (press) runs += std::string(" (") + luka::to_string(lc.press.method) + ")";
  const std::string heading = "layer " + std::to_string(ui.selection.layer) + " runs " + runs +
                              (lined || clustered || press || quest ? "; its parameters:" : "; the parameters it would use as:");
  ImGui::TextUnformatted(heading.c_str());
  ui.mark_item_drawn("layer_params_heading");
  ui.drawn["layer_params_heading"].text = heading;
  const ImVec4 unused = ImGui::GetStyle().Colors[ImGuiCol_TextDisabled];
  changed |= lined_parameters(lc, lined, number);
  changed |= clustered_parameters(lc, clustered, number);
  // The press and Quest rows show only on a layer that runs them: the table below keeps its room.
  if (press) changed |= press_parameters(lc, number);
  if (quest) changed |= quest_parameters(lc, number);
  // A short prompt under a long tail: few tokens or none are paged, which looks like clustering
  // doing nothing. Say how many are, and why.
  if (clustered && have_costs) {
    const std::size_t sl = static_cast<std::size_t>(std::clamp(ui.selection.layer, 0, L - 1));
    if (costs.tokens[sl] > 0) {
      const std::int64_t paged = costs.paged[sl], tokens = costs.tokens[sl];
      std::string note =
          std::to_string(paged) + " of " + std::to_string(tokens) + " tokens paged at step " + std::to_string(last);
      if (paged * 2 < tokens)
        note += ": the last " + std::to_string(lc.clustered.tail) +
                " tokens (tail) stay raw, and the tokens before them go into pages of " +
                std::to_string(lc.clustered.page_size) + (paged == 0 ? "; none fill one yet." : ".") +
                " A smaller tail pages more.";
      ImGui::PushStyleColor(ImGuiCol_Text, paged * 2 < tokens ? ImVec4(0.95f, 0.8f, 0.45f, 1.f) : unused);
      ImGui::TextWrapped("%s", note.c_str());
      ImGui::PopStyleColor();
      ui.mark_item_drawn("layer_paged");
      ui.drawn["layer_paged"].text = note;
    }
  }
  if (changed) {
    try {
      validate(lc, ui.selection.layer);
      cfg.layers[static_cast<std::size_t>(ui.selection.layer)] = lc;
      ui.controller.set_config(cfg);
      ui.layers.notice.clear();
    } catch (const std::exception& e) {
      ui.layers.notice = e.what();
    }
  }
}

// One row per layer: its mode (radio buttons, live), cover, refined pages and ms at the step shown.
void layers_table(UiState& ui, const LukaConfig& cfg, bool replay, const LayerCosts& costs, bool have_costs, std::int64_t last) {
  const int L = static_cast<int>(cfg.layers.size());
  if (!ImGui::BeginTable("layers", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit,
                         ImVec2(-1, ImGui::GetContentRegionAvail().y)))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("layer");
  ImGui::TableSetupColumn("mode (live)");
  ImGui::TableSetupColumn("cover");
  ImGui::TableSetupColumn("refined");
  ImGui::TableSetupColumn("ms");
  // The headers, with what each column means in its tooltip.
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  static const char* kHeaderTips[] = {
      "the model's layer (click to select it)",
      "D dense, L lined, C clustered, K Kascade, P press (kvpress), Q Quest: a change takes effect at the next decode step",
      "keys attended at the step, mean over the recorded heads / the tokens so far",
      "clustered: pages refined to their raw tokens at the step (first recorded head)",
      ""};
  const std::string ms_tip = "milliseconds the layer's attention took per decode step: the mean over the last " +
                             std::to_string(kMsSteps) + " steps up to step " + std::to_string(last) +
                             " (one step alone is noisy)";
  for (int c = 0; c < 5; ++c) {
    ImGui::TableSetColumnIndex(c);
    ImGui::TableHeader(ImGui::TableGetColumnName(c));
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", c == 4 ? ms_tip.c_str() : kHeaderTips[c]);
  }
  static const char* kModes[] = {"D", "L", "C", "K", "P", "Q"};
  static const char* kModeTips[] = {"dense", "lined (heavy hitters + recent window)", "clustered (pages, refined on demand)",
                                    "kascade: an anchor (top-k of its own attention), or reusing an earlier anchor's top-k",
                                    "press: kvpress's scoring of the prompt, which keeps its best tokens and evicts the rest\n"
                                    "(switched on after the prompt, it keeps every token until the next one)",
                                    "quest: per step, the pages of highest key bound and the recent window; the other pages left out"};
  static const AttentionMode kModeValues[] = {AttentionMode::kDense, AttentionMode::kLined, AttentionMode::kClustered,
                                              AttentionMode::kKascade, AttentionMode::kPress, AttentionMode::kQuest};
  constexpr int kModeCount = static_cast<int>(sizeof kModes / sizeof kModes[0]);
  for (int l = 0; l < L; ++l) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool selected = l == ui.selection.layer;
    if (ImGui::Selectable(std::to_string(l).c_str(), selected, ImGuiSelectableFlags_None, ImVec2(28, 0))) ui.selection.layer = l;
    ImGui::TableNextColumn();
    ImGui::PushID(l);
    ImGui::BeginDisabled(replay);
    for (int m = 0; m < kModeCount; ++m) {
      if (m) ImGui::SameLine();
      if (ImGui::RadioButton(kModes[m], cfg.layers[static_cast<std::size_t>(l)].mode == kModeValues[m]))
        ui.controller.set_layer_mode(l, kModeValues[m]);
      if (ImGui::IsItemHovered()) {
        const KascadeConfig& k = cfg.layers[static_cast<std::size_t>(l)].kascade;
        const std::string reuse = m == 3 && cfg.layers[static_cast<std::size_t>(l)].mode == AttentionMode::kKascade && k.source >= 0
                                      ? "\nthis layer reuses layer " + std::to_string(k.source)
                                      : "";
        ImGui::SetTooltip("%s%s", kModeTips[m], reuse.c_str());
      }
    }
    ImGui::EndDisabled();
    ImGui::PopID();
    static const std::string dash = "-";
    const std::size_t li = static_cast<std::size_t>(l);
    const std::string& cover = have_costs ? costs.cover[li] : dash;
    const std::string& refined = have_costs ? costs.refined[li] : dash;
    const std::string& ms = have_costs ? costs.ms[li] : dash;
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(cover.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(refined.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(ms.c_str());
    ui.mark_item_drawn("layer_ms/" + std::to_string(l));
    ui.drawn["layer_ms/" + std::to_string(l)].text = ms;
  }
  ImGui::EndTable();
}

}  // namespace

void draw_layers_panel(UiState& ui) {
  LukaConfig cfg = ui.controller.config();
  const int L = static_cast<int>(cfg.layers.size());
  if (L == 0) {
    ImGui::TextDisabled("load a model or open a capture");
    return;
  }
  // Replay: the modes shown are the capture's; layers stay selectable, nothing else changes.
  const bool replay = ui.controller.status().replay;
  if (replay) ImGui::TextDisabled("replay: the capture's modes, read-only");
  ImGui::BeginDisabled(replay);
  preset_row(ui, L);
  const auto view = ui.controller.view();
  std::int64_t last = 0;
  if (view) last = view->summary().complete_steps;
  // The step the table shows: the one selected (replay's step slider), else the latest.
  if (ui.selection.step > 0) last = std::min(last, ui.selection.step);
  const std::vector<int> recorded = view ? view->summary().layout.layers : std::vector<int>{};
  const LayerCosts& costs = layer_costs(ui, view, last, recorded, L);
  // This model's (a read has arrived).
  const bool have_costs = costs.have && costs.cover.size() == static_cast<std::size_t>(L);
  layer_parameters(ui, cfg, costs, have_costs, last);
  // An error from the controls above, wrapped to the panel so that all of it shows.
  if (!ui.layers.notice.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.55f, 0.45f, 1.f));
    ImGui::TextWrapped("%s", ui.layers.notice.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::EndDisabled();
  layers_table(ui, cfg, replay, costs, have_costs, last);
}

}  // namespace luka::studio
