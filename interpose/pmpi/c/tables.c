/* What the library knows about the program's MPI handles: communicators
 * (name, world ranks, sequence numbers), datatypes (name, size), the
 * requests of non-blocking calls not yet completed, and the messages
 * matched by MPI_Mprobe not yet received.
 *
 * Communicators and datatypes are looked up on every call and change
 * rarely: their tables are open-addressed arrays read without a lock and
 * changed under a mutex. A reader checks a version that a writer makes
 * odd while it changes the table (a sequence lock): a reader that saw it
 * change looks again under the mutex. A table with many deleted slots is
 * rehashed in its own arrays; one that outgrows them gets new ones and
 * keeps the old (a reader may still be in them), so the arrays kept are
 * fewer than twice the largest table's. A communicator's description is
 * freed when its handle is freed and no request started on it is left.
 *
 * Requests come and go with the calls: their table is changed on every
 * non-blocking call and completion, under a spin lock when the program
 * asked for MPI_THREAD_MULTIPLE (threads that start or complete requests
 * at the same time take turns; a turn is a hash probe and a copy of one
 * entry), and without one otherwise.
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

/* One generation of a table's arrays. */
struct arrays {
	size_t cap;
	_Atomic uintptr_t *keys;
	_Atomic uint64_t *vals;
	struct arrays *old; /* the generation before, kept for readers */
};

/* A table of handles to 64-bit values, read without a lock. */
struct table {
	_Atomic(struct arrays *) a;
	_Atomic unsigned version; /* odd while a writer changes a */
	size_t used, live;        /* used counts deleted slots too */
};

static pthread_mutex_t tables_mu = PTHREAD_MUTEX_INITIALIZER;
static struct table comm_tab, type_tab;

static struct arrays *arrays_new(size_t cap, struct arrays *old)
{
	struct arrays *a = calloc(1, sizeof *a);
	if (a == NULL)
		return NULL;
	a->cap = cap;
	a->old = old;
	a->keys = calloc(cap, sizeof *a->keys);
	a->vals = calloc(cap, sizeof *a->vals);
	if (a->keys == NULL || a->vals == NULL) {
		free(a->keys);
		free(a->vals);
		free(a);
		return NULL;
	}
	return a;
}

/* probe looks k up in a; readers and writers alike. */
static int probe(const struct arrays *a, uintptr_t k, uint64_t *v)
{
	if (a == NULL)
		return 0;
	for (size_t i = hash(k, a->cap), n = 0; n < a->cap; i = (i + 1) & (a->cap - 1), n++) {
		uintptr_t got = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
		if (got == k) {
			*v = atomic_load_explicit(&a->vals[i], memory_order_relaxed);
			return 1;
		}
		if (got == EMPTY)
			return 0;
	}
	return 0;
}

static int table_get(struct table *t, uintptr_t k, uint64_t *v)
{
	unsigned v1 = atomic_load_explicit(&t->version, memory_order_acquire);
	uint64_t val = 0;
	int found = 0;
	if (!(v1 & 1))
		found = probe(atomic_load_explicit(&t->a, memory_order_acquire), k, &val);
	atomic_thread_fence(memory_order_acquire);
	if ((v1 & 1) || atomic_load_explicit(&t->version, memory_order_relaxed) != v1) {
		/* A writer was at work: look again while none is. */
		pthread_mutex_lock(&tables_mu);
		found = probe(atomic_load_explicit(&t->a, memory_order_relaxed), k, &val);
		pthread_mutex_unlock(&tables_mu);
	}
	if (found)
		*v = val;
	return found;
}

/* The writers below hold tables_mu and change the table between
 * write_begin and write_end. */
