#!/usr/bin/env bash
# Every file a comment, a README or a build file cites must exist in the
# repository: a reader who follows a citation must find it. Notes that live only
# with the team (notes/*.md, ARCHITECTURE.md, GPU.md, ...) are not in the
# repository, so citing them is an error too: put the fact into docs/ and cite that.
#
#   cited_paths_test.sh [REPO_ROOT]   check REPO_ROOT (default: this script's repository)
#   cited_paths_test.sh --self-test   check that planted dead citations are found
#
# What is read: the comments of every *.cc *.h *.cu *.c (// and /* */), *.py
# (# and docstrings), *.sh, *.cmake and CMakeLists.txt (#), and the whole text of
# every *.md; tracked files and untracked ones that git does not ignore, except
# this folder (its self-test plants dead citations). What is checked:
#   1. rooted paths: a token that starts with a top-level folder (format/,
#      merge/, docs/, notes/, ...) and ends in a source, doc or build file name,
#      or a folder ("tests/gpu/"), must exist from the repository root: the rule
#      the team's before-stop hook uses, for more file kinds and for folders, and,
#      as there, for file paths in code and strings too, not only in comments;
#   2. other relative paths ("src/findings.cc", "aon/format/records.h") must exist from
#      the citing file's folder, from a component's include/ folder, or from the root;
#   3. bare file names ("allocator.cc", "GPU.md") must be the name of a file in
#      the repository.
# URLs, absolute paths and $VAR/... are not citations. Citations of other
# projects' files (NCCL's src/group.cc) and names that are not citations (a
# user's train.py in an example) are listed, each with its reason, in
# cited_paths_allowed.txt next to this script.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The top-level folders of the design (ARCHITECTURE's table), the ones the hook
# knows, and the team's notes folder, which must never be cited.
kTopFolders='base|format|ipc|config|collector|export|rank_agent|clocksync|merge|launcher|slurm|report|bench|docs|tests|examples|scripts|notes|python|cmake'
kExt='cc|h|hpp|cu|c|py|sh|md|cmake|txt|map|conf'
# A token may not start right after one of these (URLs, $VAR/x, ~/x, /abs/x, a.b/c),
# and must end at the end of the name (a '.' may end the sentence).
kNotAfter='(?<![A-Za-z0-9_./$<>~:@%+=-])'
kEnd='\b(?![/\w-])(?!\.\w)'

