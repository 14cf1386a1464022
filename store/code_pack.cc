#include "store/code_pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "common/file_util.h"
#include "store/git_handles.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// Far deeper than any project; a hostile tree nested deeper is refused rather than walked
// into a stack overflow.
constexpr int kMaxTreeDepth = 256;

using ObjectSet = std::set<std::string>;  // raw 20-byte ids

std::string raw(const git_oid& oid) {
  return std::string(reinterpret_cast<const char*>(oid.id), GIT_OID_RAWSZ);
}

struct Collected {
  git_oid oid;
  std::string name;  // the entry's path: packbuilder uses it to pick delta bases
};

// Every object reachable from the tree `oid`, pre-order; subtrees already in `seen` are
// not walked again.
Status collect(git_repository* repo, const git_oid& oid, const std::string& path, int depth,
               ObjectSet& seen, std::vector<Collected>* out) {
  if (!seen.insert(raw(oid)).second) return Status::Ok();
  if (out) out->push_back({oid, path});
  if (depth > kMaxTreeDepth) return Status::BadInput("tree nested deeper than 256 levels");
  git_tree* tree = nullptr;
  if (git_tree_lookup(&tree, repo, &oid) != 0)
    return git::error("tree " + git::hex(oid).substr(0, 12) + " is not in the store",
                      ErrorKind::kNotFound);
  git::Tree owned(tree);
  const size_t n = git_tree_entrycount(tree);
  for (size_t i = 0; i < n; ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
    const git_filemode_t mode = git_tree_entry_filemode(entry);
    const std::string name =
        path.empty() ? git_tree_entry_name(entry) : path + "/" + git_tree_entry_name(entry);
    if (mode == GIT_FILEMODE_COMMIT) continue;  // a submodule: not part of a snapshot
    if (mode == GIT_FILEMODE_TREE) {
      Status st = collect(repo, *git_tree_entry_id(entry), name, depth + 1, seen, out);
      if (!st.ok()) return st;
    } else if (seen.insert(raw(*git_tree_entry_id(entry))).second && out) {
      out->push_back({*git_tree_entry_id(entry), name});
    }
  }
  return Status::Ok();
}

}  // namespace

