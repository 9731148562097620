#!/bin/sh
# The C++ standard library's locks through libweft-preload.so (issue 15):
# std::mutex, recursive_mutex, timed_mutex, shared_mutex and
# condition_variable::wait_until(steady_clock) (pthread_cond_clockwait on
# CLOCK_MONOTONIC in libstdc++), in an unmodified C++ program compiled here
# and run under LD_PRELOAD. WEFT_STATS=1 proves the calls reached the
# preload. Skips without a C++ compiler or in a sanitizer build (a
# sanitizer-built preload cannot be LD_PRELOADed into a plain program).
set -u
top=${abs_top_builddir:-$(pwd)}
lib=$top/.libs/libweft-preload.so
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
if ldd "$lib" | grep -qE 'lib(asan|tsan|ubsan)'; then
	echo "SKIP: sanitizer build of the preload"; exit 77
fi
CXX=${CXX_FOR_TESTS:-g++}
command -v "$CXX" >/dev/null || { echo "SKIP: no C++ compiler ($CXX)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/t.cc" <<'CXXEOF'
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>
using namespace std::chrono_literals;
static int fails;
#define CHECK(c) do { if (!(c)) { std::printf("FAIL line %d: %s\n", __LINE__, #c); fails++; } } while (0)
int main()
{
	std::mutex m;
	long n = 0;
	std::vector<std::thread> ts;
	for (int i = 0; i < 4; i++)
		ts.emplace_back([&] { for (int k = 0; k < 100000; k++) { std::lock_guard<std::mutex> g(m); n++; } });
	for (auto &t : ts) t.join();
	ts.clear();
	CHECK(n == 400000);

	std::recursive_mutex rm;
	rm.lock(); rm.lock(); CHECK(rm.try_lock()); rm.unlock(); rm.unlock(); rm.unlock();

	std::timed_mutex tm;
	tm.lock();
	std::thread([&] {
		auto t0 = std::chrono::steady_clock::now();
		CHECK(!tm.try_lock_for(30ms));
		CHECK(std::chrono::steady_clock::now() - t0 >= 29ms);
		CHECK(!tm.try_lock_until(std::chrono::system_clock::now() + 20ms));
	}).join();
	tm.unlock();
	CHECK(tm.try_lock_for(10ms));
	tm.unlock();

	std::shared_mutex sm;
	std::atomic<int> inside{0}, maxin{0};
	long a = 0, b = 0;
	for (int i = 0; i < 4; i++)
		ts.emplace_back([&, i] {
			for (int k = 0; k < 20000; k++) {
				if ((k + i) % 5 == 0) {
					std::unique_lock<std::shared_mutex> w(sm);
					a++; b++;
				} else {
					std::shared_lock<std::shared_mutex> r(sm);
					int x = ++inside;
					int mx = maxin.load();
					while (x > mx && !maxin.compare_exchange_weak(mx, x)) {}
					CHECK(a == b);
					--inside;
				}
			}
		});
	for (auto &t : ts) t.join();
	ts.clear();
	CHECK(a == b && a == 16000);

	std::condition_variable cv;
	std::unique_lock<std::mutex> lk(m);
	auto t0 = std::chrono::steady_clock::now();
	CHECK(cv.wait_until(lk, t0 + 30ms) == std::cv_status::timeout);
	CHECK(std::chrono::steady_clock::now() - t0 >= 29ms);
	bool ready = false;
	std::thread waker([&] { std::this_thread::sleep_for(10ms); std::lock_guard<std::mutex> g(m); ready = true; cv.notify_all(); });
	CHECK(cv.wait_until(lk, std::chrono::steady_clock::now() + 10s, [&] { return ready; }));
	lk.unlock();
	waker.join();
	std::printf("cxx %s\n", fails ? "FAIL" : "ok");
	return fails != 0;
}
CXXEOF
"$CXX" -O2 -std=c++17 -pthread -o "$dir/t" "$dir/t.cc" || { echo "FAIL: compile"; exit 1; }
timeout 120 env LD_PRELOAD="$lib" WEFT_STATS=1 "$dir/t" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ $rc = 0 ] || { echo "FAIL: C++ locks under the preload"; exit 1; }
acq=$(awk '$1 == "mutex" { print $2 }' "$dir/out")
cond=$(awk '$1 == "cond" { print $2 }' "$dir/out")
rw=$(awk '$1 == "rwlock" { print $2 }' "$dir/out")
[ "${acq:-0}" -ge 400000 ] && [ "${cond:-0}" -ge 1 ] && [ "${rw:-0}" -ge 1 ] ||
	{ echo "FAIL: the calls did not reach the preload (mutex ${acq:-none}, cond ${cond:-none}, rwlock ${rw:-none})"; exit 1; }
# the same program under glibc, for the record
"$dir/t" || { echo "FAIL: the program fails under glibc"; exit 1; }
echo "1 passed, 0 failed"
