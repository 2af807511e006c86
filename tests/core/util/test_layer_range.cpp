// Layer lists (core/util/layer_range.h), the one grammar of --set, --schedule, layers-config
// files, --record and luka inspect --layer/--head: ranges, single layers, both separators,
// repeats and overlaps, and a one-line error naming the bad piece for every malformed list.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/error.h"
#include "core/util/layer_range.h"

namespace luka {
namespace {

using Ids = std::vector<std::int64_t>;

Ids parse(const std::string& text, std::int64_t count = 30) { return parse_layer_range(text, count, "test"); }

std::string error_of(const std::string& text, std::int64_t count = 30, const std::string& noun = "layer") {
  try {
    parse_layer_range(text, count, "ctx", noun);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LayerRange, SingleLayersRangesAndAll) {
  EXPECT_EQ(parse("5"), (Ids{5}));
  EXPECT_EQ(parse("0"), (Ids{0}));
  EXPECT_EQ(parse("29"), (Ids{29}));
  EXPECT_EQ(parse("0-3"), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(parse("7-7"), (Ids{7}));
  EXPECT_EQ(parse("all", 4), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(parse(" all ", 2), (Ids{0, 1}));
  EXPECT_EQ(parse("all", 0), Ids{});
  EXPECT_TRUE(LayerRange::parse("all", "t").all());
  EXPECT_FALSE(LayerRange::parse("0-29", "t").all());
}

// Every spelling in use before the one grammar: --set's '|', --record's and inspect's ','.
TEST(LayerRange, BothSeparatorsAndSpacesReadTheSame) {
  const Ids want{0, 1, 2, 3, 8};
  for (const char* text : {"0-3,8", "0-3|8", "8,0-3", "8|0-3", "0,1,2,3,8", "0|1,2|3,8", " 0 - 3 , 8 ", "0-3 | 8"})
    EXPECT_EQ(parse(text), want) << text;
}

TEST(LayerRange, RepeatsAndOverlapsMergeAscending) {
  EXPECT_EQ(parse("3,3,3"), (Ids{3}));
  EXPECT_EQ(parse("0-3,2-5,3"), (Ids{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(parse("9,1,5"), (Ids{1, 5, 9}));
  EXPECT_EQ(parse("0-29,0-29|10"), parse("all"));
  // Work bounded by the count, not by the text: a thousand copies of the widest list.
  std::string wide = "0-" + std::to_string(LayerRange::kMaxIndex);
  std::string many = wide;
  for (int i = 0; i < 1000; ++i) many += "," + wide;
  EXPECT_EQ(LayerRange::parse(many, "t").listed().size(), static_cast<std::size_t>(LayerRange::kMaxIndex + 1));
}

TEST(LayerRange, OutOfRangeNamesThePieceAndTheValidRange) {
  EXPECT_EQ(error_of("30"), "ctx: layer range '30' is out of range [0, 30)");
  EXPECT_EQ(error_of("0-3,28-31"), "ctx: layer range '28-31' is out of range [0, 30)");
  EXPECT_EQ(error_of("-1"), "ctx: layer range '-1' is out of range [0, 30)");
  EXPECT_EQ(error_of("5--3"), "ctx: layer range '5--3' is out of range [0, 30)");
  EXPECT_EQ(error_of("99999999999999999999999"), "ctx: layer range '99999999999999999999999' is out of range [0, 30)");
  EXPECT_EQ(error_of("8", 8, "head"), "ctx: head range '8' is out of range [0, 8)");
  EXPECT_EQ(error_of("0", 0), "ctx: layer range '0' is out of range [0, 0)");
}

TEST(LayerRange, MalformedListsAreOneLineErrorsNamingThePiece) {
  const std::string expected = " (expected N, A-B, several separated by ',' or '|', or all)";
  EXPECT_EQ(error_of(""), "ctx: empty layer list" + expected);
  EXPECT_EQ(error_of("   "), "ctx: empty layer list" + expected);
  EXPECT_EQ(error_of("0,,3"), "ctx: empty piece in layer list '0,,3'" + expected);
  EXPECT_EQ(error_of("0-3,"), "ctx: empty piece in layer list '0-3,'" + expected);
  EXPECT_EQ(error_of("|"), "ctx: empty piece in layer list '|'" + expected);
  EXPECT_EQ(error_of("x"), "ctx: 'x' is not a layer number or range" + expected);
  EXPECT_EQ(error_of("0-3,x"), "ctx: 'x' in '0-3,x' is not a layer number or range" + expected);
  EXPECT_EQ(error_of("3-1"), "ctx: layer range '3-1' runs backwards (write 1-3)");
  EXPECT_EQ(error_of("0,all"), "ctx: 'all' in layer list '0,all' stands alone (it is every layer)");
  for (const char* bad : {"1-2-3", "1.5", "+3", "0x3", "3-", "-", "1 2", "0-3;8", "0:3", "a-b", "ALL", "1e2", "٣"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("is not a layer number or range"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find(std::string("'") + bad), std::string::npos) << bad << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// Lists read before the count is known (--record, inspect): the syntax now, the count later.
TEST(LayerRange, ListedBeforeTheCountIsKnown) {
  EXPECT_EQ(LayerRange::parse("0-3|8", "t").listed(), (Ids{0, 1, 2, 3, 8}));
  EXPECT_EQ(LayerRange::parse("all", "t").listed(), Ids{});
  try {
    LayerRange::parse("0-2000000", "--record").listed();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--record: layer range '0-2000000' is out of range: layers count from 0, up to 1048575");
  }
  EXPECT_THROW(LayerRange::parse("-1", "t").listed(), Error);
  const LayerRange r = LayerRange::parse("20-27", "t");
  EXPECT_EQ(r.indices(28).size(), 8u);
  EXPECT_THROW(r.indices(24), Error);
}

TEST(LayerRange, FormatIsTheShortestSpellingAndParsesBack) {
  EXPECT_EQ(format_layer_range(std::vector<int>{0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(format_layer_range(std::vector<int>{0, 1, 2, 3, 8}, '|'), "0-3|8");
  EXPECT_EQ(format_layer_range(std::vector<int>{5}), "5");
  EXPECT_EQ(format_layer_range(std::vector<int>{1, 3, 5}), "1,3,5");
  EXPECT_EQ(format_layer_range(std::vector<int>{}), "");
  for (const Ids& ids : {Ids{0}, Ids{0, 1, 2, 3, 8}, Ids{2, 4, 5, 6, 10, 11, 29}, parse("all")})
    EXPECT_EQ(parse(format_layer_range(ids)), ids);
}

}  // namespace
}  // namespace luka
