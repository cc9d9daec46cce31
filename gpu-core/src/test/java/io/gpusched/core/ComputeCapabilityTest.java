package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ComputeCapabilityTest {

    @Test
    void parsesDottedAndCompilerForms() {
        assertThat(ComputeCapability.parse("8.6")).isEqualTo(new ComputeCapability(8, 6));
        assertThat(ComputeCapability.parse(" 10.0 ")).isEqualTo(new ComputeCapability(10, 0));
        assertThat(ComputeCapability.parse("sm_86")).isEqualTo(new ComputeCapability(8, 6));
        assertThat(ComputeCapability.parse("compute_90")).isEqualTo(new ComputeCapability(9, 0));
        assertThat(ComputeCapability.parse("sm_100")).isEqualTo(new ComputeCapability(10, 0));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "8", "8.", ".6", "8.10", "x.y", "sm_8", "0.5", "8,6"})
    void rejectsOtherForms(String text) {
        assertThatThrownBy(() -> ComputeCapability.parse(text)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("compute capability");
    }

    @Test
    void ordersByMajorThenMinor() {
        assertThat(ComputeCapability.parse("8.6")).isGreaterThan(ComputeCapability.parse("8.0"));
        assertThat(ComputeCapability.parse("9.0")).isGreaterThan(ComputeCapability.parse("8.9"));
        assertThat(ComputeCapability.parse("7.0").isAtLeast(ComputeCapability.parse("7.0"))).isTrue();
    }

    @Property
    void roundTrips(@ForAll @IntRange(min = 1, max = 99) int major, @ForAll @IntRange(max = 9) int minor) {
        ComputeCapability cc = new ComputeCapability(major, minor);
        assertThat(ComputeCapability.parse(cc.toString())).isEqualTo(cc);
    }
}
