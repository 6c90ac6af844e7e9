/* The rank's Arrow IPC stream: the schema message (generated from the Go
 * writer's, schema.h), dictionary batches, record batches and the
 * end-of-stream marker. Record batches' buffers are compressed with zstd
 * as they are written (Arrow's BodyCompression, ZSTD codec, BUFFER
 * method: each buffer its uncompressed length as an int64, then a zstd
 * frame; -1 and the bytes as they are where zstd would not shrink them),
 * so that the stream on disk stays about 5.4 bytes an event until the
 * finisher compacts it, rather than 83 (record --codec none: as they are).
 * Dictionaries are left as they are.
 *
 * An IPC message is a 0xFFFFFFFF continuation marker, the length of the
 * metadata (padded to 8 bytes), the metadata (a flatbuffer holding a
 * Message table) and the body (the buffers, each at an 8-byte aligned
 * offset). The metadata is laid out here front to back, with every
 * flatbuffer offset pointing forward as the format requires: the root
 * offset, the Message's vtable and table, the header's vtable and table,
 * then the field node and buffer vectors (Arrow's Message.fbs and
 * Schema.fbs name the fields; the slot numbers below follow them).
 *
 * Only the flush thread (or the thread finishing the stream) calls these,
 * under buf.c's writer lock.
 */
#include "cp.h"
#include "schema.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* Arrow IPC constants. */
enum {
	METADATA_V5 = 4,
	HEADER_DICTIONARY_BATCH = 2,
	HEADER_RECORD_BATCH = 3,
};

/* out is the message being built: frame, metadata, body. */
static struct {
	unsigned char *b;
	size_t n, cap;
} out;

static int grow(size_t need)
{
	if (need <= out.cap)
		return 0;
	size_t cap = out.cap ? out.cap : 1 << 16;
	while (cap < need)
		cap *= 2;
	unsigned char *b = realloc(out.b, cap);
	if (b == NULL)
		return -1;
	out.b = b;
	out.cap = cap;
	return 0;
}

static void put16(size_t at, uint16_t v) { memcpy(out.b + at, &v, 2); }
static void put32(size_t at, uint32_t v) { memcpy(out.b + at, &v, 4); }
static void put64(size_t at, uint64_t v) { memcpy(out.b + at, &v, 8); }

/* take reserves n zeroed bytes at an offset aligned to align (relative to
 * the metadata's start, which is 8-aligned in the stream) and returns it. */
static size_t take(size_t base, size_t n, size_t align)
{
	while ((out.n - base) % align)
		out.b[out.n++] = 0;
	size_t at = out.n;
	memset(out.b + at, 0, n);
	out.n += n;
	return at;
}

/* ref stores at field position at the forward offset to target. */
static void ref(size_t at, size_t target) { put32(at, (uint32_t)(target - at)); }

/* vtable writes a vtable of nslots slots for a table of tsize bytes;
 * offs[i] is slot i's offset in the table (0: absent). */
static size_t vtable(size_t base, int nslots, int tsize, const uint16_t *offs)
{
	size_t vt = take(base, 4 + 2 * (size_t)nslots, 2);
	put16(vt, (uint16_t)(4 + 2 * nslots));
	put16(vt + 2, (uint16_t)tsize);
	for (int i = 0; i < nslots; i++)
		put16(vt + 4 + 2 * (size_t)i, offs[i]);
	return vt;
}

/* table reserves a table of tsize bytes after its vtable vt. */
static size_t table(size_t base, size_t vt, int tsize)
{
	size_t t = take(base, (size_t)tsize, 8);
	put32(t, (uint32_t)(int32_t)(t - vt)); /* soffset: the vtable lies before */
	return t;
}

/* A record batch being laid out: its nodes and buffers, and the body;
 * zstd says its buffers are compressed (zbody holds the other body while
 * they are). */
struct layout {
	size_t nnodes, nbufs;
	int64_t nodes[2 * (CP_NCOLS + 1)];
	int64_t bufs[2 * 2 * (CP_NCOLS + 1)];
	unsigned char *body;
	size_t blen, bcap;
	int zstd;
	unsigned char *zbody;
	size_t zcap;
};

static struct layout lay;

static int body_grow(size_t need)
{
	if (need <= lay.bcap)
		return 0;
	size_t cap = lay.bcap ? lay.bcap : 1 << 16;
	while (cap < need)
		cap *= 2;
	unsigned char *b = realloc(lay.body, cap);
	if (b == NULL)
		return -1;
	lay.body = b;
	lay.bcap = cap;
	return 0;
}

