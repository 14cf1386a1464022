#include "cli/csv.h"

#include <doctest/doctest.h>

TEST_CASE("CSV fields are quoted only when they hold a comma, a quote or a line break") {
  using cairn::cli::csv_field;
  CHECK(csv_field("val_loss") == "val_loss");
  CHECK(csv_field("0.25") == "0.25");
  CHECK(csv_field("") == "");
  CHECK(csv_field("[1,2]") == "\"[1,2]\"");
  CHECK(csv_field("\"0.5\"") == "\"\"\"0.5\"\"\"");
  CHECK(csv_field("a\nb") == "\"a\nb\"");
  CHECK(csv_field("a\rb") == "\"a\rb\"");
}

TEST_CASE("a CSV record joins its quoted fields with commas and ends with a newline") {
  CHECK(cairn::cli::csv_record({"training", "3", "[1,2]", "\"0.5\"", ""}) ==
        "training,3,\"[1,2]\",\"\"\"0.5\"\"\",\n");
  CHECK(cairn::cli::csv_record({"kind", "step", "loss, smoothed"}) ==
        "kind,step,\"loss, smoothed\"\n");
}
