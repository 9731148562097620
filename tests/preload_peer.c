/* tests/preload_peer: the glibc side of check_preload's process-shared
 * test. Linked without libweft-preload and run without LD_PRELOAD, so every
 * lock call here is glibc's own. Usage: preload_peer FD ROUNDS: maps the
 * shared page at FD (struct below, laid out by check_preload), adds ROUNDS
 * to the counter under the pshared mutex, signals the pshared cond, posts
 * the pshared semaphore, and exits 0. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

struct shared_page {
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	sem_t sem;
	long counter;
	int done;
};

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int fd = atoi(argv[1]);
	long rounds = atol(argv[2]);
	struct shared_page *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return 3;
	for (long i = 0; i < rounds; i++) {
		if (pthread_mutex_lock(&p->mutex))
			return 4;
		p->counter++;
		pthread_mutex_unlock(&p->mutex);
	}
	pthread_mutex_lock(&p->mutex);
	p->done = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mutex);
	if (sem_post(&p->sem))
		return 5;
	return 0;
}
