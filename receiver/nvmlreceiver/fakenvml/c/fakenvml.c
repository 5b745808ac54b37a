// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// A fake libnvidia-ml.so.1 for tests. It is compiled against the nvml.h that
// go-nvml ships, so every exported function has the real signature and every
// struct the real layout (a mismatch is a compile error). What it answers is
// read from text files:
//
//   FAKE_NVML_SCENARIO  static truth, read by the first nvmlInit and by any
//                       later one that names another file:
//     driver <version>
//     gpu <index> key=value ...          (see parse_gpu for the keys)
//     sample <gpu> gpu|mem <ts_us> <percent>
//     proc <gpu> <pid> <bytes>
//     putil <gpu> <pid> <ts_us> <sm_percent>
//     mig <gpu> <slot> <uuid> <gi> <ci> <total> <used> <reserved>
//     migproc <gpu> <slot> <pid> <bytes>
//     realtime                           with no clock in the state file, the
//                                        clock is the wall clock (CLOCK_REALTIME)
//     power <gpu> <from_us> <mw>         the power draw from a time on: the
//                                        energy counter grows by it,
//                                        nvmlDeviceGetPowerUsage reports it,
//                                        and the power readings of
//                                        nvmlDeviceGetSamples (one every 20 ms,
//                                        the newest 120) are its means
//     procmem <gpu> <pid> <from_us> <bytes>  a process's memory from a time
//                                        on (0: the process is gone)
//     gpm <gpu> <gi> <from_us> <sm> <occupancy> <tensor> <dram>
//                                        GPM metrics (percent) from a time
//                                        on, of the GPU (gi -1) or of its
//                                        MIG GPU instance gi; needs gpm=on.
//                                        nvmlGpmMetricsGet gives the
//                                        time-weighted mean of the steps
//                                        between the two samples' times
//   FAKE_NVML_STATE     what changes during a run, re-read when it changes:
//     clock <us>        samples newer than this are not yet "taken"
//     lost <gpu>        the GPU answers NVML_ERROR_GPU_IS_LOST; when the line
//                       goes away the GPU is back with a new handle
//     xid <gpu> <code>  one XID event each, delivered once, in order
//   FAKE_NVML_REPORT    when set, every nvmlShutdown writes there how many
//                       GPM samples are allocated and not freed:
//     gpm_samples_live <n>
//
// Compile-time variants model older drivers and broken builds:
// -DFAKE_NO_V3 drops nvmlDeviceGetComputeRunningProcesses_v3 (drivers before
// R470); -DFAKE_NO_TEMPERATURE drops nvmlDeviceGetTemperature and
// -DFAKE_WRONG_PROCESS_LAYOUT writes v1 process records into the v3 buffer,
// both for the test harness's self-check.

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include "nvml.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_GPUS 16
#define MAX_SAMPLES 4096
#define MAX_PROCS 16
#define MAX_MIG 8
#define MAX_XID 64

typedef struct { unsigned long long ts; unsigned int v; } fake_sample;
typedef struct { unsigned int pid; unsigned long long ts; unsigned int sm; } fake_putil;
typedef struct { unsigned int pid; unsigned long long mem; } fake_proc;
typedef struct { unsigned long long from; unsigned long long mw; } fake_power;
typedef struct { unsigned int pid; unsigned long long from, mem; } fake_procmem;
#define GPM_VALUES 4 // SM activity, SM occupancy, any tensor, DRAM bandwidth
typedef struct { int gi; unsigned long long from; double v[GPM_VALUES]; } fake_gpm;
#define MAX_GPM 1024

struct fake_dev; // opaque nvmlDevice_st: the handle NVML hands out

typedef struct {
	int present, slot, gi, ci;
	char uuid[96];
	unsigned long long total, used, reserved;
	fake_proc procs[MAX_PROCS];
	int nprocs;
} fake_mig;

typedef struct {
	int present;
	char uuid[96], name[96], bus[32];
	unsigned long long mem_total, mem_used, mem_reserved, energy_mj;
	unsigned int temp, power_mw, power_limit_mw, clock_sm, clock_mem, clock_gfx;
	unsigned long long ecc_corr, ecc_uncorr, throttle_supported, throttle_current;
	unsigned int pcie_tx_kib, pcie_rx_kib, util_gpu, util_mem;
	int power_unsupported, ecc_unsupported, mig_mode, samples_unsupported;
	int gpm; // 0: not a GPM device (isSupportedDevice 0); 1: gpm=on; -1: gpm=unsupported (NOT_SUPPORTED)
	fake_gpm gpm_steps[MAX_GPM];
	int ngpm;
	fake_sample gpu_samples[MAX_SAMPLES], mem_samples[MAX_SAMPLES];
	int ngpu_samples, nmem_samples;
	fake_proc procs[MAX_PROCS];
	int nprocs;
	fake_putil putil[MAX_SAMPLES];
	int nputil;
	fake_power power[MAX_SAMPLES];
	int npower;
	fake_procmem procmem[MAX_SAMPLES];
	int nprocmem;
	fake_mig mig[MAX_MIG];
	int generation; // bumped when a lost GPU comes back
} fake_gpu;

struct nvmlDevice_st {
	int gpu, generation, mig_slot; // mig_slot -1: the physical GPU
};

