/* What the library knows about the program's MPI handles: communicators
 * (name, world ranks, sequence numbers), datatypes (name, size) and the
 * requests of non-blocking calls not yet completed.
 *
 * Communicators and datatypes are looked up on every call and change
 * rarely: their tables are open-addressed arrays read without a lock
 * (a key is published after its value), changed under a mutex, and never
 * freed while the process runs (a table that grows keeps the old one,
 * and a communicator's description outlives its handle), so a reader
 * never sees freed memory. Requests come and go with the calls: their
 * table is changed on every non-blocking call, under a spin lock only
 * when the program asked for MPI_THREAD_MULTIPLE.
 */
#include "cp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY ((uintptr_t)0)
#define TOMB (~(uintptr_t)0)

static inline size_t hash(uintptr_t k, size_t cap)
{
	return (size_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

#define KEY(h) ((uintptr_t)(h))

/* A lock-free-read table of handles to 64-bit values. */
struct table {
	size_t cap, used; /* used counts tombstones too */
	_Atomic uintptr_t *keys;
	_Atomic uint64_t *vals;
};

static pthread_mutex_t tables_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct table *) comm_tab, type_tab;

static struct table *table_new(size_t cap)
{
	struct table *t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	t->cap = cap;
	t->keys = calloc(cap, sizeof *t->keys);
	t->vals = calloc(cap, sizeof *t->vals);
	if (t->keys == NULL || t->vals == NULL) {
		free(t->keys);
		free(t->vals);
		free(t);
		return NULL;
	}
	return t;
}

static int table_get(_Atomic(struct table *) *tp, uintptr_t k, uint64_t *v)
{
	struct table *t = atomic_load_explicit(tp, memory_order_acquire);
	if (t == NULL)
		return 0;
	for (size_t i = hash(k, t->cap), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
		uintptr_t got = atomic_load_explicit(&t->keys[i], memory_order_acquire);
		if (got == k) {
			*v = atomic_load_explicit(&t->vals[i], memory_order_relaxed);
			return 1;
		}
		if (got == EMPTY)
			return 0;
	}
	return 0;
}

/* table_put sets k's value; the caller holds tables_mu. */
static int table_put(_Atomic(struct table *) *tp, uintptr_t k, uint64_t v)
{
	struct table *t = atomic_load_explicit(tp, memory_order_relaxed);
	if (t == NULL || 2 * (t->used + 1) > t->cap) {
		struct table *g = table_new(t ? 2 * t->cap : 256);
		if (g == NULL)
			return -1;
		for (size_t i = 0; t != NULL && i < t->cap; i++) {
			uintptr_t key = atomic_load(&t->keys[i]);
			if (key == EMPTY || key == TOMB)
				continue;
			size_t j = hash(key, g->cap);
			while (atomic_load(&g->keys[j]) != EMPTY)
				j = (j + 1) & (g->cap - 1);
			atomic_store(&g->vals[j], atomic_load(&t->vals[i]));
			atomic_store(&g->keys[j], key);
			g->used++;
		}
		/* The old table stays: a reader may be in it. */
		atomic_store_explicit(tp, g, memory_order_release);
		t = g;
	}
	size_t i = hash(k, t->cap);
	for (;;) {
		uintptr_t got = atomic_load(&t->keys[i]);
		if (got == k || got == EMPTY) {
			atomic_store_explicit(&t->vals[i], v, memory_order_relaxed);
			if (got == EMPTY) {
				t->used++;
				atomic_store_explicit(&t->keys[i], k, memory_order_release);
			}
			return 0;
		}
		i = (i + 1) & (t->cap - 1);
	}
}

static void table_del(_Atomic(struct table *) *tp, uintptr_t k)
{
	struct table *t = atomic_load_explicit(tp, memory_order_relaxed);
	if (t == NULL)
		return;
	for (size_t i = hash(k, t->cap), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
		uintptr_t got = atomic_load(&t->keys[i]);
		if (got == k) {
			atomic_store(&t->keys[i], TOMB);
			return;
		}
		if (got == EMPTY)
			return;
	}
}

/* ---- communicators ---- */

struct cp_comm cp_world;
static int lazy_comms; /* communicators met without seeing their creation */

static int describe(struct cp_comm *d, MPI_Comm c)
{
	int inter = 0;
	PMPI_Comm_test_inter(c, &inter);
	MPI_Group g, wg;
	if (PMPI_Comm_rank(c, &d->rank) != MPI_SUCCESS)
		return -1;
	if (inter) {
		PMPI_Comm_remote_size(c, &d->size);
		PMPI_Comm_remote_group(c, &g);
	} else {
		PMPI_Comm_size(c, &d->size);
		PMPI_Comm_group(c, &g);
	}
	d->inter = inter;
	d->world = malloc(sizeof(int) * (size_t)(d->size > 0 ? d->size : 1));
	int *in = malloc(sizeof(int) * (size_t)(d->size > 0 ? d->size : 1));
	if (d->world == NULL || in == NULL) {
		free(in);
		PMPI_Group_free(&g);
		return -1;
	}
	for (int i = 0; i < d->size; i++)
		in[i] = i;
	PMPI_Comm_group(MPI_COMM_WORLD, &wg);
	PMPI_Group_translate_ranks(g, d->size, in, wg, d->world);
	for (int i = 0; i < d->size; i++)
		if (d->world[i] == MPI_UNDEFINED)
			d->world[i] = -1;
	PMPI_Group_free(&g);
	PMPI_Group_free(&wg);
	free(in);
	return 0;
}

/* add registers c under name, followed by ":" and its lowest world rank
 * if lowest is set (the caller holds tables_mu). */
static struct cp_comm *add(MPI_Comm c, const char *name, int lowest)
{
	struct cp_comm *d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->key = KEY(c);
	size_t n = strlen(name) + 16;
	d->name = malloc(n);
	if (d->name == NULL || describe(d, c)) {
		free(d->name);
		free(d);
		return NULL;
	}
	int low = -1;
	for (int i = 0; i < d->size; i++)
		if (d->world[i] >= 0 && (low < 0 || d->world[i] < low))
			low = d->world[i];
	if (lowest)
		snprintf(d->name, n, "%s:%d", name, low);
	else
		snprintf(d->name, n, "%s", name);
	d->id = cp_dict_add(D_COMM, d->name);
	if (table_put(&comm_tab, d->key, (uint64_t)(uintptr_t)d)) {
		free(d->world);
		free(d->name);
		free(d);
		return NULL;
	}
	return d;
}

struct cp_comm *cp_comm_add(MPI_Comm c, const char *name, int lowest)
{
	pthread_mutex_lock(&tables_mu);
	struct cp_comm *d = add(c, name, lowest);
	pthread_mutex_unlock(&tables_mu);
	return d;
}

struct cp_comm *cp_comm(MPI_Comm c)
{
	if (c == MPI_COMM_WORLD)
		return &cp_world;
	uint64_t v;
	if (table_get(&comm_tab, KEY(c), &v))
		return (struct cp_comm *)(uintptr_t)v;
	if (c == MPI_COMM_NULL)
		return NULL;
	/* Made where the library did not see it: MPI_COMM_SELF, an
	 * intercommunicator, MPI_Comm_idup, a library calling PMPI. Its name
	 * is this rank's own and may differ on other ranks. */
	pthread_mutex_lock(&tables_mu);
	struct cp_comm *d = NULL;
	if (table_get(&comm_tab, KEY(c), &v))
		d = (struct cp_comm *)(uintptr_t)v;
	else {
		char name[64];
		if (c == MPI_COMM_SELF)
			snprintf(name, sizeof name, "self:%d", cp.rank);
		else
			snprintf(name, sizeof name, "comm%d@%d", lazy_comms++, cp.rank);
		d = add(c, name, 0);
	}
	pthread_mutex_unlock(&tables_mu);
	return d;
}

void cp_comm_forget(MPI_Comm c)
{
	pthread_mutex_lock(&tables_mu);
	table_del(&comm_tab, KEY(c));
	pthread_mutex_unlock(&tables_mu);
}

/* ---- datatypes ---- */

static const char *combiner_name(int comb)
{
	switch (comb) {
	case MPI_COMBINER_DUP: return "dup";
	case MPI_COMBINER_CONTIGUOUS: return "contiguous";
	case MPI_COMBINER_VECTOR: return "vector";
	case MPI_COMBINER_HVECTOR: return "hvector";
	case MPI_COMBINER_INDEXED: return "indexed";
	case MPI_COMBINER_HINDEXED: return "hindexed";
	case MPI_COMBINER_INDEXED_BLOCK: return "indexed_block";
	case MPI_COMBINER_HINDEXED_BLOCK: return "hindexed_block";
	case MPI_COMBINER_STRUCT: return "struct";
	case MPI_COMBINER_SUBARRAY: return "subarray";
	case MPI_COMBINER_DARRAY: return "darray";
	case MPI_COMBINER_RESIZED: return "resized";
	case MPI_COMBINER_F90_REAL: return "f90_real";
	case MPI_COMBINER_F90_COMPLEX: return "f90_complex";
	case MPI_COMBINER_F90_INTEGER: return "f90_integer";
	}
	return "other";
}

/* type_name names t: commprof's name for the C types it has names for
 * (float32, int64, ...), the MPI library's for other predefined types
 * (MPI_DOUBLE_INT), the program's for a derived type it named, else
 * "derived:" and how the type was made (derived:vector). */
static void type_name(MPI_Datatype t, char *out, size_t n)
{
	int ni, na, nd, comb;
	if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS) {
		snprintf(out, n, "unknown");
		return;
	}
	if (comb == MPI_COMBINER_NAMED) {
		const struct {
			MPI_Datatype t;
			const char *name;
		} known[] = {
			{MPI_FLOAT, "float32"}, {MPI_DOUBLE, "float64"}, {MPI_LONG_DOUBLE, "long_double"},
			{MPI_INT, "int32"}, {MPI_INT32_T, "int32"}, {MPI_LONG_LONG, "int64"}, {MPI_INT64_T, "int64"},
			{MPI_SHORT, "int16"}, {MPI_INT16_T, "int16"}, {MPI_SIGNED_CHAR, "int8"}, {MPI_INT8_T, "int8"},
			{MPI_UNSIGNED, "uint32"}, {MPI_UINT32_T, "uint32"}, {MPI_UNSIGNED_LONG_LONG, "uint64"},
			{MPI_UINT64_T, "uint64"}, {MPI_UNSIGNED_SHORT, "uint16"}, {MPI_UINT16_T, "uint16"},
			{MPI_UNSIGNED_CHAR, "uint8"}, {MPI_UINT8_T, "uint8"}, {MPI_BYTE, "byte"}, {MPI_CHAR, "char"},
			{MPI_C_BOOL, "bool"}, {MPI_C_FLOAT_COMPLEX, "complex64"}, {MPI_C_DOUBLE_COMPLEX, "complex128"},
			{MPI_LONG, sizeof(long) == 8 ? "int64" : "int32"},
			{MPI_UNSIGNED_LONG, sizeof(long) == 8 ? "uint64" : "uint32"},
		};
		for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
			if (known[i].t == t) {
				snprintf(out, n, "%s", known[i].name);
				return;
			}
		/* Fortran's, whose sizes depend on how the program was compiled. */
		const struct {
			MPI_Datatype t;
			const char *kind;
		} fortran[] = {
			{MPI_REAL, "float"}, {MPI_DOUBLE_PRECISION, "float"}, {MPI_REAL4, "float"}, {MPI_REAL8, "float"},
			{MPI_INTEGER, "int"}, {MPI_INTEGER4, "int"}, {MPI_INTEGER8, "int"},
		};
		int size = 0;
		for (size_t i = 0; i < sizeof fortran / sizeof fortran[0]; i++)
			if (fortran[i].t == t && fortran[i].t != MPI_DATATYPE_NULL && PMPI_Type_size(t, &size) == MPI_SUCCESS &&
			    size > 0) {
				snprintf(out, n, "%s%d", fortran[i].kind, 8 * size);
				return;
			}
	}
	char name[MPI_MAX_OBJECT_NAME] = "";
	int len = 0;
	PMPI_Type_get_name(t, name, &len);
	if (len > 0)
		snprintf(out, n, "%s", name);
	else
		snprintf(out, n, "derived:%s", combiner_name(comb));
}

