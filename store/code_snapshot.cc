#include "store/code_snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/file_util.h"
#include "common/sha256.h"
#include "store/git_handles.h"
#include "store/git_objects.h"
#include "store/stat_cache.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// Threads hashing and compressing blobs on a first snapshot; more gain little, as reading
// the files and writing the objects' directories then dominate.
constexpr unsigned kBlobThreads = 4;

struct WorkFile {
  std::string rel;  // '/'-separated, relative to the workdir
  FileStat st;
  git_filemode_t mode = GIT_FILEMODE_BLOB;
};

// A directory of the walk; its entries name files (indexes into the file list) and
// subdirectories (indexes into the directory list, always after their parent's).
struct WalkDir {
  struct Entry {
    std::string name;
    bool is_dir = false;
    size_t index = 0;
  };
  std::vector<Entry> entries;
};

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 20)) return std::to_string((b + (1ull << 19)) >> 20) + " MB";
  if (b >= 1024) return std::to_string((b + 512) >> 10) + " KB";
  return std::to_string(b) + " bytes";
}

// Decides what of the workdir to keep. Git's rules: with a user checkout around the
// workdir, its rules (every .gitignore up to its root, info/exclude, core.excludesFile) and
// its index (tracked files are never ignored) decide, read-only; without one, code.git is
// pointed at the workdir in memory so the workdir's .gitignore files apply. Then cairn's
// own: the workdir's .cairnignore leaves out what git keeps but a snapshot need not
// (tracked files too), evaluated by a handle whose working directory is empty, so no
// .gitignore file mixes in.
class IgnoreRules {
 public:
  static Result<IgnoreRules> make(const fs::path& store_git, const fs::path& workdir,
                                  git_repository* user, const std::string& user_root) {
    IgnoreRules rules;
    if (user != nullptr) {
      rules.repo_ = user;
      std::error_code ec;
      rules.prefix_ =
          workdir.lexically_relative(fs::weakly_canonical(user_root, ec)).generic_string();
      if (rules.prefix_ == ".") rules.prefix_.clear();
      if (!rules.prefix_.empty()) rules.prefix_ += "/";
      git_index* index = nullptr;
      if (git_repository_index(&index, user) == 0) rules.index_.reset(index);
    } else {
      auto own = open_with_workdir(store_git, workdir);
      if (!own.ok()) return own.status();
      rules.own_ = std::move(*own);
      rules.repo_ = rules.own_.get();
    }
    auto text = read_file(workdir / ".cairnignore");
    if (text.ok()) {
      std::error_code ec;
      const fs::path empty = store_git / "cairn-empty";
      fs::create_directories(empty, ec);
      auto cairn = open_with_workdir(store_git, empty);
      if (!cairn.ok()) return cairn.status();
      rules.cairn_ = std::move(*cairn);
      if (git_ignore_add_rule(rules.cairn_.get(), text->c_str()) != 0)
        return git::error("cannot read " + (workdir / ".cairnignore").string(),
                          ErrorKind::kBadInput);
    }
    return rules;
  }

  bool ignored(const std::string& rel, bool is_dir) const {
    int hit = 0;
    const std::string own = rel + (is_dir ? "/" : "");
    if (cairn_ && git_ignore_path_is_ignored(&hit, cairn_.get(), own.c_str()) == 0 && hit)
      return true;
    const std::string path = prefix_ + own;
    if (git_ignore_path_is_ignored(&hit, repo_, path.c_str()) != 0 || !hit) return false;
    if (!index_) return true;
    if (!is_dir) return git_index_get_bypath(index_.get(), path.c_str(), 0) == nullptr;
    size_t at = 0;  // an ignored directory that still holds tracked files is walked
    return git_index_find_prefix(&at, index_.get(), path.c_str()) != 0;
  }

 private:
  // code.git, with a working directory in memory only (0: no gitlink is written), which is
  // what libgit2's ignore machinery needs.
  static Result<git::Repository> open_with_workdir(const fs::path& store_git, const fs::path& dir) {
    git_repository* raw = nullptr;
    if (git_repository_open_bare(&raw, store_git.c_str()) != 0)
      return git::error("cannot open " + store_git.string());
    git::Repository repo(raw);
    if (git_repository_set_workdir(raw, dir.c_str(), 0) != 0)
      return git::error("cannot read the ignore rules of " + dir.string());
    return repo;
  }

  git_repository* repo_ = nullptr;
  git::Repository own_, cairn_;
  git::Index index_;
  std::string prefix_;  // the workdir relative to the user's checkout, with a trailing '/'
};

