# commprof's recorder for torch.distributed (docs/torch.md).
#
# sitecustomize.py calls install() in every Python process `commprof record`
# starts. install() maps the launcher's rank variables onto torchrun's and
# arranges that, as torch.distributed, DDP, the optimizers and autograd are
# imported, their Python entry points are wrapped. Nothing is recorded
# until init_process_group returns: then this rank opens its spool,
# DIR/rank-NNNNN.arrows.spool, a compact binary log of struct-packed records
# that `commprof record` turns into the run's Arrow streams once the job
# has exited. The spool is written by a background thread every
# COMMPROF_FLUSH (1s), so a rank that is killed leaves all but its last
# second readable.
import atexit
import json
import os
import socket
import struct
import sys
import threading
import time

MAGIC = b"CPTSPL01"
# Record types: a header (u8 type, u32 payload length), then the payload.
REC_META = 1    # JSON: this rank, or a process group
REC_STRING = 2  # u16 id, UTF-8 bytes
REC_EVENT = 3   # see _EV
REC_END = 4     # the rank's recorder was closed at exit
# Event kinds, numbered as trace.Kind.
K_COLL, K_SEND, K_RECV, K_COMPUTE, K_STEP, K_MARK = 1, 2, 3, 4, 5, 6
K_SAMPLE = 9
_HDR = struct.Struct("<BI")
# kind, name, comm, dtype, label, start, dur, bytes, seq, peer, root, step, value
_EV = struct.Struct("<BIBHHHHqqqqiiid")
_EV_LEN = _EV.size - _HDR.size
_STR = struct.Struct("<BIH")

_now = time.monotonic_ns
_tls = threading.local()
_R = None  # this rank's recorder, once init_process_group has returned


def _sample_interval():
    """COMMPROF_SAMPLE as record passes it (a period in ms, or off):
    seconds between readings, or None for none. Default 100 ms."""
    v = os.environ.get("COMMPROF_SAMPLE", "").strip().lower()
    if v == "off":
        return None
    try:
        if v.endswith("ms"):
            return max(0.001, float(v[:-2]) / 1e3)
        if v.endswith("s"):
            return max(0.001, float(v[:-1]))
    except ValueError:
        pass
    return 0.1


class _Sampler:
    """Reads the process's resident memory and CPU time, as commprof's
    own ranks and the PMPI library do (the counter names of
    interpose/sample.go): at the start, every interval, and at the end."""

    def __init__(self, rec, interval):
        import resource

        self.rec, self.interval, self.resource = rec, interval, resource
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.names = [rec.sid(n) for n in ("rss_bytes", "peak_rss_bytes", "cpu_user_ns", "cpu_system_ns")]
        self.stop = threading.Event()
        self.read()
        self.thread = threading.Thread(target=self._run, name="commprof-sample", daemon=True)
        self.thread.start()

    def read(self):
        at = _now()
        try:
            with open("/proc/self/statm", "rb") as f:
                rss = int(f.read().split()[1]) * self.page
        except (OSError, ValueError, IndexError):
            return
        ru = self.resource.getrusage(self.resource.RUSAGE_SELF)
        # The peak is this process image's own high-water mark (VmHWM):
        # getrusage's ru_maxrss carries over exec, so a rank started by a
        # larger process would read that process's peak.
        peak = rss
        try:
            with open("/proc/self/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
                        break
        except (OSError, ValueError, IndexError):
            peak = max(peak, ru.ru_maxrss * 1024)
        for name, v in zip(self.names, (rss, peak, ru.ru_utime * 1e9, ru.ru_stime * 1e9)):
            self.rec.ev(K_SAMPLE, name, 0, 0, 0, at, 0, 0, -1, -1, -1, self.rec.step, float(v), sample=True)

    def _run(self):
        while not self.stop.wait(self.interval):
            self.read()

    def close(self):
        self.stop.set()
        self.read()


def _flush_interval():
    v = os.environ.get("COMMPROF_FLUSH", "1s").strip()
    try:
        for suf, mul in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0)):
            if v.endswith(suf):
                return max(0.01, float(v[: -len(suf)]) * mul)
        return max(0.01, float(v))
    except ValueError:
        return 1.0


