#!/usr/bin/env bash
# Installs what cairn needs to build (Debian 12 packages), builds it, and installs the
# binary, the man page and the shell completions. Safe to run again: every step either
# does nothing or redoes only what changed.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: ./install.sh [--prefix DIR] [--jobs N] [--no-deps] [--test]
       ./install.sh --runtime [--binary FILE] [--prefix DIR] [--no-deps]

Install the build dependencies (Debian packages), build cairn into build/, and install
  PREFIX/bin/cairn (stripped: build/cairn keeps its debug information)
  PREFIX/share/man/man1/cairn.1
  PREFIX/share/bash-completion/completions/cairn
  PREFIX/share/zsh/site-functions/_cairn
  PREFIX/share/fish/vendor_completions.d/cairn.fish

Options:
  --prefix DIR  where to install (default: /usr/local)
  --jobs N      parallel compile jobs (default: the number of CPUs, fewer on machines
                short of memory)
  --no-deps     do not install Debian packages (the machine is already set up)
  --test        also install the test dependencies (PyTorch, scikit-learn, NumPy,
                zsh, fish, and clang with libFuzzer),
                build the tests and run them with ctest; installs only when --prefix
                is given as well
  --runtime     set up a machine that only runs cairn (a peer, say): install the
                packages the binary loads (no build tools) and install a cairn built
                elsewhere, with its man page and completions; nothing is built
  --binary FILE with --runtime: the cairn to install (default: build/cairn)
  -h, --help    print this help and exit
EOF
}

say() { printf '==> %s\n' "$*"; }
die() {
  printf 'install.sh: error: %s\n' "$*" >&2
  exit 1
}
usage_error() {
  printf 'install.sh: error: %s (see ./install.sh --help)\n' "$*" >&2
  exit 2
}

# Packages the build needs. The static archives that CMakeLists.txt links come from the
# -dev packages: libgit2.a needs mbedtls, http_parser, ssh2, pcre2 and zlib; RocksDB needs
# snappy, lz4, zstd, bz2 and zlib; the static OpenBLAS holds Fortran LAPACK objects, so
# it needs libgfortran.a (libgfortran-12-dev) and libquadmath.a (with g++).
BUILD_PACKAGES=(
  cmake g++ make pkg-config ccache git ca-certificates
  libcli11-dev librocksdb-dev libgit2-dev libcurl4-openssl-dev libyaml-cpp-dev
  nlohmann-json3-dev libgloo-dev libssl-dev doctest-dev libopenblas-dev libgfortran-12-dev
  liblz4-dev libzstd-dev libsnappy-dev libbz2-dev zlib1g-dev
  libmbedtls-dev libhttp-parser-dev libssh2-1-dev libpcre2-dev
  python3 man-db
)
# End-to-end tests run real PyTorch and scikit-learn trials with Debian's python3, and
# load the zsh and fish completions in those shells; clang and its libFuzzer runtime build
# the fuzzers (tests/fuzz/); iproute2 (`ip netns`) is for the peer tests that put agents in
# network namespaces; headless chromium opens `cairn report`'s page (tests/e2e/test_report.py);
# pyflakes3 lints the Python files (ctest lint_python).
# What the installed binary loads at run time (see docs/install.md): Debian ships Gloo as a
# shared library only, and libgloo0 brings hiredis, ibverbs and libnl; libstdc++ stays shared
# (CMakeLists.txt says why); so do libssl/libcrypto (libssl3), the copy libcurl loads too
# (docs/peers.md), and libcurl itself (libcurl4: webhooks, docs/config.md).
RUNTIME_PACKAGES=(libgloo0 libstdc++6 libssl3 libcurl4)
TEST_PACKAGES=(python3-torch python3-sklearn python3-numpy zsh fish clang libclang-rt-14-dev iproute2
  chromium pyflakes3)

PREFIX=/usr/local
PREFIX_GIVEN=0
JOBS=""
WITH_DEPS=1
RUN_TESTS=0
RUNTIME_ONLY=0
BINARY=""

