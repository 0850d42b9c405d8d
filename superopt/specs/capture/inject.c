/*
 * nvcc-plus capture: a CUDA injection library (CUDA_INJECTION64_PATH).
 *
 * The CUDA driver loads this library at cuInit and calls InitializeInjection(). It works for
 * programs linked with the static cudart (nvcc's default) because it sits below cudart, in the
 * driver. It subscribes to CUPTI driver-API callbacks for the kernel launch entry points only
 * (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and their _ptsz variants) and to
 * the context-destroy resource callback (to flush timings), and to CUPTI activity records of
 * kind CONCURRENT_KERNEL for each kernel's GPU start/end.
 *
 * For every launch, on API enter, it appends one JSON line to $SUPEROPT_CAPTURE_OUT:
 *   {"t":"launch","pid":P,"tid":T,"corr":C,"cbid":ID,"kernel":"_Z...","grid":[x,y,z],
 *    "block":[x,y,z],"shared":N,"capturing":0|1,
 *    "params":[{"offset":O,"size":S,"bytes":"hex","alloc":[base,extent]|null
 *               [,"inner":[[at,base,extent],...]]}, ...],   (inner: pointer fields of a struct by value)
 *    "snapshot":{...}|absent}
 * and for every kernel execution the activity API reports:
 *   {"t":"time","pid":P,"corr":C,"kernel":"_Z...","start":ns,"end":ns}
 * plus {"t":"init"...}, {"t":"error",...} and {"t":"note",...} lines.
 *
 * Environment:
 *   SUPEROPT_CAPTURE_OUT        file to append JSON lines to (required; nothing is done without it)
 *   SUPEROPT_CAPTURE_DATA_DIR   if set: snapshot, for the first launch of each distinct shape,
 *                               every pointer parameter's (and struct pointer field's) allocation range [ptr, base+extent)
 *                               before and after the launch into files in this directory
 *   SUPEROPT_CAPTURE_DATA_CAP   cap in bytes per launch snapshot (default 268435456); a launch
 *                               whose ranges add up to more is skipped with a note
 *   SUPEROPT_CAPTURE_NO_TIMING  if set: do not enable the activity API
 *
 * Safety: the program's behaviour and exit code must not change. Every failure becomes an
 * "error" line. Recursion: the driver calls made inside the callbacks (cuFuncGetName,
 * cuFuncGetParamInfo, cuMemGetAddressRange, cuStreamIsCapturing, cuCtxSynchronize, cuMemcpyDtoH)
 * are not launch entry points and their callbacks are not enabled, so they never re-enter the
 * launch handling; a thread-local guard makes sure of it anyway. Driver entry points are looked
 * up with dlsym in the already loaded libcuda, so this library does not link against libcuda.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define CAP_VERSION 1
#define MAX_PARAMS 1024
#define MAX_SEEN 65536

typedef CUresult (*pfn_FuncGetName)(const char **, CUfunction);
typedef CUresult (*pfn_FuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);
typedef CUresult (*pfn_MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*pfn_CtxSynchronize)(void);
typedef CUresult (*pfn_MemcpyDtoH)(void *, CUdeviceptr, size_t);
typedef CUresult (*pfn_StreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
typedef CUresult (*pfn_CtxGetDevice)(CUdevice *);
typedef CUresult (*pfn_DeviceGetName)(char *, int, CUdevice);
/* The runtime (CUDA >= 12) launches CUkernel handles through cuLaunchKernel, cast to
   CUfunction; the cuFunc* queries answer CUDA_ERROR_INVALID_HANDLE for them, the cuKernel*
   ones answer. Both are tried. */
typedef CUresult (*pfn_KernelGetName)(const char **, CUkernel);
typedef CUresult (*pfn_KernelGetParamInfo)(CUkernel, size_t, size_t *, size_t *);

static struct {
    pfn_FuncGetName FuncGetName;
    pfn_FuncGetParamInfo FuncGetParamInfo;
    pfn_MemGetAddressRange MemGetAddressRange;
    pfn_CtxSynchronize CtxSynchronize;
    pfn_MemcpyDtoH MemcpyDtoH;
    pfn_StreamIsCapturing StreamIsCapturing;
    pfn_CtxGetDevice CtxGetDevice;
    pfn_DeviceGetName DeviceGetName;
    pfn_KernelGetName KernelGetName;
    pfn_KernelGetParamInfo KernelGetParamInfo;
} drv;

