// The links cairn itself makes inside a store (a `cairn reproduce` checkout's data entries, a
// run directory's), followed to where they lead: what a run directory links to here, and
// what an agent on another machine checks, is the data itself, never a path in this store.
#pragma once

#include <filesystem>

namespace cairn {

// `path` with its parent directories resolved, not its last component (which may be a link).
std::filesystem::path resolve_parents(const std::filesystem::path& path, std::error_code& ec);

// Where `to` (parents resolved) leads once the links inside `store_root` (canonical) are
// followed, one step at a time and only while inside the store: a link of the user's outside
// it (data on another disk) is theirs, and is kept as it is. `to` itself when it is no such
// link.
std::filesystem::path through_store_links(const std::filesystem::path& store_root,
                                          std::filesystem::path to);

}  // namespace cairn