// What the previous snapshot of this workdir knew, to skip asking libgit2 whether a path
// is ignored (its check re-reads every parent .gitignore: most of a second snapshot). When
// every ignore source is as it was, a path snapshotted last time is not ignored now.
struct KnownPaths {
  const StatCache* cache = nullptr;  // null: check every path
  bool rules_changed = false;        // set by collect() on meeting a new or edited .gitignore
};

// Walks the workdir, keeping what the rules keep, with openat()/fstatat() relative to each
// directory's descriptor (no absolute path resolved per file) and readdir's file type
// (no stat of a subdirectory).
class Walker {
 public:
  Walker(const fs::path& workdir, const IgnoreRules& rules, const SnapshotOptions& opts,
         KnownPaths& known)
      : workdir_(workdir), rules_(rules), known_(known) {
    for (const fs::path& x : opts.exclude) {
      const fs::path rel = x.lexically_normal().lexically_relative(workdir);
      if (rel.empty()) continue;
      const std::string r = rel.generic_string();
      if (r == ".")
        all_excluded_ = true;  // the workdir itself (or a parent of it) is excluded
      else if (r != ".." && r.rfind("../", 0) != 0)
        excluded_.push_back(r);
    }
  }

  Status run(std::vector<WorkFile>& files, std::vector<WalkDir>& dirs) {
    files_ = &files;
    dirs_ = &dirs;
    dirs.emplace_back();
    if (all_excluded_) return Status::Ok();
    const int fd = ::open(workdir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::Io("cannot read " + workdir_.string() + ": " + errno_text());
    return walk(fd, "", 0);
  }

 private:
  bool excluded(const std::string& rel) const {
    for (const std::string& x : excluded_)
      if (rel.size() >= x.size() && rel.compare(0, x.size(), x) == 0 &&
          (rel.size() == x.size() || rel[x.size()] == '/'))
        return true;
    return false;
  }

  // Takes ownership of `fd`.
  Status walk(int fd, const std::string& rel_dir, size_t dir_index) {
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      ::close(fd);
      return Status::Io("cannot read " + (workdir_ / rel_dir).string() + ": " + errno_text());
    }
    std::unique_ptr<DIR, int (*)(DIR*)> owned(d, ::closedir);
    const int dfd = ::dirfd(d);
    std::string rel;
    for (;;) {
      errno = 0;
      const dirent* e = ::readdir(d);
      if (e == nullptr) break;
      const char* name = e->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      if (std::strcmp(name, ".git") == 0) continue;
      rel.assign(rel_dir);  // reusing the buffer: one allocation per kept file, not two
      if (!rel.empty()) rel += '/';
      rel += name;
      if (!excluded_.empty() && excluded(rel)) continue;
      struct stat st {};
      if (e->d_type == DT_DIR) {
        st.st_mode = S_IFDIR;
      } else if (::fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        continue;  // vanished meanwhile
      }
      if (known_.cache && std::strcmp(name, ".gitignore") == 0 &&
          !known_.cache->lookup(rel, FileStat::of(st))) {
        known_.rules_changed = true;  // the caller starts over, checking every path
        return Status::Ok();
      }
      if (S_ISDIR(st.st_mode)) {
        const bool seen = known_.cache && known_.cache->contains_dir(rel);
        if (!seen && rules_.ignored(rel, true)) continue;
        const int sub = ::openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          if (errno == ENOENT) continue;  // vanished meanwhile
          return Status::Io("cannot read " + (workdir_ / rel).string() + ": " + errno_text());
        }
        const size_t index = dirs_->size();
        dirs_->emplace_back();
        (*dirs_)[dir_index].entries.push_back({name, true, index});
        Status s = walk(sub, rel, index);
        if (!s.ok() || known_.rules_changed) return s;
      } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
        const bool seen = known_.cache && known_.cache->contains(rel);
        if (!seen && rules_.ignored(rel, false)) continue;
        git_filemode_t mode = GIT_FILEMODE_BLOB;
        if (S_ISLNK(st.st_mode))
          mode = GIT_FILEMODE_LINK;
        else if (st.st_mode & 0111)
          mode = GIT_FILEMODE_BLOB_EXECUTABLE;
        (*dirs_)[dir_index].entries.push_back({name, false, files_->size()});
        files_->push_back(WorkFile{rel, FileStat::of(st), mode});
      }
    }
    if (errno != 0)
      return Status::Io("cannot read " + (workdir_ / rel_dir).string() + ": " + errno_text());
    return Status::Ok();
  }

  const fs::path& workdir_;
  const IgnoreRules& rules_;
  KnownPaths& known_;
  std::vector<std::string> excluded_;  // relative to the workdir
  bool all_excluded_ = false;
  std::vector<WorkFile>* files_ = nullptr;
  std::vector<WalkDir>* dirs_ = nullptr;
};