bool is_object_id(std::string_view hex) {
  return hex.size() == GIT_OID_HEXSZ && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Result<CodePack> build_code_pack(const fs::path& store_root, const std::string& tree,
                                 const std::vector<std::string>& have_trees) {
  git::ensure_initialized();
  git_oid want;
  if (!is_object_id(tree) || !git::parse_oid(tree, &want))
    return Status::BadInput("'" + tree.substr(0, 64) + "' is not a tree id");
  git_repository* repo_raw = nullptr;
  if (git_repository_open_bare(&repo_raw, (store_root / "code.git").c_str()) != 0)
    return git::error("cannot open " + (store_root / "code.git").string());
  git::Repository repo(repo_raw);
  // What the receiver has: every object under its complete trees that we know too.
  ObjectSet have;
  for (const std::string& hex : have_trees) {
    git_oid oid;
    if (!is_object_id(hex) || !git::parse_oid(hex, &oid)) continue;
    if (hex == tree) return CodePack{};
    git_odb* odb = nullptr;
    if (git_repository_odb(&odb, repo.get()) != 0) return git::error("cannot open code.git");
    git::Odb owned_odb(odb);
    if (!git_odb_exists(odb, &oid)) continue;  // not ours: another store's snapshot
    ObjectSet partial;
    if (collect(repo.get(), oid, "", 0, partial, nullptr).ok()) have.merge(partial);
  }
  std::vector<Collected> wanted;
  ObjectSet seen = have;
  Status st = collect(repo.get(), want, "", 0, seen, &wanted);
  if (!st.ok()) return st;
  CodePack pack;
  if (wanted.empty()) return pack;
  git_packbuilder* pb_raw = nullptr;
  if (git_packbuilder_new(&pb_raw, repo.get()) != 0) return git::error("cannot build a pack");
  std::unique_ptr<git_packbuilder, git::Deleter<git_packbuilder, git_packbuilder_free>> pb(pb_raw);
  git_packbuilder_set_threads(pb.get(), 1);  // a coordinator shares its machine with trials
  for (const Collected& c : wanted)
    if (git_packbuilder_insert(pb.get(), &c.oid, c.name.empty() ? nullptr : c.name.c_str()) != 0)
      return git::error("cannot pack " + (c.name.empty() ? std::string("the tree") : c.name));
  git_buf buf = GIT_BUF_INIT;
  if (git_packbuilder_write_buf(&buf, pb.get()) != 0) return git::error("cannot build a pack");
  pack.bytes.assign(buf.ptr, buf.size);
  git_buf_dispose(&buf);
  pack.objects = git_packbuilder_object_count(pb.get());
  return pack;
}

struct CodeCache::Impl {
  fs::path dir;
  git::Repository repo;
};

CodeCache::~CodeCache() = default;

Result<std::unique_ptr<CodeCache>> CodeCache::open(const fs::path& dir) {
  git::ensure_initialized();
  std::error_code ec;
  fs::create_directories(dir / "code", ec);
  if (ec) return Status::Io("cannot create " + (dir / "code").string() + ": " + ec.message());
  const fs::path git_dir = dir / "code-cache.git";
  git_repository* repo = nullptr;
  if (git_repository_open_bare(&repo, git_dir.c_str()) != 0 &&
      git_repository_init(&repo, git_dir.c_str(), /*is_bare=*/1) != 0)
    return git::error("cannot create " + git_dir.string());
  std::unique_ptr<CodeCache> cache(new CodeCache());
  cache->impl_ = std::make_unique<Impl>();
  cache->impl_->dir = dir;
  cache->impl_->repo.reset(repo);
  return cache;
}

fs::path CodeCache::checkout_dir(const std::string& tree) const {
  return impl_->dir / "code" / tree;
}

bool CodeCache::has_checkout(const std::string& tree) const {
  std::error_code ec;
  return is_object_id(tree) && fs::is_directory(checkout_dir(tree), ec);
}

std::vector<std::string> CodeCache::tips(size_t max) const {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(impl_->dir / "code", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code time_ec;
    if (is_object_id(name)) found.emplace_back(fs::last_write_time(it->path(), time_ec), name);
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  std::vector<std::string> out;
  for (size_t i = 0; i < found.size() && i < max; ++i) out.push_back(found[i].second);
  return out;
}

namespace {

class IndexerReceiver final : public CodeCache::PackReceiver {
 public:
  explicit IndexerReceiver(git_indexer* indexer) : indexer_(indexer) {}
  ~IndexerReceiver() override { git_indexer_free(indexer_); }  // removes an unfinished pack
  Status append(std::string_view bytes) override {
    // The header's object count sizes libgit2's first allocation (8 bytes an object): 12
    // bytes claiming 2^32 objects would make it allocate 32 GiB. Checked before libgit2
    // sees it (tests/fuzz/code_pack_fuzz.cc found it).
    if (header_.size() < 12) {
      header_.append(bytes.substr(0, 12 - header_.size()));
      if (header_.size() == 12) {
        const auto* h = reinterpret_cast<const unsigned char*>(header_.data());
        const uint32_t count = (uint32_t{h[8]} << 24) | (uint32_t{h[9]} << 16) |
                               (uint32_t{h[10]} << 8) | uint32_t{h[11]};
        if (count > kMaxPackObjects)
          return Status::Corrupt("the code pack claims " + std::to_string(count) +
                                 " objects, more than " + std::to_string(kMaxPackObjects));
      }
    }
    if (git_indexer_append(indexer_, bytes.data(), bytes.size(), &stats_) != 0)
      return git::error("the code pack is damaged", ErrorKind::kCorrupt);
    return Status::Ok();
  }
  Result<uint64_t> finish() override {
    if (git_indexer_commit(indexer_, &stats_) != 0)
      return git::error("the code pack is damaged", ErrorKind::kCorrupt);
    return static_cast<uint64_t>(stats_.indexed_objects);
  }

 private:
  // Far above any snapshot's (a snapshot is at most snapshot_limit_mb).
  static constexpr uint32_t kMaxPackObjects = 1u << 20;
  git_indexer* indexer_;
  git_indexer_progress stats_{};
  std::string header_;  // the pack's first 12 bytes, as they arrive
};

struct Writer {
  fs::path root;
  git_repository* repo;
  std::vector<std::pair<fs::path, std::string>> links;  // created after every file
  std::vector<fs::path> dirs;                           // made read-only at the end
};

// One line whatever the names hold: control bytes (a newline would forge a line of the
// agent's log) are shown as \xNN. Every message that names a path of the tree uses it.
std::string visible(const std::string& text) {
  std::string shown;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      shown += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    } else {
      shown.push_back(static_cast<char>(c));
    }
  }
  return shown;
}

Status refuse(const std::string& path, const std::string& why) {
  return Status::BadInput("refused code tree: " +
                          visible(path.substr(0, 300) + " " + why.substr(0, 600)));
}

bool bad_name(const std::string& name) {
  return name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos;
}

// A link's target may climb with leading ".." only, and no higher than the link's own
// depth: the directories above a link are real directories of the checkout (links are
// made last, and names are unique), so what follows a leading "..", plain names, can only
// lead through other links, each held to the same rule.
bool link_stays_inside(const std::string& target, int depth) {
  if (target.empty() || target[0] == '/' || target.find('\0') != std::string::npos) return false;
  int up = 0;
  bool below = false;
  size_t start = 0;
  while (start <= target.size()) {
    size_t end = target.find('/', start);
    if (end == std::string::npos) end = target.size();
    const std::string part = target.substr(start, end - start);
    if (part == "..") {
      if (below) return false;
      if (++up > depth) return false;
    } else if (!part.empty() && part != ".") {
      below = true;
    }
    start = end + 1;
  }
  return true;
}

Status write_tree(Writer& w, const git_oid& oid, const fs::path& dir, const std::string& rel,
                  int depth) {
  if (depth > kMaxTreeDepth) return refuse(rel, "is nested deeper than 256 levels");
  git_tree* tree = nullptr;
  if (git_tree_lookup(&tree, w.repo, &oid) != 0)
    return git::error("code tree " + git::hex(oid).substr(0, 12) + " is incomplete",
                      ErrorKind::kCorrupt);
  git::Tree owned(tree);
  const size_t n = git_tree_entrycount(tree);
  for (size_t i = 0; i < n; ++i) {
    const git_tree_entry* entry = git_tree_entry_byindex(tree, i);
    const std::string name = git_tree_entry_name(entry);
    const std::string path = rel.empty() ? name : rel + "/" + name;
    if (bad_name(name)) return refuse("'" + path + "'", "has an entry that is not a plain name");
    const fs::path target = dir / name;
    const git_filemode_t mode = git_tree_entry_filemode(entry);
    if (mode == GIT_FILEMODE_COMMIT) continue;  // a submodule: not part of a snapshot
    if (mode == GIT_FILEMODE_TREE) {
      if (::mkdir(target.c_str(), 0755) != 0)
        return errno == EEXIST
                   ? refuse(path, "appears twice")
                   : Status::Io("cannot create " + visible(target.string()) + ": " + errno_text());
      w.dirs.push_back(target);
      Status st = write_tree(w, *git_tree_entry_id(entry), target, path, depth + 1);
      if (!st.ok()) return st;
      continue;
    }
    if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE &&
        mode != GIT_FILEMODE_LINK)
      return refuse(path, "is of an unknown kind");
    git_blob* blob = nullptr;
    if (git_blob_lookup(&blob, w.repo, git_tree_entry_id(entry)) != 0)
      return git::error("code tree is incomplete at " + visible(path.substr(0, 300)),
                        ErrorKind::kCorrupt);
    git::Blob owned_blob(blob);
    const std::string_view content(static_cast<const char*>(git_blob_rawcontent(blob)),
                                   static_cast<size_t>(git_blob_rawsize(blob)));
    if (mode == GIT_FILEMODE_LINK) {
      const std::string link(content);
      if (!link_stays_inside(link, depth))
        return refuse(path,
                      "is a link that leads outside the checkout (" + link.substr(0, 200) + ")");
      w.links.emplace_back(target, link);
      continue;
    }
    const mode_t perms = mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0555 : 0444;
    UniqueFd fd(::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd)
      return errno == EEXIST
                 ? refuse(path, "appears twice")
                 : Status::Io("cannot create " + visible(target.string()) + ": " + errno_text());
    Status st = write_all(fd.get(), content);
    if (!st.ok()) return st;
    if (::fchmod(fd.get(), perms) != 0) return Status::Io("chmod " + target.string());
  }
  return Status::Ok();
}

