/*
 * A fake librocm_smi64 for gpusched's tests, compiled at test time against the real <rocm_smi/rocm_smi.h>
 * (Debian librocm-smi-dev): 4 MI210-like GPUs by default. Control: init result, init call count, the devices' BDF
 * ids (count 0 to 8), each device's energy accumulator (15.3 uJ a count, or NOT_SUPPORTED), and the node's compute
 * processes with their VRAM (summed over their GPUs, as ROCm SMI gives it) and GPUs. rsmi_init abort()s, like the real library's assert(), when a file named "<this library>.abort"
 * exists (so a child process can be made to die without any control call).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <rocm_smi/rocm_smi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rsmi_status_t init_result = RSMI_STATUS_SUCCESS;
static int initialized = 0;
static int init_calls = 0;
static const unsigned buses[4] = {0x03, 0x26, 0x43, 0x63};
static uint32_t count = 4;
static uint64_t bdfs[8];
static int custom = 0;

static long long energy[8];
typedef struct { uint32_t pid; uint64_t vram; uint32_t ngpus; uint32_t gpus[4]; } fake_proc;
static fake_proc procs[16];
static uint32_t nprocs;

void fake_rsmi_reset(void) {
    init_result = RSMI_STATUS_SUCCESS; init_calls = 0; count = 4; custom = 0; nprocs = 0;
    for (int i = 0; i < 8; i++) energy[i] = 1000000LL * (i + 1);
}
/* Device dv's energy accumulator is now counter (counts of 15.3 uJ); counter < 0: NOT_SUPPORTED */
void fake_rsmi_set_energy(int dv, long long counter) { energy[dv] = counter; }
/* Adds a compute process using ngpus (at most 4) GPUs; vram is its total over them. @return 0, -1 when full */
int fake_rsmi_add_process(uint32_t pid, uint64_t vram, int ngpus, const uint32_t *gpus) {
    if (nprocs == 16 || ngpus < 0 || ngpus > 4) return -1;
    procs[nprocs].pid = pid; procs[nprocs].vram = vram; procs[nprocs].ngpus = (uint32_t) ngpus;
    for (int i = 0; i < ngpus; i++) procs[nprocs].gpus[i] = gpus[i];
    nprocs++;
    return 0;
}
/* sizeof / offsetof of rsmi_process_info_t, for the binding's layout check */
long fake_rsmi_layout(int which) {
    switch (which) {
    case 0: return sizeof(rsmi_process_info_t);
    case 1: return offsetof(rsmi_process_info_t, process_id);
    case 2: return offsetof(rsmi_process_info_t, vram_usage);
    default: return -1;
    }
}
void fake_rsmi_set_devices(int n, const uint64_t *ids) {
    count = n < 0 ? 0 : n > 8 ? 8 : (uint32_t) n;
    for (uint32_t i = 0; i < count; i++) bdfs[i] = ids[i];
    custom = 1;
}
void fake_rsmi_set_init_result(int r) { init_result = (rsmi_status_t) r; }
int fake_rsmi_init_calls(void) { return init_calls; }
int fake_rsmi_initialized(void) { return initialized; }

#define CHECK(dv) do { if (!initialized) return RSMI_STATUS_INIT_ERROR; \
                       if ((dv) >= count) return RSMI_STATUS_INVALID_ARGS; } while (0)

