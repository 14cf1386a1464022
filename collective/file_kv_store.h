// A KeyValueStore in a directory, for tests and benchmarks only (cairn itself goes through
// the coordinator): processes on one machine that share the directory see each other's
// keys. Header-only so that nothing in the cairn binary depends on it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "collective/kv_store.h"

namespace cairn {

class FileKeyValueStore final : public KeyValueStore {
 public:
  explicit FileKeyValueStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

  Status set(const std::string& key, const std::string& value) override {
    // Written aside and renamed, so a reader sees the whole value or nothing.
    const std::filesystem::path final_path = path_for(key);
    const std::filesystem::path tmp =
        final_path.string() + ".tmp." + std::to_string(::getpid()) + "." +
        std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << value;
      if (!out.flush()) return Status::Io("cannot write " + tmp.string());
    }
    if (std::rename(tmp.c_str(), final_path.c_str()) != 0)
      return Status::Io("cannot rename " + tmp.string() + ": " + std::strerror(errno));
    return Status::Ok();
  }

  Result<std::string> wait_get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::filesystem::path path = path_for(key);
    // Polling with a growing interval: a test store, not worth an inotify watch.
    auto pause = std::chrono::microseconds(100);
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        std::ostringstream buf;
        buf << in.rdbuf();
        return buf.str();
      }
      if (std::chrono::steady_clock::now() >= deadline)
        return Status::Failed("timed out after " + std::to_string(timeout.count()) +
                              " ms waiting for key '" + key + "'");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
  }

 private:
  // Keys may hold '/', so each byte that is not alphanumeric becomes %XX.
  std::filesystem::path path_for(const std::string& key) const {
    static const char* hex = "0123456789abcdef";
    std::string name;
    for (unsigned char c : key) {
      if (std::isalnum(c) || c == '-' || c == '_') {
        name += static_cast<char>(c);
      } else {
        name += '%';
        name += hex[c >> 4];
        name += hex[c & 15];
      }
    }
    return dir_ / name;
  }

  std::filesystem::path dir_;
};

}  // namespace cairn