static CUresult param_info(CUfunction f, size_t i, size_t *off, size_t *size) {
    CUresult e = drv.FuncGetParamInfo ? drv.FuncGetParamInfo(f, i, off, size) : CUDA_ERROR_NOT_FOUND;
    if (e == CUDA_ERROR_INVALID_HANDLE && drv.KernelGetParamInfo)
        e = drv.KernelGetParamInfo((CUkernel)f, i, off, size);
    return e;
}

static CUresult func_name(const char **name, CUfunction f) {
    CUresult e = drv.FuncGetName ? drv.FuncGetName(name, f) : CUDA_ERROR_NOT_FOUND;
    if (e != CUDA_SUCCESS && drv.KernelGetName)
        e = drv.KernelGetName(name, (CUkernel)f);
    return e;
}

static int g_fd = -1;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_SubscriberHandle g_sub;
static const char *g_data_dir = NULL;
static unsigned long long g_cap = 268435456ULL;
static int g_timing = 1;
static uint64_t g_seen[MAX_SEEN];   /* open addressing set of shape hashes (0 = empty) */
static int g_seen_n = 0;
static int g_initialized = 0;
static __thread int t_busy = 0;

/* ------------------------------------------------------------------ a growable string */
typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void sb_grow(sbuf *b, size_t add) {
    if (b->oom) return;
    if (b->n + add + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + add + 1) cap *= 2;
    char *q = (char *)realloc(b->p, cap);
    if (!q) { b->oom = 1; return; }
    b->p = q; b->cap = cap;
}
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        sb_grow(b, (size_t)k);
        if (b->oom) return;
        memcpy(b->p + b->n, tmp, (size_t)k);
        b->n += (size_t)k; b->p[b->n] = 0;
        return;
    }
    sb_grow(b, (size_t)k);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}
static void sb_str(sbuf *b, const char *s) {   /* a JSON string literal */
    sb_grow(b, 2);
    if (b->oom) return;
    b->p[b->n++] = '"';
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\') sb_printf(b, "\\%c", *c);
        else if (*c < 0x20 || *c >= 0x7f) sb_printf(b, "\\u%04x", *c);
        else { sb_grow(b, 1); if (b->oom) return; b->p[b->n++] = (char)*c; }
    }
    sb_grow(b, 1);
    if (b->oom) return;
    b->p[b->n++] = '"'; b->p[b->n] = 0;
}
static void sb_hex(sbuf *b, const unsigned char *d, size_t n) {
    static const char hx[] = "0123456789abcdef";
    sb_grow(b, 2 * n + 2);
    if (b->oom) return;
    b->p[b->n++] = '"';
    for (size_t i = 0; i < n; i++) { b->p[b->n++] = hx[d[i] >> 4]; b->p[b->n++] = hx[d[i] & 15]; }
    b->p[b->n++] = '"'; b->p[b->n] = 0;
}

/* ------------------------------------------------------------------ output */
static void emit(sbuf *b) {
    if (g_fd < 0 || b->oom || !b->p) { free(b->p); b->p = NULL; return; }
    sb_grow(b, 1);
    if (b->oom) { free(b->p); b->p = NULL; return; }
    b->p[b->n++] = '\n';
    pthread_mutex_lock(&g_lock);
    flock(g_fd, LOCK_EX);           /* other processes of the program (fork, MPI) append too */
    size_t off = 0;
    while (off < b->n) {
        ssize_t w = write(g_fd, b->p + off, b->n - off);
        if (w < 0) { if (errno == EINTR) continue; break; }
        off += (size_t)w;
    }
    flock(g_fd, LOCK_UN);
    pthread_mutex_unlock(&g_lock);
    free(b->p); b->p = NULL; b->n = b->cap = 0;
}

static void emit_msg(const char *type, const char *where, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sbuf b = {0};
    sb_printf(&b, "{\"t\":\"%s\",\"pid\":%d,\"where\":", type, (int)getpid());
    sb_str(&b, where);
    sb_printf(&b, ",\"message\":");
    sb_str(&b, msg);
    sb_printf(&b, "}");
    emit(&b);
}

static const char *cupti_err(CUptiResult r) {
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return "unknown CUPTI error";
    return s;
}

