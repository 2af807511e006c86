// LuKA configuration: presets, overrides, JSON files, schedules and invalid configs.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/luka/config.h"
#include "core/luka/schedule.h"
#include "core/util/error.h"

namespace luka {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Two layer ranges of a layers-config that cover one layer must agree on every key both set there
// (docs/luka-config.md#layers-config-files): JSON objects have no order, and the reader, which
// sorts the ranges by name, gave layer 0 of {"0-1": lined, "0": clustered} the first one silently.
TEST(LukaConfig, OverlappingRangesThatDisagreeAreAnErrorNamingBoth) {
  const std::string e = error_of([] {
    LukaConfig::from_json(R"({"layers": {"0-1": {"mode": "lined"}, "0": {"mode": "clustered"}}})", 4, "c.json");
  });
  EXPECT_NE(e.find("c.json: 'layers': ranges '0' and '0-1' both cover layer 0 and set mode to \"clustered\" and \"lined\""),
            std::string::npos) << e;
  // Overlaps that agree, or set different keys, are fine; equal values in other spellings agree.
  const LukaConfig ok = LukaConfig::from_json(
      R"({"layers": {"0-1": {"mode": "lined", "rho": "1/8"}, "1|3": {"mode": "lined", "rho": 0.125, "window": 7}, "all": {"dense_shadow": true}}})",
      4, "c.json");
  EXPECT_EQ(ok.layers[0].mode, AttentionMode::kLined);
  EXPECT_EQ(ok.layers[1].lined.window, 7);
  EXPECT_EQ(ok.layers[3].mode, AttentionMode::kLined);
  EXPECT_EQ(ok.layers[2].mode, AttentionMode::kDense);
  EXPECT_TRUE(ok.layers[2].dense_shadow);
  EXPECT_DOUBLE_EQ(ok.layers[1].lined.rho, 0.125);
  // "default" is the base every range changes: no conflict with it.
  const LukaConfig base = LukaConfig::from_json(R"({"default": {"mode": "lined"}, "layers": {"2": {"mode": "clustered"}}})", 4, "c.json");
  EXPECT_EQ(base.layers[1].mode, AttentionMode::kLined);
  EXPECT_EQ(base.layers[2].mode, AttentionMode::kClustered);
}

TEST(LukaConfig, Presets) {
  const auto mixed = LukaConfig::preset("mixed(2,3)", 10);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(mixed.layers[i].mode, (i < 2 || i >= 7) ? AttentionMode::kLined : AttentionMode::kClustered) << i;
  const auto paper = LukaConfig::preset("paper", 28);
  EXPECT_EQ(paper.layers[0].mode, AttentionMode::kLined);
  EXPECT_EQ(paper.layers[7].mode, AttentionMode::kLined);
  EXPECT_EQ(paper.layers[8].mode, AttentionMode::kClustered);
  EXPECT_EQ(paper.layers[19].mode, AttentionMode::kClustered);
  EXPECT_EQ(paper.layers[20].mode, AttentionMode::kLined);
  EXPECT_EQ(paper.layers[10].clustered.compressor, Compressor::kAttentionWeighted);
  EXPECT_EQ(paper.layers[10].clustered.top_k, 3);
  EXPECT_EQ(paper.layers[10].clustered.page_size, 16);
  EXPECT_DOUBLE_EQ(paper.layers[0].lined.rho, 0.125);
  const auto authors = LukaConfig::preset("authors_eval", 28);
  EXPECT_EQ(authors.layers[5].mode, AttentionMode::kLined);
  EXPECT_EQ(authors.layers[6].mode, AttentionMode::kClustered);
  EXPECT_EQ(authors.layers[22].mode, AttentionMode::kClustered);
  EXPECT_EQ(authors.layers[23].mode, AttentionMode::kLined);
  EXPECT_EQ(authors.layers[10].clustered.page_size, 8);
  EXPECT_EQ(authors.layers[10].clustered.math, RefineMath::kExact);
  EXPECT_EQ(authors.layers[10].clustered.bias, SummaryBias::kAdaptive);
  EXPECT_DOUBLE_EQ(authors.layers[10].clustered.tau, 7.0);
  EXPECT_TRUE(authors.layers[0].lined.sparse_prefill);
  EXPECT_EQ(LukaConfig::preset("dense", 3).layers[2].mode, AttentionMode::kDense);
  EXPECT_NE(error_of([] { LukaConfig::preset("fancy", 3); }).find("unknown preset 'fancy'"), std::string::npos);
  EXPECT_NE(error_of([] { LukaConfig::preset("mixed(2,3)", 4); }).find("a + b <= 4"), std::string::npos);
}

TEST(LukaConfig, OverridesAndJson) {
  auto c = LukaConfig::preset("clustered", 8);
  c.apply_override("layer=5,mode=lined,rho=1/4");
  EXPECT_EQ(c.layers[5].mode, AttentionMode::kLined);
  EXPECT_DOUBLE_EQ(c.layers[5].lined.rho, 0.25);
  c.apply_override("layers=0-2:top_k=5:refine_math=exact");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.layers[i].clustered.top_k, 5);
  EXPECT_EQ(c.layers[3].clustered.top_k, 3);
  EXPECT_EQ(c.layers[1].clustered.math, RefineMath::kExact);
  c.apply_override("page_size=8");  // all layers
  for (const auto& l : c.layers) EXPECT_EQ(l.clustered.page_size, 8);