parse_args() {
  while (($# > 0)); do
    case "$1" in
      --prefix)
        (($# >= 2)) || usage_error "--prefix needs a directory"
        PREFIX=$2
        PREFIX_GIVEN=1
        shift 2
        ;;
      --prefix=*)
        PREFIX=${1#--prefix=}
        PREFIX_GIVEN=1
        shift
        ;;
      --jobs | -j)
        (($# >= 2)) || usage_error "$1 needs a number"
        JOBS=$2
        shift 2
        ;;
      --jobs=*)
        JOBS=${1#--jobs=}
        shift
        ;;
      --no-deps) WITH_DEPS=0 && shift ;;
      --test) RUN_TESTS=1 && shift ;;
      --runtime) RUNTIME_ONLY=1 && shift ;;
      --binary)
        (($# >= 2)) || usage_error "--binary needs a file"
        BINARY=$2
        shift 2
        ;;
      --binary=*)
        BINARY=${1#--binary=}
        shift
        ;;
      -h | --help) usage && exit 0 ;;
      *) usage_error "unknown argument: $1" ;;
    esac
  done
  [[ -n $PREFIX ]] || usage_error "--prefix needs a directory"
  if ((RUNTIME_ONLY && RUN_TESTS)); then usage_error "--runtime and --test exclude each other"; fi
  if [[ -n $BINARY ]] && ((!RUNTIME_ONLY)); then usage_error "--binary goes with --runtime"; fi
  if [[ -n $BINARY && $BINARY != /* ]]; then BINARY="$PWD/$BINARY"; fi
  if [[ -n $JOBS && ! $JOBS =~ ^[1-9][0-9]*$ ]]; then
    usage_error "--jobs needs a positive number, got '$JOBS'"
  fi
  # Relative prefixes are taken from where the user stands, not from the repository.
  [[ $PREFIX == /* ]] || PREFIX="$PWD/$PREFIX"
}

# Prints the command prefix that gives root ("" when already root); fails when there is
# no way to become root.
root_runner() {
  if ((EUID == 0)); then
    echo ""
  elif command -v sudo >/dev/null 2>&1; then
    echo "sudo"
  else
    die "$1 needs root: run as root or install sudo${2:+ ($2)}"
  fi
}

missing_packages() {
  local pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null | grep -qx installed; then
      echo "$pkg"
    fi
  done
}

install_packages() {
  local packages=("${BUILD_PACKAGES[@]}")
  ((RUN_TESTS)) && packages+=("${TEST_PACKAGES[@]}")
  ((RUNTIME_ONLY)) && packages=("${RUNTIME_PACKAGES[@]}")
  command -v apt-get >/dev/null 2>&1 ||
    die "apt-get not found: install.sh installs Debian packages; on another system install the packages it lists and run it with --no-deps"

  local missing
  mapfile -t missing < <(missing_packages "${packages[@]}")
  if ((${#missing[@]} == 0)); then
    say "all ${#packages[@]} packages already installed"
    return
  fi
  say "installing ${missing[*]}"
  local root
  root=$(root_runner "installing packages" "or use --no-deps on a machine that has them")
  $root env DEBIAN_FRONTEND=noninteractive apt-get update
  $root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# One compile job per CPU, but no more than one per GiB of available memory: a C++20
# translation unit that includes RocksDB and CLI11 headers takes most of a gigabyte.
default_jobs() {
  local cpus mem_kib
  cpus=$(nproc 2>/dev/null || echo 1)
  mem_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || true)
  if [[ -n $mem_kib ]] && ((mem_kib / 1048576 < cpus)); then
    cpus=$((mem_kib / 1048576))
  fi
  echo $((cpus > 0 ? cpus : 1))
}

build() {
  local jobs=${JOBS:-$(default_jobs)}
  say "configuring build/"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ||
    die "cmake could not configure build/ (see the messages above)"
  local targets=(--target cairn) what="cairn"
  ((RUN_TESTS)) && targets=() && what="cairn and its tests"
  say "building $what with $jobs jobs"
  cmake --build build -j "$jobs" "${targets[@]}" || die "the build failed (see the messages above)"
  [[ -x build/cairn ]] || die "the build finished without producing build/cairn"
}

# The nearest existing directory at or above $1: whether we can write there decides
# whether installing needs root.
existing_ancestor() {
  local dir=$1
  while [[ ! -d $dir ]]; do dir=$(dirname "$dir"); done
  echo "$dir"
}

# Installs $1 (default build/cairn), stripped, with the man page and completions.
install_files() {
  local binary=${1:-build/cairn} root=""
  if [[ ! -w $(existing_ancestor "$PREFIX") ]]; then
    root=$(root_runner "installing into $PREFIX" "or choose a writable --prefix")
  fi
  say "installing into $PREFIX"
  local share=$PREFIX/share
  # Stripped: the debug information is most of build/cairn's ~200 MB; build/ keeps it. A
  # machine set up with --runtime may have no binutils: then the copy is installed as it is.
  local strip=(-s)
  if ! command -v strip >/dev/null 2>&1; then
    strip=()
    say "note: strip (binutils) not found: installing $binary as it is"
  fi
  $root install -D -m 755 "${strip[@]}" "$binary" "$PREFIX/bin/cairn"
  $root install -D -m 644 man/cairn.1 "$share/man/man1/cairn.1"
  $root install -D -m 644 completions/cairn.bash "$share/bash-completion/completions/cairn"
  $root install -D -m 644 completions/_cairn "$share/zsh/site-functions/_cairn"
  $root install -D -m 644 completions/cairn.fish "$share/fish/vendor_completions.d/cairn.fish"
  say "installed $PREFIX/bin/cairn ($("$PREFIX/bin/cairn" --version 2>/dev/null || echo 'version unknown'))"
  case ":$PATH:" in
    *":$PREFIX/bin:"*) ;;
    *) say "note: $PREFIX/bin is not on PATH; add it, or run $PREFIX/bin/cairn" ;;
  esac
}

run_tests() {
  say "running the test suite"
  ctest --test-dir build --output-on-failure -j2 || die "some tests failed (see the report above)"
}

main() {
  parse_args "$@"
  cd "$(dirname "${BASH_SOURCE[0]}")"
  if ((RUNTIME_ONLY)); then
    local binary=${BINARY:-build/cairn}
    [[ -f $binary ]] || die "no cairn binary at $binary: build one (./install.sh) or give --binary FILE"
    if ((WITH_DEPS)); then install_packages; else say "skipping Debian packages (--no-deps)"; fi
    install_files "$binary"
    say "done"
    return
  fi
  if ((WITH_DEPS)); then
    install_packages
  else
    say "skipping Debian packages (--no-deps)"
  fi
  build
  if ((!RUN_TESTS || PREFIX_GIVEN)); then
    install_files
  else
    say "not installing: --test installs only when --prefix is given"
  fi
  if ((RUN_TESTS)); then
    run_tests
  fi
  say "done"
}

# Sourced (by a test), only define the functions.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
