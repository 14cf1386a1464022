#!/usr/bin/env bash
# The GPU checks of issue 21, run on a machine with an NVIDIA GPU, CUDA and a CUDA build of
# PyTorch, from the repository root, after tests/gpu/bundle.sh packed .gpu/bundle.tar.gz:
#
#   tests/gpu/device_checks.sh OUT_DIR [SECONDS [STEPS]]
#
# STEPS (default: all) is a comma-separated list of the steps below to run: unit_gpu,
# unit_all, e2e_builtin_mlp_gpu, bench, e2e_builtin_mlp, e2e_gpu_slots, e2e_gpu_probe,
# quickstart, profile.
#
# Writes into OUT_DIR: summary.txt (one line per step with its exit status), env.txt (the
# GPU, the libraries cairn found, `cairn version`/`doctor`), unit.txt (the GPU unit tests:
# kernels against the CPU, cuBLAS, NVRTC, the kernel cache, NCCL with one rank, builtin:mlp
# over NCCL), unit_all.txt (the whole unit suite on a machine with a GPU), e2e.txt (the GPU
# end-to-end tests through `cairn run`), quickstart.txt (examples/quickstart.yaml on the GPU
# against its own setting, the CPU on every core), bench.txt (bench/mlp_gpu_bench.py) and
# profile.txt (where a builtin:mlp epoch spends its GPU time). Every step has a time limit
# and the whole run stays under SECONDS (default 400).
set -uo pipefail
out=${1:?usage: tests/gpu/device_checks.sh OUT_DIR [SECONDS]}
budget=${2:-400}
steps=,${3:-all},
root=$(pwd)
start=$SECONDS
mkdir -p "$out"

# --- the bundle, and only the libraries this machine lacks on the library path ---
work=/tmp/cairn-gpu
rm -rf "$work" && mkdir -p "$work"
tar -C "$work" -xzf .gpu/bundle.tar.gz
B=$work/.gpu
mkdir -p "$B/need"
# Where the GPU machine keeps the CUDA libraries cairn opens (gpu/cuda_driver.cc and friends
# look them up by soname, then in /usr/local/cuda/lib64).
gpu_dirs=""
{
  echo "== GPU libraries"
  for lib in libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libnccl.so.2; do
    if ldconfig -p | grep -q "^[[:space:]]*$lib "; then
      echo "$lib: $(ldconfig -p | grep "^[[:space:]]*$lib " | head -1 | sed 's/.*=> //')"
    else
      found=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/local/nvidia /usr/lib \
        /opt -name "$lib" 2>/dev/null | head -1)
      echo "$lib: ${found:-NOT FOUND} (not in ldconfig)"
      [[ -n $found ]] && gpu_dirs="$gpu_dirs:$(dirname "$found")"
    fi
  done
} >"$out/env.txt" 2>&1
export LD_LIBRARY_PATH="$B/need${gpu_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for _ in 1 2 3 4 5; do
  missing=$(ldd "$B/bin/cairn" "$B/bin/cairn_unit_tests" | awk '/not found/ {print $1}' | sort -u)
  [[ -z $missing ]] && break
  for m in $missing; do
    if [[ -e $B/lib/$m ]]; then ln -sf "$B/lib/$m" "$B/need/$m"; else echo "missing from the bundle: $m" >>"$out/env.txt"; fi
  done
done
# Debian's python3 runs the tests and the trials (tests/e2e/cairn_testlib.py); here the
# python3 that has CUDA PyTorch stands in for it.
py=$(command -v python3)
if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  [[ -e /usr/bin/python3 && ! -e /usr/bin/python3.system ]] && mv /usr/bin/python3 /usr/bin/python3.system
  printf '#!/bin/sh\nexec %s "$@"\n' "$py" >/usr/bin/python3 && chmod +x /usr/bin/python3
fi
export CAIRN_BIN=$B/bin/cairn CAIRN_SOURCE_DIR=$root PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export PATH=$B/bin:$PATH
{
  echo "== bundled libraries used: $(ls "$B/need" | tr '\n' ' ')"
  echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
  echo "== python3: $py; $(/usr/bin/python3 -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>&1)"
  echo "== cairn version --json"; cairn version --json
  echo "== cairn doctor"; cairn doctor
  echo "== nsys: $(command -v nsys || echo none); ncu: $(command -v ncu || echo none)"
} >>"$out/env.txt" 2>&1