class Recorder:
    """One rank's spool. Safe for the threads that complete work."""

    def __init__(self, path, meta):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.lock = threading.Lock()
        self.buf = bytearray(MAGIC)
        self.strings = {}
        self.groups = {}  # process group -> (name id, [seq])
        self.closed = False
        self._meta(meta)
        self.sid("")  # id 0: none
        self.step = -1
        self.next_step = 0
        self.step_start = 0
        self.opt_mode = False
        self.last_end = 0
        self.bwd_ready = None  # when the last DDP bucket of this backward was ready
        self.interval = _flush_interval()
        t = threading.Thread(target=self._flusher, name="commprof-flush", daemon=True)
        t.start()
        every = _sample_interval()
        self.sampler = _Sampler(self, every) if every else None

    def _meta(self, obj):
        b = json.dumps(obj).encode()
        self.buf += _HDR.pack(REC_META, len(b)) + b

    def sid(self, s):
        i = self.strings.get(s)
        if i is None:
            with self.lock:
                i = self.strings.get(s)
                if i is None:
                    i = len(self.strings)
                    if i > 0xFFFF:
                        return 0  # more names than the spool can number
                    b = s.encode()[:4000]
                    self.buf += _STR.pack(REC_STRING, 2 + len(b), i) + b
                    self.strings[s] = i
        return i

    def group(self, pg):
        g = self.groups.get(pg)
        if g is None:
            name, ranks = _group_info(pg)
            with self.lock:
                self._meta({"group": name, "ranks": ranks, "backend": _backend(pg)})
            g = (self.sid(name), [0])
            self.groups[pg] = g
        return g

    def ev(self, kind, name, comm, dtype, label, start, dur, nbytes, seq, peer, root, step, value=0.0, sample=False):
        rec = _EV.pack(REC_EVENT, _EV_LEN, kind, name, comm, dtype, label, start, dur, nbytes, seq, peer, root, step, value)
        with self.lock:
            if self.closed:
                return
            self.buf += rec
            end = start + dur
            if end > self.last_end and not sample:
                self.last_end = end
            if len(self.buf) > (1 << 18):
                self._flush_locked()

    def _flush_locked(self):
        if self.buf and not self.closed:
            b = bytes(self.buf)
            self.buf.clear()
            try:
                os.write(self.fd, b)
            except OSError:
                pass

    def flush(self):
        with self.lock:
            self._flush_locked()

    def _flusher(self):
        while not self.closed:
            time.sleep(self.interval)
            self.flush()

    def close(self):
        if self.sampler is not None:
            self.sampler.close()
        if self.step >= 0 and not self.opt_mode:
            self.close_step(max(self.last_end, self.step_start))
        with self.lock:
            self.buf += _HDR.pack(REC_END, 0)
            self._flush_locked()
            self.closed = True
            try:
                os.close(self.fd)
            except OSError:
                pass

    # Steps (docs/torch.md): a step opens at the first DDP forward or
    # backward after the last one closed, and closes where optimizer.step
    # returns; a job with DDP but no optimizer step closes it at the next
    # DDP forward.
    def open_step(self, t):
        self.step = self.next_step
        self.next_step += 1
        self.step_start = t

    def close_step(self, t):
        s = self.step
        self.step = -1
        self.ev(K_STEP, self.sid("step"), 0, 0, 0, self.step_start, t - self.step_start, 0, -1, -1, -1, s)

    def compute(self, name, start, end):
        self.ev(K_COMPUTE, self.sid(name), 0, 0, 0, start, end - start, 0, -1, -1, -1, self.step)


def _backend(pg):
    try:
        import torch.distributed as dist
        return str(dist.get_backend(pg))
    except Exception:
        return ""


def _group_info(pg):
    import torch.distributed.distributed_c10d as c10d
    if pg is c10d._get_default_group():
        return "world", list(range(pg.size()))
    ranks = c10d._pg_group_ranks.get(pg)
    ranks = sorted(ranks, key=ranks.get) if ranks else []
    return "pg" + str(c10d._pg_names.get(pg, len(c10d._pg_names))), ranks


# ---------------------------------------------------------------- launch