struct nvmlEventSet_st {
	int registered[MAX_GPUS];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static char driver[64] = "999.99";
static fake_gpu gpus[MAX_GPUS];
static int ngpus;
static int realtime;
static char loaded_scenario[4096];

// state
static struct timespec state_mtime;
static off_t state_size = -1;
static ino_t state_ino;
static unsigned long long clock_us = ~0ULL;
static int lost[MAX_GPUS];
static struct { int gpu; unsigned long long code; } xids[MAX_XID];
static int nxids, xids_delivered;
// Handles live as long as the process: a stale one must stay readable.
static struct nvmlDevice_st *handles[MAX_GPUS][64];
static struct nvmlDevice_st *mig_handles[MAX_GPUS][64][MAX_MIG];

static void parse_gpu(char *rest) {
	int idx = atoi(strtok(rest, " \t\n"));
	if (idx < 0 || idx >= MAX_GPUS) return;
	fake_gpu *g = &gpus[idx];
	g->present = 1;
	if (idx + 1 > ngpus) ngpus = idx + 1;
	char *tok;
	while ((tok = strtok(NULL, " \t\n")) != NULL) {
		char *eq = strchr(tok, '=');
		if (!eq) continue;
		*eq = 0;
		const char *k = tok, *v = eq + 1;
		unsigned long long n = strtoull(v, NULL, 0);
		if (!strcmp(k, "uuid")) snprintf(g->uuid, sizeof g->uuid, "%s", v);
		else if (!strcmp(k, "name")) {
			snprintf(g->name, sizeof g->name, "%s", v);
			for (char *p = g->name; *p; p++) if (*p == '_') *p = ' ';
		}
		else if (!strcmp(k, "bus")) snprintf(g->bus, sizeof g->bus, "%s", v);
		else if (!strcmp(k, "mem_total")) g->mem_total = n;
		else if (!strcmp(k, "mem_used")) g->mem_used = n;
		else if (!strcmp(k, "mem_reserved")) g->mem_reserved = n;
		else if (!strcmp(k, "temp")) g->temp = n;
		else if (!strcmp(k, "power_mw")) g->power_mw = n;
		else if (!strcmp(k, "power_limit_mw")) g->power_limit_mw = n;
		else if (!strcmp(k, "energy_mj")) g->energy_mj = n;
		else if (!strcmp(k, "clock_sm")) g->clock_sm = n;
		else if (!strcmp(k, "clock_mem")) g->clock_mem = n;
		else if (!strcmp(k, "clock_gfx")) g->clock_gfx = n;
		else if (!strcmp(k, "ecc_corr")) g->ecc_corr = n;
		else if (!strcmp(k, "ecc_uncorr")) g->ecc_uncorr = n;
		else if (!strcmp(k, "throttle_supported")) g->throttle_supported = n;
		else if (!strcmp(k, "throttle_current")) g->throttle_current = n;
		else if (!strcmp(k, "pcie_tx_kib")) g->pcie_tx_kib = n;
		else if (!strcmp(k, "pcie_rx_kib")) g->pcie_rx_kib = n;
		else if (!strcmp(k, "util_gpu")) g->util_gpu = n;
		else if (!strcmp(k, "util_mem")) g->util_mem = n;
		else if (!strcmp(k, "power")) g->power_unsupported = !strcmp(v, "unsupported");
		else if (!strcmp(k, "ecc")) g->ecc_unsupported = !strcmp(v, "unsupported");
		else if (!strcmp(k, "mig")) g->mig_mode = !strcmp(v, "on");
		else if (!strcmp(k, "samples")) g->samples_unsupported = !strcmp(v, "unsupported");
		else if (!strcmp(k, "gpm")) g->gpm = !strcmp(v, "on") ? 1 : !strcmp(v, "unsupported") ? -1 : 0;
	}
}

static int load_scenario(void) {
	const char *path = getenv("FAKE_NVML_SCENARIO");
	if (!path) return 0; // no scenario: a driver with no GPU
	FILE *f = fopen(path, "r");
	if (!f) return -1;
	char line[1024];
	while (fgets(line, sizeof line, f)) {
		char kw[16];
		int off = 0;
		if (sscanf(line, "%15s %n", kw, &off) != 1) continue;
		char *rest = line + off;
		int gi, slot;
		unsigned long long a, b, c;
		unsigned int pid, gid, cid;
		char kind[8], uuid[96];
		if (!strcmp(kw, "driver")) sscanf(rest, "%63s", driver);
		else if (!strcmp(kw, "gpu")) parse_gpu(rest);
		else if (!strcmp(kw, "realtime")) realtime = 1;
		else if (!strcmp(kw, "power") && sscanf(rest, "%d %llu %llu", &gi, &a, &b) == 3 && gi >= 0 && gi < MAX_GPUS && gpus[gi].npower < MAX_SAMPLES) {
			gpus[gi].power[gpus[gi].npower++] = (fake_power){a, b};
		} else if (!strcmp(kw, "procmem") && sscanf(rest, "%d %u %llu %llu", &gi, &pid, &a, &b) == 4 && gi >= 0 && gi < MAX_GPUS && gpus[gi].nprocmem < MAX_SAMPLES) {
			gpus[gi].procmem[gpus[gi].nprocmem++] = (fake_procmem){pid, a, b};
		}
		else if (!strcmp(kw, "gpm")) {
			fake_gpm st;
			if (sscanf(rest, "%d %d %llu %lf %lf %lf %lf", &gi, &st.gi, &st.from, &st.v[0], &st.v[1], &st.v[2], &st.v[3]) == 7 &&
			    gi >= 0 && gi < MAX_GPUS && gpus[gi].ngpm < MAX_GPM)
				gpus[gi].gpm_steps[gpus[gi].ngpm++] = st;
		}
		else if (!strcmp(kw, "sample") && sscanf(rest, "%d %7s %llu %llu", &gi, kind, &a, &b) == 4 && gi >= 0 && gi < MAX_GPUS) {
			fake_gpu *g = &gpus[gi];
			if (!strcmp(kind, "gpu") && g->ngpu_samples < MAX_SAMPLES) g->gpu_samples[g->ngpu_samples++] = (fake_sample){a, (unsigned)b};
			if (!strcmp(kind, "mem") && g->nmem_samples < MAX_SAMPLES) g->mem_samples[g->nmem_samples++] = (fake_sample){a, (unsigned)b};
		} else if (!strcmp(kw, "proc") && sscanf(rest, "%d %u %llu", &gi, &pid, &a) == 3 && gi >= 0 && gi < MAX_GPUS && gpus[gi].nprocs < MAX_PROCS) {
			gpus[gi].procs[gpus[gi].nprocs++] = (fake_proc){pid, a};
		} else if (!strcmp(kw, "putil") && sscanf(rest, "%d %u %llu %llu", &gi, &pid, &a, &b) == 4 && gi >= 0 && gi < MAX_GPUS && gpus[gi].nputil < MAX_SAMPLES) {
			gpus[gi].putil[gpus[gi].nputil++] = (fake_putil){pid, a, (unsigned)b};
		} else if (!strcmp(kw, "mig") && sscanf(rest, "%d %d %95s %u %u %llu %llu %llu", &gi, &slot, uuid, &gid, &cid, &a, &b, &c) == 8 &&
		           gi >= 0 && gi < MAX_GPUS && slot >= 0 && slot < MAX_MIG) {
			fake_mig *m = &gpus[gi].mig[slot];
			m->present = 1; m->slot = slot; m->gi = gid; m->ci = cid;
			snprintf(m->uuid, sizeof m->uuid, "%s", uuid);
			m->total = a; m->used = b; m->reserved = c;
		} else if (!strcmp(kw, "migproc") && sscanf(rest, "%d %d %u %llu", &gi, &slot, &pid, &a) == 4 &&
		           gi >= 0 && gi < MAX_GPUS && slot >= 0 && slot < MAX_MIG && gpus[gi].mig[slot].nprocs < MAX_PROCS) {
			gpus[gi].mig[slot].procs[gpus[gi].mig[slot].nprocs++] = (fake_proc){pid, a};
		}
	}
	fclose(f);
	return 0;
}

// refresh_state re-reads FAKE_NVML_STATE when it changed. Called with mu held.
static void refresh_state(void) {
	const char *path = getenv("FAKE_NVML_STATE");
	if (!path) return;
	struct stat st;
	if (stat(path, &st) != 0) return;
	if (st.st_ino == state_ino && st.st_size == state_size && st.st_mtim.tv_sec == state_mtime.tv_sec && st.st_mtim.tv_nsec == state_mtime.tv_nsec) return;
	FILE *f = fopen(path, "r");
	if (!f) return;
	state_size = st.st_size;
	state_ino = st.st_ino;
	state_mtime = st.st_mtim;
	int was_lost[MAX_GPUS];
	memcpy(was_lost, lost, sizeof lost);
	memset(lost, 0, sizeof lost);
	clock_us = ~0ULL;
	nxids = 0;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		unsigned long long a;
		int gi;
		if (sscanf(line, "clock %llu", &a) == 1) clock_us = a;
		else if (sscanf(line, "lost %d", &gi) == 1 && gi >= 0 && gi < MAX_GPUS) lost[gi] = 1;
		else if (sscanf(line, "xid %d %llu", &gi, &a) == 2 && nxids < MAX_XID) {
			xids[nxids].gpu = gi;
			xids[nxids].code = a;
			nxids++;
		}
	}
	fclose(f);
	for (int i = 0; i < MAX_GPUS; i++)
		if (was_lost[i] && !lost[i]) gpus[i].generation++; // back, as a new device
}