static void write_begin(struct table *t)
{
	atomic_store_explicit(&t->version, atomic_load_explicit(&t->version, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void write_end(struct table *t)
{
	atomic_store_explicit(&t->version, atomic_load_explicit(&t->version, memory_order_relaxed) + 1,
			      memory_order_release);
}

static void insert(struct arrays *a, uintptr_t k, uint64_t v)
{
	size_t j = hash(k, a->cap);
	while (atomic_load_explicit(&a->keys[j], memory_order_relaxed) != EMPTY)
		j = (j + 1) & (a->cap - 1);
	atomic_store_explicit(&a->vals[j], v, memory_order_relaxed);
	atomic_store_explicit(&a->keys[j], k, memory_order_relaxed);
}

/* make_room readies t for one more key: when live and deleted slots
 * would pass half of it, it grows if the live ones pass a quarter, and
 * otherwise rehashes in place to drop the deleted ones. */
static int make_room(struct table *t)
{
	struct arrays *a = atomic_load_explicit(&t->a, memory_order_relaxed);
	if (a != NULL && 2 * (t->used + 1) <= a->cap)
		return 0;
	if (a == NULL || 4 * (t->live + 1) > a->cap) {
		struct arrays *g = arrays_new(a ? 2 * a->cap : 256, a);
		if (g == NULL)
			return -1;
		for (size_t i = 0; a != NULL && i < a->cap; i++) {
			uintptr_t key = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
			if (key != EMPTY && key != TOMB)
				insert(g, key, atomic_load_explicit(&a->vals[i], memory_order_relaxed));
		}
		atomic_store_explicit(&t->a, g, memory_order_release);
		t->used = t->live;
		return 0;
	}
	/* Rehash in place: take the live entries out, clear, put them back. */
	uintptr_t *keys = malloc(sizeof *keys * (t->live ? t->live : 1));
	uint64_t *vals = malloc(sizeof *vals * (t->live ? t->live : 1));
	if (keys == NULL || vals == NULL) {
		free(keys);
		free(vals);
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < a->cap; i++) {
		uintptr_t key = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
		if (key != EMPTY && key != TOMB && n < t->live) {
			keys[n] = key;
			vals[n++] = atomic_load_explicit(&a->vals[i], memory_order_relaxed);
		}
	}
	for (size_t i = 0; i < a->cap; i++)
		atomic_store_explicit(&a->keys[i], EMPTY, memory_order_relaxed);
	for (size_t i = 0; i < n; i++)
		insert(a, keys[i], vals[i]);
	t->used = n;
	free(keys);
	free(vals);
	return 0;
}

/* table_put sets k's value; it returns 1 and the value it replaced in
 * *old if k had one, 0 if not, -1 if out of memory. The caller holds
 * tables_mu. */
static int table_put(struct table *t, uintptr_t k, uint64_t v, uint64_t *old)
{
	write_begin(t);
	int rc = 0;
	struct arrays *a = atomic_load_explicit(&t->a, memory_order_relaxed);
	uint64_t was;
	if (probe(a, k, &was)) {
		for (size_t i = hash(k, a->cap);; i = (i + 1) & (a->cap - 1))
			if (atomic_load_explicit(&a->keys[i], memory_order_relaxed) == k) {
				atomic_store_explicit(&a->vals[i], v, memory_order_relaxed);
				break;
			}
		if (old != NULL)
			*old = was;
		rc = 1;
	} else if (make_room(t)) {
		rc = -1;
	} else {
		insert(atomic_load_explicit(&t->a, memory_order_relaxed), k, v);
		t->used++;
		t->live++;
	}
	write_end(t);
	return rc;
}

/* table_del deletes k if its value is v (any value if want is 0); it
 * returns 1 if it did. The caller holds tables_mu. */
static int table_del(struct table *t, uintptr_t k, int want, uint64_t v)
{
	struct arrays *a = atomic_load_explicit(&t->a, memory_order_relaxed);
	if (a == NULL)
		return 0;
	for (size_t i = hash(k, a->cap), n = 0; n < a->cap; i = (i + 1) & (a->cap - 1), n++) {
		uintptr_t got = atomic_load_explicit(&a->keys[i], memory_order_relaxed);
		if (got == k) {
			if (want && atomic_load_explicit(&a->vals[i], memory_order_relaxed) != v)
				return 0;
			write_begin(t);
			atomic_store_explicit(&a->keys[i], TOMB, memory_order_relaxed);
			t->live--;
			write_end(t);
			return 1;
		}
		if (got == EMPTY)
			return 0;
	}
	return 0;
}

/* ---- communicators ---- */

struct cp_comm cp_world;
static int lazy_comms;      /* communicators met without seeing their creation */
static int64_t comms_alive; /* descriptions allocated and not freed (under tables_mu) */
static int64_t comm_bytes;

int cp_group_world(MPI_Group g, int n, int *world)
{
	int *in = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
	if (in == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		in[i] = i;
	MPI_Group wg;
	PMPI_Comm_group(MPI_COMM_WORLD, &wg);
	PMPI_Group_translate_ranks(g, n, in, wg, world);
	for (int i = 0; i < n; i++)
		if (world[i] == MPI_UNDEFINED)
			world[i] = -1;
	PMPI_Group_free(&wg);
	free(in);
	return 0;
}

static int describe(struct cp_comm *d, MPI_Comm c)
{
	int inter = 0;
	PMPI_Comm_test_inter(c, &inter);
	MPI_Group g;
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
	int rc = d->world == NULL || cp_group_world(g, d->size, d->world) ? -1 : 0;
	PMPI_Group_free(&g);
	return rc;
}

/* fnv1a is the 64-bit FNV-1a hash of s's first n bytes. */
static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

/* shorten bounds name to CP_NAME_MAX: it keeps the last part (after the
 * last '/') and puts a hash of the rest in its place, "#HASH/dup3". */
static void shorten(char *name)
{
	size_t n = strlen(name);
	if (n <= CP_NAME_MAX)
		return;
	const char *last = strrchr(name, '/');
	size_t head = last ? (size_t)(last - name) : n;
	size_t keep = last ? strlen(last) : 0;
	if (keep > CP_NAME_MAX - 17)
		keep = CP_NAME_MAX - 17;
	char out[CP_NAME_MAX + 1];
	snprintf(out, 18, "#%016llx", (unsigned long long)fnv1a(name, head));
	memcpy(out + 17, last ? last : "", keep);
	out[17 + keep] = 0;
	strcpy(name, out);
}

static void comm_free(struct cp_comm *d)
{
	pthread_mutex_lock(&tables_mu);
	comms_alive--;
	comm_bytes -= (int64_t)(sizeof *d + sizeof(int) * (size_t)(d->size > 0 ? d->size : 1) + strlen(d->name) + 1);
	pthread_mutex_unlock(&tables_mu);
	free(d->world);
	free(d->name);
	free(d);
}

void cp_comm_ref(const struct cp_comm *c)
{
	if (c != NULL && c != &cp_world)
		atomic_fetch_add_explicit(&((struct cp_comm *)c)->refs, 1, memory_order_relaxed);
}

void cp_comm_unref(const struct cp_comm *c)
{
	if (c != NULL && c != &cp_world &&
	    atomic_fetch_sub_explicit(&((struct cp_comm *)c)->refs, 1, memory_order_acq_rel) == 1)
		comm_free((struct cp_comm *)c);
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
	char *full = malloc(n > CP_NAME_MAX + 1 ? n : CP_NAME_MAX + 1);
	if (full == NULL || describe(d, c)) {
		free(full);
		free(d->world);
		free(d);
		return NULL;
	}
	int low = -1;
	for (int i = 0; i < d->size; i++)
		if (d->world[i] >= 0 && (low < 0 || d->world[i] < low))
			low = d->world[i];
	if (lowest)
		snprintf(full, n, "%s:%d", name, low);
	else
		snprintf(full, n, "%s", name);
	shorten(full);
	d->name = full;
	d->id = cp_dict_add(D_COMM, d->name);
	atomic_store_explicit(&d->refs, 1, memory_order_relaxed);
	comms_alive++;
	comm_bytes += (int64_t)(sizeof *d + sizeof(int) * (size_t)(d->size > 0 ? d->size : 1) + strlen(d->name) + 1);
	uint64_t old = 0;
	int rc = table_put(&comm_tab, d->key, (uint64_t)(uintptr_t)d, &old);
	if (rc < 0) {
		comms_alive--;
		comm_bytes -= (int64_t)(sizeof *d + sizeof(int) * (size_t)(d->size > 0 ? d->size : 1) + strlen(d->name) + 1);
		free(d->world);
		free(d->name);
		free(d);
		return NULL;
	}
	if (rc == 1) {
		/* The handle was another communicator's, freed where the
		 * library did not see it. */
		pthread_mutex_unlock(&tables_mu);
		cp_comm_unref((struct cp_comm *)(uintptr_t)old);
		pthread_mutex_lock(&tables_mu);
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
	/* Made where the library did not see it: MPI_COMM_SELF, a library
	 * calling PMPI, a program paused by MPI_Pcontrol(0). Its name is
	 * this rank's own and may differ on other ranks. */
	pthread_mutex_lock(&tables_mu);
	struct cp_comm *d = NULL;
	if (probe(atomic_load_explicit(&comm_tab.a, memory_order_relaxed), KEY(c), &v))
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
	uint64_t v = 0;
	int had = probe(atomic_load_explicit(&comm_tab.a, memory_order_relaxed), KEY(c), &v) &&
		  table_del(&comm_tab, KEY(c), 1, v);
	pthread_mutex_unlock(&tables_mu);
	if (had)
		cp_comm_unref((struct cp_comm *)(uintptr_t)v);
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
	table_put(&type_tab, KEY(t), (uint64_t)r.size << 8 | (uint64_t)r.id, NULL);
	pthread_mutex_unlock(&tables_mu);
	return r;
}

void cp_type_forget(MPI_Datatype t)
{
	pthread_mutex_lock(&tables_mu);
	table_del(&type_tab, KEY(t), 0, 0);
	pthread_mutex_unlock(&tables_mu);
}

void cp_tables_memory(struct cp_memory *m)
{
	pthread_mutex_lock(&tables_mu);
	m->comms = comms_alive;
	m->comm_bytes = comm_bytes;
	m->table_slots = 0;
	for (struct table *t = &comm_tab; t != NULL; t = t == &comm_tab ? &type_tab : NULL)
		for (struct arrays *a = atomic_load_explicit(&t->a, memory_order_relaxed); a != NULL; a = a->old)
			m->table_slots += (int64_t)a->cap;
	pthread_mutex_unlock(&tables_mu);
	m->dict_strings = cp_dict_held(D_COMM);
}

/* ---- requests and matched messages ---- */

/* A table of cp_req entries, keyed by handle. Live entries may share a
 * handle: MPICH returns one handle for every send that completed at once,
 * Open MPI one for every empty request. Each gets an entry of its own,
 * after those before it in the probe order, so that takes find them first
 * in, first out. */
struct reqs {
	struct cp_req *slot;
	size_t cap, max, n; /* cap a power of two; at most max entries */
	atomic_flag lock;
};

#define REQ_CAP 32768 /* slots; requests tracked at most: 3/4 of it */
#define MSG_CAP 4096

static struct reqs R = {.lock = ATOMIC_FLAG_INIT}, Msg = {.lock = ATOMIC_FLAG_INIT};

static inline void reqs_lock(struct reqs *t)
{
	if (cp.mt)
		while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire))
			;
}

static inline void reqs_unlock(struct reqs *t)
{
	if (cp.mt)
		atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

static void reqs_add(struct reqs *t, uintptr_t k, const struct cp_req *q)
{
	if (k == EMPTY || t->slot == NULL)
		return;
	reqs_lock(t);
	if (t->n >= t->max) {
		reqs_unlock(t);
		atomic_fetch_add_explicit(&cp.lost, 1, memory_order_relaxed);
		return;
	}
	size_t i = hash(k, t->cap);
	while (t->slot[i].key != EMPTY)
		i = (i + 1) & (t->cap - 1);
	t->slot[i] = *q;
	t->slot[i].key = k;
	t->n++;
	cp_comm_ref(q->c);
	reqs_unlock(t);
}

/* find returns the slot of k's first entry, or -1; t is locked. */
static long reqs_find(struct reqs *t, uintptr_t k)
{
	if (k == EMPTY || t->slot == NULL)
		return -1;
	size_t i = hash(k, t->cap);
	while (t->slot[i].key != k) {
		if (t->slot[i].key == EMPTY)
			return -1;
		i = (i + 1) & (t->cap - 1);
	}
	return (long)i;
}

static int reqs_take(struct reqs *t, uintptr_t k, struct cp_req *out)
{
	reqs_lock(t);
	long at = reqs_find(t, k);
	if (at < 0) {
		reqs_unlock(t);
		return 0;
	}
	size_t i = (size_t)at;
	*out = t->slot[i];
	/* Delete by shifting back the entries after it that may sit there
	 * (which keeps entries of one handle in the order they came). */
	for (size_t j = (i + 1) & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
		if (t->slot[j].key == EMPTY)
			break;
		size_t h = hash(t->slot[j].key, t->cap);
		/* Entry j may move to i if its home h is not in (i, j]. */
		int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
		if (!stays) {
			t->slot[i] = t->slot[j];
			i = j;
		}
	}
	t->slot[i].key = EMPTY;
	t->n--;
	reqs_unlock(t);
	return 1;
}

void cp_req_add(MPI_Request r, const struct cp_req *q)
{
	if (r != MPI_REQUEST_NULL)
		reqs_add(&R, KEY(r), q);
}

int cp_req_take(MPI_Request r, struct cp_req *out)
{
	return r != MPI_REQUEST_NULL && reqs_take(&R, KEY(r), out);
}

void cp_req_tested(MPI_Request r, int64_t t)
{
	if (r == MPI_REQUEST_NULL)
		return;
	reqs_lock(&R);
	long i = reqs_find(&R, KEY(r));
	if (i >= 0 && R.slot[i].tested == 0)
		R.slot[i].tested = t;
	reqs_unlock(&R);
}

void cp_msg_add(MPI_Message m, const struct cp_req *q)
{
	if (m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC)
		reqs_add(&Msg, KEY(m), q);
}

int cp_msg_take(MPI_Message m, struct cp_req *out)
{
	return m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC && reqs_take(&Msg, KEY(m), out);
}

int cp_tables_init(void)
{
	R.cap = REQ_CAP, R.max = REQ_CAP / 4 * 3;
	Msg.cap = MSG_CAP, Msg.max = MSG_CAP / 4 * 3;
	R.slot = calloc(R.cap, sizeof *R.slot);
	Msg.slot = calloc(Msg.cap, sizeof *Msg.slot);
	if (R.slot == NULL || Msg.slot == NULL)
		return -1;
	cp_world.key = KEY(MPI_COMM_WORLD);
	cp_world.name = "world";
	cp_world.id = cp_dict_add(D_COMM, "world");
	if (describe(&cp_world, MPI_COMM_WORLD))
		return -1;
	return 0;
}
