// Code snapshots over the wire (docs/peers.md "Code and data on a peer"): the sending side
// packs the git objects of a snapshot's tree that the receiver lacks (libgit2's
// packbuilder), the receiving side — an agent — indexes the pack into a bare cache
// repository of its own (libgit2's indexer, which checks every object against its hash)
// and checks the tree out once, refusing trees that would write or point outside the
// checkout.
//
// A snapshot is shipped by its tree, not its commit: two experiments of the same code have
// different commits (their messages and times differ) but the same tree, so the second one
// ships nothing.
//
// Thread-safety: build_code_pack is pure over its arguments. A CodeCache is used by one
// thread at a time; several CodeCaches on one directory must be serialised by the caller
// (the agent holds one lock around its shipping work).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cairn {

struct CodePack {
  std::string bytes;  // a git pack; empty when there is nothing to send
  uint64_t objects = 0;
};

// A pack of the objects reachable from `tree` in the store's code.git (the tree itself, its
// subtrees and blobs; links are blobs) minus every object reachable from `have_trees`:
// trees the receiver holds completely. A have that this repository does not know is
// ignored (it came from another store). NotFound when `tree` is not in code.git.
Result<CodePack> build_code_pack(const std::filesystem::path& store_root, const std::string& tree,
                                 const std::vector<std::string>& have_trees);

// Whether `hex` is a 40-digit lowercase object id (what names a checkout directory).
bool is_object_id(std::string_view hex);

// The agent's cache: `dir/code-cache.git` (bare; objects only, no refs) and one read-only
// checkout per tree in `dir/code/<tree>`, which appears whole (built beside, then renamed)
// or not at all.
class CodeCache {
 public:
  static Result<std::unique_ptr<CodeCache>> open(const std::filesystem::path& dir);
  ~CodeCache();

  std::filesystem::path checkout_dir(const std::string& tree) const;
  bool has_checkout(const std::string& tree) const;
  // The trees checked out here, newest first, at most `max`: what a sender may leave out.
  std::vector<std::string> tips(size_t max) const;

  // A pack arriving in pieces. finish() indexes it into the cache (every object verified
  // against its id, the pack against its checksum); a damaged pack is Corrupt and leaves
  // nothing behind.
  class PackReceiver {
   public:
    virtual ~PackReceiver() = default;
    virtual Status append(std::string_view bytes) = 0;
    virtual Result<uint64_t> finish() = 0;  // the objects it held
  };
  Result<std::unique_ptr<PackReceiver>> receive_pack();

  // Checks `tree` out into checkout_dir(tree) unless it is there. Refused (BadInput, one
  // line naming the path) when an entry's name is empty, ".", "..", holds '/' or NUL, when a
  // link's target is absolute or climbs out of the checkout, or when an entry is of an
  // unknown kind; nothing is written outside the cache's directory, and a refused tree
  // leaves no checkout. Files are 0444 (0555 executable), directories 0555.
  Status checkout(const std::string& tree);

 private:
  CodeCache() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Makes a writable copy of a checkout (what a trial runs in): directories 0755, files 0644
// or 0755, links as they are. `dest` must not exist.
Status copy_checkout(const std::filesystem::path& from, const std::filesystem::path& dest);

}  // namespace cairn
