#!/usr/bin/env bash
# Puts the SPDX license header on every hand-written Go file that lacks it,
# tracked or new (not ignored). Generated files, marked "Code generated ...
# DO NOT EDIT.", are left alone, as the linter's goheader check leaves them.
# Safe to run again: a file whose first lines carry the header is skipped.
#   scripts/license-headers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

header='// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0'

added=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	grep -q '^// Code generated .* DO NOT EDIT\.$' "$f" && continue
	head -n 5 "$f" | grep -q '^// SPDX-License-Identifier:' && continue
	tmp=$(mktemp)
	{ printf '%s\n\n' "$header"; cat "$f"; } >"$tmp"
	cat "$tmp" >"$f" # keeps the file's mode
	rm -f "$tmp"
	added=$((added + 1))
done < <(git ls-files -z --cached --others --exclude-standard -- '*.go')
echo "license header added to $added file(s)"
