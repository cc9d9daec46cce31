package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.LedgerException.Kind;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One state directory, one node: the ledger records its node, a simulated node and a real one never share it, nodes
 * with no GPU in common never share it, a node that lost a GPU is the same node; ledgers the 0.1 CLI kept in
 * {@code <dir>/<backend>/} are moved in or refused, never silently ignored.
 */
class NodeIdentityTest {

    /** A "real" node: the simulated devices under a backend name that is not simulated. */
    static GpuInventory real(GpuInventory sim, String backend) {
        return new GpuInventory() {
            @Override
            public String backend() {
                return backend;
            }

            @Override
            public List<GpuDevice> devices() {
                return sim.devices();
            }

            @Override
            public GpuTopology topology() {
                return sim.topology();
            }

            @Override
            public GpuSample sample() {
                return sim.sample();
            }

            @Override
            public void close() {
                sim.close();
            }
        };
    }

    private static GpuScheduler open(GpuInventory inv, Path dir) {
        return GpuScheduler.builder().inventory(inv).stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void simulatedAndRealNeverShareALedger(@TempDir Path dir) {
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), dir)) {
            s.allocate(GpuRequest.builder().count(2).build());
        }
        assertThatThrownBy(() -> open(real(GpuInventories.simulated("dgx1-v100"), "nvml"), dir))
                .isInstanceOfSatisfying(LedgerException.class, e -> assertThat(e.kind()).isEqualTo(Kind.NODE_MISMATCH))
                .hasMessageContaining("simulated node").hasMessageContaining("real")
                .hasMessageContaining(dir.toString());
        // and the other way round
        Path other = dir.resolve("real");
        try (GpuScheduler s = open(real(GpuInventories.simulated("dgx1-v100"), "nvml"), other)) {
            assertThat(s.allocations()).isEmpty();
        }
        assertThatThrownBy(() -> open(GpuInventories.simulated("dgx1-v100"), other))
                .isInstanceOfSatisfying(LedgerException.class, e -> assertThat(e.kind()).isEqualTo(Kind.NODE_MISMATCH));
    }

    @Test
    void nodesWithNoGpuInCommonAreRefusedAndALostGpuIsTheSameNode(@TempDir Path dir) {
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), dir)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        assertThatThrownBy(() -> open(GpuInventories.simulated("dgx-h100"), dir))
                .isInstanceOfSatisfying(LedgerException.class, e -> assertThat(e.kind()).isEqualTo(Kind.NODE_MISMATCH))
                .hasMessageContaining("another node");
        SimulatedGpuInventory full = GpuInventories.simulated("dgx1-v100");
        SimulatedGpuInventory.Builder fewer = SimulatedGpuInventory.builder("dgx1-v100");
        full.devices().subList(0, 7).forEach(fewer::device);
        try (GpuScheduler s = open(fewer.build(), dir)) {
            assertThat(s.allocations()).as("the same node, one GPU gone: its ledger").hasSize(1);
        }
    }

    @Test
    void aDamagedIdentityIsRefusedNamingTheFile(@TempDir Path dir) throws Exception {
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), dir)) {
            assertThat(s.allocations()).isEmpty();
        }
        Files.writeString(dir.resolve("node"), "{not json");
        assertThatThrownBy(() -> open(GpuInventories.simulated("dgx1-v100"), dir))
                .isInstanceOfSatisfying(LedgerException.class, e -> assertThat(e.kind()).isEqualTo(Kind.CORRUPT))
                .hasMessageContaining(dir.resolve("node").toString());
    }

    @Test
    void aLegacyPerBackendLedgerIsMovedInWithItsAllocations(@TempDir Path dir) throws Exception {
        Path legacy = dir.resolve(NodeIdentity.legacyName("simulated:dgx1-v100"));
        String id;
        try (GpuScheduler old = open(GpuInventories.simulated("dgx1-v100"), legacy)) {
            id = old.allocate(GpuRequest.builder().count(3).build()).id();
        }
        Files.delete(legacy.resolve("node")); // 0.1 wrote none
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), dir)) {
            assertThat(s.allocation(id)).as("the CLI's allocation is the node's now").isPresent();
            assertThat(s.allocate(GpuRequest.builder().count(5).build()).devices()).hasSize(5);
            assertThat(s.tryAllocate(GpuRequest.builder().count(1).build())).as("all 8 held").isEmpty();
        }
        assertThat(legacy.resolve("ledger")).doesNotExist();
        assertThat(legacy.resolve(NodeIdentity.MOVED_NOTE)).exists();
    }

    /** 0.1's command kept a simulated node's default ledger in <base>/simulated_<profile>/, beside the real node's. */
    @Test
    void aSimulatedNodesLegacyDefaultLedgerMovesToItsNewDefault(@TempDir Path base) throws Exception {
        Path legacy = base.resolve(NodeIdentity.legacyName("simulated:dgx1-v100"));
        String id;
        try (GpuScheduler old = open(GpuInventories.simulated("dgx1-v100"), legacy)) {
            id = old.allocate(GpuRequest.builder().count(8).build()).id();
        }
        Files.delete(legacy.resolve("node"));
        Path now =
                io.gpusched.core.host.StateDirectory.forNode(java.util.Optional.empty(), "simulated:dgx1-v100", base);
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), now)) {
            assertThat(s.allocation(id)).isPresent();
            assertThat(s.tryAllocate(GpuRequest.builder().count(1).build())).as("GPU 0 is not granted twice").isEmpty();
        }
        assertThat(legacy.resolve(NodeIdentity.MOVED_NOTE)).exists();
    }

    @Test
    void aLegacyLedgerBesideTheNodesOwnIsRefused(@TempDir Path dir) {
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), dir)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        Path legacy = dir.resolve(NodeIdentity.legacyName("simulated:dgx1-v100"));
        try (GpuScheduler old = open(GpuInventories.simulated("dgx1-v100"), legacy)) {
            old.allocate(GpuRequest.builder().count(1).build());
        }
        assertThatThrownBy(() -> open(GpuInventories.simulated("dgx1-v100"), dir))
                .isInstanceOfSatisfying(LedgerException.class, e -> assertThat(e.kind()).isEqualTo(Kind.LEGACY_LEDGER))
                .hasMessageContaining(legacy.resolve("ledger").toString()).hasMessageContaining("remove " + legacy);
    }

    @Test
    void anotherBackendsLegacyLedgerIsNamedNotUsed(@TempDir Path dir) {
        Path legacy = dir.resolve("nvml");
        try (GpuScheduler old = open(real(GpuInventories.simulated("dgx1-v100"), "nvml"), legacy)) {
            old.allocate(GpuRequest.builder().count(1).build());
        }
        try (GpuScheduler s = open(GpuInventories.simulated("dgx1-v100"), dir)) {
            assertThat(s.allocations()).isEmpty();
        }
        assertThat(legacy.resolve("ledger")).as("left where it is").exists();
    }
}
