/*
 * fakenvml.c - a fake libnvidia-ml.so.1 for testing gputui without a GPU.
 *
 * Implements the subset of the NVML C API that gputui uses, with the exact
 * struct layouts and enum values of nvml.h (NVML API 13).  Every value comes
 * from a text "scenario" file (see tests/fakenvml/harness.py and the files in
 * tests/fakenvml/scenarios/), can vary with time (sine waves, throttling
 * episodes, a GPU falling off the bus) and any function can be made to return
 * NOT_SUPPORTED or FUNCTION_NOT_FOUND.
 *
 * Build:
 *   gcc -shared -fPIC -O2 -Wall -Werror -Wl,-soname,libnvidia-ml.so.1 \
 *       -o libnvidia-ml.so.1 fakenvml.c -lm -lpthread
 *
 * Plain C99 + POSIX; no dependency beyond libc, libm and pthread.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* Types and constants copied from nvml.h (layouts and values must match).  */
/* ------------------------------------------------------------------------ */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#define NVML_STRUCT_VERSION(data, ver) \
    (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((unsigned int)(ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t, nvmlProcessInfo_t;

typedef struct nvmlViolationTime_st {
    unsigned long long referenceTime; /* microseconds */
    unsigned long long violationTime; /* nanoseconds */
} nvmlViolationTime_t;

typedef enum {
    NVML_TEMPERATURE_GPU = 0,
    NVML_TEMPERATURE_GPU_MAX = 1,
    NVML_TEMPERATURE_COUNT
} nvmlTemperatureSensors_t;

typedef struct {
    unsigned int version;
    nvmlTemperatureSensors_t sensorType;
    int temperature;
} nvmlTemperature_v1_t;
typedef nvmlTemperature_v1_t nvmlTemperature_t;
#define nvmlTemperature_v1 NVML_STRUCT_VERSION(Temperature, 1)

typedef enum {
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN = 4,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR = 5,
    NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX = 6,
    NVML_TEMPERATURE_THRESHOLD_GPS_CURR = 7,
    NVML_TEMPERATURE_THRESHOLD_COUNT
} nvmlTemperatureThresholds_t;

typedef enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3,
    NVML_CLOCK_COUNT
} nvmlClockType_t;

typedef enum {
    NVML_PSTATE_0 = 0,
    NVML_PSTATE_15 = 15,
    NVML_PSTATE_UNKNOWN = 32
} nvmlPstates_t;

typedef enum {
    NVML_PCIE_UTIL_TX_BYTES = 0,
    NVML_PCIE_UTIL_RX_BYTES = 1,
    NVML_PCIE_UTIL_COUNT
} nvmlPcieUtilCounter_t;

typedef enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    NVML_MEMORY_ERROR_TYPE_COUNT
} nvmlMemoryErrorType_t;

typedef enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1,
    NVML_ECC_COUNTER_TYPE_COUNT
} nvmlEccCounterType_t;

typedef enum {
    NVML_PERF_POLICY_POWER = 0,
    NVML_PERF_POLICY_THERMAL = 1,
    NVML_PERF_POLICY_SYNC_BOOST = 2,
    NVML_PERF_POLICY_BOARD_LIMIT = 3,
    NVML_PERF_POLICY_LOW_UTILIZATION = 4,
    NVML_PERF_POLICY_RELIABILITY = 5,
    NVML_PERF_POLICY_TOTAL_APP_CLOCKS = 10,
    NVML_PERF_POLICY_TOTAL_BASE_CLOCKS = 11,
    NVML_PERF_POLICY_COUNT
} nvmlPerfPolicyType_t;

/* Clock event ("throttle") reason bits. */
#define REASON_GPU_IDLE 0x0000000000000001ULL
#define REASON_APP_CLOCKS 0x0000000000000002ULL
#define REASON_SW_POWER_CAP 0x0000000000000004ULL
#define REASON_HW_SLOWDOWN 0x0000000000000008ULL
#define REASON_SYNC_BOOST 0x0000000000000010ULL
#define REASON_SW_THERMAL 0x0000000000000020ULL
#define REASON_HW_THERMAL 0x0000000000000040ULL
#define REASON_HW_POWER_BRAKE 0x0000000000000080ULL
#define REASON_DISPLAY_CLOCK 0x0000000000000100ULL
#define REASON_BOARD_LIMIT 0x0000000000000200ULL
#define REASON_RELIABILITY 0x0000000000000400ULL

#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL

/* ------------------------------------------------------------------------ */
/* Function table (for call counting and `not_found`).                     */
/* ------------------------------------------------------------------------ */

#define FAKENVML_FUNCS(X)                          \
    X(nvmlInitWithFlags)                           \
    X(nvmlInit_v2)                                 \
    X(nvmlInit)                                    \
    X(nvmlShutdown)                                \
    X(nvmlSystemGetDriverVersion)                  \
    X(nvmlSystemGetNVMLVersion)                    \
    X(nvmlSystemGetCudaDriverVersion)              \
    X(nvmlSystemGetCudaDriverVersion_v2)           \
    X(nvmlDeviceGetCount_v2)                       \
    X(nvmlDeviceGetCount)                          \
    X(nvmlDeviceGetHandleByIndex_v2)               \
    X(nvmlDeviceGetHandleByUUID)                   \
    X(nvmlDeviceGetHandleByPciBusId_v2)            \
    X(nvmlDeviceGetIndex)                          \
    X(nvmlDeviceGetName)                           \
    X(nvmlDeviceGetUUID)                           \
    X(nvmlDeviceGetPciInfo_v3)                     \
    X(nvmlDeviceGetMemoryInfo)                     \
    X(nvmlDeviceGetMemoryInfo_v2)                  \
    X(nvmlDeviceGetUtilizationRates)               \
    X(nvmlDeviceGetPowerUsage)                     \
    X(nvmlDeviceGetEnforcedPowerLimit)             \
    X(nvmlDeviceGetPowerManagementLimit)           \
    X(nvmlDeviceGetTemperature)                    \
    X(nvmlDeviceGetTemperatureV)                   \
    X(nvmlDeviceGetTemperatureThreshold)           \
    X(nvmlDeviceGetFanSpeed)                       \
    X(nvmlDeviceGetClockInfo)                      \
    X(nvmlDeviceGetMaxClockInfo)                   \
    X(nvmlDeviceGetPerformanceState)               \
    X(nvmlDeviceGetCurrPcieLinkGeneration)         \
    X(nvmlDeviceGetCurrPcieLinkWidth)              \
    X(nvmlDeviceGetMaxPcieLinkGeneration)          \
    X(nvmlDeviceGetMaxPcieLinkWidth)               \
    X(nvmlDeviceGetPcieThroughput)                 \
    X(nvmlDeviceGetTotalEnergyConsumption)         \
    X(nvmlDeviceGetTotalEccErrors)                 \
    X(nvmlDeviceGetCurrentClocksEventReasons)      \
    X(nvmlDeviceGetCurrentClocksThrottleReasons)   \
    X(nvmlDeviceGetViolationStatus)                \
    X(nvmlDeviceGetComputeRunningProcesses_v3)     \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3)    \
    X(nvmlDeviceGetNumGpuCores)                    \
    X(nvmlDeviceGetCudaComputeCapability)          \
    FAKENVML_DOCTOR_FUNCS(X)                       \
    FAKENVML_GPM_FUNCS(X)                          \
    FAKENVML_NVITOP_FUNCS(X)                       \
    FAKENVML_MIG_FUNCS(X)                          \
    FAKENVML_TOPO_FUNCS(X)

/* GPM profiling counters (Hopper and newer) and the other per-tick extras. */
#define FAKENVML_GPM_FUNCS(X)                      \
    X(nvmlGpmQueryDeviceSupport)                   \
    X(nvmlGpmSampleAlloc)                          \
    X(nvmlGpmSampleFree)                           \
    X(nvmlGpmSampleGet)                            \
    X(nvmlGpmMetricsGet)                           \
    X(nvmlDeviceGetEncoderUtilization)             \
    X(nvmlDeviceGetDecoderUtilization)             \
    X(nvmlDeviceGetPcieReplayCounter)              \
    X(nvmlDeviceGetFieldValues)                    \
    X(nvmlDeviceGetSamples)                        \
    X(nvmlDeviceGetProcessUtilization)             \
    X(nvmlDeviceGetProcessesUtilizationInfo)      \
    X(nvmlDeviceGetNvLinkState)

/* Configuration and health reads for `gputui doctor`, and XID events. */
#define FAKENVML_DOCTOR_FUNCS(X)                   \
    X(nvmlDeviceGetPersistenceMode)                \
    X(nvmlDeviceGetPowerManagementDefaultLimit)    \
    X(nvmlDeviceGetApplicationsClock)              \
    X(nvmlDeviceGetDefaultApplicationsClock)       \
    X(nvmlDeviceGetEccMode)                        \
    X(nvmlDeviceGetMigMode)                        \
    X(nvmlDeviceGetComputeMode)                    \
    X(nvmlDeviceGetRemappedRows)                   \
    X(nvmlDeviceGetRetiredPages)                   \
    X(nvmlDeviceGetRetiredPagesPendingStatus)      \
    X(nvmlDeviceGetVbiosVersion)                   \
    X(nvmlDeviceGetSupportedEventTypes)            \
    X(nvmlEventSetCreate)                          \
    X(nvmlDeviceRegisterEvents)                    \
    X(nvmlEventSetWait_v2)                         \
    X(nvmlEventSetFree)                            \
    X(nvmlDeviceGetP2PStatus)

/* ---- nvitop support (benchmarks/tui_perf.py --compare nvitop): see the block at the end. */
#define FAKENVML_NVITOP_FUNCS(X)                   \
    X(nvmlDeviceGetDisplayActive)                  \
    X(nvmlDeviceGetDriverModel_v2)                 \
    X(nvmlDeviceGetDriverModel)

/* ---- MIG (Multi-Instance GPU): see the MIG block at the end. */
#define FAKENVML_MIG_FUNCS(X)                      \
    X(nvmlDeviceGetMaxMigDeviceCount)              \
    X(nvmlDeviceGetMigDeviceHandleByIndex)         \
    X(nvmlDeviceIsMigDeviceHandle)                 \
    X(nvmlDeviceGetGpuInstanceId)                  \
    X(nvmlDeviceGetComputeInstanceId)              \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle) \
    X(nvmlDeviceGetAttributes_v2)                  \
    X(nvmlGpmMigSampleGet)

/* ---- GPU-to-GPU topology (DDP benchmark results): see the TOPOLOGY block at the end. */
#define FAKENVML_TOPO_FUNCS(X)                     \
    X(nvmlDeviceGetTopologyCommonAncestor)         \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2)         \
    X(nvmlDeviceGetNvLinkRemoteDeviceType)

#define X_ENUM(n) FN_##n,
enum { FAKENVML_FUNCS(X_ENUM) FN_COUNT };
#undef X_ENUM
#define X_NAME(n) #n,
static const char *const FN_NAMES[FN_COUNT] = {FAKENVML_FUNCS(X_NAME)};
#undef X_NAME

/* ------------------------------------------------------------------------ */
/* Scenario model                                                           */
/* ------------------------------------------------------------------------ */

#define MAX_DEVICES 64
#define MAX_PROCS 256
#define TWO_PI 6.283185307179586476925286766559

enum {
    F_MEM_TOTAL,
    F_MEM_USED,
    F_MEM_RESERVED,
    F_UTIL_GPU,
    F_UTIL_MEM,
    F_POWER_MW,
    F_POWER_LIMIT_MW,
    F_TEMP_C,
    F_TEMP_SLOWDOWN_C,
    F_TEMP_SHUTDOWN_C,
    F_TEMP_GPU_MAX_C,
    F_FAN_PCT,
    F_CLOCK_SM,
    F_CLOCK_MEM,
    F_CLOCK_GRAPHICS,
    F_CLOCK_VIDEO,
    F_CLOCK_SM_MAX,
    F_CLOCK_MEM_MAX,
    F_CLOCK_GRAPHICS_MAX,
    F_CLOCK_VIDEO_MAX,
    F_PSTATE,
    F_ENERGY_MJ,
    F_PCIE_GEN,
    F_PCIE_WIDTH,
    F_PCIE_GEN_MAX,
    F_PCIE_WIDTH_MAX,
    F_PCIE_RX,
    F_PCIE_TX,
    F_ECC_UNCORRECTED,
    F_ECC_CORRECTED,
    F_NUM_CORES,
    F_CC_MAJOR,
    F_CC_MINOR,
    /* doctor: configuration and health */
    F_PERSISTENCE,
    F_POWER_DEFAULT_LIMIT_MW,
    F_APP_CLOCK_SM,
    F_APP_CLOCK_MEM,
    F_DEFAULT_APP_CLOCK_SM,
    F_DEFAULT_APP_CLOCK_MEM,
    F_ECC_MODE,
    F_ECC_MODE_PENDING,
    F_ECC_UNCORRECTED_AGG,
    F_ECC_CORRECTED_AGG,
    F_MIG_MODE,
    F_MIG_MODE_PENDING,
    F_COMPUTE_MODE,
    F_REMAP_CORRECTABLE,
    F_REMAP_UNCORRECTABLE,
    F_REMAP_PENDING,
    F_REMAP_FAILURE,
    F_RETIRED_SBE,
    F_RETIRED_DBE,
    F_RETIRED_PENDING,
    F_NVLINK,
    F_P2P,
    /* GPM (values of nvmlGpmMetricsGet; percentages as doubles, rates in MiB/s) */
    F_GPM_SUPPORTED,
    F_GPM_GRAPHICS_UTIL,
    F_GPM_SM_UTIL,
    F_GPM_SM_OCCUPANCY,
    F_GPM_TENSOR_UTIL,
    F_GPM_DRAM_BW_UTIL,
    F_GPM_FP64_UTIL,
    F_GPM_FP32_UTIL,
    F_GPM_FP16_UTIL,
    F_GPM_PCIE_TX_MIBPS,
    F_GPM_PCIE_RX_MIBPS,
    F_GPM_NVLINK_TX_MIBPS,
    F_GPM_NVLINK_RX_MIBPS,
    F_GPM_BUSY_FROM_S,
    F_GPM_BUSY_UNTIL_S,
    F_GPM_BUSY_ERROR,
    /* dcgm-exporter's default counters: encoder/decoder, PCIe replays, field values */
    F_ENC_UTIL,
    F_DEC_UTIL,
    F_PCIE_REPLAY,
    F_MEM_TEMP_C,
    F_TEMP_MEM_MAX_C,
    F_NVLINK_TX_KIB,
    F_NVLINK_RX_KIB,
    /* nvmlDeviceGetSamples: a power spike between ticks */
    F_POWER_SPIKE_MW,
    F_POWER_SPIKE_FROM_S,
    F_POWER_SPIKE_UNTIL_S,
    /* NVLink links: how many, and which are down (bit i = link i) */
    F_NVLINK_LINKS,
    F_NVLINK_DOWN_MASK,
    F_COUNT
};

