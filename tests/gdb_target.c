/*
 * tests/gdb_target.c - the program tests/check_gdb.sh debugs: a light
 * thread named "gdb-parked" parks in gdb_parked_here() (on a semaphore),
 * then the main thread calls gdb_stop_here(), where gdb stops.
 */
#include <stdio.h>
#include <unistd.h>
#include <weft.h>

static weft_sem_t sem;

__attribute__((noinline)) void gdb_stop_here(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void gdb_parked_here(void)
{
	weft_sem_wait(&sem);
	__asm__ volatile("" ::: "memory");
}

static void *parked(void *arg)
{
	(void)arg;
	gdb_parked_here();
	return NULL;
}

int main(void)
{
	weft_attr_t a;
	weft_thread_t t;
	weft_stats_t st;

	if (weft_init(NULL) || weft_sem_init(&sem, 0))
		return 1;
	weft_attr_init(&a);
	a.name = "gdb-parked";
	if (weft_spawn(&t, parked, NULL, &a))
		return 1;
	for (int i = 0; i < 5000; i++) {
		weft_stats_get(&st);
		if (st.thread_parks > 0)
			break;
		usleep(1000);
	}
	gdb_stop_here();
	weft_sem_post(&sem);
	weft_join(t, NULL);
	weft_shutdown();
	puts("gdb_target: done");
	return 0;
}