// now_us is the fake's clock: the state file's, else the wall clock in
// realtime mode, else "after every sample". Called with mu held.
static unsigned long long now_us(void) {
	if (clock_us != ~0ULL || !realtime) return clock_us;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL;
}

// energy_at is the counter at t: the base plus each power step's draw over
// its span before t (mW * us / 1e6 = mJ), truncated as NVML's integer is.
static unsigned long long energy_at(const fake_gpu *g, unsigned long long t) {
	double mj = 0;
	for (int i = 0; i < g->npower; i++) {
		unsigned long long from = g->power[i].from;
		unsigned long long to = i + 1 < g->npower ? g->power[i + 1].from : ~0ULL;
		if (t < to) to = t;
		if (to > from) mj += (double)g->power[i].mw * (double)(to - from) / 1e6;
	}
	return g->energy_mj + (unsigned long long)mj;
}

// mean_mw is the mean draw over (a, b]: the scripted steps, else power_mw.
static double mean_mw(const fake_gpu *g, unsigned long long a, unsigned long long b) {
	if (g->npower == 0) return g->power_mw;
	double mj = 0;
	for (int i = 0; i < g->npower; i++) {
		unsigned long long from = g->power[i].from > a ? g->power[i].from : a;
		unsigned long long to = i + 1 < g->npower ? g->power[i + 1].from : ~0ULL;
		if (to > b) to = b;
		if (to > from) mj += (double)g->power[i].mw * (double)(to - from) / 1e6;
	}
	return mj * 1e6 / (double)(b - a);
}

// power_at is the scripted draw at t, or the static power_mw.
static unsigned int power_at(const fake_gpu *g, unsigned long long t) {
	unsigned int mw = g->power_mw;
	for (int i = 0; i < g->npower && g->power[i].from <= t; i++) mw = (unsigned int)g->power[i].mw;
	return mw;
}

static struct nvmlDevice_st *handle_of(int gpu, int mig_slot) {
	int gen = gpus[gpu].generation % 64;
	struct nvmlDevice_st **h = mig_slot < 0 ? &handles[gpu][gen] : &mig_handles[gpu][gen][mig_slot];
	if (!*h || (*h)->generation != gpus[gpu].generation) {
		*h = calloc(1, sizeof **h);
		(*h)->gpu = gpu;
		(*h)->generation = gpus[gpu].generation;
		(*h)->mig_slot = mig_slot;
	}
	return *h;
}

