#!/bin/sh
# libweft-preload.so with jemalloc preloaded in both orders (issue 15):
# jemalloc takes pthread mutexes inside malloc, and the preload must not
# call malloc (or dlsym) on a lock path. A small program compiled here runs
# 16 threads that allocate and free under a shared mutex and cond, under
# LD_PRELOAD="jemalloc weft" and "weft jemalloc". Skips when libjemalloc2
# is absent, without a C compiler, or in a sanitizer build.
set -u
top=${abs_top_builddir:-$(pwd)}
lib=$top/.libs/libweft-preload.so
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
if ldd "$lib" | grep -qE 'lib(asan|tsan|ubsan)'; then
	echo "SKIP: sanitizer build of the preload"; exit 77
fi
je=
for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do
	[ -f "$d/libjemalloc.so.2" ] && { je=$d/libjemalloc.so.2; break; }
done
[ -n "$je" ] || { echo "SKIP: libjemalloc.so.2 not installed (Debian: libjemalloc2)"; exit 77; }
CC_=${CC_FOR_TESTS:-cc}
command -v "$CC_" >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/t.c" <<'CEOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static void *slot;
static long handed, taken;
static void *run(void *p)
{
	unsigned s = (unsigned)(long)p * 2654435761u + 1;
	for (int i = 0; i < 20000; i++) {
		s = s * 1103515245u + 12345u;
		size_t n = 1 + (s >> 8) % 4096;
		char *b = malloc(n);
		memset(b, 1, n);
		pthread_mutex_lock(&m);
		if (slot == NULL) {
			slot = b;
			handed++;
			pthread_cond_signal(&c);
			b = NULL;
		} else if (i & 1) {
			free(slot);
			slot = NULL;
			taken++;
		}
		pthread_mutex_unlock(&m);
		free(b);
	}
	return NULL;
}
int main(void)
{
	pthread_t t[16];
	for (long i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, run, (void *)i);
	for (int i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	free(slot);
	printf("handed %ld taken %ld\n", handed, taken + (slot != NULL));
	return handed != taken + (slot != NULL);
}
CEOF
"$CC_" -O2 -pthread -o "$dir/t" "$dir/t.c" || { echo "FAIL: compile"; exit 1; }
fail=0
for order in "$je $lib" "$lib $je"; do
	if timeout 120 env LD_PRELOAD="$order" WEFT_STATS=1 "$dir/t" >"$dir/out" 2>&1 &&
		grep -q '^  mutex ' "$dir/out"; then
		echo "ok: LD_PRELOAD=\"$order\": $(grep handed "$dir/out")"
	else
		echo "FAIL: LD_PRELOAD=\"$order\""; cat "$dir/out"; fail=1
	fi
done
[ $fail = 0 ] || exit 1
echo "1 passed, 0 failed"
