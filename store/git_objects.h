// Writing a snapshot's git objects directly, without libgit2's index or tree builder: trees
// serialized in git's format and hashed here, blobs hashed and compressed from several
// threads, and a cheap answer to "is this object stored already". Internal to store/.
#pragma once

#include <git2.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/stat_cache.h"

namespace cairn::git {

struct TreeEntry {
  std::string name;
  git_filemode_t mode = GIT_FILEMODE_BLOB;
  git_oid oid{};
};

// The content of a tree object holding `entries` (sorted here into git's order, where a
// subtree sorts as if its name ended in '/'), as `git mktree` would write it.
std::string serialize_tree(std::vector<TreeEntry>& entries);

// Which objects the repository has. Loose objects are found by listing their fan-out
// directory (objects/xx) once, on the first question about it: a readdir per 256
// directories instead of an access() per object. Anything not found loose (packed, or
// borrowed from an alternate) is asked of the odb.
//
// A snapshot can also spare the listing: save_known() records, per fan-out directory, its
// stat data and which of the snapshot's objects it held; load_known() by the next snapshot
// trusts that record while the directory's stat data is unchanged. Any object removed from
// it (by hand, by `git gc`) changes the directory's mtime, so is noticed. The record is
// taken only of a directory last modified before a timestamp the file system itself gave
// (a file created just before): a change within the same timestamp granule as the record
// could otherwise leave the mtime as recorded, as git's "racy" index entries. A directory
// contains() listed, on the same terms, and not written to since, is recorded from that
// listing: each directory is listed once per snapshot, and once more only when the
// snapshot wrote into it after listing it (its listing is then out of date).
class StoredObjects {
 public:
  StoredObjects(git_odb* odb, std::filesystem::path objects_dir)
      : odb_(odb), dir_(std::move(objects_dir)) {}
  bool contains(const git_oid& oid);
  void add(const git_oid& oid);

  // Missing or damaged: nothing is trusted, every directory is listed.
  void load_known(const std::filesystem::path& file);
  // `needed`: the objects the next snapshot will likely ask about again, all of them
  // stored (asked, or written and add()ed). A record that cannot be written only costs time.
  void save_known(const std::filesystem::path& file, std::vector<git_oid> needed);

  // The objects/xx directory (its first byte) of every listing so far, in order: what the
  // record spared is what is absent here (reported by a snapshot, for tests).
  const std::vector<uint8_t>& listings() const { return listings_; }

 private:
  using DirStat = FileStat;  // an objects/xx directory's stat data, compared as a file's
  struct Fan {
    bool listed = false;
    std::vector<git_oid> loose;  // when listed: sorted
    bool recorded = false;       // load_known() had a record of it
    DirStat recorded_stat;
    std::vector<git_oid> known;  // the record's objects, sorted
    bool checked = false;        // its stat data compared with the record's
    bool vouched = false;        // ... and found equal
    bool written = false;        // add() put an object in it
    std::vector<git_oid> added;  // what add() put in it, sorted
    // When listed: its stat data before the listing, and whether the listing can stand as
    // the record (unchanged across it, last modified before listing began, not written
    // to since).
    DirStat listed_stat;
    bool listing_settled = false;
    bool written_since_listing = false;
  };
  Fan& fanout(const git_oid& oid);  // listed on first use
  bool list(unsigned fan, std::vector<git_oid>& out);
  bool stat_dir(unsigned fan, DirStat& out) const;
  git_odb* odb_;
  std::filesystem::path dir_;
  Fan fans_[256];
  int64_t listing_clock_ns_ = -1;  // the file system's time before the first listing
  std::vector<uint8_t> listings_;
};

// A file to store as a blob: its content, or for a symbolic link its target.
struct BlobSource {
  std::string path;  // absolute
  bool symlink = false;
  git_oid* out = nullptr;
};

// Stores every source as a loose blob (one already stored is left as it is), from up to
// `max_threads` threads, each with its own odb handle on `objects_dir`: hashing and zlib
// are the cost of a first snapshot, and each file is independent. Content is stored as
// read, with no filter (a snapshot restores bytes exactly).
Status write_blobs(git_odb* odb, const std::filesystem::path& objects_dir,
                   const std::vector<BlobSource>& sources, unsigned max_threads);

}  // namespace cairn::git
