package io.gpusched.kubernetes;

import static io.gpusched.kubernetes.PodResourcesStandIn.pod;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Kubernetes node end to end: the kubelet's PodResources API (a gRPC stand-in on a real Unix socket) says which pod
 * holds which GPU, the node's accounting sampler meters those GPUs by their processes, the kubelet restarts midway,
 * and {@code report --by pod} shows each pod's scripted figures.
 */
class PodUsageReportTest {
    private static final Duration STEP = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    @Test
    void podsOfAKubeletAreReportedByPodAcrossAKubeletRestart() throws Exception {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix domain sockets unavailable: "
                + UnixSockets.unavailabilityCause());
        ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("k8s").clock(clock).energyCounters(true);
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-aaaaaaaa-0000-4000-8000-00000000000" + i)
                    .vendor(GpuVendor.NVIDIA).name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:0" + i + ":00.0").build());
        }
        SimulatedGpuInventory inventory = b.build();
        // GPU 0: the trainer at 70 %; GPU 1: a notebook kernel holding the GPU at 0 %
        inventory.setProcessTraces(0, Map.of(4101, UsageTrace.of(STEP, 70)));
        inventory.setProcessTraces(1, Map.of(4201, UsageTrace.of(STEP, 0)));
        Path podResources = Files.createDirectories(dir.resolve("pod-resources"));
        Files.setPosixFilePermissions(podResources, PosixFilePermissions.fromString("rwxr-x---"));
        try (PodResourcesStandIn kubelet = new PodResourcesStandIn(podResources);
             PodResourcesAttribution pods = PodResourcesAttribution.open(podResources, Duration.ofSeconds(10),
                     clock);
             GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).clock(clock)
                     .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            kubelet.set(pod("ml", "train-0", "trainer", "nvidia.com/gpu", inventory.devices().get(0).uuid()),
                    pod("ml", "notebook-3", "kernel", "nvidia.com/gpu", inventory.devices().get(1).uuid()));
            ProcessAttribution chain = AllocationAttribution.host().orElse(pods);
            try (AccountingSampler sampler = AccountingSampler.open(AccountingStore.at(dir.resolve("state")),
                    AccountingSettings.defaults().withAttribution(List.of("kubernetes")), inventory,
                    chain, new HostIdleEffects(scheduler), clock).orElseThrow()) {
                sampler.sweep(inventory.sample(), scheduler.allocations());
                for (int i = 0; i < 30; i++) {
                    if (i == 12) {
                        kubelet.restart(); // the socket removed and served anew: followed at the next refresh
                    }
                    clock.advance(STEP);
                    sampler.sweep(inventory.sample(), scheduler.allocations());
                }
            }
        }
        UsageReport r = UsageReport.of(AccountingStore.at(dir.resolve("state")), Instant.parse(
                "2026-03-02T09:00:00Z"), Instant.parse("2026-03-02T11:00:00Z"), UsageReport.GroupBy.POD);
        Map<String, UsageReport.Row> rows = new HashMap<>();
        r.rows().forEach(x -> rows.put(x.key(), x));
        assertThat(rows.keySet()).as(ReportViews.text(r)).containsExactlyInAnyOrder("ml/train-0", "ml/notebook-3");
        UsageReport.Row train = rows.get("ml/train-0");
        assertThat(train.owner()).contains("ml");
        assertThat(train.figures().heldMillis()).as("5 minutes of sweeps").isEqualTo(300_000);
        assertThat(train.figures().meanUtilization().getAsDouble()).isEqualTo(70.0);
        assertThat(train.figures().energyEstimated()).as("its GPU's counter, all its own").isFalse();
        assertThat(rows.get("ml/notebook-3").figures().idleFraction().getAsDouble()).isEqualTo(1.0);
        assertThat(ReportViews.text(r)).contains("ml/train-0 ml").contains("ml/notebook-3 ml");
    }
}
