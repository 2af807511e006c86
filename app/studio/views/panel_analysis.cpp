// The numbers behind the pictures (captures/analysis.h, docs/capture-analysis.md), computed off
// the UI thread from the capture, live or replayed:
// - Topics: for the selected layer and head, the prefill's segment x segment attention matrix,
//   the selected decode step's attention per topic as bars, cross-topic leakage, and refined pages
//   and heavy hitters by topic;
// - Head scores: every recorded layer and head in a sortable table with a colour grid (sink mass,
//   entropy, locality, previous-token and induction scores, cross-topic mass, fidelity KL); a
//   click on a row selects that head and shows its map.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "app/studio/views/choice_widgets.h"
#include "app/studio/views/ui_state.h"
#include "viz/colormap.h"

namespace luka::studio {
namespace {

// A tab's caption in the disabled colour, wrapped at the panel's edge (so it fits a 1280 x 800
// window), marked for scripts as `name`.
void caption_text(UiState& ui, const char* name, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%s", text.c_str());
  ImGui::PopStyleColor();
  ui.mark_item_drawn(name);
}

ImU32 ember(double t, int alpha = 255) {
  const viz::Rgb c = viz::Colormap::get(viz::ColormapId::kEmber).at(std::clamp(t, 0.0, 1.0));
  return IM_COL32(c.r, c.g, c.b, alpha);
}

std::string fmt(double v, const char* f = "%.3f") {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// An analysis's progress callback: the task's progress, and false (stop) once it is cancelled.
std::function<bool(double)> report_to(TaskContext& ctx) {
  return [&ctx](double f) {
    ctx.progress(f);
    return !ctx.cancelled();
  };
}

// A job's progress as the tabs print it, 0..100.
double percent(double fraction) { return 100 * std::max(0.0, fraction); }

// Sorts `order` (the table's row indices) by the table's sort column, NaN last; value(row, column).
template <typename Value>
void sort_by_table_specs(std::vector<int>& order, const Value& value) {
  const ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
  if (!specs || specs->SpecsCount == 0) return;
  const int k = specs->Specs[0].ColumnIndex;
  const bool descending = specs->Specs[0].SortDirection == ImGuiSortDirection_Descending;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const double vx = value(x, k), vy = value(y, k);
    if (std::isnan(vx) || std::isnan(vy)) return !std::isnan(vx) && std::isnan(vy);  // NaN last
    return descending ? vx > vy : vx < vy;
  });
}

}  // namespace

