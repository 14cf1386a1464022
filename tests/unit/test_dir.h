// A scratch directory for a unit test, removed when the test ends.
#pragma once

#include <filesystem>
#include <random>
#include <string>

namespace cairn::testing {

class TestDir {
 public:
  TestDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("cairn-unit-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace cairn::testing