struct cp_type cp_type(MPI_Datatype t)
{
	struct cp_type r = {0, 0};
	uint64_t v;
	if (table_get(&type_tab, KEY(t), &v)) {
		r.id = (int32_t)(v & 0xFF);
		r.size = (int32_t)(v >> 8);
		return r;
	}
	if (t == MPI_DATATYPE_NULL)
		return r;
	char name[MPI_MAX_OBJECT_NAME + 16];
	type_name(t, name, sizeof name);
	int size = 0;
	PMPI_Type_size(t, &size);
	r.id = cp_dict_add(D_DTYPE, name);
	r.size = size == MPI_UNDEFINED ? 0 : size;
	pthread_mutex_lock(&tables_mu);
	table_put(&type_tab, KEY(t), (uint64_t)r.size << 8 | (uint64_t)r.id);
	pthread_mutex_unlock(&tables_mu);
	return r;
}

void cp_type_forget(MPI_Datatype t)
{
	pthread_mutex_lock(&tables_mu);
	table_del(&type_tab, KEY(t));
	pthread_mutex_unlock(&tables_mu);
}

/* ---- requests ---- */

#define REQ_CAP 32768          /* slots; a power of two */
#define REQ_MAX (REQ_CAP / 4 * 3) /* requests tracked at most */