/* ------------------------------------------------------------------ hashing (FNV-1a) */
static uint64_t fnv(uint64_t h, const void *d, size_t n) {
    const unsigned char *p = (const unsigned char *)d;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ULL; }
    return h;
}

/* returns 1 if the hash was not seen before (and records it) */
static int first_time(uint64_t h) {
    if (h == 0) h = 1;
    int fresh = 0;
    pthread_mutex_lock(&g_lock);
    if (g_seen_n < MAX_SEEN / 2) {
        size_t i = (size_t)(h % MAX_SEEN);
        while (g_seen[i] && g_seen[i] != h) i = (i + 1) % MAX_SEEN;
        if (!g_seen[i]) { g_seen[i] = h; g_seen_n++; fresh = 1; }
    }
    pthread_mutex_unlock(&g_lock);
    return fresh;
}

/* ------------------------------------------------------------------ snapshots */
typedef struct { int index; long at; CUdeviceptr ptr; size_t len; } range_t;   /* at: byte offset of a pointer field inside a by-value struct, -1 for a pointer parameter */

typedef struct {
    int active;
    uint32_t corr;
    char prefix[64];
    int n;
    range_t r[MAX_PARAMS];
} pending_t;
static __thread pending_t *t_pending = NULL;

static int dump_ranges(const pending_t *p, const char *phase, sbuf *files) {
    int ok = 1;
    for (int i = 0; i < p->n; i++) {
        char path[4096];
        if (p->r[i].at >= 0)
            snprintf(path, sizeof path, "%s/%s-p%d+%ld.%s.bin", g_data_dir, p->prefix, p->r[i].index, p->r[i].at, phase);
        else
            snprintf(path, sizeof path, "%s/%s-p%d.%s.bin", g_data_dir, p->prefix, p->r[i].index, phase);
        void *host = malloc(p->r[i].len ? p->r[i].len : 1);
        if (!host) { emit_msg("error", "snapshot", "out of host memory for %zu bytes", p->r[i].len); ok = 0; continue; }
        CUresult e = drv.MemcpyDtoH(host, p->r[i].ptr, p->r[i].len);
        if (e != CUDA_SUCCESS) {
            emit_msg("error", "snapshot", "cuMemcpyDtoH of %zu bytes failed: %d", p->r[i].len, (int)e);
            free(host); ok = 0; continue;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) { emit_msg("error", "snapshot", "cannot write %s: %s", path, strerror(errno)); free(host); ok = 0; continue; }
        size_t off = 0;
        while (off < p->r[i].len) {
            ssize_t w = write(fd, (char *)host + off, p->r[i].len - off);
            if (w < 0) { if (errno == EINTR) continue; ok = 0; break; }
            off += (size_t)w;
        }
        close(fd);
        free(host);
        if (files) {
            sb_printf(files, "%s{\"param\":%d,", files->n > 1 ? "," : "", p->r[i].index);
            if (p->r[i].at >= 0) sb_printf(files, "\"at\":%ld,", p->r[i].at);
            sb_printf(files, "\"bytes\":%zu,\"path\":", p->r[i].len);
            sb_str(files, path);
            sb_printf(files, "}");
        }
    }
    return ok;
}

/* ------------------------------------------------------------------ launches */
typedef struct {
    CUfunction f;
    unsigned g[3], b[3], shared;
    CUstream stream;
    void **params;
    void **extra;
    int ptsz;
} launch_t;

/* The GPU's name, once: at InitializeInjection the driver is not initialised yet (cuInit
   has not run), so it is read in the first launch's context instead. */
static void note_gpu_once(void) {
    static int done = 0;
    if (done) return;
    done = 1;
    CUdevice dev;
    char gpu[256] = "";
    if (!drv.CtxGetDevice || !drv.DeviceGetName || drv.CtxGetDevice(&dev) != CUDA_SUCCESS) return;
    if (drv.DeviceGetName(gpu, sizeof gpu, dev) != CUDA_SUCCESS) return;
    sbuf b = {0};
    sb_printf(&b, "{\"t\":\"init\",\"pid\":%d,\"version\":%d,\"gpu\":", (int)getpid(), CAP_VERSION);
    sb_str(&b, gpu);
    sb_printf(&b, "}");
    emit(&b);
}

