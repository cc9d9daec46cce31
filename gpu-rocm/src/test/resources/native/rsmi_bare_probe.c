/*
 * The bare real librocm_smi64, no gpusched in between: rsmi_init, the device count, each device's PCI id, then
 * rsmi_shut_down. Built at test time against the real <rocm_smi/rocm_smi.h>; the exit status tells whether the library
 * survived the sysfs tree it read (0 or 10 for an init error) or killed the process (a signal).
 */
#include <rocm_smi/rocm_smi.h>
#include <stdio.h>

int main(void) {
    rsmi_status_t r = rsmi_init(0);
    printf("init %d\n", (int) r);
    fflush(stdout);
    if (r != RSMI_STATUS_SUCCESS) {
        return 10;
    }
    uint32_t n = 0;
    r = rsmi_num_monitor_devices(&n);
    printf("devices %d %u\n", (int) r, n);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t bdf = 0;
        rsmi_dev_pci_id_get(i, &bdf);
    }
    rsmi_shut_down();
    return 0;
}
