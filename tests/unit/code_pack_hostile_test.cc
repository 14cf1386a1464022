// What tests/fuzz/code_pack_fuzz.cc found in the agent's code cache (store/code_pack.h): a
// pack header claiming billions of objects made libgit2 allocate for all of them before
// reading one, and a name holding a newline made a refusal two lines (a forged line in the
// agent's log). Both are refused now, in one line.
#include <doctest/doctest.h>
#include <git2.h>

#include <filesystem>
#include <string>

#include "store/code_pack.h"
#include "test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

TEST_CASE("code cache: a pack header claiming too many objects is refused before indexing") {
  TestDir dir;
  auto cache = CodeCache::open(dir / "agent");
  REQUIRE(cache.ok());
  auto receiver = (*cache)->receive_pack();
  REQUIRE(receiver.ok());
  // "PACK", version 2, 2^32 - 1 objects: arriving in two pieces.
  const std::string header("PACK\0\0\0\2\xff\xff", 10);
  CHECK((*receiver)->append(header).ok());
  Status st = (*receiver)->append(std::string("\xff\xff", 2));
  CHECK(st.kind() == ErrorKind::kCorrupt);
  CHECK(st.message() == "the code pack claims 4294967295 objects, more than 1048576");
}

TEST_CASE("code cache: a refused name with control bytes is shown in one line") {
  TestDir dir;
  git_libgit2_init();
  git_repository* repo = nullptr;
  REQUIRE(git_repository_init(&repo, (dir / "store" / "code.git").c_str(), 1) == 0);
  git_odb* odb = nullptr;
  REQUIRE(git_repository_odb(&odb, repo) == 0);
  git_oid blob, tree;
  REQUIRE(git_odb_write(&blob, odb, "x", 1, GIT_OBJECT_BLOB) == 0);
  std::string content = std::string("100644 evil\nline/..") + '\0';
  content.append(reinterpret_cast<const char*>(blob.id), GIT_OID_RAWSZ);
  REQUIRE(git_odb_write(&tree, odb, content.data(), content.size(), GIT_OBJECT_TREE) == 0);
  git_odb_free(odb);
  git_repository_free(repo);
  const std::string id = git_oid_tostr_s(&tree);
  auto pack = build_code_pack(dir / "store", id, {});
  REQUIRE_MESSAGE(pack.ok(), pack.status().message());
  auto cache = CodeCache::open(dir / "agent");
  REQUIRE(cache.ok());
  auto receiver = (*cache)->receive_pack();
  REQUIRE(receiver.ok());
  REQUIRE((*receiver)->append(pack->bytes).ok());
  REQUIRE((*receiver)->finish().ok());
  Status st = (*cache)->checkout(id);
  CHECK(st.kind() == ErrorKind::kBadInput);
  CHECK(st.message().find('\n') == std::string::npos);
  CHECK(st.message() ==
        "refused code tree: 'evil\\x0aline/..' has an entry that is not a plain name");
  CHECK_FALSE((*cache)->has_checkout(id));
}

}  // namespace
}  // namespace cairn