# The text of FILE that can cite: comments of code, all of Markdown.
citing_text() {
  local f=$1
  case $f in
    *.md) cat -- "$f" ;;
    *.cc | *.h | *.hpp | *.cu | *.c)
      # Comments only: string and character literals (raw strings too) are skipped.
      perl -0777 -ne '
        while (m{\G(?:(//[^\n]*)|(/\*.*?\*/)|R"([^(\s]*)\(.*?\)\3"|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27|[^/"\x27R]+|.)}gs) {
          print "$1\n" if defined $1;
          print "$2\n" if defined $2;
        }' -- "$f"
      ;;
    *.py)
      # Comments and docstrings.
      perl -0777 -ne '
        while (m{\G(?:(?:^|(?<=\s))(\#[^\n]*)|("""|\x27\x27\x27)(.*?)\2|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27|[^\#"\x27]+|.)}gsm) {
          print "$1\n" if defined $1;
          print "$3\n" if defined $3;
        }' -- "$f"
      ;;
    *) grep -oP '(^|(?<=\s))#.*' -- "$f" || true ;; # shell, CMake: # comments
  esac
}

check() {
  local root=$1 allow=$2
  cd "$root"
  local files
  if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files --cached --others --exclude-standard | sort -u)
  else
    files=$(find . -path ./build -prune -o -path './build-*' -prune -o -type f -print | sed 's#^\./##' | sort)
  fi
  files=$(grep -E '(^|/)CMakeLists\.txt$|\.(cc|h|hpp|cu|c|py|sh|md|cmake)$' <<<"$files" |
    grep -v '^tests/repo/' || true)
  # Folders that hold public headers: "aon/format/records.h" resolves from there.
  local include_dirs
  include_dirs=$(grep -oE '^(.*/)?include/' <<<"$files" | sort -u || true)
  local -A basenames=() allowed=()
  local name
  while IFS= read -r name; do basenames[$name]=1; done < <(sed 's#.*/##' <<<"$files")
  local who what
  if [[ -f $allow ]]; then
    while read -r who what _; do
      [[ -z $who || $who == \#* ]] || allowed["$who $what"]=1
    done <"$allow"
  fi

  local dead=0 f dir token ok base text
  while IFS= read -r f; do
    [[ -f $f ]] || continue
    dir=$(dirname "$f")
    text=$(citing_text "$f")
    # Rooted and relative paths with a file name, and rooted folders.
    while IFS= read -r token; do
      [[ -n $token ]] || continue
      [[ -n ${allowed["$f $token"]:-} || -n ${allowed["* $token"]:-} ]] && continue
      ok=0
      if [[ $token =~ ^($kTopFolders)/ ]]; then
        [[ -e $token ]] && ok=1
      else
        for base in . "$dir" $include_dirs; do
          [[ -e $base/$token ]] && ok=1 && break
        done
      fi
      if ((ok == 0)); then
        echo "$f: cites '$token', which is not in the repository"
        dead=$((dead + 1))
      fi
    done < <({
      grep -oP "$kNotAfter[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/[A-Za-z0-9_.-]+\.($kExt)$kEnd|$kNotAfter($kTopFolders)(/[A-Za-z0-9_.-]+)*/(?![\w.-])" <<<"$text" || true
      # Rooted file paths count in code too, as in the before-stop hook.
      grep -v '^[[:space:]]*#[[:space:]]*include' "$f" |
        grep -oP "$kNotAfter($kTopFolders)(/[A-Za-z0-9_.-]+)*/[A-Za-z0-9_.-]+\.($kExt)$kEnd" || true
    } | sort -u)
    # Bare file names.
    while IFS= read -r token; do
      [[ -n $token ]] || continue
      [[ -n ${allowed["$f $token"]:-} || -n ${allowed["* $token"]:-} ]] && continue
      if [[ -z ${basenames[$token]:-} ]]; then
        echo "$f: cites '$token', which is not in the repository"
        dead=$((dead + 1))
      fi
    done < <(grep -oP "$kNotAfter[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.(cc|h|hpp|cu|c|py|sh|md|cmake)$kEnd" <<<"$text" |
      sort -u || true)
  done <<<"$files"
  if ((dead > 0)); then
    echo "cited_paths_test: $dead dead citation(s). Cite a file of this repository (put a"
    echo "fact from a team note into docs/ in your own words), or, for another project's"
    echo "file, name it in $(basename "$allow") with the reason."
    return 1
  fi
  echo "cited_paths_test: every cited path exists ($(wc -l <<<"$files") files read)"
}

self_test() {
  local tmp
  tmp=$(mktemp -d /tmp/aon-cited-XXXXXX)
  trap 'rm -rf "$tmp"' RETURN
  # The planted citations are spelled through $m, $d and $n (merge, docs, notes) so
  # that this file itself cites nothing dead.
  local m=merge d=docs n=notes
  mkdir -p "$tmp/$m/src" "$tmp/$m/include/aon" "$tmp/$d"
  touch "$tmp/$m/src/ok.cc" "$tmp/$m/include/aon/thing.h" "$tmp/$d/real.md"
  cat >"$tmp/$m/src/a.cc" <<EOF
#include "$n/included.h"
// Good: $m/src/ok.cc, ../src/ok.cc, aon/thing.h, $d/real.md, ok.cc, $d/,
// https://github.com/NVIDIA/nccl/blob/master/src/enqueue.cc, /usr/include/slurm/spank.h,
// \$WORK/tables.md, ~/train.py, external/ext.cc (allowed), v1.5, e.g. this.
const char* kNotAComment = "in-a-string.md", *kRooted = "$n/in-a-string.md";
// Dead: $n/cupti.md, $m/src/gone.cc, allocator.cc, GPU.md, $d/design/,
// src/missing.h, aon/none.h.
EOF
  cat >"$tmp/README.md" <<EOF
See [the format]($d/real.md) and [the design]($d/design.md).
EOF
  cat >"$tmp/$m/README.md" <<'EOF'
The sources: `src/ok.cc`; headers in `include/aon/thing.h`; gone: `src/gone.cc`.
EOF
  printf '# citing file, path, reason\n%s external/ext.cc another project\n' "$m/src/a.cc" \
    >"$tmp/allowed.txt"
  local out rc=0
  out=$(check "$tmp" "$tmp/allowed.txt" 2>&1) || rc=$?
  local expected=(
    "$m/src/a.cc: cites '$n/cupti.md'"
    "$m/src/a.cc: cites '$m/src/gone.cc'"
    "$m/src/a.cc: cites 'allocator.cc'"
    "$m/src/a.cc: cites 'GPU.md'"
    "$m/src/a.cc: cites '$d/design/'"
    "$m/src/a.cc: cites 'src/missing.h'"
    "$m/src/a.cc: cites 'aon/none.h'"
    "$m/src/a.cc: cites '$n/in-a-string.md'"
    "README.md: cites '$d/design.md'"
    "$m/README.md: cites 'src/gone.cc'"
  )
  local fail=0 e
  ((rc != 0)) || { echo "self-test: the check passed a tree with dead citations"; fail=1; }
  for e in "${expected[@]}"; do
    grep -qF -- "$e" <<<"$out" || { echo "self-test: not reported: $e"; fail=1; }
  done
  local reported
  reported=$(grep -c ": cites '" <<<"$out" || true)
  if ((reported != ${#expected[@]})); then
    echo "self-test: ${#expected[@]} dead citations planted, $reported reported:"
    fail=1
  fi
  if ((fail)); then
    echo "$out"
    return 1
  fi
  echo "cited_paths_test --self-test: all ${#expected[@]} planted dead citations found, nothing else"
}

if [[ ${1:-} == --self-test ]]; then
  self_test
else
  check "$(cd "${1:-$here/../..}" && pwd)" "$here/cited_paths_allowed.txt"
fi
