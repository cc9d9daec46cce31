package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.LedgerStatistics;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 23, item 4: one {@code allocateDevices} is at most one forced append to the node ledger, however many finished
 * containers it releases (their releases and the new grant are one transaction). Observed through the ledger's own
 * force counter and, record by record, through the file read by {@link LedgerReader}: before each call the test works
 * out from the file which records the offer finishes, and after it checks that exactly those ended and the new
 * container holds the GPUs handed to YARN.
 */
class AllocateDevicesLedgerTest {

    @TempDir
    Path state;

    @Test
    void everyCallIsAtMostOneForcedAppendWithItsFinishedContainers() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            Configuration conf = new Configuration(false);
            conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
            conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, conf);
            Map<Integer, Device> byMinor = new HashMap<>();
            p.getDevices().forEach(d -> byMinor.put(d.getMinorNumber(), d));
            Map<String, Integer> indexOfUuid = new HashMap<>();
            for (GpuDevice d : inv.devices()) {
                indexOfUuid.put(d.uuid(), d.index());
            }
            Random rnd = new Random(23);
            int grants = 0;
            int declines = 0;
            int multiRelease = 0;
            for (int call = 0; call < 120; call++) {
                int mask = 1 + rnd.nextInt(255);
                int free = Integer.bitCount(mask);
                int count = call % 17 == 16 ? free + 1 : 1 + rnd.nextInt(free); // now and then more than offered
                Set<Device> offer = new HashSet<>();
                Set<Integer> offered = new HashSet<>();
                for (int i = 0; i < 8; i++) {
                    if ((mask >> i & 1) == 1) {
                        offer.add(byMinor.get(i));
                        offered.add(i);
                    }
                }
                LedgerReader before = LedgerReader.read(state);
                List<String> finishing = new ArrayList<>();
                for (LedgerReader.Live l : before.live.values()) {
                    if (l.uuids().stream().map(indexOfUuid::get).anyMatch(offered::contains)) {
                        finishing.add(l.id());
                    }
                }
                LedgerStatistics s0 = stats(p);
                String cid = "container_1700000000000_0001_01_" + (100_000 + call);
                Set<Device> got = p.allocateDevices(offer, count, Map.of("CONTAINER_ID", cid));
                LedgerStatistics s1 = stats(p);
                long forces = s1.forces() - s0.forces();
                LedgerReader after = LedgerReader.read(state);
                assertThat(forces).as("call %d: forced appends", call).isLessThanOrEqualTo(1);
                assertThat(after.ended.subList(before.ended.size(), after.ended.size()))
                        .extracting(LedgerReader.Ended::id).as("call %d: the finished containers' records", call)
                        .containsExactlyInAnyOrderElementsOf(finishing);
                if (got.isEmpty()) {
                    declines++;
                    assertThat(count).as("call %d declined", call).isGreaterThan(free);
                    assertThat(forces).isEqualTo(finishing.isEmpty() ? 0 : 1);
                    assertThat(s1.records() - s0.records()).isEqualTo(finishing.size());
                    continue;
                }
                grants++;
                if (finishing.size() > 1) {
                    multiRelease++;
                }
                assertThat(forces).as("call %d: a grant is forced", call).isEqualTo(1);
                assertThat(s1.records() - s0.records()).isEqualTo(finishing.size() + 1L);
                Set<String> handed = new HashSet<>();
                for (Device d : got) {
                    handed.add(inv.devices().get(d.getMinorNumber()).uuid());
                }
                List<LedgerReader.Live> added = after.live.values().stream()
                        .filter(l -> !before.live.containsKey(l.id())).toList();
                assertThat(added).hasSize(1);
                assertThat(added.get(0).uuids()).containsExactlyInAnyOrderElementsOf(handed);
                assertThat(p.node().ledger.records()).filteredOn(a -> a.id().equals(added.get(0).id()))
                        .singleElement().satisfies(a -> assertThat(a.request().jobId()).contains(cid));
            }
            assertThat(grants).isGreaterThan(80);
            assertThat(declines).isPositive();
            assertThat(multiRelease).as("calls that finished several containers at once").isPositive();
            p.close();
        }
    }

    private static LedgerStatistics stats(GpuschedDevicePlugin p) {
        return p.node().ledger.scheduler().ledgerStatistics().orElseThrow();
    }
}
