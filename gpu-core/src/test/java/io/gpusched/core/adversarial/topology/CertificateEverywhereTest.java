package io.gpusched.core.adversarial.topology;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The certificate an allocation carries is the one the docs promise everywhere: {@code placement()}, the
 * ALLOCATED audit event's message, the status JSON, and another scheduler's view of the same ledger record.
 */
@Tag("adversarial")
class CertificateEverywhereTest {

    @TempDir
    Path tmp;

    @Test
    void theCertificateReadsTheSameInEveryPlace() {
        PairedLinkInventory inv = new PairedLinkInventory(8);
        List<AllocationEvent> events = new CopyOnWriteArrayList<>();
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv)
                .strategy(AllocationStrategies.topologyAware(TopologyAwareStrategy.Objective.SET))
                .auditLogging(false).listener(events::add).maintenanceInterval(java.time.Duration.ZERO)
                .stateDir(tmp.resolve("state")).build();
             GpuScheduler other = GpuScheduler.builder().inventory(new PairedLinkInventory(8)).auditLogging(false)
                     .maintenanceInterval(java.time.Duration.ZERO).stateDir(tmp.resolve("state")).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(2).owner("r23").build());
            assertEquals(List.of(0, 1), a.deviceIndices().stream().sorted().toList(), "the 4-link pair");
            assertTrue(a.placement().rated() && a.placement().provenOptimal(), "8 devices, k=2: " + a.placement());
            String says = a.placement().describe();
            assertEquals("proven optimal", says);
            assertTrue(events.stream().anyMatch(e -> e.message() != null && e.message().contains(says)),
                    "no ALLOCATED event saying '" + says + "': " + events);
            assertTrue(s.statusJson().contains(says), s.statusJson());
            other.refresh();
            assertEquals(a.placement(), other.allocation(a.id()).orElseThrow().placement(),
                    "the ledger record carries the certificate to another scheduler");
        }
    }
}
