// libFuzzer target: what a coordinator may send an agent as code (docs/peers.md "Code and
// data on a peer"; store/code_pack.h) — a git pack, then the tree to check out — received
// by the agent's CodeCache as it receives them: the pack indexed (libgit2's indexer), the
// tree checked out under the cache's directory, refused with one line otherwise.
//
// An input is one of two shapes (its first byte says which):
//   even: [20-byte tree id][pack bytes]    raw bytes for the indexer, then that tree
//   odd:  a tree description (below), written as raw git objects — names, modes and link
//         targets as given, which no git tool would write — packed by build_code_pack and
//         delivered in pieces whose sizes come from the input too
// so the fuzzer reaches both the pack checks (checksums mostly stop mutated packs) and the
// tree checks behind them (names, duplicates, links, modes).
// Tree description: records [kind][name length][name][content length][content] where kind
// %5 is 0 file, 1 executable, 2 link (content: its target), 3 directory (its entries
// follow, up to a record of kind 4 or the end), 4 end of directory; any other mode byte in
// `kind / 5` (when not 0) replaces the mode with one of a few hostile ones.
//
// Invariants (abort = finding): nothing is ever written outside the cache's directory; a
// refusal is one line and leaves no checkout and no stage; an accepted checkout holds only
// plain files, directories and links whose targets stay inside it, with the modes the
// agent promises (files 0444/0555, directories 0555).
//
// Built like the other fuzzers (CMakeLists.txt), linking libgit2; ctest runs it over
// tests/fuzz/corpus/code_pack (made by tests/fuzz/corpus/make_code_packs.py) for a bounded
// time. To fuzz longer:
//   build/fuzz/code_pack_fuzz -max_total_time=600 tests/fuzz/corpus/code_pack
#include <git2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_util.h"
#include "store/code_pack.h"

namespace {

namespace fs = std::filesystem;

// An invariant: its line and text on standard error, then abort (a finding).
#define check(ok) ((ok) ? (void)0 : fail_at(__LINE__, #ok))
[[noreturn]] void fail_at(int line, const char* what) {
  std::fprintf(stderr, "code_pack_fuzz.cc:%d: %s\n", line, what);
  std::abort();
}

struct Reader {
  std::string_view in;
  uint8_t byte() {
    if (in.empty()) return 0;
    const uint8_t b = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    return b;
  }
  std::string bytes(size_t n) {
    n = std::min(n, in.size());
    std::string out(in.substr(0, n));
    in.remove_prefix(n);
    return out;
  }
};

const fs::path& root() {
  static const fs::path r = [] {
    char tmpl[] = "/tmp/cairn-code-pack-fuzz-XXXXXX";
    check(::mkdtemp(tmpl) != nullptr);
    git_libgit2_init();
    // Raw objects as given (the tree's names are not checked when written).
    git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
    return fs::path(tmpl);
  }();
  return r;
}

// Everything below `dir` (relative paths), links not followed.
void listing(const fs::path& dir, std::vector<std::string>& out) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(fs::relative(it->path(), dir, ec).string());
}

// Removes a tree whose directories may be read-only.
void wipe(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    ::chmod(p.c_str(), 0700);
    std::error_code ec;
    std::vector<fs::path> kids;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
      kids.push_back(it->path());
    for (const fs::path& k : kids) wipe(k);
    ::rmdir(p.c_str());
  } else {
    ::unlink(p.c_str());
  }
}

// A link target stays inside a checkout when, read from the link's directory at `depth`,
// it never climbs above the checkout's root (what the cache promises).
bool stays_inside(const std::string& target, int depth) {
  if (target.empty() || target[0] == '/') return false;
  int level = depth;
  size_t start = 0;
  while (start <= target.size()) {
    size_t slash = target.find('/', start);
    if (slash == std::string::npos) slash = target.size();
    const std::string part = target.substr(start, slash - start);
    if (part == "..") {
      if (--level < 0) return false;
    } else if (!part.empty() && part != ".") {
      ++level;
    }
    start = slash + 1;
  }
  return true;
}

void check_checkout(const fs::path& top, const fs::path& dir, int depth) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st {};
    check(::lstat(it->path().c_str(), &st) == 0);
    const mode_t perm = st.st_mode & 07777;
    if (S_ISDIR(st.st_mode)) {
      check(perm == 0555);
      check_checkout(top, it->path(), depth + 1);
    } else if (S_ISLNK(st.st_mode)) {
      check(stays_inside(fs::read_symlink(it->path(), ec).string(), depth));
    } else {
      check(S_ISREG(st.st_mode) && (perm == 0444 || perm == 0555));
    }
  }
}

git_oid write_object(git_odb* odb, const std::string& content, git_object_t type) {
  git_oid oid{};
  check(git_odb_write(&oid, odb, content.data(), content.size(), type) == 0);
  return oid;
}

