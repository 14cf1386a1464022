// The C++ trial SDK (sdk/cpp/cairn/trial.hpp) against an in-process stand-in for cairn:
// a thread serving one Unix-socket connection with scripted protocol-v1 answers.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cairn/trial.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

struct TempDir {
  fs::path path = cairn::sdk_detail::make_scratch_dir("cairn-sdk-test-");
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Plays cairn's side of one control connection. `on_message` runs on the server thread
// before the default answer; returning true skips that answer.
class FakeCairn {
 public:
  using Hook = std::function<bool(FakeCairn&, const json&)>;

  explicit FakeCairn(std::deque<int64_t> operations = {}, Hook on_message = nullptr)
      : operations_(std::move(operations)), on_message_(std::move(on_message)) {
    socket_path_ = dir_.path / "control.sock";
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_path_.c_str(), sizeof address.sun_path - 1);
    listener_.reset(::socket(AF_UNIX, SOCK_STREAM, 0));
    REQUIRE(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener_.get(), 1) == 0);
    server_ = std::thread([this] { serve(); });
  }
  ~FakeCairn() {
    close_connection();
    ::shutdown(listener_.get(), SHUT_RDWR);
    server_.join();
  }

  std::string address() const { return "unix:" + socket_path_.string(); }
  const fs::path& dir() const { return dir_.path; }

  cairn::Context::Environment environment() const {
    return {{"CAIRN_CONTROL", address()},
            {"CAIRN_TRIAL_ID", "7.3"},
            {"CAIRN_EXPERIMENT_ID", "7"},
            {"CAIRN_SEED", "17"},
            {"CAIRN_HPARAMS", R"({"lr":0.1})"}};
  }

  void send(const json& message) {
    std::lock_guard lock(write_mutex_);
    std::string line = message.dump() + "\n";
    [[maybe_unused]] auto sent = ::send(connection_.get(), line.data(), line.size(), MSG_NOSIGNAL);
  }

  void close_connection() {
    std::lock_guard lock(write_mutex_);
    ::shutdown(connection_.get(), SHUT_RDWR);
  }

  std::vector<json> of_type(const std::string& type) {
    std::lock_guard lock(mutex_);
    std::vector<json> found;
    for (const auto& m : messages_) {
      if (m.value("type", "") == type) found.push_back(m);
    }
    return found;
  }

  std::vector<json> training_reports() {
    std::vector<json> reports;
    for (const auto& batch : of_type("training")) {
      for (const auto& report : batch["reports"]) reports.push_back(report);
    }
    return reports;
  }

  std::vector<std::string> types() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> found;
    for (const auto& m : messages_) found.push_back(m.value("type", ""));
    return found;
  }

  // Waits until `condition` holds (checked whenever a message arrives); false on timeout.
  bool wait_for(const std::function<bool()>& condition, seconds timeout = seconds(20)) {
    std::unique_lock lock(mutex_);
    return arrived_.wait_for(lock, timeout, [&] {
      lock.unlock();
      bool met = condition();
      lock.lock();
      return met;
    });
  }

  std::optional<std::string> sync_stop;  // set from a hook: `sync` answers say stop
  bool knows_sync = true;                // false: answer `sync` like a cairn that predates it
  bool knows_skip = true;  // false: answer `checkpoint_skip` like a cairn that predates it
  std::vector<fs::path> staging_dirs;
  bool fail_checkpoint_end = false;
  bool reject_validation = false;

 private:
  void serve() {
    cairn::sdk_detail::UniqueFd accepted(::accept(listener_.get(), nullptr, nullptr));
    {
      std::lock_guard lock(write_mutex_);
      connection_ = std::move(accepted);
    }
    std::string inbox;
    char chunk[65536];
    while (connection_.valid()) {
      ssize_t got = ::recv(connection_.get(), chunk, sizeof chunk, 0);
      if (got <= 0) break;
      inbox.append(chunk, static_cast<size_t>(got));
      for (size_t end; (end = inbox.find('\n')) != std::string::npos; inbox.erase(0, end + 1)) {
        handle(json::parse(inbox.substr(0, end)));
      }
    }
  }

  void handle(const json& message) {
    {
      std::lock_guard lock(mutex_);
      messages_.push_back(message);
    }
    arrived_.notify_all();
    if (on_message_ && on_message_(*this, message)) return;
    answer(message);
  }

  void answer(const json& message) {
    std::string type = message.value("type", "");
    json re = message.contains("seq") ? message["seq"] : json();
    if (type == "hello") {
      send({{"type", "welcome"}, {"protocol", 1}, {"checkpoint_period", 1}, {"extra", {1, 2}}});
    } else if (type == "next_operation") {
      if (operations_.empty()) {
        send({{"type", "operation"}, {"re", re}, {"done", true}});
      } else {
        send({{"type", "operation"}, {"re", re}, {"length", operations_.front()}});
        operations_.pop_front();
      }
    } else if (type == "validation") {
      if (reject_validation) {
        send({{"type", "error"}, {"re", re}, {"message", "no metric"}});
      } else {
        send({{"type", "ack"}, {"re", re}});
      }
    } else if (type == "checkpoint_begin") {
      auto path = dir_.path / "staging" / std::to_string(staging_dirs.size());
      fs::create_directories(path);
      staging_dirs.push_back(path);
      send({{"type", "checkpoint_dir"}, {"re", re}, {"path", path.string()}});
    } else if (type == "checkpoint_end") {
      if (fail_checkpoint_end) {
        send({{"type", "error"}, {"re", re}, {"message", "disk full"}});
      } else {
        send({{"type", "ack"}, {"re", re}, {"checkpoint", "ck" + std::to_string(commits_++)}});
      }
    } else if (type == "kv_set") {
      kv_[message.value("key", "")] = message.value("value", "");
      send({{"type", "kv"}, {"re", re}});
    } else if (type == "kv_get") {  // an unknown key is never answered: the SDK times out
      auto it = kv_.find(message.value("key", ""));
      if (it != kv_.end()) send({{"type", "kv"}, {"re", re}, {"value", it->second}});
    } else if (type == "checkpoint_skip") {
      if (knows_skip)
        send({{"type", "ack"}, {"re", re}});
      else
        send({{"type", "error"}, {"re", re}, {"message", "unknown message type"}});
    } else if (type == "sync" && !knows_sync) {
      send({{"type", "error"}, {"re", re}, {"message", "unknown message type"}});
    } else if (type == "sync") {
      json answer = {{"type", "sync"}, {"re", re}, {"stop", sync_stop.has_value()}};
      if (sync_stop) answer["reason"] = *sync_stop;
      send(answer);
    }
  }

  TempDir dir_;
  fs::path socket_path_;
  cairn::sdk_detail::UniqueFd listener_;
  cairn::sdk_detail::UniqueFd connection_;
  std::deque<int64_t> operations_;
  Hook on_message_;
  int commits_ = 0;
  std::map<std::string, std::string> kv_;  // the rendezvous table (server thread only)
  std::mutex write_mutex_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<json> messages_;
  std::thread server_;
};

