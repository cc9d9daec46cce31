package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class GpuRequestsTest {

    @Test
    void parsesCliFlags() {
        GpuRequest r = GpuRequests.fromCliFlags("--gpu=2", "--gpu-memory=8GB", "--min-cc", "8.0", "--vendor=nvidia",
                "--model=*A100*", "--owner=alice", "--job", "train-42", "--label=team=vision");
        assertThat(r.count()).isEqualTo(2);
        assertThat(r.minMemory()).contains(MemorySize.ofGibibytes(8));
        assertThat(r.minComputeCapability()).contains(new ComputeCapability(8, 0));
        assertThat(r.vendor()).contains(GpuVendor.NVIDIA);
        assertThat(r.modelPattern()).contains("*A100*");
        assertThat(r.owner()).contains("alice");
        assertThat(r.jobId()).contains("train-42");
        assertThat(r.labels()).containsEntry("team", "vision");
    }

    @Test
    void targetSetsExplicitIndicesAndKeepsTheHost() {
        GpuRequest r = GpuRequests.fromCliFlags("--target=node1::0,2");
        assertThat(r.deviceIndices()).containsExactly(0, 2);
        assertThat(r.count()).isEqualTo(2);
        assertThat(r.labels()).containsEntry(GpuRequests.TARGET_HOST_LABEL, "node1");
    }

    @Test
    void leaseFlag() {
        assertThat(GpuRequests.fromCliFlags("--lease=2h").maxDuration()).contains(java.time.Duration.ofHours(2));
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--lease=soon"))
                .hasMessageContaining("flag --lease=soon: invalid duration \"soon\"").hasMessageContaining("\"5m\"");
    }

    @Test
    void sharedFlag() {
        GpuRequest r = GpuRequests.fromCliFlags("--gpu=1", "--shared=4GB");
        assertThat(r.sharing()).isEqualTo(SharingMode.SHARED);
        assertThat(r.sharedMemory()).contains(MemorySize.ofGibibytes(4));
    }

    @Test
    void cliErrorsNameTheFlag() {
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpus-per-node=2"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unknown flag \"--gpus-per-node\"")
                .hasMessageContaining("--gpu-memory");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu=two"))
                .hasMessageContaining("--gpu=two").hasMessageContaining("whole number");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu=0")).hasMessageContaining(">= 1");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu-memory")).hasMessageContaining("needs a value");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu=1", "--gpu=2")).hasMessageContaining("given twice");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("2")).hasMessageContaining("unexpected argument");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu=1", "--devices=0,1"))
                .hasMessageContaining("contradicts");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--label=novalue")).hasMessageContaining("KEY=VALUE");
    }

    @Test
    void parsesWorkflowResources() {
        Map<String, Object> res = new LinkedHashMap<>();
        res.put("cpu", 4);
        res.put("memory", "16Gi");
        res.put("gpu_count", 2);
        res.put("gpu_memory_mb", 8192);
        Optional<GpuRequest> r = GpuRequests.fromResources(res);
        assertThat(r).isPresent();
        assertThat(r.get().count()).isEqualTo(2);
        assertThat(r.get().minMemory()).contains(MemorySize.ofGibibytes(8));
    }

    @Test
    void resourcesWithoutGpusAskForNone() {
        assertThat(GpuRequests.fromResources(Map.of("cpu", 2))).isEmpty();
        assertThat(GpuRequests.fromResources(Map.of("gpu_count", 0))).isEmpty();
        assertThat(GpuRequests.fromResources(Map.of("gpu_count", "1"))).isPresent();
    }

    @Test
    void resourceErrorsNameTheKey() {
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_cnt", 1)))
                .hasMessageContaining("unknown GPU resource key \"resources.gpu_cnt\"")
                .hasMessageContaining("gpu_count");
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_count", -1)))
                .hasMessageContaining("resources.gpu_count");
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_count", 1.5)))
                .hasMessageContaining("resources.gpu_count");
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_count", 1, "gpu_memory_mb", "8GB")))
                .hasMessageContaining("resources.gpu_memory_mb");
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_memory_mb", 1024)))
                .hasMessageContaining("gpu_count");
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_count", 1, "gpu_memory", "lots")))
                .hasMessageContaining("resources.gpu_memory");
        assertThatThrownBy(() -> GpuRequests.fromResources(Map.of("gpu_count", 1, "gpu_memory", "1G",
                "gpu_memory_mb", 1))).hasMessageContaining("not both");
    }

    @Property
    void cliRoundTripOfCountAndMemory(@ForAll @IntRange(min = 1, max = 64) int count,
            @ForAll @IntRange(min = 1, max = 1 << 20) int mib) {
        GpuRequest r = GpuRequests.fromCliFlags("--gpu=" + count, "--gpu-memory=" + MemorySize.ofMebibytes(mib));
        assertThat(r.count()).isEqualTo(count);
        assertThat(r.minMemory()).contains(MemorySize.ofMebibytes(mib));
        Optional<GpuRequest> w = GpuRequests.fromResources(Map.of("gpu_count", count, "gpu_memory_mb", mib));
        assertThat(w).contains(r);
    }

    @Property(tries = 2000)
    void garbageFlagsFailOnlyWithIllegalArgument(@ForAll("flags") List<String> args) {
        try {
            assertThat(GpuRequests.fromCliFlags(args).count()).isPositive();
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage()).isNotBlank();
        }
    }

    @Property(tries = 1000)
    void garbageResourcesFailOnlyWithIllegalArgument(@ForAll("resources") Map<String, Object> res) {
        try {
            GpuRequests.fromResources(res).ifPresent(r -> assertThat(r.count()).isPositive());
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage()).contains("resources");
        }
    }

    @Provide
    Arbitrary<List<String>> flags() {
        Arbitrary<String> flag = Arbitraries.of("--gpu", "--gpus", "--gpu-memory", "--min-cc", "--vendor", "--model",
                "--devices", "--uuids", "--target", "--shared", "--owner", "--job", "--label", "--bogus", "-g");
        Arbitrary<String> value = Arbitraries.oneOf(Arbitraries.strings().ofMaxLength(8),
                Arbitraries.of("2", "8GB", "8.0", "nvidia", "0,1", "node1::0", "a=b", "0", "-1", ""));
        Arbitrary<String> arg = Arbitraries.oneOf(
                net.jqwik.api.Combinators.combine(flag, value).as((f, v) -> f + "=" + v), flag, value);
        return arg.list().ofMaxSize(6);
    }

    @Provide
    Arbitrary<Map<String, Object>> resources() {
        Arbitrary<String> key = Arbitraries.of("gpu_count", "gpu_memory_mb", "gpu_memory", "gpu_model", "gpu_vendor",
                "gpu_min_compute_capability", "gpu_shared_memory_mb", "gpu_bogus", "cpu");
        Arbitrary<Object> value = Arbitraries.oneOf(Arbitraries.integers().between(-2, 100000).map(i -> (Object) i),
                Arbitraries.strings().ofMaxLength(6).map(s -> (Object) s), Arbitraries.of((Object) 1.5, List.of(1)));
        return Arbitraries.maps(key, value).ofMaxSize(4);
    }
}