static struct {
	struct cp_req *slot;
	size_t n;
	atomic_flag lock;
} R = {.lock = ATOMIC_FLAG_INIT};

static inline void req_lock(void)
{
	if (cp.mt)
		while (atomic_flag_test_and_set_explicit(&R.lock, memory_order_acquire))
			;
}

static inline void req_unlock(void)
{
	if (cp.mt)
		atomic_flag_clear_explicit(&R.lock, memory_order_release);
}

void cp_req_add(MPI_Request r, const struct cp_req *q)
{
	uintptr_t k = KEY(r);
	if (k == EMPTY || r == MPI_REQUEST_NULL)
		return;
	req_lock();
	if (R.n >= REQ_MAX) {
		req_unlock();
		atomic_fetch_add_explicit(&cp.lost, 1, memory_order_relaxed);
		return;
	}
	/* Live requests may share a handle: MPICH returns one handle for
	 * every send that completed at once, Open MPI one for every empty
	 * request. Each gets an entry of its own, after those before it in
	 * the probe order, so that completions take them first in, first out. */
	size_t i = hash(k, REQ_CAP);
	while (R.slot[i].key != EMPTY)
		i = (i + 1) & (REQ_CAP - 1);
	R.slot[i] = *q;
	R.slot[i].key = k;
	R.n++;
	req_unlock();
}