// dev_check validates a handle; it takes mu and leaves it held on SUCCESS.
static nvmlReturn_t dev_check(struct nvmlDevice_st *d) {
	pthread_mutex_lock(&mu);
	if (!initialized) { pthread_mutex_unlock(&mu); return NVML_ERROR_UNINITIALIZED; }
	if (!d || d->gpu < 0 || d->gpu >= MAX_GPUS || !gpus[d->gpu].present) { pthread_mutex_unlock(&mu); return NVML_ERROR_INVALID_ARGUMENT; }
	refresh_state();
	if (lost[d->gpu] || d->generation != gpus[d->gpu].generation) { pthread_mutex_unlock(&mu); return NVML_ERROR_GPU_IS_LOST; }
	return NVML_SUCCESS;
}
#define DEV(dv) struct nvmlDevice_st *d = (dv).handle; do { nvmlReturn_t r_ = dev_check(d); if (r_ != NVML_SUCCESS) return r_; } while (0)
#define RET(x) do { nvmlReturn_t r_ = (x); pthread_mutex_unlock(&mu); return r_; } while (0)
#define PHYS(d) do { if ((d)->mig_slot >= 0) RET(NVML_ERROR_NOT_SUPPORTED); } while (0)

static nvmlReturn_t do_init(void) {
	pthread_mutex_lock(&mu);
	// A process that keeps NVML open across tests (one library per
	// process) gets each test's scenario: a new scenario path reloads.
	const char *sc = getenv("FAKE_NVML_SCENARIO");
	if (!sc) sc = "";
	if (!initialized || strcmp(sc, loaded_scenario) != 0) {
		snprintf(loaded_scenario, sizeof loaded_scenario, "%s", sc);
		state_size = -1;
		memset(gpus, 0, sizeof gpus);
		ngpus = 0;
		realtime = 0;
		if (load_scenario() != 0) RET(NVML_ERROR_UNKNOWN);
		refresh_state();
	}
	initialized++;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlInit(void) { return do_init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }

static int gpm_live; // GPM samples allocated and not freed

// GPM calls under way at once, and how many calls found another under way:
// a real driver's GPM is not safe to call from several threads at once. A
// call lasts at least 200 us here, as a driver's does, so that callers
// that do not serialize them are caught.
static int gpm_in_flight, gpm_overlaps;
static void gpm_enter(void) {
	if (__atomic_add_fetch(&gpm_in_flight, 1, __ATOMIC_SEQ_CST) > 1) __atomic_add_fetch(&gpm_overlaps, 1, __ATOMIC_SEQ_CST);
	usleep(200);
}
static void gpm_leave(void) { __atomic_sub_fetch(&gpm_in_flight, 1, __ATOMIC_SEQ_CST); }

nvmlReturn_t nvmlShutdown(void) {
	pthread_mutex_lock(&mu);
	if (!initialized) RET(NVML_ERROR_UNINITIALIZED);
	initialized--;
	const char *report = getenv("FAKE_NVML_REPORT");
	if (report) {
		FILE *f = fopen(report, "w");
		if (f) {
			fprintf(f, "gpm_samples_live %d\ngpm_overlapping_calls %d\n", gpm_live, __atomic_load_n(&gpm_overlaps, __ATOMIC_SEQ_CST));
			fclose(f);
		}
	}
	RET(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t r) {
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_TIMEOUT: return "Timeout";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
	case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
	if (!version) return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(driver) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(version, driver);
	return NVML_SUCCESS;
}

static nvmlReturn_t get_count(unsigned int *count) {
	pthread_mutex_lock(&mu);
	if (!initialized) RET(NVML_ERROR_UNINITIALIZED);
	if (!count) RET(NVML_ERROR_INVALID_ARGUMENT);
	*count = ngpus;
	RET(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { return get_count(count); }
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return get_count(count); }

static nvmlReturn_t get_handle(unsigned int index, nvmlDevice_t *device) {
	pthread_mutex_lock(&mu);
	if (!initialized) RET(NVML_ERROR_UNINITIALIZED);
	if (!device || index >= (unsigned)ngpus || !gpus[index].present) RET(NVML_ERROR_INVALID_ARGUMENT);
	refresh_state();
	if (lost[index]) RET(NVML_ERROR_GPU_IS_LOST);
	device->handle = handle_of(index, -1);
	RET(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) { return get_handle(index, device); }
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) { return get_handle(index, device); }

static nvmlReturn_t copy_str(char *dst, unsigned int length, const char *src) {
	if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(dst, src);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dv, char *uuid, unsigned int length) {
	DEV(dv);
	RET(copy_str(uuid, length, d->mig_slot >= 0 ? gpus[d->gpu].mig[d->mig_slot].uuid : gpus[d->gpu].uuid));
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dv, char *name, unsigned int length) {
	DEV(dv);
	RET(copy_str(name, length, gpus[d->gpu].name));
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dv, nvmlPciInfo_t *pci) {
	DEV(dv);
	if (!pci) RET(NVML_ERROR_INVALID_ARGUMENT);
	memset(pci, 0, sizeof *pci);
	snprintf(pci->busId, sizeof pci->busId, "%s", gpus[d->gpu].bus);
	snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", gpus[d->gpu].bus);
	pci->pciDeviceId = 0x233010de;
	RET(NVML_SUCCESS);
}

// power_samples answers NVML_TOTAL_POWER_SAMPLES as the driver does: a
// reading every POWER_PERIOD_US, each the mean draw of the period it ends,
// the newest POWER_BUFFER of them up to the clock. Called with mu held.
#define POWER_PERIOD_US 20000ULL
#define POWER_BUFFER 120ULL
static nvmlReturn_t power_samples(const fake_gpu *g, unsigned long long lastSeen, nvmlValueType_t *valType,
                                  unsigned int *count, nvmlSample_t *samples) {
	*valType = NVML_VALUE_TYPE_UNSIGNED_INT;
	unsigned long long vis = now_us();
	if (vis == ~0ULL) return NVML_ERROR_NOT_FOUND; // no clock: no time has passed
	unsigned long long last = vis / POWER_PERIOD_US * POWER_PERIOD_US;
	unsigned long long first = (lastSeen / POWER_PERIOD_US + 1) * POWER_PERIOD_US;
	unsigned long long oldest = last >= (POWER_BUFFER - 1) * POWER_PERIOD_US ? last - (POWER_BUFFER - 1) * POWER_PERIOD_US : 0;
	if (first < oldest) first = oldest;
	if (first < POWER_PERIOD_US) first = POWER_PERIOD_US;
	if (first > last) return NVML_ERROR_NOT_FOUND;
	unsigned int want = (unsigned int)((last - first) / POWER_PERIOD_US + 1);
	if (!samples) { *count = want; return NVML_SUCCESS; }
	if (*count < want) return NVML_ERROR_INSUFFICIENT_SIZE;
	for (unsigned int k = 0; k < want; k++) {
		unsigned long long ts = first + k * POWER_PERIOD_US;
		memset(&samples[k], 0, sizeof samples[k]);
		samples[k].timeStamp = ts;
		samples[k].sampleValue.uiVal = (unsigned int)(mean_mw(g, ts - POWER_PERIOD_US, ts) + 0.5);
	}
	*count = want;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t dv, nvmlSamplingType_t type, unsigned long long lastSeen,
                                  nvmlValueType_t *valType, unsigned int *count, nvmlSample_t *samples) {
	DEV(dv);
	if (!valType || !count) RET(NVML_ERROR_INVALID_ARGUMENT);
	fake_gpu *g = &gpus[d->gpu];
	if (d->mig_slot >= 0 || g->mig_mode || g->samples_unsupported) RET(NVML_ERROR_NOT_SUPPORTED);
	if (type == NVML_TOTAL_POWER_SAMPLES) {
		if (g->power_unsupported) RET(NVML_ERROR_NOT_SUPPORTED);
		RET(power_samples(g, lastSeen, valType, count, samples));
	}
	const fake_sample *src;
	int n;
	if (type == NVML_GPU_UTILIZATION_SAMPLES) { src = g->gpu_samples; n = g->ngpu_samples; }
	else if (type == NVML_MEMORY_UTILIZATION_SAMPLES) { src = g->mem_samples; n = g->nmem_samples; }
	else RET(NVML_ERROR_NOT_SUPPORTED);
	unsigned long long vis = now_us();
	unsigned int want = 0;
	for (int i = 0; i < n; i++)
		if (src[i].ts > lastSeen && src[i].ts <= vis) want++;
	*valType = NVML_VALUE_TYPE_UNSIGNED_INT;
	if (want == 0) RET(NVML_ERROR_NOT_FOUND);
	if (!samples) { *count = want; RET(NVML_SUCCESS); }
	if (*count < want) RET(NVML_ERROR_INSUFFICIENT_SIZE);
	unsigned int k = 0;
	for (int i = 0; i < n; i++) {
		if (src[i].ts > lastSeen && src[i].ts <= vis) {
			memset(&samples[k], 0, sizeof samples[k]);
			samples[k].timeStamp = src[i].ts;
			samples[k].sampleValue.uiVal = src[i].v;
			k++;
		}
	}
	*count = k;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dv, nvmlUtilization_t *u) {
	DEV(dv);
	if (!u) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (d->mig_slot >= 0 || gpus[d->gpu].mig_mode) RET(NVML_ERROR_NOT_SUPPORTED);
	u->gpu = gpus[d->gpu].util_gpu;
	u->memory = gpus[d->gpu].util_mem;
	RET(NVML_SUCCESS);
}

static void mem_of(struct nvmlDevice_st *d, unsigned long long *total, unsigned long long *used, unsigned long long *reserved) {
	if (d->mig_slot >= 0) {
		fake_mig *m = &gpus[d->gpu].mig[d->mig_slot];
		*total = m->total; *used = m->used; *reserved = m->reserved;
	} else {
		fake_gpu *g = &gpus[d->gpu];
		*total = g->mem_total; *used = g->mem_used; *reserved = g->mem_reserved;
	}
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dv, nvmlMemory_t *m) {
	DEV(dv);
	if (!m) RET(NVML_ERROR_INVALID_ARGUMENT);
	unsigned long long total, used, reserved;
	mem_of(d, &total, &used, &reserved);
	m->total = total;
	m->used = used + reserved; // v1 counts the reserved memory as used
	m->free = total - used - reserved;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dv, nvmlMemory_v2_t *m) {
	DEV(dv);
	if (!m) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (m->version != nvmlMemory_v2) RET(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	unsigned long long total, used, reserved;
	mem_of(d, &total, &used, &reserved);
	m->total = total;
	m->used = used;
	m->reserved = reserved;
	m->free = total - used - reserved;
	RET(NVML_SUCCESS);
}

#ifndef FAKE_NO_TEMPERATURE
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dv, nvmlTemperatureSensors_t sensor, unsigned int *temp) {
	DEV(dv);
	PHYS(d);
	if (!temp || sensor != NVML_TEMPERATURE_GPU) RET(NVML_ERROR_INVALID_ARGUMENT);
	*temp = gpus[d->gpu].temp;
	RET(NVML_SUCCESS);
}
#endif

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dv, unsigned int *power) {
	DEV(dv);
	PHYS(d);
	if (!power) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (gpus[d->gpu].power_unsupported) RET(NVML_ERROR_NOT_SUPPORTED);
	*power = power_at(&gpus[d->gpu], now_us());
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dv, unsigned int *limit) {
	DEV(dv);
	PHYS(d);
	if (!limit) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (gpus[d->gpu].power_unsupported) RET(NVML_ERROR_NOT_SUPPORTED);
	*limit = gpus[d->gpu].power_limit_mw;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dv, unsigned long long *energy) {
	DEV(dv);
	PHYS(d);
	if (!energy) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (gpus[d->gpu].power_unsupported) RET(NVML_ERROR_NOT_SUPPORTED);
	*energy = gpus[d->gpu].npower > 0 ? energy_at(&gpus[d->gpu], now_us()) : gpus[d->gpu].energy_mj;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dv, nvmlClockType_t type, unsigned int *clock) {
	DEV(dv);
	PHYS(d);
	if (!clock) RET(NVML_ERROR_INVALID_ARGUMENT);
	switch (type) {
	case NVML_CLOCK_SM: *clock = gpus[d->gpu].clock_sm; break;
	case NVML_CLOCK_MEM: *clock = gpus[d->gpu].clock_mem; break;
	case NVML_CLOCK_GRAPHICS: *clock = gpus[d->gpu].clock_gfx; break;
	default: RET(NVML_ERROR_INVALID_ARGUMENT);
	}
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dv, nvmlMemoryErrorType_t et, nvmlEccCounterType_t ct, unsigned long long *n) {
	DEV(dv);
	PHYS(d);
	if (!n || ct != NVML_VOLATILE_ECC) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (gpus[d->gpu].ecc_unsupported) RET(NVML_ERROR_NOT_SUPPORTED);
	*n = et == NVML_MEMORY_ERROR_TYPE_CORRECTED ? gpus[d->gpu].ecc_corr : gpus[d->gpu].ecc_uncorr;
	RET(NVML_SUCCESS);
}

static nvmlReturn_t reasons(nvmlDevice_t dv, unsigned long long *out, int supported) {
	DEV(dv);
	PHYS(d);
	if (!out) RET(NVML_ERROR_INVALID_ARGUMENT);
	*out = supported ? gpus[d->gpu].throttle_supported : gpus[d->gpu].throttle_current;
	RET(NVML_SUCCESS);
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dv, unsigned long long *r) { return reasons(dv, r, 0); }
nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t dv, unsigned long long *r) { return reasons(dv, r, 1); }
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dv, unsigned long long *r) { return reasons(dv, r, 0); }
nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t dv, unsigned long long *r) { return reasons(dv, r, 1); }

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t dv, nvmlPcieUtilCounter_t counter, unsigned int *value) {
	DEV(dv);
	PHYS(d);
	if (!value) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (counter == NVML_PCIE_UTIL_TX_BYTES) *value = gpus[d->gpu].pcie_tx_kib;
	else if (counter == NVML_PCIE_UTIL_RX_BYTES) *value = gpus[d->gpu].pcie_rx_kib;
	else RET(NVML_ERROR_INVALID_ARGUMENT);
	RET(NVML_SUCCESS);
}