// Makes a staged tree writable again so it can be removed (a refused or raced checkout).
void remove_staged(const fs::path& stage) {
  std::error_code ec;
  for (fs::recursive_directory_iterator it(stage, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
  ::chmod(stage.c_str(), 0755);
  fs::remove_all(stage, ec);
}

}  // namespace

Result<std::unique_ptr<CodeCache::PackReceiver>> CodeCache::receive_pack() {
  git_odb* odb = nullptr;
  if (git_repository_odb(&odb, impl_->repo.get()) != 0) return git::error("cannot open the cache");
  git::Odb owned(odb);
  git_indexer_options opts = GIT_INDEXER_OPTIONS_INIT;
  opts.verify = 1;  // every object a tree names is in the pack or already here
  git_indexer* indexer = nullptr;
  const fs::path pack_dir = impl_->dir / "code-cache.git" / "objects" / "pack";
  if (git_indexer_new(&indexer, pack_dir.c_str(), 0444, odb, &opts) != 0)
    return git::error("cannot receive a code pack");
  return std::unique_ptr<PackReceiver>(new IndexerReceiver(indexer));
}

Status CodeCache::checkout(const std::string& tree) {
  if (!is_object_id(tree)) return Status::BadInput("'" + tree.substr(0, 64) + "' is not a tree id");
  if (has_checkout(tree)) return Status::Ok();
  // The packs indexed since the repository was opened.
  git_odb* odb = nullptr;
  if (git_repository_odb(&odb, impl_->repo.get()) == 0) {
    git_odb_refresh(odb);
    git_odb_free(odb);
  }
  git_oid oid;
  git::parse_oid(tree, &oid);
  auto stage = make_unique_dir(impl_->dir / "code", ".stage-");
  if (!stage.ok()) return stage.status();
  Writer w{*stage, impl_->repo.get(), {}, {}};
  Status st = write_tree(w, oid, *stage, "", 0);
  for (size_t i = 0; st.ok() && i < w.links.size(); ++i) {
    const auto& [path, target] = w.links[i];
    if (::symlink(target.c_str(), path.c_str()) != 0)
      st = errno == EEXIST
               ? refuse(path.lexically_relative(*stage).string(), "appears twice")
               : Status::Io("cannot create the link " + path.string() + ": " + errno_text());
  }
  if (!st.ok()) {
    remove_staged(*stage);
    return st;
  }
  for (auto it = w.dirs.rbegin(); it != w.dirs.rend(); ++it) ::chmod(it->c_str(), 0555);
  ::chmod(stage->c_str(), 0555);
  std::error_code ec;
  fs::rename(*stage, checkout_dir(tree), ec);
  if (ec) {
    remove_staged(*stage);
    if (has_checkout(tree)) return Status::Ok();  // made meanwhile by another cache
    return Status::Io("cannot create " + checkout_dir(tree).string() + ": " + ec.message());
  }
  return Status::Ok();
}

Status copy_checkout(const fs::path& from, const fs::path& dest) {
  std::error_code ec;
  fs::create_directory(dest, ec);
  if (ec) return Status::Io("cannot create " + dest.string() + ": " + ec.message());
  ::chmod(dest.c_str(), 0755);
  for (fs::recursive_directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path to = dest / it->path().lexically_relative(from);
    std::error_code op;
    const fs::file_status st = it->symlink_status(op);
    if (fs::is_symlink(st)) {
      fs::create_symlink(fs::read_symlink(it->path(), op), to, op);
    } else if (fs::is_directory(st)) {
      fs::create_directory(to, op);
      if (!op) ::chmod(to.c_str(), 0755);
    } else if (fs::is_regular_file(st)) {
      fs::copy_file(it->path(), to, op);
      const bool exec = (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
      if (!op) ::chmod(to.c_str(), exec ? 0755 : 0644);
    }
    if (op) return Status::Io("cannot copy " + it->path().string() + ": " + op.message());
  }
  if (ec) return Status::Io("cannot read " + from.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace cairn
