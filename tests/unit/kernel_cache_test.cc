#include "gpu/kernel_cache.h"

#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "common/file_util.h"
#include "test_dir.h"

namespace cairn {
namespace {

// An image as NVRTC gives them: binary (a cubin is ELF), with NULs and newlines inside.
std::string sample_image() {
  std::string image =
      "\x7f"
      "ELF";
  for (int c = 0; c < 256; ++c) image += static_cast<char>(c);
  return image + "\nmore\n";
}

void overwrite_byte(const std::filesystem::path& file, size_t at, char value) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(value);
}

}  // namespace

TEST_CASE("kernel cache: an image saved is loaded back, by its key only") {
  testing::TestDir dir;
  const std::filesystem::path cache = dir / "cache" / "kernels";  // made on first save
  std::string problem;
  CHECK_FALSE(kernel_cache::load(cache, "key A", &problem).has_value());
  CHECK(problem.empty());  // absent is not a problem

  kernel_cache::save(cache, "key A", sample_image());
  auto back = kernel_cache::load(cache, "key A", &problem);
  REQUIRE(back.has_value());
  CHECK(*back == sample_image());
  CHECK(problem.empty());
  CHECK_FALSE(kernel_cache::load(cache, "key B", &problem).has_value());
}

TEST_CASE("kernel cache: a damaged entry is reported, removed and never returned") {
  testing::TestDir dir;
  const std::filesystem::path cache = dir / "kernels";
  kernel_cache::save(cache, "key", sample_image());
  const std::filesystem::path file = kernel_cache::entry(cache, "key");
  REQUIRE(std::filesystem::exists(file));

  SUBCASE("a byte of the image changed") {
    overwrite_byte(file, 20, 'x');
  }
  SUBCASE("cut short") {
    std::filesystem::resize_file(file, 100);
  }
  SUBCASE("another key's entry under this name") {
    kernel_cache::save(cache, "other key", sample_image());
    std::filesystem::rename(kernel_cache::entry(cache, "other key"), file);
  }
  std::string problem;
  CHECK_FALSE(kernel_cache::load(cache, "key", &problem).has_value());
  CHECK(problem.find("damaged") != std::string::npos);
  CHECK(problem.find(file.string()) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(file));  // the next compile writes it afresh
}

TEST_CASE("kernel cache: a directory that cannot be made costs the cache, nothing else") {
  testing::TestDir dir;
  REQUIRE(write_file_atomic(dir / "a-file", "not a directory").ok());
  const std::filesystem::path cache = dir / "a-file" / "kernels";
  kernel_cache::save(cache, "key", sample_image());  // must not throw or crash
  std::string problem;
  CHECK_FALSE(kernel_cache::load(cache, "key", &problem).has_value());
}

}  // namespace cairn