std::unique_ptr<cairn::Context> must_init(const cairn::Context::Environment& environment) {
  std::string error;
  auto context = cairn::Context::init(environment, &error);
  INFO(error);
  REQUIRE(context != nullptr);
  return context;
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The JSON objects of a JSON-lines file, in order.
std::vector<json> read_json_lines(const fs::path& path) {
  std::vector<json> objects;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) objects.push_back(json::parse(line));
  return objects;
}

// Changes the working directory for one test (standalone checkpoints go to ./checkpoints).
struct ScopedWorkingDirectory {
  fs::path previous = fs::current_path();
  explicit ScopedWorkingDirectory(const fs::path& dir) { fs::current_path(dir); }
  ~ScopedWorkingDirectory() { fs::current_path(previous); }
};

}  // namespace

TEST_CASE("sdk cpp: metric reports are JSON with null for NaN and infinities") {
  std::string out;
  cairn::sdk_detail::append_report(out, 12,
                                   {{"loss", 0.25}, {"odd \"name\"", NAN}, {"x", -INFINITY}});
  CHECK(out == R"({"step":12,"metrics":{"loss":0.25,"odd \"name\"":null,"x":null}})");
  CHECK(json::parse(out)["metrics"]["loss"] == 0.25);
  out.clear();
  cairn::sdk_detail::append_number(out, 0.1);
  CHECK(out == "0.1");  // shortest text that reads back exactly
}

