#!/usr/bin/env bash
# Replaces the text between `<!-- MARKER:begin -->` and `<!-- MARKER:end -->` in FILE with the
# contents of BLOCK (the generated tables of docs/lab.md: scripts/lab.sh, lab-matrix.sh).
#
#   scripts/doc-block.sh FILE MARKER BLOCK
set -euo pipefail
file=${1:?usage: doc-block.sh FILE MARKER BLOCK}
marker=${2:?usage: doc-block.sh FILE MARKER BLOCK}
block=${3:?usage: doc-block.sh FILE MARKER BLOCK}
grep -qxF "<!-- $marker:begin -->" "$file" || { echo "doc-block: no $marker markers in $file" >&2; exit 1; }
awk -v block="$block" -v begin="<!-- $marker:begin -->" -v end="<!-- $marker:end -->" '
    $0 == begin { print; while ((getline line < block) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
' "$file" > "$file.new"
mv "$file.new" "$file"
echo "$file updated" >&2
