package io.gpusched.yarn.adversarial.reconcile;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.yarn.GpuschedDevicePlugin;
import io.gpusched.yarn.NodeManagerHeartbeat;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
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
 * Issue 32 item 3: allocations of YARN containers are flagged by {@code status}/{@code doctor} "while no NodeManager
 * has run for a while", with the command that releases them. README documents
 * {@code gpusched.yarn.reconcile-interval-ms = 0} ("finished containers' GPUs come back only when YARN offers them
 * again"), but the heartbeat is written only by the reconcile, so with that setting a NodeManager that runs (here: the
 * plug-in in this JVM, its container's record just made) writes none, and after {@code outlived-after} (10 minutes)
 * its running containers' records are reported as outliving YARN, with the command to release them: an admin who
 * follows it frees GPUs a running container uses.
 */
@Tag("adversarial")
class OutlivedWhileNodeManagerRunsAttackTest {
    @TempDir
    Path tmp;

    @Test
    void aRunningNodeManagerWithTheReconcileTurnedOffIsNotTakenForGone() throws Exception {
        Path state = tmp.resolve("state");
        Path cgroups = Files.createDirectories(tmp.resolve("devices").resolve("hadoop-yarn"));
        Configuration c = new Configuration(false);
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        c.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, "0"); // README: a documented setting
        c.set(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, cgroups.toString());
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuschedDevicePlugin plugin = new GpuschedDevicePlugin(inv, c);
            try {
                Set<Device> all = new TreeSet<>(plugin.getDevices());
                String cid = "container_1700000000000_0001_01_000002";
                assertThat(plugin.allocateDevices(all, 2, Map.of("CONTAINER_ID", cid))).hasSize(2);
                Files.createDirectory(cgroups.resolve(cid)); // the container runs
                try (GpuNode status = GpuNode.builder().inventory(inv).stateDir(state)
                        .maintenanceInterval(Duration.ZERO).auditLogging(false).build()) {
                    Optional<NodeManagerHeartbeat.Outlived> o = NodeManagerHeartbeat.outlived(state,
                            status.scheduler().allocations(), Instant.now().plus(Duration.ofMinutes(11)));
                    assertThat(o.map(x -> x.describe("gpusched --state-dir " + state)))
                            .as("status/doctor, while this NodeManager (pid %d) runs and its container runs",
                                    ProcessHandle.current().pid())
                            .isEmpty();
                }
            } finally {
                plugin.close();
            }
        }
    }
}
