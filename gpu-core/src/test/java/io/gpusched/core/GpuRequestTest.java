package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

class GpuRequestTest {

    @Test
    void defaultsToOneExclusiveGpu() {
        GpuRequest r = GpuRequest.builder().build();
        assertThat(r.count()).isEqualTo(1);
        assertThat(r.sharing()).isEqualTo(SharingMode.EXCLUSIVE);
        assertThat(r.isExplicit()).isFalse();
    }

    @Test
    void countFollowsExplicitDevices() {
        assertThat(GpuRequest.builder().deviceIndices(0, 2, 3).build().count()).isEqualTo(3);
        assertThat(GpuRequest.builder().deviceUuids(List.of("GPU-a", "GPU-b")).build().count()).isEqualTo(2);
    }

    @Test
    void rejectsContradictions() {
        assertThatThrownBy(() -> GpuRequest.builder().count(2).deviceIndices(0, 1, 2).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("count 2 contradicts the 3 explicit devices");
        assertThatThrownBy(() -> GpuRequest.builder().deviceIndices(0).deviceUuids(List.of("GPU-a")).build())
                .hasMessageContaining("not both");
        assertThatThrownBy(() -> GpuRequest.builder().deviceIndices(1, 1).build())
                .hasMessageContaining("twice");
        assertThatThrownBy(() -> new GpuRequest(1, Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.empty(), List.of(), List.of(), SharingMode.SHARED, Optional.empty(), Optional.empty(),
                Optional.empty(), Map.of(), Optional.empty(), java.util.OptionalInt.empty(), Optional.empty(),
                List.of(),
                Optional.empty()))
                .hasMessageContaining("needs a memory reservation");
        assertThatThrownBy(() -> new GpuRequest(1, Optional.empty(), Optional.empty(), Optional.empty(),
                Optional.empty(), List.of(), List.of(), SharingMode.EXCLUSIVE, Optional.of(MemorySize.ofGibibytes(1)),
                Optional.empty(), Optional.empty(), Map.of(), Optional.empty(), java.util.OptionalInt.empty(),
                Optional.empty(), List.of(), Optional.empty())).hasMessageContaining("only applies to SHARED");
        assertThatThrownBy(() -> GpuRequest.builder().shared(MemorySize.ZERO).build())
                .hasMessageContaining("more than 0");
        assertThatThrownBy(() -> GpuRequest.builder().shared(MemorySize.ofGibibytes(1)).exclusive())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("already set to SHARED");
        assertThatThrownBy(() -> GpuRequest.builder().count(0)).hasMessageContaining("at least 1");
        assertThatThrownBy(() -> GpuRequest.builder().count(1).count(2)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> GpuRequest.builder().modelPattern(" ").build()).hasMessageContaining("blank");
        assertThatThrownBy(() -> GpuRequest.builder().owner(" ")).hasMessageContaining("owner");
    }

    @Test
    void modelPatternIsACaseInsensitiveGlob() {
        GpuRequest r = GpuRequest.builder().modelPattern("*a100*").build();
        assertThat(r.matchesModel("NVIDIA A100-SXM4-80GB")).isTrue();
        assertThat(r.matchesModel("Tesla V100-SXM2-32GB")).isFalse();
        GpuRequest dot = GpuRequest.builder().modelPattern("NVIDIA A1?").build();
        assertThat(dot.matchesModel("NVIDIA A10")).isTrue();
        assertThat(dot.matchesModel("NVIDIA A100")).isFalse();
        GpuRequest literal = GpuRequest.builder().modelPattern("(x)+").build();
        assertThat(literal.matchesModel("(x)+")).isTrue();
        assertThat(literal.matchesModel("xx")).isFalse();
    }

    @Test
    void describeSaysWhatWasAsked() {
        GpuRequest r = GpuRequest.builder().count(2).minMemory(MemorySize.parse("40GB"))
                .minComputeCapability(ComputeCapability.parse("8.0")).build();
        assertThat(r.describe()).isEqualTo("2 GPUs (>= 40 GiB, compute capability >= 8.0)");
    }

    @Property(tries = 300)
    void builtRequestsAreConsistent(@ForAll("requests") GpuRequest r) {
        assertThat(r.count()).isPositive();
        if (r.isExplicit()) {
            assertThat(Math.max(r.deviceIndices().size(), r.deviceUuids().size())).isEqualTo(r.count());
        }
        assertThat(r.sharing() == SharingMode.SHARED).isEqualTo(r.sharedMemory().isPresent());
    }

    @Provide
    Arbitrary<GpuRequest> requests() {
        return Arbitraries.integers().between(1, 8).flatMap(n -> Arbitraries.integers().between(0, 3).map(kind -> {
            GpuRequest.Builder b = GpuRequest.builder();
            switch (kind) {
                case 0 -> b.count(n);
                case 1 -> b.deviceIndices(java.util.stream.IntStream.range(0, n).boxed().toList());
                case 2 -> b.count(n).shared(MemorySize.ofGibibytes(n));
                default -> b.count(n).minMemory(MemorySize.ofGibibytes(n * 4L));
            }
            return b.build();
        }));
    }
}
