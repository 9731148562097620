# Gang scheduling (seed 004): BSP and ebizzy-like workloads with GANG on,
# GANG off and a pthread baseline in one binary.
noinst_PROGRAMS += examples/gang
examples_gang_LDADD = $(EX_LDADD)
