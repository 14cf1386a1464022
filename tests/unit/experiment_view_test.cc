#include "cli/experiment_view.h"

#include <doctest/doctest.h>

#include "store/experiment_db.h"
#include "store/schema.h"
#include "test_dir.h"

namespace cairn::cli {

TEST_CASE("open_experiment_view: no store is the store's error, step kStore") {
  testing::TestDir dir;  // holds no .cairn
  const GlobalOptions global{dir.path().string()};
  const auto expected = find_store(dir.path(), dir.path());
  REQUIRE_FALSE(expected.ok());
  ViewStep failed = ViewStep::kExperiment;
  auto view = open_experiment_view(global, 1, &failed);
  REQUIRE_FALSE(view.ok());
  CHECK(failed == ViewStep::kStore);
  CHECK(view.status().kind() == expected.status().kind());
  CHECK(view.status().message() == expected.status().message());
}

TEST_CASE("open_experiment_view: a missing experiment is NotFound, step kExperiment") {
  testing::TestDir dir;
  REQUIRE(init_store(dir.path()).ok());
  const GlobalOptions global{dir.path().string()};
  ViewStep failed = ViewStep::kStore;
  auto view = open_experiment_view(global, 7, &failed);
  REQUIRE_FALSE(view.ok());
  CHECK(failed == ViewStep::kExperiment);
  CHECK(view.status().kind() == ErrorKind::kNotFound);
  CHECK(view.status().message() == "no experiment 7");
  CHECK(view.status().exit_code() == 2);
  // Without the out-parameter the same Status comes back.
  CHECK(open_experiment_view(global, 7).status().message() == "no experiment 7");
}

TEST_CASE("open_experiment_view: an experiment opens with its store, for reading") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  REQUIRE(store.ok());
  REQUIRE(*allocate_experiment_id(*store) == 1);
  {
    auto db = ExperimentDb::open(store->experiment(1), ExperimentDb::Mode::kWrite, store->tmp());
    REQUIRE(db.ok());
    StoreBatch batch;
    batch.put_json(schema::kExperiment, Json{{"id", 1}, {"name", "viewed"}, {"state", "ACTIVE"}});
    REQUIRE((*db)->commit(batch, true).ok());
  }
  auto view = open_experiment_view(GlobalOptions{dir.path().string()}, 1);
  REQUIRE(view.ok());
  CHECK(view->store.root() == store->root());
  CHECK((*view)->id() == 1);
  auto exp = (*view)->experiment();
  REQUIRE(exp.ok());
  CHECK(exp->value("name", "") == "viewed");
}

}  // namespace cairn::cli
