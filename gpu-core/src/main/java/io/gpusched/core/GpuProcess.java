package io.gpusched.core;

import java.util.Optional;

/**
 * A process holding memory on a device, as the backend lists it (for draining released devices).
 *
 * @param pid        process id (in the host's pid namespace)
 * @param usedMemory device memory it holds, where the driver reports it
 */
public record GpuProcess(int pid, Optional<MemorySize> usedMemory) {
}
