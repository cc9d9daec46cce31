package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.LedgerStatistics;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 37: a finished container's GPUs are released whether or not YARN allocates again. The test plays YARN's part
 * as Hadoop 3.4's {@code DeviceResourceHandlerImpl} does: {@code allocateDevices}, then the container's devices cgroup
 * made under a hierarchy of the test ({@link GpuschedDevicePlugin#KEY_CONTAINER_CGROUPS}), and the cgroup removed when
 * the container is cleaned up. What was released is read back from the ledger file by {@link LedgerReader}, and what
 * the node can hand out by another scheduler on the same state directory (another process of the node).
 */
class EndedContainersTest {
    @TempDir
    Path tmp;
    Path state;
    Path cgroups;
    SimulatedGpuInventory inv;
    GpuschedDevicePlugin plugin;
    Map<Integer, Device> byMinor = new HashMap<>();
    int next = 1;

    @BeforeEach
    void plugin() throws Exception {
        state = tmp.resolve("state");
        cgroups = Files.createDirectories(tmp.resolve("devices").resolve("hadoop-yarn"));
        inv = GpuInventories.simulated("dgx1-v100");
        plugin = new GpuschedDevicePlugin(inv, conf("0"));
        plugin.getDevices().forEach(d -> byMinor.put(d.getMinorNumber(), d));
    }

    @AfterEach
    void close() {
        plugin.close();
        inv.close();
    }

    private Configuration conf(String reconcileMs) {
        Configuration c = new Configuration(false);
        c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
        c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        c.set(GpuschedDevicePlugin.KEY_RECONCILE_INTERVAL_MS, reconcileMs);
        c.set(GpuschedDevicePlugin.KEY_ENDED_GRACE_MS, "0");
        c.set(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, cgroups.toString());
        return c;
    }

    /**
     * YARN's preStart: the plug-in chooses and records, then the container's cgroup is made. The cgroup is made first
     * here: these tests run with no grace for a record whose cgroup is missing ({@code KEY_ENDED_GRACE_MS} 0), so a
     * follower ticking between the record and the cgroup would rightly take the container for ended.
     */
    private String start(Set<Integer> free, int count) throws Exception {
        String cid = "container_1700000000000_0001_01_" + String.format("%06d", next++);
        Files.createDirectory(cgroups.resolve(cid));
        Set<Device> offer = new TreeSet<>();
        free.forEach(i -> offer.add(byMinor.get(i)));
        Set<Device> got = plugin.allocateDevices(offer, count, Map.of("CONTAINER_ID", cid));
        assertThat(got).as(cid).hasSize(count);
        got.forEach(d -> free.remove(d.getMinorNumber()));
        return cid;
    }

    private String idOf(String cid) {
        return YarnContainerGpus.find(plugin.node().ledger.scheduler(), cid).orElseThrow().id();
    }

    private LedgerStatistics stats() {
        return plugin.node().ledger.scheduler().ledgerStatistics().orElseThrow();
    }

    private ContainerCgroups view() {
        return ContainerCgroups.of(conf("0"));
    }

    @Test
    void containersWhoseCgroupIsGoneAreReleasedInOneForcedAppendAndTheirGpusCanBeTakenByAnotherProcess()
            throws Exception {
        Set<Integer> free = new TreeSet<>(byMinor.keySet());
        Map<String, String> idOf = new LinkedHashMap<>();
        for (int i = 0; i < 4; i++) {
            String cid = start(free, 2);
            idOf.put(cid, idOf(cid));
        }
        List<String> cids = new ArrayList<>(idOf.keySet());
        for (String cid : cids.subList(0, 3)) { // YARN's postComplete: three containers cleaned up
            Files.delete(cgroups.resolve(cid));
        }
        LedgerStatistics before = stats();
        List<String> released = plugin.node().ledger.releaseEnded(view(), Instant.now(), Duration.ZERO);
        LedgerStatistics after = stats();
        List<String> ended = cids.subList(0, 3).stream().map(idOf::get).toList();
        assertThat(released).containsExactlyInAnyOrderElementsOf(ended);
        assertThat(after.forces() - before.forces()).as("one forced append for three releases").isEqualTo(1);
        LedgerReader file = LedgerReader.read(state);
        assertThat(file.ended).extracting(LedgerReader.Ended::id).containsExactlyInAnyOrderElementsOf(ended);
        assertThat(file.live).containsOnlyKeys(idOf.get(cids.get(3)));
        // nothing more to do: no write at all
        assertThat(plugin.node().ledger.releaseEnded(view(), Instant.now(), Duration.ZERO)).isEmpty();
        assertThat(stats().forces()).isEqualTo(after.forces());
        try (GpuNode other = GpuNode.builder().inventory(inv).stateDir(state).maintenanceInterval(Duration.ZERO)
                .auditLogging(false).build()) {
            Allocation six = other.scheduler().allocate(GpuRequest.builder().count(6).owner("cli").build());
            assertThat(six.deviceIndices()).doesNotContainAnyElementsOf(
                    plugin.node().ledger.records().get(0).deviceIndices());
        }
    }

    @Test
    void aYoungRecordIsKeptWithoutItsCgroupAndReleasedOnceOlderThanTheGrace() throws Exception {
        Set<Integer> free = new TreeSet<>(byMinor.keySet());
        String cid = start(free, 2);
        Files.delete(cgroups.resolve(cid));
        Allocation a = YarnContainerGpus.find(plugin.node().ledger.scheduler(), cid).orElseThrow();
        Duration grace = Duration.ofSeconds(10);
        assertThat(plugin.node().ledger.releaseEnded(view(), a.createdAt().plusSeconds(9), grace)).isEmpty();
        assertThat(LedgerReader.read(state).live).containsKey(a.id());
        assertThat(plugin.node().ledger.releaseEnded(view(), a.createdAt().plusSeconds(10), grace))
                .containsExactly(a.id());
    }

    @Test
    void nothingIsReleasedWhenTheCgroupsCannotBeSeen() throws Exception {
        Set<Integer> free = new TreeSet<>(byMinor.keySet());
        String cid = start(free, 2);
        Files.delete(cgroups.resolve(cid));
        Files.delete(cgroups); // the hierarchy itself is gone: nothing can be concluded
        assertThat(plugin.node().ledger.releaseEnded(view(), Instant.now(), Duration.ZERO)).isEmpty();
        ContainerCgroups blind = new ContainerCgroups(Optional::empty);
        assertThat(plugin.node().ledger.releaseEnded(blind, Instant.now(), Duration.ZERO)).isEmpty();
        assertThat(LedgerReader.read(state).live).hasSize(1);
        Configuration relative = conf("0");
        relative.set(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, "devices/hadoop-yarn");
        assertThatThrownBy(() -> ContainerCgroups.of(relative)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS).hasMessageContaining("absolute");
    }

    /**
     * A record another process of the node made with a forged container label (a path, not a container id) is never
     * looked up as a path nor released by the reconcile; nor is any record other processes hold.
     */
    @Test
    void forgedContainerLabelsAndOtherProcessesRecordsAreNeverReleased() throws Exception {
        Files.createDirectories(tmp.resolve("devices").resolve("elsewhere"));
        try (GpuNode other = GpuNode.builder().inventory(inv).stateDir(state).maintenanceInterval(Duration.ZERO)
                .auditLogging(false).build()) {
            Allocation forged = other.scheduler().allocate(GpuRequest.builder().count(1).owner("mallory")
                    .label(YarnContainerGpus.LABEL, "../elsewhere").build());
            Allocation cli = other.scheduler().allocate(GpuRequest.builder().count(2).owner("cli").build());
            Allocation blank = other.scheduler().allocate(GpuRequest.builder().count(1).owner("yarn")
                    .label(YarnContainerGpus.LABEL, "").build());
            assertThat(plugin.node().ledger.releaseEnded(view(), Instant.now().plusSeconds(3600), Duration.ZERO))
                    .isEmpty();
            assertThat(LedgerReader.read(state).live).containsKeys(forged.id(), cli.id(), blank.id());
        }
    }

    /**
     * Through the plug-in's follower thread, as a NodeManager runs it: the container's cgroup is removed, no further
     * YARN request comes, and the record is released within a few reconcile intervals; the NodeManager's heartbeat
     * names this process.
     */
    @Test
    void theFollowerReleasesAnEndedContainerWithoutAnotherYarnRequestAndWritesTheHeartbeat() throws Exception {
        plugin.close();
        plugin = new GpuschedDevicePlugin(inv, conf("50"));
        plugin.getDevices();
        Set<Integer> free = new TreeSet<>(byMinor.keySet());
        String keep = start(free, 2);
        String done = start(free, 4);
        String doneId = idOf(done);
        Files.delete(cgroups.resolve(done));
        long deadline = System.nanoTime() + 60_000_000_000L;
        // the follower counts a release once releaseEnded returns, a moment after the ledger shows it: wait for both
        while ((LedgerReader.read(state).live.containsKey(doneId) || plugin.capacityFollower().released() < 1)
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        LedgerReader file = LedgerReader.read(state);
        assertThat(file.live).as("the ended container's record").doesNotContainKey(doneId)
                .containsKey(idOf(keep));
        assertThat(file.ended).extracting(LedgerReader.Ended::id).containsOnlyOnce(doneId);
        NodeManagerHeartbeat hb = NodeManagerHeartbeat.read(state).orElseThrow();
        assertThat(hb.pid()).isEqualTo(ProcessHandle.current().pid());
        assertThat(hb.running()).isTrue();
        assertThat(hb.every()).isEqualTo(Duration.ofMillis(50));
        assertThat(plugin.capacityFollower().released()).isEqualTo(1);
    }
}
