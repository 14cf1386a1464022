#include "engine/coordinator/determined_package.h"

#include "common/embedded.h"
#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

Status write_determined_package(const fs::path& dir) {
  for (const EmbeddedFile& f : kDeterminedPackage) {
    const fs::path file = dir / f.path;
    auto existing = read_file(file);
    if (existing.ok() && *existing == f.content) continue;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    if (ec) return Status::Io("cannot create " + file.parent_path().string() + ": " + ec.message());
    if (Status st = write_file_atomic(file, f.content); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace cairn