def _map_env():
    """Give the script torchrun's variables from whoever started it."""
    env = os.environ
    pairs = (
        ("RANK", ("COMMPROF_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")),
        ("WORLD_SIZE", ("COMMPROF_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")),
        ("LOCAL_RANK", ("COMMPROF_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")),
        ("LOCAL_WORLD_SIZE", ("COMMPROF_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")),
        ("MASTER_ADDR", ("COMMPROF_TORCH_MASTER_ADDR",)),
        ("MASTER_PORT", ("COMMPROF_TORCH_MASTER_PORT",)),
    )
    # commprof's own local launcher (COMMPROF_RANK) decides for its ranks,
    # whatever the environment it was started from held; under another
    # launcher, what it or the user set stands.
    ours = "COMMPROF_RANK" in env
    if "RANK" in env and not ours:
        return  # torchrun, or the user, set them
    for name, sources in pairs:
        if name in env and not ours:
            continue
        for s in sources:
            if s in env:
                env[name] = env[s]
                break


# ---------------------------------------------------------------- wrappers


def _nbytes(t):
    return t.numel() * t.element_size()


def _lbytes(ts):
    n = 0
    for t in ts:
        n += t.numel() * t.element_size()
    return n


_dtypes = {}


def _dtype(t):
    d = _dtypes.get(t.dtype)
    if d is None:
        d = _R.sid(str(t.dtype).replace("torch.", ""))
        _dtypes[t.dtype] = d
    return d