// Reads one directory's records and writes its tree object.
git_oid write_tree(git_odb* odb, Reader& r, int depth) {
  static const char* kHostileModes[] = {"100644", "100755", "120000", "40000", "160000",
                                        "100664", "0",      "777777", "",      "40000 x"};
  std::string content;
  for (int entries = 0; !r.in.empty() && entries < 64; ++entries) {
    const uint8_t kind = r.byte();
    if (kind % 5 == 4) break;
    const std::string name = r.bytes(r.byte() % 48);
    const std::string data = r.bytes(r.byte());
    git_oid oid{};
    std::string mode;
    switch (kind % 5) {
      case 0:
        mode = "100644";
        oid = write_object(odb, data, GIT_OBJECT_BLOB);
        break;
      case 1:
        mode = "100755";
        oid = write_object(odb, data, GIT_OBJECT_BLOB);
        break;
      case 2:
        mode = "120000";
        oid = write_object(odb, data, GIT_OBJECT_BLOB);
        break;
      default:
        mode = "40000";
        if (depth >= 8) {
          oid = write_object(odb, "", GIT_OBJECT_TREE);
        } else {
          oid = write_tree(odb, r, depth + 1);
        }
    }
    if (kind / 5 != 0) mode = kHostileModes[(kind / 5) % 10];
    content += mode + " " + name;
    content.push_back('\0');
    content.append(reinterpret_cast<const char*>(oid.id), GIT_OID_RAWSZ);
  }
  return write_object(odb, content, GIT_OBJECT_TREE);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  const fs::path& base = root();
  const fs::path work = base / "w";
  wipe(work);
  const fs::path agent = work / "agent", store = work / "store", beside = work / "beside";
  std::error_code ec;
  fs::create_directories(agent, ec);
  fs::create_directories(beside, ec);
  Reader r{std::string_view(reinterpret_cast<const char*>(data), size)};
  const bool described = r.byte() % 2 == 1;

  std::string pack, tree;
  std::vector<size_t> pieces;
  if (described) {
    git_repository* repo = nullptr;
    check(git_repository_init(&repo, (store / "code.git").c_str(), /*bare=*/1) == 0);
    git_odb* odb = nullptr;
    check(git_repository_odb(&odb, repo) == 0);
    const git_oid oid = write_tree(odb, r, 0);
    tree = git_oid_tostr_s(&oid);
    git_odb_free(odb);
    git_repository_free(repo);
    auto built = cairn::build_code_pack(store, tree, {});
    if (!built.ok()) return 0;  // libgit2 would not pack it (not what a coordinator sends)
    pack = std::move(built->bytes);
    while (!r.in.empty()) pieces.push_back(1 + r.byte() * 97);
  } else {
    const std::string id = r.bytes(20);
    if (id.size() < 20) return 0;
    git_oid oid{};
    std::memcpy(oid.id, id.data(), 20);
    tree = git_oid_tostr_s(&oid);
    pack = std::string(r.in);
  }

  auto cache = cairn::CodeCache::open(agent);
  check(cache.ok());
  auto receiver = (*cache)->receive_pack();
  check(receiver.ok());
  cairn::Status appended = cairn::Status::Ok();
  size_t at = 0, piece = 0;
  while (at < pack.size() && appended.ok()) {
    const size_t n = pieces.empty() ? pack.size() : pieces[piece++ % pieces.size()];
    appended = (*receiver)->append(std::string_view(pack).substr(at, n));
    at += n;
  }
  auto indexed = appended.ok() ? (*receiver)->finish() : cairn::Result<uint64_t>(appended);
  receiver->reset();
  if (!indexed.ok()) {
    const std::string& why = indexed.status().message();
    if (why.empty() || why.find('\n') != std::string::npos)
      std::fprintf(stderr, "refusal: [%s]\n", why.c_str());
    check(!why.empty() && why.find('\n') == std::string::npos);
  } else {
    cairn::Status st = (*cache)->checkout(tree);
    if (st.ok()) {
      check((*cache)->has_checkout(tree));
      check_checkout((*cache)->checkout_dir(tree), (*cache)->checkout_dir(tree), 0);
    } else {
      if (st.message().empty() || st.message().find('\n') != std::string::npos)
        std::fprintf(stderr, "refusal: [%s]\n", st.message().c_str());
      check(!st.message().empty() && st.message().find('\n') == std::string::npos);
      check(!(*cache)->has_checkout(tree));
    }
    // Never a stage left behind.
    for (fs::directory_iterator it(agent / "code", ec), end; !ec && it != end; it.increment(ec))
      check(it->path().filename().string().rfind(".stage-", 0) != 0);
  }
  // Nothing written beside the agent's directory, nor at an absolute name.
  std::vector<std::string> outside;
  listing(beside, outside);
  check(outside.empty());
  for (fs::directory_iterator it(work, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    check(name == "agent" || name == "store" || name == "beside");
  }
  check(!fs::exists("/tmp/owned", ec));
  return 0;
}