static void on_launch_enter(const CUpti_CallbackData *cb, CUpti_CallbackId cbid, const launch_t *L) {
    note_gpu_once();
    sbuf b = {0};
    const char *name = NULL;
    if (func_name(&name, L->f) != CUDA_SUCCESS || !name)
        name = cb->symbolName ? cb->symbolName : "?";
    sb_printf(&b, "{\"t\":\"launch\",\"pid\":%d,\"tid\":%ld,\"corr\":%u,\"cbid\":%u,\"kernel\":",
              (int)getpid(), (long)syscall(SYS_gettid), cb->correlationId, (unsigned)cbid);
    sb_str(&b, name);
    sb_printf(&b, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shared\":%u",
              L->g[0], L->g[1], L->g[2], L->b[0], L->b[1], L->b[2], L->shared);

    CUstream st = L->stream;
    if (st == NULL && L->ptsz) st = CU_STREAM_PER_THREAD;
    int capturing = 0;
    if (drv.StreamIsCapturing) {
        CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (drv.StreamIsCapturing(st, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) capturing = 1;
    }
    sb_printf(&b, ",\"capturing\":%d", capturing);

    /* where the parameter bytes are */
    const unsigned char *argbuf = NULL;
    size_t argbuf_size = 0;
    if (!L->params && L->extra) {
        for (void **e = L->extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
            if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) argbuf = (const unsigned char *)e[1];
            else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE && e[1]) argbuf_size = *(size_t *)e[1];
            else if (e[0] != CU_LAUNCH_PARAM_BUFFER_POINTER && e[0] != CU_LAUNCH_PARAM_BUFFER_SIZE) break;
        }
    }

    uint64_t h = fnv(14695981039346656037ULL, name, strlen(name));
    h = fnv(h, L->g, sizeof L->g); h = fnv(h, L->b, sizeof L->b); h = fnv(h, &L->shared, sizeof L->shared);

    pending_t *pend = NULL;
    unsigned long long snap_total = 0;
    if (g_data_dir && !capturing) {
        if (!t_pending) t_pending = (pending_t *)calloc(1, sizeof(pending_t));
        pend = t_pending;
        if (pend) { pend->active = 0; pend->n = 0; }
    }

    sb_printf(&b, ",\"params\":[");
    int nparams = 0;
    if (drv.FuncGetParamInfo == NULL && drv.KernelGetParamInfo == NULL) {
        emit_msg("error", "launch", "cuFuncGetParamInfo is not available (driver older than CUDA 12.4): parameters not recorded");
    } else {
        for (size_t i = 0; i < MAX_PARAMS; i++) {
            size_t off = 0, size = 0;
            CUresult pe = param_info(L->f, i, &off, &size);
            if (pe != CUDA_SUCCESS) {
                static int told = 0;
                if (i == 0 && !told) { told = 1; emit_msg("error", "launch", "cuFuncGetParamInfo(%s, 0) failed with CUresult %d", name, (int)pe); }
                break;
            }
            const unsigned char *src = NULL;
            if (L->params) src = (const unsigned char *)L->params[i];
            else if (argbuf && (argbuf_size == 0 || off + size <= argbuf_size)) src = argbuf + off;
            sb_printf(&b, "%s{\"offset\":%zu,\"size\":%zu,\"bytes\":", i ? "," : "", off, size);
            if (src) sb_hex(&b, src, size); else sb_printf(&b, "null");
            int is_ptr = 0;
            if (src && size == 8) {
                CUdeviceptr v;
                memcpy(&v, src, 8);
                CUdeviceptr base = 0; size_t extent = 0;
                if (v && drv.MemGetAddressRange && drv.MemGetAddressRange(&base, &extent, v) == CUDA_SUCCESS && extent) {
                    is_ptr = 1;
                    unsigned long long rel = (unsigned long long)(v - base);
                    sb_printf(&b, ",\"alloc\":[%llu,%llu]", (unsigned long long)base, (unsigned long long)extent);
                    h = fnv(h, &extent, sizeof extent); h = fnv(h, &rel, sizeof rel);
                    if (pend && pend->n < MAX_PARAMS && rel < extent) {
                        pend->r[pend->n].index = (int)i;
                        pend->r[pend->n].at = -1;
                        pend->r[pend->n].ptr = v;
                        pend->r[pend->n].len = extent - rel;
                        snap_total += extent - rel;
                        pend->n++;
                    }
                }
            }
            if (!is_ptr) {
                sb_printf(&b, ",\"alloc\":null");
                if (src && size > 8 && size <= 4096 && drv.MemGetAddressRange) {
                    /* a struct by value: its aligned 8-byte words that point into device
                       allocations are pointer fields ("inner": [[at, base, extent], ...]);
                       the shape hash sees their allocation and offset, not their address */
                    unsigned char masked[4096];
                    memcpy(masked, src, size);
                    int first = 1;
                    for (size_t at = 0; at + 8 <= size; at += 8) {
                        CUdeviceptr v;
                        memcpy(&v, src + at, 8);
                        CUdeviceptr base = 0; size_t extent = 0;
                        if (!v || drv.MemGetAddressRange(&base, &extent, v) != CUDA_SUCCESS || !extent) continue;
                        unsigned long long rel = (unsigned long long)(v - base);
                        sb_printf(&b, "%s[%zu,%llu,%llu]", first ? ",\"inner\":[" : ",", at,
                                  (unsigned long long)base, (unsigned long long)extent);
                        first = 0;
                        memset(masked + at, 0, 8);
                        h = fnv(h, &extent, sizeof extent); h = fnv(h, &rel, sizeof rel);
                        if (pend && pend->n < MAX_PARAMS && rel < extent) {
                            pend->r[pend->n].index = (int)i;
                            pend->r[pend->n].at = (long)at;
                            pend->r[pend->n].ptr = v;
                            pend->r[pend->n].len = extent - rel;
                            snap_total += extent - rel;
                            pend->n++;
                        }
                    }
                    if (!first) sb_printf(&b, "]");
                    h = fnv(h, masked, size);
                } else if (src) {
                    h = fnv(h, src, size);
                }
            }
            sb_printf(&b, "}");
            nparams++;
        }
    }
    sb_printf(&b, "],\"shape\":\"%016llx\"", (unsigned long long)h);

    if (pend && first_time(h)) {
        snprintf(pend->prefix, sizeof pend->prefix, "%016llx-%d", (unsigned long long)h, (int)getpid());
        if (pend->n == 0) {
            /* nothing to snapshot */
        } else if (snap_total > g_cap) {
            sb_printf(&b, ",\"snapshot\":{\"skipped\":\"%llu bytes over the cap of %llu\"}", snap_total, g_cap);
            pend->n = 0;
        } else if (drv.CtxSynchronize && drv.CtxSynchronize() == CUDA_SUCCESS) {
            sbuf files = {0};
            sb_printf(&files, "[");
            int ok = dump_ranges(pend, "before", &files);
            sb_printf(&files, "]");
            sb_printf(&b, ",\"snapshot\":{\"prefix\":");
            sb_str(&b, pend->prefix);
            sb_printf(&b, ",\"ok\":%d,\"before\":%s}", ok, files.p ? files.p : "[]");
            free(files.p);
            pend->active = 1;
            pend->corr = cb->correlationId;
        } else {
            sb_printf(&b, ",\"snapshot\":{\"skipped\":\"cuCtxSynchronize failed\"}");
            pend->n = 0;
        }
    }
    sb_printf(&b, "}");
    emit(&b);
}

