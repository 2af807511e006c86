// Sweep grids (core/eval/sweep.h): parsing and its errors, the cartesian order, the run command
// lines, the CSV table and the choice of the plot's x axis.
#include <gtest/gtest.h>

#include "core/eval/sweep.h"
#include "core/util/error.h"

using namespace luka::eval;

TEST(Sweep, GridParsesAxesAndKeepsPresetCommas) {
  const auto axes = parse_grid(" compressor=mean, attention_weighted ;preset=clustered,mixed(8,8);top_frac=0.25");
  ASSERT_EQ(axes.size(), 3u);
  EXPECT_EQ(axes[0].key, "compressor");
  EXPECT_EQ(axes[0].values, (std::vector<std::string>{"mean", "attention_weighted"}));
  EXPECT_EQ(axes[1].values, (std::vector<std::string>{"clustered", "mixed(8,8)"}));
  EXPECT_EQ(axes[2].values, (std::vector<std::string>{"0.25"}));
  for (const char* bad : {"", "a=1;;b=2", "a", "=1", "a=1,,2", "a=1;a=2", "a=1,1", "a="})
    EXPECT_THROW(parse_grid(bad), luka::Error) << bad;
}

TEST(Sweep, ExpandsTheLastAxisFastest) {
  const auto points = expand_grid(parse_grid("a=1,2;b=x,y,z"));
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(settings_label(points[0]), "a=1,b=x");
  EXPECT_EQ(settings_label(points[1]), "a=1,b=y");
  EXPECT_EQ(settings_label(points[5]), "a=2,b=z");
}

TEST(Sweep, CaptionsNameFilesNotWhereTheyLie) {
  const Settings s = {{"dar_basis", "/work/bench/out/dar.npy"}, {"dar_rank", "16"}, {"preset", "auto:out/c.json,budget=0.1"}, {"x", "a/"}};
  EXPECT_EQ(settings_caption(s), "dar_basis=dar.npy,dar_rank=16,preset=auto:c.json,budget=0.1,x=a/");
  EXPECT_EQ(settings_label(s), "dar_basis=/work/bench/out/dar.npy,dar_rank=16,preset=auto:out/c.json,budget=0.1,x=a/");
}

TEST(Sweep, RunCommandLines) {
  const Settings p = {{"preset", "mixed(8,8)"}, {"compressor", "mean"}, {"top_k", "3"}};
  EXPECT_EQ(settings_set_spec(p), "compressor=mean,top_k=3");
  EXPECT_EQ(*settings_preset(p), "mixed(8,8)");
  EXPECT_EQ(item_arguments(Metric::kPerplexity, {"--text-file", "t.txt"}, p, "/o/items/0"),
            (std::vector<std::string>{"perplexity", "--text-file", "t.txt", "--preset", "mixed(8,8)", "--set", "compressor=mean,top_k=3", "--json"}));
  EXPECT_EQ(item_arguments(Metric::kEval, {"--data", "w"}, {{"top_k", "3"}}, "/o/items/1"),
            (std::vector<std::string>{"eval", "wikisalad", "--data", "w", "--presets", "clustered", "--set", "top_k=3", "--out", "/o/items/1",
                                      "--quiet"}));
  EXPECT_EQ(item_arguments(Metric::kPerplexity, {}, {{"preset", "dense"}}, "d"),
            (std::vector<std::string>{"perplexity", "--preset", "dense", "--json"}));
  EXPECT_THROW(parse_metric("speed"), luka::Error);
}

TEST(Sweep, MetricValueFromEachCommandsOutput) {
  EXPECT_DOUBLE_EQ(metric_value(Metric::kPerplexity, {{"perplexity", 25.5}}), 25.5);
  const nlohmann::json summary = {{"table", {{"totals", {{"clustered", {{"em", 40.0}, {"questions", 10}}}}}}}};
  EXPECT_DOUBLE_EQ(metric_value(Metric::kEval, summary), 40.0);
  EXPECT_THROW(metric_value(Metric::kPerplexity, {{"nll", 1}}), luka::Error);
}

TEST(Sweep, CsvAndXAxis) {
  const auto axes = parse_grid("compressor=mean,other;top_frac=0.25,1");
  std::vector<SweepResult> r = {{0, {{"compressor", "mean"}, {"top_frac", "0.25"}}, false, 30.5},
                                {1, {{"compressor", "\"odd,one\""}, {"top_frac", "1"}}, false, 25.472},
                                {2, {{"preset", "dense"}}, true, 25.0}};
  EXPECT_EQ(results_csv(axes, Metric::kPerplexity, r),
            "item,compressor,top_frac,perplexity\n0,mean,0.25,30.5\n1,\"\"\"odd,one\"\"\",1,25.472\nbaseline,,,25\n");
  EXPECT_EQ(choose_x_axis(axes, ""), "top_frac");
  EXPECT_EQ(choose_x_axis(axes, "compressor"), "compressor");
  EXPECT_EQ(choose_x_axis(parse_grid("a=x,y;b=1"), ""), "b");  // one value is no axis to draw along: the last
  EXPECT_THROW(choose_x_axis(axes, "rho"), luka::Error);
}