static const struct {
    const char *key;
    double def;
    int pct;   /* clamp to <= 100 */
    int alias; /* when not set explicitly, follow this field (-1: none) */
} FIELDS[F_COUNT] = {
    [F_MEM_TOTAL] = {"mem_total", 85899345920.0, 0, -1},
    [F_MEM_USED] = {"mem_used", 10737418240.0, 0, -1},
    [F_MEM_RESERVED] = {"mem_reserved", 0.0, 0, -1},
    [F_UTIL_GPU] = {"util_gpu", 35.0, 1, -1},
    [F_UTIL_MEM] = {"util_mem", 20.0, 1, -1},
    [F_POWER_MW] = {"power_mw", 250000.0, 0, -1},
    [F_POWER_LIMIT_MW] = {"power_limit_mw", 400000.0, 0, -1},
    [F_TEMP_C] = {"temp_c", 55.0, 0, -1},
    [F_TEMP_SLOWDOWN_C] = {"temp_slowdown_c", 90.0, 0, -1},
    [F_TEMP_SHUTDOWN_C] = {"temp_shutdown_c", 95.0, 0, -1},
    [F_TEMP_GPU_MAX_C] = {"temp_gpu_max_c", 87.0, 0, -1},
    [F_FAN_PCT] = {"fan_pct", 40.0, 1, -1},
    [F_CLOCK_SM] = {"clock_sm_mhz", 1380.0, 0, -1},
    [F_CLOCK_MEM] = {"clock_mem_mhz", 1593.0, 0, -1},
    [F_CLOCK_GRAPHICS] = {"clock_graphics_mhz", 1380.0, 0, F_CLOCK_SM},
    [F_CLOCK_VIDEO] = {"clock_video_mhz", 1275.0, 0, -1},
    [F_CLOCK_SM_MAX] = {"clock_sm_max_mhz", 1410.0, 0, -1},
    [F_CLOCK_MEM_MAX] = {"clock_mem_max_mhz", 1593.0, 0, -1},
    [F_CLOCK_GRAPHICS_MAX] = {"clock_graphics_max_mhz", 1410.0, 0, F_CLOCK_SM_MAX},
    [F_CLOCK_VIDEO_MAX] = {"clock_video_max_mhz", 1290.0, 0, -1},
    [F_PSTATE] = {"pstate", 0.0, 0, -1},
    [F_ENERGY_MJ] = {"energy_mj", 1000000.0, 0, -1},
    [F_PCIE_GEN] = {"pcie_gen", 4.0, 0, -1},
    [F_PCIE_WIDTH] = {"pcie_width", 16.0, 0, -1},
    [F_PCIE_GEN_MAX] = {"pcie_gen_max", 4.0, 0, -1},
    [F_PCIE_WIDTH_MAX] = {"pcie_width_max", 16.0, 0, -1},
    [F_PCIE_RX] = {"pcie_rx_kbps", 20000.0, 0, -1},
    [F_PCIE_TX] = {"pcie_tx_kbps", 10000.0, 0, -1},
    [F_ECC_UNCORRECTED] = {"ecc_uncorrected", 0.0, 0, -1},
    [F_ECC_CORRECTED] = {"ecc_corrected", 0.0, 0, -1},
    [F_NUM_CORES] = {"num_cores", 6912.0, 0, -1},
    [F_CC_MAJOR] = {"cc_major", 8.0, 0, -1},
    [F_CC_MINOR] = {"cc_minor", 0.0, 0, -1},
    [F_PERSISTENCE] = {"persistence_mode", 1.0, 0, -1},
    [F_POWER_DEFAULT_LIMIT_MW] = {"power_default_limit_mw", 0.0, 0, F_POWER_LIMIT_MW},
    [F_APP_CLOCK_SM] = {"app_clock_sm_mhz", 0.0, 0, F_DEFAULT_APP_CLOCK_SM},
    [F_APP_CLOCK_MEM] = {"app_clock_mem_mhz", 0.0, 0, F_DEFAULT_APP_CLOCK_MEM},
    [F_DEFAULT_APP_CLOCK_SM] = {"default_app_clock_sm_mhz", 0.0, 0, F_CLOCK_SM_MAX},
    [F_DEFAULT_APP_CLOCK_MEM] = {"default_app_clock_mem_mhz", 0.0, 0, F_CLOCK_MEM_MAX},
    [F_ECC_MODE] = {"ecc_mode", 1.0, 0, -1},
    [F_ECC_MODE_PENDING] = {"ecc_mode_pending", 0.0, 0, F_ECC_MODE},
    [F_ECC_UNCORRECTED_AGG] = {"ecc_uncorrected_aggregate", 0.0, 0, F_ECC_UNCORRECTED},
    [F_ECC_CORRECTED_AGG] = {"ecc_corrected_aggregate", 0.0, 0, F_ECC_CORRECTED},
    [F_MIG_MODE] = {"mig_mode", 0.0, 0, -1},
    [F_MIG_MODE_PENDING] = {"mig_mode_pending", 0.0, 0, F_MIG_MODE},
    [F_COMPUTE_MODE] = {"compute_mode", 0.0, 0, -1},
    [F_REMAP_CORRECTABLE] = {"remap_correctable", 0.0, 0, -1},
    [F_REMAP_UNCORRECTABLE] = {"remap_uncorrectable", 0.0, 0, -1},
    [F_REMAP_PENDING] = {"remap_pending", 0.0, 0, -1},
    [F_REMAP_FAILURE] = {"remap_failure", 0.0, 0, -1},
    [F_RETIRED_SBE] = {"retired_pages_sbe", 0.0, 0, -1},
    [F_RETIRED_DBE] = {"retired_pages_dbe", 0.0, 0, -1},
    [F_RETIRED_PENDING] = {"retired_pages_pending", 0.0, 0, -1},
    [F_NVLINK] = {"nvlink", 0.0, 0, -1},
    [F_P2P] = {"p2p", 1.0, 0, -1},
    [F_GPM_SUPPORTED] = {"gpm_supported", 0.0, 0, -1},
    [F_GPM_GRAPHICS_UTIL] = {"gpm_graphics_util", 0.0, 0, F_UTIL_GPU},
    [F_GPM_SM_UTIL] = {"gpm_sm_util", 30.0, 0, -1},
    [F_GPM_SM_OCCUPANCY] = {"gpm_sm_occupancy", 20.0, 0, -1},
    [F_GPM_TENSOR_UTIL] = {"gpm_tensor_util", 10.0, 0, -1},
    [F_GPM_DRAM_BW_UTIL] = {"gpm_dram_bw_util", 25.0, 0, -1},
    [F_GPM_FP64_UTIL] = {"gpm_fp64_util", 0.0, 0, -1},
    [F_GPM_FP32_UTIL] = {"gpm_fp32_util", 15.0, 0, -1},
    [F_GPM_FP16_UTIL] = {"gpm_fp16_util", 5.0, 0, -1},
    [F_GPM_PCIE_TX_MIBPS] = {"gpm_pcie_tx_mibps", 100.0, 0, -1},
    [F_GPM_PCIE_RX_MIBPS] = {"gpm_pcie_rx_mibps", 200.0, 0, -1},
    [F_GPM_NVLINK_TX_MIBPS] = {"gpm_nvlink_tx_mibps", 0.0, 0, -1},
    [F_GPM_NVLINK_RX_MIBPS] = {"gpm_nvlink_rx_mibps", 0.0, 0, -1},
    [F_GPM_BUSY_FROM_S] = {"gpm_busy_from_s", 1e300, 0, -1},
    [F_GPM_BUSY_UNTIL_S] = {"gpm_busy_until_s", 1e300, 0, -1},
    [F_GPM_BUSY_ERROR] = {"gpm_busy_error", 19.0, 0, -1},
    [F_ENC_UTIL] = {"enc_util", 0.0, 1, -1},
    [F_DEC_UTIL] = {"dec_util", 0.0, 1, -1},
    [F_PCIE_REPLAY] = {"pcie_replay", 0.0, 0, -1},
    [F_MEM_TEMP_C] = {"mem_temp_c", 0.0, 0, -1},         /* 0: the device has no sensor */
    [F_TEMP_MEM_MAX_C] = {"temp_mem_max_c", 0.0, 0, -1}, /* 0: no limit reported */
    [F_NVLINK_TX_KIB] = {"nvlink_tx_kib", 0.0, 0, -1},
    [F_NVLINK_RX_KIB] = {"nvlink_rx_kib", 0.0, 0, -1},
    [F_POWER_SPIKE_MW] = {"power_spike_mw", 0.0, 0, -1},
    [F_POWER_SPIKE_FROM_S] = {"power_spike_from_s", 1e300, 0, -1},
    [F_POWER_SPIKE_UNTIL_S] = {"power_spike_until_s", 1e300, 0, -1},
    [F_NVLINK_LINKS] = {"nvlink_links", 0.0, 0, -1},
    [F_NVLINK_DOWN_MASK] = {"nvlink_down_mask", 0.0, 0, -1},
};

/* Features that can be listed in gpu.N.unsupported. */
enum {
    U_UTIL,
    U_MEMORY,
    U_POWER,
    U_POWER_LIMIT,
    U_TEMPERATURE,
    U_TEMP_THRESHOLDS,
    U_FAN,
    U_CLOCKS,
    U_MAX_CLOCKS,
    U_PSTATE,
    U_ENERGY,
    U_PCIE_LINK,
    U_PCIE_THROUGHPUT,
    U_ECC,
    U_THROTTLE,
    U_VIOLATION,
    U_PROCESSES,
    U_GRAPHICS_PROCESSES,
    U_NUM_CORES,
    U_CUDA_CC,
    /* doctor */
    U_PERSISTENCE,
    U_APP_CLOCKS,
    U_ECC_MODE,
    U_MIG,
    U_COMPUTE_MODE,
    U_REMAPPED_ROWS,
    U_RETIRED_PAGES,
    U_VBIOS,
    U_EVENTS,
    U_GPM,
    U_ENCODER,
    U_DECODER,
    U_PCIE_REPLAY,
    U_FIELD_VALUES,
    U_SAMPLES,
    U_PROCESS_UTIL,
    U_COUNT,
    U_NONE = -1
};
static const char *const U_NAMES[U_COUNT] = {
    "util",       "memory",   "power",      "power_limit",     "temperature",
    "temp_thresholds", "fan", "clocks",     "max_clocks",      "pstate",
    "energy",     "pcie_link", "pcie_throughput", "ecc",       "throttle",
    "violation",  "processes", "graphics_processes", "num_cores", "cuda_cc",
    "persistence", "app_clocks", "ecc_mode", "mig", "compute_mode", "remapped_rows",
    "retired_pages", "vbios", "events", "gpm", "encoder", "decoder", "pcie_replay",
    "field_values", "samples", "process_util",
};

typedef struct {
    double base, amp, period; /* value = base + amp*sin(2*pi*t/period) */
} wave_t;

typedef struct {
    unsigned int pid;
    unsigned long long mem;
} proc_t;

/* ---- MIG: one MIG device of a GPU (gpu.N.mig.K.*; see the MIG block at the end).
 * Numbers are stored +1 so that 0 means "not given" (the default applies). */
#define FAKE_MIG_MAX 8
#define FAKE_MIG_PROCS 16
#define FAKE_MIG_GPM 8
typedef struct {
    int set;
    char profile[32];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    unsigned int gi, ci, sm_count;
    unsigned long long mem_total, mem_used;
    int nprocs;
    proc_t procs[FAKE_MIG_PROCS];
    double gpm[FAKE_MIG_GPM];
    unsigned char gpm_set[FAKE_MIG_GPM];
} fmig_t;

typedef struct {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    unsigned int pci_domain, pci_bus, pci_device, pci_function;
    unsigned int pci_device_id, pci_subsystem_id;
    wave_t f[F_COUNT];
    unsigned char fset[F_COUNT];
    wave_t dur[F_COUNT];
    unsigned char dset[F_COUNT];
    unsigned long long throttle;
    unsigned long long dur_throttle;
    int dur_throttle_set;
    double thr_from, thr_until, lost_from; /* HUGE_VAL = never */
    double hang_from;                      /* from then on every call never returns */
    int call_delay_ms;                     /* -1 = use the global value */
    int handle_error;
    unsigned long unsupported; /* bit mask of U_* */
    int nprocs, ngprocs;
    proc_t procs[MAX_PROCS];
    proc_t gprocs[MAX_PROCS];
    /* doctor: an XID critical error delivered to event sets from xid_at_s on */
    unsigned long long xid;
    double xid_at_s; /* HUGE_VAL = never */
    char vbios[32];
    /* per-process utilization: gpu.N.process_util = pid:sm:mem:enc:dec,... */
    int nputil;
    unsigned int putil[MAX_PROCS][5];
    /* MIG (the MIG block at the end) */
    fmig_t mig[FAKE_MIG_MAX];
    unsigned int mig_max; /* +1; 0: the default (7) */
    unsigned int sm_count; /* 0: the default (108) */
    /* GPU-to-GPU topology (the TOPOLOGY block at the end) */
    int topo_nremote;    /* links listed in gpu.N.nvlink_remote */
    int topo_remote[36]; /* per link (NVML_NVLINK_MAX_LINKS): peer GPU, -2 NVSwitch, -1 unknown */
    int topo_nlevel;     /* devices listed in gpu.N.topology */
    int topo_level[MAX_DEVICES]; /* common ancestor level with device j */
    /* ---- CLOCK EVENTS: clock-change events (nvmlEventTypeClock), delivered to event
     * sets at the given times (gpu.N.clock_events_at_s = 1.0, 1.2, 5); a device with
     * none does not support the event type (as on every GPU since Kepler). */
    int nclock;
    double clock_at[32];
    /* ---- end CLOCK EVENTS */
} fdev_t;

typedef struct {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    char nvml_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda_driver_version;
    int init_error;
    int device_count;
    int call_delay_ms;
    unsigned char not_found[FN_COUNT];
    fdev_t dev[MAX_DEVICES];
} scenario_t;

struct nvmlDevice_st {
    unsigned int index;
};

/* ------------------------------------------------------------------------ */
/* Global state (guarded by g_lock)                                         */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast (under g_lock) when the time, the scenario or NVML's init count changes: an
 * event wait sleeps until its deadline, its next scheduled event or one of these. */
static pthread_cond_t g_changed = PTHREAD_COND_INITIALIZER;
static scenario_t *g_scen = NULL; /* NULL: nothing loaded yet */
static struct nvmlDevice_st g_handles[MAX_DEVICES];
static int g_refcount = 0;
static double g_t0 = 0.0;         /* monotonic seconds at load */
static double g_frozen = -1.0;    /* >= 0: frozen time */
static unsigned long long g_total_calls = 0;
static unsigned long long g_counts[FN_COUNT];

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cur_time(void)
{
    if (g_frozen >= 0.0)
        return g_frozen;
    double t = mono_now() - g_t0;
    return t < 0.0 ? 0.0 : t;
}

static void sleep_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------------ */
/* Scenario parsing                                                         */
/* ------------------------------------------------------------------------ */

static void set_bus_id(fdev_t *d, unsigned dom, unsigned bus, unsigned dev, unsigned fn)
{
    d->pci_domain = dom;
    d->pci_bus = bus & 0xFF;
    d->pci_device = dev & 0x1F;
    d->pci_function = fn & 0x7;
    snprintf(d->bus_id, sizeof d->bus_id, "%08X:%02X:%02X.%X", d->pci_domain, d->pci_bus,
             d->pci_device, d->pci_function);
}

static int parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    unsigned a, b, c, e;
    char tail;
    if (sscanf(s, "%x:%x:%x.%x%c", &a, &b, &c, &e, &tail) == 4) {
        *dom = a, *bus = b, *dev = c, *fn = e;
        return 0;
    }
    if (sscanf(s, "%x:%x.%x%c", &b, &c, &e, &tail) == 3) {
        *dom = 0, *bus = b, *dev = c, *fn = e;
        return 0;
    }
    return -1;
}

static void device_defaults(fdev_t *d, int i)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "NVIDIA A100-SXM4-80GB");
    snprintf(d->uuid, sizeof d->uuid, "GPU-00000000-0000-0000-0000-%012x", (unsigned)i);
    set_bus_id(d, 0, (unsigned)(0x10 + i), 0, 0);
    d->pci_device_id = 0x20B210DEu;
    d->pci_subsystem_id = 0x147F10DEu;
    for (int f = 0; f < F_COUNT; f++) {
        d->f[f].base = FIELDS[f].def;
        d->f[f].amp = 0.0;
        d->f[f].period = 0.0;
    }
    d->thr_from = HUGE_VAL;
    d->thr_until = HUGE_VAL;
    d->lost_from = HUGE_VAL;
    d->hang_from = HUGE_VAL;
    d->call_delay_ms = -1;
    d->xid_at_s = HUGE_VAL;
    snprintf(d->vbios, sizeof d->vbios, "92.00.36.00.01");
}