/* buffer appends an (empty, or n bytes written by the caller at the
 * returned pointer) buffer at an 8-aligned offset of the body. */
static unsigned char *buffer(size_t n)
{
	while (lay.blen % 8)
		lay.body[lay.blen++] = 0;
	lay.bufs[2 * lay.nbufs] = (int64_t)lay.blen;
	lay.bufs[2 * lay.nbufs + 1] = (int64_t)n;
	lay.nbufs++;
	unsigned char *p = lay.body + lay.blen;
	lay.blen += n;
	return p;
}

static void node(int64_t rows)
{
	lay.nodes[2 * lay.nnodes] = rows;
	lay.nodes[2 * lay.nnodes + 1] = 0;
	lay.nnodes++;
}

/* vector16 lays out a vector of n 16-byte structs of two longs each
 * (FieldNode, Buffer): its 4-byte count just before the 8-aligned
 * elements. */
static size_t vector16(size_t base, size_t n, const int64_t *v)
{
	while ((out.n + 4 - base) % 8)
		out.b[out.n++] = 0;
	size_t at = take(base, 4 + 16 * n, 4);
	put32(at, (uint32_t)n);
	for (size_t i = 0; i < 2 * n; i++)
		put64(at + 4 + 8 * i, (uint64_t)v[i]);
	return at;
}

/* The zstd level of the batches as written: 3 keeps the stream at about
 * 5.4 bytes an event on an allreduce loop (1: 5.8, 9: 5.2) at a few
 * hundred MB/s of the flush thread's time. */
#ifndef CP_ZSTD_LEVEL
#define CP_ZSTD_LEVEL 3
#endif

/* Arrow's CompressionType and BodyCompressionMethod. */
enum {
	CODEC_ZSTD = 1,
	METHOD_BUFFER = 0,
};

/* record_batch lays out a RecordBatch table of rows rows with lay's nodes
 * and buffers (slots: 0 length, 1 nodes, 2 buffers, 3 compression) and
 * returns it. */
static size_t record_batch(size_t base, int64_t rows)
{
	const uint16_t offs[4] = {8, 4, 16, 20};
	size_t vt = vtable(base, lay.zstd ? 4 : 3, 24, offs);
	size_t t = table(base, vt, 24);
	put64(t + 8, (uint64_t)rows);
	size_t nv = vector16(base, lay.nnodes, lay.nodes);
	ref(t + 4, nv);
	size_t bv = vector16(base, lay.nbufs, lay.bufs);
	ref(t + 16, bv);
	if (lay.zstd) {
		/* BodyCompression: 0 codec (byte), 1 method (byte). */
		const uint16_t coffs[2] = {4, 5};
		size_t cvt = vtable(base, 2, 8, coffs);
		size_t c = table(base, cvt, 8);
		out.b[c + 4] = CODEC_ZSTD;
		out.b[c + 5] = METHOD_BUFFER;
		ref(t + 20, c);
	}
	return t;
}

/* compress replaces lay's body by its buffers compressed; it returns -1
 * (lay unchanged) when that cannot be done: the batch is then written
 * as it is. */