// procs_of returns the process list of a GPU or MIG device. In MIG mode the
// physical GPU lists every instance's processes, as NVML does.
static int procs_of(struct nvmlDevice_st *d, fake_proc *out, unsigned int *gi, unsigned int *ci) {
	fake_gpu *g = &gpus[d->gpu];
	int n = 0;
	if (d->mig_slot >= 0) {
		fake_mig *m = &g->mig[d->mig_slot];
		for (int i = 0; i < m->nprocs; i++) { out[n] = m->procs[i]; gi[n] = m->gi; ci[n] = m->ci; n++; }
		return n;
	}
	for (int i = 0; i < g->nprocs && n < MAX_PROCS * (MAX_MIG + 1); i++) { out[n] = g->procs[i]; gi[n] = ci[n] = 0xFFFFFFFF; n++; }
	// The timeline: each pid's latest step at or before now.
	unsigned long long t = now_us();
	for (int i = 0; i < g->nprocmem; i++) {
		unsigned int pid = g->procmem[i].pid;
		int seen = 0;
		for (int j = 0; j < i; j++) if (g->procmem[j].pid == pid) seen = 1;
		if (seen) continue; // handled at its first step
		unsigned long long mem = 0;
		for (int j = i; j < g->nprocmem; j++)
			if (g->procmem[j].pid == pid && g->procmem[j].from <= t) mem = g->procmem[j].mem;
		if (mem > 0 && n < MAX_PROCS * (MAX_MIG + 1)) { out[n] = (fake_proc){pid, mem}; gi[n] = ci[n] = 0xFFFFFFFF; n++; }
	}
	if (g->mig_mode)
		for (int s = 0; s < MAX_MIG; s++)
			for (int i = 0; g->mig[s].present && i < g->mig[s].nprocs; i++) {
				out[n] = g->mig[s].procs[i]; gi[n] = g->mig[s].gi; ci[n] = g->mig[s].ci; n++;
			}
	return n;
}