TEST_CASE("sdk cpp: handshake sends hello and takes settings from welcome") {
  FakeCairn fake({}, [](FakeCairn& f, const json& m) {
    if (m["type"] != "hello") return false;
    f.send(
        {{"type", "welcome"}, {"protocol", 1}, {"checkpoint_period", 3}, {"deterministic", true}});
    return true;
  });
  auto env = fake.environment();
  env["RANK"] = "0";
  env["WORLD_SIZE"] = "1";
  auto ctx = must_init(env);
  auto hello = fake.of_type("hello").at(0);
  CHECK(hello["protocol"] == 1);
  CHECK(hello["trial"] == "7.3");
  CHECK(hello["experiment"] == 7);
  CHECK(hello["rank"] == 0);
  CHECK(hello["world_size"] == 1);
  CHECK(hello["pid"] == static_cast<int64_t>(::getpid()));
  CHECK(hello["sdk"].get<std::string>().rfind("cpp/", 0) == 0);
  CHECK(ctx->checkpoint_period() == 3);
  CHECK(ctx->deterministic());
  CHECK(ctx->hparams() == json{{"lr", 0.1}});
  CHECK(ctx->seed() == 17);
  CHECK(ctx->trial_id() == "7.3");
  CHECK(ctx->steps_completed() == 0);
  CHECK_FALSE(ctx->latest_checkpoint().has_value());
}

TEST_CASE("sdk cpp: init fails with one line when cairn is unreachable or refuses") {
  TempDir dir;
  std::string error;
  auto ctx = cairn::Context::init({{"CAIRN_CONTROL", "unix:" + (dir.path / "none.sock").string()}},
                                  &error);
  CHECK(ctx == nullptr);
  CHECK(error.rfind("cannot reach cairn at CAIRN_CONTROL=unix:", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);

  FakeCairn fake({}, [](FakeCairn& f, const json&) {
    f.send({{"type", "error"}, {"message", "protocol 2 only"}});
    f.close_connection();
    return true;
  });
  CHECK(cairn::Context::init(fake.environment(), &error) == nullptr);
  CHECK(error == "cairn refused the trial: protocol 2 only");
}

TEST_CASE("sdk cpp: operations follow the searcher until done") {
  FakeCairn fake({2, 5});
  auto ctx = must_init(fake.environment());
  auto first = ctx->next_operation();
  REQUIRE(first);
  CHECK(first->length == 2);
  CHECK(ctx->checkpoint_due(1));  // period 1, from the welcome
  CHECK(ctx->next_operation()->length == 5);
  CHECK_FALSE(ctx->next_operation().has_value());
  CHECK(fake.of_type("next_operation").size() == 3);
}

TEST_CASE("sdk cpp: checkpoint_due follows the period and the operation's length") {
  FakeCairn fake({5}, [](FakeCairn& f, const json& m) {
    if (m["type"] != "hello") return false;
    f.send({{"type", "welcome"}, {"protocol", 1}, {"checkpoint_period", 2}});
    return true;
  });
  auto ctx = must_init(fake.environment());
  REQUIRE(ctx->next_operation());
  std::vector<int64_t> due;
  for (int64_t step = 1; step <= 5; ++step) {
    if (ctx->checkpoint_due(step)) due.push_back(step);
  }
  CHECK(due == std::vector<int64_t>{2, 4, 5});
  CHECK_FALSE(ctx->should_preempt());
}

TEST_CASE("sdk cpp: ten thousand training reports arrive in order, batched, before validation") {
  FakeCairn fake({1});
  auto ctx = must_init(fake.environment());
  REQUIRE(ctx->next_operation());
  for (int64_t step = 1; step <= 10000; ++step) {
    double loss = step == 77 ? NAN : step / 2.0;
    ctx->report_training(step, {{"loss", loss}, {"lr", 0.5}});
  }
  CHECK(ctx->report_validation(10000, {{"val_loss", 0.25}}));
  auto reports = fake.training_reports();
  REQUIRE(reports.size() == 10000);
  for (size_t i = 0; i < reports.size(); ++i) REQUIRE(reports[i]["step"] == i + 1);
  CHECK(reports[9]["metrics"] == json{{"loss", 5.0}, {"lr", 0.5}});
  CHECK(reports[76]["metrics"]["loss"].is_null());
  auto batches = fake.of_type("training");
  CHECK(batches.size() >= 10);
  for (const auto& batch : batches) CHECK(batch["reports"].size() <= 1000);
  auto types = fake.types();
  CHECK(types.back() == "validation");
}

TEST_CASE("sdk cpp: a lone training report is sent once it has waited briefly") {
  FakeCairn fake({1});
  auto ctx = must_init(fake.environment());
  REQUIRE(ctx->next_operation());
  ctx->report_training(1, {{"loss", 0.5}});
  CHECK(fake.wait_for([&] { return fake.training_reports().size() == 1; }));
}

TEST_CASE("sdk cpp: validation waits for the ack and reports a rejection") {
  FakeCairn fake;
  auto ctx = must_init(fake.environment());
  CHECK(ctx->report_validation(3, {{"val_loss", 0.5}, {"bad", INFINITY}}));
  auto validation = fake.of_type("validation").at(0);
  CHECK(validation["step"] == 3);
  CHECK(validation["metrics"]["bad"].is_null());
  fake.reject_validation = true;
  CHECK_FALSE(ctx->report_validation(4, {{"val_loss", 0.5}}));
}

TEST_CASE("sdk cpp: the rendezvous sets and gets through cairn, and a missing key times out") {
  FakeCairn fake;
  auto ctx = must_init(fake.environment());
  std::string error;
  REQUIRE(ctx->kv_set("gloo/0", "127.0.0.1:4242", &error));
  CHECK(ctx->kv_get("gloo/0", std::chrono::seconds(5), &error) == "127.0.0.1:4242");
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(ctx->kv_get("gloo/1", std::chrono::milliseconds(200), &error).has_value());
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(200));
  CHECK(error.find("gloo/1") != std::string::npos);
  // Reports made after an unanswered kv_get still arrive.
  CHECK(ctx->report_validation(1, {{"val_loss", 0.5}}));

  TempDir dir;
  ScopedWorkingDirectory cwd(dir.path);
  auto standalone = must_init({});
  REQUIRE(standalone->kv_set("k", "v"));
  CHECK(standalone->kv_get("k", std::chrono::milliseconds(10)) == "v");
  CHECK_FALSE(standalone->kv_get("other", std::chrono::milliseconds(10)).has_value());
}

