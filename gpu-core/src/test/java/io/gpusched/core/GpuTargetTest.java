package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Optional;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.constraints.UniqueElements;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class GpuTargetTest {

    @Test
    void parsesHostAndIndices() {
        assertThat(GpuTarget.parse("node1::0,2,3")).isEqualTo(new GpuTarget(Optional.of("node1"), List.of(0, 2, 3)));
        assertThat(GpuTarget.parse("node1")).isEqualTo(new GpuTarget(Optional.of("node1"), List.of()));
        assertThat(GpuTarget.parse("::1")).isEqualTo(new GpuTarget(Optional.empty(), List.of(1)));
        assertThat(GpuTarget.parse("gpu-07.rack2.example::4, 5")).isEqualTo(
                new GpuTarget(Optional.of("gpu-07.rack2.example"), List.of(4, 5)));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "::", "node1::", "node1::a", "node1::1,,2", "node1::1,1", "node1::-1", "-node::1",
        "no de::1", "node1:0", "node1::0;1"})
    void rejectsMalformedTargets(String text) {
        assertThatThrownBy(() -> GpuTarget.parse(text)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("target");
    }

    @Property
    void roundTrips(@ForAll("hosts") String host,
            @ForAll @Size(min = 1, max = 16) @UniqueElements List<@IntRange(max = 4096) Integer> indices) {
        GpuTarget t = new GpuTarget(Optional.of(host), indices);
        assertThat(GpuTarget.parse(t.toString())).isEqualTo(t);
    }

    @Property(tries = 2000)
    void garbageFailsOnlyWithIllegalArgument(@ForAll("garbage") String text) {
        try {
            GpuTarget t = GpuTarget.parse(text);
            assertThat(t.host().isPresent() || !t.indices().isEmpty()).isTrue();
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage()).contains("\"");
        }
    }

    @Provide
    Arbitrary<String> hosts() {
        return Arbitraries.strings().withChars("abcxyz019.-").ofMinLength(1).ofMaxLength(12)
                .filter(s -> Character.isLetterOrDigit(s.charAt(0)));
    }

    @Provide
    Arbitrary<String> garbage() {
        return Arbitraries.oneOf(Arbitraries.strings().ofMaxLength(20),
                Arbitraries.strings().withChars("node1:,0123 -").ofMaxLength(20));
    }
}