def _arg(args, kw, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kw.get(name, default)


# Each collective: (commprof name, position of group, of async_op, a
# function of (args, kw, group size) giving (bytes, a tensor for the
# dtype, root as given)).
def _specs():
    A = _arg
    return {
        "broadcast": ("broadcast", 2, 3, lambda a, k, n: (_nbytes(A(a, k, 0, "tensor")), A(a, k, 0, "tensor"), A(a, k, 1, "src"))),
        "all_reduce": ("allreduce", 2, 3, lambda a, k, n: (_nbytes(A(a, k, 0, "tensor")), A(a, k, 0, "tensor"), None)),
        "all_reduce_coalesced": ("allreduce", 2, 3, lambda a, k, n: (_lbytes(A(a, k, 0, "tensors")), A(a, k, 0, "tensors")[0], None)),
        "reduce": ("reduce", 3, 4, lambda a, k, n: (_nbytes(A(a, k, 0, "tensor")), A(a, k, 0, "tensor"), A(a, k, 1, "dst"))),
        "all_gather": ("allgather", 2, 3, lambda a, k, n: (_lbytes(A(a, k, 0, "tensor_list")), A(a, k, 1, "tensor"), None)),
        "all_gather_into_tensor": ("allgather", 2, 3, lambda a, k, n: (_nbytes(A(a, k, 0, "output_tensor")), A(a, k, 1, "input_tensor"), None)),
        "_all_gather_base": ("allgather", 2, 3, lambda a, k, n: (_nbytes(A(a, k, 0, "output_tensor")), A(a, k, 1, "input_tensor"), None)),
        "gather": ("gather", 3, 4, lambda a, k, n: (_nbytes(A(a, k, 0, "tensor")) * n, A(a, k, 0, "tensor"), A(a, k, 2, "dst", 0))),
        "scatter": ("scatter", 3, 4, lambda a, k, n: (_nbytes(A(a, k, 0, "tensor")) * n, A(a, k, 0, "tensor"), A(a, k, 2, "src", 0))),
        "reduce_scatter": ("reducescatter", 3, 4, lambda a, k, n: (_lbytes(A(a, k, 1, "input_list")), A(a, k, 0, "output"), None)),
        "reduce_scatter_tensor": ("reducescatter", 3, 4, lambda a, k, n: (_nbytes(A(a, k, 1, "input")), A(a, k, 1, "input"), None)),
        "_reduce_scatter_base": ("reducescatter", 3, 4, lambda a, k, n: (_nbytes(A(a, k, 1, "input")), A(a, k, 1, "input"), None)),
        "all_to_all_single": ("alltoall", 4, 5, lambda a, k, n: (_nbytes(A(a, k, 1, "input")), A(a, k, 1, "input"), None)),
        "all_to_all": ("alltoall", 2, 3, lambda a, k, n: (_lbytes(A(a, k, 1, "input_tensor_list")), A(a, k, 1, "input_tensor_list")[0], None)),
        "barrier": ("barrier", 0, 1, lambda a, k, n: (0, None, None)),
    }


def _resolve(c10d, group):
    if group is None or group is c10d.GroupMember.WORLD:
        return c10d._get_default_group()
    return group


# Works whose completion is stamped where wait() returns or
# is_completed() first says so: gloo's sends and receives, which have no
# future in torch 1.13. Keyed by id(work), holding the work so that the
# id is not reused while it waits.
_pending = {}


def _patch_work(Work):
    wait, is_completed = Work.wait, Work.is_completed

    def w_wait(self, *a, **k):
        r = wait(self, *a, **k)
        if _pending:
            p = _pending.pop(id(self), None)
            if p is not None:
                p[1](_now())
        return r

    def w_is_completed(self):
        c = is_completed(self)
        if c and _pending:
            p = _pending.pop(id(self), None)
            if p is not None:
                p[1](_now())
        return c

    Work.wait = w_wait
    Work.is_completed = w_is_completed


class _GPUCompletions:
    """NCCL's work future completes once its kernels are enqueued, not
    when they end. Its completion is stamped here instead: where wait()
    has ordered the current stream after NCCL's, a CUDA event is recorded
    on it, and this thread stamps the time that event completes, events
    in the order they were recorded."""

    def __init__(self):
        import queue
        self.q = queue.SimpleQueue()
        threading.Thread(target=self._run, name="commprof-gpu", daemon=True).start()

    def add(self, done):
        import torch
        ev = torch.cuda.Event()
        ev.record()
        self.q.put((ev, done))

    def _run(self):
        while True:
            ev, done = self.q.get()
            try:
                ev.synchronize()
            except Exception:
                pass
            done(_now())


_gpu = None


def _on_done(work, done, cuda=False):
    """Calls done(end_ns) where work completes: its future's callback,
    or, for work with no future, where wait() returns. On a GPU (NCCL)
    the callback runs with the current stream ordered after the work's
    kernels: an event recorded there completes when they end."""
    if cuda:
        global _gpu
        if _gpu is None:
            _gpu = _GPUCompletions()
        g = _gpu
        finish = lambda end: g.add(done)
    else:
        finish = done
    try:
        fut = work.get_future()
    except RuntimeError:
        _pending[id(work)] = (work, finish)
        return
    fut.then(lambda f: finish(_now()))


def _patch_c10d(dist):
    import torch.distributed.distributed_c10d as c10d
    mods = (dist, c10d)
    _patch_work(dist.Work if hasattr(dist, "Work") else c10d.Work)
    cuda_future = [False]  # set at init for NCCL: completion from the future

    def put(name, fn):
        for m in mods:
            if hasattr(m, name):
                setattr(m, name, fn)

    # init_process_group opens the spool.
    init = c10d.init_process_group

    def init_process_group(*args, **kw):
        t0 = _now()
        r = init(*args, **kw)
        _start(dist, t0)
        cuda_future[0] = dist.get_backend() == "nccl"
        return r

    init_process_group.__wrapped__ = init
    put("init_process_group", init_process_group)

    def collective(fname, op, gpos, apos, info):
        orig = getattr(c10d, fname)
        opname = None

        def w(*args, **kw):
            R = _R
            if R is None or getattr(_tls, "busy", False):
                return orig(*args, **kw)
            group = _resolve(c10d, _arg(args, kw, gpos, "group"))
            if group is c10d.GroupMember.NON_GROUP_MEMBER:
                return orig(*args, **kw)
            async_op = bool(_arg(args, kw, apos, "async_op", False))
            n = group.size()
            nbytes, t, root = info(args, kw, n)
            comm, seq = R.group(group)
            dt = _dtype(t) if t is not None else 0
            rt = -1 if root is None else int(root)
            label = getattr(_tls, "label", 0)
            step = R.step
            nm = R.sid(op)
            cf = cuda_future[0]
            if cf and not async_op:  # NCCL: wait() returns before the GPU is done
                if len(args) > apos:
                    args = args[:apos] + (True,) + args[apos + 1:]
                else:
                    kw["async_op"] = True
            _tls.busy = True
            start = _now()
            try:
                work = orig(*args, **kw)
            finally:
                _tls.busy = False
            # Numbered once it was issued: a call the backend refused
            # (on every rank alike) is not a collective.
            s = seq[0]
            seq[0] = s + 1
            if work is None:
                R.ev(K_COLL, nm, comm, dt, label, start, _now() - start, nbytes, s, -1, rt, step)
                return None

            def done(end):
                R.ev(K_COLL, nm, comm, dt, label, start, end - start, nbytes, s, -1, rt, step)

            _on_done(work, done, cf)
            if cf and not async_op:
                work.wait()
                return None
            return work

        w.__wrapped__ = orig
        w.__name__ = fname
        put(fname, w)

    for fname, (op, gpos, apos, info) in _specs().items():
        if hasattr(c10d, fname):
            collective(fname, op, gpos, apos, info)

    def p2p(fname, kind, opname, blocking, peername):
        orig = getattr(c10d, fname)

        def w(*args, **kw):
            R = _R
            if R is None or getattr(_tls, "busy", False):
                return orig(*args, **kw)
            t = _arg(args, kw, 0, "tensor")
            peer = _arg(args, kw, 1, peername)
            group = _resolve(c10d, _arg(args, kw, 2, "group"))
            if group is c10d.GroupMember.NON_GROUP_MEMBER:
                return orig(*args, **kw)
            tag = int(_arg(args, kw, 3, "tag", 0) or 0)
            comm, _ = R.group(group)
            nbytes, dt, step, nm = _nbytes(t), _dtype(t), R.step, R.sid(opname)
            label = getattr(_tls, "label", 0)
            _tls.busy = True
            start = _now()
            try:
                r = orig(*args, **kw)
            finally:
                _tls.busy = False
            if blocking:
                p = r if (kind == K_RECV and peer is None and r is not None) else peer
                R.ev(kind, nm, comm, dt, label, start, _now() - start, nbytes, tag, -1 if p is None else int(p), -1, step)
                return r
            if r is None:
                return r

            def done(end):
                p = peer
                if p is None:
                    try:
                        p = r.source_rank()
                    except Exception:
                        p = -1
                R.ev(kind, nm, comm, dt, label, start, end - start, nbytes, tag, int(p), -1, step)

            _on_done(r, done, cuda_future[0])
            return r

        w.__wrapped__ = orig
        w.__name__ = fname
        put(fname, w)

    p2p("send", K_SEND, "send", True, "dst")
    p2p("recv", K_RECV, "recv", True, "src")
    p2p("isend", K_SEND, "send", False, "dst")
    p2p("irecv", K_RECV, "recv", False, "src")

    if hasattr(c10d, "batch_isend_irecv"):
        orig_batch = c10d.batch_isend_irecv

        def batch_isend_irecv(p2p_op_list):
            R = _R
            if R is None:
                return orig_batch(p2p_op_list)
            old = getattr(_tls, "label", 0)
            _tls.label = R.sid("batch_isend_irecv")
            try:
                return orig_batch(p2p_op_list)
            finally:
                _tls.label = old

        batch_isend_irecv.__wrapped__ = orig_batch
        put("batch_isend_irecv", batch_isend_irecv)

    # What DDP calls from C++ when it is built (and, for buffers, at each
    # forward): the parameter-shape check and the state broadcast.
    if hasattr(dist, "_broadcast_coalesced"):
        orig_bc = dist._broadcast_coalesced

        def _broadcast_coalesced(process_group, tensors, buffer_size, src=0):
            R = _R
            if R is None or getattr(_tls, "busy", False):
                return orig_bc(process_group, tensors, buffer_size, src)
            comm, seq = R.group(process_group)
            s = seq[0]
            seq[0] = s + 1
            root = src
            if process_group is not c10d._get_default_group():
                try:
                    root = c10d.get_global_rank(process_group, src)
                except Exception:
                    pass
            ts = list(tensors)
            nb = _lbytes(ts)
            dt = _dtype(ts[0]) if ts else 0
            step, label = R.step, R.sid("ddp.broadcast_coalesced")
            start = _now()
            r = orig_bc(process_group, tensors, buffer_size, src)
            R.ev(K_COLL, R.sid("broadcast"), comm, dt, label, start, _now() - start, nb, s, -1, int(root), step)
            return r

        dist._broadcast_coalesced = _broadcast_coalesced

    if hasattr(dist, "_verify_params_across_processes"):
        orig_vp = dist._verify_params_across_processes

        def _verify_params_across_processes(process_group, tensors, logger=None):
            R = _R
            if R is None:
                return orig_vp(process_group, tensors, logger)
            ts = list(tensors)
            comm, seq = R.group(process_group)
            s = seq[0]
            seq[0] = s + 2
            n = process_group.size()
            meta = 16 * sum(t.dim() for t in ts)
            label, i64 = R.sid("ddp.verify_params"), R.sid("int64")
            start = _now()
            r = orig_vp(process_group, tensors, logger)
            end = _now()
            # The C++ check gathers every rank's parameter count, then
            # broadcasts rank 0's shapes and strides; the split of its
            # time between the two is not measured: each gets half.
            mid = start + (end - start) // 2
            R.ev(K_COLL, R.sid("allgather"), comm, i64, label, start, mid - start, 8 * n, s, -1, -1, R.step)
            R.ev(K_COLL, R.sid("broadcast"), comm, i64, label, mid, end - mid, meta, s + 1, -1, 0, R.step)
            return r

        dist._verify_params_across_processes = _verify_params_across_processes


def _start(dist, t0):
    global _R
    if _R is not None:
        return
    d = os.environ.get("COMMPROF_TRACE_DIR")
    if not d:
        return
    rank, world = dist.get_rank(), dist.get_world_size()
    meta = {
        "rank": rank, "world_size": world, "backend": str(dist.get_backend()),
        "host": socket.gethostname(), "pid": os.getpid(),
        "mono_ns": _now(), "wall_ns": time.time_ns(),
        "torch": _torch_version(), "python": sys.version.split()[0],
        "argv": sys.argv, "run_id": os.environ.get("COMMPROF_RUN_ID", ""),
    }
    try:
        _R = Recorder(os.path.join(d, "rank-%05d.arrows.spool" % rank), meta)
    except OSError as e:
        sys.stderr.write("commprof: rank %d cannot record into %s: %s\n" % (rank, d, e))
        return
    _R.group(dist.distributed_c10d._get_default_group())
    _R.ev(K_MARK, _R.sid("torch.init"), 0, 0, 0, t0, 0, 0, -1, -1, -1, -1, (_now() - t0) / 1e9)
    atexit.register(_close)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forget)


