package io.gpusched.yarn.adversarial.sharedledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.yarn.GpuschedDevicePlugin;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The YARN plug-in as the README describes it, attacked where health and the node ledger meet YARN's
 * offers. GPUs are lost and recovered through the documented mechanism for simulated nodes (the health file of
 * {@code $GPUSCHED_SIMULATED_HEALTH}, followed by the inventory); other processes' holdings are made with a second,
 * independent scheduler on the same state directory, and every expectation is computed here.
 */
@Tag("adversarial")
class YarnHealthAndLedgerTest {

    @TempDir
    Path tmp;

    private Path state() throws Exception {
        Path s = Files.createDirectories(tmp.resolve("state"));
        Files.setPosixFilePermissions(s, PosixFilePermissions.fromString("rwx------"));
        return s;
    }

    private static Configuration conf(Path state) {
        Configuration c = new Configuration(false);
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        return c;
    }

    private static Set<Integer> minors(Set<Device> ds) {
        return ds.stream().map(Device::getMinorNumber).collect(Collectors.toCollection(TreeSet::new));
    }

    private static Map<String, String> env(String container) {
        Map<String, String> e = new HashMap<>();
        e.put("CONTAINER_ID", container);
        return e;
    }

    /** Polls up to 60 s for the inventory to have followed the health file (a deadline, not a timing assertion). */
    private static void awaitHealthy(SimulatedGpuInventory inv, int index, boolean healthy) throws Exception {
        long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (isHealthy(inv, index) != healthy) {
            if (System.nanoTime() > end) {
                throw new AssertionError("the simulated node did not follow its health file for GPU " + index);
            }
            Thread.sleep(20);
        }
    }

    private static boolean isHealthy(SimulatedGpuInventory inv, int index) {
        return inv.health(inv.devices().get(index)).isHealthy();
    }

    /**
     * Capacity follows health down AND back up: README "when one of them is lost or comes back it sets the node's
     * capacity"; getDevices (what YARN sizes the node by) must report 7 while GPU 3 is lost and 8 again after it
     * recovered, and the recovered GPU must be choosable again.
     */
    @Test
    void getDevicesFollowsALostGpuDownAndBackUp() throws Exception {
        Path health = tmp.resolve("health");
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            inv.followHealthFile(health, Duration.ofMillis(20));
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf(state()));
            try {
                Set<Device> all = p.getDevices();
                assertEquals(8, all.size(), "" + all);
                int lostMinor = inv.devices().get(3).minor().orElseThrow();
                Files.writeString(health, "3 GPU_IS_LOST: fell off the bus\n");
                awaitHealthy(inv, 3, false);
                Set<Device> down = p.getDevices();
                assertEquals(7, down.size(), "a lost GPU is not reported: " + minors(down));
                assertTrue(!minors(down).contains(lostMinor), "" + minors(down));
                assertTrue(!minors(p.allocateDevices(all, 7, env("container_1_0001_01_000002"))).contains(lostMinor));
                Files.writeString(health, "");
                awaitHealthy(inv, 3, true);
                Set<Device> up = p.getDevices();
                assertEquals(8, up.size(), "the recovered GPU is reported again: " + minors(up));
                Set<Device> eight = p.allocateDevices(all, 8, env("container_1_0001_01_000003"));
                assertEquals(8, eight.size(), "all 8, the recovered one included: " + minors(eight));
            } finally {
                p.close();
            }
        }
    }

    /**
     * GPUs another process of the node holds in the ledger (the CLI) are never given to a container, even when YARN
     * offers the very set whose answer the plug-in has already worked out and cached (PlacementCache: "the answer
     * depends only on [the offered sets]").
     */
    @Test
    void aCachedAnswerNeverHandsOutGpusTheCliTookMeanwhile() throws Exception {
        Path state = state();
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             SimulatedGpuInventory cliInv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler cli = GpuScheduler.builder().inventory(cliInv).stateDir(state).build()) {
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf(state));
            try {
                Set<Device> all = p.getDevices();
                // container 1 gets the best pair; YARN then offers all 8 again (container 1 finished): its record goes
                Set<Device> first = p.allocateDevices(all, 2, env("container_1_0001_01_000002"));
                assertEquals(2, first.size());
                Set<Device> again = p.allocateDevices(all, 2, env("container_1_0001_01_000003"));
                assertEquals(minors(first), minors(again), "same offer, same answer (the cached one)");
                // container 3 finishes; before YARN asks again, the CLI takes exactly those two GPUs
                cli.refresh();
                for (Allocation a : cli.allocations()) {
                    cli.release(a.id()); // an operator frees the finished container's stale record
                }
                Set<Integer> want = minors(first).stream().map(m -> indexOfMinor(inv, m))
                        .collect(Collectors.toCollection(TreeSet::new));
                Allocation held =
                        cli.allocate(GpuRequest.builder().deviceIndices(List.copyOf(want)).owner("cli").build());
                assertEquals(want, new TreeSet<>(held.deviceIndices()));
                Set<Device> third = p.allocateDevices(all, 2, env("container_1_0001_01_000004"));
                assertEquals(2, third.size(), "six GPUs are free: " + minors(third));
                Set<Integer> overlap = new TreeSet<>(minors(third));
                overlap.retainAll(minors(first));
                assertEquals(Set.of(), overlap, "GPUs the CLI holds were given to a YARN container");
            } finally {
                p.close();
            }
        }
    }

    private static int indexOfMinor(SimulatedGpuInventory inv, int minor) {
        return inv.devices().stream().filter(d -> d.minor().orElse(-1) == minor).findFirst().orElseThrow().index();
    }
}