static nvmlReturn_t running_processes(nvmlDevice_t dv, unsigned int *count, nvmlProcessInfo_t *infos) {
	DEV(dv);
	if (!count) RET(NVML_ERROR_INVALID_ARGUMENT);
	fake_proc procs[MAX_PROCS * (MAX_MIG + 1)];
	unsigned int gi[MAX_PROCS * (MAX_MIG + 1)], ci[MAX_PROCS * (MAX_MIG + 1)];
	int n = procs_of(d, procs, gi, ci);
	if (*count < (unsigned)n || (!infos && n > 0)) { *count = n; RET(NVML_ERROR_INSUFFICIENT_SIZE); }
#ifdef FAKE_WRONG_PROCESS_LAYOUT
	nvmlProcessInfo_v1_t *v1 = (nvmlProcessInfo_v1_t *)infos;
	for (int i = 0; i < n; i++) {
		memset(&v1[i], 0, sizeof v1[i]);
		v1[i].pid = procs[i].pid;
		v1[i].usedGpuMemory = procs[i].mem;
	}
	*count = n;
	RET(NVML_SUCCESS);
#endif
	for (int i = 0; i < n; i++) {
		memset(&infos[i], 0, sizeof infos[i]);
		infos[i].pid = procs[i].pid;
		infos[i].usedGpuMemory = procs[i].mem;
		infos[i].gpuInstanceId = gi[i];
		infos[i].computeInstanceId = ci[i];
	}
	*count = n;
	RET(NVML_SUCCESS);
}