int cp_req_take(MPI_Request r, struct cp_req *out)
{
	uintptr_t k = KEY(r);
	if (k == EMPTY || r == MPI_REQUEST_NULL)
		return 0;
	req_lock();
	size_t i = hash(k, REQ_CAP);
	while (R.slot[i].key != k) {
		if (R.slot[i].key == EMPTY) {
			req_unlock();
			return 0;
		}
		i = (i + 1) & (REQ_CAP - 1);
	}
	*out = R.slot[i];
	/* Delete by shifting back the entries after it that may sit there
	 * (which keeps entries of one handle in the order they came). */
	for (size_t j = (i + 1) & (REQ_CAP - 1);; j = (j + 1) & (REQ_CAP - 1)) {
		if (R.slot[j].key == EMPTY)
			break;
		size_t h = hash(R.slot[j].key, REQ_CAP);
		/* Entry j may move to i if its home h is not in (i, j]. */
		int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
		if (!stays) {
			R.slot[i] = R.slot[j];
			i = j;
		}
	}
	R.slot[i].key = EMPTY;
	R.n--;
	req_unlock();
	return 1;
}

int cp_tables_init(void)
{
	R.slot = calloc(REQ_CAP, sizeof *R.slot);
	if (R.slot == NULL)
		return -1;
	cp_world.key = KEY(MPI_COMM_WORLD);
	cp_world.name = "world";
	cp_world.id = cp_dict_add(D_COMM, "world");
	if (describe(&cp_world, MPI_COMM_WORLD))
		return -1;
	return 0;
}
