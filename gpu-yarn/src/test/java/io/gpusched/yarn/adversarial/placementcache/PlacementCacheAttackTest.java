package io.gpusched.yarn.adversarial.placementcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.yarn.GpuschedDevicePlugin;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The YARN plug-in's answers per offered set and count (issue 23's cache) after the world changed: a GPU
 * another process of the node took in the node ledger, an offer that shrank, a GPU that turned unhealthy and one that
 * came back. Every answer: the count asked, elements of the offer, healthy, none held by another process.
 */
@Tag("adversarial")
class PlacementCacheAttackTest {

    @TempDir
    Path tmp;

    static SimulatedGpuInventory node() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("review23-node");
        for (int i = 0; i < 6; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-r23y-" + i).vendor(GpuVendor.NVIDIA).name("Tesla V100")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("00000000:0" + (i + 1) + ":00.0").minor(i).build());
        }
        return b.links(0, 1, 4).links(2, 3, 2).links(4, 5, 1).links(0, 2, 1).build();
    }

    GpuschedDevicePlugin plugin(SimulatedGpuInventory inv) {
        Configuration c = new Configuration(false);
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, tmp.resolve("state").toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        return new GpuschedDevicePlugin(inv, c);
    }

    static Set<Integer> minors(Set<Device> ds) {
        return new TreeSet<>(ds.stream().map(Device::getMinorNumber).toList());
    }

    @Test
    void aGpuAnotherProcessTookMeanwhileIsNotAnsweredFromTheCache() {
        try (SimulatedGpuInventory inv = node(); SimulatedGpuInventory other = node()) {
            GpuschedDevicePlugin p = plugin(inv);
            Set<Device> offer = p.getDevices();
            Set<Device> first = p.allocateDevices(offer, 2, new HashMap<>());
            assertEquals(Set.of(0, 1), minors(first), "the best-linked pair");
            p.onDevicesReleased(first);
            assertEquals(first, p.allocateDevices(offer, 2, new HashMap<>()), "same offer, same answer");
            p.onDevicesReleased(first);
            // YARN offers every GPU again (so none is a container's): the plug-in's own records on them are dropped
            assertTrue(p.allocateDevices(offer, 7, new HashMap<>()).isEmpty(), "7 of 6");
            try (GpuScheduler s = GpuScheduler.builder().inventory(other).auditLogging(false)
                    .stateDir(tmp.resolve("state")).build()) {
                Allocation taken = s.allocate(GpuRequest.builder().count(1).requiredDevices(0).owner("cli").build());
                assertEquals(java.util.List.of(0), taken.deviceIndices());
                Set<Device> again = p.allocateDevices(offer, 2, new HashMap<>());
                assertEquals(2, again.size(), "" + again);
                assertTrue(offer.containsAll(again));
                assertFalse(minors(again).contains(0), "GPU 0 is held by another process in the ledger: " + again);
                // and when the other process lets it go, the best pair is back
                assertTrue(s.release(taken.id()));
                p.onDevicesReleased(again);
                assertTrue(p.allocateDevices(offer, 7, new HashMap<>()).isEmpty(), "7 of 6");
                assertEquals(Set.of(0, 1), minors(p.allocateDevices(offer, 2, new HashMap<>())),
                        "GPU 0 free again: the best pair");
            }
        }
    }

    @Test
    void anOfferThatChangedIsAnsweredFromItself() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = plugin(inv);
            Set<Device> offer = p.getDevices();
            Set<Device> first = p.allocateDevices(offer, 2, new HashMap<>());
            p.onDevicesReleased(first);
            for (Device gone : first) {
                Set<Device> smaller = new HashSet<>(offer);
                smaller.remove(gone);
                Set<Device> got = p.allocateDevices(smaller, 2, new HashMap<>());
                assertEquals(2, got.size());
                assertTrue(smaller.containsAll(got), "answered outside the offer " + minors(smaller) + ": "
                        + minors(got));
                p.onDevicesReleased(got);
            }
            for (int k = 1; k <= 6; k++) {
                Set<Device> got = p.allocateDevices(offer, k, new HashMap<>());
                assertEquals(k, got.size(), "k=" + k);
                assertTrue(offer.containsAll(got));
                p.onDevicesReleased(got);
            }
            assertTrue(p.allocateDevices(offer, 7, new HashMap<>()).isEmpty(), "7 of 6");
        }
    }

    @Test
    void aGpuThatCameBackIsOfferedAgainAndASickOneNeverAnswered() {
        try (SimulatedGpuInventory inv = node()) {
            GpuschedDevicePlugin p = plugin(inv);
            Set<Device> offer = p.getDevices();
            Set<Device> first = p.allocateDevices(offer, 2, new HashMap<>());
            p.onDevicesReleased(first);
            for (int round = 0; round < 3; round++) {
                inv.setHealth(1, GpuHealth.unhealthy("XID 79"));
                Set<Device> sick = p.allocateDevices(offer, 2, new HashMap<>());
                assertEquals(2, sick.size());
                assertFalse(minors(sick).contains(1), "round " + round + ": unhealthy GPU 1 answered: " + sick);
                p.onDevicesReleased(sick);
                Set<Device> five = p.allocateDevices(offer, 5, new HashMap<>());
                assertEquals(5, five.size(), "five healthy GPUs offered");
                assertFalse(minors(five).contains(1));
                p.onDevicesReleased(five);
                assertTrue(p.allocateDevices(offer, 6, new HashMap<>()).isEmpty(), "only 5 healthy GPUs");
                inv.setHealth(1, GpuHealth.HEALTHY);
                assertEquals(Set.of(0, 1), minors(p.allocateDevices(offer, 2, new HashMap<>())),
                        "round " + round + ": GPU 1 healthy again: the best pair");
            }
        }
    }
}
