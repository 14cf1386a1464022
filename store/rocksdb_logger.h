// RocksDB's diagnostic log (the `LOG` file of a database), written so that a full disk never
// stops cairn. RocksDB's own file logger asserts (and so aborts the process, with the
// assertions Debian's librocksdb.a is built with) when it is asked to log again after a write
// of the LOG file failed: on a full disk every `cairn ls` aborted, and a coordinator could
// abort instead of reporting the write error. These loggers drop a line they cannot write.
#pragma once

#include <rocksdb/env.h>

#include <filesystem>
#include <memory>

namespace cairn {

// A logger that keeps nothing: for secondary instances (readers), whose LOG would be written
// into a scratch directory removed when the reader closes.
std::shared_ptr<rocksdb::Logger> discarding_rocksdb_logger();

// A logger appending to `dir/LOG`, which it renames to `dir/LOG.old` (replacing the previous
// one) when it passes `max_size` bytes. A line that cannot be written is dropped; the logger
// goes on with the next one. Null when `dir/LOG` cannot be opened.
std::shared_ptr<rocksdb::Logger> file_rocksdb_logger(const std::filesystem::path& dir,
                                                     uint64_t max_size);

}  // namespace cairn