rsmi_status_t rsmi_init(uint64_t flags) {
    (void) flags;
    init_calls++;
    Dl_info info;
    if (dladdr((void *) rsmi_init, &info) && info.dli_fname) {
        char marker[4096];
        snprintf(marker, sizeof marker, "%s.abort", info.dli_fname);
        if (access(marker, F_OK) == 0) {
            fprintf(stderr, "fake_rocm_smi.c: rsmi_init: Assertion `%s is absent' failed.\n", marker);
            abort();
        }
    }
    if (init_result != RSMI_STATUS_SUCCESS) return init_result;
    initialized++;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_shut_down(void) {
    if (!initialized) return RSMI_STATUS_INIT_ERROR;
    initialized--;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_num_monitor_devices(uint32_t *n) {
    if (!initialized) return RSMI_STATUS_INIT_ERROR;
    *n = count;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_name_get(uint32_t dv, char *name, size_t len) {
    CHECK(dv);
    snprintf(name, len, "%s", "AMD Instinct MI210");
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t *id) {
    CHECK(dv);
    *id = 0x1000000000000000ULL + dv;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid) {
    CHECK(dv);
    /* domain 63:32, bus 15:8, device 7:3, function 2:0 */
    *bdfid = custom ? bdfs[dv] : ((uint64_t) 0 << 32) | ((uint64_t) buses[dv] << 8) | (0u << 3) | 0u;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv, rsmi_memory_type_t type, uint64_t *total) {
    CHECK(dv);
    if (type != RSMI_MEM_TYPE_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
    *total = 64ULL << 30;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv, rsmi_memory_type_t type, uint64_t *used) {
    CHECK(dv);
    if (type != RSMI_MEM_TYPE_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
    *used = (uint64_t) (dv + 1) << 30;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *pct) {
    CHECK(dv);
    *pct = 25u * dv;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, rsmi_temperature_metric_t metric,
                                       int64_t *temperature) {
    CHECK(dv);
    if (metric != RSMI_TEMP_CURRENT) return RSMI_STATUS_NOT_SUPPORTED;
    if (sensor == RSMI_TEMP_TYPE_EDGE && dv == 3) return RSMI_STATUS_NOT_SUPPORTED; /* junction only */
    *temperature = sensor == RSMI_TEMP_TYPE_EDGE ? 40000 + 1000 * (int64_t) dv : 70500;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *power) {
    CHECK(dv);
    (void) sensor;
    *power = 150000000ULL + 1000000ULL * dv;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_status_string(rsmi_status_t status, const char **text) {
    *text = status == RSMI_STATUS_INIT_ERROR ? "An error occurred when rsmi initializing internal data structures."
          : "fake status";
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv, uint64_t *power, float *counter_resolution,
                                        uint64_t *timestamp) {
    CHECK(dv);
    if (energy[dv] < 0) return RSMI_STATUS_NOT_SUPPORTED;
    if (power == NULL || counter_resolution == NULL || timestamp == NULL) return RSMI_STATUS_INVALID_ARGS;
    *power = (uint64_t) energy[dv];
    *counter_resolution = 15.3f;
    *timestamp = 1;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t *out, uint32_t *num_items) {
    if (!initialized) return RSMI_STATUS_INIT_ERROR;
    if (num_items == NULL) return RSMI_STATUS_INVALID_ARGS;
    if (out == NULL) { *num_items = nprocs; return RSMI_STATUS_SUCCESS; }
    uint32_t n = *num_items < nprocs ? *num_items : nprocs;
    for (uint32_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].process_id = procs[i].pid;
        out[i].pasid = 0x8000 + i;
        out[i].vram_usage = procs[i].vram;
    }
    *num_items = n;
    return *num_items < nprocs ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *dv_indices, uint32_t *num_devices) {
    if (!initialized) return RSMI_STATUS_INIT_ERROR;
    for (uint32_t i = 0; i < nprocs; i++) {
        if (procs[i].pid != pid) continue;
        if (dv_indices == NULL) { *num_devices = procs[i].ngpus; return RSMI_STATUS_SUCCESS; }
        uint32_t n = *num_devices < procs[i].ngpus ? *num_devices : procs[i].ngpus;
        for (uint32_t k = 0; k < n; k++) dv_indices[k] = procs[i].gpus[k];
        *num_devices = n;
        return n < procs[i].ngpus ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
    }
    return RSMI_STATUS_NOT_FOUND;
}
