package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link Allocation#deviceUuids()} and {@link Allocation#deviceIndices()} lost their streams for speed. They must still
 * answer as the lists they were: immutable, in allocation order, and safe to ask {@code contains(null)} (a host that
 * looks up a UUID in a map and asks "is it in this allocation?" with a miss). {@code List.of} throws there.
 */
@Tag("adversarial")
class AllocationListsAttackTest {

    @Test
    void deviceListsAnswerNullQueriesAndStayImmutable() {
        try (GpuScheduler s = GpuScheduler.builder().inventory(Node.uniform(4)).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            Allocation a = s.allocate(GpuRequest.builder().deviceIndices(2, 0).build());
            assertThat(a.deviceIndices()).containsExactly(2, 0);
            assertThat(a.deviceUuids()).containsExactly("GPU-hp-2", "GPU-hp-0");
            Map<String, String> uuidByHost = Map.of("known", "GPU-hp-2");
            assertThat(a.deviceUuids().contains(uuidByHost.get("unknown"))).isFalse();
            assertThat(a.deviceUuids().indexOf(null)).isEqualTo(-1);
            assertThat(a.deviceIndices().contains(null)).isFalse();
            assertThat(a.deviceIndices().lastIndexOf(null)).isEqualTo(-1);
            assertThatThrownBy(() -> a.deviceUuids().add("x")).isInstanceOf(UnsupportedOperationException.class);
            assertThatThrownBy(() -> a.deviceIndices().set(0, 3)).isInstanceOf(UnsupportedOperationException.class);
            assertThat(a.deviceIndices()).isEqualTo(List.of(2, 0)).hasSameHashCodeAs(List.of(2, 0));
        }
    }
}