static int compress(void)
{
	static ZSTD_CCtx *cctx;
	if (cctx == NULL && (cctx = ZSTD_createCCtx()) == NULL)
		return -1;
	size_t need = 0;
	for (size_t i = 0; i < lay.nbufs; i++)
		need += 16 + ZSTD_compressBound((size_t)lay.bufs[2 * i + 1]);
	if (need > lay.zcap) {
		unsigned char *b = realloc(lay.zbody, need);
		if (b == NULL)
			return -1;
		lay.zbody = b;
		lay.zcap = need;
	}
	size_t at = 0;
	for (size_t i = 0; i < lay.nbufs; i++) {
		const unsigned char *src = lay.body + lay.bufs[2 * i];
		size_t n = (size_t)lay.bufs[2 * i + 1];
		while (at % 8)
			lay.zbody[at++] = 0;
		lay.bufs[2 * i] = (int64_t)at;
		if (n == 0) {
			lay.bufs[2 * i + 1] = 0; /* an empty buffer has no length prefix */
			continue;
		}
		int64_t len = (int64_t)n;
		size_t z = ZSTD_compressCCtx(cctx, lay.zbody + at + 8, lay.zcap - at - 8, src, n, CP_ZSTD_LEVEL);
		if (ZSTD_isError(z) || z >= n) {
			len = -1; /* stored as it is */
			memcpy(lay.zbody + at + 8, src, n);
			z = n;
		}
		memcpy(lay.zbody + at, &len, 8);
		lay.bufs[2 * i + 1] = (int64_t)(8 + z);
		at += 8 + z;
	}
	unsigned char *b = lay.body;
	size_t c = lay.bcap;
	lay.body = lay.zbody;
	lay.bcap = lay.zcap;
	lay.blen = at;
	lay.zbody = b;
	lay.zcap = c;
	lay.zstd = 1;
	return 0;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* message lays out a Message around a header of type htype built by
 * header(), then writes it with lay's body. */
static int message(int fd, int htype, size_t (*header)(size_t base, const void *arg), const void *arg)
{
	while (lay.blen % 8)
		lay.body[lay.blen++] = 0;
	/* The metadata of a batch of 16 columns is under 1 KiB. */
	if (grow(4096 + 64 * (CP_NCOLS + 1) * 2))
		return -1;
	out.n = 0;
	put32(0, 0xFFFFFFFFu);
	out.n = 8;
	size_t base = 8;
	size_t root = take(base, 4, 4);
	/* Message: 0 version (short), 1 header_type (ubyte), 2 header, 3 bodyLength. */
	const uint16_t offs[4] = {4, 6, 8, 16};
	size_t vt = vtable(base, 4, 24, offs);
	size_t m = table(base, vt, 24);
	ref(root, m);
	put16(m + 4, METADATA_V5);
	out.b[m + 6] = (unsigned char)htype;
	put64(m + 16, (uint64_t)lay.blen);
	size_t h = header(base, arg);
	ref(m + 8, h);
	while ((out.n - base) % 8)
		out.b[out.n++] = 0;
	put32(4, (uint32_t)(out.n - base));
	if (write_all(fd, out.b, out.n) || write_all(fd, lay.body, lay.blen))
		return -1;
	return 0;
}

static size_t batch_header(size_t base, const void *arg)
{
	return record_batch(base, *(const int64_t *)arg);
}

struct dict_arg {
	long long id;
	int64_t rows;
	int delta;
};

/* DictionaryBatch: 0 id (long), 1 data (RecordBatch), 2 isDelta (bool). */
static size_t dict_header(size_t base, const void *arg)
{
	const struct dict_arg *d = arg;
	const uint16_t offs[3] = {8, 4, 16};
	size_t vt = vtable(base, 3, 24, offs);
	size_t t = table(base, vt, 24);
	put64(t + 8, (uint64_t)d->id);
	out.b[t + 16] = d->delta ? 1 : 0;
	size_t rb = record_batch(base, d->rows);
	ref(t + 4, rb);
	return t;
}

int cp_ipc_schema(int fd, int rank, int size, int pid, int64_t offset, const char *host, const char *run_id)
{
	unsigned char msg[CP_SCHEMA_LEN];
	memcpy(msg, cp_schema_msg, sizeof msg);
	char num[4][32];
	snprintf(num[0], sizeof num[0], "%d", rank);
	snprintf(num[1], sizeof num[1], "%d", size);
	snprintf(num[2], sizeof num[2], "%d", pid);
	snprintf(num[3], sizeof num[3], "%lld", (long long)offset);
	const struct {
		size_t at, cap;
		const char *v;
	} vals[] = {
		{CP_META_RANK_AT, CP_META_RANK_CAP, num[0]},
		{CP_META_WORLD_AT, CP_META_WORLD_CAP, num[1]},
		{CP_META_PID_AT, CP_META_PID_CAP, num[2]},
		{CP_META_OFFSET_AT, CP_META_OFFSET_CAP, num[3]},
		{CP_META_HOST_AT, CP_META_HOST_CAP, host},
		{CP_META_RUNID_AT, CP_META_RUNID_CAP, run_id},
	};
	for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		size_t n = strlen(vals[i].v);
		if (n > vals[i].cap)
			n = vals[i].cap; /* host and run id: cut (the numbers always fit) */
		uint32_t n32 = (uint32_t)n;
		memcpy(msg + vals[i].at, &n32, 4);
		memset(msg + vals[i].at + 4, 0, vals[i].cap + 1);
		memcpy(msg + vals[i].at + 4, vals[i].v, n);
	}
	return write_all(fd, msg, sizeof msg);
}

