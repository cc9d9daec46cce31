package io.gpusched.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Test;

/**
 * Issue 23: {@code allocateDevices} caches the strategy's answer per offered set and count ({@link PlacementCache}); a
 * GPU that turns unhealthy after an answer was cached must not come back from the cache for the same offer: the next
 * call with the same offer is answered from the healthy GPUs, with the count asked.
 */
class PlacementCacheHealthTest {

    @Test
    void aHealthChangeIsNotAnsweredFromTheCache() throws Exception {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("cache-node");
        for (int i = 0; i < 4; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-cache-" + i).vendor(GpuVendor.NVIDIA).name("Tesla V100")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("00000000:0" + (i + 1) + ":00.0").minor(i).build());
        }
        try (SimulatedGpuInventory inv = b.links(0, 1, 2).links(2, 3, 2).links(0, 2, 1).build()) {
            Configuration c = new Configuration(false);
            c.set(GpuschedDevicePlugin.KEY_STATE_DIR, Files.createTempDirectory("gpusched-cache").toString());
            c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, c);
            Set<Device> offer = p.getDevices();
            Set<Device> first = p.allocateDevices(offer, 2, new HashMap<>());
            assertEquals(2, first.size(), "" + first);
            // YARN frees them and offers the same set again: the cached answer is the same pair
            assertEquals(first, p.allocateDevices(offer, 2, new HashMap<>()));
            int sick = new TreeSet<>(first.stream().map(Device::getMinorNumber).toList()).first();
            inv.setHealth(sick, GpuHealth.unhealthy("XID 79: fell off the bus"));
            Set<Device> after = p.allocateDevices(offer, 2, new HashMap<>());
            assertEquals(2, after.size(), "two healthy GPUs are offered; got " + after);
            assertFalse(after.stream().anyMatch(d -> d.getMinorNumber() == sick),
                    "GPU " + sick + " turned unhealthy after its pair was cached, and was handed out: " + after);
        }
    }
}