TEST_CASE("sdk cpp: a committed checkpoint restores rng() so a resumed trial draws the same") {
  std::vector<uint64_t> uninterrupted;
  std::vector<fs::path> staging;
  FakeCairn first({4});
  {
    auto ctx = must_init(first.environment());
    ctx->rng()();  // "model initialisation"
    int64_t step = 0;
    while (auto op = ctx->next_operation()) {
      while (step < op->length) {
        ++step;
        uninterrupted.push_back(ctx->rng()());
        if (ctx->checkpoint_due(step)) {
          auto writer = ctx->checkpoint(step);
          CHECK(list_dir(writer.path()).empty());
          std::ofstream(writer.path() / "model.bin") << step;
          REQUIRE(writer.commit({{"epoch", step}}));
          CHECK(writer.checkpoint_id() == "ck" + std::to_string(step - 1));
        }
      }
    }
  }
  auto end = first.of_type("checkpoint_end").at(1);
  CHECK(end["step"] == 2);
  CHECK(end["metadata"] == json{{"epoch", 2}});
  fs::path at_step_2 = end["path"].get<std::string>();
  CHECK(list_dir(at_step_2) == std::vector<std::string>{"cairn_rng_state.txt", "model.bin"});

  FakeCairn second({4});
  auto env = second.environment();
  env["CAIRN_LATEST_CHECKPOINT"] = at_step_2.string();
  env["CAIRN_STEPS_COMPLETED"] = "2";
  auto ctx = must_init(env);
  CHECK(ctx->latest_checkpoint() == at_step_2);
  ctx->rng()();
  ctx->rng()();  // draws before the first operation do not matter
  REQUIRE(ctx->next_operation());
  CHECK(ctx->rng()() == uninterrupted[2]);
  CHECK(ctx->rng()() == uninterrupted[3]);
}

TEST_CASE("sdk cpp: an uncommitted checkpoint is aborted; a failed commit is reported") {
  FakeCairn fake;
  auto ctx = must_init(fake.environment());
  fs::path path;
  {
    auto writer = ctx->checkpoint(3);
    path = writer.path();
    auto moved = std::move(writer);  // only the last owner aborts
  }
  CHECK(ctx->report_validation(3, {{"v", 1}}));  // a request: the abort went before it
  auto aborts = fake.of_type("checkpoint_abort");
  REQUIRE(aborts.size() == 1);
  CHECK(aborts[0]["path"] == path.string());

  fake.fail_checkpoint_end = true;
  auto writer = ctx->checkpoint(4);
  CHECK_FALSE(writer.commit());
  CHECK(writer.error() == "checkpoint at step 4 failed: disk full");
}

