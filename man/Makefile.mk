# man/: the manual pages, installed by `make install`. Section 3 pages
# cover a family of calls each; install-data-hook writes a ".so" stub for
# every other name a page's NAME section lists (man/links.sh), so that
# `man weft_spawn` shows weft_thread(3).
man3_pages = \
	man/weft_init.3 \
	man/weft_thread.3 \
	man/weft_park.3 \
	man/weft_mutex.3 \
	man/weft_cond.3 \
	man/weft_sem.3 \
	man/weft_rwlock.3 \
	man/weft_barrier.3 \
	man/weft_chan.3 \
	man/weft_io.3 \
	man/weft_offload.3 \
	man/weft_stats.3 \
	man/weft_gang.3
dist_man_MANS = man/weft.7 $(man3_pages)

EXTRA_DIST += man/links.sh

install-data-hook: install-man-links
uninstall-hook: uninstall-man-links

install-man-links:
	$(MKDIR_P) '$(DESTDIR)$(man3dir)'
	pages=; for p in $(man3_pages); do pages="$$pages $(srcdir)/$$p"; done; \
	sh $(srcdir)/man/links.sh $$pages | \
	while read name page; do \
		echo ".so man3/$$page" > '$(DESTDIR)$(man3dir)'/$$name.3 || exit 1; \
	done

uninstall-man-links:
	pages=; for p in $(man3_pages); do pages="$$pages $(srcdir)/$$p"; done; \
	sh $(srcdir)/man/links.sh $$pages | \
	while read name page; do \
		rm -f '$(DESTDIR)$(man3dir)'/$$name.3; \
	done

.PHONY: install-man-links uninstall-man-links