// The stat data of every ignore source outside the walk: .cairnignore, the user's index
// (what is tracked), info/exclude, the .gitignore files between the workdir and the
// checkout's root, and the global excludes file. The walk checks the .gitignore files
// inside the workdir itself.
std::string ignore_sources(const fs::path& workdir, git_repository* user) {
  std::vector<fs::path> sources{workdir / ".cairnignore"};
  if (user != nullptr) {
    const fs::path gitdir = git_repository_path(user);
    sources.push_back(gitdir / "index");
    sources.push_back(gitdir / "info" / "exclude");
    std::error_code ec;
    const fs::path root = fs::weakly_canonical(git_repository_workdir(user), ec);
    for (fs::path d = workdir; d != root && d.has_parent_path() && d != d.parent_path();)
      sources.push_back((d = d.parent_path()) / ".gitignore");
    git_config* config = nullptr;
    if (git_repository_config_snapshot(&config, user) == 0) {
      git_buf path = GIT_BUF_INIT;
      if (git_config_get_path(&path, config, "core.excludesfile") == 0)
        sources.emplace_back(path.ptr);
      git_buf_dispose(&path);
      git_config_free(config);
    }
    git_error_clear();
  }
  if (const char* home = std::getenv("HOME"))
    sources.push_back(fs::path(home) / ".config/git/ignore");
  std::string out;
  for (const fs::path& p : sources) {
    struct stat st;
    out += p.string() + "=";
    if (::stat(p.c_str(), &st) == 0) {
      const FileStat f = FileStat::of(st);
      out += std::to_string(f.size) + "," + std::to_string(f.mtime_ns) + "," +
             std::to_string(f.ctime_ns) + "," + std::to_string(f.ino);
    }
    out += ";";
  }
  return sha256_hex(out);
}

Status over_limit(const fs::path& workdir, std::vector<WorkFile> files, uint64_t total,
                  uint64_t limit) {
  std::sort(files.begin(), files.end(),
            [](const WorkFile& a, const WorkFile& b) { return a.st.size > b.st.size; });
  std::string largest;
  for (size_t i = 0; i < files.size() && i < 3; ++i)
    largest += (i ? ", " : "") + files[i].rel + " (" + human_bytes(files[i].st.size) + ")";
  return Status::BadInput("workdir " + workdir.string() + " is " + human_bytes(total) +
                          ", over the " + human_bytes(limit) +
                          " snapshot limit; largest files: " + largest +
                          "; list them in .cairnignore or under data:, or raise "
                          "reproducibility.snapshot_limit_mb");
}

// The trees of the walk, bottom up (a directory's subdirectories come after it in `dirs`),
// each hashed here and written only when code.git lacks it. A directory with no file kept
// below it has no tree, as in git.
Result<git_oid> write_trees(git_odb* odb, git::StoredObjects& stored,
                            const std::vector<WalkDir>& dirs, const std::vector<git_oid>& blobs,
                            const std::vector<WorkFile>& files, std::vector<git_oid>& trees) {
  std::vector<git_oid> oids(dirs.size());
  std::vector<bool> empty(dirs.size(), false);
  std::vector<git::TreeEntry> entries;
  for (size_t i = dirs.size(); i-- > 0;) {
    entries.clear();
    for (const WalkDir::Entry& e : dirs[i].entries) {
      if (e.is_dir) {
        if (!empty[e.index]) entries.push_back({e.name, GIT_FILEMODE_TREE, oids[e.index]});
      } else {
        entries.push_back({e.name, files[e.index].mode, blobs[e.index]});
      }
    }
    empty[i] = entries.empty();
    if (empty[i] && i != 0) continue;
    const std::string content = git::serialize_tree(entries);
    if (git_odb_hash(&oids[i], content.data(), content.size(), GIT_OBJECT_TREE) != 0)
      return git::error("cannot hash a tree");
    if (!stored.contains(oids[i])) {
      if (git_odb_write(&oids[i], odb, content.data(), content.size(), GIT_OBJECT_TREE) != 0)
        return git::error("cannot write a tree");
      stored.add(oids[i]);
    }
    trees.push_back(oids[i]);
  }
  return oids[0];
}