TEST_CASE("sdk cpp: a stop request makes the trial checkpoint and end its operations") {
  FakeCairn fake({3, 9}, [](FakeCairn& f, const json& m) {
    if (m["type"] == "validation") f.send({{"type", "stop"}, {"reason", "pause"}});
    return false;
  });
  auto env = fake.environment();
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  CHECK_FALSE(ctx->should_preempt());
  CHECK(ctx->report_validation(3, {{"v", 1}}));
  CHECK(ctx->checkpoint_due(4));
  CHECK(ctx->should_preempt());
  CHECK_FALSE(ctx->next_operation().has_value());
  CHECK(fake.of_type("next_operation").size() == 1);
}

TEST_CASE("sdk cpp: a closed channel becomes a stop and the checkpoint an orphan") {
  FakeCairn fake({5}, [](FakeCairn& f, const json& m) {
    if (m["type"] != "validation") return false;
    f.close_connection();
    return true;
  });
  auto env = fake.environment();
  env["CAIRN_ORPHAN_DIR"] = (fake.dir() / "orphans").string();
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  ctx->report_training(2, {{"loss", 1}});
  CHECK_FALSE(ctx->report_validation(2, {{"v", 1}}));
  CHECK(ctx->checkpoint_due(2));
  auto writer = ctx->checkpoint(2);
  CHECK(writer.path() == fake.dir() / "orphans" / "2");
  std::ofstream(writer.path() / "model.bin") << "weights";
  CHECK(writer.commit({{"why", "orphan"}}));
  CHECK(list_dir(fake.dir() / "orphans" / "2") ==
        std::vector<std::string>{"cairn_orphan.json", "cairn_orphan_metrics.jsonl",
                                 "cairn_orphan_validations.jsonl", "cairn_rng_state.txt",
                                 "model.bin"});
  auto marker = json::parse(*cairn::sdk_detail::read_file(writer.path() / "cairn_orphan.json"));
  CHECK(marker["step"] == 2);
  CHECK(marker["trial"] == "7.3");
  CHECK(marker["metadata"] == json{{"why", "orphan"}});
  CHECK(marker["metrics_complete"] == true);
  // Sent before the validation, which was never acknowledged: cairn may not have it.
  CHECK(read_json_lines(writer.path() / "cairn_orphan_metrics.jsonl") ==
        std::vector<json>{{{"step", 2}, {"metrics", {{"loss", 1}}}}});
  CHECK(read_json_lines(writer.path() / "cairn_orphan_validations.jsonl") ==
        std::vector<json>{{{"step", 2}, {"metrics", {{"v", 1}}}}});
  CHECK(ctx->should_preempt());
  CHECK_FALSE(ctx->next_operation().has_value());
}

TEST_CASE("sdk cpp: cairn dying during a commit moves the staging directory to the orphans") {
  FakeCairn fake({}, [](FakeCairn& f, const json& m) {
    if (m["type"] != "checkpoint_end") return false;
    f.close_connection();
    return true;
  });
  auto env = fake.environment();
  env["CAIRN_ORPHAN_DIR"] = (fake.dir() / "orphans").string();
  auto ctx = must_init(env);
  auto writer = ctx->checkpoint(7);
  std::ofstream(writer.path() / "model.bin") << "weights";
  CHECK(writer.commit());
  CHECK(list_dir(fake.dir() / "orphans" / "7") ==
        std::vector<std::string>{"cairn_orphan.json", "cairn_orphan_metrics.jsonl",
                                 "cairn_orphan_validations.jsonl", "cairn_rng_state.txt",
                                 "model.bin"});
  CHECK(read_json_lines(fake.dir() / "orphans" / "7" / "cairn_orphan_metrics.jsonl").empty());
  CHECK_FALSE(fs::exists(fake.staging_dirs.at(0)));
}