def _forget():
    # A forked worker (a DataLoader's) is not a rank: it records nothing.
    global _R
    _R = None


def _close():
    R = _R
    if R is None:
        return
    R.close()
    # Hold no process group or work past exit: torch tears them down.
    R.groups.clear()
    _pending.clear()
    # torch 1.13 can abort as the interpreter exits ("terminate called
    # without an active exception") once a DDP comm hook, its own default
    # included, has put Python callbacks on gloo's futures: the process
    # groups are torn down here instead, while Python is whole, as a script
    # that calls destroy_process_group does. Not after an uncaught
    # exception: a peer may still be waiting on this rank's work.
    if hasattr(sys, "last_value"):
        return
    try:
        import gc
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
        gc.collect()
    except Exception:
        pass


def _torch_version():
    try:
        import torch
        return torch.__version__
    except Exception:
        return ""


# ---------------------------------------------------------------- DDP


def _bucket_label(R, bucket):
    return R.sid("ddp bucket %d" % bucket.index())


def _default_hook(ddp):
    """The allreduce-then-average DDP runs when no hook is registered
    (torch's default_hooks.allreduce_hook), recording each bucket."""
    pg = ddp.process_group

    def hook(state, bucket):
        R = _R
        t = bucket.buffer()
        t.div_(pg.size())
        if R is None:
            return pg.allreduce([t]).get_future().then(lambda f: f.value()[0])
        now = _now()
        if bucket.is_last():
            R.bwd_ready = now
        comm, seq = R.group(pg)
        s = seq[0]
        seq[0] = s + 1
        nb, dt, label, step, nm = _nbytes(t), _dtype(t), _bucket_label(R, bucket), R.step, R.sid("allreduce")
        idx = float(bucket.index())
        start = _now()
        fut = pg.allreduce([t]).get_future()

        def record(end):
            R.ev(K_COLL, nm, comm, dt, label, start, end - start, nb, s, -1, -1, step, idx)

        def done(f):
            if t.is_cuda:
                global _gpu
                if _gpu is None:
                    _gpu = _GPUCompletions()
                _gpu.add(record)
            else:
                record(_now())
            return f.value()[0]

        return fut.then(done)

    return hook