static void on_launch_exit(const CUpti_CallbackData *cb) {
    pending_t *pend = t_pending;
    if (!pend || !pend->active || pend->corr != cb->correlationId) return;
    pend->active = 0;
    CUresult r = *(const CUresult *)cb->functionReturnValue;
    if (r != CUDA_SUCCESS) {
        emit_msg("note", "snapshot", "launch %u returned %d: no after-snapshot", cb->correlationId, (int)r);
        return;
    }
    CUresult s = drv.CtxSynchronize ? drv.CtxSynchronize() : CUDA_ERROR_NOT_INITIALIZED;
    if (s != CUDA_SUCCESS) {
        emit_msg("error", "snapshot", "cuCtxSynchronize after launch %u failed: %d", cb->correlationId, (int)s);
        return;
    }
    sbuf files = {0};
    sb_printf(&files, "[");
    int ok = dump_ranges(pend, "after", &files);
    sb_printf(&files, "]");
    sbuf b = {0};
    sb_printf(&b, "{\"t\":\"snapshot_after\",\"pid\":%d,\"corr\":%u,\"prefix\":", (int)getpid(), cb->correlationId);
    sb_str(&b, pend->prefix);
    sb_printf(&b, ",\"ok\":%d,\"after\":%s}", ok, files.p ? files.p : "[]");
    free(files.p);
    emit(&b);
}