#ifndef FAKE_NO_V3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dv, unsigned int *count, nvmlProcessInfo_t *infos) {
	return running_processes(dv, count, infos);
}
#endif

// _v2 takes the same nvmlProcessInfo_v2_t in this header.
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dv, unsigned int *count, nvmlProcessInfo_v2_t *infos) {
	return running_processes(dv, count, infos);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dv, nvmlProcessUtilizationSample_t *u, unsigned int *count, unsigned long long lastSeen) {
	DEV(dv);
	if (!count) RET(NVML_ERROR_INVALID_ARGUMENT);
	fake_gpu *g = &gpus[d->gpu];
	if (d->mig_slot >= 0 || g->mig_mode) RET(NVML_ERROR_NOT_SUPPORTED);
	unsigned long long vis = now_us();
	unsigned int want = 0;
	for (int i = 0; i < g->nputil; i++)
		if (g->putil[i].ts > lastSeen && g->putil[i].ts <= vis) want++;
	if (want == 0) { *count = 0; RET(NVML_ERROR_NOT_FOUND); }
	if (!u || *count < want) { *count = want; RET(NVML_ERROR_INSUFFICIENT_SIZE); }
	unsigned int k = 0;
	for (int i = 0; i < g->nputil; i++) {
		if (g->putil[i].ts > lastSeen && g->putil[i].ts <= vis) {
			memset(&u[k], 0, sizeof u[k]);
			u[k].pid = g->putil[i].pid;
			u[k].timeStamp = g->putil[i].ts;
			u[k].smUtil = g->putil[i].sm;
			k++;
		}
	}
	*count = k;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dv, unsigned int *current, unsigned int *pending) {
	DEV(dv);
	if (!current || !pending) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (d->mig_slot >= 0) RET(NVML_ERROR_NOT_SUPPORTED);
	int any = 0;
	for (int s = 0; s < MAX_MIG; s++) any |= gpus[d->gpu].mig[s].present;
	if (!gpus[d->gpu].mig_mode && !any) RET(NVML_ERROR_NOT_SUPPORTED); // not a MIG-capable board
	*current = *pending = gpus[d->gpu].mig_mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dv, unsigned int *count) {
	DEV(dv);
	if (!count) RET(NVML_ERROR_INVALID_ARGUMENT);
	*count = MAX_MIG;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dv, unsigned int index, nvmlDevice_t *mig) {
	DEV(dv);
	if (!mig || index >= MAX_MIG || d->mig_slot >= 0) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (!gpus[d->gpu].mig[index].present) RET(NVML_ERROR_NOT_FOUND);
	mig->handle = handle_of(d->gpu, index);
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dv, unsigned int *id) {
	DEV(dv);
	if (!id) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (d->mig_slot < 0) RET(NVML_ERROR_NOT_SUPPORTED);
	*id = gpus[d->gpu].mig[d->mig_slot].gi;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dv, unsigned int *id) {
	DEV(dv);
	if (!id) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (d->mig_slot < 0) RET(NVML_ERROR_NOT_SUPPORTED);
	*id = gpus[d->gpu].mig[d->mig_slot].ci;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
	if (!set) return NVML_ERROR_INVALID_ARGUMENT;
	set->handle = calloc(1, sizeof *set->handle);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dv, unsigned long long types, nvmlEventSet_t set) {
	DEV(dv);
	if (!set.handle || d->mig_slot >= 0) RET(NVML_ERROR_INVALID_ARGUMENT);
	if (types & nvmlEventTypeXidCriticalError) set.handle->registered[d->gpu] = 1;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
	if (!set.handle || !data) return NVML_ERROR_INVALID_ARGUMENT;
	// Poll the state file every 10 ms until an event is due or the timeout.
	for (unsigned int waited = 0;; waited += 10) {
		pthread_mutex_lock(&mu);
		refresh_state();
		while (xids_delivered < nxids) {
			int gi = xids[xids_delivered].gpu;
			unsigned long long code = xids[xids_delivered].code;
			xids_delivered++;
			if (gi < 0 || gi >= MAX_GPUS || !set.handle->registered[gi]) continue;
			memset(data, 0, sizeof *data);
			data->device.handle = handle_of(gi, -1);
			data->eventType = nvmlEventTypeXidCriticalError;
			data->eventData = code;
			data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFF;
			RET(NVML_SUCCESS);
		}
		pthread_mutex_unlock(&mu);
		if (waited >= timeoutms) return NVML_ERROR_TIMEOUT;
		usleep(10000);
	}
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
	free(set.handle);
	return NVML_SUCCESS;
}

// GPM. A sample records which GPU (or GPU instance) and the fake's time; the
// metrics of two samples are the time-weighted means of the scripted steps
// between their times.
struct nvmlGpmSample_st {
	int gpu, gi, filled;
	unsigned long long t;
};

