// Opening the GPU libraries at run time. cairn never links CUDA, cuBLAS, NVRTC or NCCL
// (the one executable must run where they are absent), so each is found with dlopen and
// its functions bound by name. The handles are never closed: these libraries register
// state with the CUDA runtime that outlives any one use.
#pragma once

#include <dlfcn.h>

#include <initializer_list>

namespace cairn::gpu_lib {

// The first of `names` that dlopen loads; nullptr when none does.
inline void* open_first(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

// fn = the function `name` of `lib`; false when the library lacks it.
template <typename Fn>
bool bind(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

// Binds many functions of one library and remembers the first it lacks, so that a library
// too old for cairn is reported by the entry point it is missing (what `cairn doctor` and
// a trial that cannot use the GPU say), not only as "too old".
class Binder {
 public:
  explicit Binder(void* lib) : lib_(lib) {}
  template <typename Fn>
  void operator()(const char* name, Fn& fn) {
    if (!bind(lib_, name, fn) && !missing_) missing_ = name;
  }
  bool ok() const { return missing_ == nullptr; }
  const char* missing() const { return missing_ ? missing_ : ""; }

 private:
  void* lib_;
  const char* missing_ = nullptr;
};

}  // namespace cairn::gpu_lib