TEST_CASE("sdk cpp: an orphan keeps the metrics sent since the last ack and those after EOF") {
  constexpr int64_t kValidated = 1500;  // acked: what came before it is stored
  constexpr int64_t kCairnDies = 2500;  // cairn reads the batch up to here, then dies
  auto loss = [](int64_t step) { return step == 1600 ? NAN : step / 2.0; };
  FakeCairn fake({1'000'000'000}, [](FakeCairn& f, const json& m) {
    if (m["type"] == "hello") {
      f.send({{"type", "welcome"}, {"protocol", 1}, {"checkpoint_period", 0}});
      return true;
    }
    if (m["type"] != "training" || m["reports"].back()["step"] < kCairnDies) return false;
    f.close_connection();  // read, never acknowledged
    return true;
  });
  auto env = fake.environment();
  env["CAIRN_ORPHAN_DIR"] = (fake.dir() / "orphans").string();
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  int64_t step = 0;
  do {
    ++step;
    REQUIRE(step < 100'000'000);  // cairn must have gone by then
    ctx->report_training(step, {{"loss", loss(step)}});
    if (step == kValidated) REQUIRE(ctx->report_validation(step, {{"val", 1.0}}));
  } while (!ctx->checkpoint_due(step));
  REQUIRE(step >= kCairnDies);
  // After EOF: two more steps, a validation that cannot be delivered, and a report
  // beyond the checkpoint's step, which is not part of it.
  const int64_t checkpoint_step = step + 2;
  ctx->report_training(step + 1, {{"loss", loss(step + 1)}});
  ctx->report_training(step + 2, {{"loss", loss(step + 2)}});
  CHECK_FALSE(ctx->report_validation(checkpoint_step, {{"val", 0.5}}));
  ctx->report_training(step + 3, {{"loss", 0.0}});
  auto writer = ctx->checkpoint(checkpoint_step);
  REQUIRE(writer.commit());

  fs::path orphan = fake.dir() / "orphans" / std::to_string(checkpoint_step);
  auto training = read_json_lines(orphan / "cairn_orphan_metrics.jsonl");
  REQUIRE(training.size() == static_cast<size_t>(checkpoint_step - kValidated));
  for (size_t i = 0; i < training.size(); ++i) {
    int64_t expected = kValidated + 1 + static_cast<int64_t>(i);
    REQUIRE(training[i]["step"] == expected);
    if (expected == 1600) {
      CHECK(training[i]["metrics"]["loss"].is_null());
    } else {
      REQUIRE(training[i]["metrics"] == json{{"loss", loss(expected)}});
    }
  }
  CHECK(fake.training_reports().back()["step"] >= kCairnDies);
  CHECK(read_json_lines(orphan / "cairn_orphan_validations.jsonl") ==
        std::vector<json>{{{"step", checkpoint_step}, {"metrics", {{"val", 0.5}}}}});
  auto marker = json::parse(*cairn::sdk_detail::read_file(orphan / "cairn_orphan.json"));
  CHECK(marker["step"] == checkpoint_step);
  CHECK(marker["metrics_complete"] == true);
  CHECK(fs::last_write_time(orphan / "cairn_orphan_metrics.jsonl") <=
        fs::last_write_time(orphan / "cairn_orphan.json"));
}

TEST_CASE("sdk cpp: ranks other than 0 keep no metrics in an orphan") {
  FakeCairn fake({}, [](FakeCairn& f, const json& m) {
    if (m["type"] != "next_operation") return false;
    f.close_connection();
    return true;
  });
  auto env = fake.environment();
  env["CAIRN_ORPHAN_DIR"] = (fake.dir() / "orphans").string();
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  auto ctx = must_init(env);
  ctx->report_training(1, {{"loss", 1}});
  CHECK_FALSE(ctx->next_operation().has_value());
  auto writer = ctx->checkpoint(1);
  REQUIRE(writer.commit());
  CHECK(list_dir(fake.dir() / "orphans" / "1") ==
        std::vector<std::string>{"cairn_orphan.rank1.json", "cairn_rng_state.rank1.txt"});
  auto marker =
      json::parse(*cairn::sdk_detail::read_file(writer.path() / "cairn_orphan.rank1.json"));
  CHECK_FALSE(marker.contains("metrics_complete"));
}

