#!/bin/sh
# man/links.sh PAGE... - print "NAME PAGE" for every name that the NAME
# section of a section-3 page lists besides the page's own name. `make
# install` writes a ".so man3/PAGE" stub for each (liburing style), so that
# `man weft_spawn` finds weft_thread(3); tests/check_man.sh uses the same
# list to check that every exported symbol has a page.
for page in "$@"; do
	base=$(basename "$page")
	# the line after ".SH NAME": "name1, name2, ... \- summary"
	sed -n '/^\.SH NAME/{n;p;q;}' "$page" | sed 's/ *\\-.*//' | tr ',' '\n' |
	while read -r name; do
		[ -n "$name" ] && [ "$name.3" != "$base" ] && echo "$name $base"
	done
done
exit 0