  const auto j = LukaConfig::from_json(
      R"({"preset": "lined", "default": {"window": 64}, "layers": {"2-3": {"mode": "clustered", "tau": 7, "zero_v": true}}})",
      6, "cfg.json");
  EXPECT_EQ(j.layers[0].mode, AttentionMode::kLined);
  EXPECT_EQ(j.layers[0].lined.window, 64);
  EXPECT_EQ(j.layers[2].mode, AttentionMode::kClustered);
  EXPECT_DOUBLE_EQ(j.layers[3].clustered.tau, 7.0);
  EXPECT_TRUE(j.layers[3].clustered.zero_v);
  // The printed form is a layers-config file: reading it back gives the same config.
  const auto printed = nlohmann::json::parse(j.to_json());
  EXPECT_EQ(printed["layers"].size(), 6u);
  EXPECT_EQ(printed["layers"]["3"]["tau"].get<double>(), 7.0);
  EXPECT_EQ(printed["layers"]["3"]["mode"].get<std::string>(), "clustered");
  for (const char* name : {"paper", "authors_eval", "mixed(1,2)"}) {
    auto p = LukaConfig::preset(name, 6);
    p.apply_override("layer=2,tau=3.25,top_frac=0.125,seed=77,dense_shadow=true");
    EXPECT_EQ(LukaConfig::from_json(p.to_json(), 6, "printed").to_json(), p.to_json()) << name;
  }
}

TEST(LukaConfig, InvalidConfigsAreClearErrors) {
  auto c = LukaConfig::preset("dense", 4);
  EXPECT_NE(error_of([&] { c.apply_override("mode=sparse"); }).find("unknown mode 'sparse' (expected dense, lined, clustered, kascade, press, quest)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("page_size=0"); }).find("page_size must be positive"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("rho=1.5"); }).find("rho must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("rho=0"); }).find("rho must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("layer=4,mode=lined"); }).find("out of range [0, 4)"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("layer=-1,mode=lined"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("colour=blue"); }).find("unknown key 'colour'"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("top_k=three"); }).find("top_k must be an integer"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("mode"); }).find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of([] { LukaConfig::from_json("{\"layers\": {\"9\": {\"mode\": \"lined\"}}}", 4, "c.json"); })
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { LukaConfig::from_json("{\"layer\": {}}", 4, "c.json"); }).find("c.json: unknown top-level key"),
            std::string::npos);
  EXPECT_NE(error_of([] { LukaConfig::from_json("{", 4, "c.json"); }).find("c.json: malformed JSON"), std::string::npos);
}