TEST_CASE("sdk cpp: unacknowledged reports are released by an ack and bounded in number") {
  using cairn::sdk_detail::TrainingBatch;
  cairn::sdk_detail::UnackedReports unacked(2500);
  int64_t step = 0;
  auto add_batch = [&](int reports) {
    TrainingBatch batch = unacked.recycled();
    CHECK(batch.empty());
    for (int i = 0; i < reports; ++i) batch.add(++step, {{"loss", 0.5}});
    unacked.add(std::move(batch));
  };
  auto kept_steps = [&](int64_t max_step) {
    std::string lines;
    unacked.append_lines(lines, max_step);
    std::vector<int64_t> steps;
    std::istringstream in(lines);
    for (std::string line; std::getline(in, line);) steps.push_back(json::parse(line)["step"]);
    return steps;
  };

  add_batch(2);
  uint64_t before_request = unacked.mark();
  add_batch(1);  // sent after the request
  unacked.acknowledge(before_request);
  CHECK(kept_steps(100) == std::vector<int64_t>{3});
  CHECK(kept_steps(2).empty());
  CHECK(unacked.complete());

  for (int i = 0; i < 3; ++i) add_batch(1000);  // 3001 kept > 2500: the oldest go
  CHECK_FALSE(unacked.complete());
  auto steps = kept_steps(1'000'000);
  CHECK(steps.size() == 2000);
  CHECK(steps.front() == 1004);
  CHECK(steps.back() == 3003);
  add_batch(5);
  unacked.acknowledge(unacked.mark());  // cairn stored everything, the dropped ones too
  CHECK(unacked.complete());
  CHECK(kept_steps(1'000'000).empty());
}

TEST_CASE("sdk cpp: without an orphan directory the checkpoint is not kept") {
  FakeCairn fake({}, [](FakeCairn& f, const json& m) {
    if (m["type"] != "next_operation") return false;
    f.close_connection();
    return true;
  });
  auto ctx = must_init(fake.environment());
  CHECK_FALSE(ctx->next_operation().has_value());
  CHECK(ctx->checkpoint_due(1));
  auto writer = ctx->checkpoint(1);
  fs::path scratch = writer.path();
  CHECK(fs::is_directory(scratch));
  CHECK_FALSE(writer.commit());
  CHECK_FALSE(fs::exists(scratch));
}

TEST_CASE("sdk cpp: ranks stop at the step cairn answers to sync, not on a bare stop") {
  FakeCairn fake({10}, [](FakeCairn& f, const json& m) {
    if (m["type"] == "next_operation") f.send({{"type", "stop"}, {"reason", "pause"}});
    if (m["type"] == "sync" && m["step"] == 3) f.sync_stop = "pause";
    return false;
  });
  auto env = fake.environment();
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  std::vector<bool> stop_after;
  for (int64_t step = 1; step <= 3; ++step) {
    CHECK(ctx->checkpoint_due(step));  // period 1
    stop_after.push_back(ctx->should_preempt());
  }
  CHECK(stop_after == std::vector<bool>{false, false, true});
  auto syncs = fake.of_type("sync");
  REQUIRE(syncs.size() == 3);
  CHECK(syncs[2]["step"] == 3);
  auto writer = ctx->checkpoint(3);
  REQUIRE(writer.commit());
  CHECK(list_dir(fake.staging_dirs.at(0)) == std::vector<std::string>{"cairn_rng_state.rank1.txt"});
}

TEST_CASE("sdk cpp: a rank that does not enter a due checkpoint says so with rng()'s state") {
  FakeCairn fake({4});
  auto env = fake.environment();
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  ctx->rng()();
  std::ostringstream expected;
  expected << ctx->rng();
  CHECK(ctx->checkpoint_due(1));  // period 1; rank 0 alone saves it
  ctx->rng()();                   // drawn after the due step: not part of its state
  CHECK_FALSE(ctx->should_preempt());
  ctx->report_training(2, {{"loss", 1.0}});  // not due: nothing to leave
  CHECK(ctx->checkpoint_due(2));
  auto writer = ctx->checkpoint(2);  // this one it enters
  REQUIRE(writer.commit());
  auto skips = fake.of_type("checkpoint_skip");
  REQUIRE(skips.size() == 1);
  CHECK(skips[0]["step"] == 1);
  CHECK(skips[0]["call"] == "should_preempt");
  CHECK(skips[0]["rng"]["name"] == "cairn_rng_state.rank1.txt");
  const std::string hex = skips[0]["rng"]["hex"];
  std::vector<char> bytes;
  REQUIRE(cairn::sdk_detail::from_hex(hex, bytes));
  CHECK(std::string(bytes.begin(), bytes.end()) == expected.str());
}

