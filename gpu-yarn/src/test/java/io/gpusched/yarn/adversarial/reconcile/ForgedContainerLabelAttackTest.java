package io.gpusched.yarn.adversarial.reconcile;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.LedgerReader;
import io.gpusched.yarn.GpuschedDevicePlugin;
import io.gpusched.yarn.NodeManagerHeartbeat;
import io.gpusched.yarn.YarnContainerGpus;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issues 32 item 2 and 37: what YARN counts as its own is any allocation carrying the label
 * {@value YarnContainerGpus#LABEL}, a label every process of the node can put on its request ({@code gpusched allocate
 * --label yarn.container=...}, the node service's {@code flags}). Another process's allocation (owner {@code mallory},
 * not the plug-in's) with a well-formed container id in that label is then treated as a YARN container's: the
 * follower's reconcile releases it (no such cgroup), and YARN's next offer takes its GPUs. Issue 32 says GPUs held by
 * other processes of the node's ledger are not YARN's to hand out, and issue 37 that only records of containers YARN
 * ended are released.
 */
@Tag("adversarial")
class ForgedContainerLabelAttackTest {
    @TempDir
    Path tmp;

    private static final String FORGED = "container_1700000000000_0042_01_000001";

    private Configuration conf(Path state, Path cgroups, String reconcileMs) {
        Configuration c = new Configuration(false);
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        c.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, reconcileMs);
        c.set(GpuschedDevicePlugin.KEY_ENDED_GRACE_MS, "0");
        c.set(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, cgroups.toString());
        return c;
    }

    private static Allocation mallory(SimulatedGpuInventory inv, Path state) {
        try (GpuNode other = GpuNode.builder().inventory(inv).stateDir(state).maintenanceInterval(Duration.ZERO)
                .auditLogging(false).build()) {
            return other.scheduler().allocate(GpuRequest.builder().count(2).owner("mallory")
                    .label(YarnContainerGpus.LABEL, FORGED).build());
        }
    }

    @Test
    void theFollowerNeverReleasesAnotherOwnersAllocationThatCarriesAContainerLabel() throws Exception {
        Path state = tmp.resolve("state");
        Path cgroups = Files.createDirectories(tmp.resolve("devices").resolve("hadoop-yarn"));
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin plugin = new GpuschedDevicePlugin(inv, conf(state, cgroups, "50"));
            try {
                plugin.getDevices();
                Allocation forged = mallory(inv, state);
                Instant after = Instant.now();
                // three heartbeats written after mallory's allocation: at least two whole reconciles saw it
                Set<Instant> beats = new HashSet<>();
                long deadline = System.nanoTime() + 60_000_000_000L;
                while (beats.size() < 3 && System.nanoTime() < deadline) {
                    Optional<NodeManagerHeartbeat> hb = NodeManagerHeartbeat.read(state);
                    hb.filter(h -> h.at().isAfter(after)).ifPresent(h -> beats.add(h.at()));
                    Thread.sleep(10);
                }
                assertThat(beats).as("the follower reconciled after mallory's allocation")
                        .hasSizeGreaterThanOrEqualTo(3);
                assertThat(LedgerReader.read(state).live).as("mallory's allocation (owner mallory, not YARN's),"
                        + " released by YARN's reconcile because it carries " + YarnContainerGpus.LABEL + "="
                        + FORGED).containsKey(forged.id());
            } finally {
                plugin.close();
            }
        }
    }

    @Test
    void yarnsOfferNeverTakesTheGpusOfAnotherOwnersAllocationThatCarriesAContainerLabel() throws Exception {
        Path state = tmp.resolve("state");
        Path cgroups = Files.createDirectories(tmp.resolve("devices").resolve("hadoop-yarn"));
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin plugin = new GpuschedDevicePlugin(inv, conf(state, cgroups, "0"));
            try {
                Set<Device> all = new TreeSet<>(plugin.getDevices());
                Allocation forged = mallory(inv, state);
                String outcome;
                try {
                    Set<Integer> minors = new TreeSet<>();
                    plugin.allocateDevices(all, 8, Map.of("CONTAINER_ID", "container_1700000000000_0001_01_000002"))
                            .forEach(d -> minors.add(d.getMinorNumber()));
                    outcome = "YARN's container got minors " + minors;
                } catch (RuntimeException refused) { // what should happen: 2 of the 8 are another owner's
                    outcome = "refused: " + refused.getMessage();
                }
                assertThat(LedgerReader.read(state).live).as("mallory's allocation after YARN asked for all 8 GPUs ("
                        + outcome + ")").containsKey(forged.id());
            } finally {
                plugin.close();
            }
        }
    }
}
