#!/usr/bin/env bash
# Rewrites the generated parts of the docs (between their GENERATED markers)
# from ./build: docs/trace-format.md with `aon-inspect --schema` (after changing
# a record table: docs/adding-a-record-kind.md; tests/unit/common/schema_test.cc
# fails until the two agree), docs/options.md with `aon-run --options-markdown`
# (after changing an option or variable; tests/unit/common/option_docs_test.cc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
inspect=${AON_INSPECT:-build/bin/aon-inspect}
run=${AON_RUN:-build/bin/aon-run}
for tool in "$inspect" "$run"; do
  [[ -x $tool ]] || { echo "regen-docs: $tool not built (bash scripts/build.sh)" >&2; exit 1; }
done
tables=$(mktemp)
trap 'rm -f "$tables" docs/*.md.new' EXIT

# regenerate DOC MARKER-COMMAND COMMAND...: the lines between DOC's markers
# become the command's output.
regenerate() {
  local doc=$1 marker=$2
  shift 2
  local begin="<!-- BEGIN GENERATED: $marker -->" end='<!-- END GENERATED -->'
  grep -qF "$begin" "$doc" && grep -qF "$end" "$doc" || { echo "regen-docs: markers missing in $doc" >&2; exit 1; }
  "$@" > "$tables"
  awk -v b="$begin" -v e="$end" -v f="$tables" '
    $0 == b { print; while ((getline line < f) > 0) print line; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$doc" > "$doc.new"
  mv "$doc.new" "$doc"
  echo "regen-docs: $doc updated"
}

regenerate docs/trace-format.md "aon-inspect --schema" "$inspect" --schema
regenerate docs/options.md "aon-run --options-markdown" "$run" --options-markdown
