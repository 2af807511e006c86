#include "captures/analysis.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/eval/head_scores.h"
#include "core/util/error.h"

namespace luka::capture {
namespace {

// [SECTION] What the capture offers

struct Selection {
  Summary summary;
  std::vector<int> layers, heads;
  bool prefill = false, decode = false, covers = false;
  std::string prefill_note, decode_note;
  std::int64_t steps = 0;
};

std::vector<int> pick(const std::vector<int>& recorded, const std::vector<int>& asked, const char* what) {
  if (asked.empty()) return recorded;
  std::vector<int> out;
  for (const int v : asked) out.push_back(recorded[static_cast<std::size_t>(recorded_index(recorded, v, what))]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Selection select(const CaptureView& view, const AnalysisOptions& options) {
  Selection s;
  s.summary = view.summary();
  const Layout& l = s.summary.layout;
  s.layers = pick(l.layers, options.layers, "layer");
  s.heads = pick(l.heads, options.heads, "head");
  s.steps = s.summary.complete_steps;
  const bool level0 = std::find(l.levels.begin(), l.levels.end(), 0) != l.levels.end();
  if (!options.prefill) {
    s.prefill_note = "the prefill map was not asked for";
  } else if (l.levels.empty()) {
    s.prefill_note = "prefill maps were not recorded";
  } else if (!level0) {
    s.prefill_note = "the prefill map's level 0 is not stored (" + std::to_string(l.prompt_tokens) +
                     " prompt tokens exceed the map cap; the finest level is " + std::to_string(l.levels.front()) +
                     ", max-pooled, which holds no attention mass)";
  } else {
    s.prefill = true;
  }
  if (!options.decode) {
    s.decode_note = "decode rows were not asked for";
  } else if (!l.rows) {
    s.decode_note = "effective rows were not recorded";
  } else if (s.steps == 0) {
    s.decode_note = "no complete decode step";
  } else {
    s.decode = true;
    s.covers = l.covers;
  }
  return s;
}

void require_data(const Selection& s) {
  if (!s.prefill && !s.decode)
    fail("capture analysis", "nothing to analyse: " + s.prefill_note + ", and " + s.decode_note +
                        " (record with --record parts=maps,rows and map_cap at least the prompt length)");
}

// Topics and token ids; `require` throws without segments.
TopicIndex index_tokens(const CaptureView& view, bool require, int decode_topic) {
  TopicIndex t;
  t.segments = view.segments();
  const std::vector<Token> tokens = view.tokens();
  if (require && t.segments.empty())
    fail("attention by topic", "the capture has no segments (its prompt is not interwoven); record a run of an interwoven prompt (--prompt-file, --wikisalad)");
  for (const Segment& seg : t.segments) {
    const auto it = std::find(t.labels.begin(), t.labels.end(), seg.label);
    if (it == t.labels.end()) {
      t.segment_topic.push_back(static_cast<int>(t.labels.size()));
      t.labels.push_back(seg.label);
      t.colours.push_back(seg.colour);
      const int k = static_cast<int>(t.letters.size());
      t.letters.push_back(k < 26 ? std::string(1, static_cast<char>('A' + k)) : "T" + std::to_string(k + 1));
    } else {
      t.segment_topic.push_back(static_cast<int>(it - t.labels.begin()));
    }
  }
  std::int64_t last_begin = -1;
  for (std::size_t i = 0; i < t.segments.size(); ++i)
    if (t.segments[i].begin > last_begin) last_begin = t.segments[i].begin, t.decode_topic = t.segment_topic[i];
  // The topic the prompt's question asks about, when its file said (the generation's question_topic).
  const std::string asked = capture::question_topic(view);
  if (const auto it = std::find(t.labels.begin(), t.labels.end(), asked); !asked.empty() && it != t.labels.end())
    t.decode_topic = static_cast<int>(it - t.labels.begin());
  if (decode_topic >= 0) {
    if (decode_topic >= t.num_topics())
      fail("capture analysis", "decode topic " + std::to_string(decode_topic) + " (" + std::string(1, static_cast<char>('A' + std::min(decode_topic, 25))) +
                                   "): the capture has " + std::to_string(t.num_topics()) + " topic" + (t.num_topics() == 1 ? "" : "s"));
    t.decode_topic = decode_topic;
  }
  const std::int32_t S = static_cast<std::int32_t>(t.segments.size());
  for (const Token& tok : tokens) {
    const std::int32_t seg = tok.segment >= 0 && tok.segment < S ? tok.segment : -1;
    t.token_segment.push_back(seg);
    t.token_topic.push_back(seg >= 0 ? t.segment_topic[static_cast<std::size_t>(seg)] : -1);
    t.token_id.push_back(tok.id);
  }
  return t;
}

// The tokens listed, checked to cover every analysed step's keys.
std::int64_t known_tokens(const Selection& sel, const TopicIndex& t) {
  const std::int64_t known = static_cast<std::int64_t>(t.token_id.size());
  const std::int64_t need = sel.summary.layout.prompt_tokens + (sel.decode ? sel.steps : 0);
  if (known < need) fail("capture", "the capture lists " + std::to_string(known) + " tokens, fewer than the " + std::to_string(need) + " its steps need");
  return known;
}

// Calls f(q, row) for every query row q of one head's prefill map at level 0 (row: keys 0 .. q),
// reading a band of rows at a time.
template <class F>
void for_prefill_rows(const CaptureView& view, int layer, int head, std::int64_t n, F&& f) {
  constexpr std::int64_t kBand = 256;
  for (std::int64_t row0 = 0; row0 < n; row0 += kBand) {
    const MapWindow w = view.map_window(layer, head, 0, row0, 0, std::min(kBand, n - row0), n);
    for (std::int64_t r = 0; r < w.rows; ++r) f(row0 + r, w.values.data() + r * w.cols);
  }
}

// Checks that a decode row has the step's length.
std::vector<float> step_row(const CaptureView& view, std::int64_t step, int layer, int head, std::int64_t T) {
  std::vector<float> row = view.row(step, layer, head);
  if (static_cast<std::int64_t>(row.size()) != T)
    fail("capture", "decode step " + std::to_string(step) + " of layer " + std::to_string(layer) + " has " + std::to_string(row.size()) +
                        " entries, expected " + std::to_string(T));
  return row;
}

// Reports progress; false when the caller asked to stop.
struct Progress {
  const std::function<bool(double)>& report;
  double total = 1, done = 0;
  bool step() {
    done += 1;
    return !report || report(std::min(1.0, done / std::max(1.0, total)));
  }
};

// [SECTION] Pattern-score sums

struct ScoreSums {
  double sink = 0, entropy = 0, locality = 0, previous = 0, induction = 0, cross = 0;
  std::int64_t rows = 0, previous_rows = 0, induction_rows = 0, cross_rows = 0;
  void add(const eval::HeadScores& s) {
    sink += s.sink, entropy += s.entropy, locality += s.locality, ++rows;
    if (!std::isnan(s.previous_token)) previous += s.previous_token, ++previous_rows;
    if (!std::isnan(s.induction)) induction += s.induction, ++induction_rows;
    if (!std::isnan(s.cross_topic)) cross += s.cross_topic, ++cross_rows;
  }
  PatternScores mean() const {
    const auto div = [](double sum, std::int64_t n) { return n > 0 ? sum / static_cast<double>(n) : kNoValue; };
    PatternScores p;
    p.sink = div(sink, rows), p.entropy = div(entropy, rows), p.locality = div(locality, rows);
    p.previous_token = div(previous, previous_rows);
    p.induction = div(induction, induction_rows);
    p.cross_topic = div(cross, cross_rows);
    p.rows = rows, p.previous_rows = previous_rows, p.induction_rows = induction_rows, p.cross_rows = cross_rows;
    return p;
  }
};

}  // namespace

std::string question_topic(const CaptureView& view) {
  const nlohmann::json g = nlohmann::json::parse(view.summary().manifest.generation, nullptr, false);
  return g.is_object() && g.contains("question_topic") && g["question_topic"].is_string() ? g["question_topic"].get<std::string>() : "";
}

TopicIndex topic_index(const CaptureView& view, int decode_topic) { return index_tokens(view, true, decode_topic); }

const HeadTopics* TopicAnalysis::find(int layer, int head) const {
  for (const HeadTopics& h : heads)
    if (h.layer == layer && h.head == head) return &h;
  return nullptr;
}

// [SECTION] Attention by topic

TopicAnalysis analyze_topics(const CaptureView& view, const AnalysisOptions& options) {
  const Selection sel = select(view, options);
  TopicAnalysis out;
  out.topics = index_tokens(view, true, options.decode_topic);
  require_data(sel);
  out.prefill = sel.prefill, out.decode = sel.decode, out.covers = sel.covers;
  out.prefill_note = sel.prefill_note, out.decode_note = sel.decode_note;
  out.steps = sel.decode ? sel.steps : 0;

  const TopicIndex& t = out.topics;
  const std::int64_t n = sel.summary.layout.prompt_tokens;
  const std::size_t S = t.segments.size(), K = t.labels.size();
  const std::size_t H = sel.heads.size();
  // Per token, the matrix column of its segment (S: outside every segment).
  std::vector<std::size_t> column(t.token_segment.size());
  for (std::size_t k = 0; k < column.size(); ++k) column[k] = t.token_segment[k] >= 0 ? static_cast<std::size_t>(t.token_segment[k]) : S;
  const std::int64_t known = known_tokens(sel, t);

  Progress progress{options.progress};
  progress.total = static_cast<double>((sel.prefill ? sel.layers.size() * H : 0) + static_cast<std::size_t>(out.steps));

  for (const int layer : sel.layers)
    for (const int head : sel.heads) {
      HeadTopics h;
      h.layer = layer, h.head = head;
      if (sel.covers) h.refined_pages.assign(K + 1, 0), h.heavy_hitters.assign(K + 1, 0);
      out.heads.push_back(std::move(h));
    }

  if (sel.prefill) {
    for (HeadTopics& h : out.heads) {
      std::vector<double> m((S + 1) * (S + 1), 0.0);
      std::vector<std::int64_t> queries(S + 1, 0);
      double leak = 0;
      std::int64_t leak_rows = 0;
      for_prefill_rows(view, h.layer, h.head, n, [&](std::int64_t q, const float* row) {
        const std::size_t i = column[static_cast<std::size_t>(q)];
        ++queries[i];
        double* mi = m.data() + i * (S + 1);
        for (std::int64_t k = 0; k <= q; ++k) mi[column[static_cast<std::size_t>(k)]] += row[k];
        const std::int32_t topic = t.token_topic[static_cast<std::size_t>(q)];
        if (topic >= 0) leak += eval::cross_topic_mass(row, q + 1, t.token_topic.data(), topic), ++leak_rows;
      });
      for (std::size_t i = 0; i <= S; ++i)
        if (queries[i] > 0)
          for (std::size_t j = 0; j <= S; ++j) m[i * (S + 1) + j] /= static_cast<double>(queries[i]);
      h.prefill_matrix = std::move(m);
      h.prefill_queries = std::move(queries);
      h.prefill_leakage = leak_rows > 0 ? leak / static_cast<double>(leak_rows) : kNoValue;
      if (!progress.step()) {
        out.cancelled = true;
        return out;
      }
    }
  }

  if (sel.decode) {
    // Per recorded layer, the topic of each page (the one holding most of its tokens).
    std::vector<std::vector<std::size_t>> page_topic(sel.layers.size());
    if (sel.covers)
      for (std::size_t li = 0; li < sel.layers.size(); ++li)
        for (const PageInfo& p : view.pages(sel.layers[li])) {
          std::vector<std::int64_t> count(K + 1, 0), first(K + 1, -1);
          for (const auto& [b, e] : p.runs())
            for (std::int64_t k = std::max<std::int64_t>(0, b); k < std::min(e, known); ++k) {
              const std::int32_t topic = t.token_topic[static_cast<std::size_t>(k)];
              const std::size_t c = topic >= 0 ? static_cast<std::size_t>(topic) : K;
              if (count[c]++ == 0) first[c] = k;
            }
          std::size_t best = K;
          for (std::size_t c = 0; c <= K; ++c)
            if (count[c] > count[best] || (count[c] == count[best] && count[c] > 0 && first[c] < first[best])) best = c;
          page_topic[li].push_back(best);
        }
    std::vector<double> leak_sum(out.heads.size(), 0.0);
    std::vector<std::vector<double>> leak_by_topic(out.heads.size(), std::vector<double>(K, 0.0));
    for (std::int64_t step = 1; step <= out.steps; ++step) {
      const std::int64_t T = n + step;
      for (std::size_t li = 0; li < sel.layers.size(); ++li)
        for (std::size_t hi = 0; hi < H; ++hi) {
          const int layer = sel.layers[li], head = sel.heads[hi];
          HeadTopics& h = out.heads[li * H + hi];
          StepTopics st;
          st.step = step, st.layer = layer, st.head = head;
          const std::vector<float> row = step_row(view, step, layer, head, T);
          st.segment_mass.assign(S + 1, 0.0);
          st.topic_mass.assign(K + 1, 0.0);
          for (std::int64_t k = 0; k < T; ++k) {
            st.segment_mass[column[static_cast<std::size_t>(k)]] += row[static_cast<std::size_t>(k)];
            if (k >= n) st.generated += row[static_cast<std::size_t>(k)];
          }
          for (std::size_t i = 0; i < S; ++i) st.topic_mass[static_cast<std::size_t>(t.segment_topic[i])] += st.segment_mass[i];
          st.topic_mass[K] = st.segment_mass[S];
          st.leakage = eval::cross_topic_mass(row.data(), T, t.token_topic.data(), t.decode_topic);
          leak_sum[li * H + hi] += st.leakage;
          for (std::size_t k = 0; k < K; ++k)
            leak_by_topic[li * H + hi][k] +=
                k == static_cast<std::size_t>(t.decode_topic)
                    ? st.leakage
                    : eval::cross_topic_mass(row.data(), T, t.token_topic.data(), static_cast<std::int32_t>(k));
          if (sel.covers) {
            st.refined_pages.assign(K + 1, 0), st.heavy_hitters.assign(K + 1, 0);
            for (const std::int64_t p : view.refined_pages(step, layer, head)) {
              if (p >= static_cast<std::int64_t>(page_topic[li].size()))
                fail("capture", "layer " + std::to_string(layer) + " step " + std::to_string(step) + ": refined page " + std::to_string(p) +
                                    " is not in the page table");
              ++st.refined_pages[page_topic[li][static_cast<std::size_t>(p)]];
            }
            for (const std::int64_t k : view.heavy_hitters(step, layer, head)) {
              const std::int32_t topic = k < known ? t.token_topic[static_cast<std::size_t>(k)] : -1;
              ++st.heavy_hitters[topic >= 0 ? static_cast<std::size_t>(topic) : K];
            }
            for (std::size_t c = 0; c <= K; ++c) h.refined_pages[c] += st.refined_pages[c], h.heavy_hitters[c] += st.heavy_hitters[c];
          }
          out.steps_by_head.push_back(std::move(st));
        }
      if (!progress.step()) {
        out.cancelled = true;
        return out;
      }
    }
    for (std::size_t i = 0; i < out.heads.size(); ++i) {
      out.heads[i].decode_leakage = leak_sum[i] / static_cast<double>(out.steps);
      for (double& v : leak_by_topic[i]) v /= static_cast<double>(out.steps);
      out.heads[i].decode_leakage_by_topic = std::move(leak_by_topic[i]);
    }
  }
  return out;
}

// [SECTION] Head scores

HeadScoreAnalysis analyze_heads(const CaptureView& view, const AnalysisOptions& options) {
  const Selection sel = select(view, options);
  require_data(sel);
  HeadScoreAnalysis out;
  out.prefill = sel.prefill, out.decode = sel.decode;
  out.prefill_note = sel.prefill_note, out.decode_note = sel.decode_note;
  out.steps = sel.decode ? sel.steps : 0;
  const TopicIndex t = index_tokens(view, false, options.decode_topic);
  out.topics = !t.segments.empty();
  out.topic_letters = t.letters;
  out.decode_topic = t.decode_topic;
  const std::int32_t* topic = out.topics ? t.token_topic.data() : nullptr;
  const std::int64_t n = sel.summary.layout.prompt_tokens;
  known_tokens(sel, t);
  const std::size_t H = sel.heads.size();

  Progress progress{options.progress};
  progress.total = static_cast<double>((sel.prefill ? sel.layers.size() * H : 0) + static_cast<std::size_t>(sel.steps));
  for (const int layer : sel.layers)
    for (const int head : sel.heads) {
      HeadScoreRow r;
      r.layer = layer, r.head = head;
      out.heads.push_back(r);
    }

  if (sel.prefill) {
    for (HeadScoreRow& r : out.heads) {
      ScoreSums sums;
      for_prefill_rows(view, r.layer, r.head, n,
                       [&](std::int64_t q, const float* row) { sums.add(eval::head_scores(row, q + 1, topic, t.token_id.data())); });
      r.prefill = sums.mean();
      if (!progress.step()) {
        out.cancelled = true;
        return out;
      }
    }
  }

  // Decode rows (when recorded) and the per-head fidelity KL (always stored, NaN without the shadow).
  std::vector<ScoreSums> sums(out.heads.size());
  std::vector<double> kl(out.heads.size(), 0.0);
  const Layout& layout = sel.summary.layout;
  for (std::int64_t step = 1; step <= sel.steps; ++step) {
    const std::int64_t T = n + step;
    for (std::size_t li = 0; li < sel.layers.size(); ++li) {
      const int layer = sel.layers[li];
      const StepMetrics m = view.metrics(step, layer);
      for (std::size_t hi = 0; hi < H; ++hi) {
        const std::size_t i = li * H + hi;
        const std::size_t recorded = static_cast<std::size_t>(recorded_index(layout.heads, sel.heads[hi], "head"));
        if (recorded * 4 < m.fidelity.size() && !std::isnan(m.fidelity[recorded * 4])) {
          kl[i] += m.fidelity[recorded * 4];
          ++out.heads[i].kl_steps;
        }
        if (!sel.decode) continue;
        const std::vector<float> row = step_row(view, step, layer, sel.heads[hi], T);
        sums[i].add(eval::head_scores(row.data(), T, topic, out.topics ? t.decode_topic : -1, t.token_id.data()));
      }
    }
    if (!progress.step()) {
      out.cancelled = true;
      return out;
    }
  }
  for (std::size_t i = 0; i < out.heads.size(); ++i) {
    if (sel.decode) out.heads[i].decode = sums[i].mean();
    if (out.heads[i].kl_steps > 0) out.heads[i].kl = kl[i] / static_cast<double>(out.heads[i].kl_steps);
  }
  return out;
}

}  // namespace luka::capture
