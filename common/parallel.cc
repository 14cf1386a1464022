#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace cairn {

Status for_each_in_parallel(size_t n, const std::function<Status(size_t)>& fn, size_t max_threads) {
  // More threads than cores only adds contention.
  const size_t threads = std::min<size_t>(
      {n, std::max<size_t>(1, max_threads), std::max(1u, std::thread::hardware_concurrency())});
  std::vector<Status> results(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < n;) results[i] = fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const Status& st : results)
    if (!st.ok()) return st;
  return Status::Ok();
}

}  // namespace cairn
