#include "engine/coordinator/metric_values.h"

#include <doctest/doctest.h>

using cairn::Json;

TEST_CASE("training batches of numbers and nulls pass the quick scan, as the SDKs send them") {
  CHECK(cairn::training_batch_is_numeric(R"({"type":"training","reports":[]})"));
  CHECK(cairn::training_batch_is_numeric(
      R"({"type":"training","reports":[{"step":1,"metrics":{"loss":0.5,"acc":-1.25e-3}},)"
      R"({"step":2,"metrics":{"loss":null,"n":3,"a[b]":1E+2,"tiny":1e-05}}],"extra":{"x":["y",true]}})"));
  CHECK(cairn::training_batch_is_numeric(
      " { \"reports\" : [ { \"metrics\" : { \"loss\" : 0 } , \"note\" : \"ok\" } ] } \n"));
}

TEST_CASE("a metric value that is not a number fails the quick scan, wherever it is") {
  for (const char* value : {R"("0.5")", "[1,2]", "{}", "true", "false", "NaN", "Infinity",
                            "-Infinity", ".5", "0x10", "1.", "1e", "-", "nul"}) {
    CAPTURE(value);
    const std::string batch = std::string(R"({"type":"training","reports":[{"step":1,"metrics":)") +
                              R"({"ok":1,"bad":)" + value + "}}]}";
    CHECK_FALSE(cairn::training_batch_is_numeric(batch));
  }
  // metrics that is not an object, a key spelled with an escape, malformed text
  CHECK_FALSE(cairn::training_batch_is_numeric(R"({"reports":[{"step":1,"metrics":[1]}]})"));
  CHECK_FALSE(
      cairn::training_batch_is_numeric(R"({"reports":[{"step":1,"metr\u0069cs":{"a":"x"}}]})"));
  CHECK_FALSE(cairn::training_batch_is_numeric(R"({"reports":[{"step":1,"metrics":{"a":1})"));
  CHECK_FALSE(cairn::training_batch_is_numeric(R"({"reports":[]} trailing)"));
}

TEST_CASE("non-numeric training metric values are dropped and named once each") {
  Json batch = Json::parse(R"({"type":"training","reports":[
      {"step":1,"metrics":{"loss":"0.5","acc":[1,2],"ok":1.5,"gone":null}},
      {"step":2,"metrics":{"loss":"0.4","flag":true,"ok":2}},
      {"step":3,"metrics":"oops"}]})");
  const std::vector<std::string> dropped = cairn::drop_non_numeric_metrics(batch);
  CHECK(dropped == std::vector<std::string>{"'loss' is a string", "'acc' is a list",
                                            "'flag' is a boolean", "metrics is a string"});
  CHECK(batch["reports"][0]["metrics"] == Json::parse(R"({"ok":1.5,"gone":null})"));
  CHECK(batch["reports"][1]["metrics"] == Json::parse(R"({"ok":2})"));
  CHECK(batch["reports"][2]["metrics"] == Json::object());
}

TEST_CASE("non_numeric_metrics names each offending validation metric and its type") {
  CHECK(cairn::non_numeric_metrics(Json::parse(R"({"a":1,"b":null,"c":-2.5})")).empty());
  CHECK(cairn::non_numeric_metrics(Json::parse(R"({"a":"0.25","b":1,"c":{"d":1}})")) ==
        std::vector<std::string>{"'a' is a string", "'c' is an object"});
}

TEST_CASE("the quick scan says yes only to text the parser takes, shaped as readers need it") {
  // Each is left to the full parser (which refuses it or decodes it): never stored unread.
  for (const char* batch :
       {R"({"type":"training"})", R"({"reports":5})", R"({"reports":{"step":1}})",
        R"({"reports":[],"reports":[]})", R"([{"reports":[]}])",
        R"({"reports":[{"step":1,"metrics":{"loss":1e400}}]})",
        R"({"reports":[{"step":1,"metrics":{"loss":01}}]})",
        R"({"reports":[{"step":1,"metrics":{"loss":1e1000}}]})",
        "{\"reports\":[{\"step\":1,\"metrics\":{\"l\\qoss\":1}}]}",
        "{\"reports\":[{\"step\":1,\"metrics\":{\"lo\x01ss\":1}}]}",
        "{\"reports\":[{\"step\":1,\"metrics\":{\"lo\xffss\":1}}]}",
        "{\"reports\":[],\"note\":\"caf\xc3\xa9\"}"}) {
    CAPTURE(batch);
    CHECK_FALSE(cairn::training_batch_is_numeric(batch));
  }
  for (const char* batch : {R"({"reports":[{"step":1,"metrics":{"loss":1e299}}]})",
                            R"({"reports":[{"step":1,"metrics":{"loss":0.5e-320}}]})",
                            R"({"reports":[{"step":0,"metrics":{"loss":-0}}]})"}) {
    CAPTURE(batch);
    CHECK(cairn::training_batch_is_numeric(batch));
    CHECK_FALSE(Json::parse(batch, nullptr, false).is_discarded());
  }
}
