#!/usr/bin/env bash
# Rewrites the generated part of docs/trace-format.md (between the GENERATED
# markers) with `aon-inspect --schema` from ./build. Run after changing a record
# table (docs/adding-a-record-kind.md); tests/unit/common/schema_test.cc fails
# until the two agree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
inspect=${AON_INSPECT:-build/bin/aon-inspect}
[[ -x $inspect ]] || { echo "regen-docs: $inspect not built (bash scripts/build.sh)" >&2; exit 1; }
doc=docs/trace-format.md
begin='<!-- BEGIN GENERATED: aon-inspect --schema -->'
end='<!-- END GENERATED -->'
grep -qF "$begin" "$doc" && grep -qF "$end" "$doc" || { echo "regen-docs: markers missing in $doc" >&2; exit 1; }
tables=$(mktemp)
trap 'rm -f "$tables" "$doc.new"' EXIT
"$inspect" --schema > "$tables"
awk -v b="$begin" -v e="$end" -v f="$tables" '
  $0 == b { print; while ((getline line < f) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }' "$doc" > "$doc.new"
mv "$doc.new" "$doc"
echo "regen-docs: $doc updated"