// SemantiCache's keys: the preset, the delimiter names both ways, the JSON round trip and errors.
TEST(LukaConfig, SemanticPagesKeys) {
  auto c = LukaConfig::preset("semanticache", 4);
  for (const auto& l : c.layers) {
    EXPECT_EQ(l.mode, AttentionMode::kClustered);
    EXPECT_EQ(l.clustered.segmenter, Segmenter::kDelimiter);
    EXPECT_EQ(l.clustered.compressor, Compressor::kGsc);
    EXPECT_DOUBLE_EQ(l.clustered.gsc_tau, 0.7);
    EXPECT_EQ(l.clustered.bias, SummaryBias::kFixed);
    EXPECT_EQ(l.clustered.top_k, 0);
    EXPECT_EQ(l.clustered.delimiters, (std::vector<std::string>{".", ",", "?", "!", ";", ":", " ", "\t", "\n"}));
  }
  c.apply_override("layer=1,delimiters=newline|period,delimiter_match=composed,gsc_tau=-0.25,segmenter=fixed");
  EXPECT_EQ(c.layers[1].clustered.delimiters, (std::vector<std::string>{"\n", "."}));
  EXPECT_EQ(c.layers[1].clustered.delimiter_match, DelimiterMatch::kComposed);
  EXPECT_DOUBLE_EQ(c.layers[1].clustered.gsc_tau, -0.25);
  EXPECT_EQ(c.layers[1].clustered.segmenter, Segmenter::kFixed);
  const auto printed = nlohmann::json::parse(c.to_json());
  EXPECT_EQ(printed["layers"]["1"]["delimiters"].get<std::string>(), "newline|period");
  EXPECT_EQ(printed["layers"]["0"]["delimiters"].get<std::string>(), "period|comma|question|exclamation|semicolon|colon|space|tab|newline");
  EXPECT_EQ(printed["layers"]["0"]["compressor"].get<std::string>(), "gsc");
  EXPECT_EQ(LukaConfig::from_json(c.to_json(), 4, "printed").to_json(), c.to_json());

  EXPECT_NE(error_of([&] { c.apply_override("delimiters=period|dash"); }).find("delimiters must name delimiters separated by '|' (of period, comma"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("delimiters=comma|comma"); }).find("names 'comma' twice"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("delimiters="); }).find("delimiters must name delimiters"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("gsc_tau=1.5"); }).find("gsc_tau must be in [-1, 1]"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("segmenter=sentences"); }).find("unknown segmenter 'sentences' (expected fixed, delimiter)"),
            std::string::npos);
  EXPECT_EQ(c.layers[1].clustered.delimiters, (std::vector<std::string>{"\n", "."}));  // a refused override changes nothing
}

// A fraction is one number over another. 1/0 and 0/0 are not finite (tau=1/0 passed as infinity,
// window_frac=0/0 as NaN), and a chain of slashes is no fraction: it used to recurse once per
// slash, copying the rest each time, and a long one overflowed the stack.
TEST(LukaConfig, FractionsAreFiniteAndOfTwoNumbers) {
  auto c = LukaConfig::preset("clustered", 4);
  c.apply_override("tau=3/4,rho=1/8");
  EXPECT_DOUBLE_EQ(c.layers[0].clustered.tau, 0.75);
  EXPECT_DOUBLE_EQ(c.layers[0].lined.rho, 0.125);
  EXPECT_NE(error_of([&] { c.apply_override("tau=1/0"); }).find("tau must be finite, got '1/0'"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("window_frac=0/0"); }).find("window_frac must be finite, got '0/0'"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("tau=1/2/4"); }).find("tau must be a number, got '1/2/4'"), std::string::npos);
  std::string chain = "tau=1";
  for (int i = 0; i < 200000; ++i) chain += "/1";
  EXPECT_NE(error_of([&] { c.apply_override(chain); }).find("tau must be a number"), std::string::npos);
  EXPECT_DOUBLE_EQ(c.layers[0].clustered.tau, 0.75);  // a failed override leaves the value
  LayerConfig nan;
  nan.lined.window_frac = std::nan("");
  EXPECT_NE(error_of([&] { validate(nan, 0); }).find("window_frac must be in [0, 1]"), std::string::npos);
}

