package io.gpusched.flink;

import java.util.Collection;
import java.util.List;
import java.util.Optional;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;

/**
 * One GPU of the TaskManager, as an operator sees it through
 * {@code getRuntimeContext().getExternalResourceInfos("gpu")}: {@code index} (the property Flink's own GPU driver
 * sets), {@code uuid} and {@code pci_bus_id}.
 *
 * @param index    the GPU's index on the node
 * @param uuid     its UUID
 * @param pciBusId its PCI bus id
 */
public record GpuschedGpuInfo(int index, String uuid, String pciBusId) implements ExternalResourceInfo {

    /** Property names. */
    public static final List<String> KEYS = List.of("index", "uuid", "pci_bus_id");

    @Override
    public Optional<String> getProperty(String key) {
        return switch (key) {
            case "index" -> Optional.of(String.valueOf(index));
            case "uuid" -> Optional.of(uuid);
            case "pci_bus_id" -> Optional.of(pciBusId);
            default -> Optional.empty();
        };
    }

    @Override
    public Collection<String> getKeys() {
        return KEYS;
    }
}
