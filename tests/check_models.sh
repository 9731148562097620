#!/bin/sh
# Model-check weft's lock-free protocols with spin (tests/models/*.pml; each
# model's header says which code it follows and what it asserts).
#
# Every model must verify (exhaustive safety search: no assertion fails, no
# invalid end state, i.e. no thread left blocked for good = no lost
# wakeup), and every mutant (the same model with the protocol's key fence,
# CAS or re-check removed by a -D macro) must fail with the expected kind
# of error, which shows that the model can see the bug it guards against.
#
# Exit: 0 all as expected; 1 a model failed or a mutant passed; 77 (skip,
# said loudly) when spin or a C compiler is missing.
# Environment: SPIN (default spin), CC (default cc), WEFT_MODELS_FORCE=1
# ignores the cache below, WEFT_MODELS_KEEP=1 keeps the work directory.
#
# Cache: a pass is recorded in tests/check_models.stamp (build tree)
# with a hash of the models, this script and the spin version; a rerun
# with the same inputs (CI runs `make check` several times) says so and
# exits 0 without searching again.
# Run time: about 45 s of CPU (43 verifier builds at -O0, which compile
# 4x faster than -O2 and search only ~20% slower; preload_mutex.pml -DMIXED
# is 3.2 M states, mutex_store.pml 3.2 M, mutex.pml 2.4 M).
set -u

srcdir=${srcdir:-$(dirname "$0")/..}
models=$srcdir/tests/models
SPIN=${SPIN:-spin}
CC=${CC:-cc}

if ! command -v "$SPIN" >/dev/null 2>&1; then
	echo "########################################################"
	echo "# SKIP: spin is not installed: the protocol models in   #"
	echo "# tests/models were NOT checked (apt-get install spin). #"
	echo "########################################################"
	exit 77
fi
if ! command -v "$CC" >/dev/null 2>&1; then
	echo "SKIP: no C compiler ($CC) to build spin's verifiers: models NOT checked"
	exit 77
fi

