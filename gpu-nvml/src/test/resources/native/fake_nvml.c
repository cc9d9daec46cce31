/*
 * A fake libnvidia-ml.so.1 for gpusched's tests, compiled at test time against the real <nvml.h>
 * (Debian libnvidia-ml-dev), so every signature and struct below is checked by the compiler.
 *
 * Scenarios (fake_nvml_set_scenario, before nvmlInit_v2):
 *   0 dgx1  8x Tesla V100-SXM2-32GB, hybrid cube-mesh NVLink to GPUs, minors of GPU 0 and 1 swapped
 *   1 hgx   8x NVIDIA H100 80GB HBM3, 18 NVLinks each into NVSwitches
 *   2 mig   2x NVIDIA A100-SXM4-80GB, GPU 0 in MIG mode with two 3g.40gb devices, 12 NVLinks between them
 * Accounting script (fake_nvml_set_energy, fake_nvml_add_proc, fake_nvml_add_util_sample): each GPU's total-energy
 * counter (or NOT_SUPPORTED, as on GPUs before Volta), the compute processes of a GPU or of one MIG device with their
 * memory (or NVML_VALUE_NOT_AVAILABLE), and the driver's buffer of per-process utilization samples, answered as
 * nvmlDeviceGetProcessUtilization answers: samples newer than lastSeenTimeStamp, NOT_FOUND when there are none,
 * INSUFFICIENT_SIZE (with the count) for a short buffer, NOT_SUPPORTED on MIG devices.
 * Faults: init result, lost GPU, XID events, process lists, and per-function, per-GPU error injection
 * (fake_nvml_inject: any entry point below answers any nvmlReturn_t for one GPU, or for every call with gpu -1).
 * Every entry point counts its calls per GPU and declares its scope (FNS); the tests read both, so an entry point
 * the binding uses but the fake does not model is noticed. Lifecycle checks (fake_nvml_violations): nvmlShutdown
 * while a thread is inside nvmlEventSetWait_v2 or while the event set is still allocated, and any call on a device
 * or the event set after the last nvmlShutdown. fake_nvml_block_wait makes nvmlEventSetWait_v2 block until
 * released, ignoring its timeout. Build with -DOLD_DRIVER to leave out nvmlDeviceGetMemoryInfo_v2 and
 * nvmlDeviceGetNvLinkRemoteDeviceType, as drivers before R510 do. Build with -DNO_PROCESS_CALLS to leave out
 * nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetProcessUtilization and nvmlDeviceGetTotalEnergyConsumption.
 */
#include <nvml.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GPUS 8
#define MAX_MIG 2

struct nvmlDevice_st { int gpu; int mig; /* -1 for a whole GPU */ };
struct nvmlEventSet_st { int used; };

static struct nvmlDevice_st gpus[MAX_GPUS];
static struct nvmlDevice_st migs[MAX_GPUS][MAX_MIG];
static struct nvmlEventSet_st the_set;

static int scenario = 0;
static nvmlReturn_t init_result = NVML_SUCCESS;
static int initialized = 0;
static int lost[MAX_GPUS];
static int proc_count[MAX_GPUS];
static unsigned long long registered[MAX_GPUS];
static long long calls;

/* accounting script */
#define MAX_PROCS 16
#define MAX_SAMPLES 256
static long long energy_mj[MAX_GPUS];      /* the counter; < 0: NOT_SUPPORTED */
static int energy_scripted[MAX_GPUS];
typedef struct { unsigned int pid; unsigned long long mem; } fake_proc;
static fake_proc procs[MAX_GPUS][MAX_MIG + 1][MAX_PROCS]; /* [gpu][0: the whole GPU, 1 + m: MIG device m] */
static int nprocs[MAX_GPUS][MAX_MIG + 1];
static int procs_scripted[MAX_GPUS][MAX_MIG + 1];
typedef struct { unsigned int pid; unsigned long long ts; unsigned int sm; } fake_sample;
static fake_sample util_samples[MAX_GPUS][MAX_SAMPLES];
static int nsamples[MAX_GPUS];
static unsigned long long last_seen_arg[MAX_GPUS];
static long long dev_util[MAX_GPUS] = {-1, -1, -1, -1, -1, -1, -1, -1}; /* -1: the scenario's value */
static long long dev_used[MAX_GPUS] = {-1, -1, -1, -1, -1, -1, -1, -1};
static long long dev_power[MAX_GPUS] = {-1, -1, -1, -1, -1, -1, -1, -1};

