// `cairn compare` on records no cairn run would write: a damaged data record in one trial.
// Made here, through the store's own API, since no command can damage a record.
#include <doctest/doctest.h>

#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "store/experiment_db.h"
#include "store/schema.h"
#include "store/store_location.h"
#include "test_dir.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// std::cout and std::cerr go to strings while it lives.
class CapturedOutput {
 public:
  CapturedOutput()
      : old_out_(std::cout.rdbuf(out_.rdbuf())), old_err_(std::cerr.rdbuf(err_.rdbuf())) {}
  ~CapturedOutput() {
    std::cout.rdbuf(old_out_);
    std::cerr.rdbuf(old_err_);
  }
  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }

 private:
  std::ostringstream out_, err_;
  std::streambuf* old_out_;
  std::streambuf* old_err_;
};

// An ended experiment of one trial, with `data` as its data record.
void add_experiment(const StoreLayout& store, const Json& data, double lr) {
  const int64_t id = *allocate_experiment_id(store);
  auto db = ExperimentDb::open(store.experiment(id), ExperimentDb::Mode::kWrite, store.tmp());
  REQUIRE(db.ok());
  StoreBatch batch;
  batch.put_json(schema::kExperiment, Json{{"id", id},
                                           {"state", "COMPLETED"},
                                           {"config", {{"searcher", {{"metric", "val_loss"}}}}},
                                           {"data", data},
                                           {"dependencies", {{"os", "linux"}}}});
  batch.put_json(schema::trial_key(1), Json{{"index", 1},
                                            {"state", "COMPLETED"},
                                            {"hparams", {{"lr", lr}}},
                                            {"seed", 17},
                                            {"steps_completed", 3}});
  REQUIRE((*db)->commit(batch, true).ok());
}

struct Run {
  int exit_code = 0;
  std::string out, err;
};

// `cairn --store STORE <command> ARGS...` through the command's own CLI11 setup.
using AddCommand = void (*)(CLI::App&, cli::GlobalOptions&, cli::Outcome&);
Run cairn_command(AddCommand add, const std::string& command, const fs::path& store_dir,
                  std::vector<std::string> args) {
  CLI::App app("cairn", "cairn");
  app.require_subcommand(1);
  app.fallthrough();
  cli::GlobalOptions global;
  cli::Outcome outcome;
  app.add_option("--store", global.store);
  add(app, global, outcome);
  args.insert(args.begin(), {"--store", store_dir.string(), command});
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  CapturedOutput captured;
  app.parse(args);
  return {outcome.exit_code, captured.out(), captured.err()};
}

Run cairn_compare(const fs::path& store_dir, std::vector<std::string> args) {
  return cairn_command(cli::add_compare, "compare", store_dir, std::move(args));
}

}  // namespace

TEST_CASE("compare shows everything else when one trial's data record is damaged") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  REQUIRE(store.ok());
  const Json good = {{"files", Json::array()}, {"bytes", 0}, {"stored", true}};
  const Json file = {{"path", "data/a.csv"}, {"sha256", std::string(64, 'a')}, {"size", 3}};
  add_experiment(*store, good, 0.01);
  // Each way a record can be damaged: a file without its hash, not an object at all, and a
  // list that no longer gives the recorded digest.
  const Json damaged[] = {
      {{"files", {{{"path", "data/a.csv"}}}}, {"stored", true}},
      "not a fingerprint",
      {{"files", {file}}, {"bytes", 3}, {"stored", true}, {"digest", std::string(64, '0')}},
  };
  for (const Json& data : damaged) add_experiment(*store, data, 0.1);

  for (const std::string trial : {"2.1", "3.1", "4.1"}) {
    CAPTURE(trial);
    Run text = cairn_compare(dir.path(), {"1.1", trial});
    CHECK(text.exit_code == 0);
    CHECK(text.err.find("cairn: warning: trial " + trial + ": the data fingerprint record is") ==
          0);
    CHECK(std::count(text.err.begin(), text.err.end(), '\n') == 1);  // one line
    CHECK(text.out.find("hparam lr: 0.01 → 0.1") != std::string::npos);
    CHECK(text.out.find("damaged") != std::string::npos);  // its data cell

    Run json = cairn_compare(dir.path(), {"1.1", trial, "--json"});
    CHECK(json.exit_code == 0);
    const Json doc = Json::parse(json.out);
    REQUIRE(doc["warnings"].size() == 1);
    CHECK(doc["warnings"][0]["trial"] == trial);
    CHECK(doc["warnings"][0]["category"] == "data");
    CHECK(doc["trials"][1]["data_digest"].is_null());
    REQUIRE(doc["differences"].size() == 1);
    CHECK(doc["differences"][0]["category"] == "hparam");

    // show reads the record as compare does: named damaged, not shown as data.
    Run show = cairn_command(cli::add_show, "show", dir.path(), {trial.substr(0, 1)});
    CHECK(show.exit_code == 0);
    CHECK(show.out.find("data        damaged record: the data fingerprint record is") !=
          std::string::npos);
  }

  // The damaged trial first: the others are still compared with each other.
  add_experiment(*store, {{"files", {file}}, {"bytes", 3}, {"stored", true}}, 0.01);
  const Json doc = Json::parse(cairn_compare(dir.path(), {"2.1", "1.1", "5.1", "--json"}).out);
  CHECK(doc["warnings"].size() == 1);
  bool data_named = false;
  for (const Json& d : doc["differences"])
    if (d["category"] == "data") {
      data_named = true;
      CHECK(d["what"] == "data/a.csv");
      CHECK(d["values"] == Json::array({nullptr, nullptr, std::string(12, 'a')}));
    }
  CHECK(data_named);
}

}  // namespace cairn
