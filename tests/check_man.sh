#!/bin/sh
# tests/check_man.sh - the man pages cover the API and render cleanly.
#   1. every weft_* symbol exported by the built libweft.so (nm -D; the
#      archive's global symbols in a --disable-shared build) is named
#      in the NAME section of some page in man/ (so `make install` gives it
#      a page or a .so link, see man/links.sh);
#   2. every page renders with groff -man -ww without a warning.
# Exit 0 pass, 1 fail, 77 skip (no nm, no groff, or the library not built).
srcdir=${srcdir:-.}
man=$srcdir/man
lib=.libs/libweft.so
nmflags=-D
if [ ! -f "$lib" ] && [ -f .libs/libweft.a ]; then
	lib=.libs/libweft.a    # --disable-shared: the archive's global symbols
	nmflags=-g
fi
fail=0

if ! command -v nm >/dev/null 2>&1 || ! command -v groff >/dev/null 2>&1; then
	echo "check_man: SKIP: nm or groff missing (Debian packages binutils, groff-base)"
	exit 77
fi
if [ ! -f "$lib" ]; then
	echo "check_man: SKIP: $lib not built (run make first)"
	exit 77
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# names documented: each page's own name plus every name its NAME line lists
for p in "$man"/*.3; do basename "$p" .3; done > "$tmp/names"
sh "$man/links.sh" "$man"/*.3 | cut -d' ' -f1 >> "$tmp/names"
sort -u "$tmp/names" -o "$tmp/names"

nm $nmflags --defined-only "$lib" | awk '{ sub(/@.*/, "", $3) } $3 ~ /^weft_/ { print $3 }' |
	sort -u > "$tmp/syms"
nsyms=$(wc -l < "$tmp/syms")
if [ "$nsyms" -eq 0 ]; then
	echo "check_man: FAIL: no weft_* symbol exported by $lib"
	exit 1
fi
comm -23 "$tmp/syms" "$tmp/names" > "$tmp/missing"
if [ -s "$tmp/missing" ]; then
	echo "check_man: FAIL: exported but in no man page's NAME section:"
	sed 's/^/  /' "$tmp/missing"
	fail=1
fi

npages=0
for p in "$man"/*.3 "$man"/*.7; do
	npages=$((npages + 1))
	groff -man -ww -z "$p" > "$tmp/warn" 2>&1
	if [ -s "$tmp/warn" ]; then
		echo "check_man: FAIL: $p renders with warnings:"
		sed 's/^/  /' "$tmp/warn"
		fail=1
	fi
done

echo "check_man: $nsyms exported symbols, $npages pages checked"
exit $fail