void draw_topics_panel(UiState& ui) {
  const auto view = ui.controller.view();
  if (!view) {
    ImGui::TextDisabled("run a prompt or open a capture");
    return;
  }
  const std::string ck = capture_key(view.get());
  const int layer = ui.selection.layer, head = ui.selection.head;
  const std::string key = ck + "/" + std::to_string(layer) + "/" + std::to_string(head);
  const auto& out = ui.analysis.topics.get(
      ui.tasks, key,
      [view, layer, head](TaskContext& ctx) {
        AnalysisOutcome<capture::TopicAnalysis> o;
        try {
          capture::AnalysisOptions opt;
          opt.layers = {layer};
          opt.heads = {head};
          opt.progress = report_to(ctx);
          o.value = std::make_shared<capture::TopicAnalysis>(capture::analyze_topics(*view, opt));
        } catch (const std::exception& e) {
          o.error = e.what();
        }
        return o;
      },
      "attention by topic");
  if (!ui.analysis.topics.fresh(key)) {
    ImGui::TextDisabled("computing attention by topic for layer %d head %d... %.0f%%", layer, head, percent(ui.analysis.topics.progress()));
    if (!out.value) return;
  }
  if (!out.error.empty()) {
    ImGui::TextDisabled("%s", out.error.c_str());
    return;
  }
  if (!out.value) return;
  const capture::TopicAnalysis& a = *out.value;
  const capture::HeadTopics* h = a.find(layer, head);
  if (!h) return;
  const auto& ti = a.topics;
  const int S = ti.num_segments(), K = ti.num_topics();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();

  // Left: the prefill segment x segment matrix (rows: query segment, columns: key segment).
  ImGui::BeginGroup();
  ImGui::Text("layer %d head %d: prefill attention, query segment (row) to key segment", layer, head);
  if (a.prefill && !h->prefill_matrix.empty()) {
    const float cell = std::clamp((ImGui::GetContentRegionAvail().y - 2 * line - 8) / static_cast<float>(S + 1), 12.f, 28.f);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float label = 40;
    for (int i = 0; i <= S; ++i) {
      const std::string name = i < S ? ti.letters[static_cast<std::size_t>(ti.segment_topic[static_cast<std::size_t>(i)])] + std::to_string(i) : "other";
      dl->AddText(ImVec2(p.x, p.y + label / 2 + cell * static_cast<float>(i) + cell / 2 - line / 2), IM_COL32(200, 200, 205, 255), name.c_str());
      if (i < S) dl->AddRectFilled(ImVec2(p.x + label + cell * static_cast<float>(i), p.y + label / 2 - 6),
                                   ImVec2(p.x + label + cell * static_cast<float>(i + 1) - 1, p.y + label / 2 - 1),
                                   parse_colour(ti.segments[static_cast<std::size_t>(i)].colour));
      for (int j = 0; j <= S; ++j) {
        const double v = h->prefill_matrix[static_cast<std::size_t>(i * (S + 1) + j)];
        const ImVec2 a0(p.x + label + cell * static_cast<float>(j), p.y + label / 2 + cell * static_cast<float>(i));
        dl->AddRectFilled(a0, ImVec2(a0.x + cell - 1, a0.y + cell - 1), ember(v));
      }
    }
    const ImVec2 size(label + cell * static_cast<float>(S + 1), label / 2 + cell * static_cast<float>(S + 1));
    ui.mark_drawn("topics_matrix", p.x + label, p.y + label / 2, p.x + size.x, p.y + size.y);  // the (S + 1) x (S + 1) cells
    ImGui::InvisibleButton("matrix", size);
    if (ImGui::IsItemHovered()) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      const int j = static_cast<int>((m.x - p.x - label) / cell), i = static_cast<int>((m.y - p.y - label / 2) / cell);
      if (i >= 0 && i <= S && j >= 0 && j <= S)
        ImGui::SetTooltip("queries in %s (%lld rows) put %.4f of their attention on %s", i < S ? ti.segments[static_cast<std::size_t>(i)].label.c_str() : "no segment",
                          static_cast<long long>(h->prefill_queries[static_cast<std::size_t>(i)]), h->prefill_matrix[static_cast<std::size_t>(i * (S + 1) + j)],
                          j < S ? ti.segments[static_cast<std::size_t>(j)].label.c_str() : "tokens outside every segment");
    }
  } else {
    ImGui::TextDisabled("%s", a.prefill_note.empty() ? "no prefill map" : a.prefill_note.c_str());
  }
  ImGui::EndGroup();
  ImGui::SameLine(0, 30);

  // Right: leakage, the selected step's mass per topic, refined pages and heavy hitters by topic.
  ImGui::BeginGroup();
  // Decode leakage against every topic, one choice each; the chosen one is the headline (by
  // default the topic of the prompt's last segment, as luka inspect --topics measures it).
  int& against = ui.analysis.leakage_topic;
  if (against < 0 || against >= K) against = ti.decode_topic;
  const bool by_topic = h->decode_leakage_by_topic.size() == static_cast<std::size_t>(K) && K > 0;
  const double decode = by_topic && against >= 0 ? h->decode_leakage_by_topic[static_cast<std::size_t>(against)] : h->decode_leakage;
  ImGui::Text("cross-topic leakage: prefill %s", fmt(h->prefill_leakage).c_str());
  if (by_topic) {
    ImGui::TextUnformatted("decode, against");
  } else {
    ImGui::Text("decode %s, against %s", fmt(decode).c_str(), against >= 0 ? ti.letters[static_cast<std::size_t>(against)].c_str() : "-");
  }
  ui.mark_item_drawn("topics_leakage");
  ui.drawn["topics_leakage"].text = fmt(decode) + " against " + (against >= 0 ? ti.letters[static_cast<std::size_t>(against)] : "-");
  if (by_topic) {
    for (int k = 0; k < K; ++k) {
      ImGui::SameLine();
      const std::string label = ti.letters[static_cast<std::size_t>(k)] + " " + fmt(h->decode_leakage_by_topic[static_cast<std::size_t>(k)]) +
                                "##leak" + std::to_string(k);
      if (ImGui::RadioButton(label.c_str(), against == k)) against = k;
      ui.mark_item_drawn("topics_against_" + ti.letters[static_cast<std::size_t>(k)]);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the decode steps' mean attention on segments of topics other than %s (%s)%s", ti.letters[static_cast<std::size_t>(k)].c_str(),
                          ti.labels[static_cast<std::size_t>(k)].c_str(), k == ti.decode_topic ? "; the topic of the prompt's last segment, the default" : "");
    }
  }
  const capture::StepTopics* st = nullptr;
  if (a.decode && !a.steps_by_head.empty()) {
    const std::int64_t s = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, a.steps) : a.steps;
    for (const capture::StepTopics& x : a.steps_by_head)
      if (x.step == s && x.layer == layer && x.head == head) st = &x;
  }
  if (st) {
    ImGui::Text("step %lld: attention per topic (generated tokens %.3f)", static_cast<long long>(st->step), st->generated);
    const float bar_w = std::max(100.f, ImGui::GetContentRegionAvail().x - 160);
    for (int k = 0; k <= K; ++k) {
      const double v = st->topic_mass[static_cast<std::size_t>(k)];
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const ImU32 col = k < K ? parse_colour(ti.colours[static_cast<std::size_t>(k)]) : IM_COL32(150, 150, 155, 255);
      dl->AddRectFilled(ImVec2(p.x + 90, p.y + 2), ImVec2(p.x + 90 + bar_w * static_cast<float>(std::clamp(v, 0.0, 1.0)), p.y + line - 1), col);
      const std::string name = k < K ? ti.letters[static_cast<std::size_t>(k)] + " " + token_label(ti.labels[static_cast<std::size_t>(k)], 10) : "other";
      ImGui::TextUnformatted(name.c_str());
      ImGui::SameLine(0, 0);
      ImGui::SetCursorScreenPos(ImVec2(p.x + 96 + bar_w, p.y));
      ImGui::Text("%.3f", v);
    }
    if (!st->refined_pages.empty()) {
      std::string r = "refined pages by topic:", hh = "heavy hitters by topic:";
      for (int k = 0; k <= K; ++k) {
        const std::string name = k < K ? ti.letters[static_cast<std::size_t>(k)] : "other";
        r += " " + name + " " + std::to_string(st->refined_pages[static_cast<std::size_t>(k)]);
        hh += " " + name + " " + std::to_string(st->heavy_hitters[static_cast<std::size_t>(k)]);
      }
      ImGui::TextUnformatted((r + "  (this step)").c_str());
      ImGui::TextUnformatted((hh + "  (this step)").c_str());
    }
  } else {
    ImGui::TextDisabled("%s", a.decode_note.empty() ? "no decode steps yet" : a.decode_note.c_str());
  }
  ImGui::EndGroup();
}