def _user_hook(hook):
    """The user's hook: the collectives it calls are recorded as they are,
    labelled with the bucket they carry."""

    def w(state, bucket):
        R = _R
        if R is None:
            return hook(state, bucket)
        if bucket.is_last():
            R.bwd_ready = _now()
        old = getattr(_tls, "label", 0)
        _tls.label = _bucket_label(R, bucket)
        try:
            return hook(state, bucket)
        finally:
            _tls.label = old

    return w


def _grad_enabled():
    import torch
    return torch.is_grad_enabled()


def _patch_ddp(mod):
    DDP = mod.DistributedDataParallel
    reg = DDP.register_comm_hook
    fwd = DDP.forward

    def register_comm_hook(self, state, hook):
        self._commprof_hooked = True
        return reg(self, state, _user_hook(hook))

    def forward(self, *args, **kw):
        R = _R
        if R is None:
            return fwd(self, *args, **kw)
        if not getattr(self, "_commprof_hooked", False):
            self._commprof_hooked = True
            try:
                reg(self, None, _default_hook(self))
            except RuntimeError:
                pass  # a built-in hook is registered: its buckets are not seen
        t0 = _now()
        # A forward under no_grad (evaluation) is no training step's.
        if _grad_enabled():
            if R.step >= 0 and not R.opt_mode:
                R.close_step(t0)
            if R.step < 0:
                R.open_step(t0)
        R.bwd_ready = None
        r = fwd(self, *args, **kw)
        R.compute("forward", t0, _now())
        return r

    orig_builtin = getattr(DDP, "_register_builtin_comm_hook", None)
    if orig_builtin is not None:
        def _register_builtin_comm_hook(self, comm_hook_type):
            self._commprof_hooked = True
            return orig_builtin(self, comm_hook_type)
        DDP._register_builtin_comm_hook = _register_builtin_comm_hook
    DDP.register_comm_hook = register_comm_hook
    DDP.forward = forward