typedef struct { int gpu; unsigned long long xid; unsigned int gi, ci; } fake_event;
static fake_event queue[64];
static int q_head, q_len;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* ---- entry points, their scope, call counters and injected errors ---- */
enum { SCOPE_INIT = 1, SCOPE_NODE = 2, SCOPE_DEVICE = 3, SCOPE_PAIR = 4 };
static const struct { const char *name; int scope; } FNS[] = {
    {"nvmlInit_v2", SCOPE_INIT}, {"nvmlShutdown", SCOPE_NODE}, {"nvmlDeviceGetCount_v2", SCOPE_INIT},
    {"nvmlDeviceGetHandleByIndex_v2", SCOPE_DEVICE}, {"nvmlDeviceGetUUID", SCOPE_DEVICE},
    {"nvmlDeviceGetName", SCOPE_DEVICE}, {"nvmlDeviceGetSerial", SCOPE_DEVICE},
    {"nvmlDeviceGetMemoryInfo", SCOPE_DEVICE}, {"nvmlDeviceGetMemoryInfo_v2", SCOPE_DEVICE},
    {"nvmlDeviceGetCudaComputeCapability", SCOPE_DEVICE}, {"nvmlDeviceGetPciInfo_v3", SCOPE_DEVICE},
    {"nvmlDeviceGetMinorNumber", SCOPE_DEVICE}, {"nvmlSystemGetDriverVersion", SCOPE_NODE},
    {"nvmlSystemGetCudaDriverVersion", SCOPE_NODE}, {"nvmlDeviceGetPersistenceMode", SCOPE_DEVICE},
    {"nvmlDeviceGetMigMode", SCOPE_DEVICE}, {"nvmlDeviceGetMaxMigDeviceCount", SCOPE_DEVICE},
    {"nvmlDeviceGetMigDeviceHandleByIndex", SCOPE_DEVICE}, {"nvmlDeviceGetGpuInstanceId", SCOPE_DEVICE},
    {"nvmlDeviceGetComputeInstanceId", SCOPE_DEVICE}, {"nvmlDeviceGetTopologyCommonAncestor", SCOPE_PAIR},
    {"nvmlDeviceGetNvLinkState", SCOPE_DEVICE}, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", SCOPE_DEVICE},
    {"nvmlDeviceGetNvLinkRemoteDeviceType", SCOPE_DEVICE}, {"nvmlDeviceGetUtilizationRates", SCOPE_DEVICE},
    {"nvmlDeviceGetTemperature", SCOPE_DEVICE}, {"nvmlDeviceGetPowerUsage", SCOPE_DEVICE},
    {"nvmlDeviceGetComputeRunningProcesses_v3", SCOPE_DEVICE}, {"nvmlEventSetCreate", SCOPE_NODE},
    {"nvmlDeviceGetSupportedEventTypes", SCOPE_DEVICE}, {"nvmlDeviceRegisterEvents", SCOPE_DEVICE},
    {"nvmlEventSetWait_v2", SCOPE_NODE}, {"nvmlEventSetFree", SCOPE_NODE},
    {"nvmlDeviceGetTotalEnergyConsumption", SCOPE_DEVICE}, {"nvmlDeviceGetProcessUtilization", SCOPE_DEVICE}};
#define NFNS ((int) (sizeof FNS / sizeof FNS[0]))
#define MAX_RULES 16
typedef struct { int fn; int gpu; nvmlReturn_t rc; } rule;
static rule rules[MAX_RULES];
static int nrules;
static long long fn_calls[NFNS][MAX_GPUS + 1]; /* [fn][gpu], slot MAX_GPUS: calls not on one GPU */
static long long fn_hits[NFNS];
static int violations;
static int in_wait, block_wait;