static void scenario_defaults(scenario_t *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->driver_version, sizeof s->driver_version, "550.54.15");
    snprintf(s->nvml_version, sizeof s->nvml_version, "12.550.54.15");
    s->cuda_driver_version = 12040;
    s->device_count = 2;
    for (int i = 0; i < MAX_DEVICES; i++)
        device_defaults(&s->dev[i], i);
}

static char *trim(char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    /* strip one level of matching quotes */
    size_t n = strlen(s);
    if (n >= 2 && ((s[0] == '"' && s[n - 1] == '"') || (s[0] == '\'' && s[n - 1] == '\''))) {
        s[n - 1] = '\0';
        s++;
    }
    return s;
}

static int parse_double(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno == ERANGE)
        return -1;
    while (*end && isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = x;
    return 0;
}

static int parse_ll(const char *v, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 0);
    if (end == v || errno == ERANGE)
        return -1;
    while (*end && isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = x;
    return 0;
}

static int parse_ull(const char *v, unsigned long long *out)
{
    char *end;
    errno = 0;
    while (*v && isspace((unsigned char)*v))
        v++;
    if (*v == '-')
        return -1;
    unsigned long long x = strtoull(v, &end, 0);
    if (end == v || errno == ERANGE)
        return -1;
    while (*end && isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = x;
    return 0;
}

/* "AMPLITUDE,PERIOD_S" */
static int parse_wave(const char *v, wave_t *w)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    char *comma = strchr(buf, ',');
    if (!comma)
        return -1;
    *comma = '\0';
    double a, p;
    if (parse_double(trim(buf), &a) || parse_double(trim(comma + 1), &p) || p <= 0.0)
        return -1;
    w->amp = a;
    w->period = p;
    return 0;
}

/* "pid:mem,pid:mem"; mem may be "na" (NVML_VALUE_NOT_AVAILABLE); bare pid = 0 bytes. */
static int parse_procs(char *v, proc_t *out, int *n)
{
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(v, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (!*tok)
            continue;
        if (*n >= MAX_PROCS)
            return -1;
        char *colon = strchr(tok, ':');
        unsigned long long pid, mem = 0;
        if (colon)
            *colon = '\0';
        if (parse_ull(trim(tok), &pid) || pid > 0xFFFFFFFFull)
            return -1;
        if (colon) {
            char *m = trim(colon + 1);
            if (!strcasecmp(m, "na") || !strcasecmp(m, "none"))
                mem = NVML_VALUE_NOT_AVAILABLE_ULL;
            else if (parse_ull(m, &mem))
                return -1;
        }
        out[*n].pid = (unsigned int)pid;
        out[*n].mem = mem;
        (*n)++;
    }
    return 0;
}

static int field_index(const char *key)
{
    for (int f = 0; f < F_COUNT; f++)
        if (!strcmp(FIELDS[f].key, key))
            return f;
    return -1;
}

static int fn_index(const char *name)
{
    for (int i = 0; i < FN_COUNT; i++)
        if (!strcmp(FN_NAMES[i], name))
            return i;
    return -1;
}

#define WARN(...)                                       \
    do {                                                \
        fprintf(stderr, "fakenvml: warning: " __VA_ARGS__); \
        fputc('\n', stderr);                            \
    } while (0)

/* Per-device key.  Returns 0 if handled, 1 if unknown key, -1 if bad value. */
static int apply_doctor_key(fdev_t *d, const char *key, const char *val);

static int apply_extra_key(fdev_t *d, const char *key, char *val);

static int apply_mig_key(fdev_t *d, const char *key, char *val); /* the MIG block */

static int apply_topo_key(fdev_t *d, const char *key, char *val); /* the TOPOLOGY block */

static int apply_device_key(fdev_t *d, const char *key, char *val)
{
    int f;
    int doctor_rc = apply_doctor_key(d, key, val);
    if (doctor_rc != 1)
        return doctor_rc;
    int extra_rc = apply_extra_key(d, key, val);
    if (extra_rc != 1)
        return extra_rc;
    int mig_rc = apply_mig_key(d, key, val);
    if (mig_rc != 1)
        return mig_rc;
    int topo_rc = apply_topo_key(d, key, val);
    if (topo_rc != 1)
        return topo_rc;
    if (!strcmp(key, "name")) {
        snprintf(d->name, sizeof d->name, "%s", val);
        return 0;
    }
    if (!strcmp(key, "uuid")) {
        snprintf(d->uuid, sizeof d->uuid, "%s", val);
        return 0;
    }
    if (!strcmp(key, "pci_bus_id")) {
        unsigned a, b, c, e;
        if (parse_bus_id(val, &a, &b, &c, &e))
            return -1;
        set_bus_id(d, a, b, c, e);
        return 0;
    }
    if (!strcmp(key, "pci_device_id") || !strcmp(key, "pci_subsystem_id")) {
        unsigned long long x;
        if (parse_ull(val, &x) || x > 0xFFFFFFFFull)
            return -1;
        if (key[4] == 'd')
            d->pci_device_id = (unsigned)x;
        else
            d->pci_subsystem_id = (unsigned)x;
        return 0;
    }
    if (!strcmp(key, "throttle_reasons") || !strcmp(key, "during.throttle_reasons")) {
        unsigned long long x;
        if (parse_ull(val, &x))
            return -1;
        if (key[0] == 'd') {
            d->dur_throttle = x;
            d->dur_throttle_set = 1;
        } else {
            d->throttle = x;
        }
        return 0;
    }
    if (!strcmp(key, "throttle_from_s") || !strcmp(key, "throttle_until_s") ||
        !strcmp(key, "lost_from_s") || !strcmp(key, "hang_from_s")) {
        double x;
        if (parse_double(val, &x))
            return -1;
        if (!strcmp(key, "throttle_from_s"))
            d->thr_from = x;
        else if (!strcmp(key, "throttle_until_s"))
            d->thr_until = x;
        else if (!strcmp(key, "hang_from_s"))
            d->hang_from = x;
        else
            d->lost_from = x;
        return 0;
    }
    if (!strcmp(key, "call_delay_ms") || !strcmp(key, "handle_error")) {
        long long x;
        if (parse_ll(val, &x) || x < 0 || x > 1000000)
            return -1;
        if (key[0] == 'c')
            d->call_delay_ms = (int)x;
        else
            d->handle_error = (int)x;
        return 0;
    }
    if (!strcmp(key, "processes") || !strcmp(key, "graphics_processes")) {
        if (key[0] == 'p')
            return parse_procs(val, d->procs, &d->nprocs) ? -1 : 0;
        return parse_procs(val, d->gprocs, &d->ngprocs) ? -1 : 0;
    }
    if (!strcmp(key, "unsupported")) {
        char *save = NULL;
        d->unsupported = 0;
        for (char *tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            tok = trim(tok);
            if (!*tok)
                continue;
            int u;
            for (u = 0; u < U_COUNT; u++)
                if (!strcmp(U_NAMES[u], tok))
                    break;
            if (u == U_COUNT)
                WARN("unknown feature '%s' in unsupported list (ignored)", tok);
            else
                d->unsupported |= 1UL << u;
        }
        return 0;
    }

    /* numeric fields: KEY, KEY.wave, during.KEY, during.KEY.wave */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", key);
    int during = 0, wave = 0;
    char *k = buf;
    if (!strncmp(k, "during.", 7)) {
        during = 1;
        k += 7;
    }
    size_t n = strlen(k);
    if (n > 5 && !strcmp(k + n - 5, ".wave")) {
        wave = 1;
        k[n - 5] = '\0';
    }
    f = field_index(k);
    if (f < 0)
        return 1;
    wave_t *w = during ? &d->dur[f] : &d->f[f];
    unsigned char *set = during ? &d->dset[f] : &d->fset[f];
    if (wave) {
        if (parse_wave(val, w))
            return -1;
        if (during && !*set)
            *set = 2; /* during wave without a during base: resolved after parsing */
        return 0;
    }
    double x;
    if (parse_double(val, &x))
        return -1;
    w->base = x;
    *set = 1;
    return 0;
}

/* Returns 0 on success, -1 on error (message printed). */
static int parse_scenario_file(const char *path, scenario_t *s)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "fakenvml: cannot read scenario '%s': %s\n", path, strerror(errno));
        return -1;
    }
    scenario_defaults(s);
    int explicit_count = -1, max_gpu = -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *l = trim(line);
        if (!*l)
            continue;
        char *eq = strchr(l, '=');
        if (!eq) {
            WARN("%s:%d: expected 'key = value', got '%s' (ignored)", path, lineno, l);
            continue;
        }
        *eq = '\0';
        char *key = trim(l);
        char *val = trim(eq + 1);
        int rc = 0;

        if (!strcmp(key, "driver_version")) {
            snprintf(s->driver_version, sizeof s->driver_version, "%s", val);
        } else if (!strcmp(key, "nvml_version")) {
            snprintf(s->nvml_version, sizeof s->nvml_version, "%s", val);
        } else if (!strcmp(key, "cuda_driver_version") || !strcmp(key, "init_error") ||
                   !strcmp(key, "device_count") || !strcmp(key, "call_delay_ms")) {
            long long x;
            if (parse_ll(val, &x) || x < 0 || x > 0x7FFFFFFF) {
                rc = -1;
            } else if (!strcmp(key, "cuda_driver_version")) {
                s->cuda_driver_version = (int)x;
            } else if (!strcmp(key, "init_error")) {
                s->init_error = (int)x;
            } else if (!strcmp(key, "call_delay_ms")) {
                s->call_delay_ms = (int)x;
            } else {
                if (x > MAX_DEVICES) {
                    WARN("%s:%d: device_count %lld > %d, clamped", path, lineno, x, MAX_DEVICES);
                    x = MAX_DEVICES;
                }
                explicit_count = (int)x;
            }
        } else if (!strcmp(key, "not_found")) {
            char *save = NULL;
            memset(s->not_found, 0, sizeof s->not_found);
            for (char *tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                tok = trim(tok);
                if (!*tok)
                    continue;
                int i = fn_index(tok);
                if (i < 0)
                    WARN("%s:%d: not_found: '%s' is not implemented by fakenvml (ignored)",
                         path, lineno, tok);
                else
                    s->not_found[i] = 1;
            }
        } else if (!strncmp(key, "gpu.", 4)) {
            char *end;
            long idx = strtol(key + 4, &end, 10);
            if (end == key + 4 || *end != '.' || idx < 0 || idx >= MAX_DEVICES) {
                rc = 1;
            } else {
                rc = apply_device_key(&s->dev[idx], end + 1, val);
                if (rc == 0 && idx > max_gpu)
                    max_gpu = (int)idx;
            }
        } else {
            rc = 1;
        }
        if (rc == 1)
            WARN("%s:%d: unknown key '%s' (ignored)", path, lineno, key);
        else if (rc < 0)
            WARN("%s:%d: bad value '%s' for key '%s' (ignored)", path, lineno, val, key);
    }
    int read_error = ferror(fp) ? errno : 0;
    free(line);
    fclose(fp);
    if (read_error) {
        fprintf(stderr, "fakenvml: cannot read scenario '%s': %s\n", path, strerror(read_error));
        return -1;
    }
    for (int i = 0; i < MAX_DEVICES; i++)
        for (int f = 0; f < F_COUNT; f++)
            if (s->dev[i].dset[f] == 2)
                s->dev[i].dur[f].base = s->dev[i].f[f].base;
    if (explicit_count >= 0)
        s->device_count = explicit_count;
    else if (max_gpu >= 0)
        s->device_count = max_gpu + 1;
    else
        s->device_count = 2;
    return 0;
}