# ---------------------------------------------------------------- steps


def _patch_autograd(mod):
    orig = mod.backward

    def backward(*args, **kw):
        R = _R
        if R is None:
            return orig(*args, **kw)
        t0 = _now()
        if R.step < 0:
            R.open_step(t0)
        R.bwd_ready = None
        r = orig(*args, **kw)
        end = _now()
        # With DDP, backward returns once every bucket's allreduce is
        # done: its compute ended when the last bucket was ready.
        ready = R.bwd_ready
        R.compute("backward", t0, ready if ready is not None and t0 <= ready <= end else end)
        return r

    backward.__wrapped__ = orig
    mod.backward = backward


def _wrap_step(cls):
    step = cls.step
    if getattr(step, "_commprof", False):
        return

    def w(self, *args, **kw):
        R = _R
        if R is None:
            return step(self, *args, **kw)
        t0 = _now()
        r = step(self, *args, **kw)
        t1 = _now()
        R.opt_mode = True
        if R.step < 0:
            R.open_step(t0)
        R.compute("optimizer", t0, t1)
        R.close_step(t1)
        return r

    w._commprof = True
    w.__wrapped__ = step
    for a in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(w, a, getattr(step, a))
        except (AttributeError, TypeError):
            pass
    cls.step = w


def _patch_optim(mod):
    Opt = mod.Optimizer
    orig_init = Opt.__init__

    def __init__(self, *args, **kw):
        orig_init(self, *args, **kw)
        try:
            _wrap_step(type(self))
        except Exception:
            pass

    Opt.__init__ = __init__


# ---------------------------------------------------------------- install


def _guarded(fn):
    def run(mod):
        try:
            fn(mod)
        except Exception as e:
            sys.stderr.write("commprof: could not wrap %s for recording: %r\n" % (mod.__name__, e))
    return run


_PATCHES = {
    "torch.distributed": _guarded(_patch_c10d),
    "torch.nn.parallel.distributed": _guarded(_patch_ddp),
    "torch.optim.optimizer": _guarded(_patch_optim),
    "torch.autograd": _guarded(_patch_autograd),
}


class _Finder:
    """Runs a patch once a module of _PATCHES has been executed."""

    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        for f in sys.meta_path:
            if f is self or not hasattr(f, "find_spec"):
                continue
            spec = f.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        orig = getattr(loader, "exec_module", None)
        if orig is None:
            return spec

        def exec_module(module):
            orig(module)
            patch(module)

        loader.exec_module = exec_module
        return spec


def install():
    _map_env()
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _Finder())
