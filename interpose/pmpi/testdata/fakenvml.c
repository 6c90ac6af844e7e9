/* fakenvml: a stand-in for NVIDIA's libnvidia-ml.so.1 with two GPUs whose
 * energy counters advance by a known amount at each reading, the truth
 * the PMPI library's GPU energy samples are checked against
 * (interpose/pmpi/sample_test.go). GPU i starts at 5000·(i+1) mJ and
 * each nvmlDeviceGetTotalEnergyConsumption on it adds 100·(i+1) mJ
 * before it answers. */
#include <stdint.h>

static unsigned long long energy[2] = {5000, 10000};

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }

int nvmlDeviceGetCount_v2(unsigned *n)
{
	*n = 2;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
	if (i >= 2)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*dev = (void *)(uintptr_t)(i + 1);
	return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj)
{
	uintptr_t i = (uintptr_t)dev - 1;
	if (i >= 2)
		return 2;
	energy[i] += 100 * (i + 1);
	*mj = energy[i];
	return 0;
}