static void CUPTIAPI callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)ud;
    if (t_busy) return;
    t_busy = 1;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && g_timing) cuptiActivityFlushAll(0);
        t_busy = 0;
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) { t_busy = 0; return; }
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    if (cb->callbackSite == CUPTI_API_EXIT) {
        if (g_data_dir) on_launch_exit(cb);
        t_busy = 0;
        return;
    }
    launch_t L;
    memset(&L, 0, sizeof L);
    switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const cuLaunchKernel_params *p = (const cuLaunchKernel_params *)cb->functionParams;
        L.f = p->f; L.g[0] = p->gridDimX; L.g[1] = p->gridDimY; L.g[2] = p->gridDimZ;
        L.b[0] = p->blockDimX; L.b[1] = p->blockDimY; L.b[2] = p->blockDimZ;
        L.shared = p->sharedMemBytes; L.stream = p->hStream; L.params = p->kernelParams; L.extra = p->extra;
        L.ptsz = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
        const cuLaunchCooperativeKernel_params *p = (const cuLaunchCooperativeKernel_params *)cb->functionParams;
        L.f = p->f; L.g[0] = p->gridDimX; L.g[1] = p->gridDimY; L.g[2] = p->gridDimZ;
        L.b[0] = p->blockDimX; L.b[1] = p->blockDimY; L.b[2] = p->blockDimZ;
        L.shared = p->sharedMemBytes; L.stream = p->hStream; L.params = p->kernelParams;
        L.ptsz = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const cuLaunchKernelEx_params *p = (const cuLaunchKernelEx_params *)cb->functionParams;
        const CUlaunchConfig *c = p->config;
        if (!c) { emit_msg("error", "launch", "cuLaunchKernelEx without a config"); t_busy = 0; return; }
        L.f = p->f; L.g[0] = c->gridDimX; L.g[1] = c->gridDimY; L.g[2] = c->gridDimZ;
        L.b[0] = c->blockDimX; L.b[1] = c->blockDimY; L.b[2] = c->blockDimZ;
        L.shared = c->sharedMemBytes; L.stream = c->hStream; L.params = p->kernelParams; L.extra = p->extra;
        L.ptsz = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz;
        break;
    }
    default:
        t_busy = 0;
        return;
    }
    on_launch_enter(cb, cbid, &L);
    t_busy = 0;
}

/* ------------------------------------------------------------------ activity (timing) */
#define ACT_BUF (4u << 20)

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *maxRecords) {
    uint8_t *b = NULL;
    if (posix_memalign((void **)&b, 8, ACT_BUF) != 0) b = NULL;
    *buffer = b;
    *size = b ? ACT_BUF : 0;
    *maxRecords = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize) {
    (void)ctx; (void)streamId; (void)size;
    CUpti_Activity *rec = NULL;
    for (;;) {
        CUptiResult r = cuptiActivityGetNextRecord(buffer, validSize, &rec);
        if (r != CUPTI_SUCCESS) {
            if (r != CUPTI_ERROR_MAX_LIMIT_REACHED)
                emit_msg("error", "activity", "cuptiActivityGetNextRecord: %s", cupti_err(r));
            break;
        }
        if (rec->kind == CUPTI_ACTIVITY_KIND_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            sbuf b = {0};
            sb_printf(&b, "{\"t\":\"time\",\"pid\":%d,\"corr\":%u,\"kernel\":", (int)getpid(), k->correlationId);
            sb_str(&b, k->name);
            sb_printf(&b, ",\"start\":%llu,\"end\":%llu,\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]}",
                      (unsigned long long)k->start, (unsigned long long)k->end,
                      k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ);
            emit(&b);
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped) == CUPTI_SUCCESS && dropped)
        emit_msg("error", "activity", "%zu kernel timing records dropped", dropped);
    free(buffer);
}

static void at_exit(void) {
    if (g_timing) cuptiActivityFlushAll(1);
    emit_msg("note", "exit", "capture finished");
}

