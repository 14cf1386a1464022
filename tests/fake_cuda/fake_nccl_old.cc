// An NCCL too old for cairn's collective, built as libnccl.so.2 into build/fake_nccl_old
// for tests only: it answers ncclGetVersion (2.12.0, before ncclCommInitRankConfig) and has
// none of the other entry points. A PyTorch trial may well use such an NCCL, so cairn
// must still report it found and record its version in an experiment's fingerprint, while
// saying its own collective cannot use it (tests/e2e/test_gpu_probe.py).
extern "C" {

int ncclGetVersion(int* v) {
  *v = 21200;
  return 0;
}

}  // extern "C"