int cp_ipc_dictionary(int fd, long long id, const char *const *values, size_t n, int delta)
{
	size_t data = 0;
	for (size_t i = 0; i < n; i++)
		data += strlen(values[i]);
	if (body_grow(4 * (n + 1) + data + 64))
		return -1;
	lay.nnodes = lay.nbufs = lay.blen = 0;
	lay.zstd = 0;
	node((int64_t)n);
	buffer(0);
	unsigned char *offs = buffer(4 * (n + 1));
	unsigned char *p = buffer(data);
	uint32_t off = 0;
	memcpy(offs, &off, 4);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(values[i]);
		memcpy(p + off, values[i], l);
		off += (uint32_t)l;
		memcpy(offs + 4 * (i + 1), &off, 4);
	}
	struct dict_arg a = {id, (int64_t)n, delta};
	return message(fd, HEADER_DICTIONARY_BATCH, dict_header, &a);
}

_Static_assert(CP_NCOLS == C_NCOLS, "schema.h has other columns than the encoder writes");

int cp_ipc_batch(int fd, const struct cp_event *const *evs, size_t n, int rank)
{
	if (body_grow(n * 96 + 8 * 2 * CP_NCOLS + 64))
		return -1;
	lay.nnodes = lay.nbufs = lay.blen = 0;
	lay.zstd = 0;
	/* Each column's place in the body, then one pass over the events
	 * that writes every column: the events are read once. */
	static const size_t width[C_NCOLS] = {
		[C_RANK] = 4, [C_KIND] = 1, [C_NAME] = 4, [C_START] = 8, [C_DUR] = 8, [C_BYTES] = 8,
		[C_PEER] = 4, [C_SEQ] = 8, [C_STEP] = 4, [C_ALGO] = 1, [C_DTYPE] = 1, [C_ROOT] = 4,
		[C_CHUNK] = 4, [C_COMM] = 4, [C_WAIT] = 8, [C_VALUE] = 8, [C_LABEL] = 4,
	};
	unsigned char *col[C_NCOLS];
	for (int c = 0; c < C_NCOLS; c++) {
		if (width[c] != (size_t)cp_columns[c].width)
			return -1; /* schema.h and this encoder disagree */
		node((int64_t)n);
		buffer(0); /* no validity bitmap: no nulls */
		col[c] = buffer(n * width[c]);
	}
	const int32_t minus1 = -1, zero = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cp_event *e = evs[i];
		int8_t kind = e->kind, algo = 0, dtype = (int8_t)e->dtype;
		memcpy(col[C_RANK] + 4 * i, &rank, 4);
		memcpy(col[C_KIND] + i, &kind, 1);
		memcpy(col[C_NAME] + 4 * i, &e->name, 4);
		memcpy(col[C_START] + 8 * i, &e->start, 8);
		memcpy(col[C_DUR] + 8 * i, &e->dur, 8);
		memcpy(col[C_BYTES] + 8 * i, &e->bytes, 8);
		memcpy(col[C_PEER] + 4 * i, &e->peer, 4);
		memcpy(col[C_SEQ] + 8 * i, &e->seq, 8);
		memcpy(col[C_STEP] + 4 * i, &minus1, 4);  /* PMPI knows no training steps */
		memcpy(col[C_ALGO] + i, &algo, 1);        /* "": the MPI library does not say */
		memcpy(col[C_DTYPE] + i, &dtype, 1);
		memcpy(col[C_ROOT] + 4 * i, &e->root, 4);
		memcpy(col[C_CHUNK] + 4 * i, &minus1, 4);
		memcpy(col[C_COMM] + 4 * i, &e->comm, 4);
		memcpy(col[C_WAIT] + 8 * i, &e->wait, 8);
		memcpy(col[C_VALUE] + 8 * i, &e->value, 8);
		memcpy(col[C_LABEL] + 4 * i, &zero, 4);   /* "": a program's own names are not known */
	}
	int64_t rows = (int64_t)n;
	static int raw = -1;
	if (raw < 0) {
		const char *c = getenv("COMMPROF_CODEC"); /* record --codec */
		raw = c != NULL && strcmp(c, "none") == 0;
	}
	if (!raw)
		compress(); /* as it is if it could not be */
	return message(fd, HEADER_RECORD_BATCH, batch_header, &rows);
}

long long cp_ipc_dict_id(int column) { return cp_columns[column].dict; }

int cp_ipc_check(void)
{
	static const char *const names[CP_NCOLS] = {
		"rank", "kind", "name", "start_ns", "dur_ns", "bytes", "peer", "seq",
		"step", "algo", "dtype", "root", "chunk", "comm", "wait_ns", "value", "label",
	};
	for (int c = 0; c < CP_NCOLS; c++)
		if (strcmp(names[c], cp_columns[c].name) != 0)
			return -1;
	return 0;
}

int cp_ipc_end(int fd)
{
	static const unsigned char eos[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0};
	return write_all(fd, eos, sizeof eos);
}
