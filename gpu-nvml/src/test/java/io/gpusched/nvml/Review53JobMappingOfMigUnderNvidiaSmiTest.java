package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.host.HpcJobMapping;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Review 53: dcgm-exporter's HPC job-mapping directory names a MIG device's file {@code <gpu>.<gi>}, "the NVML index of
 * its GPU" and the GPU instance id (docs/ACCOUNTING.md, {@link HpcJobMapping}). On a node whose inventory is
 * {@code nvidia-smi -q -x} (no loadable NVML), a MIG device carries its GPU's index as {@code nvidia_smi.index} and no
 * {@code nvml.index}, and its own gpusched index follows the whole GPUs' ({@code NvidiaSmiInventoryProvider.devices}:
 * "MIG devices follow"). {@code HpcJobMapping.fileName} falls back to that device index: on a two-GPU node whose GPU 1
 * is in MIG mode, the partitions' jobs are written to {@code 2.1} and {@code 3.2}, i.e. labelled on GPUs that do not
 * exist (or on other GPUs of a larger node), never on GPU 1. (CdiSpec reads {@code nvidia_smi.index} for the same
 * purpose; HpcJobMapping does not.)
 */
class Review53JobMappingOfMigUnderNvidiaSmiTest {
    private static final String XML = """
            <?xml version="1.0" ?>
            <!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
            <nvidia_smi_log>
                <driver_version>535.54.03</driver_version>
                <cuda_version>12.2</cuda_version>
                <attached_gpus>2</attached_gpus>
                <gpu id="00000000:01:00.0">
                    <product_name>NVIDIA A100-SXM4-80GB</product_name>
                    <mig_mode><current_mig>Disabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
                    <uuid>GPU-0b000000-0000-4000-8000-000000000000</uuid>
                    <minor_number>0</minor_number>
                    <pci><pci_bus_id>00000000:01:00.0</pci_bus_id></pci>
                    <fb_memory_usage><total>81920 MiB</total><used>40 MiB</used></fb_memory_usage>
                </gpu>
                <gpu id="00000000:41:00.0">
                    <product_name>NVIDIA A100-SXM4-80GB</product_name>
                    <mig_mode><current_mig>Enabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
                    <mig_devices>
                        <mig_device>
                            <index>0</index><gpu_instance_id>1</gpu_instance_id>
                            <compute_instance_id>0</compute_instance_id>
                            <fb_memory_usage><total>19968 MiB</total><used>12 MiB</used></fb_memory_usage>
                        </mig_device>
                        <mig_device>
                            <index>1</index><gpu_instance_id>2</gpu_instance_id>
                            <compute_instance_id>0</compute_instance_id>
                            <fb_memory_usage><total>19968 MiB</total><used>12 MiB</used></fb_memory_usage>
                        </mig_device>
                    </mig_devices>
                    <uuid>GPU-0b000000-0000-4000-8000-000000000001</uuid>
                    <minor_number>1</minor_number>
                    <pci><pci_bus_id>00000000:41:00.0</pci_bus_id></pci>
                    <fb_memory_usage><total>81920 MiB</total><used>40 MiB</used></fb_memory_usage>
                </gpu>
            </nvidia_smi_log>
            """;

    @Test
    void aMigPartitionsMappingFileIsNamedAfterItsOwnGpu() {
        List<GpuDevice> devices = NvidiaSmiInventoryProvider.devices(NvidiaSmiXml.parse(XML));
        List<String> names = new ArrayList<>();
        for (GpuDevice d : devices) {
            names.add(HpcJobMapping.fileName(d).orElse("(none)"));
        }
        assertThat(devices).as("the premise: GPU 0, then GPU 1's two partitions").hasSize(3);
        assertThat(devices.get(1).parentUuid()).contains("GPU-0b000000-0000-4000-8000-000000000001");
        assertThat(names)
                .as("job-mapping file names of the nvidia-smi inventory's devices: expected GPU 0 -> 0 and GPU 1's"
                        + " GPU instances 1 and 2 -> 1.1 and 1.2 (dcgm-exporter's <gpu>.<gi>)")
                .containsExactly("0", "1.1", "1.2");
    }
}