static nvmlReturn_t nvmlGpmQueryDeviceSupport_impl(nvmlDevice_t dv, nvmlGpmSupport_t *support) {
	DEV(dv);
	if (!support) RET(NVML_ERROR_INVALID_ARGUMENT);
	// The driver wants the raw version (1); go-nvml v0.13.0-1 sends a
	// struct-versioned one (size | 1 << 24), which it refuses so.
	if (support->version != NVML_GPM_SUPPORT_VERSION) RET(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	if (gpus[d->gpu].gpm < 0) RET(NVML_ERROR_NOT_SUPPORTED);
	support->isSupportedDevice = gpus[d->gpu].gpm > 0;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t dv, nvmlGpmSupport_t *support) {
	gpm_enter();
	nvmlReturn_t r = nvmlGpmQueryDeviceSupport_impl(dv, support);
	gpm_leave();
	return r;
}

static nvmlReturn_t nvmlGpmSampleAlloc_impl(nvmlGpmSample_t *sample) {
	if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
	sample->handle = calloc(1, sizeof *sample->handle);
	if (!sample->handle) return NVML_ERROR_MEMORY;
	pthread_mutex_lock(&mu);
	gpm_live++;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
	gpm_enter();
	nvmlReturn_t r = nvmlGpmSampleAlloc_impl(sample);
	gpm_leave();
	return r;
}

static nvmlReturn_t nvmlGpmSampleFree_impl(nvmlGpmSample_t sample) {
	if (!sample.handle) return NVML_ERROR_INVALID_ARGUMENT;
	free(sample.handle);
	pthread_mutex_lock(&mu);
	gpm_live--;
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
	gpm_enter();
	nvmlReturn_t r = nvmlGpmSampleFree_impl(sample);
	gpm_leave();
	return r;
}

static nvmlReturn_t gpm_take(struct nvmlDevice_st *d, int gi, nvmlGpmSample_t sample) {
	fake_gpu *g = &gpus[d->gpu];
	if (!sample.handle) return NVML_ERROR_INVALID_ARGUMENT;
	if (g->gpm <= 0) return NVML_ERROR_NOT_SUPPORTED;
	if (gi >= 0) {
		if (!g->mig_mode) return NVML_ERROR_INVALID_ARGUMENT;
		int found = 0;
		for (int s = 0; s < MAX_MIG; s++) found |= g->mig[s].present && g->mig[s].gi == gi;
		if (!found) return NVML_ERROR_NOT_FOUND;
	}
	sample.handle->gpu = d->gpu;
	sample.handle->gi = gi;
	sample.handle->t = now_us();
	sample.handle->filled = 1;
	return NVML_SUCCESS;
}

static nvmlReturn_t nvmlGpmSampleGet_impl(nvmlDevice_t dv, nvmlGpmSample_t sample) {
	DEV(dv);
	PHYS(d);
	RET(gpm_take(d, -1, sample));
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t dv, nvmlGpmSample_t sample) {
	gpm_enter();
	nvmlReturn_t r = nvmlGpmSampleGet_impl(dv, sample);
	gpm_leave();
	return r;
}

static nvmlReturn_t nvmlGpmMigSampleGet_impl(nvmlDevice_t dv, unsigned int gpuInstanceId, nvmlGpmSample_t sample) {
	DEV(dv);
	PHYS(d);
	RET(gpm_take(d, (int)gpuInstanceId, sample));
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t dv, unsigned int gpuInstanceId, nvmlGpmSample_t sample) {
	gpm_enter();
	nvmlReturn_t r = nvmlGpmMigSampleGet_impl(dv, gpuInstanceId, sample);
	gpm_leave();
	return r;
}

// gpm_mean is the time-weighted mean of metric k of (gpu, gi) over [t1, t2]:
// each step holds from its time to the next step's; before the first, 0.
// An empty interval gives the value at t1.
static double gpm_mean(const fake_gpu *g, int gi, int k, unsigned long long t1, unsigned long long t2) {
	double sum = 0, at = 0;
	for (int i = 0; i < g->ngpm; i++) {
		const fake_gpm *st = &g->gpm_steps[i];
		if (st->gi != gi) continue;
		unsigned long long to = ~0ULL;
		for (int j = i + 1; j < g->ngpm; j++)
			if (g->gpm_steps[j].gi == gi) { to = g->gpm_steps[j].from; break; }
		if (st->from <= t1 && (t1 < to || to == ~0ULL)) at = st->v[k];
		unsigned long long lo = st->from > t1 ? st->from : t1, hi = to < t2 ? to : t2;
		if (hi > lo) sum += st->v[k] * (double)(hi - lo);
	}
	return t2 > t1 ? sum / (double)(t2 - t1) : at;
}

static nvmlReturn_t nvmlGpmMetricsGet_impl(nvmlGpmMetricsGet_t *mg) {
	if (!mg || mg->version != NVML_GPM_METRICS_GET_VERSION || mg->numMetrics > NVML_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
	struct nvmlGpmSample_st *a = mg->sample1.handle, *b = mg->sample2.handle;
	if (!a || !b || !a->filled || !b->filled || a->gpu != b->gpu || a->gi != b->gi || b->t < a->t) return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	const fake_gpu *g = &gpus[a->gpu];
	for (unsigned int i = 0; i < mg->numMetrics; i++) {
		nvmlGpmMetric_t *m = &mg->metrics[i];
		int k = -1;
		switch (m->metricId) {
		case NVML_GPM_METRIC_SM_UTIL: k = 0; break;
		case NVML_GPM_METRIC_SM_OCCUPANCY: k = 1; break;
		case NVML_GPM_METRIC_ANY_TENSOR_UTIL: k = 2; break;
		case NVML_GPM_METRIC_DRAM_BW_UTIL: k = 3; break;
		}
		m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
		if (k < 0) { m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; m->value = 0; continue; }
		m->nvmlReturn = NVML_SUCCESS;
		m->value = gpm_mean(g, a->gi, k, a->t, b->t);
	}
	RET(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *mg) {
	gpm_enter();
	nvmlReturn_t r = nvmlGpmMetricsGet_impl(mg);
	gpm_leave();
	return r;
}
