#!/bin/sh
# tests/check_man.sh - the man pages cover the API and render cleanly.
#   1. every weft_* symbol exported by the built libweft.so (nm -D; the
#      archive's global symbols in a --disable-shared build) is named
#      in the NAME section of some page in man/ (so `make install` gives it
#      a page or a .so link, see man/links.sh);
#   2. every page renders with groff -man -ww without a warning;
#   3. every feature switch of runtime/features.def has an entry in weft(7)
#      and a section in docs/tuning.md, and every WEFT_* environment
#      variable the library code reads (a "WEFT_..." string in runtime/ and
#      sync/) is named in both.
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

nfeat=0
for f in $(sed -n 's/^WFT_FEAT(\([A-Z_0-9]*\),.*/\1/p' "$srcdir/runtime/features.def"); do
	nfeat=$((nfeat + 1))
	awk '/^\.SH FEATURE SWITCHES/, /^\.SH FILES/' "$man/weft.7" | grep -qx "\.B $f" ||
		{ echo "check_man: FAIL: feature switch $f has no entry in man/weft.7 FEATURE SWITCHES"; fail=1; }
	grep -q "^### $f\( \|\$\)" "$srcdir/docs/tuning.md" ||
		{ echo "check_man: FAIL: feature switch $f has no section in docs/tuning.md"; fail=1; }
done
nenv=0
for v in $(cat "$srcdir"/runtime/*.c "$srcdir"/sync/*.c "$srcdir"/sync/preload/*.c |
	grep -o '"WEFT_[A-Z_0-9]*"' | tr -d '"' | sort -u); do
	nenv=$((nenv + 1))
	grep -qw "$v" "$man/weft.7" || { echo "check_man: FAIL: $v is read but not in man/weft.7"; fail=1; }
	grep -qw "$v" "$srcdir/docs/tuning.md" || { echo "check_man: FAIL: $v is read but not in docs/tuning.md"; fail=1; }
done

echo "check_man: $nsyms exported symbols, $npages pages checked, $nfeat switches, $nenv variables"
exit $fail
