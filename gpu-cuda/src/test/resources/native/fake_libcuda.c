/*
 * A fake CUDA driver library (libcuda.so.1) for CudaDeviceQuery's tests. No cuda.h is packaged for Debian here
 * (it comes with NVIDIA's toolkit), so this is written against the signatures the CUDA Driver API reference documents:
 *   CUresult cuInit(unsigned int Flags);
 *   CUresult cuDeviceGetCount(int *count);
 *   CUresult cuDeviceGet(CUdevice *device, int ordinal);           CUdevice is an int
 *   CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);       CUuuid is struct { char bytes[16]; }
 *   CUresult cuGetErrorName(CUresult error, const char **pStr);
 * CUresult is an int-sized enum: 0 CUDA_SUCCESS, 3 CUDA_ERROR_NOT_INITIALIZED, 100 CUDA_ERROR_NO_DEVICE,
 * 101 CUDA_ERROR_INVALID_DEVICE.
 *
 * Built with -DFAKE_UUIDS="\"<32 hex>,<32 hex>\"" (its devices), optionally -DFAKE_INIT_RESULT=<n> (what cuInit
 * returns) or -DFAKE_CRASH (cuDeviceGetUuid_v2 aborts). Like the real driver it honours CUDA_VISIBLE_DEVICES: a
 * comma-separated list of GPU-<uuid> or ordinals, enumeration stopping at the first entry it has no device for.
 */
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct { char bytes[16]; } CUuuid;

#ifndef FAKE_UUIDS
#define FAKE_UUIDS ""
#endif
#ifndef FAKE_INIT_RESULT
#define FAKE_INIT_RESULT 0
#endif

#define MAX_DEV 64
static unsigned char all[MAX_DEV][16];
static int n_all;
static int visible[MAX_DEV];
static int n_visible;
static int inited;

static int hexval(char c) {
    return isdigit((unsigned char) c) ? c - '0' : tolower((unsigned char) c) - 'a' + 10;
}

static void parse_all(void) {
    const char *s = FAKE_UUIDS;
    n_all = 0;
    while (*s && n_all < MAX_DEV) {
        for (int i = 0; i < 16; i++) {
            all[n_all][i] = (unsigned char) (hexval(s[2 * i]) * 16 + hexval(s[2 * i + 1]));
        }
        n_all++;
        s += 32;
        if (*s == ',') {
            s++;
        }
    }
}

/* the index of the device whose UUID is this token (GPU-8-4-4-4-12), or -1 */
static int find_uuid(const char *tok, size_t len) {
    char hex[33];
    int k = 0;
    if (len < 4 || strncmp(tok, "GPU-", 4) != 0) {
        return -1;
    }
    for (size_t i = 4; i < len && k < 32; i++) {
        if (tok[i] != '-') {
            hex[k++] = (char) tolower((unsigned char) tok[i]);
        }
    }
    hex[k] = 0;
    for (int d = 0; d < n_all; d++) {
        char mine[33];
        for (int i = 0; i < 16; i++) {
            mine[2 * i] = "0123456789abcdef"[all[d][i] >> 4];
            mine[2 * i + 1] = "0123456789abcdef"[all[d][i] & 15];
        }
        mine[32] = 0;
        if (k == 32 && strcmp(hex, mine) == 0) {
            return d;
        }
    }
    return -1;
}

CUresult cuInit(unsigned int flags) {
    if (flags != 0) {
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    }
    if (FAKE_INIT_RESULT != 0) {
        return FAKE_INIT_RESULT;
    }
    parse_all();
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    n_visible = 0;
    if (cvd == NULL) {
        for (int d = 0; d < n_all; d++) {
            visible[n_visible++] = d;
        }
    } else {
        const char *p = cvd;
        while (*p && n_visible < MAX_DEV) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t) (e - p) : strlen(p);
            int d = isdigit((unsigned char) *p) ? atoi(p) : find_uuid(p, len);
            if (d < 0 || d >= n_all) {
                break;
            }
            visible[n_visible++] = d;
            p += len;
            if (*p == ',') {
                p++;
            }
        }
    }
    inited = 1;
    return 0;
}

CUresult cuDeviceGetCount(int *count) {
    if (!inited) {
        return 3;
    }
    *count = n_visible;
    return 0;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!inited) {
        return 3;
    }
    if (ordinal < 0 || ordinal >= n_visible) {
        return 101;
    }
    *device = ordinal;
    return 0;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
#ifdef FAKE_CRASH
    abort();
#endif
    if (!inited) {
        return 3;
    }
    if (dev < 0 || dev >= n_visible) {
        return 101;
    }
    memcpy(uuid->bytes, all[visible[dev]], 16);
    return 0;
}

CUresult cuGetErrorName(CUresult error, const char **pStr) {
    switch (error) {
    case 0: *pStr = "CUDA_SUCCESS"; return 0;
    case 3: *pStr = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *pStr = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 101: *pStr = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    default: *pStr = 0; return 1;
    }
}
