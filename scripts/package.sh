#!/usr/bin/env bash
# AON's Debian package (packaging/debian.cmake), made by CPack from ./build.
#   bash scripts/package.sh          builds the installed targets in ./build
#                                    (configured by scripts/build.sh) and makes
#                                    build/aon_<version>_<arch>.deb
#   bash scripts/package.sh --check  then checks it: its control fields and
#                                    files; a synthetic 2-rank job run from its
#                                    unpacked tree; and, on a fresh CI machine
#                                    (CI=true, root, apt), installs it with apt
#                                    (its Depends resolved from the archive), runs
#                                    the same job with /usr/bin/aon and removes it.
# Exits non-zero on any failure, naming it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say() { echo "package: $*"; }
fail() { say "FAILED: $*"; exit 1; }

[[ -f build/CMakeCache.txt ]] || fail "build/ is not configured: run scripts/build.sh first"
# Only what the package installs (CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: cpack does
# not build the test suites first).
targets=(aon aon-run aon-ctl aon-collector aon-merge aon-inspect aon-export aon-report
         aon-stats aon-diff aon_agent aon_python aon-synthetic-app)
cmake -S . -B build > /dev/null
known=$(cmake --build build --target help 2>/dev/null | sed -n 's/^\([A-Za-z0-9_.-]*\): .*/\1/p')
# Built where their prerequisites are (Slurm's headers, torch's): CI has both.
optional=()
for t in aon_spank; do
  if grep -qxF "$t" <<< "$known"; then
    targets+=("$t")
  elif [[ ${CI:-} == true ]]; then
    fail "$t is not built here (scripts/install-deps.sh --test installs what it needs)"
  else
    say "$t is not built here: the package leaves it out"
    optional+=("$t")
  fi
done
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" > build/package-build.log 2>&1 ||
  { tail -20 build/package-build.log; fail "building the packaged targets (build/package-build.log)"; }
rm -f build/aon_*.deb
(cd build && cpack -G DEB > package-cpack.log 2>&1) ||
  { tail -20 build/package-cpack.log; fail "cpack (build/package-cpack.log)"; }
deb=$(ls build/aon_*.deb)
say "made $deb ($(du -k "$deb" | cut -f1) KiB)"
[[ ${1:-} == --check ]] || exit 0

# Control fields: our name and the libraries dpkg-shlibdeps found.
depends=$(dpkg-deb -f "$deb" Depends)
for want in "openmpi-bin" "python3-numpy" "python3-h5py" "libhdf5" "libdeflate" "libstdc++6"; do
  [[ $depends == *"$want"* ]] || fail "Depends lacks $want: $depends"
done
say "Depends: $depends"
# Files: every tool, the agent, the SPANK plugin, the Python package.
listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/aon ./usr/bin/aon-run ./usr/bin/aon-merge ./usr/bin/aon-report \
         ./usr/bin/aon-export ./usr/bin/aon-stats ./usr/bin/aon-diff ./usr/bin/aon-inspect \
         ./usr/bin/aon-ctl ./usr/bin/aon-collector ./usr/bin/aon-synthetic-app \
         ./usr/lib/libaon_agent.so ./usr/lib/aon-python/sitecustomize.py \
         ./usr/lib/aon-python/aon/reader.py ./usr/lib/aon-python/aon/_schema.py \
         ./usr/include/aon/capture_api.h; do
  grep -qxF "$f" <<< "$listing" || fail "$deb lacks $f"
done
if [[ " ${optional[*]} " != *" aon_spank "* ]]; then
  grep -qxF ./usr/lib/aon/aon.so <<< "$listing" || fail "$deb lacks the SPANK plugin ./usr/lib/aon/aon.so"
fi
say "files: $(wc -l <<< "$listing") entries, every tool, the agent, the SPANK plugin and the reader"

# A synthetic job with the given `aon` (its agent and reader found beside it).
run_job() {
  local aon=$1 job=$2
  rm -rf "$job"
  if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  "$aon" --version > /dev/null || fail "$aon --version"
  "$aon" run --no-report --source synthetic -o "$job" mpirun -np 2 --oversubscribe \
    "$(dirname "$aon")/aon-synthetic-app" > "$job.log" 2>&1 || { tail -20 "$job.log"; fail "$aon run (log: $job.log)"; }
  [[ -f $job/timeline.h5 ]] || fail "$aon run made no timeline in $job"
  "$aon" stats "$job" -r kernels --top 3 > "$job.stats" 2>&1 || { cat "$job.stats"; fail "$aon stats"; }
  local pydir
  pydir="$(dirname "$aon")/../lib/aon-python"
  PYTHONPATH=$pydir "$python" -c "import aon, sys; t = aon.load(sys.argv[1]); assert len(t.kernels) > 0, 'no kernels'; print(len(t.kernels), 'kernels')" "$job" > "$job.reader" 2>&1 ||
    { cat "$job.reader"; fail "the packaged reader on $job"; }
  say "$aon: job of 2 ranks merged, $(cat "$job.reader") read back by the packaged reader"
}

# The package's Python is Debian's (its Depends: python3, python3-numpy).
python=/usr/bin/python3
[[ -x $python ]] || python=python3
tmp=$(mktemp -d /tmp/aon-package.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/root"
run_job "$tmp/root/usr/bin/aon" "$tmp/job-unpacked"

if [[ ${CI:-} == true && $(id -u) -eq 0 ]] && command -v apt-get > /dev/null; then
  if dpkg-query -W -f='${Status}' aon 2>/dev/null | grep -q "install ok installed"; then
    fail "a package named aon is installed already: not replacing it"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "./$deb" > "$tmp/apt.log" 2>&1 ||
    { tail -20 "$tmp/apt.log"; fail "apt-get install ./$deb"; }
  say "installed with apt: $(dpkg-query -W -f='${Package} ${Version}' aon)"
  status=0
  (run_job /usr/bin/aon "$tmp/job-installed") || status=$?
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -q aon > "$tmp/apt-remove.log" 2>&1 ||
    { tail -5 "$tmp/apt-remove.log"; fail "apt-get purge aon"; }
  ((status == 0)) || fail "the installed package's job"
  say "purged again"
else
  say "not installed on this machine (only on a CI machine: CI=true, root, apt)"
fi
say "ok"
