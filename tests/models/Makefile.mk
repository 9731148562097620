# Promela models of the lock-free protocols, checked with spin by
# tests/check_models.sh (skips, loudly, without spin). See tests/README.
TESTS += tests/check_models.sh
dist_check_SCRIPTS += tests/check_models.sh
EXTRA_DIST += \
	tests/models/park.inc \
	tests/models/idle_park.pml \
	tests/models/idle_claim.pml \
	tests/models/kick_chain.pml \
	tests/models/mailbox.pml \
	tests/models/park_token.pml \
	tests/models/wake_q.pml \
	tests/models/mutex.pml \
	tests/models/mutex_store.pml \
	tests/models/gang_hold.pml \
	tests/models/rwlock_bias.pml \
	tests/models/preload_mutex.pml
# (the only CLEANFILES so far: use += if another fragment sets it first)
CLEANFILES = tests/check_models.stamp