std::optional<UserGitState> user_state(git_repository* user) {
  if (user == nullptr) return std::nullopt;
  UserGitState state;
  if (const char* wd = git_repository_workdir(user)) state.repo_root = wd;
  while (state.repo_root.size() > 1 && state.repo_root.back() == '/') state.repo_root.pop_back();
  git_reference* head = nullptr;
  int rc = git_repository_head(&head, user);
  if (rc == 0) {
    git::Reference ref(head);
    if (const git_oid* oid = git_reference_target(head)) state.head = git::hex(*oid);
    if (git_reference_is_branch(head)) state.branch = git_reference_shorthand(head);
  } else if (rc == GIT_EUNBORNBRANCH) {
    git_reference* symbolic = nullptr;  // HEAD -> refs/heads/main, with no commit yet
    if (git_reference_lookup(&symbolic, user, "HEAD") == 0) {
      git::Reference ref(symbolic);
      if (const char* target = git_reference_symbolic_target(symbolic)) {
        std::string name = target;
        if (name.rfind("refs/heads/", 0) == 0) state.branch = name.substr(11);
      }
    }
  }
  // Read-only: no GIT_STATUS_OPT_UPDATE_INDEX, so the user's index is never rewritten.
  git_status_options so = GIT_STATUS_OPTIONS_INIT;
  so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
  so.flags = GIT_STATUS_OPT_INCLUDE_UNTRACKED | GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
  git_status_list* list = nullptr;
  if (git_status_list_new(&list, user, &so) == 0) {
    git::StatusList owned(list);
    state.dirty = git_status_list_entrycount(list) > 0;
  }
  return state;
}

}  // namespace