/* ------------------------------------------------------------------ entry point */
static void *sym(void *h, const char *name) {
    void *p = h ? dlsym(h, name) : NULL;
    if (!p) p = dlsym(RTLD_DEFAULT, name);
    return p;
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
    if (g_initialized) return 1;
    g_initialized = 1;
    const char *out = getenv("SUPEROPT_CAPTURE_OUT");
    if (!out || !*out) return 1;
    g_fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (g_fd < 0) {
        fprintf(stderr, "nvcc-plus capture: cannot open %s: %s\n", out, strerror(errno));
        return 1;
    }
    const char *dd = getenv("SUPEROPT_CAPTURE_DATA_DIR");
    if (dd && *dd) {
        mkdir(dd, 0755);
        g_data_dir = dd;
    }
    const char *cap = getenv("SUPEROPT_CAPTURE_DATA_CAP");
    if (cap && *cap) g_cap = strtoull(cap, NULL, 0);
    if (getenv("SUPEROPT_CAPTURE_NO_TIMING")) g_timing = 0;

    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_LAZY);
    drv.FuncGetName = (pfn_FuncGetName)sym(h, "cuFuncGetName");
    drv.FuncGetParamInfo = (pfn_FuncGetParamInfo)sym(h, "cuFuncGetParamInfo");
    drv.MemGetAddressRange = (pfn_MemGetAddressRange)sym(h, "cuMemGetAddressRange_v2");
    drv.CtxSynchronize = (pfn_CtxSynchronize)sym(h, "cuCtxSynchronize");
    drv.MemcpyDtoH = (pfn_MemcpyDtoH)sym(h, "cuMemcpyDtoH_v2");
    drv.StreamIsCapturing = (pfn_StreamIsCapturing)sym(h, "cuStreamIsCapturing");
    drv.CtxGetDevice = (pfn_CtxGetDevice)sym(h, "cuCtxGetDevice");
    drv.DeviceGetName = (pfn_DeviceGetName)sym(h, "cuDeviceGetName");
    drv.KernelGetName = (pfn_KernelGetName)sym(h, "cuKernelGetName");
    drv.KernelGetParamInfo = (pfn_KernelGetParamInfo)sym(h, "cuKernelGetParamInfo");

    char gpu[256] = "";
    {
        typedef CUresult (*pfn_DeviceGet)(CUdevice *, int);
        pfn_DeviceGet DeviceGet = (pfn_DeviceGet)sym(h, "cuDeviceGet");
        CUdevice dev;
        if (DeviceGet && drv.DeviceGetName && DeviceGet(&dev, 0) == CUDA_SUCCESS)
            drv.DeviceGetName(gpu, sizeof gpu, dev);
    }
    {
        sbuf b = {0};
        int drv_version = 0;
        typedef CUresult (*pfn_DriverGetVersion)(int *);
        pfn_DriverGetVersion gv = (pfn_DriverGetVersion)sym(h, "cuDriverGetVersion");
        if (gv) gv(&drv_version);
        sb_printf(&b, "{\"t\":\"init\",\"pid\":%d,\"version\":%d,\"driver\":%d,\"gpu\":", (int)getpid(), CAP_VERSION, drv_version);
        sb_str(&b, gpu);
        sb_printf(&b, ",\"data_dir\":");
        if (g_data_dir) sb_str(&b, g_data_dir); else sb_printf(&b, "null");
        sb_printf(&b, ",\"cap\":%llu,\"timing\":%d}", g_cap, g_timing);
        emit(&b);
    }

    CUptiResult r = cuptiSubscribe(&g_sub, (CUpti_CallbackFunc)callback, NULL);
    if (r != CUPTI_SUCCESS) {
        emit_msg("error", "init", "cuptiSubscribe: %s (is another profiler attached?)", cupti_err(r));
        return 1;
    }
    static const CUpti_CallbackId ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        r = cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]);
        if (r != CUPTI_SUCCESS) emit_msg("error", "init", "cuptiEnableCallback(%u): %s", (unsigned)ids[i], cupti_err(r));
    }
    if (g_timing) {
        cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
        r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (r != CUPTI_SUCCESS) {
            emit_msg("error", "init", "kernel timing unavailable: %s", cupti_err(r));
            g_timing = 0;
        }
    }
    atexit(at_exit);
    return 1;
}