TEST_CASE("sdk cpp: a cairn without checkpoint_skip is asked once") {
  FakeCairn fake({10});
  fake.knows_skip = false;
  auto env = fake.environment();
  env["RANK"] = "1";
  env["WORLD_SIZE"] = "2";
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  for (int64_t step = 1; step <= 3; ++step) {
    CHECK(ctx->checkpoint_due(step));
    CHECK_FALSE(ctx->should_preempt());
  }
  CHECK(fake.of_type("checkpoint_skip").size() == 1);
}

TEST_CASE("sdk cpp: ranks fall back to a bare stop when cairn does not know sync") {
  FakeCairn fake({10}, [](FakeCairn& f, const json& m) {
    if (m["type"] == "next_operation") f.send({{"type", "stop"}, {"reason", "pause"}});
    return false;
  });
  fake.knows_sync = false;
  auto env = fake.environment();
  env["WORLD_SIZE"] = "2";
  auto ctx = must_init(env);
  REQUIRE(ctx->next_operation());
  CHECK(ctx->checkpoint_due(1));
  CHECK(ctx->should_preempt());
  CHECK_FALSE(ctx->next_operation().has_value());
  CHECK(fake.of_type("sync").size() == 1);
}

TEST_CASE("sdk cpp: standalone runs one operation and keeps checkpoints in ./checkpoints") {
  TempDir dir;
  ScopedWorkingDirectory cwd(dir.path);
  auto ctx = must_init({{"CAIRN_MAX_LENGTH", "3"}, {"CAIRN_HPARAMS", R"({"hidden":8})"}});
  CHECK(ctx->standalone());
  CHECK(ctx->hparams() == json{{"hidden", 8}});
  CHECK(ctx->seed() == 0);
  auto op = ctx->next_operation();
  REQUIRE(op);
  CHECK(op->length == 3);
  ctx->report_training(1, {{"loss", 0.5}});
  CHECK(ctx->report_validation(1, {{"val_loss", 0.5}}));
  CHECK(ctx->checkpoint_due(1));
  auto writer = ctx->checkpoint(1);
  std::ofstream(writer.path() / "model.bin") << "weights";
  CHECK(writer.commit());
  CHECK(list_dir(dir.path / "checkpoints") == std::vector<std::string>{".gitignore", "1"});
  CHECK(list_dir(dir.path / "checkpoints" / "1") ==
        std::vector<std::string>{"cairn_rng_state.txt", "model.bin"});
  CHECK_FALSE(ctx->next_operation().has_value());
}

TEST_CASE("sdk cpp: standalone checkpoints of one step open at once keep their own files") {
  TempDir dir;
  ScopedWorkingDirectory cwd(dir.path);
  auto ctx = must_init({{"CAIRN_MAX_LENGTH", "2"}, {"CAIRN_KEEP_LATEST", "0"}});
  auto first = ctx->checkpoint(2);
  std::ofstream(first.path() / "a.txt") << "a";
  auto second = ctx->checkpoint(2);  // used to empty the first one's directory
  std::ofstream(second.path() / "b.txt") << "b";
  CHECK(first.commit());
  CHECK(list_dir(dir.path / "checkpoints" / "2") ==
        std::vector<std::string>{"a.txt", "cairn_rng_state.txt"});
  CHECK(second.commit());  // the later commit of the step replaces the earlier
  CHECK(list_dir(dir.path / "checkpoints" / "2") ==
        std::vector<std::string>{"b.txt", "cairn_rng_state.txt"});
  CHECK(list_dir(dir.path / "checkpoints") == std::vector<std::string>{".gitignore", "2"});
}

TEST_CASE("sdk cpp: standalone keeps the latest CAIRN_KEEP_LATEST checkpoints it committed") {
  TempDir dir;
  ScopedWorkingDirectory cwd(dir.path);
  std::filesystem::create_directories(dir.path / "checkpoints" / "99");  // not this run's
  auto ctx = must_init({{"CAIRN_MAX_LENGTH", "4"}, {"CAIRN_KEEP_LATEST", "2"}});
  for (int64_t step = 1; step <= 4; ++step) {
    auto writer = ctx->checkpoint(step);
    CHECK(writer.commit());
  }
  CHECK(list_dir(dir.path / "checkpoints") ==
        std::vector<std::string>{".gitignore", "3", "4", "99"});
  std::ifstream ignore(dir.path / "checkpoints" / ".gitignore");
  std::string text((std::istreambuf_iterator<char>(ignore)), std::istreambuf_iterator<char>());
  CHECK(text.find("\n*\n") != std::string::npos);
}