# The runs: model | expect | macros.
# expect: "ok" must verify; otherwise the pan message a mutant must give
# (a grep pattern; mutex_store.pml names the assertion that must fire).
runs() {
	cat <<'LIST'
idle_park.pml|ok|
idle_park.pml|invalid end state|-DMUTANT_NO_FENCE
idle_park.pml|invalid end state|-DMUTANT_NO_RECHECK
idle_claim.pml|ok|
idle_claim.pml|assertion violated|-DMUTANT_NO_CLAIM_CHECK
kick_chain.pml|ok|
kick_chain.pml|invalid end state|-DMUTANT_NO_SETTER_STEP
kick_chain.pml|invalid end state|-DMUTANT_STEP_BEFORE_AWAKE
mailbox.pml|ok|
mailbox.pml|invalid end state|-DMUTANT_SPLIT_TAKE
mailbox.pml|invalid end state|-DMUTANT_STALE_EMPTY
park_token.pml|ok|
park_token.pml|ok|-DUNTIMED
park_token.pml|invalid end state|-DUNTIMED -DMUTANT_NO_PARK_RECHECK
park_token.pml|invalid end state|-DUNTIMED -DMUTANT_TOKEN_STORE
wake_q.pml|ok|
wake_q.pml|assertion violated|-DMUTANT_CANCEL_STORE
wake_q.pml|invalid end state|-DMUTANT_CLAIM_NO_TOKEN
mutex.pml|ok|
mutex.pml|invalid end state|-DMUTANT_BLIND_WAITERS
mutex.pml|invalid end state|-DMUTANT_STORE_UNLOCK -DNO_I1_ASSERT
mutex_store.pml|ok|
mutex_store.pml|ok|-DCOND
mutex_store.pml|assertion violated  !(WAITERS)|-DMUTANT_QUEUE_IN_STORE
mutex_store.pml|invalid end state|-DMUTANT_QUEUE_IN_STORE -DNO_ERASE_ASSERT -DNO_I1_ASSERT
mutex_store.pml|assertion violated  !(WAITERS)|-DMUTANT_WAITER_LEAVES
mutex_store.pml|assertion violated  !(WAITERS)|-DMUTANT_GO_FAST_NO_QLOCK
mutex_store.pml|assertion violated (nst<=1)|-DMUTANT_LEAVE_IGNORED
mutex_store.pml|assertion violated  !(served|-DMUTANT_GO_FAST_NO_POLLERS
mutex_store.pml|assertion violated  !(WAITERS)|-DMUTANT_LEAVE_LATE
mutex_store.pml|assertion violated  !(iswoken)|-DCOND -DMUTANT_REQUEUE_NONOWNER
gang_hold.pml|ok|
gang_hold.pml|invalid end state|-DMUTANT_NO_RECHECK
gang_hold.pml|invalid end state|-DMUTANT_HELD_STORE
rwlock_bias.pml|ok|
rwlock_bias.pml|assertion violated|-DMUTANT_NO_SC
rwlock_bias.pml|assertion violated|-DMUTANT_NO_RECHECK
rwlock_bias.pml|assertion violated|-DMUTANT_GIVEUP_OFF
rwlock_bias.pml|assertion violated|-DMUTANT_RETAG
rwlock_bias.pml|assertion violated|-DMUTANT_CURRENT_ROW
preload_mutex.pml|ok|
preload_mutex.pml|ok|-DMIXED -DNSPUR=0
preload_mutex.pml|invalid end state|-DMUTANT_NO_RECHECK
preload_mutex.pml|invalid end state|-DMUTANT_NO_GIVEUP_CHECK
preload_mutex.pml|invalid end state|-DMUTANT_RELOCK_NO_HANDED
preload_mutex.pml|invalid end state|-DMUTANT_UNDO_NO_WAKE
preload_mutex.pml|invalid end state|-DMIXED -DNSPUR=0 -DMUTANT_NO_MIXED_WAKE
LIST
}

inputs_hash() {
	{
		"$SPIN" -V 2>&1
		cat "$0" "$models"/*.pml "$models"/*.inc
	} | cksum | cut -d' ' -f1
}
stamp=tests/check_models.stamp
hash=$(inputs_hash)
if [ "${WEFT_MODELS_FORCE:-0}" != 1 ] && [ -f "$stamp" ] &&
   [ "$(cat "$stamp")" = "$hash" ]; then
	echo "PASS (cached): the models, this script and spin are unchanged since"
	echo "the last full run in this build tree ($stamp); WEFT_MODELS_FORCE=1 reruns"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/weft-models.XXXXXX") || exit 1
[ "${WEFT_MODELS_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
cp "$models"/*.pml "$models"/*.inc "$work"/ || exit 1

fails=0
n=0
start=$(date +%s)
runs >"$work/list"
while IFS='|' read -r model expect defs; do
	n=$((n + 1))
	dir=$work/run$n
	mkdir "$dir" && cp "$work"/*.pml "$work"/*.inc "$dir"/
	label="$model${defs:+ $defs}"
	# shellcheck disable=SC2086  # defs is a list of -D words
	if ! (cd "$dir" && "$SPIN" $defs -a "$model" >spin.out 2>&1); then
		echo "FAIL  $label: spin could not translate the model"
		cat "$dir/spin.out"
		fails=$((fails + 1))
		continue
	fi
	# Exhaustive safety search (no bitstate, no partial order tricks
	# beyond spin's default reduction); COLLAPSE compresses the state
	# vectors of the largest model; MEMLIM stops a runaway model at 2 GB.
	if ! (cd "$dir" && "$CC" -O0 -w -DSAFETY -DCOLLAPSE -DMEMLIM=2048 \
			-o pan pan.c >cc.out 2>&1); then
		echo "FAIL  $label: the verifier did not compile"
		cat "$dir/cc.out"
		fails=$((fails + 1))
		continue
	fi
	t0=$(date +%s)
	(cd "$dir" && ./pan -m100000 -w22 >pan.out 2>&1)
	t=$(( $(date +%s) - t0 ))
	states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$dir/pan.out" | head -n 1)
	if [ "$expect" = ok ]; then
		if grep -q 'errors: 0' "$dir/pan.out" &&
		   ! grep -Eq 'depth too small|out of memory|memory limit' "$dir/pan.out"; then
			echo "PASS  $label: verified, $states states, ${t}s"
		else
			echo "FAIL  $label: should verify; spin says:"
			grep -E '^pan|errors:|depth too small|memory' "$dir/pan.out"
			if [ -f "$dir/$model.trail" ]; then
				echo "----- counterexample (spin -t -p):"
				# shellcheck disable=SC2086
				(cd "$dir" && "$SPIN" $defs -t -p "$model" | tail -n 80)
			fi
			fails=$((fails + 1))
		fi
	else
		if grep -q "$expect" "$dir/pan.out" && [ -f "$dir/$model.trail" ]; then
			echo "PASS  $label: mutant caught ($expect, $states states)"
		else
			echo "FAIL  $label: mutant not caught as '$expect'; spin says:"
			grep -E '^pan|errors:' "$dir/pan.out"
			fails=$((fails + 1))
		fi
	fi
done <"$work/list"

echo "$n runs, $fails unexpected, $(( $(date +%s) - start )) s"
if [ "$fails" -ne 0 ]; then
	rm -f "$stamp"
	exit 1
fi
{ echo "$hash" >"$stamp"; } 2>/dev/null || :
exit 0