static int fn_index(const char *name) {
    for (int i = 0; i < NFNS; i++) if (strcmp(FNS[i].name, name) == 0) return i;
    return -1;
}
static int fn_index_or_die(const char *fn) {
    int i = fn_index(fn);
    if (i < 0) { fprintf(stderr, "fake_nvml: %s is not in FNS\n", fn); abort(); }
    return i;
}
/* Counts a call of entry point i on GPUs a and b (-1: none) and answers the injected error, or NVML_SUCCESS.
   Cheap without rules (atomic counters, no lock): the polling benchmark runs through it. */
static nvmlReturn_t track(int i, int a, int b) {
    __atomic_fetch_add(&fn_calls[i][a >= 0 && a < MAX_GPUS ? a : MAX_GPUS], 1, __ATOMIC_RELAXED);
    if (b >= 0 && b < MAX_GPUS && b != a) __atomic_fetch_add(&fn_calls[i][b], 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&nrules, __ATOMIC_ACQUIRE) == 0) return NVML_SUCCESS;
    pthread_mutex_lock(&mu);
    nvmlReturn_t rc = NVML_SUCCESS;
    for (int r = 0; r < nrules; r++) {
        if (rules[r].fn == i && (rules[r].gpu < 0 || rules[r].gpu == a || rules[r].gpu == b)) {
            rc = rules[r].rc;
            fn_hits[i]++;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
#define FN_ID() ({ static int fi_ = -1; if (fi_ < 0) fi_ = fn_index_or_die(__func__); fi_; })
#define TRACK(a, b) do { nvmlReturn_t inj_ = track(FN_ID(), (a), (b)); if (inj_ != NVML_SUCCESS) return inj_; } while (0)

static const int dgx1_pairs[][3] = {
    {0,1,1},{0,2,1},{0,3,2},{0,4,2},{1,2,2},{1,3,1},{1,5,2},{2,3,2},
    {2,6,1},{3,7,1},{4,5,1},{4,6,1},{4,7,2},{5,6,2},{5,7,1},{6,7,2}};
static const unsigned int dgx1_bus[] = {0x06, 0x07, 0x0A, 0x0B, 0x85, 0x86, 0x89, 0x8A};
static const unsigned int hgx_bus[] = {0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB};
static const unsigned int mig_bus[] = {0x07, 0x0F};

/* ---- control API for tests ---- */
void fake_nvml_set_scenario(int s) { scenario = s; }
void fake_nvml_reset(void) {
    pthread_mutex_lock(&mu);
    scenario = 0; init_result = NVML_SUCCESS; q_head = q_len = 0;
    memset(lost, 0, sizeof lost); memset(proc_count, 0, sizeof proc_count); memset(registered, 0, sizeof registered);
    nrules = 0; memset(fn_calls, 0, sizeof fn_calls); memset(fn_hits, 0, sizeof fn_hits);
    violations = 0; block_wait = 0;
    memset(energy_mj, 0, sizeof energy_mj); memset(energy_scripted, 0, sizeof energy_scripted);
    memset(nprocs, 0, sizeof nprocs); memset(procs_scripted, 0, sizeof procs_scripted);
    memset(nsamples, 0, sizeof nsamples); memset(last_seen_arg, 0, sizeof last_seen_arg);
    memset(dev_util, 0xFF, sizeof dev_util); memset(dev_used, 0xFF, sizeof dev_used);
    memset(dev_power, 0xFF, sizeof dev_power);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
/* From now on fn answers rc on GPU gpu (any call when gpu is -1). @return 0, or -1 for a name not modelled here */
int fake_nvml_inject(const char *fn, int gpu, int rc) {
    int i = fn_index(fn);
    if (i < 0 || nrules == MAX_RULES) return -1;
    pthread_mutex_lock(&mu);
    rules[nrules] = (rule) {i, gpu, (nvmlReturn_t) rc};
    __atomic_store_n(&nrules, nrules + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&mu);
    return 0;
}
void fake_nvml_clear_injections(void) { pthread_mutex_lock(&mu); nrules = 0; pthread_mutex_unlock(&mu); }
/* @return the scope of an entry point (1 init, 2 node, 3 one device, 4 a pair of devices), 0 if not modelled */
int fake_nvml_scope(const char *fn) { int i = fn_index(fn); return i < 0 ? 0 : FNS[i].scope; }
/* @return calls of fn on GPU gpu (-1: all calls), or -1 for a name not modelled */
long long fake_nvml_calls_of(const char *fn, int gpu) {
    int i = fn_index(fn);
    if (i < 0) return -1;
    long long n = 0;
    pthread_mutex_lock(&mu);
    for (int g = 0; g <= MAX_GPUS; g++) if (gpu < 0 || g == gpu) n += __atomic_load_n(&fn_calls[i][g], __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mu);
    return n;
}
/* @return how many calls of fn answered an injected error */
long long fake_nvml_hits(const char *fn) {
    int i = fn_index(fn);
    if (i < 0) return -1;
    pthread_mutex_lock(&mu);
    long long n = fn_hits[i];
    pthread_mutex_unlock(&mu);
    return n;
}
/* bit 1: nvmlShutdown while a thread waits in nvmlEventSetWait_v2; 2: last nvmlShutdown with the event set still
   allocated; 4: a call on a device or the event set after the last nvmlShutdown */
int fake_nvml_violations(void) { return violations; }
/* 1: nvmlEventSetWait_v2 blocks (ignoring its timeout) until called with 0 */
void fake_nvml_block_wait(int on) { pthread_mutex_lock(&mu); block_wait = on; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu); }
/* @return threads inside nvmlEventSetWait_v2 now */
int fake_nvml_in_wait(void) { pthread_mutex_lock(&mu); int n = in_wait; pthread_mutex_unlock(&mu); return n; }
/* @return 1 while the event set is allocated */
int fake_nvml_event_set_allocated(void) { return the_set.used; }
void fake_nvml_set_init_result(int r) { init_result = (nvmlReturn_t) r; }
void fake_nvml_set_lost(int gpu, int is_lost) { pthread_mutex_lock(&mu); lost[gpu] = is_lost; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu); }
void fake_nvml_set_processes(int gpu, int n) { proc_count[gpu] = n; }
long long fake_nvml_calls(void) { return calls; }
/* GPU gpu's total-energy counter is now mj (mJ since the driver loaded); mj < 0: the call answers NOT_SUPPORTED */
void fake_nvml_set_energy(int gpu, long long mj) {
    pthread_mutex_lock(&mu); energy_mj[gpu] = mj; energy_scripted[gpu] = 1; pthread_mutex_unlock(&mu);
}
/* The compute processes of GPU gpu (mig -1) or of its MIG device mig are scripted, none so far */
void fake_nvml_clear_procs(int gpu, int mig) {
    pthread_mutex_lock(&mu); nprocs[gpu][mig + 1] = 0; procs_scripted[gpu][mig + 1] = 1; pthread_mutex_unlock(&mu);
}
/* Adds (or updates) a compute process; mem < 0: usedGpuMemory is NVML_VALUE_NOT_AVAILABLE. @return 0, -1 when full */
int fake_nvml_add_proc(int gpu, int mig, unsigned int pid, long long mem) {
    int rc = -1;
    pthread_mutex_lock(&mu);
    procs_scripted[gpu][mig + 1] = 1;
    unsigned long long m = mem < 0 ? NVML_VALUE_NOT_AVAILABLE : (unsigned long long) mem;
    for (int i = 0; i < nprocs[gpu][mig + 1]; i++) {
        if (procs[gpu][mig + 1][i].pid == pid) { procs[gpu][mig + 1][i].mem = m; rc = 0; }
    }
    if (rc != 0 && nprocs[gpu][mig + 1] < MAX_PROCS) {
        procs[gpu][mig + 1][nprocs[gpu][mig + 1]++] = (fake_proc) {pid, m};
        rc = 0;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
/* Removes a compute process */
void fake_nvml_remove_proc(int gpu, int mig, unsigned int pid) {
    pthread_mutex_lock(&mu);
    int n = nprocs[gpu][mig + 1];
    for (int i = 0; i < n; i++) {
        if (procs[gpu][mig + 1][i].pid == pid) { procs[gpu][mig + 1][i] = procs[gpu][mig + 1][n - 1]; n--; break; }
    }
    nprocs[gpu][mig + 1] = n;
    pthread_mutex_unlock(&mu);
}
/* The driver recorded a per-process SM utilization sample on GPU gpu at CPU time ts (us). @return 0, -1 when full */
int fake_nvml_add_util_sample(int gpu, unsigned int pid, unsigned long long ts, unsigned int sm) {
    pthread_mutex_lock(&mu);
    int rc = -1;
    if (nsamples[gpu] < MAX_SAMPLES) { util_samples[gpu][nsamples[gpu]++] = (fake_sample) {pid, ts, sm}; rc = 0; }
    pthread_mutex_unlock(&mu);
    return rc;
}
/* GPU gpu's utilization (%), memory used (bytes) and power (mW) from now on; -1 keeps the scenario's value */
void fake_nvml_set_device(int gpu, long long util, long long used, long long power_mw) {
    pthread_mutex_lock(&mu); dev_util[gpu] = util; dev_used[gpu] = used; dev_power[gpu] = power_mw;
    pthread_mutex_unlock(&mu);
}
/* @return the lastSeenTimeStamp of the last nvmlDeviceGetProcessUtilization call about GPU gpu */
unsigned long long fake_nvml_last_seen(int gpu) { return last_seen_arg[gpu]; }
int fake_nvml_initialized(void) { return initialized; }
int fake_nvml_push_xid(int gpu, unsigned long long xid, unsigned int gi, unsigned int ci) {
    pthread_mutex_lock(&mu);
    if (q_len == 64 || !(registered[gpu] & nvmlEventTypeXidCriticalError)) { pthread_mutex_unlock(&mu); return 0; }
    queue[(q_head + q_len++) % 64] = (fake_event) {gpu, xid, gi, ci};
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return 1;
}
/* sizeof / offsetof of the real header's structs, for the binding's layout test */
long fake_nvml_layout(int which) {
    switch (which) {
    case 0: return sizeof(nvmlPciInfo_t);
    case 1: return offsetof(nvmlPciInfo_t, domain);
    case 2: return offsetof(nvmlPciInfo_t, bus);
    case 3: return offsetof(nvmlPciInfo_t, device);
    case 4: return offsetof(nvmlPciInfo_t, pciDeviceId);
    case 5: return offsetof(nvmlPciInfo_t, busId);
    case 6: return sizeof(nvmlMemory_t);
    case 7: return offsetof(nvmlMemory_t, total);
    case 8: return offsetof(nvmlMemory_t, used);
    case 9: return sizeof(nvmlMemory_v2_t);
    case 10: return offsetof(nvmlMemory_v2_t, total);
    case 11: return offsetof(nvmlMemory_v2_t, used);
    case 12: return nvmlMemory_v2;
    case 13: return sizeof(nvmlUtilization_t);
    case 14: return offsetof(nvmlUtilization_t, gpu);
    case 15: return sizeof(nvmlEventData_t);
    case 16: return offsetof(nvmlEventData_t, eventType);
    case 17: return offsetof(nvmlEventData_t, eventData);
    case 18: return offsetof(nvmlEventData_t, gpuInstanceId);
    case 19: return offsetof(nvmlEventData_t, computeInstanceId);
    case 20: return sizeof(nvmlProcessInfo_t);
    case 21: return offsetof(nvmlProcessInfo_t, pid);
    case 22: return offsetof(nvmlProcessInfo_t, usedGpuMemory);
    case 23: return nvmlEventTypeXidCriticalError;
    case 24: return NVML_NVLINK_MAX_LINKS;
    case 25: return NVML_NVLINK_DEVICE_TYPE_SWITCH;
    case 26: return NVML_DEVICE_UUID_V2_BUFFER_SIZE;
    case 27: return sizeof(nvmlProcessUtilizationSample_t);
    case 28: return offsetof(nvmlProcessUtilizationSample_t, pid);
    case 29: return offsetof(nvmlProcessUtilizationSample_t, timeStamp);
    case 30: return offsetof(nvmlProcessUtilizationSample_t, smUtil);
    case 31: return offsetof(nvmlProcessInfo_t, gpuInstanceId);
    case 32: return offsetof(nvmlProcessInfo_t, computeInstanceId);
    case 33: return (long) NVML_VALUE_NOT_AVAILABLE;
    default: return -1;
    }
}

/* ---- helpers ---- */
static int ngpus(void) { return scenario == 2 ? 2 : 8; }
static int valid(nvmlDevice_t d) {
    if (!initialized) { violations |= 4; return 0; }
    if (d == NULL) return 0;
    if (d >= &gpus[0] && d < &gpus[MAX_GPUS]) return d->gpu < ngpus();
    if (d >= &migs[0][0] && d <= &migs[MAX_GPUS - 1][MAX_MIG - 1]) return scenario == 2 && d->gpu == 0;
    return 0;
}
#define ENTER(d) do { __sync_fetch_and_add(&calls, 1); if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT; \
                      TRACK((d)->gpu, -1); if (lost[(d)->gpu]) return NVML_ERROR_GPU_IS_LOST; } while (0)
static unsigned int bus_of(int g) { return scenario == 0 ? dgx1_bus[g] : scenario == 1 ? hgx_bus[g] : mig_bus[g]; }
static unsigned long long total_of(nvmlDevice_t d) {
    if (d->mig >= 0) return 40ULL << 30;
    return scenario == 0 ? 32ULL << 30 : 80ULL << 30;
}

/* A GPU's scripted memory used, else the scenario's; a MIG device with scripted processes: their memory's sum */
static unsigned long long used_of(nvmlDevice_t d) {
    long long v = d->mig < 0 ? __atomic_load_n(&dev_used[d->gpu], __ATOMIC_RELAXED) : -1;
    if (d->mig >= 0) {
        pthread_mutex_lock(&mu);
        if (procs_scripted[d->gpu][d->mig + 1]) {
            v = 0;
            for (int i = 0; i < nprocs[d->gpu][d->mig + 1]; i++) {
                unsigned long long m = procs[d->gpu][d->mig + 1][i].mem;
                if (m != (unsigned long long) NVML_VALUE_NOT_AVAILABLE) v += (long long) m;
            }
        }
        pthread_mutex_unlock(&mu);
    }
    return v >= 0 ? (unsigned long long) v : (unsigned long long) (d->gpu + 1) << 30;
}

/* ---- NVML ---- */
nvmlReturn_t nvmlInit_v2(void) {
    if (init_result != NVML_SUCCESS) return init_result;
    TRACK(-1, -1);
    for (int g = 0; g < MAX_GPUS; g++) {
        gpus[g] = (struct nvmlDevice_st) {g, -1};
        for (int m = 0; m < MAX_MIG; m++) migs[g][m] = (struct nvmlDevice_st) {g, m};
    }
    initialized++;
    return NVML_SUCCESS;
}
/* An injected error is answered after shutting down: the caller cannot do more than log it. */
nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t inj = track(FN_ID(), -1, -1);
    pthread_mutex_lock(&mu);
    if (initialized == 1) {
        if (in_wait > 0) violations |= 1;
        if (the_set.used) violations |= 2;
    }
    initialized--;
    pthread_mutex_unlock(&mu);
    return inj;
}
const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    TRACK(-1, -1);
    *count = ngpus();
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned) ngpus()) return NVML_ERROR_INVALID_ARGUMENT;
    TRACK((int) index, -1);
    *device = &gpus[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    ENTER(d);
    if (d->mig >= 0) snprintf(uuid, length, "MIG-fa4e0000-0000-4000-8000-0000000000%d%d", d->gpu, d->mig);
    else snprintf(uuid, length, "GPU-fa4e0000-0000-4000-8000-%012d", scenario * 100 + d->gpu);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    ENTER(d);
    const char *n = scenario == 0 ? "Tesla V100-SXM2-32GB" : scenario == 1 ? "NVIDIA H100 80GB HBM3"
                  : d->mig >= 0 ? "NVIDIA A100-SXM4-80GB MIG 3g.40gb" : "NVIDIA A100-SXM4-80GB";
    snprintf(name, length, "%s", n);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *serial, unsigned int length) {
    ENTER(d);
    snprintf(serial, length, "13240000%05d", d->gpu);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    ENTER(d);
    m->total = total_of(d);
    m->used = used_of(d);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
#ifndef OLD_DRIVER
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    ENTER(d);
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    m->total = total_of(d);
    m->reserved = 512ULL << 20;
    m->used = used_of(d);
    m->free = m->total - m->used - m->reserved;
    return NVML_SUCCESS;
}
#endif
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    ENTER(d);
    *major = scenario == 0 ? 7 : scenario == 1 ? 9 : 8;
    *minor = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    ENTER(d);
    memset(pci, 0, sizeof *pci);
    pci->domain = 0;
    pci->bus = bus_of(d->gpu);
    pci->device = 0;
    pci->pciDeviceId = scenario == 0 ? 0x1DB510DE : scenario == 1 ? 0x233010DE : 0x20B210DE;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, 0, pci->bus, 0);
    snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, 0, pci->bus, 0);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
    ENTER(d);
    *minor = scenario == 0 && d->gpu < 2 ? 1 - d->gpu : d->gpu;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    TRACK(-1, -1);
    snprintf(version, length, "%s", "580.65.06");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    TRACK(-1, -1);
    *v = 13000;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, nvmlEnableState_t *mode) {
    ENTER(d);
    *mode = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    ENTER(d);
    if (scenario != 2) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = d->gpu == 0 ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count) {
    ENTER(d);
    *count = scenario == 2 && d->gpu == 0 ? 7 : 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t *mig) {
    ENTER(d);
    if (scenario != 2 || d->gpu != 0 || d->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= MAX_MIG) return NVML_ERROR_NOT_FOUND;
    *mig = &migs[0][index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id) {
    ENTER(d);
    if (d->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned) d->mig + 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id) {
    ENTER(d);
    if (d->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuTopologyLevel_t *level) {
    __sync_fetch_and_add(&calls, 1);
    if (!valid(a) || !valid(b)) return NVML_ERROR_INVALID_ARGUMENT;
    TRACK(a->gpu, b->gpu);
    if (lost[a->gpu] || lost[b->gpu]) return NVML_ERROR_GPU_IS_LOST;
    int x = a->gpu, y = b->gpu;
    if (x == y) *level = NVML_TOPOLOGY_INTERNAL;
    else if (scenario == 0 && x / 2 == y / 2) *level = NVML_TOPOLOGY_SINGLE;
    else if (x / 4 == y / 4) *level = scenario == 0 ? NVML_TOPOLOGY_HOSTBRIDGE : NVML_TOPOLOGY_NODE;
    else *level = NVML_TOPOLOGY_SYSTEM;
    return NVML_SUCCESS;
}
/* the GPU (or -1 for a switch) at the other end of one link, -2 when the link does not exist */
static int link_peer(int g, unsigned int link) {
    if (scenario == 1) return link < 18 ? -1 : -2;
    if (scenario == 2) return link < 12 ? 1 - g : -2;
    unsigned int n = 0;
    for (size_t i = 0; i < sizeof dgx1_pairs / sizeof dgx1_pairs[0]; i++) {
        int a = dgx1_pairs[i][0], b = dgx1_pairs[i][1], c = dgx1_pairs[i][2];
        if (a != g && b != g) continue;
        for (int k = 0; k < c; k++, n++) if (n == link) return a == g ? b : a;
    }
    return -2;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, nvmlEnableState_t *active) {
    ENTER(d);
    if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    *active = link_peer(d->gpu, link) == -2 ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *pci) {
    ENTER(d);
    int p = link_peer(d->gpu, link);
    if (p == -2) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = p >= 0 ? bus_of(p) : 0xC0 + link % 4; /* an NVSwitch's own bus */
    snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, 0, pci->bus, 0);
    return NVML_SUCCESS;
}
#ifndef OLD_DRIVER
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, nvmlIntNvLinkDeviceType_t *t) {
    ENTER(d);
    int p = link_peer(d->gpu, link);
    if (p == -2) return NVML_ERROR_INVALID_ARGUMENT;
    *t = p == -1 ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
}
#endif
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    ENTER(d);
    if (d->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    long long su = __atomic_load_n(&dev_util[d->gpu], __ATOMIC_RELAXED);
    u->gpu = su >= 0 ? (unsigned) su : (unsigned) (d->gpu * 10) % 100;
    u->memory = 5;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t sensor, unsigned int *temp) {
    ENTER(d);
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 30u + (unsigned) d->gpu;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *power) {
    ENTER(d);
    if (d->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    long long sp = __atomic_load_n(&dev_power[d->gpu], __ATOMIC_RELAXED);
    *power = sp >= 0 ? (unsigned) sp : (100u + (unsigned) d->gpu) * 1000u + 500u;
    return NVML_SUCCESS;
}
#ifndef NO_PROCESS_CALLS
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    ENTER(d);
    int slot = d->mig + 1;
    pthread_mutex_lock(&mu);
    int scripted = procs_scripted[d->gpu][slot];
    unsigned int n = scripted ? (unsigned) nprocs[d->gpu][slot] : (unsigned) proc_count[d->gpu];
    if (*count < n) { *count = n; pthread_mutex_unlock(&mu); return NVML_ERROR_INSUFFICIENT_SIZE; }
    for (unsigned int i = 0; i < n; i++) {
        infos[i].pid = scripted ? procs[d->gpu][slot][i].pid : 4200 + i;
        infos[i].usedGpuMemory = scripted ? procs[d->gpu][slot][i].mem : (unsigned long long) (i + 1) << 30;
        infos[i].gpuInstanceId = d->mig >= 0 ? (unsigned) d->mig + 1 : 0xFFFFFFFF;
        infos[i].computeInstanceId = d->mig >= 0 ? 0 : 0xFFFFFFFF;
    }
    pthread_mutex_unlock(&mu);
    *count = n;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy) {
    ENTER(d);
    if (d->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&mu);
    long long e = energy_scripted[d->gpu] ? energy_mj[d->gpu] : 1000000LL * (d->gpu + 1);
    pthread_mutex_unlock(&mu);
    if (e < 0) return NVML_ERROR_NOT_SUPPORTED;
    *energy = (unsigned long long) e;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp) {
    ENTER(d);
    if (processSamplesCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&mu);
    last_seen_arg[d->gpu] = lastSeenTimeStamp;
    unsigned int n = 0;
    for (int i = 0; i < nsamples[d->gpu]; i++) if (util_samples[d->gpu][i].ts > lastSeenTimeStamp) n++;
    if (n == 0) { *processSamplesCount = 0; pthread_mutex_unlock(&mu); return NVML_ERROR_NOT_FOUND; }
    if (utilization == NULL || *processSamplesCount < n) {
        *processSamplesCount = n;
        pthread_mutex_unlock(&mu);
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int k = 0;
    for (int i = 0; i < nsamples[d->gpu]; i++) {
        fake_sample *s = &util_samples[d->gpu][i];
        if (s->ts <= lastSeenTimeStamp) continue;
        utilization[k] = (nvmlProcessUtilizationSample_t) {.pid = s->pid, .timeStamp = s->ts, .smUtil = s->sm,
                                                           .memUtil = 0, .encUtil = 0, .decUtil = 0};
        k++;
    }
    pthread_mutex_unlock(&mu);
    *processSamplesCount = k;
    return NVML_SUCCESS;
}
#endif
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    TRACK(-1, -1);
    the_set.used = 1;
    *set = &the_set;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
    ENTER(d);
    *types = nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeSingleBitEccError;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
    ENTER(d);
    if (set != &the_set) return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&mu);
    registered[d->gpu] |= types;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    if (!initialized) { violations |= 4; return NVML_ERROR_UNINITIALIZED; }
    if (set != &the_set || !the_set.used) return NVML_ERROR_INVALID_ARGUMENT;
    TRACK(-1, -1);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeoutms / 1000;
    until.tv_nsec += (long) (timeoutms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&mu);
    in_wait++;
    while (block_wait) pthread_cond_wait(&cv, &mu);
    for (;;) {
        for (int g = 0; g < MAX_GPUS; g++) {
            if (lost[g]) { in_wait--; pthread_mutex_unlock(&mu); return NVML_ERROR_GPU_IS_LOST; }
        }
        if (q_len > 0) break;
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0) {
            in_wait--;
            pthread_mutex_unlock(&mu);
            return NVML_ERROR_TIMEOUT;
        }
    }
    in_wait--;
    fake_event e = queue[q_head];
    q_head = (q_head + 1) % 64;
    q_len--;
    pthread_mutex_unlock(&mu);
    data->device = &gpus[e.gpu];
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = e.xid;
    data->gpuInstanceId = e.gi;
    data->computeInstanceId = e.ci;
    return NVML_SUCCESS;
}
/* An injected error is answered after freeing the set. */
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    if (!initialized) violations |= 4;
    if (set != &the_set) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t inj = track(FN_ID(), -1, -1);
    the_set.used = 0;
    return inj;
}