# step NAME LIMIT FILE COMMAND...: runs COMMAND for at most LIMIT seconds (less if the
# budget is nearly spent), appending to FILE; records the exit status.
step() {
  local name=$1 limit=$2 file=$3
  shift 3
  [[ $steps == ,all, || $steps == *,$name,* ]] || return 0
  local left=$((budget - (SECONDS - start) - 10))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "$name: not run (out of time)" >>"$out/summary.txt"
    return
  fi
  echo "===== $name (limit ${limit}s)" >>"$out/$file"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >>"$out/$file" 2>&1
  local rc=$?
  echo "$name: rc=$rc in $((SECONDS - t0))s" >>"$out/summary.txt"
}

# The whole unit suite, alongside the GPU steps (it is mostly CPU work). Its fingerprint
# test of "Debian's python3" fails here: /usr/bin/python3 is the shell wrapper above.
unit_all=""
if [[ $steps == ,all, || $steps == *,unit_all,* ]]; then
  (timeout -k 5 200 "$B/bin/cairn_unit_tests" '-tce=*[needs *' >"$out/unit_all.txt" 2>&1
    echo "unit_all (background): rc=$?" >>"$out/summary.txt") &
  unit_all=$!
fi

# The GPU unit tests with every message (doctest prints MESSAGE only with -s); the passing
# assertions are left out of the file.
gpu_unit() {
  "$B/bin/cairn_unit_tests" -s '-tc=*[needs gpu]*,*[needs nvrtc]*,*[needs nccl]*,*kernel cache*,*device auto*' \
    >/tmp/unit_gpu.txt 2>&1
  local rc=$?
  grep -vE ': SUCCESS: |^$|^  (CHECK|REQUIRE)|^values: |^  [A-Z_]+\(|^=+$' /tmp/unit_gpu.txt
  return $rc
}
export -f gpu_unit
export B
step unit_gpu 120 unit.txt bash -c gpu_unit
# The tests that need a GPU and the one that hides it (tests/README.md, "Skips").
step e2e_builtin_mlp_gpu 150 e2e.txt env CAIRN_TEST_NEEDS=-,gpu /usr/bin/python3 tests/e2e/test_builtin_mlp_gpu.py -v
step bench 150 bench.txt /usr/bin/python3 bench/mlp_gpu_bench.py --cairn "$CAIRN_BIN" --reps 3
# builtin:mlp's own end-to-end tests: the quickstart (which pins the CPU) and bit-exact resume
# after kill -9 with the default device, auto: the GPU here.
step e2e_builtin_mlp 120 e2e.txt /usr/bin/python3 tests/e2e/test_builtin_mlp.py -v
step e2e_gpu_slots 60 e2e.txt /usr/bin/python3 tests/e2e/test_gpu_slots.py -v
step e2e_gpu_probe 60 e2e.txt /usr/bin/python3 tests/e2e/test_gpu_probe.py -v
# The quickstart on the GPU (device and slots auto: one slot per GPU) against the quickstart
# as it is written (the CPU, one slot per core): why it pins the CPU.
quickstart() {
  local dir
  for mode in gpu as-written; do
    dir=$(mktemp -d) && cp "$CAIRN_SOURCE_DIR/examples/quickstart.yaml" "$dir/"
    local extra=()
    [[ $mode == gpu ]] && extra=(--set hyperparameters.device=auto --set resources.devices=auto)
    local t0=$(date +%s%N)
    (cd "$dir" && cairn run quickstart.yaml "${extra[@]}" >run.log 2>&1) || echo "$mode: run failed"
    local t1=$(date +%s%N)
    echo "quickstart $mode: $(((t1 - t0) / 1000000)) ms wall"
    grep -m1 "device " "$dir/run.log"
    (cd "$dir" && cairn show 1 | head -12)
    rm -rf "$dir"
  done
}
export -f quickstart
step quickstart 150 quickstart.txt bash -c quickstart
# Nsight Compute's per-kernel times (nsys, where a machine has it, is not used: on these
# machines it could not make a report).
step profile 60 profile.txt /usr/bin/python3 bench/mlp_gpu_profile.py --cairn "$CAIRN_BIN"
[[ -n $unit_all ]] && wait "$unit_all"
echo "total: $((SECONDS - start))s" >>"$out/summary.txt"