TEST(Schedule, ParsesEntriesAndChecksThemUpFront) {
  const auto s = parse_schedule("step=10:layers=0-1:mode=clustered;;step=20:mode=dense,dense_shadow=true");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].step, 10);
  EXPECT_EQ(s[0].override_spec, "layers=0-1,mode=clustered");
  EXPECT_EQ(s[1].step, 20);
  EXPECT_EQ(s[1].override_spec, "mode=dense,dense_shadow=true");
  EXPECT_NE(error_of([] { parse_schedule("step=0:mode=dense"); }).find("step must be a positive integer, got '0'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("step=2x:mode=dense"); }).find("got '2x'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("mode=dense"); }).find("entry 'mode=dense' has no step=N"), std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("step=3"); }).find("entry 'step=3' changes nothing"), std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule(";;"); }).find("the schedule is empty"), std::string::npos);
  const auto config = LukaConfig::preset("dense", 4);
  EXPECT_NO_THROW(check_schedule(config, s));
  EXPECT_NE(error_of([&] { check_schedule(config, parse_schedule("step=2:layer=9:mode=lined")); }).find("out of range [0, 4)"),
            std::string::npos);
}

// One layer-list grammar (core/util/layer_range.h) for --set, --schedule and layers-config files:
// every spelling of the same layers picks the same layers, and a bad list names its piece.
TEST(LukaConfig, LayerListsReadTheSameInOverridesSchedulesAndFiles) {
  const std::vector<std::int64_t> want{0, 1, 2, 5};
  const auto lined = [](const LukaConfig& c) {
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < c.layers.size(); ++i)
      if (c.layers[i].mode == AttentionMode::kLined) out.push_back(static_cast<std::int64_t>(i));
    return out;
  };
  for (const std::string list : {"0-2|5", "0-2,5", "5,0-2", "0,1,2,5", "0|1|2|5", " 0 - 2 | 5 ", "0-2,2,5,1"}) {
    SCOPED_TRACE(list);
    EXPECT_EQ(LukaConfig::preset("dense", 8).parse_layers(list), want);
    // --set: after layers=, a ',' piece without '=' is more of the list.
    auto set = LukaConfig::preset("dense", 8);
    set.apply_override("layers=" + list + ",mode=lined,rho=1/4");
    EXPECT_EQ(lined(set), want);
    EXPECT_DOUBLE_EQ(set.layers[5].lined.rho, 0.25);
    EXPECT_DOUBLE_EQ(set.layers[3].lined.rho, 0.125);
    auto colon = LukaConfig::preset("dense", 8);
    colon.apply_override("mode=clustered:layers=" + list + ":mode=lined");
    EXPECT_EQ(lined(colon), want);
    // --schedule: its ':' items become one override.
    auto scheduled = LukaConfig::preset("dense", 8);
    const auto s = parse_schedule("step=4:layers=" + list + ":mode=lined");
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NO_THROW(check_schedule(scheduled, s));
    scheduled.apply_override(s[0].override_spec);
    EXPECT_EQ(lined(scheduled), want);
    // A layers-config file's keys.
    const auto file = LukaConfig::from_json("{\"layers\": {\"" + list + "\": {\"mode\": \"lined\"}}}", 8, "c.json");
    EXPECT_EQ(lined(file), want);
  }
  EXPECT_EQ(describe_modes(LukaConfig::from_json("{\"layers\": {\"0-2,5\": {\"mode\": \"lined\"}}}", 8, "c.json")),
            "dense 3-4|6-7, lined 0-2|5");
  auto c = LukaConfig::preset("dense", 8);
  EXPECT_EQ(error_of([&] { c.apply_override("layers=0-3,9,mode=lined"); }),
            "luka config: layer range '9' is out of range [0, 8)");
  EXPECT_EQ(error_of([&] { c.apply_override("layers=3-1,mode=lined"); }),
            "luka config: layer range '3-1' runs backwards (write 1-3)");
  // Only a ',' continues the list: after ':' an item without '=' is still an error, as is one
  // after another key.
  EXPECT_NE(error_of([&] { c.apply_override("layers=0-3:8,mode=lined"); }).find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("mode=lined,8"); }).find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("layers=0,mode=lined,8"); }).find("expected key=value"), std::string::npos);
  EXPECT_EQ(error_of([] { LukaConfig::from_json("{\"layers\": {\"0,x\": {\"mode\": \"lined\"}}}", 8, "c.json"); }),
            "c.json: 'layers': 'x' in '0,x' is not a layer number or range (expected N, A-B, several separated by ',' or '|', or all)");
  EXPECT_EQ(lined(c), std::vector<std::int64_t>{});  // failed overrides changed nothing
}

}  // namespace
}  // namespace luka
