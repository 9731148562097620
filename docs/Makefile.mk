# docs/: the design, tuning and seed documents, and their pictures. Each
# picture has a graphviz source (docs/*.dot) and its SVG, both in the
# repository so that a reader needs no graphviz; `make docs` rebuilds the
# SVGs (in the source tree) and skips with a message when dot is missing.
docs_pictures = docs/sched-loop.dot docs/wake-path.dot

EXTRA_DIST += docs/design.md docs/tuning.md docs/seeds.md docs/wake-path.md \
	$(docs_pictures) $(docs_pictures:.dot=.svg)
EXTRA_DIST += docs/stacks.md docs/gangs.md

docs:
	@if ! command -v dot >/dev/null 2>&1; then \
		echo "make docs: dot not found (Debian package graphviz): SVGs not rebuilt"; \
		exit 0; \
	fi; \
	for f in $(docs_pictures); do \
		echo "  DOT      $${f%.dot}.svg"; \
		dot -Tsvg $(srcdir)/$$f -o $(srcdir)/$${f%.dot}.svg.tmp && \
		mv $(srcdir)/$${f%.dot}.svg.tmp $(srcdir)/$${f%.dot}.svg || exit 1; \
	done

.PHONY: docs