const AnalysisOutcome<capture::HeadScoreAnalysis>& head_scores(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view) {
  return ui.analysis.head_scores.get(
      ui.tasks, capture_key(view.get()),
      [view](TaskContext& ctx) {
        AnalysisOutcome<capture::HeadScoreAnalysis> o;
        try {
          capture::AnalysisOptions opt;
          opt.progress = report_to(ctx);
          o.value = std::make_shared<capture::HeadScoreAnalysis>(capture::analyze_heads(*view, opt));
        } catch (const std::exception& e) {
          o.error = e.what();
        }
        return o;
      },
      "head scores");
}

namespace {

// The table's source: the capture's prefill map or decode rows, or the calibration attached to it.
void source_combo(UiState& ui) {
  static const char* kSources[] = {"prefill rows", "decode rows", "calibration"};
  ImGui::SetNextItemWidth(120);
  choice_combo("##source", ui.analysis.source, kSources);
  ImGui::SameLine();
}

// The calibration attached to the capture (luka capture/studio --calibration): per head its dense
// pattern scores and each candidate's output error against dense, coloured per column.
void draw_calibration_table(UiState& ui, const capture::CaptureView& view) {
  source_combo(ui);
  const auto cal = view_calibration(ui, view);
  if (!cal) {
    if (!ui.analysis.calibration_error.empty()) ImGui::TextDisabled("%s", ui.analysis.calibration_error.c_str());
    else if (!ui.run.calibration.empty() && !ui.run.locked)
      ImGui::TextDisabled("no calibration in this run: %s is of another model's layers and heads", ui.run.calibration_path.c_str());
    else
      ImGui::TextDisabled("no calibration attached: luka calibrate --out calib.json, then luka capture --calibration calib.json "
                          "(or luka studio --calibration calib.json for runs started here)");
    return;
  }
  const eval::Calibration& c = *cal;
  char caption[512];
  std::snprintf(caption, sizeof caption, "%lld steps of %s: output error against dense per candidate (* lowest); hover for KL, recall, entries",
                static_cast<long long>(c.decode_steps), c.source.c_str());
  caption_text(ui, "calibration_caption", caption);
  const int C = static_cast<int>(c.candidates.size());
  const int fixed_columns = 6, count = fixed_columns + C + 1;
  if (count > 60) {  // ImGui tables hold at most 64 columns
    ImGui::TextDisabled("%d candidates: too many columns to show (luka inspect --calibration prints them)", C);
    return;
  }
  const auto value = [&](const eval::CalibrationHead& r, int k) -> double {
    switch (k) {
      case 0: return r.layer;
      case 1: return r.head;
      case 2: return r.sink;
      case 3: return r.entropy;
      case 4: return r.locality;
      case 5: return r.cross_topic;
      default:
        if (k - fixed_columns < C) return r.candidates[static_cast<std::size_t>(k - fixed_columns)].rel_l2;
        return r.best;
    }
  };
  std::vector<double> lo(static_cast<std::size_t>(count), INFINITY), hi(static_cast<std::size_t>(count), -INFINITY);
  for (const auto& r : c.heads)
    for (int k = 2; k < count - 1; ++k) {
      const double v = value(r, k);
      if (std::isnan(v)) continue;
      lo[static_cast<std::size_t>(k)] = std::min(lo[static_cast<std::size_t>(k)], v);
      hi[static_cast<std::size_t>(k)] = std::max(hi[static_cast<std::size_t>(k)], v);
    }
  // Output errors share one scale, so a row reads across as well as down.
  double elo = INFINITY, ehi = -INFINITY;
  for (int k = fixed_columns; k < fixed_columns + C; ++k) {
    elo = std::min(elo, lo[static_cast<std::size_t>(k)]);
    ehi = std::max(ehi, hi[static_cast<std::size_t>(k)]);
  }
  for (int k = fixed_columns; k < fixed_columns + C; ++k) lo[static_cast<std::size_t>(k)] = elo, hi[static_cast<std::size_t>(k)] = ehi;

  std::vector<int> order(c.heads.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_SizingStretchSame;
  if (!ImGui::BeginTable("calibration", count, flags, ImVec2(0, ImGui::GetContentRegionAvail().y))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  static const char* kNames[] = {"layer", "head", "sink", "entropy", "locality", "cross-topic"};
  static const char* kTips[] = {"", "", "dense attention on token 0", "nats", "mean distance back from the query", "dense attention on other topics' segments"};
  for (int k = 0; k < count; ++k) {
    const std::string name = k < fixed_columns ? kNames[k] : k < fixed_columns + C ? c.candidates[static_cast<std::size_t>(k - fixed_columns)] : "best";
    ImGui::TableSetupColumn(name.c_str(), k == 0 ? ImGuiTableColumnFlags_DefaultSort : 0);
  }
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (int k = 0; k < count; ++k) {
    ImGui::TableSetColumnIndex(k);
    ImGui::TableHeader(ImGui::TableGetColumnName(k));
    if (ImGui::IsItemHovered()) {
      if (k < fixed_columns && kTips[k][0]) ImGui::SetTooltip("%s", kTips[k]);
      else if (k >= fixed_columns && k < fixed_columns + C) ImGui::SetTooltip("%s: relative L2 error of the attention output against dense", ImGui::TableGetColumnName(k));
      else if (k == count - 1) ImGui::SetTooltip("the candidate with the lowest output error");
    }
  }
  sort_by_table_specs(order, [&](int i, int k) { return value(c.heads[static_cast<std::size_t>(i)], k); });
  for (const int i : order) {
    const eval::CalibrationHead& r = c.heads[static_cast<std::size_t>(i)];
    ImGui::TableNextRow();
    for (int k = 0; k < count; ++k) {
      ImGui::TableSetColumnIndex(k);
      const double v = value(r, k);
      const std::size_t ku = static_cast<std::size_t>(k);
      if (k >= 2 && k < count - 1 && !std::isnan(v) && hi[ku] > lo[ku])
        ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, ember(0.15 + 0.7 * (v - lo[ku]) / (hi[ku] - lo[ku]), 150));
      if (k == 0) {
        const std::string label = std::to_string(r.layer) + "##cal" + std::to_string(i);
        if (ImGui::Selectable(label.c_str(), r.layer == ui.selection.layer && r.head == ui.selection.head, ImGuiSelectableFlags_SpanAllColumns)) {
          ui.selection.layer = r.layer;
          ui.selection.head = r.head;
          ui.heatmap.mode = MapMode::kMap;
        }
      } else if (k == 1) {
        ImGui::Text("%d", r.head);
      } else if (k < fixed_columns) {
        ImGui::TextUnformatted(fmt(v, k == 4 ? "%.1f" : "%.3f").c_str());
      } else if (k < fixed_columns + C) {
        const eval::CandidateScores& sc = r.candidates[static_cast<std::size_t>(k - fixed_columns)];
        ImGui::TextUnformatted((fmt(v) + (r.best == k - fixed_columns ? " *" : "")).c_str());
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("%s, layer %d head %d\noutput error %.4f\nKL(dense || effective) %.4f\nrecall %.4f\nentries per step %.1f (dense %.1f)",
                            c.candidates[static_cast<std::size_t>(k - fixed_columns)].c_str(), r.layer, r.head, sc.rel_l2, sc.kl, sc.recall,
                            sc.entries, c.dense_entries[static_cast<std::size_t>(r.layer)]);
      } else {
        ImGui::TextUnformatted(r.best >= 0 ? c.candidates[static_cast<std::size_t>(r.best)].c_str() : "-");
      }
    }
  }
  ImGui::EndTable();
}

}  // namespace

void draw_head_scores_panel(UiState& ui) {
  const auto view = ui.controller.view();
  if (!view) {
    ImGui::TextDisabled("run a prompt or open a capture");
    return;
  }
  if (ui.analysis.source == HeadScoreSource::kCalibration) {
    draw_calibration_table(ui, *view);
    return;
  }
  const std::string key = capture_key(view.get());
  const auto& out = head_scores(ui, view);
  source_combo(ui);
  if (!ui.analysis.head_scores.fresh(key)) {
    ImGui::TextDisabled("computing head scores... %.0f%%", percent(ui.analysis.head_scores.progress()));
    if (!out.value) return;
    ImGui::SameLine();
  }
  if (!out.error.empty()) {
    ImGui::TextDisabled("%s", out.error.c_str());
    return;
  }
  if (!out.value) return;
  const capture::HeadScoreAnalysis& a = *out.value;
  const bool decode = ui.analysis.source == HeadScoreSource::kDecode;
  const std::string note = decode ? a.decode_note : a.prefill_note;
  caption_text(ui, "head_scores_caption",
               !note.empty() ? note
                             : std::string("means over ") + (decode ? "the decode steps' effective rows" : "the prefill map's query rows (level 0)") +
                                   "; colour: each column from its lowest (dark) to its highest (light); click a row for its map");

  // Columns: layer, head, then the scores.
  struct Column {
    const char* name;
    const char* tip;
  };
  static const Column kColumns[] = {{"layer", ""}, {"head", ""},
                                    {"sink", "attention on token 0"}, {"entropy", "nats"}, {"locality", "mean distance back from the query"},
                                    {"prev", "attention on the previous token"}, {"induction", "attention on the token after an earlier copy of the query's token"},
                                    {"cross-topic", "attention on segments of other topics"}, {"KL", "KL(dense || effective), mean over the steps the shadow ran"}};
  constexpr int kCount = 9;
  const auto value = [&](const capture::HeadScoreRow& r, int c) -> double {
    const capture::PatternScores& p = decode ? r.decode : r.prefill;
    switch (c) {
      case 0: return r.layer;
      case 1: return r.head;
      case 2: return p.sink;
      case 3: return p.entropy;
      case 4: return p.locality;
      case 5: return p.previous_token;
      case 6: return p.induction;
      case 7: return p.cross_topic;
      default: return r.kl;
    }
  };
  // Per column, the range the colours span.
  double lo[kCount], hi[kCount];
  for (int c = 0; c < kCount; ++c) {
    lo[c] = INFINITY;
    hi[c] = -INFINITY;
    for (const auto& r : a.heads) {
      const double v = value(r, c);
      if (std::isnan(v)) continue;
      lo[c] = std::min(lo[c], v);
      hi[c] = std::max(hi[c], v);
    }
  }
  std::vector<int> order(a.heads.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_SizingStretchSame;
  if (!ImGui::BeginTable("head_scores", kCount, flags, ImVec2(0, ImGui::GetContentRegionAvail().y))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (int c = 0; c < kCount; ++c) ImGui::TableSetupColumn(kColumns[c].name, c == 0 ? ImGuiTableColumnFlags_DefaultSort : 0);
  ImGui::TableHeadersRow();
  sort_by_table_specs(order, [&](int i, int c) { return value(a.heads[static_cast<std::size_t>(i)], c); });
  for (const int i : order) {
    const capture::HeadScoreRow& r = a.heads[static_cast<std::size_t>(i)];
    ImGui::TableNextRow();
    for (int c = 0; c < kCount; ++c) {
      ImGui::TableSetColumnIndex(c);
      const double v = value(r, c);
      if (c >= 2 && !std::isnan(v) && hi[c] > lo[c]) ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, ember(0.15 + 0.7 * (v - lo[c]) / (hi[c] - lo[c]), 150));
      if (c == 1) {
        ImGui::Text("%d", r.head);
      } else if (c == 0) {
        const std::string label = std::to_string(r.layer) + "##" + std::to_string(i);
        if (ImGui::Selectable(label.c_str(), r.layer == ui.selection.layer && r.head == ui.selection.head, ImGuiSelectableFlags_SpanAllColumns)) {
          ui.selection.layer = r.layer;
          ui.selection.head = r.head;
          ui.heatmap.mode = MapMode::kMap;  // show that head's map
        }
      } else {
        ImGui::TextUnformatted(fmt(v, c == 4 ? "%.1f" : "%.3f").c_str());
        if (ImGui::IsItemHovered() && kColumns[c].tip[0]) ImGui::SetTooltip("%s", kColumns[c].tip);
        const ImVec2 t0 = ImGui::GetItemRectMin(), t1 = ImGui::GetItemRectMax();
        const ImVec2 c0 = ImGui::GetWindowDrawList()->GetClipRectMin(), c1 = ImGui::GetWindowDrawList()->GetClipRectMax();
        if (t0.y >= c0.y && t1.y <= c1.y) ui.mark_drawn("head_score/" + std::to_string(r.layer) + "/" + std::to_string(r.head) + "/" + kColumns[c].name, t0.x, t0.y, t1.x, t1.y);  // a whole cell's text in view
      }
    }
  }
  ImGui::EndTable();
}

}  // namespace luka::studio