Result<CodeRepository> CodeRepository::open(const fs::path& store_root) {
  git::ensure_initialized();
  CodeRepository repo;
  repo.dir_ = store_root / "code.git";
  git_repository* raw = nullptr;
  if (git_repository_open_bare(&raw, repo.dir_.c_str()) == 0) {
    repo.repo_ = raw;
    return repo;
  }
  // Created beside its name and renamed into place: two cairn processes starting on a new
  // store at once would otherwise trip over each other's config.lock.
  static std::atomic<uint64_t> attempt{0};
  const fs::path tmp =
      store_root / ("code.git.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt++));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (git_repository_init(&raw, tmp.c_str(), 1) != 0)
    return git::error("cannot create " + repo.dir_.string());
  git_repository_free(raw);
  raw = nullptr;
  fs::rename(tmp, repo.dir_, ec);
  if (ec) fs::remove_all(tmp, ec);  // another process won the race: use its repository
  if (git_repository_open_bare(&raw, repo.dir_.c_str()) != 0)
    return git::error("cannot open " + repo.dir_.string());
  repo.repo_ = raw;
  return repo;
}

CodeRepository::CodeRepository(CodeRepository&& o) noexcept
    : dir_(std::move(o.dir_)), repo_(std::exchange(o.repo_, nullptr)) {}

CodeRepository& CodeRepository::operator=(CodeRepository&& o) noexcept {
  if (this != &o) {
    if (repo_) git_repository_free(repo_);
    dir_ = std::move(o.dir_);
    repo_ = std::exchange(o.repo_, nullptr);
  }
  return *this;
}

CodeRepository::~CodeRepository() {
  if (repo_) git_repository_free(repo_);
}

Result<CodeSnapshot> CodeRepository::snapshot(const fs::path& workdir_in,
                                              const SnapshotOptions& opts,
                                              const std::string& message) {
  std::error_code ec;
  const fs::path workdir = fs::weakly_canonical(workdir_in, ec);
  if (ec || !fs::is_directory(workdir))
    return Status::BadInput("workdir " + workdir_in.string() + " is not a directory");

  git_repository* user_raw = nullptr;
  git::Repository user;
  // A workdir inside the store (`cairn reproduce`'s checkouts) belongs to no repository of
  // the user's: searching upwards would find the project's, whose rules (and the store's
  // own `*` .gitignore) would leave every file out.
  const fs::path store_root = fs::weakly_canonical(dir_.parent_path(), ec);  // .cairn
  const bool in_store =
      !ec &&
      std::mismatch(store_root.begin(), store_root.end(), workdir.begin(), workdir.end()).first ==
          store_root.end();
  const unsigned open_flags = in_store ? GIT_REPOSITORY_OPEN_NO_SEARCH : 0;
  if (git_repository_open_ext(&user_raw, workdir.c_str(), open_flags, nullptr) == 0) {
    user.reset(user_raw);
    if (git_repository_is_bare(user_raw)) user.reset();
  }
  git_error_clear();
  CodeSnapshot snap;
  snap.git = user_state(user.get());
  auto rules = IgnoreRules::make(dir_, workdir, user.get(), snap.git ? snap.git->repo_root : "");
  if (!rules.ok()) return rules.status();

  const fs::path cache_file = dir_ / "cairn-cache" / sha256_hex(workdir.string());
  StatCache cache = StatCache::load(cache_file);
  const std::string sources = ignore_sources(workdir, user.get());
  KnownPaths known;
  if (!cache.meta().empty() && cache.meta() == sources) known.cache = &cache;
  std::vector<WorkFile> files;
  std::vector<WalkDir> dirs;
  Status st = Walker(workdir, *rules, opts, known).run(files, dirs);
  if (st.ok() && known.rules_changed) {  // a .gitignore changed: every path is checked
    files.clear();
    dirs.clear();
    known = KnownPaths{};
    st = Walker(workdir, *rules, opts, known).run(files, dirs);
  }
  if (!st.ok()) return st;
  cache.set_meta(sources);
  for (const WorkFile& f : files) snap.bytes += f.st.size;
  snap.files = files.size();
  if (snap.bytes > opts.size_limit) return over_limit(workdir, files, snap.bytes, opts.size_limit);

  // Blobs: from the stat cache when a file is unchanged since the last snapshot of this
  // workdir and its blob is still stored; read and stored otherwise.
  git_odb* odb_raw = nullptr;
  if (git_repository_odb(&odb_raw, repo_) != 0) return git::error("cannot open " + dir_.string());
  git::Odb odb(odb_raw);
  git::StoredObjects stored(odb_raw, dir_ / "objects");
  fs::path known_file = cache_file;
  known_file += ".objects";
  stored.load_known(known_file);
  std::vector<git_oid> blobs(files.size());
  std::vector<git::BlobSource> to_write;
  const std::string prefix = workdir.string() + (workdir.string().back() == '/' ? "" : "/");
  for (size_t i = 0; i < files.size(); ++i) {
    auto cached = cache.lookup_view(files[i].rel, files[i].st);
    if (cached && git::parse_oid(*cached, &blobs[i]) && stored.contains(blobs[i])) continue;
    to_write.push_back({prefix + files[i].rel, files[i].mode == GIT_FILEMODE_LINK, &blobs[i]});
  }
  st = git::write_blobs(odb_raw, dir_ / "objects", to_write,
                        std::min(kBlobThreads, std::thread::hardware_concurrency()));
  if (!st.ok()) return st;
  for (size_t i = 0; i < files.size(); ++i) {
    char hex[GIT_OID_HEXSZ];
    git_oid_fmt(hex, &blobs[i]);
    cache.record(files[i].rel, files[i].st, std::string_view(hex, sizeof hex));
  }
  (void)cache.save(cache_file);  // a cache that cannot be written only costs time
  for (const git::BlobSource& b : to_write) stored.add(*b.out);

  std::vector<git_oid> needed;  // by the next snapshot, mostly: every blob and tree
  auto tree_oid = write_trees(odb_raw, stored, dirs, blobs, files, needed);
  if (!tree_oid.ok()) return tree_oid.status();
  git_tree* tree_raw = nullptr;
  if (git_tree_lookup(&tree_raw, repo_, &*tree_oid) != 0) return git::error("cannot read a tree");
  git::Tree tree(tree_raw);
  git_signature* sig_raw = nullptr;
  if (git_signature_now(&sig_raw, "cairn", "cairn@localhost") != 0)
    return git::error("cannot sign the snapshot");
  git::Signature sig(sig_raw);
  git_oid commit;
  if (git_commit_create(&commit, repo_, nullptr, sig_raw, sig_raw, "UTF-8", message.c_str(),
                        tree_raw, 0, nullptr) != 0)
    return git::error("cannot write the snapshot commit");
  // A ref per snapshot keeps it reachable, should anyone ever run `git gc` on code.git.
  const std::string ref_name = "refs/snapshots/" + git::hex(commit);
  git_reference* ref = nullptr;
  const int rc = git_reference_create(&ref, repo_, ref_name.c_str(), &commit, 1, "snapshot");
  // The name is the commit's id, so a concurrent writer of the same name (the same tree and
  // message within the same second) writes exactly this: its lock means "being done".
  if (rc != 0 && rc != GIT_ELOCKED) return git::error("cannot record " + ref_name);
  git_error_clear();
  git_reference_free(ref);
  needed.insert(needed.end(), blobs.begin(), blobs.end());
  stored.save_known(known_file, std::move(needed));
  for (const uint8_t fan : stored.listings()) {
    char sub[3];
    std::snprintf(sub, sizeof sub, "%02x", fan);
    snap.listed_object_dirs.emplace_back(sub);
  }
  snap.commit = git::hex(commit);
  snap.tree = git::hex(*tree_oid);
  return snap;
}

}  // namespace cairn