/* Load (path != NULL and non-empty) or the built-in default.  Caller holds no lock. */
static int load_scenario(const char *path)
{
    scenario_t *s = malloc(sizeof *s);
    if (!s) {
        fprintf(stderr, "fakenvml: out of memory\n");
        return -1;
    }
    if (path && *path) {
        if (parse_scenario_file(path, s)) {
            free(s);
            return -1;
        }
    } else {
        scenario_defaults(s);
    }
    pthread_mutex_lock(&g_lock);
    scenario_t *old = g_scen;
    g_scen = s;
    g_t0 = mono_now();
    g_frozen = -1.0;
    g_total_calls = 0;
    memset(g_counts, 0, sizeof g_counts);
    pthread_cond_broadcast(&g_changed);
    pthread_mutex_unlock(&g_lock);
    free(old);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Value evaluation                                                         */
/* ------------------------------------------------------------------------ */

static int in_episode(const fdev_t *d, double t)
{
    return t >= d->thr_from && t < d->thr_until;
}

static double wave_eval(const wave_t *w, double t)
{
    double v = w->base;
    if (w->period > 0.0 && w->amp != 0.0)
        v += w->amp * sin(TWO_PI * t / w->period);
    return v;
}

static double raw_value(const fdev_t *d, int f, double t)
{
    if (d->dset[f] && in_episode(d, t))
        return wave_eval(&d->dur[f], t);
    if (!d->fset[f] && FIELDS[f].alias >= 0)
        return raw_value(d, FIELDS[f].alias, t);
    return wave_eval(&d->f[f], t);
}

static unsigned long long value(const fdev_t *d, int f, double t)
{
    double v = floor(raw_value(d, f, t) + 0.5);
    if (!(v > 0.0)) /* also catches NaN */
        return 0;
    if (FIELDS[f].pct && v > 100.0)
        return 100;
    if (v >= 18446744073709551615.0)
        return 0xFFFFFFFFFFFFFFFFULL;
    return (unsigned long long)v;
}

static unsigned int uvalue(const fdev_t *d, int f, double t)
{
    unsigned long long v = value(d, f, t);
    return v > 0xFFFFFFFFull ? 0xFFFFFFFFu : (unsigned int)v;
}

/* Integral of a wave over [a, b]. */
static double wave_integral(const wave_t *w, double a, double b)
{
    if (b <= a)
        return 0.0;
    double r = w->base * (b - a);
    if (w->period > 0.0 && w->amp != 0.0)
        r -= w->amp * w->period / TWO_PI *
             (cos(TWO_PI * b / w->period) - cos(TWO_PI * a / w->period));
    return r;
}

static double overlap(double a0, double a1, double b0, double b1)
{
    double lo = a0 > b0 ? a0 : b0;
    double hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0.0;
}

/* energy_mj + integral of power (mW) over [0, t] seconds = mJ */
static unsigned long long energy_mj(const fdev_t *d, double t)
{
    double e = d->f[F_ENERGY_MJ].base;
    const wave_t *p = &d->f[F_POWER_MW];
    if (d->dset[F_POWER_MW] && d->thr_from < t) {
        double from = d->thr_from > 0.0 ? d->thr_from : 0.0;
        double until = d->thr_until < t ? d->thr_until : t;
        e += wave_integral(p, 0.0, from);
        e += wave_integral(&d->dur[F_POWER_MW], from, until);
        e += wave_integral(p, until, t);
    } else {
        e += wave_integral(p, 0.0, t);
    }
    e = floor(e);
    return e > 0.0 ? (unsigned long long)e : 0ULL;
}

static unsigned long long reasons(const fdev_t *d, double t)
{
    if (d->dur_throttle_set && in_episode(d, t))
        return d->dur_throttle;
    return d->throttle;
}

/* Seconds in [0, t] during which the reason mask intersected `bits`. */
static double violation_seconds(const fdev_t *d, double t, unsigned long long bits)
{
    double in_ep = overlap(0.0, t, d->thr_from, d->thr_until);
    double out_ep = t - in_ep;
    unsigned long long dmask = d->dur_throttle_set ? d->dur_throttle : d->throttle;
    double s = 0.0;
    if (d->throttle & bits)
        s += out_ep;
    if (dmask & bits)
        s += in_ep;
    return s;
}

/* ------------------------------------------------------------------------ */
/* Call prologues                                                            */
/* ------------------------------------------------------------------------ */

/* Lock, count the call, check not_found and init.  On failure unlocks. */
static nvmlReturn_t enter(int fn)
{
    pthread_mutex_lock(&g_lock);
    g_total_calls++;
    g_counts[fn]++;
    if (g_scen && g_scen->not_found[fn]) {
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    if (!g_scen || g_refcount <= 0) {
        pthread_mutex_unlock(&g_lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t leave(nvmlReturn_t rc)
{
    pthread_mutex_unlock(&g_lock);
    return rc;
}

static int handle_index(nvmlDevice_t h)
{
    if (!h || h < &g_handles[0] || h >= &g_handles[MAX_DEVICES])
        return -1;
    int i = (int)(h - &g_handles[0]);
    if (i >= g_scen->device_count)
        return -1;
    return i;
}

/* Called with the lock held and the device index valid: applies call_delay
 * (sleeping without the lock), then the lost check.  On failure unlocks. */
static nvmlReturn_t device_gate(int idx, double *t)
{
    fdev_t *d = &g_scen->dev[idx];
    int delay = d->call_delay_ms >= 0 ? d->call_delay_ms : g_scen->call_delay_ms;
    if (delay > 0) {
        pthread_mutex_unlock(&g_lock);
        sleep_ms(delay);
        pthread_mutex_lock(&g_lock);
        if (!g_scen || g_refcount <= 0)
            return leave(NVML_ERROR_UNINITIALIZED);
        if (idx >= g_scen->device_count)
            return leave(NVML_ERROR_INVALID_ARGUMENT);
        d = &g_scen->dev[idx];
    }
    *t = cur_time();
    if (*t >= d->hang_from) {
        /* A driver call that never returns (Xid storm, GPU reset): block this caller
         * forever, without the lock, so other devices and threads still answer. */
        pthread_mutex_unlock(&g_lock);
        for (;;)
            sleep_ms(1000);
    }
    if (*t >= d->lost_from)
        return leave(NVML_ERROR_GPU_IS_LOST);
    return NVML_SUCCESS;
}

/* Full prologue for nvmlDevice* calls taking a handle. */
static nvmlReturn_t dev_enter(int fn, nvmlDevice_t h, int feature, fdev_t **dout, double *t)
{
    nvmlReturn_t rc = enter(fn);
    if (rc != NVML_SUCCESS)
        return rc;
    int idx = handle_index(h);
    if (idx < 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = device_gate(idx, t);
    if (rc != NVML_SUCCESS)
        return rc;
    fdev_t *d = &g_scen->dev[idx];
    if (feature >= 0 && (d->unsupported & (1UL << feature)))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *dout = d;
    return NVML_SUCCESS;
}

#define DEV_PROLOGUE(name, feature)                                         \
    fdev_t *d = NULL;                                                       \
    double t = 0.0;                                                         \
    {                                                                       \
        nvmlReturn_t rc_ = dev_enter(FN_##name, device, (feature), &d, &t); \
        if (rc_ != NVML_SUCCESS)                                            \
            return rc_;                                                     \
    }

static nvmlReturn_t put_str(char *buf, unsigned int length, const char *s)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(s);
    if ((size_t)length < n + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, n + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Stats file                                                               */
/* ------------------------------------------------------------------------ */

static void write_stats_file(void)
{
    const char *path = getenv("FAKENVML_STATS_FILE");
    if (!path || !*path)
        return;
    unsigned long long counts[FN_COUNT], total;
    pthread_mutex_lock(&g_lock);
    total = g_total_calls;
    memcpy(counts, g_counts, sizeof counts);
    pthread_mutex_unlock(&g_lock);

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 64);
    if (!tmp)
        return;
    snprintf(tmp, plen + 64, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        fprintf(stderr, "fakenvml: cannot write stats file '%s': %s\n", tmp, strerror(errno));
        free(tmp);
        return;
    }
    fprintf(fp, "calls=%llu\n", total);
    for (int i = 0; i < FN_COUNT; i++)
        if (counts[i])
            fprintf(fp, "%s=%llu\n", FN_NAMES[i], counts[i]);
    if (fclose(fp) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "fakenvml: cannot write stats file '%s': %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
}

__attribute__((destructor)) static void fakenvml_fini(void)
{
    write_stats_file();
}

/* ------------------------------------------------------------------------ */
/* Test hooks (not NVML)                                                    */
/* ------------------------------------------------------------------------ */

EXPORT int fakenvml_load(const char *path)
{
    return load_scenario(path) ? -1 : 0;
}

EXPORT void fakenvml_set_time(double seconds)
{
    pthread_mutex_lock(&g_lock);
    if (seconds < 0.0) {
        /* unfreeze, continuing from the frozen time */
        if (g_frozen >= 0.0)
            g_t0 = mono_now() - g_frozen;
        g_frozen = -1.0;
    } else {
        g_frozen = seconds;
    }
    pthread_cond_broadcast(&g_changed);
    pthread_mutex_unlock(&g_lock);
}

EXPORT double fakenvml_get_time(void)
{
    pthread_mutex_lock(&g_lock);
    double t = cur_time();
    pthread_mutex_unlock(&g_lock);
    return t;
}

EXPORT unsigned long long fakenvml_call_count(void)
{
    pthread_mutex_lock(&g_lock);
    unsigned long long n = g_total_calls;
    pthread_mutex_unlock(&g_lock);
    return n;
}

EXPORT void fakenvml_reset_counts(void)
{
    pthread_mutex_lock(&g_lock);
    g_total_calls = 0;
    memset(g_counts, 0, sizeof g_counts);
    pthread_mutex_unlock(&g_lock);
}

EXPORT unsigned long long fakenvml_call_count_for(const char *fn_name)
{
    if (!fn_name)
        return 0;
    int i = fn_index(fn_name);
    if (i < 0)
        return 0;
    pthread_mutex_lock(&g_lock);
    unsigned long long n = g_counts[i];
    pthread_mutex_unlock(&g_lock);
    return n;
}

EXPORT int fakenvml_init_refcount(void)
{
    pthread_mutex_lock(&g_lock);
    int n = g_refcount;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Drop every nvmlInit reference (test isolation). */
EXPORT void fakenvml_force_shutdown(void)
{
    pthread_mutex_lock(&g_lock);
    g_refcount = 0;
    pthread_cond_broadcast(&g_changed); /* a blocked event wait ends: UNINITIALIZED */
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------ */
/* NVML: init / shutdown / errors / system                                  */
/* ------------------------------------------------------------------------ */

static nvmlReturn_t do_init(int fn)
{
    pthread_mutex_lock(&g_lock);
    int loaded = g_scen != NULL;
    pthread_mutex_unlock(&g_lock);
    if (!loaded) {
        const char *path = getenv("FAKENVML_SCENARIO");
        if (load_scenario(path)) {
            pthread_mutex_lock(&g_lock);
            g_total_calls++;
            g_counts[fn]++;
            pthread_mutex_unlock(&g_lock);
            return NVML_ERROR_UNKNOWN;
        }
    }
    pthread_mutex_lock(&g_lock);
    g_total_calls++;
    g_counts[fn]++;
    if (g_scen->not_found[fn])
        return leave(NVML_ERROR_FUNCTION_NOT_FOUND);
    if (g_scen->init_error != 0)
        return leave((nvmlReturn_t)g_scen->init_error);
    g_refcount++;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return do_init(FN_nvmlInitWithFlags);
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return do_init(FN_nvmlInit_v2);
}

EXPORT nvmlReturn_t nvmlInit(void)
{
    return do_init(FN_nvmlInit);
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_lock);
    g_total_calls++;
    g_counts[FN_nvmlShutdown]++;
    nvmlReturn_t rc = NVML_SUCCESS;
    if (g_refcount <= 0)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        g_refcount--;
    pthread_cond_broadcast(&g_changed);
    pthread_mutex_unlock(&g_lock);
    write_stats_file();
    return rc;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "The requested vgpu operation is not available on target device, because ECC is "
               "enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "System not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t rc = enter(FN_nvmlSystemGetDriverVersion);
    if (rc != NVML_SUCCESS)
        return rc;
    return leave(put_str(version, length, g_scen->driver_version));
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    nvmlReturn_t rc = enter(FN_nvmlSystemGetNVMLVersion);
    if (rc != NVML_SUCCESS)
        return rc;
    return leave(put_str(version, length, g_scen->nvml_version));
}

static nvmlReturn_t cuda_version(int fn, int *v)
{
    nvmlReturn_t rc = enter(fn);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!v)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *v = g_scen->cuda_driver_version;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_version(FN_nvmlSystemGetCudaDriverVersion, cudaDriverVersion);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_version(FN_nvmlSystemGetCudaDriverVersion_v2, cudaDriverVersion);
}

/* ------------------------------------------------------------------------ */
/* NVML: enumeration                                                        */
/* ------------------------------------------------------------------------ */

static nvmlReturn_t get_count(int fn, unsigned int *count)
{
    nvmlReturn_t rc = enter(fn);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned int)g_scen->device_count;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    return get_count(FN_nvmlDeviceGetCount_v2, deviceCount);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return get_count(FN_nvmlDeviceGetCount, deviceCount);
}

/* With the lock held and idx valid: delay, lost, hand out the handle. */
static nvmlReturn_t give_handle(int idx, nvmlDevice_t *device)
{
    double t;
    nvmlReturn_t rc = device_gate(idx, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    *device = &g_handles[idx];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = enter(FN_nvmlDeviceGetHandleByIndex_v2);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!device || index >= (unsigned int)g_scen->device_count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (g_scen->dev[index].handle_error)
        return leave((nvmlReturn_t)g_scen->dev[index].handle_error);
    return give_handle((int)index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    nvmlReturn_t rc = enter(FN_nvmlDeviceGetHandleByUUID);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!uuid || !device)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < g_scen->device_count; i++)
        if (!strcmp(g_scen->dev[i].uuid, uuid))
            return give_handle(i, device);
    return leave(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    nvmlReturn_t rc = enter(FN_nvmlDeviceGetHandleByPciBusId_v2);
    if (rc != NVML_SUCCESS)
        return rc;
    unsigned dom, bus, dev, fn;
    if (!pciBusId || !device || parse_bus_id(pciBusId, &dom, &bus, &dev, &fn))
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < g_scen->device_count; i++) {
        const fdev_t *d = &g_scen->dev[i];
        if (d->pci_domain == dom && d->pci_bus == bus && d->pci_device == dev &&
            d->pci_function == fn)
            return give_handle(i, device);
    }
    return leave(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEV_PROLOGUE(nvmlDeviceGetIndex, U_NONE);
    (void)t;
    if (!index)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *index = (unsigned int)(d - &g_scen->dev[0]);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: identity                                                           */
/* ------------------------------------------------------------------------ */

/* MIG device handles answer these calls for their instance (the MIG block at the end). */
static int is_mig_handle(nvmlDevice_t h);
static nvmlReturn_t mig_name(nvmlDevice_t device, char *name, unsigned int length);
static nvmlReturn_t mig_uuid(nvmlDevice_t device, char *uuid, unsigned int length);
static nvmlReturn_t mig_memory(nvmlDevice_t device, nvmlMemory_t *memory);
static nvmlReturn_t mig_memory_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
static nvmlReturn_t mig_procs(nvmlDevice_t device, unsigned int *infoCount,
                              nvmlProcessInfo_t *infos, int graphics);

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    if (is_mig_handle(device))
        return mig_name(device, name, length);
    DEV_PROLOGUE(nvmlDeviceGetName, U_NONE);
    (void)t;
    return leave(put_str(name, length, d->name));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    if (is_mig_handle(device))
        return mig_uuid(device, uuid, length);
    DEV_PROLOGUE(nvmlDeviceGetUUID, U_NONE);
    (void)t;
    return leave(put_str(uuid, length, d->uuid));
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEV_PROLOGUE(nvmlDeviceGetPciInfo_v3, U_NONE);
    (void)t;
    if (!pci)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X",
             d->pci_domain & 0xFFFFu, d->pci_bus & 0xFFu, d->pci_device & 0x1Fu,
             d->pci_function & 0x7u);
    snprintf(pci->busId, sizeof pci->busId, "%s", d->bus_id);
    pci->domain = d->pci_domain;
    pci->bus = d->pci_bus;
    pci->device = d->pci_device;
    pci->pciDeviceId = d->pci_device_id;
    pci->pciSubSystemId = d->pci_subsystem_id;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEV_PROLOGUE(nvmlDeviceGetCudaComputeCapability, U_CUDA_CC);
    if (!major || !minor)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *major = (int)uvalue(d, F_CC_MAJOR, t);
    *minor = (int)uvalue(d, F_CC_MINOR, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores)
{
    DEV_PROLOGUE(nvmlDeviceGetNumGpuCores, U_NUM_CORES);
    if (!numCores)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *numCores = uvalue(d, F_NUM_CORES, t);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: memory / utilization                                               */
/* ------------------------------------------------------------------------ */

static void mem_values(const fdev_t *d, double t, unsigned long long *total,
                       unsigned long long *used, unsigned long long *reserved,
                       unsigned long long *free_)
{
    *total = value(d, F_MEM_TOTAL, t);
    *reserved = value(d, F_MEM_RESERVED, t);
    if (*reserved > *total)
        *reserved = *total;
    *used = value(d, F_MEM_USED, t);
    if (*used > *total - *reserved)
        *used = *total - *reserved;
    *free_ = *total - *used - *reserved;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    if (is_mig_handle(device))
        return mig_memory(device, memory);
    DEV_PROLOGUE(nvmlDeviceGetMemoryInfo, U_MEMORY);
    if (!memory)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long total, used, reserved, free_;
    mem_values(d, t, &total, &used, &reserved, &free_);
    /* v1: "used" is the sum of reserved and allocated memory */
    memory->total = total;
    memory->used = used + reserved;
    memory->free = free_;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    if (is_mig_handle(device))
        return mig_memory_v2(device, memory);
    DEV_PROLOGUE(nvmlDeviceGetMemoryInfo_v2, U_MEMORY);
    if (!memory)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long total, used, reserved, free_;
    mem_values(d, t, &total, &used, &reserved, &free_);
    memory->total = total;
    memory->reserved = reserved;
    memory->free = free_;
    memory->used = used;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                  nvmlUtilization_t *utilization)
{
    DEV_PROLOGUE(nvmlDeviceGetUtilizationRates, U_UTIL);
    if (!utilization)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    utilization->gpu = uvalue(d, F_UTIL_GPU, t);
    utilization->memory = uvalue(d, F_UTIL_MEM, t);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: power / energy                                                     */
/* ------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    DEV_PROLOGUE(nvmlDeviceGetPowerUsage, U_POWER);
    if (!power)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *power = uvalue(d, F_POWER_MW, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEV_PROLOGUE(nvmlDeviceGetEnforcedPowerLimit, U_POWER_LIMIT);
    if (!limit)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *limit = uvalue(d, F_POWER_LIMIT_MW, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEV_PROLOGUE(nvmlDeviceGetPowerManagementLimit, U_POWER_LIMIT);
    if (!limit)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *limit = uvalue(d, F_POWER_LIMIT_MW, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                        unsigned long long *energy)
{
    DEV_PROLOGUE(nvmlDeviceGetTotalEnergyConsumption, U_ENERGY);
    if (!energy)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *energy = energy_mj(d, t);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: thermals / fan                                                     */
/* ------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int *temp)
{
    DEV_PROLOGUE(nvmlDeviceGetTemperature, U_TEMPERATURE);
    if (!temp || sensorType != NVML_TEMPERATURE_GPU)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *temp = uvalue(d, F_TEMP_C, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature)
{
    DEV_PROLOGUE(nvmlDeviceGetTemperatureV, U_TEMPERATURE);
    if (!temperature)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (temperature->version != nvmlTemperature_v1)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (temperature->sensorType == NVML_TEMPERATURE_GPU_MAX)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    if (temperature->sensorType != NVML_TEMPERATURE_GPU)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    temperature->temperature = (int)uvalue(d, F_TEMP_C, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                                      nvmlTemperatureThresholds_t thresholdType,
                                                      unsigned int *temp)
{
    DEV_PROLOGUE(nvmlDeviceGetTemperatureThreshold, U_TEMP_THRESHOLDS);
    if (!temp || (unsigned)thresholdType >= NVML_TEMPERATURE_THRESHOLD_COUNT)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    switch (thresholdType) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
        *temp = uvalue(d, F_TEMP_SHUTDOWN_C, t);
        break;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
        *temp = uvalue(d, F_TEMP_SLOWDOWN_C, t);
        break;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
        *temp = uvalue(d, F_TEMP_GPU_MAX_C, t);
        break;
    case NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
        if (!value(d, F_TEMP_MEM_MAX_C, t))
            return leave(NVML_ERROR_NOT_SUPPORTED);
        *temp = uvalue(d, F_TEMP_MEM_MAX_C, t);
        break;
    default:
        return leave(NVML_ERROR_NOT_SUPPORTED);
    }
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    DEV_PROLOGUE(nvmlDeviceGetFanSpeed, U_FAN);
    if (!speed)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *speed = uvalue(d, F_FAN_PCT, t);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: clocks / performance                                               */
/* ------------------------------------------------------------------------ */

static int clock_field(nvmlClockType_t type, int max)
{
    switch (type) {
    case NVML_CLOCK_GRAPHICS: return max ? F_CLOCK_GRAPHICS_MAX : F_CLOCK_GRAPHICS;
    case NVML_CLOCK_SM: return max ? F_CLOCK_SM_MAX : F_CLOCK_SM;
    case NVML_CLOCK_MEM: return max ? F_CLOCK_MEM_MAX : F_CLOCK_MEM;
    case NVML_CLOCK_VIDEO: return max ? F_CLOCK_VIDEO_MAX : F_CLOCK_VIDEO;
    default: return -1;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                           unsigned int *clock)
{
    DEV_PROLOGUE(nvmlDeviceGetClockInfo, U_CLOCKS);
    int f = clock_field(type, 0);
    if (!clock || f < 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *clock = uvalue(d, f, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                              unsigned int *clock)
{
    DEV_PROLOGUE(nvmlDeviceGetMaxClockInfo, U_MAX_CLOCKS);
    int f = clock_field(type, 1);
    if (!clock || f < 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *clock = uvalue(d, f, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    DEV_PROLOGUE(nvmlDeviceGetPerformanceState, U_PSTATE);
    if (!pState)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int p = uvalue(d, F_PSTATE, t);
    *pState = (nvmlPstates_t)(p > 15 ? NVML_PSTATE_UNKNOWN : (int)p);
    return leave(NVML_SUCCESS);
}

static nvmlReturn_t reasons_common(int fn, nvmlDevice_t device, unsigned long long *r)
{
    fdev_t *d = NULL;
    double t = 0.0;
    nvmlReturn_t rc = dev_enter(fn, device, U_THROTTLE, &d, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!r)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *r = reasons(d, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                           unsigned long long *clocksEventReasons)
{
    return reasons_common(FN_nvmlDeviceGetCurrentClocksEventReasons, device, clocksEventReasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(
    nvmlDevice_t device, unsigned long long *clocksThrottleReasons)
{
    return reasons_common(FN_nvmlDeviceGetCurrentClocksThrottleReasons, device,
                          clocksThrottleReasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device,
                                                 nvmlPerfPolicyType_t perfPolicyType,
                                                 nvmlViolationTime_t *violTime)
{
    DEV_PROLOGUE(nvmlDeviceGetViolationStatus, U_VIOLATION);
    if (!violTime)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const unsigned long long all = REASON_SW_POWER_CAP | REASON_HW_POWER_BRAKE |
                                   REASON_SW_THERMAL | REASON_HW_THERMAL | REASON_HW_SLOWDOWN |
                                   REASON_SYNC_BOOST | REASON_BOARD_LIMIT | REASON_RELIABILITY;
    unsigned long long bits;
    switch (perfPolicyType) {
    case NVML_PERF_POLICY_POWER: bits = REASON_SW_POWER_CAP | REASON_HW_POWER_BRAKE; break;
    case NVML_PERF_POLICY_THERMAL: bits = REASON_SW_THERMAL | REASON_HW_THERMAL; break;
    case NVML_PERF_POLICY_SYNC_BOOST: bits = REASON_SYNC_BOOST; break;
    case NVML_PERF_POLICY_BOARD_LIMIT: bits = REASON_BOARD_LIMIT; break;
    case NVML_PERF_POLICY_LOW_UTILIZATION: bits = 0; break;
    case NVML_PERF_POLICY_RELIABILITY: bits = REASON_RELIABILITY; break;
    case NVML_PERF_POLICY_TOTAL_APP_CLOCKS:
    case NVML_PERF_POLICY_TOTAL_BASE_CLOCKS: bits = all; break;
    default: return leave(NVML_ERROR_INVALID_ARGUMENT);
    }
    violTime->referenceTime = (unsigned long long)llround(t * 1e6);
    double s = bits ? violation_seconds(d, t, bits) : 0.0;
    violTime->violationTime = (unsigned long long)llround(s * 1e9);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: PCIe                                                               */
/* ------------------------------------------------------------------------ */

#define PCIE_LINK_FN(fname, field)                                        \
    EXPORT nvmlReturn_t fname(nvmlDevice_t device, unsigned int *out)     \
    {                                                                     \
        DEV_PROLOGUE(fname, U_PCIE_LINK);                                 \
        if (!out)                                                         \
            return leave(NVML_ERROR_INVALID_ARGUMENT);                    \
        *out = uvalue(d, field, t);                                       \
        return leave(NVML_SUCCESS);                                       \
    }

PCIE_LINK_FN(nvmlDeviceGetCurrPcieLinkGeneration, F_PCIE_GEN)
PCIE_LINK_FN(nvmlDeviceGetCurrPcieLinkWidth, F_PCIE_WIDTH)
PCIE_LINK_FN(nvmlDeviceGetMaxPcieLinkGeneration, F_PCIE_GEN_MAX)
PCIE_LINK_FN(nvmlDeviceGetMaxPcieLinkWidth, F_PCIE_WIDTH_MAX)

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                                unsigned int *value_)
{
    DEV_PROLOGUE(nvmlDeviceGetPcieThroughput, U_PCIE_THROUGHPUT);
    if (!value_)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (counter == NVML_PCIE_UTIL_TX_BYTES)
        *value_ = uvalue(d, F_PCIE_TX, t);
    else if (counter == NVML_PCIE_UTIL_RX_BYTES)
        *value_ = uvalue(d, F_PCIE_RX, t);
    else
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: ECC                                                                */
/* ------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType,
                                                unsigned long long *eccCounts)
{
    DEV_PROLOGUE(nvmlDeviceGetTotalEccErrors, U_ECC);
    if (!eccCounts || (unsigned)counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    int agg = counterType == NVML_AGGREGATE_ECC;
    if (errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
        *eccCounts = value(d, agg ? F_ECC_UNCORRECTED_AGG : F_ECC_UNCORRECTED, t);
    else if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED)
        *eccCounts = value(d, agg ? F_ECC_CORRECTED_AGG : F_ECC_CORRECTED, t);
    else
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: processes                                                          */
/* ------------------------------------------------------------------------ */

static nvmlReturn_t procs_common(int fn, int feature, nvmlDevice_t device, unsigned int *infoCount,
                                 nvmlProcessInfo_t *infos, int graphics)
{
    fdev_t *d = NULL;
    double t = 0.0;
    nvmlReturn_t rc = dev_enter(fn, device, feature, &d, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!infoCount)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const proc_t *p = graphics ? d->gprocs : d->procs;
    unsigned int n = (unsigned int)(graphics ? d->ngprocs : d->nprocs);
    if (*infoCount < n) {
        *infoCount = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (n > 0 && !infos)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < n; i++) {
        infos[i].pid = p[i].pid;
        infos[i].usedGpuMemory = p[i].mem;
        infos[i].gpuInstanceId = 0xFFFFFFFFu;
        infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    *infoCount = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int *infoCount,
                                                            nvmlProcessInfo_t *infos)
{
    if (is_mig_handle(device))
        return mig_procs(device, infoCount, infos, 0);
    return procs_common(FN_nvmlDeviceGetComputeRunningProcesses_v3, U_PROCESSES, device,
                        infoCount, infos, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                             unsigned int *infoCount,
                                                             nvmlProcessInfo_t *infos)
{
    if (is_mig_handle(device))
        return mig_procs(device, infoCount, infos, 1);
    return procs_common(FN_nvmlDeviceGetGraphicsRunningProcesses_v3, U_GRAPHICS_PROCESSES,
                        device, infoCount, infos, 1);
}

/* ------------------------------------------------------------------------ */
/* NVML: configuration and health (gputui doctor), XID events               */
/* ------------------------------------------------------------------------ */

typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;

typedef enum {
    NVML_COMPUTEMODE_DEFAULT = 0,
    NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
    NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
    NVML_COMPUTEMODE_COUNT
} nvmlComputeMode_t;

typedef enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
    NVML_PAGE_RETIREMENT_CAUSE_COUNT
} nvmlPageRetirementCause_t;

#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
#define FAKE_SUPPORTED_EVENTS \
    (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeXidCriticalError)
/* ---- CLOCK EVENTS (nvml.h: "Kepler only"): supported where the scenario gives times */
#define nvmlEventTypeClock 0x0000000000000010ULL
#define FAKE_CLOCK_EVENTS_MAX ((int)(sizeof ((fdev_t *)0)->clock_at / sizeof(double)))

static unsigned long long supported_events(const fdev_t *d)
{
    return FAKE_SUPPORTED_EVENTS | (d->nclock > 0 ? nvmlEventTypeClock : 0ULL);
}
/* ---- end CLOCK EVENTS */

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

/* An event set remembers, per device, what was registered and when, and whether the
 * scenario's XID has been handed out (each set sees it once, as a real driver does). */
struct nvmlEventSet_st {
    unsigned long long mask[MAX_DEVICES];
    double registered_at[MAX_DEVICES];
    unsigned char delivered[MAX_DEVICES];
    int clock_delivered[MAX_DEVICES]; /* CLOCK EVENTS: clock_at[] entries handed out */
};
typedef struct nvmlEventSet_st *nvmlEventSet_t;

/* Scenario keys: gpu.N.xid, gpu.N.xid_at_s, gpu.N.vbios_version.  1 = not a doctor key. */
static int apply_doctor_key(fdev_t *d, const char *key, const char *val)
{
    /* ---- CLOCK EVENTS: gpu.N.clock_events_at_s = comma-separated seconds, ascending */
    if (!strcmp(key, "clock_events_at_s")) {
        const char *p = val;
        d->nclock = 0;
        while (*p) {
            char *end;
            double x = strtod(p, &end);
            if (end == p || d->nclock >= FAKE_CLOCK_EVENTS_MAX ||
                (d->nclock > 0 && x < d->clock_at[d->nclock - 1]))
                return -1;
            d->clock_at[d->nclock++] = x;
            while (isspace((unsigned char)*end))
                end++;
            if (*end == ',')
                end++;
            else if (*end)
                return -1;
            p = end;
        }
        return d->nclock > 0 ? 0 : -1;
    }
    /* ---- end CLOCK EVENTS */
    if (!strcmp(key, "xid")) {
        unsigned long long x;
        if (parse_ull(val, &x))
            return -1;
        d->xid = x;
        return 0;
    }
    if (!strcmp(key, "xid_at_s")) {
        double x;
        if (parse_double(val, &x))
            return -1;
        d->xid_at_s = x;
        return 0;
    }
    if (!strcmp(key, "vbios_version")) {
        snprintf(d->vbios, sizeof d->vbios, "%s", val);
        return 0;
    }
    return 1;
}

static nvmlReturn_t enable_state(int fn, nvmlDevice_t device, int feature, int field,
                                 nvmlEnableState_t *out)
{
    fdev_t *d = NULL;
    double t = 0.0;
    nvmlReturn_t rc = dev_enter(fn, device, feature, &d, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *out = value(d, field, t) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    return enable_state(FN_nvmlDeviceGetPersistenceMode, device, U_PERSISTENCE, F_PERSISTENCE,
                        mode);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                           nvmlEnableState_t *isPending)
{
    return enable_state(FN_nvmlDeviceGetRetiredPagesPendingStatus, device, U_RETIRED_PAGES,
                        F_RETIRED_PENDING, isPending);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                             unsigned int *defaultLimit)
{
    DEV_PROLOGUE(nvmlDeviceGetPowerManagementDefaultLimit, U_POWER_LIMIT);
    if (!defaultLimit)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *defaultLimit = uvalue(d, F_POWER_DEFAULT_LIMIT_MW, t);
    return leave(NVML_SUCCESS);
}

static int app_clock_field(nvmlClockType_t type, int dflt)
{
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: return dflt ? F_DEFAULT_APP_CLOCK_SM : F_APP_CLOCK_SM;
    case NVML_CLOCK_MEM: return dflt ? F_DEFAULT_APP_CLOCK_MEM : F_APP_CLOCK_MEM;
    default: return -1;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, nvmlClockType_t clockType,
                                                   unsigned int *clockMHz)
{
    DEV_PROLOGUE(nvmlDeviceGetApplicationsClock, U_APP_CLOCKS);
    int f = app_clock_field(clockType, 0);
    if (!clockMHz || f < 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *clockMHz = uvalue(d, f, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device,
                                                          nvmlClockType_t clockType,
                                                          unsigned int *clockMHz)
{
    DEV_PROLOGUE(nvmlDeviceGetDefaultApplicationsClock, U_APP_CLOCKS);
    int f = app_clock_field(clockType, 1);
    if (!clockMHz || f < 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *clockMHz = uvalue(d, f, t);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                         nvmlEnableState_t *pending)
{
    DEV_PROLOGUE(nvmlDeviceGetEccMode, U_ECC_MODE);
    if (!current || !pending)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *current = value(d, F_ECC_MODE, t) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    *pending = value(d, F_ECC_MODE_PENDING, t) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                         unsigned int *pendingMode)
{
    DEV_PROLOGUE(nvmlDeviceGetMigMode, U_MIG);
    if (!currentMode || !pendingMode)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *currentMode = value(d, F_MIG_MODE, t) ? 1u : 0u;
    *pendingMode = value(d, F_MIG_MODE_PENDING, t) ? 1u : 0u;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    DEV_PROLOGUE(nvmlDeviceGetComputeMode, U_COMPUTE_MODE);
    if (!mode)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int m = uvalue(d, F_COMPUTE_MODE, t);
    *mode = (nvmlComputeMode_t)(m < NVML_COMPUTEMODE_COUNT ? m : NVML_COMPUTEMODE_DEFAULT);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                              unsigned int *uncRows, unsigned int *isPending,
                                              unsigned int *failureOccurred)
{
    DEV_PROLOGUE(nvmlDeviceGetRemappedRows, U_REMAPPED_ROWS);
    if (!corrRows || !uncRows || !isPending || !failureOccurred)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *corrRows = uvalue(d, F_REMAP_CORRECTABLE, t);
    *uncRows = uvalue(d, F_REMAP_UNCORRECTABLE, t);
    *isPending = value(d, F_REMAP_PENDING, t) ? 1u : 0u;
    *failureOccurred = value(d, F_REMAP_FAILURE, t) ? 1u : 0u;
    return leave(NVML_SUCCESS);
}

/* Two-call protocol: a count too small gets INSUFFICIENT_SIZE and the count needed. */
EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                              nvmlPageRetirementCause_t cause,
                                              unsigned int *pageCount,
                                              unsigned long long *addresses)
{
    DEV_PROLOGUE(nvmlDeviceGetRetiredPages, U_RETIRED_PAGES);
    if (!pageCount)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    int f;
    if (cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        f = F_RETIRED_SBE;
    else if (cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        f = F_RETIRED_DBE;
    else
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int n = uvalue(d, f, t);
    if (*pageCount < n) {
        *pageCount = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (n > 0 && !addresses)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < n; i++)
        addresses[i] = 0x100000ULL * (unsigned long long)(i + 1) + (unsigned long long)f;
    *pageCount = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version,
                                              unsigned int length)
{
    DEV_PROLOGUE(nvmlDeviceGetVbiosVersion, U_VBIOS);
    return leave(put_str(version, length, d->vbios));
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                     unsigned long long *eventTypes)
{
    DEV_PROLOGUE(nvmlDeviceGetSupportedEventTypes, U_EVENTS);
    if (!eventTypes)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *eventTypes = supported_events(d);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t rc = enter(FN_nvmlEventSetCreate);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!set)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *set = calloc(1, sizeof **set);
    return leave(*set ? NVML_SUCCESS : NVML_ERROR_MEMORY);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                             nvmlEventSet_t set)
{
    DEV_PROLOGUE(nvmlDeviceRegisterEvents, U_EVENTS);
    if (!set)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (eventTypes & ~supported_events(d))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    int i = handle_index(device);
    set->mask[i] |= eventTypes;
    set->registered_at[i] = t;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                        unsigned int timeoutms)
{
    nvmlReturn_t rc = enter(FN_nvmlEventSetWait_v2);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!set || !data)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    double deadline = mono_now() + timeoutms / 1000.0;
    for (;;) {
        double t = cur_time();
        double next_t = HUGE_VAL; /* the scenario time of the next event still to come */
        for (int i = 0; i < g_scen->device_count; i++) {
            const fdev_t *d = &g_scen->dev[i];
            /* Only an error that happens after registration reaches the set. */
            if ((set->mask[i] & nvmlEventTypeXidCriticalError) && !set->delivered[i] &&
                d->xid_at_s >= set->registered_at[i] && d->xid_at_s > t &&
                d->xid_at_s < next_t)
                next_t = d->xid_at_s;
            if ((set->mask[i] & nvmlEventTypeXidCriticalError) && !set->delivered[i] &&
                t >= d->xid_at_s && d->xid_at_s >= set->registered_at[i]) {
                set->delivered[i] = 1;
                data->device = &g_handles[i];
                data->eventType = nvmlEventTypeXidCriticalError;
                data->eventData = d->xid;
                data->gpuInstanceId = 0xFFFFFFFFu;
                data->computeInstanceId = 0xFFFFFFFFu;
                return leave(NVML_SUCCESS);
            }
            /* ---- CLOCK EVENTS: each time in clock_at[] once, from registration on */
            if (set->mask[i] & nvmlEventTypeClock) {
                int *k = &set->clock_delivered[i];
                while (*k < d->nclock && d->clock_at[*k] < set->registered_at[i])
                    (*k)++; /* before registration: never reaches this set */
                if (*k < d->nclock && d->clock_at[*k] > t && d->clock_at[*k] < next_t)
                    next_t = d->clock_at[*k];
                if (*k < d->nclock && t >= d->clock_at[*k]) {
                    (*k)++;
                    data->device = &g_handles[i];
                    data->eventType = nvmlEventTypeClock;
                    data->eventData = 0; /* nvml.h: 0 for every event but an XID */
                    data->gpuInstanceId = 0xFFFFFFFFu;
                    data->computeInstanceId = 0xFFFFFFFFu;
                    return leave(NVML_SUCCESS);
                }
            }
            /* ---- end CLOCK EVENTS */
        }
        double left_ms = (deadline - mono_now()) * 1000.0;
        if (left_ms <= 0.0)
            return leave(NVML_ERROR_TIMEOUT);
        /* Wait without the lock so that other calls (and other threads) go on. The real
         * driver sleeps in the kernel until an event; so does the fake: until the
         * deadline, the next event the scenario schedules (time running), or a change of
         * the time, the scenario or the init count (g_changed). Polling would wake the
         * process for nothing, and benchmarks/tui_perf.py would count that as the
         * monitor's CPU. */
        double wait_s = left_ms / 1000.0;
        if (g_frozen < 0.0 && next_t < HUGE_VAL && next_t - t < wait_s)
            wait_s = next_t - t > 0.001 ? next_t - t : 0.001;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)((wait_s - (double)(long)wait_s) * 1e9);
        until.tv_sec += (time_t)wait_s + ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&g_changed, &g_lock, &until);
        if (!g_scen || g_refcount <= 0)
            return leave(NVML_ERROR_UNINITIALIZED);
    }
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    nvmlReturn_t rc = enter(FN_nvmlEventSetFree);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!set)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    free(set);
    return leave(NVML_SUCCESS);
}

typedef enum {
    NVML_P2P_CAPS_INDEX_READ = 0,
    NVML_P2P_CAPS_INDEX_WRITE = 1,
    NVML_P2P_CAPS_INDEX_NVLINK = 2,
    NVML_P2P_CAPS_INDEX_ATOMICS = 3,
    NVML_P2P_CAPS_INDEX_PCI = 4,
    NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;

typedef enum {
    NVML_P2P_STATUS_OK = 0,
    NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED = 1,
    NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
    NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
    NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
    NVML_P2P_STATUS_NOT_SUPPORTED = 5,
    NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;

/* gpu.N.nvlink = 1 on both ends: an NVLink path; gpu.N.p2p = 0 on either end: no P2P. */
EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device, nvmlDevice_t device2,
                                           nvmlGpuP2PCapsIndex_t p2pIndex,
                                           nvmlGpuP2PStatus_t *p2pStatus)
{
    DEV_PROLOGUE(nvmlDeviceGetP2PStatus, U_NONE);
    int j = handle_index(device2);
    if (j < 0 || !p2pStatus || (unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const fdev_t *e = &g_scen->dev[j];
    if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK)
        *p2pStatus = value(d, F_NVLINK, t) && value(e, F_NVLINK, t)
                         ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    else
        *p2pStatus = value(d, F_P2P, t) && value(e, F_P2P, t)
                         ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED;
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: GPM profiling counters (Hopper and newer)                          */
/* ------------------------------------------------------------------------ */

#define NVML_GPM_METRIC_MAX 477
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1

typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct {
    unsigned int version;
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

#define GPM_SAMPLE_MAGIC 0x47504D53u /* "GPMS" */

/* A sample remembers which device it was taken on and when: the fake's "counters" are
 * the scenario's values at the later sample's time. */
struct nvmlGpmSample_st {
    unsigned int magic;
    int filled;
    int idx;
    double t;
    int mig_k; /* 0: the whole GPU; k + 1: MIG device k (nvmlGpmMigSampleGet) */
};

static nvmlReturn_t mig_metrics_get(nvmlGpmMetricsGet_t *mg, const struct nvmlGpmSample_st *a,
                                    const struct nvmlGpmSample_st *b); /* the MIG block */

/* metric id -> scenario field, name, unit; link metrics need gpu.N.nvlink = 1 */
static const struct {
    unsigned int id;
    int field;
    int nvlink;
    const char *short_name, *long_name, *unit;
} GPM_METRICS[] = {
    {1, F_GPM_GRAPHICS_UTIL, 0, "gr_util", "graphics engine activity", "%"},
    {2, F_GPM_SM_UTIL, 0, "sm_util", "SM activity", "%"},
    {3, F_GPM_SM_OCCUPANCY, 0, "sm_occupancy", "SM occupancy", "%"},
    {5, F_GPM_TENSOR_UTIL, 0, "any_tensor_util", "any tensor pipe activity", "%"},
    {10, F_GPM_DRAM_BW_UTIL, 0, "dram_bw_util", "DRAM bandwidth utilization", "%"},
    {11, F_GPM_FP64_UTIL, 0, "fp64_util", "FP64 pipe activity", "%"},
    {12, F_GPM_FP32_UTIL, 0, "fp32_util", "FP32 pipe activity", "%"},
    {13, F_GPM_FP16_UTIL, 0, "fp16_util", "FP16 pipe activity", "%"},
    {20, F_GPM_PCIE_TX_MIBPS, 0, "pcie_tx", "PCIe TX", "MiB/s"},
    {21, F_GPM_PCIE_RX_MIBPS, 0, "pcie_rx", "PCIe RX", "MiB/s"},
    {60, F_GPM_NVLINK_RX_MIBPS, 1, "nvlink_rx", "NVLink RX, all links", "MiB/s"},
    {61, F_GPM_NVLINK_TX_MIBPS, 1, "nvlink_tx", "NVLink TX, all links", "MiB/s"},
};

/* Per-link NVLink rate metric ids: links 0-17 are 62.. (RX even, TX odd), 18-35 212.. */
static int gpm_link_of(unsigned int id)
{
    if (id >= 62 && id <= 97)
        return (int)(id - 62) / 2;
    if (id >= 212 && id <= 247)
        return 18 + (int)(id - 212) / 2;
    return -1;
}

static int gpm_link_is_tx(unsigned int id)
{
    return (id & 1u) != 0;
}

/* Scenario keys: gpu.N.gpm_supported (0/1), gpu.N.gpm_<metric> values, gpu.N.nvlink,
 * gpu.N.gpm_busy_from_s / gpm_busy_until_s (another profiler holds the counters:
 * nvmlGpmSampleGet returns gpm_busy_error, NVML_ERROR_IN_USE by default), and "gpm" in
 * gpu.N.unsupported (nvmlGpmQueryDeviceSupport itself answers NOT_SUPPORTED). */
EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
    DEV_PROLOGUE(nvmlGpmQueryDeviceSupport, U_GPM);
    if (!gpmSupport)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    gpmSupport->isSupportedDevice = value(d, F_GPM_SUPPORTED, t) ? 1u : 0u;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    nvmlReturn_t rc = enter(FN_nvmlGpmSampleAlloc);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpmSample)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    struct nvmlGpmSample_st *s = calloc(1, sizeof *s);
    if (!s)
        return leave(NVML_ERROR_MEMORY);
    s->magic = GPM_SAMPLE_MAGIC;
    *gpmSample = s;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    nvmlReturn_t rc = enter(FN_nvmlGpmSampleFree);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!gpmSample || gpmSample->magic != GPM_SAMPLE_MAGIC)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    gpmSample->magic = 0;
    free(gpmSample);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    DEV_PROLOGUE(nvmlGpmSampleGet, U_GPM);
    if (!gpmSample || gpmSample->magic != GPM_SAMPLE_MAGIC)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!value(d, F_GPM_SUPPORTED, t))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    if (t >= raw_value(d, F_GPM_BUSY_FROM_S, t) && t < raw_value(d, F_GPM_BUSY_UNTIL_S, t))
        return leave((nvmlReturn_t)uvalue(d, F_GPM_BUSY_ERROR, t));
    gpmSample->filled = 1;
    gpmSample->idx = handle_index(device);
    gpmSample->t = t;
    gpmSample->mig_k = 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
    nvmlReturn_t rc = enter(FN_nvmlGpmMetricsGet);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!metricsGet)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    const struct nvmlGpmSample_st *a = metricsGet->sample1, *b = metricsGet->sample2;
    if (metricsGet->numMetrics > NVML_GPM_METRIC_MAX || !a || !b ||
        a->magic != GPM_SAMPLE_MAGIC || b->magic != GPM_SAMPLE_MAGIC || !a->filled ||
        !b->filled || a->idx != b->idx || a->idx >= g_scen->device_count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (a->mig_k || b->mig_k)
        return mig_metrics_get(metricsGet, a, b);
    const fdev_t *d = &g_scen->dev[a->idx];
    double t = a->t > b->t ? a->t : b->t;
    for (unsigned int i = 0; i < metricsGet->numMetrics; i++) {
        nvmlGpmMetric_t *m = &metricsGet->metrics[i];
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        m->value = 0.0;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        int link = gpm_link_of(m->metricId);
        if (link >= 0) {
            /* per-link rates: the totals shared by the active links */
            unsigned int n = uvalue(d, F_NVLINK_LINKS, t);
            unsigned long long down = value(d, F_NVLINK_DOWN_MASK, t);
            if ((unsigned int)link >= n)
                continue;
            unsigned int active = 0;
            for (unsigned int l = 0; l < n && l < 64; l++)
                active += !((down >> l) & 1ULL);
            int tx = gpm_link_is_tx(m->metricId);
            double total = raw_value(d, tx ? F_GPM_NVLINK_TX_MIBPS : F_GPM_NVLINK_RX_MIBPS, t);
            m->value = ((down >> link) & 1ULL) || !active ? 0.0 : total / active;
            m->nvmlReturn = NVML_SUCCESS;
            continue;
        }
        for (size_t k = 0; k < sizeof GPM_METRICS / sizeof GPM_METRICS[0]; k++) {
            if (GPM_METRICS[k].id != m->metricId)
                continue;
            m->metricInfo.shortName = (char *)GPM_METRICS[k].short_name;
            m->metricInfo.longName = (char *)GPM_METRICS[k].long_name;
            m->metricInfo.unit = (char *)GPM_METRICS[k].unit;
            if (GPM_METRICS[k].nvlink && !value(d, F_NVLINK, t))
                break;
            double v = raw_value(d, GPM_METRICS[k].field, t);
            if (GPM_METRICS[k].unit[0] == '%')
                v = v < 0.0 ? 0.0 : (v > 100.0 ? 100.0 : v);
            m->value = v;
            m->nvmlReturn = NVML_SUCCESS;
            break;
        }
    }
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: encoder/decoder, PCIe replays, field values (memory temperature,   */
/* NVLink data counters)                                                    */
/* ------------------------------------------------------------------------ */

static nvmlReturn_t codec_util(int fn, int feature, int field, nvmlDevice_t device,
                               unsigned int *utilization, unsigned int *samplingPeriodUs)
{
    fdev_t *d = NULL;
    double t = 0.0;
    nvmlReturn_t rc = dev_enter(fn, device, feature, &d, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!utilization || !samplingPeriodUs)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *utilization = uvalue(d, field, t);
    *samplingPeriodUs = 167000;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                                    unsigned int *samplingPeriodUs)
{
    return codec_util(FN_nvmlDeviceGetEncoderUtilization, U_ENCODER, F_ENC_UTIL, device,
                      utilization, samplingPeriodUs);
}

EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                                    unsigned int *samplingPeriodUs)
{
    return codec_util(FN_nvmlDeviceGetDecoderUtilization, U_DECODER, F_DEC_UTIL, device,
                      utilization, samplingPeriodUs);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value_)
{
    DEV_PROLOGUE(nvmlDeviceGetPcieReplayCounter, U_PCIE_REPLAY);
    if (!value_)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *value_ = uvalue(d, F_PCIE_REPLAY, t);
    return leave(NVML_SUCCESS);
}

typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
    NVML_VALUE_TYPE_COUNT
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139

/* gpu.N.mem_temp_c (0: no sensor), gpu.N.nvlink_tx_kib / nvlink_rx_kib (counters, with
 * gpu.N.nvlink = 1; scopeId UINT_MAX = all links); other ids are NOT_SUPPORTED. */
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                             nvmlFieldValue_t *values)
{
    DEV_PROLOGUE(nvmlDeviceGetFieldValues, U_FIELD_VALUES);
    if (valuesCount < 0 || (valuesCount > 0 && !values))
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
        v->latencyUsec = 0;
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        memset(&v->value, 0, sizeof v->value);
        switch (v->fieldId) {
        case NVML_FI_DEV_MEMORY_TEMP:
            if (value(d, F_MEM_TEMP_C, t)) {
                v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
                v->value.uiVal = uvalue(d, F_MEM_TEMP_C, t);
                v->nvmlReturn = NVML_SUCCESS;
            }
            break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
            if (value(d, F_NVLINK, t)) {
                int f = v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ? F_NVLINK_TX_KIB
                                                                             : F_NVLINK_RX_KIB;
                v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                v->value.ullVal = value(d, f, t);
                v->nvmlReturn = NVML_SUCCESS;
            }
            break;
        default:
            break;
        }
    }
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: nvmlDeviceGetSamples (sub-second power, utilization, clock)         */
/* ------------------------------------------------------------------------ */

typedef enum {
    NVML_TOTAL_POWER_SAMPLES = 0,
    NVML_GPU_UTILIZATION_SAMPLES = 1,
    NVML_MEMORY_UTILIZATION_SAMPLES = 2,
    NVML_ENC_UTILIZATION_SAMPLES = 3,
    NVML_DEC_UTILIZATION_SAMPLES = 4,
    NVML_PROCESSOR_CLK_SAMPLES = 5,
    NVML_MEMORY_CLK_SAMPLES = 6,
    NVML_MODULE_POWER_SAMPLES = 7,
    NVML_JPG_UTILIZATION_SAMPLES = 8,
    NVML_OFA_UTILIZATION_SAMPLES = 9,
    NVML_SAMPLINGTYPE_COUNT
} nvmlSamplingType_t;

typedef struct nvmlSample_st {
    unsigned long long timeStamp;
    nvmlValue_t sampleValue;
} nvmlSample_t;

#define FAKE_SAMPLE_PERIOD_S 0.1 /* the driver samples every 100 ms */
#define FAKE_SAMPLE_BUFFER 120   /* and keeps the last 120 */

static unsigned long long sample_ts(long k)
{
    /* microseconds: scenario time on a fixed epoch, so that timestamps look real */
    return 1700000000000000ULL + (unsigned long long)k * 100000ULL;
}

/* Samples every 100 ms of scenario time up to now, newer than lastSeenTimeStamp; power
 * follows power_mw (and its wave), except inside [power_spike_from_s, power_spike_until_s)
 * where it is power_spike_mw. Two-call protocol as NVML's: samples NULL gives the count. */
EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                         unsigned long long lastSeenTimeStamp,
                                         nvmlValueType_t *sampleValType,
                                         unsigned int *sampleCount, nvmlSample_t *samples)
{
    DEV_PROLOGUE(nvmlDeviceGetSamples, U_SAMPLES);
    if (!sampleValType || !sampleCount)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    int f;
    switch (type) {
    case NVML_TOTAL_POWER_SAMPLES: f = F_POWER_MW; break;
    case NVML_GPU_UTILIZATION_SAMPLES: f = F_UTIL_GPU; break;
    case NVML_PROCESSOR_CLK_SAMPLES: f = F_CLOCK_GRAPHICS; break;
    default: return leave(NVML_ERROR_NOT_SUPPORTED);
    }
    long last = (long)floor(t / FAKE_SAMPLE_PERIOD_S + 1e-9);
    long first = last - FAKE_SAMPLE_BUFFER + 1;
    if (first < 0)
        first = 0;
    while (first <= last && sample_ts(first) <= lastSeenTimeStamp)
        first++;
    unsigned int n = first <= last ? (unsigned int)(last - first + 1) : 0;
    *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
    if (n == 0)
        return leave(NVML_ERROR_NOT_FOUND);
    if (!samples) {
        *sampleCount = n;
        return leave(NVML_SUCCESS);
    }
    if (*sampleCount == 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (n > *sampleCount)
        first = last - (long)*sampleCount + 1, n = *sampleCount;
    double from = raw_value(d, F_POWER_SPIKE_FROM_S, t), until = raw_value(d, F_POWER_SPIKE_UNTIL_S, t);
    for (unsigned int i = 0; i < n; i++) {
        long k = first + (long)i;
        double ts = (double)k * FAKE_SAMPLE_PERIOD_S;
        samples[i].timeStamp = sample_ts(k);
        memset(&samples[i].sampleValue, 0, sizeof samples[i].sampleValue);
        if (f == F_POWER_MW && ts >= from && ts < until && value(d, F_POWER_SPIKE_MW, ts))
            samples[i].sampleValue.uiVal = uvalue(d, F_POWER_SPIKE_MW, ts);
        else
            samples[i].sampleValue.uiVal = uvalue(d, f, ts);
    }
    *sampleCount = n;
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: per-process utilization                                            */
/* ------------------------------------------------------------------------ */

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
    unsigned long long timeStamp;
    unsigned int pid;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
    unsigned int jpgUtil;
    unsigned int ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;

typedef struct {
    unsigned int version;
    unsigned int processSamplesCount;
    unsigned long long lastSeenTimeStamp;
    nvmlProcessUtilizationInfo_v1_t *procUtilArray;
} nvmlProcessesUtilizationInfo_v1_t;
typedef nvmlProcessesUtilizationInfo_v1_t nvmlProcessesUtilizationInfo_t;
#define nvmlProcessesUtilizationInfo_v1 NVML_STRUCT_VERSION(ProcessesUtilizationInfo, 1)

/* "pid:sm:mem:enc:dec,..."  1 = not an extra key */
static int apply_extra_key(fdev_t *d, const char *key, char *val)
{
    if (strcmp(key, "process_util"))
        return 1;
    d->nputil = 0;
    char *save = NULL;
    for (char *tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (!*tok)
            continue;
        unsigned int v[5];
        char tail;
        if (d->nputil >= MAX_PROCS ||
            sscanf(tok, "%u:%u:%u:%u:%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5)
            return -1;
        memcpy(d->putil[d->nputil++], v, sizeof v);
    }
    return 0;
}

/* One sample per listed process at the latest 100 ms sample time, if that is newer than
 * lastSeenTimeStamp (else NOT_FOUND, as the driver when nothing new was sampled). */
static unsigned int putil_count(const fdev_t *d, double t, unsigned long long last_seen,
                                unsigned long long *ts)
{
    *ts = sample_ts((long)floor(t / FAKE_SAMPLE_PERIOD_S + 1e-9));
    return *ts > last_seen ? (unsigned int)d->nputil : 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                    nvmlProcessUtilizationSample_t *utilization,
                                                    unsigned int *processSamplesCount,
                                                    unsigned long long lastSeenTimeStamp)
{
    DEV_PROLOGUE(nvmlDeviceGetProcessUtilization, U_PROCESS_UTIL);
    if (!processSamplesCount)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long ts;
    unsigned int n = putil_count(d, t, lastSeenTimeStamp, &ts);
    if (n == 0)
        return leave(NVML_ERROR_NOT_FOUND);
    if (!utilization || *processSamplesCount < n) {
        *processSamplesCount = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned int i = 0; i < n; i++) {
        utilization[i].pid = d->putil[i][0];
        utilization[i].timeStamp = ts;
        utilization[i].smUtil = d->putil[i][1];
        utilization[i].memUtil = d->putil[i][2];
        utilization[i].encUtil = d->putil[i][3];
        utilization[i].decUtil = d->putil[i][4];
    }
    *processSamplesCount = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                          nvmlProcessesUtilizationInfo_t *info)
{
    DEV_PROLOGUE(nvmlDeviceGetProcessesUtilizationInfo, U_PROCESS_UTIL);
    if (!info)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (info->version != nvmlProcessesUtilizationInfo_v1)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long ts;
    unsigned int n = putil_count(d, t, info->lastSeenTimeStamp, &ts);
    if (n == 0)
        return leave(NVML_ERROR_NOT_FOUND);
    if (!info->procUtilArray || info->processSamplesCount < n) {
        info->processSamplesCount = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned int i = 0; i < n; i++) {
        nvmlProcessUtilizationInfo_v1_t *u = &info->procUtilArray[i];
        memset(u, 0, sizeof *u);
        u->timeStamp = ts;
        u->pid = d->putil[i][0];
        u->smUtil = d->putil[i][1];
        u->memUtil = d->putil[i][2];
        u->encUtil = d->putil[i][3];
        u->decUtil = d->putil[i][4];
    }
    info->processSamplesCount = n;
    return leave(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------ */
/* NVML: NVLink link state                                                  */
/* ------------------------------------------------------------------------ */

/* gpu.N.nvlink_links links (0: the GPU has no NVLink, NOT_SUPPORTED); a link past the
 * last is INVALID_ARGUMENT, as on a real GPU; gpu.N.nvlink_down_mask bit i: link i down. */
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                             nvmlEnableState_t *isActive)
{
    DEV_PROLOGUE(nvmlDeviceGetNvLinkState, U_NONE);
    if (!isActive)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int n = uvalue(d, F_NVLINK_LINKS, t);
    if (n == 0)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    if (link >= n)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long down = value(d, F_NVLINK_DOWN_MASK, t);
    *isActive = link < 64 && ((down >> link) & 1ULL) ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return leave(NVML_SUCCESS);
}

/* ======================================================================== */
/* BEGIN nvitop support                                                     */
/* Reads nvitop 1.7 makes each tick that gputui does not: present so nvitop */
/* runs against the fake as it would against a Linux driver (benchmarks/    */
/* tui_perf.py --compare nvitop). Signatures and answers as in nvml.h.      */
/* ======================================================================== */

/* A data-centre GPU drives no display. */
EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive)
{
    DEV_PROLOGUE(nvmlDeviceGetDisplayActive, U_NONE);
    (void)t;
    (void)d;
    if (!isActive)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *isActive = NVML_FEATURE_DISABLED;
    return leave(NVML_SUCCESS);
}

typedef enum { NVML_DRIVER_WDDM = 0, NVML_DRIVER_WDM = 1, NVML_DRIVER_MCDM = 2 } nvmlDriverModel_t;

/* Windows only: NOT_SUPPORTED on Linux ("if the platform is not windows"). */
static nvmlReturn_t driver_model(int fn, nvmlDevice_t device, nvmlDriverModel_t *current,
                                 nvmlDriverModel_t *pending)
{
    fdev_t *d = NULL;
    double t = 0.0;
    nvmlReturn_t rc = dev_enter(fn, device, U_NONE, &d, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!current && !pending)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    return leave(NVML_ERROR_NOT_SUPPORTED);
}

EXPORT nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t device, nvmlDriverModel_t *current,
                                                nvmlDriverModel_t *pending)
{
    return driver_model(FN_nvmlDeviceGetDriverModel_v2, device, current, pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, nvmlDriverModel_t *current,
                                             nvmlDriverModel_t *pending)
{
    return driver_model(FN_nvmlDeviceGetDriverModel, device, current, pending);
}

/* No nvmlDeviceGetConfComputeMemSizeInfo on purpose: nvitop takes a library that has
 * it but lacks nvmlDeviceGetRunningProcessDetailList for one with the short-lived
 * 32-byte v3 process struct, and would misread this fake's (standard, 24-byte) array. */

/* ======================================================================== */
/* END nvitop support                                                       */
/* ======================================================================== */

/* ======================================================================== */
/* BEGIN MIG                                                                */
/* Multi-Instance GPU: MIG device handles and what a MIG handle answers     */
/* (name, UUID, memory, processes, attributes, instance ids), and GPM per   */
/* GPU instance (nvmlGpmMigSampleGet). Signatures and layouts as in nvml.h. */
/*                                                                          */
/* Scenario keys (MIG is off unless gpu.N.mig_mode = 1):                    */
/*   gpu.N.mig_max_devices      nvmlDeviceGetMaxMigDeviceCount (default 7)  */
/*   gpu.N.sm_count             the whole GPU's SMs (attributes; dflt 108)  */
/*   gpu.N.mig.K.profile        "1g.10gb": the name is "<gpu name> MIG 1g.10gb" */
/*   gpu.N.mig.K.uuid           default MIG-00000000-0000-0000-00NN-0000000K */
/*   gpu.N.mig.K.gpu_instance_id / compute_instance_id   (default K+1 / 0)  */
/*   gpu.N.mig.K.sm_count       multiprocessorCount (default 14)            */
/*   gpu.N.mig.K.mem_total / mem_used   bytes (default 10 GiB / 0)          */
/*   gpu.N.mig.K.processes      pid:bytes,... (compute processes)           */
/*   gpu.N.mig.K.gpm_<metric>   as gpu.N.gpm_<metric> for the % metrics;    */
/*                              a metric not given answers NOT_SUPPORTED    */
/* A MIG device K exists once any of its keys is given. "mig" in            */
/* gpu.N.unsupported makes the parent's MIG queries NOT_SUPPORTED; listing  */
/* these functions in not_found models a driver older than MIG (R450).      */
/* ======================================================================== */

static const unsigned int MIG_GPM_IDS[FAKE_MIG_GPM] = {1, 2, 3, 5, 10, 11, 12, 13};
static const char *const MIG_GPM_KEYS[FAKE_MIG_GPM] = {
    "gpm_graphics_util", "gpm_sm_util",   "gpm_sm_occupancy", "gpm_tensor_util",
    "gpm_dram_bw_util",  "gpm_fp64_util", "gpm_fp32_util",    "gpm_fp16_util",
};

#define FAKE_MIG_HANDLES (MAX_DEVICES * FAKE_MIG_MAX)
static struct nvmlDevice_st g_mig_handles[FAKE_MIG_HANDLES]; /* parent * FAKE_MIG_MAX + k */

static int mig_of_handle(nvmlDevice_t h, int *parent, int *k)
{
    if (!h || h < g_mig_handles || h >= g_mig_handles + FAKE_MIG_HANDLES)
        return 0;
    int i = (int)(h - g_mig_handles);
    *parent = i / FAKE_MIG_MAX;
    *k = i % FAKE_MIG_MAX;
    return 1;
}

static int is_mig_handle(nvmlDevice_t h)
{
    int p, k;
    return mig_of_handle(h, &p, &k);
}

/* Keys gpu.N.mig_max_devices, gpu.N.sm_count, gpu.N.mig.K.*.  1 = not a MIG key. */
static int apply_mig_key(fdev_t *d, const char *key, char *val)
{
    unsigned long long x;
    if (!strcmp(key, "mig_max_devices") || !strcmp(key, "sm_count")) {
        if (parse_ull(val, &x) || x > 0xFFFFFFFFull)
            return -1;
        if (key[0] == 'm')
            d->mig_max = (unsigned int)x + 1; /* 0 stays "the default" */
        else
            d->sm_count = (unsigned int)x;
        return 0;
    }
    if (strncmp(key, "mig.", 4))
        return 1;
    char *end;
    long k = strtol(key + 4, &end, 10);
    if (end == key + 4 || *end != '.' || k < 0 || k >= FAKE_MIG_MAX)
        return 1;
    fmig_t *m = &d->mig[k];
    const char *f = end + 1;
    if (!strcmp(f, "profile")) {
        snprintf(m->profile, sizeof m->profile, "%s", val);
    } else if (!strcmp(f, "uuid")) {
        snprintf(m->uuid, sizeof m->uuid, "%s", val);
    } else if (!strcmp(f, "processes")) {
        proc_t tmp[MAX_PROCS];
        int n;
        if (parse_procs(val, tmp, &n) || n > FAKE_MIG_PROCS)
            return -1;
        memcpy(m->procs, tmp, sizeof m->procs[0] * (size_t)n);
        m->nprocs = n;
    } else if (!strncmp(f, "gpm_", 4)) {
        int g;
        for (g = 0; g < FAKE_MIG_GPM; g++)
            if (!strcmp(MIG_GPM_KEYS[g], f))
                break;
        double v;
        if (g == FAKE_MIG_GPM)
            return 1;
        if (parse_double(val, &v))
            return -1;
        m->gpm[g] = v;
        m->gpm_set[g] = 1;
    } else {
        if (parse_ull(val, &x))
            return -1;
        if (!strcmp(f, "gpu_instance_id"))
            m->gi = (unsigned int)x + 1;
        else if (!strcmp(f, "compute_instance_id"))
            m->ci = (unsigned int)x + 1;
        else if (!strcmp(f, "sm_count"))
            m->sm_count = (unsigned int)x + 1;
        else if (!strcmp(f, "mem_total"))
            m->mem_total = x + 1;
        else if (!strcmp(f, "mem_used"))
            m->mem_used = x;
        else
            return 1;
    }
    m->set = 1;
    return 0;
}

/* Fields stored +1 so that 0 means "not given": the defaults. */
static unsigned int mig_gi(const fmig_t *m, int k)
{
    return m->gi ? m->gi - 1 : (unsigned int)k + 1;
}

static unsigned int mig_ci(const fmig_t *m)
{
    return m->ci ? m->ci - 1 : 0;
}

static unsigned int mig_sms(const fmig_t *m)
{
    return m->sm_count ? m->sm_count - 1 : 14;
}

static unsigned long long mig_total(const fmig_t *m)
{
    return m->mem_total ? m->mem_total - 1 : 10737418240ULL;
}

static unsigned long long mig_used(const fmig_t *m)
{
    unsigned long long t = mig_total(m);
    return m->mem_used > t ? t : m->mem_used;
}

/* The slices of a profile: the N of "Ng.XXgb" (1 when the name does not say). */
static unsigned int mig_slices(const fmig_t *m)
{
    unsigned int n = (unsigned int)atoi(m->profile);
    return n ? n : 1;
}

/* Lock, count, resolve a MIG handle to its parent's state (delay, lost, "mig"
 * unsupported).  On failure unlocks. */
static nvmlReturn_t mig_enter(int fn, nvmlDevice_t h, fdev_t **dout, fmig_t **mout, int *kout,
                              double *t)
{
    nvmlReturn_t rc = enter(fn);
    if (rc != NVML_SUCCESS)
        return rc;
    int p, k;
    if (!mig_of_handle(h, &p, &k) || p >= g_scen->device_count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    rc = device_gate(p, t);
    if (rc != NVML_SUCCESS)
        return rc;
    fdev_t *d = &g_scen->dev[p];
    if (!value(d, F_MIG_MODE, *t) || !d->mig[k].set)
        return leave(NVML_ERROR_INVALID_ARGUMENT); /* a handle whose instance is gone */
    *dout = d;
    *mout = &d->mig[k];
    *kout = k;
    return NVML_SUCCESS;
}

#define MIG_PROLOGUE(name)                                                  \
    fdev_t *d = NULL;                                                       \
    fmig_t *m = NULL;                                                       \
    int k = 0;                                                              \
    double t = 0.0;                                                         \
    {                                                                       \
        nvmlReturn_t rc_ = mig_enter(FN_##name, device, &d, &m, &k, &t);    \
        if (rc_ != NVML_SUCCESS)                                            \
            return rc_;                                                     \
    }                                                                       \
    (void)d;                                                                \
    (void)m;                                                                \
    (void)k;                                                                \
    (void)t

static nvmlReturn_t mig_name(nvmlDevice_t device, char *name, unsigned int length)
{
    MIG_PROLOGUE(nvmlDeviceGetName);
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 48];
    snprintf(buf, sizeof buf, "%s MIG %s", d->name, m->profile[0] ? m->profile : "1g.10gb");
    return leave(put_str(name, length, buf));
}

static nvmlReturn_t mig_uuid(nvmlDevice_t device, char *uuid, unsigned int length)
{
    MIG_PROLOGUE(nvmlDeviceGetUUID);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (m->uuid[0])
        snprintf(buf, sizeof buf, "%s", m->uuid);
    else
        snprintf(buf, sizeof buf, "MIG-00000000-0000-0000-%04x-%012x",
                 (unsigned)(d - &g_scen->dev[0]), (unsigned)k);
    return leave(put_str(uuid, length, buf));
}

static nvmlReturn_t mig_memory(nvmlDevice_t device, nvmlMemory_t *memory)
{
    MIG_PROLOGUE(nvmlDeviceGetMemoryInfo);
    if (!memory)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    memory->total = mig_total(m);
    memory->used = mig_used(m);
    memory->free = memory->total - memory->used;
    return leave(NVML_SUCCESS);
}

static nvmlReturn_t mig_memory_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    MIG_PROLOGUE(nvmlDeviceGetMemoryInfo_v2);
    if (!memory)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    memory->total = mig_total(m);
    memory->reserved = 0;
    memory->used = mig_used(m);
    memory->free = memory->total - memory->used;
    return leave(NVML_SUCCESS);
}

/* Compute processes of the instance, with its GPU/compute instance ids; no graphics. */
static nvmlReturn_t mig_procs(nvmlDevice_t device, unsigned int *infoCount,
                              nvmlProcessInfo_t *infos, int graphics)
{
    fdev_t *d = NULL;
    fmig_t *m = NULL;
    int k = 0;
    double t = 0.0;
    int fn = graphics ? FN_nvmlDeviceGetGraphicsRunningProcesses_v3
                      : FN_nvmlDeviceGetComputeRunningProcesses_v3;
    nvmlReturn_t rc = mig_enter(fn, device, &d, &m, &k, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!infoCount)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int n = graphics ? 0u : (unsigned int)m->nprocs;
    if (*infoCount < n) {
        *infoCount = n;
        return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (n > 0 && !infos)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < n; i++) {
        infos[i].pid = m->procs[i].pid;
        infos[i].usedGpuMemory = m->procs[i].mem;
        infos[i].gpuInstanceId = mig_gi(m, k);
        infos[i].computeInstanceId = mig_ci(m);
    }
    *infoCount = n;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    DEV_PROLOGUE(nvmlDeviceGetMaxMigDeviceCount, U_MIG);
    if (!count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    /* "Returns zero if MIG is not supported or enabled." */
    *count = value(d, F_MIG_MODE, t) ? (d->mig_max ? d->mig_max - 1 : 7u) : 0u;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                        nvmlDevice_t *migDevice)
{
    DEV_PROLOGUE(nvmlDeviceGetMigDeviceHandleByIndex, U_MIG);
    if (!migDevice)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!value(d, F_MIG_MODE, t))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    unsigned int max = d->mig_max ? d->mig_max - 1 : 7u;
    if (index >= max || index >= FAKE_MIG_MAX)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!d->mig[index].set)
        return leave(NVML_ERROR_NOT_FOUND);
    *migDevice = &g_mig_handles[(d - &g_scen->dev[0]) * FAKE_MIG_MAX + index];
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    nvmlReturn_t rc = enter(FN_nvmlDeviceIsMigDeviceHandle);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!isMigDevice)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (is_mig_handle(device)) {
        *isMigDevice = 1;
        return leave(NVML_SUCCESS);
    }
    if (handle_index(device) < 0)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *isMigDevice = 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    MIG_PROLOGUE(nvmlDeviceGetGpuInstanceId);
    if (!id)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *id = mig_gi(m, k);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    MIG_PROLOGUE(nvmlDeviceGetComputeInstanceId);
    if (!id)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *id = mig_ci(m);
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                 nvmlDevice_t *device)
{
    fdev_t *d = NULL;
    fmig_t *m = NULL;
    int k = 0;
    double t = 0.0;
    nvmlReturn_t rc = mig_enter(FN_nvmlDeviceGetDeviceHandleFromMigDeviceHandle, migDevice, &d,
                                &m, &k, &t);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!device)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    *device = &g_handles[d - &g_scen->dev[0]];
    return leave(NVML_SUCCESS);
}

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                               nvmlDeviceAttributes_t *attributes)
{
    if (is_mig_handle(device)) {
        MIG_PROLOGUE(nvmlDeviceGetAttributes_v2);
        if (!attributes)
            return leave(NVML_ERROR_INVALID_ARGUMENT);
        memset(attributes, 0, sizeof *attributes);
        attributes->multiprocessorCount = mig_sms(m);
        attributes->sharedCopyEngineCount = mig_slices(m);
        attributes->sharedDecoderCount = mig_slices(m) > 1 ? 1u : 0u;
        attributes->gpuInstanceSliceCount = mig_slices(m);
        attributes->computeInstanceSliceCount = mig_slices(m);
        attributes->memorySizeMB = mig_total(m) / (1024ULL * 1024ULL);
        return leave(NVML_SUCCESS);
    }
    DEV_PROLOGUE(nvmlDeviceGetAttributes_v2, U_NONE);
    if (!attributes)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    memset(attributes, 0, sizeof *attributes);
    attributes->multiprocessorCount = d->sm_count ? d->sm_count : 108u;
    attributes->sharedCopyEngineCount = 7;
    attributes->sharedDecoderCount = 5;
    attributes->gpuInstanceSliceCount = 7;
    attributes->computeInstanceSliceCount = 7;
    attributes->memorySizeMB = value(d, F_MEM_TOTAL, t) / (1024ULL * 1024ULL);
    return leave(NVML_SUCCESS);
}

/* GPM of one GPU instance: a sample on the parent handle naming the instance. */
EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                        nvmlGpmSample_t gpmSample)
{
    DEV_PROLOGUE(nvmlGpmMigSampleGet, U_GPM);
    if (!gpmSample || gpmSample->magic != GPM_SAMPLE_MAGIC)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (!value(d, F_GPM_SUPPORTED, t) || !value(d, F_MIG_MODE, t))
        return leave(NVML_ERROR_NOT_SUPPORTED);
    int found = -1;
    for (int k = 0; k < FAKE_MIG_MAX && found < 0; k++)
        if (d->mig[k].set && mig_gi(&d->mig[k], k) == gpuInstanceId)
            found = k;
    if (found < 0)
        return leave(NVML_ERROR_NOT_FOUND);
    if (t >= raw_value(d, F_GPM_BUSY_FROM_S, t) && t < raw_value(d, F_GPM_BUSY_UNTIL_S, t))
        return leave((nvmlReturn_t)uvalue(d, F_GPM_BUSY_ERROR, t));
    gpmSample->filled = 1;
    gpmSample->idx = handle_index(device);
    gpmSample->t = t;
    gpmSample->mig_k = found + 1;
    return leave(NVML_SUCCESS);
}

/* nvmlGpmMetricsGet on two MIG samples (lock held, samples checked): the instance's
 * % metrics; device-wide ones (PCIe, NVLink) are NOT_SUPPORTED per instance. */
static nvmlReturn_t mig_metrics_get(nvmlGpmMetricsGet_t *mg, const struct nvmlGpmSample_st *a,
                                    const struct nvmlGpmSample_st *b)
{
    if (a->mig_k != b->mig_k)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const fmig_t *m = &g_scen->dev[a->idx].mig[a->mig_k - 1];
    for (unsigned int i = 0; i < mg->numMetrics; i++) {
        nvmlGpmMetric_t *x = &mg->metrics[i];
        x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        x->value = 0.0;
        x->metricInfo.shortName = x->metricInfo.longName = x->metricInfo.unit = NULL;
        for (int g = 0; g < FAKE_MIG_GPM; g++) {
            if (MIG_GPM_IDS[g] != x->metricId || !m->gpm_set[g])
                continue;
            double v = m->gpm[g];
            x->value = v < 0.0 ? 0.0 : (v > 100.0 ? 100.0 : v);
            x->nvmlReturn = NVML_SUCCESS;
        }
    }
    return leave(NVML_SUCCESS);
}

/* ======================================================================== */
/* END MIG                                                                  */
/* ======================================================================== */

/* ======================================================================== */
/* TOPOLOGY: how GPUs reach each other (NVLink far ends, PCIe common        */
/* ancestor), for the GPU-to-GPU topology of DDP benchmark results.         */
/*   gpu.N.nvlink_remote = 1,1,switch,-   far end of each NVLink link: a    */
/*                         GPU index, an NVSwitch, or - (unknown: the       */
/*                         remote queries return NOT_SUPPORTED)             */
/*   gpu.N.topology = 0,10,20,50          nvmlGpuTopologyLevel_t with each  */
/*                         device j (unset: NOT_SUPPORTED)                  */
/* ======================================================================== */

typedef enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

typedef enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

#define FAKE_TOPO_SWITCH (-2)
#define FAKE_TOPO_UNKNOWN (-1)

/* "1,1,switch,-" / "0,10,20": a list of ints (or the words above) into out[max].
 * Returns the count, or -1 on a bad token. */
static int topo_list(char *val, int *out, int max, int words)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (!*tok)
            continue;
        if (n >= max)
            return -1;
        long long x;
        if (words && !strcmp(tok, "switch"))
            out[n++] = FAKE_TOPO_SWITCH;
        else if (words && !strcmp(tok, "-"))
            out[n++] = FAKE_TOPO_UNKNOWN;
        else if (!parse_ll(tok, &x) && x >= 0 && x <= (words ? MAX_DEVICES - 1 : 1000))
            out[n++] = (int)x;
        else
            return -1;
    }
    return n;
}

static int apply_topo_key(fdev_t *d, const char *key, char *val)
{
    int n;
    if (!strcmp(key, "nvlink_remote")) {
        n = topo_list(val, d->topo_remote, 36, 1);
        if (n < 0)
            return -1;
        d->topo_nremote = n;
        return 0;
    }
    if (!strcmp(key, "topology")) {
        n = topo_list(val, d->topo_level, MAX_DEVICES, 0);
        if (n < 0)
            return -1;
        d->topo_nlevel = n;
        return 0;
    }
    return 1;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device, nvmlDevice_t device2,
                                                        nvmlGpuTopologyLevel_t *pathInfo)
{
    DEV_PROLOGUE(nvmlDeviceGetTopologyCommonAncestor, U_NONE);
    (void)t;
    int j = handle_index(device2);
    if (j < 0 || !pathInfo)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (j >= d->topo_nlevel)
        return leave(NVML_ERROR_NOT_SUPPORTED);
    *pathInfo = (nvmlGpuTopologyLevel_t)d->topo_level[j];
    return leave(NVML_SUCCESS);
}

/* The link's far end (lock held): SUCCESS with *peer, or the error a real GPU gives. */
static nvmlReturn_t topo_far_end(const fdev_t *d, double t, unsigned int link, int *peer)
{
    unsigned int n = uvalue(d, F_NVLINK_LINKS, t);
    if (n == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= n)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((int)link >= d->topo_nremote || d->topo_remote[link] == FAKE_TOPO_UNKNOWN)
        return NVML_ERROR_NOT_SUPPORTED;
    *peer = d->topo_remote[link];
    if (*peer >= 0 && *peer >= g_scen->device_count)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                        nvmlPciInfo_t *pci)
{
    DEV_PROLOGUE(nvmlDeviceGetNvLinkRemotePciInfo_v2, U_NONE);
    if (!pci)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    int peer;
    nvmlReturn_t rc = topo_far_end(d, t, link, &peer);
    if (rc != NVML_SUCCESS)
        return leave(rc);
    memset(pci, 0, sizeof *pci);
    if (peer == FAKE_TOPO_SWITCH) {
        /* an NVSwitch on its own bus (one per link group, like a real HGX board) */
        pci->bus = 0xC0u + (link % 4u);
        snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
        snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
        return leave(NVML_SUCCESS);
    }
    const fdev_t *e = &g_scen->dev[peer];
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X",
             e->pci_domain & 0xFFFFu, e->pci_bus & 0xFFu, e->pci_device & 0x1Fu,
             e->pci_function & 0x7u);
    snprintf(pci->busId, sizeof pci->busId, "%s", e->bus_id);
    pci->domain = e->pci_domain;
    pci->bus = e->pci_bus;
    pci->device = e->pci_device;
    pci->pciDeviceId = e->pci_device_id;
    pci->pciSubSystemId = e->pci_subsystem_id;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                        nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    DEV_PROLOGUE(nvmlDeviceGetNvLinkRemoteDeviceType, U_NONE);
    if (!pNvLinkDeviceType)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    int peer;
    nvmlReturn_t rc = topo_far_end(d, t, link, &peer);
    if (rc != NVML_SUCCESS)
        return leave(rc);
    *pNvLinkDeviceType = peer == FAKE_TOPO_SWITCH ? NVML_NVLINK_DEVICE_TYPE_SWITCH
                                                  : NVML_NVLINK_DEVICE_TYPE_GPU;
    return leave(NVML_SUCCESS);
}

/* ======================================================================== */
/* END TOPOLOGY                                                             */
/* ======================================================================== */
