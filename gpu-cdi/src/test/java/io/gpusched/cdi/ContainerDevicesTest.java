package io.gpusched.cdi;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * For allocations on every test node: the CDI names are names of the node's spec, the flags name exactly the
 * allocation's GPU nodes and the control nodes (never another GPU's), the env names the allocation's UUIDs.
 */
class ContainerDevicesTest {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @MethodSource("io.gpusched.cdi.CdiTestNodes#names")
    void flagsNamesAndEnvAreTheAllocations(String node) throws Exception {
        Path dev = CdiTestNodes.dev(tmp);
        try (GpuInventory inv = CdiTestNodes.open(node);
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).build()) {
            CdiOptions o = CdiOptions.defaults().withDevRoot(dev).withProcRoot(CdiTestNodes.proc(inv));
            CdiSpec spec = CdiSpec.of(inv, o).get(0);
            for (int count = 1; count <= Math.min(3, inv.devices().size()); count++) {
                Allocation a = s.allocate(GpuRequest.builder().count(count).build());
                ContainerDevices c = ContainerDevices.of(a, inv.devices(), o);
                assertThat(c.cdiNames()).hasSize(count).allSatisfy(n -> {
                    assertThat(n).startsWith(spec.kind() + "=");
                    assertThat(spec.deviceNames()).contains(n.substring(n.indexOf('=') + 1));
                });
                List<String> devFlags = c.dockerArgs().stream().filter(x -> x.startsWith("--device=")).toList();
                String uuids = String.join(",", a.deviceUuids());
                if (spec.kind().equals(CdiOptions.NVIDIA_KIND)) {
                    assertThat(c.environment()).containsEntry("CUDA_VISIBLE_DEVICES", uuids)
                            .containsEntry("NVIDIA_VISIBLE_DEVICES", uuids);
                    assertThat(devFlags).anySatisfy(f -> assertThat(f).endsWith(":/dev/nvidiactl"));
                    for (var d : a.devices()) {
                        assertThat(devFlags).contains("--device=" + dev + "/nvidia" + d.minor().getAsInt()
                                + ":/dev/nvidia" + d.minor().getAsInt());
                    }
                    long gpuNodes = devFlags.stream().filter(f -> f.matches(".*:/dev/nvidia[0-9]+$")).count();
                    assertThat(gpuNodes).isEqualTo(a.devices().stream().map(d -> d.minor().getAsInt()).distinct()
                            .count());
                } else {
                    assertThat(devFlags).anySatisfy(f -> assertThat(f).endsWith(":/dev/kfd"));
                    for (var d : a.devices()) {
                        assertThat(devFlags).contains("--device=" + dev + "/dri/renderD" + d.minor().getAsInt()
                                + ":/dev/dri/renderD" + d.minor().getAsInt());
                    }
                }
                List<String> cdiArgs = new ArrayList<>();
                c.cdiNames().forEach(n -> cdiArgs.addAll(List.of("--device", n)));
                c.environment().forEach((k, v) -> cdiArgs.addAll(List.of("-e", k + "=" + v)));
                assertThat(c.cdiArgs()).isEqualTo(cdiArgs);
                s.release(a.id());
            }
        }
    }
}
