package io.gpusched.core;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * One allocatable GPU (or GPU partition: a MIG instance, an AMD CPX partition) as an inventory sees it.
 * Static facts only; live values are in {@link GpuMetrics}.
 *
 * @param index             the scheduler's index for the device (NVML/ROCm index order; unique per node)
 * @param uuid              stable identifier ({@code GPU-…}, {@code MIG-…}, or the AMD unique id)
 * @param vendor            who made it
 * @param name              product name ({@code "Tesla V100-SXM2-32GB"})
 * @param memory            total device memory; {@link MemorySize#ZERO} where the backend could not read it (then
 *                          {@code memoryKnown} is false)
 * @param computeCapability NVIDIA compute capability; empty for AMD
 * @param architecture      AMD gfx target ({@code "gfx90a"}); empty where not known
 * @param pciBusId          PCI bus id as the vendor prints it ({@code "00000000:06:00.0"})
 * @param numaNode          NUMA node of the device's PCIe root; empty if the platform does not say
 * @param minor             device node minor: N of {@code /dev/nvidiaN} (not always the index), or the DRM render
 *                          minor of {@code /dev/dri/renderD<minor>} for AMD
 * @param driverVersion     kernel driver version, where known
 * @param parentUuid        the physical GPU this partition belongs to; empty for a whole GPU
 * @param properties        backend-specific extras (serial, persistence mode, MIG ids, …)
 * @param memoryKnown       false where the backend could not read the memory size: unknown is not zero, and the
 *                          scheduler refuses memory-constrained requests on such a device, saying why
 */
public record GpuDevice(
        int index,
        String uuid,
        GpuVendor vendor,
        String name,
        MemorySize memory,
        Optional<ComputeCapability> computeCapability,
        Optional<String> architecture,
        String pciBusId,
        OptionalInt numaNode,
        OptionalInt minor,
        Optional<String> driverVersion,
        Optional<String> parentUuid,
        Map<String, String> properties,
        boolean memoryKnown) {

    /** @throws IllegalArgumentException if a field is missing or out of range */
    public GpuDevice {
        if (index < 0) {
            throw new IllegalArgumentException("device index must be >= 0, was " + index);
        }
        requireText(uuid, "uuid");
        Objects.requireNonNull(vendor, "vendor");
        requireText(name, "name");
        Objects.requireNonNull(memory, "memory");
        Objects.requireNonNull(computeCapability, "computeCapability");
        Objects.requireNonNull(architecture, "architecture");
        requireText(pciBusId, "pciBusId");
        Objects.requireNonNull(numaNode, "numaNode");
        Objects.requireNonNull(minor, "minor");
        if (minor.isPresent() && minor.getAsInt() < 0) {
            throw new IllegalArgumentException("device minor must be >= 0, was " + minor.getAsInt());
        }
        Objects.requireNonNull(driverVersion, "driverVersion");
        Objects.requireNonNull(parentUuid, "parentUuid");
        properties = Map.copyOf(properties);
        if (!memoryKnown && memory.bytes() != 0) {
            throw new IllegalArgumentException("device memory is unknown but given as " + memory);
        }
    }

    private static void requireText(String value, String field) {
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException("device " + field + " must not be blank");
        }
    }

    /** @return true if this is a partition of a physical GPU (MIG instance, CPX partition) */
    public boolean isPartition() {
        return parentUuid.isPresent();
    }

    /** @return a new builder */
    public static Builder builder() {
        return new Builder();
    }

    /** @return a builder holding this device's values, to derive a changed copy */
    public Builder toBuilder() {
        Builder b = new Builder().index(index).uuid(uuid).vendor(vendor).name(name).memory(memory)
                .pciBusId(pciBusId).properties(properties);
        if (!memoryKnown) {
            b.memoryUnknown();
        }
        computeCapability.ifPresent(b::computeCapability);
        architecture.ifPresent(b::architecture);
        numaNode.ifPresent(b::numaNode);
        minor.ifPresent(b::minor);
        driverVersion.ifPresent(b::driverVersion);
        parentUuid.ifPresent(b::parentUuid);
        return b;
    }

    @Override
    public String toString() {
        return "GPU " + index + " " + name + " (" + uuid + ", " + (memoryKnown ? memory.toHumanString()
                : "memory unknown") + ")";
    }

    /** Builds a {@link GpuDevice}; {@link #build()} validates. */
    public static final class Builder {
        private int index = -1;
        private String uuid;
        private GpuVendor vendor;
        private String name;
        private MemorySize memory;
        private ComputeCapability computeCapability;
        private String architecture;
        private String pciBusId;
        private Integer numaNode;
        private Integer minor;
        private String driverVersion;
        private String parentUuid;
        private final Map<String, String> properties = new LinkedHashMap<>();
        private boolean memoryKnown = true;

        private Builder() {
        }

        /** @return this */
        public Builder index(int v) { index = v; return this; }
        /** @return this */
        public Builder uuid(String v) { uuid = v; return this; }
        /** @return this */
        public Builder vendor(GpuVendor v) { vendor = v; return this; }
        /** @return this */
        public Builder name(String v) { name = v; return this; }
        /** @return this */
        public Builder memory(MemorySize v) { memory = v; memoryKnown = true; return this; }
        /** The backend could not read the memory size: memory is ZERO and {@code memoryKnown} false. @return this */
        public Builder memoryUnknown() {
            memory = MemorySize.ZERO;
            memoryKnown = false;
            return this;
        }
        /** @return this */
        public Builder computeCapability(ComputeCapability v) { computeCapability = v; return this; }
        /** @return this */
        public Builder architecture(String v) { architecture = v; return this; }
        /** @return this */
        public Builder pciBusId(String v) { pciBusId = v; return this; }
        /** @return this */
        public Builder numaNode(int v) { numaNode = v; return this; }
        /** @return this */
        public Builder minor(int v) { minor = v; return this; }
        /** @return this */
        public Builder driverVersion(String v) { driverVersion = v; return this; }
        /** @return this */
        public Builder parentUuid(String v) { parentUuid = v; return this; }
        /** @return this */
        public Builder property(String key, String value) {
            properties.put(key, value);
            return this;
        }
        /** @return this */
        public Builder properties(Map<String, String> v) { properties.putAll(v); return this; }

        /** @return the device; @throws IllegalArgumentException naming the first missing or invalid field */
        public GpuDevice build() {
            return new GpuDevice(index, uuid, vendor, name, memory, Optional.ofNullable(computeCapability),
                    Optional.ofNullable(architecture), pciBusId,
                    numaNode == null || numaNode < 0 ? OptionalInt.empty() : OptionalInt.of(numaNode),
                    minor == null ? OptionalInt.empty() : OptionalInt.of(minor),
                    Optional.ofNullable(driverVersion), Optional.ofNullable(parentUuid), properties, memoryKnown);
        }
    }
}
